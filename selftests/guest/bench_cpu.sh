#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Benchmark: the cost per byte of Nezha's data path against TCP itself, on
# rails that are not shaped, so that the CPU and not the wire is the limit
# (Documentation/benchmarks.rst, "CPU cost per byte").  2 guests
# (scripts/bench-cpu.sh):
#
#    nz0 (sender)  rail0 10.77.0.1 ===== bridge ===== 10.77.0.2 rail0  nz1 (receiver)
#                  rail1 10.77.1.1 ===== bridge ===== 10.77.1.2 rail1
#
#  runs, one after the other, each RUN_SECS long or so:
#   iperf1   iperf3, one TCP stream on rail0
#   iperf2   iperf3, one TCP stream on each rail at once
#   nezha1   nezha-bench p2p, SIZE-byte messages, module with rail r0 only
#   nezha1c  the same, every chunk copied into the socket (tcp_zerocopy_kb=0)
#   nezha1m  nezha1 with the per-frame MAC on r0 (frame-mac on)
#   nezha2   nezha1 with rails r0 and r1
#  then, unless --no-profile, iperf1, nezha1 and nezha2 again under perf
#  record (cpu-clock, every CPU, call graphs) on both guests: where the
#  cycles go; and, counted by a trace histogram meanwhile, which kernel
#  call stacks allocate the pages (each one zeroed).
#
# How a run is measured: each guest samples /proc/stat and its rails'
# byte counters every 200 ms for the whole run.  The steady part of the
# run -- the samples whose rate is at least half the run's peak -- gives
# the throughput (Mbit/s on the wire, the rails' tx on the sender and rx
# on the receiver) and the CPU seconds per GiB on each end (busy time of
# every CPU of the guest, idle and iowait excepted, per GiB on the wire).
# Start-up, set-up and the barriers between runs fall outside it, and
# every tool is measured the same way.
#
# With --base KO (another build of nezha.ko, on a path the guests see),
# before the profiles: nezha1 with that module and with ours in turn,
# base-ours-ours-base, and the means of ours against it -- a change judged
# in one boot, where a single run cannot tell less than about 30 %.
#
# usage: bench_cpu.sh [--secs S] [--size SIZE] [--no-profile] [--base KO]
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench_lib.sh"
set -u

SECS=${NZ_BENCH_SECS:-15}
SIZE=${NZ_BENCH_SIZE:-64M}
PROFILE=1
BASE_KO=
while [ $# -gt 0 ]; do
	case $1 in
	--secs) SECS=$2; shift ;;
	--size) SIZE=$2; shift ;;
	--no-profile) PROFILE=0 ;;
	--base) BASE_KO=$2; shift ;;
	*) echo "Bail out! bench_cpu.sh: unknown argument $1"; exit 2 ;;
	esac
	shift
done

if [ "${NZ_NODES:-0}" != 2 ] || [ "${NZ_RAILS:-0}" -lt 2 ]; then
	skip "bench_cpu" "needs 2 guests with 2 rails (vm.sh -n 2 -r 2)"
	tap_done
	exit
fi
for tool in iperf3 python3 awk; do
	command -v $tool >/dev/null || { not_ok "tool $tool present" "run scripts/setup.sh"; tap_done; exit 1; }
done
if [ $PROFILE = 1 ] && ! command -v perf >/dev/null; then
	say "perf not found (apt-get install linux-perf): no profile"
	PROFILE=0
fi

RES=$NZ_OUT/bench_cpu.results
: >"$RES"
rm -f "$NZ_OUT/insns.map" "$NZ_OUT"/kallsyms-*
record() { echo "$1=$2" >>"$RES"; }
IPERF_PORT=5201
STEP_TMO=$((SECS * 4 + 180))
size_bytes=$(numfmt --from=iec "$SIZE")
# Messages for about SECS seconds at ~2.5 Gbit/s; at least 8.
ITERS=$(((SECS * 300000000 / size_bytes) > 8 ? (SECS * 300000000 / size_bytes) : 8))

say "node $NZ_NODE: $(nproc) vCPU(s), rails ${NZ_IFS}, unshaped; $SIZE messages x $ITERS; iperf3 ${SECS} s"

# ---- the sampler --------------------------------------------------------

# rails_bytes: the bytes the rails sent and received so far, summed, into
# the caller's tx and rx (shell built-ins only: no fork).
rails_bytes() {
	local ifc v
	tx=0 rx=0
	for ifc in "${nz_ifs[@]}"; do
		read -r v <"/sys/class/net/$ifc/statistics/tx_bytes"; tx=$((tx + v))
		read -r v <"/sys/class/net/$ifc/statistics/rx_bytes"; rx=$((rx + v))
	done
}

# sampler FILE: every 200 ms, "uptime_cs busy_ticks tx_bytes rx_bytes"
# (ticks of USER_HZ, bytes summed over the rails), until killed.  Only
# shell built-ins in the loop, so that it costs next to nothing.
sampler() {
	local out=$1 up us ni sy id io irq si st busy tx rx fifo
	fifo=$(mktemp -u) && mkfifo "$fifo" && exec 7<>"$fifo" && rm -f "$fifo"
	while :; do
		read -r up _ </proc/uptime
		read -r _ us ni sy id io irq si st _ </proc/stat
		busy=$((us + ni + sy + irq + si + st))
		rails_bytes
		echo "${up/./} $busy $tx $rx" >>"$out"
		read -r -t 0.2 -u 7 _
	done
}

# steady FILE DIR: "mbit cpu_s_per_gib secs" over the steady part of a
# run, DIR tx (sender) or rx (receiver); nothing when the run moved
# nothing.  Steady: from 1 s after the first sample that carried a tenth
# of the peak rate to 1 s before the last one (start-up and the tail
# left out, dips in the middle kept).
steady() {
	awk -v dir="$2" -v hz="$(getconf CLK_TCK)" '
	NR > 1 {
		n++; T[n] = ($1 - t0) / 100; B[n] = (dir == "tx" ? $3 - tx0 : $4 - rx0)
		C[n] = $2 - c0; E[n] = $1 / 100
		if (T[n] > 0 && B[n] / T[n] > peak) peak = B[n] / T[n]
	}
	{ t0 = $1; c0 = $2; tx0 = $3; rx0 = $4 }
	END {
		for (i = 1; i <= n; i++)
			if (T[i] > 0 && B[i] / T[i] >= peak / 10) { if (!first) first = E[i]; last = E[i] }
		for (i = 1; i <= n; i++)
			if (E[i] - T[i] >= first + 1 && E[i] <= last - 1) { t += T[i]; b += B[i]; c += C[i] }
		if (b > 0 && t > 0)
			printf "%.0f %.3f %.1f\n", b * 8 / t / 1e6, (c / hz) / (b / 2^30), t
	}' "$1"
}

# With the instruction-counting plugin (vm.sh -P, NZ_INSNS=1): a marker
# (nz_mark) at both ends of every measured run; the plugin writes the
# guest instructions executed between the two to OUTDIR/guestG.insns.N.
# insns.map says which N is which run and how many bytes the rails sent
# and received meanwhile; kallsyms-NAME keeps the kernel's text symbols
# of that run (the module's addresses change with every insmod), for
# scripts/insn-profile.py.
MARKS=0 MARK_TX=0 MARK_RX=0
insn_mark() {	# insn_mark [NAME]: a marker; NAME: the end of that run
	local tx rx
	[ "${NZ_INSNS:-0}" = 1 ] || return 0
	"$NZ_BIN/guest/nz_mark"
	MARKS=$((MARKS + 1))
	rails_bytes
	[ -z "${1:-}" ] ||
		echo "$MARKS $1 $((tx - MARK_TX)) $((rx - MARK_RX))" >>"$NZ_OUT/insns.map"
	MARK_TX=$tx MARK_RX=$rx
	[ -n "${1:-}" ] || return 0
	grep ' [tT] ' /proc/kallsyms >"$NZ_OUT/kallsyms-$1"
}

# measure NAME CMD...: run CMD with the sampler on, on both guests
# (barriers before and after); records NAME_mbit, NAME_tx_cpu (sender's
# s/GiB) and NAME_rx_cpu (receiver's).  CMD runs on both guests (each
# decides what to do from NZ_NODE).
measure() {
	local name=$1 f=$NZ_OUT/samples-$1 pid rc v mine other
	shift
	barrier "$name-start" "$STEP_TMO" || return 1
	: >"$f"
	sampler "$f" &
	pid=$!
	insn_mark
	"$@"
	rc=$?
	insn_mark "$name"
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	if [ "$NZ_NODE" = 0 ]; then mine=tx; else mine=rx; fi
	v=$(steady "$f" $mine)
	echo "$v" >"$NZ_OUT/steady-$name-$mine"
	say "$name: node $NZ_NODE ($mine): ${v:-no traffic} (Mbit/s, CPU s/GiB, steady s)"
	barrier "$name-end" "$STEP_TMO" $([ $rc = 0 ] && echo ok || echo fail) || return 1
	[ "$NZ_ALL_OK" = 1 ] || say "$name: a guest's command failed"
	return 0
}

# share NAME: node 1 hands its steady line for NAME to node 0 (TCP, one line).
share() {
	local name=$1 port=$((NZ_BAR_PORT + 500)) line
	if [ "$NZ_NODE" = 1 ]; then
		line=$(cat "$NZ_OUT/steady-$name-rx" 2>/dev/null)
		timeout 30 bash -c 'for i in $(seq 100); do
			exec 3<>"/dev/tcp/$0/$1" 2>/dev/null && { echo "$2" >&3; exit 0; }
			sleep 0.2; done; exit 1' "$NZ_BAR_ADDR" "$port" "${line:-none}"
	else
		timeout 30 python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); s.settimeout(28)
c, _ = s.accept(); print(c.makefile().readline().strip())' "$NZ_BAR_ADDR" "$port" \
			>"$NZ_OUT/steady-$name-rx"
	fi
}

run_iperf() {	# run_iperf RAILS: node 0 sends one stream per rail for SECS
	local r pids=() rc=0
	[ "$NZ_NODE" = 0 ] || { sleep $((SECS + 3)); return 0; }
	for ((r = 0; r < $1; r++)); do
		timeout $((SECS + 40)) iperf3 -c "$(rail_addr 1 $r)" -B "$(rail_addr 0 $r)" \
			-p $((IPERF_PORT + r)) -t "$SECS" -f m --connect-timeout 5000 \
			>"$NZ_OUT/iperf$1-rail$r.txt" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	return $rc
}

run_nezha() {	# run_nezha NAME [ITERS]: nezha-bench p2p between the guests
	local st=/sys/class/nezha/nezha/stats um ub tx rx rx0 rc
	um=$(cat $st/msgs_unexpected 2>/dev/null || echo 0)
	ub=$(cat $st/bytes_unexpected 2>/dev/null || echo 0)
	rails_bytes
	rx0=$rx
	nezha_bench "$NZ_OUT/$1.txt" $((STEP_TMO - 30)) -b "$SIZE" -e "$SIZE" \
		-n "${2:-$ITERS}" -w 2 -m bw
	rc=$?
	# The receiver's messages that came before their receive was posted:
	# each costs a kernel buffer of its size and a second copy (issue 22).
	if [ "$NZ_NODE" = 1 ]; then
		rails_bytes
		um=$(($(cat $st/msgs_unexpected 2>/dev/null || echo 0) - um))
		ub=$(($(cat $st/bytes_unexpected 2>/dev/null || echo 0) - ub))
		say "$1: $um messages came before their receive, $((ub >> 20)) MiB of $(((rx - rx0) >> 20)) MiB received on the rails"
	fi
	return $rc
}

# nezha_rails N [KO [ARGS...]]: the module (KO, else ours; "" is ours),
# rails r0..r(N-1), each added with ARGS too.
nezha_rails() {
	local r n=$1 ko=${2:-} ctl=$NZ_BIN/tools/nezhactl
	shift $(($# < 2 ? $# : 2))
	rmmod nezha 2>/dev/null
	# shellcheck disable=SC2086  # NZ_MODULE_PARAMS: words, from vm.sh
	insmod "${ko:-$NZ_KO}" ${NZ_MODULE_PARAMS:-} || return 1
	for ((r = 0; r < n; r++)); do
		timeout 30 "$ctl" rail add "r$r" proto tcp dev "${nz_ifs[r]}" "$@" || return 1
	done
}

# Who allocates the pages (Debian's kernel zeroes every page it hands out,
# init_on_alloc: the receiver zeroes 17-36 % more pages per GiB than
# iperf3's, issue 22).  perf's samples are no use here (under TCG they land
# in the idle loop), so count the allocations themselves: a histogram
# trigger on kmem:mm_page_alloc keyed by kernel call stack, armed for the
# profile's window.
pa_trig=/sys/kernel/tracing/events/kmem/mm_page_alloc/trigger
[ -e $pa_trig ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
[ -w $pa_trig ] || pa_trig=
pa_spec='hist:keys=stacktrace:vals=hitcount:sort=hitcount.descending:size=4096'
pa_arm() {
	local tx rx
	[ -n "$pa_trig" ] || return 0
	echo "$pa_spec" >$pa_trig 2>/dev/null
	rails_bytes
	pa_rx0=$rx
}
pa_disarm() {
	local tx rx
	[ -n "$pa_trig" ] || return 0
	rails_bytes
	pa_bytes=$((rx - pa_rx0))
	cp "${pa_trig%/trigger}/hist" "$NZ_OUT/page-allocs.hist"
	echo "!$pa_spec" >$pa_trig 2>/dev/null
}
# pa_report FILE: the 6 commonest stacks, one line each (hits, then the
# frames innermost first, offsets dropped), all of them into FILE.
pa_report() {
	awk '
	/^\{ stacktrace:/ { st = ""; n = 0; next }
	/^ +[^ ]+\+0x/ && n < 14 { f = $1; sub(/\+0x.*/, "", f); st = st (n++ ? " < " : "") f; next }
	/hitcount:/ { for (i = 1; i <= NF; i++) if ($i == "hitcount:") print $(i + 1) "\t" st }
	' "$NZ_OUT/page-allocs.hist" >"$1"
	awk -F '\t' -v b="$pa_bytes" '{ t += $1 } END {
		printf "%d allocations in all, %d MiB received: %.0f per GiB\n", t, b / 1048576, (b > 0 ? t * 1073741824 / b : 0) }' "$1"
	head -n 6 "$1"
}

# profile NAME SECS CMD...: CMD, and from 3 s into it SECS seconds of
# perf record on every CPU of this guest; then the top symbols (self time)
# into NAME.perf.txt and as comments.  perf costs the guests much of their
# speed, so these runs are separate from the measured ones.
profile() {
	local name=$1 secs=$2 data=$NZ_OUT/$1.perf.data rc cmd_pid
	shift 2
	"$@" &
	cmd_pid=$!
	sleep 3
	pa_arm
	perf record -q -a -g -e cpu-clock -F 499 -o "$data" -- sleep "$secs" \
		>/dev/null 2>"$NZ_OUT/$name.perf.err"
	pa_disarm
	wait "$cmd_pid"
	rc=$?
	perf report -i "$data" --stdio --no-children --sort sym -g none \
		--percent-limit 0.7 2>/dev/null | grep -v '^$' >"$NZ_OUT/$name.perf.txt"
	perf report -i "$data" --stdio --no-children --sort dso -g none \
		--percent-limit 1 2>/dev/null | grep -v '^#' | grep -v '^$' >"$NZ_OUT/$name.perf-dso.txt"
	say "profile of $name on node $NZ_NODE, $(grep -m1 '^# Samples' "$NZ_OUT/$name.perf.txt" | sed 's/^# //'), self time by symbol:"
	grep -v '^#' "$NZ_OUT/$name.perf.txt" | head -n 25 | comment
	say "... by object:"
	head -n 8 "$NZ_OUT/$name.perf-dso.txt" | comment
	if [ -n "$pa_trig" ]; then
		say "... page allocations by call stack (each zeroes its pages), the 6 commonest:"
		pa_report "$NZ_OUT/$name.page-allocs.txt" | comment
	fi
	rm -f "$data"
	return $rc
}

# ---- 1. plain TCP -------------------------------------------------------
srv=()
if [ "$NZ_NODE" = 1 ]; then
	for ((r = 0; r < 2; r++)); do
		iperf3 -s -B "$(rail_addr 1 $r)" -p $((IPERF_PORT + r)) >/dev/null 2>&1 &
		srv+=($!)
	done
	sleep 1
fi
measure iperf1 run_iperf 1 && share iperf1
measure iperf2 run_iperf 2 && share iperf2
# iperf3's own profile, one rail, to hold Nezha's against (section 3).
[ $PROFILE = 0 ] || SECS=26 profile iperf1 20 run_iperf 1
for p in "${srv[@]}"; do kill "$p" 2>/dev/null; done
wait 2>/dev/null

# ---- 2. Nezha -------------------------------------------------------------
st=ok
nezha_rails 1 || st=fail
barrier nezha1-up 120 $st || { not_ok "barrier nezha1-up"; tap_done; exit 1; }
[ "$NZ_ALL_OK" = 1 ] && ok "nezha.ko with one rail on both guests" ||
	not_ok "nezha.ko with one rail on both guests"
NZ_MASTER_PORT=29501 measure nezha1 run_nezha nezha1 && share nezha1
# The same module copying every chunk, as it did before it sent from the
# user's pages: what zero-copy saves, in this boot.
zc_param=/sys/module/nezha/parameters/tcp_zerocopy_kb
zc_was=$(cat $zc_param 2>/dev/null)
echo 0 >$zc_param 2>/dev/null
NZ_MASTER_PORT=29503 measure nezha1c run_nezha nezha1c && share nezha1c
[ -z "$zc_was" ] || echo "$zc_was" >$zc_param
# The per-frame MAC: BLAKE2s over every byte, both ends.
st=ok
nezha_rails 1 "" frame-mac on || st=fail
barrier nezha1m-up 120 $st || { not_ok "barrier nezha1m-up"; tap_done; exit 1; }
[ "$NZ_ALL_OK" = 1 ] && ok "nezha.ko with one frame-mac rail on both guests" ||
	not_ok "nezha.ko with one frame-mac rail on both guests"
NZ_MASTER_PORT=29504 measure nezha1m run_nezha nezha1m && share nezha1m
st=ok
nezha_rails 2 || st=fail
barrier nezha2-up 120 $st || { not_ok "barrier nezha2-up"; tap_done; exit 1; }
[ "$NZ_ALL_OK" = 1 ] && ok "nezha.ko with two rails on both guests" ||
	not_ok "nezha.ko with two rails on both guests"
NZ_MASTER_PORT=29502 measure nezha2 run_nezha nezha2 && share nezha2

# ---- 2b. against a base module ----------------------------------------------
AB_RUNS="base-a ours-a ours-b base-b"
if [ -n "$BASE_KO" ]; then
	port=29520
	for n in $AB_RUNS; do
		st=ok
		case $n in
		base-*) nezha_rails 1 "$BASE_KO" || st=fail ;;
		ours-*) nezha_rails 1 || st=fail ;;
		esac
		barrier "ab-$n-up" 120 $st || { not_ok "barrier ab-$n-up"; break; }
		NZ_MASTER_PORT=$port measure "ab-$n" run_nezha "ab-$n" && share "ab-$n"
		port=$((port + 1))
	done
fi

# ---- 3. profiles ------------------------------------------------------------
if [ $PROFILE = 1 ]; then
	nezha_rails 1
	barrier prof1-up 120 || true
	NZ_MASTER_PORT=29511 profile nezha1 20 run_nezha nezha1-prof $((ITERS / 2))
	nezha_rails 2
	barrier prof2-up 120 || true
	NZ_MASTER_PORT=29512 profile nezha2 20 run_nezha nezha2-prof $((ITERS / 2))
fi
rmmod nezha 2>/dev/null
barrier finished 120 || true

# ---- 4. report (node 0) -------------------------------------------------------
if [ "$NZ_NODE" = 0 ]; then
	say ""
	say "=== CPU cost per byte, unshaped rails, same guests, same boot ($(nproc) vCPU per guest) ==="
	say "$(printf '%-34s %9s %12s %12s' run Mbit/s 'tx CPU s/GiB' 'rx CPU s/GiB')"
	# row RUN KEY LABEL: RUN's steady figures, printed and recorded as KEY_*
	row() {
		local mb tc rc
		read -r mb tc _ <"$NZ_OUT/steady-$1-tx" 2>/dev/null || mb=
		read -r _ rc _ <"$NZ_OUT/steady-$1-rx" 2>/dev/null || rc=
		say "$(printf '%-34s %9s %12s %12s' "$3" "${mb:--}" "${tc:--}" "${rc:--}")"
		record "${2}_mbit" "${mb:-}"
		record "${2}_tx_cpu" "${tc:-}"
		record "${2}_rx_cpu" "${rc:-}"
	}
	for n in iperf1 iperf2 nezha1 nezha1c nezha1m nezha2; do
		case $n in
		iperf1) label="iperf3, rail0 alone" ;;
		iperf2) label="iperf3, both rails at once" ;;
		nezha1) label="Nezha p2p $SIZE, rail0 only" ;;
		nezha1c) label="the same, copying (zerocopy off)" ;;
		nezha1m) label="the same, per-frame MAC (frame-mac)" ;;
		nezha2) label="Nezha p2p $SIZE, both rails" ;;
		esac
		row "$n" "$n" "$label"
	done
	get() { awk -F= -v k="$1" '$1 == k { print $2 }' "$RES"; }
	ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b }'; }
	r1=$(ratio "$(get nezha1_mbit)" "$(get iperf1_mbit)")
	r2=$(ratio "$(get nezha2_mbit)" "$(get iperf2_mbit)")
	r21=$(ratio "$(get nezha2_mbit)" "$(get nezha1_mbit)")
	c1t=$(ratio "$(get nezha1_tx_cpu)" "$(get iperf1_tx_cpu)")
	c1r=$(ratio "$(get nezha1_rx_cpu)" "$(get iperf1_rx_cpu)")
	c2t=$(ratio "$(get nezha2_tx_cpu)" "$(get iperf2_tx_cpu)")
	c2r=$(ratio "$(get nezha2_rx_cpu)" "$(get iperf2_rx_cpu)")
	zct=$(ratio "$(get nezha1_tx_cpu)" "$(get nezha1c_tx_cpu)")
	mr=$(ratio "$(get nezha1m_mbit)" "$(get nezha1_mbit)")
	mct=$(ratio "$(get nezha1m_tx_cpu)" "$(get nezha1_tx_cpu)")
	mcr=$(ratio "$(get nezha1m_rx_cpu)" "$(get nezha1_rx_cpu)")
	say "ratios: 1 rail: Nezha/iperf3 ${r1:--} (CPU/GiB tx ${c1t:--}, rx ${c1r:--});" \
		"2 rails: Nezha/iperf3 ${r2:--} (CPU/GiB tx ${c2t:--}, rx ${c2r:--});" \
		"Nezha 2 rails / 1 rail ${r21:--};" \
		"zero-copy / copying, sender CPU/GiB ${zct:--};" \
		"frame-mac / none: Mbit/s ${mr:--}, CPU/GiB tx ${mct:--}, rx ${mcr:--}"
	for k in r1:nezha1_vs_iperf1 r2:nezha2_vs_iperf2 r21:nezha2_vs_nezha1 \
		 c1t:cpu1_tx c1r:cpu1_rx c2t:cpu2_tx c2r:cpu2_rx zct:zc_vs_copy_tx \
		 mr:mac_vs_none mct:mac_cpu_tx mcr:mac_cpu_rx; do
		v=${k%%:*}
		record "${k#*:}" "${!v}"
	done
	if [ -n "$BASE_KO" ]; then
		say ""
		say "=== one rail, this module against $BASE_KO, alternated ==="
		for n in $AB_RUNS; do
			row "ab-$n" "ab_$n" "$n"
		done
		mean2() { awk -v a="$(get "$1")" -v b="$(get "$2")" \
			'BEGIN { if (a != "" && b != "") printf "%.2f", (a + b) / 2 }'; }
		for q in mbit tx_cpu rx_cpu; do
			v=$(ratio "$(mean2 "ab_ours-a_$q" "ab_ours-b_$q")" \
				"$(mean2 "ab_base-a_$q" "ab_base-b_$q")")
			record "ab_ours_vs_base_$q" "$v"
			printf -v "ab_$q" %s "$v"
		done
		say "ours / base, means of 2 runs each: Mbit/s ${ab_mbit:--}," \
			"CPU/GiB tx ${ab_tx_cpu:--}, rx ${ab_rx_cpu:--}"
	fi
	# Targets of issue 22 (Documentation/benchmarks.rst): reported, and
	# checked, so that a regression shows as "not ok" (bench_lib's target).
	target "target: 1 rail, Nezha >= 0.95 x iperf3" "$r1" ">=" 0.95
	target "target: 1 rail, sender CPU/GiB <= 1.2 x iperf3's" "$c1t" "<=" 1.2
	target "target: 1 rail, receiver CPU/GiB <= 1.2 x iperf3's" "$c1r" "<=" 1.2
	target "target: 2 rails, Nezha >= 0.95 x iperf3 on both" "$r2" ">=" 0.95
	target "target: 2 rails, Nezha >= Nezha on 1 rail" "$r21" ">=" 1.0
fi
tap_done
