#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Benchmark: one Nezha transfer over a TCP rail and an RDMA rail at once,
# against each rail measured alone, in the same run on the same 2 guests
# (selftests/qemu/vm.sh -n 2 -r 2; scripts/bench-rdma.sh):
#
#    nz0 (rank 0, sender)                         nz1 (rank 1, receiver)
#    rail0 10.77.0.1 --tbf TCP_RATE-- bridge --tbf TCP_RATE-- 10.77.0.2 rail0
#    rail1 10.77.1.1 --tbf RDMA_RATE- bridge --tbf RDMA_RATE- 10.77.1.2 rail1
#      rxe0                                                       rxe0
#
#  1. Soft-RoCE on rail1, with jumbo frames (MTU 4200, an IB MTU of 4096,
#     as RoCE fabrics are set up; vm.sh's bridges carry them), rail0 (TCP)
#     at MTU 9000; each rail's ceiling unshaped: iperf3 on rail0,
#     ib_send_bw (rxe's own) on rail1;
#  2. shape rail0 to TCP_RATE (40 Mbit/s) and rail1 to RDMA_RATE (20
#     Mbit/s), below rxe's ceiling.  rxe has no congestion control: rail1's
#     queue holds what one queue pair keeps in flight (128 packets of the
#     MTU), so the
#     shaper delays instead of dropping;
#  3. each rail alone: iperf3 on rail0, ib_send_bw on rail1; both tools at
#     once (if they fall short of the shaped sum, the guests are CPU bound:
#     a warning says so); then Nezha on each rail alone (the other rail's
#     weight 0);
#  4. Nezha over both rails (weights in the ratio of the rates), SIZE
#     messages, every byte checked;
#  5. node 0 reports the figures and the ratios; the target: Nezha over both
#     >= 85% of the sum of the rails alone (iperf3 + ib_send_bw).
#
# usage: bench_rdma.sh [--tcp-rate RATE] [--rdma-rate RATE]
#                      [--mtu MTU] [--tcp-mtu MTU] [--secs S] [--size SIZE]
#                      [--iters N]
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench_lib.sh"
set -u

TCP_RATE=${NZ_TCP_RATE:-40mbit}
RDMA_RATE=${NZ_RDMA_RATE:-20mbit}
MTU=${NZ_RDMA_MTU:-4200}
TCP_MTU=${NZ_TCP_MTU:-9000}
SECS=${NZ_BENCH_SECS:-10}
SIZE=${NZ_BENCH_SIZE:-64M}
ITERS=${NZ_BENCH_ITERS:-1}
NZ_RDMA_KO=${NZ_RDMA_KO:-$NZ_TOP/nezha_rdma.ko}
while [ $# -gt 0 ]; do
	case $1 in
	--tcp-rate) TCP_RATE=$2 ;;
	--rdma-rate) RDMA_RATE=$2 ;;
	--mtu) MTU=$2 ;;
	--tcp-mtu) TCP_MTU=$2 ;;
	--secs) SECS=$2 ;;
	--size) SIZE=$2 ;;
	--iters) ITERS=$2 ;;
	*) echo "Bail out! bench_rdma.sh: unknown argument $1"; exit 2 ;;
	esac
	shift 2
done

if [ "${NZ_NODES:-0}" != 2 ] || [ "${NZ_RAILS:-0}" != 2 ]; then
	skip "bench_rdma" "needs 2 guests and 2 rails (vm.sh -n 2 -r 2)"
	tap_done
	exit
fi
for tool in iperf3 ib_send_bw tc rdma; do
	command -v $tool >/dev/null || { not_ok "tool $tool present" "run scripts/setup.sh"; tap_done; exit 1; }
done

CTL=$NZ_BIN/tools/nezhactl
RES=$NZ_OUT/bench_rdma.results
: >"$RES"
record() {	# record KEY VALUE: for scripts/bench-rdma.sh's summary
	echo "$1=$2" >>"$RES"
}
mbit() {	# mbit RATE: a tc rate (kbit, mbit, gbit) in Mbit/s
	echo "$1" | awk '/^[0-9.]+(kbit|mbit|gbit)$/ { v = $0 + 0;
		if ($0 ~ /kbit/) v /= 1000; if ($0 ~ /gbit/) v *= 1000; print v }'
}
STEP_TMO=$((3 * SECS + 300))
PERF_PORT=18515

# 1. Soft-RoCE, jumbo frames if the path carries them, the ceilings.
st=ok
if [ "$MTU" != 1500 ]; then
	show_run ip link set rail1 mtu "$MTU" || st=fail
fi
show_run ip link set rail0 mtu "$TCP_MTU" || st=fail
show_run modprobe -a rdma_rxe rdma_cm ib_uverbs rdma_ucm || st=fail
# Retried: right after rdma_rxe loads, rdma link add can fail once.
for try in 1 2 3 4 5; do
	show_run rdma link add rxe0 type rxe netdev rail1 && break
	[ $try = 5 ] && st=fail
	sleep 1
done
barrier rxe-ready 180 $st || { not_ok "barrier rxe-ready"; tap_done; exit 1; }
[ "$NZ_ALL_OK" = 1 ] || { not_ok "Soft-RoCE on both guests"; tap_done; exit 1; }
# mtu_or_1500 RAIL VAR: rail RAIL back to 1500 (and VAR with it) when its
# path does not carry the jumbo frames VAR names.
mtu_or_1500() {
	local -n mtu=$2
	{ [ "$mtu" = 1500 ] || rail_carries_mtu "$1" "$mtu"; } && return
	say "no MTU $mtu path on rail$1: back to 1500"
	mtu=1500
	ip link set "rail$1" mtu 1500
}
mtu_or_1500 1 MTU
mtu_or_1500 0 TCP_MTU
barrier mtu-checked 120 || { not_ok "barrier mtu-checked"; tap_done; exit 1; }
rdma link show rxe0 | comment

# ib_send_bw NAME ITERS: rank 1 serves, rank 0 measures; sets BW (Mbit/s).
# Completions by event, not busy polling: on one vCPU a polling process
# starves rxe's own kernel work.  -u 18: a 1 s ack timeout, so a shaper's
# queue does not look like loss.
perf_bw() {
	local name=$1 n=$2 out=$NZ_OUT/ib_send_bw-$1.txt
	local args=(-d rxe0 -x 1 -F -e -s 65536 -n "$n" -u 18 --report_gbits -p $PERF_PORT)
	BW=
	PERF_PORT=$((PERF_PORT + 1))
	if [ "$NZ_NODE" = 1 ]; then
		timeout $((SECS * 6 + 60)) ib_send_bw "${args[@]}" >"$out" 2>&1 &
		sleep 1
		barrier "perf-$name" 120 || return 1
		wait
		return 0
	fi
	barrier "perf-$name" 120 || return 1
	sleep 2
	timeout $((SECS * 6 + 60)) ib_send_bw "${args[@]}" 10.77.1.2 >"$out" 2>&1
	BW=$(awk '/#bytes/ { getline; if ($4 + 0 > 0) print $4 * 1000 }' "$out")
	[ -n "$BW" ]
}

# iperf_bw NAME SECS [iperf3 args]: rank 1 serves on rail0, rank 0
# measures; sets BW (Mbit/s) on rank 0.
IPERF_PORT=5201
iperf_bw() {
	local name=$1 secs=$2 out=$NZ_OUT/iperf-$1.txt srv
	shift 2
	BW=
	IPERF_PORT=$((IPERF_PORT + 1))
	if [ "$NZ_NODE" = 1 ]; then
		timeout $((secs + 60)) iperf3 -s -1 -B 10.77.0.2 -p $IPERF_PORT >/dev/null 2>&1 &
		srv=$!
		sleep 1
		barrier "iperf-$name" 120 || return 1
		wait $srv
		return 0
	fi
	barrier "iperf-$name" 120 || return 1
	sleep 2
	timeout $((secs + 40)) iperf3 -c 10.77.0.2 -B 10.77.0.1 -p $IPERF_PORT \
		-t "$secs" -f m --connect-timeout 5000 "$@" >"$out" 2>&1 &&
		BW=$(iperf_mbits "$out")
}

# parallel_bw NAME: iperf3 on rail0 and ib_send_bw on rail1 at once; sets
# PAR (their sum, Mbit/s) on rank 0.
parallel_bw() {
	local name=$1 n iport=$((IPERF_PORT + 1)) pport=$((PERF_PORT + 1)) tbw rbw
	local pargs
	IPERF_PORT=$iport PERF_PORT=$pport PAR=
	n=$(awk -v r="$(mbit "$RDMA_RATE")" -v s="$SECS" 'BEGIN {
		n = int(r * 1e6 / 8 * s / 65536); print (n < 50 ? 50 : n) }')
	pargs=(-d rxe0 -x 1 -F -e -s 65536 -n "$n" -u 18 --report_gbits -p $pport)
	if [ "$NZ_NODE" = 1 ]; then
		timeout $((SECS * 6 + 60)) iperf3 -s -1 -B 10.77.0.2 -p $iport >/dev/null 2>&1 &
		timeout $((SECS * 6 + 60)) ib_send_bw "${pargs[@]}" >/dev/null 2>&1 &
		sleep 1
		barrier "parallel-$name" 120
		wait
		return 0
	fi
	barrier "parallel-$name" 120 || return 1
	sleep 2
	timeout $((SECS + 40)) iperf3 -c 10.77.0.2 -B 10.77.0.1 -p $iport -t "$SECS" \
		-f m --connect-timeout 5000 >"$NZ_OUT/iperf-parallel-$name.txt" 2>&1 &
	timeout $((SECS * 6 + 60)) ib_send_bw "${pargs[@]}" 10.77.1.2 \
		>"$NZ_OUT/ib_send_bw-parallel-$name.txt" 2>&1
	wait
	tbw=$(iperf_mbits "$NZ_OUT/iperf-parallel-$name.txt")
	rbw=$(awk '/#bytes/ { getline; if ($4 + 0 > 0) print $4 * 1000 }' \
		"$NZ_OUT/ib_send_bw-parallel-$name.txt")
	[ -n "$tbw" ] && [ -n "$rbw" ] || return 1
	PAR=$(awk -v a="$tbw" -v b="$rbw" 'BEGIN { print a + b }')
	say "iperf3 and ib_send_bw at once: $tbw + $rbw = $PAR Mbit/s"
}

# Unshaped ceilings: what each stack alone can do on these guests now.
iperf_bw ceiling 5
tcp_ceiling=$BW
perf_bw ceiling 400
rxe_ceiling=$BW
if [ "$NZ_NODE" = 0 ]; then
	if [ -n "$tcp_ceiling" ] && [ -n "$rxe_ceiling" ]; then
		say "ceilings here, unshaped: TCP $tcp_ceiling Mbit/s (iperf3), rxe $rxe_ceiling Mbit/s (ib_send_bw, 64 KiB)"
		record tcp_ceiling "$tcp_ceiling"
		record rxe_ceiling "$rxe_ceiling"
		ok "each rail's ceiling measured (iperf3, ib_send_bw)"
	else
		not_ok "each rail's ceiling measured (iperf3, ib_send_bw)"
	fi
fi

# 2. Shaping: rail0 TCP_RATE, rail1 RDMA_RATE.  rail1's queue holds one
# QP's 128 packets in flight (rxe's limit of unacknowledged PSNs) at this
# MTU: 200 KB at 1500, 560 KB at 4200.  A shorter queue drops, and rxe
# waits for a retransmission timeout (seconds) each time.
st=ok
show_run tc qdisc replace dev rail0 root tbf rate "$TCP_RATE" burst 20kb latency 20ms || st=fail
show_run tc qdisc replace dev rail1 root tbf rate "$RDMA_RATE" burst 20kb limit $((128 * MTU + 20000)) || st=fail
if [ $st = ok ]; then
	ok "rails shaped: rail0 $TCP_RATE (TCP, MTU $TCP_MTU), rail1 $RDMA_RATE (RDMA, MTU $MTU)"
else
	not_ok "rails shaped: rail0 $TCP_RATE (TCP), rail1 $RDMA_RATE (RDMA)"
fi
if [ "$NZ_NODE" = 0 ]; then
	record tcp_rate "$(mbit "$TCP_RATE")"
	record rdma_rate "$(mbit "$RDMA_RATE")"
	record rdma_mtu "$MTU"
	record tcp_mtu "$TCP_MTU"
fi

# 3a. Each rail alone, with its own tool; then both tools at once (what
# the two stacks reach together on these guests' CPU).
if iperf_bw shaped "$SECS" && [ "$NZ_NODE" = 0 ]; then
	say "iperf3, TCP rail alone: $BW Mbit/s"
	record tcp_alone "$BW"
	ok "iperf3 on the TCP rail alone"
elif [ "$NZ_NODE" = 0 ]; then
	not_ok "iperf3 on the TCP rail alone" "$(tail -2 "$NZ_OUT/iperf-shaped.txt" | tr '\n' ' ')"
fi
n=$(awk -v r="$(mbit "$RDMA_RATE")" -v s="$SECS" 'BEGIN { n = int(r * 1e6 / 8 * s / 65536); print (n < 50 ? 50 : n) }')
if perf_bw shaped "$n" && [ "$NZ_NODE" = 0 ]; then
	say "ib_send_bw, RDMA rail alone (shaped): $BW Mbit/s"
	record rdma_alone "$BW"
	ok "ib_send_bw on the RDMA rail alone"
elif [ "$NZ_NODE" = 0 ]; then
	not_ok "ib_send_bw on the RDMA rail alone" "$(tail -3 "$NZ_OUT/ib_send_bw-shaped.txt" | tr '\n' ' ')"
fi

parallel_bw shaped && [ "$NZ_NODE" = 0 ] && record parallel "$PAR"

# 3b, 4. Nezha: a TCP rail t0 and an RDMA rail rd; a weight of 0 leaves a
# rail out of the next communicator.
st=ok
show_run insmod "$NZ_KO" ${NZ_MODULE_PARAMS:-} || st=fail
show_run insmod "$NZ_RDMA_KO" || st=fail
show_run "$CTL" rail add t0 proto tcp dev rail0 || st=fail
show_run "$CTL" rail add rd proto rdma dev rxe0 || st=fail
"$CTL" health set interval 100 misses 30 grace 60000 >/dev/null 2>&1
show_run "$CTL" rail show
[ $st = ok ] && ok "nezha.ko and nezha_rdma.ko loaded, rails t0 (TCP) and rd (RDMA)"
[ $st = ok ] || not_ok "nezha.ko and nezha_rdma.ko loaded, rails t0 (TCP) and rd (RDMA)"

# Weights in the ratio of the rails' rates, what an administrator would set:
# the static-weights comparison.
w_t0=$(awk -v t="$(mbit "$TCP_RATE")" -v r="$(mbit "$RDMA_RATE")" 'BEGIN { printf "%d", 100 * t / r + 0.5 }')

# nezha_run NAME WEIGHT_T0 WEIGHT_RD [--check]: one nezha-bench p2p.
nezha_run() {
	local name=$1 out=$NZ_OUT/nezha-$1.txt v
	"$CTL" rail set t0 weight "$2"
	"$CTL" rail set rd weight "$3"
	shift 3
	barrier "nezha-$name" 180 || return 1
	[ "$NZ_ALL_OK" = 1 ] || return 1
	NZ_MASTER_PORT=$((NZ_MASTER_PORT + 1))
	if nezha_bench "$out" "${NZ_BENCH_TIMEOUT:-600}" -b "$SIZE" -e "$SIZE" \
		-n "$ITERS" -w 1 -m bw -T 300 "$@"; then
		[ "$NZ_NODE" = 0 ] || return 0
		v=$(awk '/^# Peak algbw:/ { gsub(/\(/, "", $6); print $6 }' "$out")
		[ -n "$v" ] && record "nezha_$name" "$v"
		say "Nezha, $name: ${v:--} Mbit/s"
		ok "nezha-bench p2p, $name"
	else
		not_ok "nezha-bench p2p, $name" "$(grep -v '^#' "$out" | tail -2 | tr '\n' ' ')"
	fi
}
# sched_mode: the measured scheduler (default), or a static split for
# comparison (Documentation/sched.rst).
sched_mode() { echo "$1" > /sys/module/nezha/parameters/sched_mode; }
if [ $st = ok ]; then
	nezha_run tcp_alone 100 0
	nezha_run rdma_alone 0 100
	nezha_run both 100 100 --check
	sched_mode weights && nezha_run both_static_weights "$w_t0" 100
	sched_mode equal && nezha_run both_equal 100 100
	sched_mode measured
fi
grep -H . /sys/class/nezha/rail-rd/rdma/* 2>/dev/null | sed 's|.*/rdma/||' | paste -sd' ' | comment
"$CTL" rail del t0 2>/dev/null
"$CTL" rail del rd 2>/dev/null
rmmod nezha_rdma 2>/dev/null
rmmod nezha 2>/dev/null
barrier finished 180 || true

# 5. Report (node 0).
if [ "$NZ_NODE" = 0 ]; then
	get() { awk -F= -v k="$1" '$1 == k && $2 != "" { v = $2 } END { print v }' "$RES"; }
	ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b }'; }
	sum() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { print a + b }'; }
	tcp=$(get tcp_alone) rdma=$(get rdma_alone)
	nz_tcp=$(get nezha_tcp_alone) nz_rdma=$(get nezha_rdma_alone) nz=$(get nezha_both)
	sum_raw=$(sum "$tcp" "$rdma")
	sum_nz=$(sum "$nz_tcp" "$nz_rdma")
	r_raw=$(ratio "$nz" "$sum_raw")
	r_nz=$(ratio "$nz" "$sum_nz")
	record sum_alone "$sum_raw"
	record ratio_sum "$r_raw"
	record ratio_nezha_sum "$r_nz"
	say ""
	say "=== Nezha over TCP + RDMA vs each rail alone, same guests, same run ==="
	say "$(printf '%-44s %10s Mbit/s' "TCP ceiling (unshaped, iperf3)" "$(get tcp_ceiling)")"
	say "$(printf '%-44s %10s Mbit/s' "rxe ceiling (unshaped, ib_send_bw)" "$(get rxe_ceiling)")"
	say "$(printf '%-44s %10s' "shaping: TCP rail / RDMA rail, MTU" "$TCP_RATE / $RDMA_RATE, $MTU")"
	say "$(printf '%-44s %10s Mbit/s' "TCP rail alone (iperf3)" "${tcp:--}")"
	say "$(printf '%-44s %10s Mbit/s' "RDMA rail alone (ib_send_bw)" "${rdma:--}")"
	say "$(printf '%-44s %10s Mbit/s' "sum of the rails alone" "${sum_raw:--}")"
	say "$(printf '%-44s %10s Mbit/s' "iperf3 + ib_send_bw at once" "$(get parallel)")"
	say "$(printf '%-44s %10s Mbit/s' "Nezha, TCP rail alone" "${nz_tcp:--}")"
	say "$(printf '%-44s %10s Mbit/s' "Nezha, RDMA rail alone" "${nz_rdma:--}")"
	say "$(printf '%-44s %10s Mbit/s' "Nezha, both, measured scheduler, $SIZE" "${nz:--}")"
	say "$(printf '%-44s %10s Mbit/s' "Nezha, both, static weights $w_t0:100" "$(get nezha_both_static_weights)")"
	say "$(printf '%-44s %10s Mbit/s' "Nezha, both, static equal split" "$(get nezha_both_equal)")"
	say "$(printf '%-44s %10s' "Nezha both / sum of the rails alone" "${r_raw:--}")"
	say "$(printf '%-44s %10s' "Nezha both / sum of Nezha on each rail" "${r_nz:--}")"
	par=$(get parallel)
	shaped=$(sum "$(get tcp_rate)" "$(get rdma_rate)")
	if [ -n "$par" ] && [ -n "$shaped" ] &&
	   awk -v p="$par" -v s="$shaped" 'BEGIN { exit !(p < 0.9 * s) }'; then
		say "WARNING: iperf3 and ib_send_bw at once reached $par of $shaped Mbit/s: the guests"
		say "WARNING: were CPU bound (is the host busy? see uptime), so the ratios measure the"
		say "WARNING: CPU; Nezha both / both tools at once: $(ratio "$nz" "$par")"
		record cpu_bound 1
	fi
	record ratio_parallel "$(ratio "$nz" "$par")"
	if [ -z "$r_raw" ]; then
		not_ok "target: Nezha over both >= 85% of the sum of the rails alone" "a measurement is missing"
	elif awk -v r="$r_raw" 'BEGIN { exit !(r >= 0.85) }'; then
		ok "target: Nezha over both >= 85% of the sum of the rails alone ($r_raw)"
	else
		not_ok "target: Nezha over both >= 85% of the sum of the rails alone ($r_raw)"
	fi
fi
tap_done
