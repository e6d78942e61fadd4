#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Benchmark: Nezha point to point against the same rails, measured in the
# same run on the same guests (TESTBED.md: ratios, never bare numbers).
# Runs in each of 2 guests (selftests/qemu/vm.sh -n 2 -r R; scripts/bench-p2p.sh):
#
#    nz0 (rank 0, sender)                     nz1 (rank 1, receiver)
#    rail0 10.77.0.1 --tbf RATE-- bridge --tbf RATE-- 10.77.0.2 rail0
#    rail1 10.77.1.1 --tbf RATE-- bridge --tbf RATE-- 10.77.1.2 rail1
#    ...
#
#  1. shape every rail on both guests (egress tbf);
#  2. iperf3, one TCP stream on each rail alone, then on all rails at once;
#  3. MPTCP: one connection, one subflow per rail (mptcpize or a shim);
#  4. nezha.ko with one TCP rail per interface, nezha-bench p2p, SIZE bytes;
#     then the same with the per-frame MAC on every rail (frame-mac on);
#  5. node 0 prints the figures and the ratios, and one ok/not ok per
#     target: Nezha >= 95% of the sum of the single rails, Nezha >= MPTCP.
#
# usage: bench_p2p.sh [--rate RATE] [--secs S] [--size SIZE] [--iters N]
# (defaults: NZ_RATE or 40mbit, 10 s per iperf3 run, 64M, 3 iterations)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench_lib.sh"
set -u

RATE=${NZ_RATE:-40mbit}
SECS=${NZ_BENCH_SECS:-10}
SIZE=${NZ_BENCH_SIZE:-64M}
ITERS=${NZ_BENCH_ITERS:-3}
while [ $# -gt 0 ]; do
	case $1 in
	--rate) RATE=$2 ;;
	--secs) SECS=$2 ;;
	--size) SIZE=$2 ;;
	--iters) ITERS=$2 ;;
	*) echo "Bail out! bench_p2p.sh: unknown argument $1"; exit 2 ;;
	esac
	shift 2
done

if [ "${NZ_NODES:-0}" != 2 ]; then
	skip "bench_p2p" "needs exactly 2 guests (vm.sh -n 2), not ${NZ_NODES:-?}"
	tap_done
	exit
fi
for tool in iperf3 tc ip nstat python3 cc; do
	command -v $tool >/dev/null || { not_ok "tool $tool present" "run scripts/setup.sh"; tap_done; exit 1; }
done

IPERF_PORT=5201
MPTCP_PORT=5300
# Long enough for node 0's whole measurement: single + parallel + slack.
STEP_TMO=$(((NZ_RAILS + 1) * (SECS + 30) + 120))
RES=$NZ_OUT/bench_p2p.results
: >"$RES"
record() {	# record KEY VALUE: for scripts/bench-p2p.sh's summary
	echo "$1=$2" >>"$RES"
}

say "node $NZ_NODE of $NZ_NODES, $NZ_RAILS rails: $NZ_IFS = $NZ_ADDRS; rate $RATE each"

# 1. Shaping.
st=ok
if shape_rails "$RATE"; then
	ok "rails shaped to $RATE (tbf, egress)"
else
	not_ok "rails shaped to $RATE"
	st=fail
fi

# 2. Plain TCP.
srv_pids=()
if [ "$NZ_NODE" = 1 ]; then
	for ((r = 0; r < NZ_RAILS; r++)); do
		iperf3 -s -B "$(rail_addr 1 $r)" -p $((IPERF_PORT + r)) >/dev/null 2>&1 &
		srv_pids+=($!)
	done
	sleep 1
fi
barrier tcp-ready 180 $st || { not_ok "barrier tcp-ready"; tap_done; exit 1; }

iperf_client() {	# iperf_client RAIL OUTFILE [extra...]
	local r=$1 out=$2
	shift 2
	timeout $((SECS + 40)) iperf3 -c "$(rail_addr 1 "$r")" -B "$(rail_addr 0 "$r")" \
		-p $((IPERF_PORT + r)) -t "$SECS" -f m --connect-timeout 5000 "$@" >"$out" 2>&1
}

sum_single=0
par_total=
if [ "$NZ_NODE" = 0 ]; then
	for ((r = 0; r < NZ_RAILS; r++)); do
		out=$NZ_OUT/iperf-rail$r.txt
		if iperf_client $r "$out" && v=$(iperf_mbits "$out"); then
			say "iperf3, ${nz_ifs[r]} alone: $v Mbit/s"
			record "single_$r" "$v"
			sum_single=$(awk -v a="$sum_single" -v b="$v" 'BEGIN { print a + b }')
			ok "iperf3 on rail $r alone"
		else
			not_ok "iperf3 on rail $r alone" "$(tail -2 "$out" | tr '\n' ' ')"
			sum_single=
			break
		fi
	done
	pids=()
	for ((r = 0; r < NZ_RAILS; r++)); do
		iperf_client $r "$NZ_OUT/iperf-par$r.txt" &
		pids+=($!)
	done
	par_total=0
	for ((r = 0; r < NZ_RAILS; r++)); do
		if wait "${pids[r]}" && v=$(iperf_mbits "$NZ_OUT/iperf-par$r.txt"); then
			par_total=$(awk -v a="$par_total" -v b="$v" 'BEGIN { print a + b }')
		else
			par_total=
		fi
	done
	if [ -n "$par_total" ]; then
		say "iperf3, all $NZ_RAILS rails in parallel: $par_total Mbit/s"
		record parallel "$par_total"
		ok "iperf3 on all rails in parallel"
	else
		not_ok "iperf3 on all rails in parallel"
	fi
fi
barrier tcp-done "$STEP_TMO" || { not_ok "barrier tcp-done"; tap_done; exit 1; }
for p in "${srv_pids[@]}"; do kill "$p" 2>/dev/null; done
wait 2>/dev/null

# 3. MPTCP.
st=ok
if [ "$NZ_NODE" = 1 ]; then
	mptcp_setup server || st=fail
	mptcp_wrapper || st=fail
	if [ $st = ok ]; then
		"${MPTCP_RUN[@]}" iperf3 -s -4 -p $MPTCP_PORT >"$NZ_OUT/iperf-mptcp-server.txt" 2>&1 &
		srv_pids=($!)
		sleep 1
	fi
else
	mptcp_setup client || st=fail
	mptcp_wrapper || st=fail
fi
[ $st = ok ] && say "MPTCP wrapper: ${MPTCP_RUN[*]}"
barrier mptcp-ready 180 $st || { not_ok "barrier mptcp-ready"; tap_done; exit 1; }
mptcp=
if [ "$NZ_NODE" = 0 ]; then
	if [ "$NZ_ALL_OK" != 1 ]; then
		not_ok "MPTCP set-up on both guests"
	else
		joins0=$(mptcp_counter MPJoinSynAckRx)
		caps0=$(mptcp_counter MPCapableSYNACKRX)
		out=$NZ_OUT/iperf-mptcp.txt
		if timeout $((SECS + 40)) "${MPTCP_RUN[@]}" iperf3 -c "$(rail_addr 1 0)" \
			-p $MPTCP_PORT -t "$SECS" -f m --connect-timeout 5000 >"$out" 2>&1 &&
			mptcp=$(iperf_mbits "$out"); then
			joins=$(($(mptcp_counter MPJoinSynAckRx) - ${joins0:-0}))
			caps=$(($(mptcp_counter MPCapableSYNACKRX) - ${caps0:-0}))
			say "MPTCP, one connection over $NZ_RAILS rails: $mptcp Mbit/s" \
				"($caps MPTCP connections, $joins extra subflows joined)"
			record mptcp "$mptcp"
			if [ "$caps" -ge 1 ]; then
				ok "MPTCP run (really MPTCP: $caps MP_CAPABLE handshakes)"
			else
				not_ok "MPTCP run" "no MP_CAPABLE handshake: the connection fell back to TCP"
				mptcp=
			fi
		else
			not_ok "MPTCP run" "$(tail -3 "$out" | tr '\n' ' ')"
			mptcp=
		fi
	fi
fi
barrier mptcp-done "$STEP_TMO" || { not_ok "barrier mptcp-done"; tap_done; exit 1; }
for p in "${srv_pids[@]}"; do kill "$p" 2>/dev/null; done
wait 2>/dev/null
ip mptcp endpoint flush 2>/dev/null

# 4. Nezha, then (4b) with the per-frame MAC on every rail: what
# integrity costs.  run_nezha KEY WHAT [RAIL ARGS...]: the module with a
# TCP rail per device, nezha-bench p2p; rank 0 records the peak as KEY.
run_nezha() {
	local key=$1 what=$2 st=ok out=$NZ_OUT/nezha-bench-$1.txt v
	shift 2
	nezha_up "$@" || st=fail
	if [ $st = ok ]; then
		ok "nezha.ko loaded, $NZ_RAILS TCP rails added$what"
	else
		not_ok "nezha.ko loaded, $NZ_RAILS TCP rails added$what" "see the commands above"
	fi
	barrier "$key-ready" 180 $st || { not_ok "barrier $key-ready"; tap_done; exit 1; }
	if [ "$NZ_ALL_OK" != 1 ]; then
		say "nezha-bench not run: the module or its rails are not set up on every guest"
	elif nezha_bench "$out" "${NZ_BENCH_TIMEOUT:-400}" -b "$SIZE" -e "$SIZE" \
		-n "$ITERS" -w 1 -m bw --check -T 120; then
		ok "nezha-bench p2p$what ran (rank $NZ_NODE)"
		if [ "$NZ_NODE" = 0 ]; then
			v=$(awk '/^# Peak algbw:/ { gsub(/\(/, "", $6); print $6 }' "$out")
			[ -n "$v" ] && record "$key" "$v"
		fi
	else
		not_ok "nezha-bench p2p$what ran (rank $NZ_NODE)" "$(grep -v '^#' "$out" | tail -2 | tr '\n' ' ')"
	fi
	rmmod nezha 2>/dev/null
}
run_nezha nezha ""
run_nezha nezha_mac ", frame-mac on" frame-mac on
barrier finished 120 || true

# 5. Report (node 0).
if [ "$NZ_NODE" = 0 ]; then
	nezha=$(awk -F= '$1 == "nezha" { print $2 }' "$RES")
	nezha_mac=$(awk -F= '$1 == "nezha_mac" { print $2 }' "$RES")
	ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b }'; }
	say ""
	say "=== Nezha p2p vs the same rails, same guests, same run ($NZ_RAILS x $RATE) ==="
	for ((r = 0; r < NZ_RAILS; r++)); do
		v=$(awk -F= -v k="single_$r" '$1 == k { print $2 }' "$RES")
		say "$(printf '%-38s %10s Mbit/s' "iperf3, rail $r alone" "${v:--}")"
	done
	say "$(printf '%-38s %10s Mbit/s' "sum of single rails" "${sum_single:--}")"
	say "$(printf '%-38s %10s Mbit/s' "iperf3, all rails in parallel" "${par_total:--}")"
	say "$(printf '%-38s %10s Mbit/s' "MPTCP, one subflow per rail" "${mptcp:--}")"
	say "$(printf '%-38s %10s Mbit/s' "Nezha p2p, $SIZE messages" "${nezha:--}")"
	say "$(printf '%-38s %10s Mbit/s' "the same, per-frame MAC (frame-mac)" "${nezha_mac:--}")"
	# A rail alone should nearly fill its shaped rate; if not, the guests
	# were CPU bound (a busy host) and the ratios compare noise.
	rate_mbit=$(echo "$RATE" | awk '/^[0-9.]+(kbit|mbit|gbit)$/ {
		v = $0 + 0; if ($0 ~ /kbit/) v /= 1000; if ($0 ~ /gbit/) v *= 1000; print v }')
	if [ -n "$rate_mbit" ] && [ -n "$sum_single" ] &&
	   awk -v s="$sum_single" -v n="$NZ_RAILS" -v r="$rate_mbit" 'BEGIN { exit !(s < 0.8 * n * r) }'; then
		say "WARNING: the rails alone reached $sum_single of $NZ_RAILS x $rate_mbit Mbit/s: the"
		say "WARNING: guests were CPU bound (is the host busy? see uptime), so these ratios are noisy"
		record cpu_bound 1
	fi
	r_sum=$(ratio "$nezha" "$sum_single")
	r_mptcp=$(ratio "$nezha" "$mptcp")
	r_par=$(ratio "$nezha" "$par_total")
	say "$(printf '%-38s %10s' "Nezha / sum of single rails" "${r_sum:--}")"
	say "$(printf '%-38s %10s' "Nezha / parallel iperf3" "${r_par:--}")"
	say "$(printf '%-38s %10s' "Nezha / MPTCP" "${r_mptcp:--}")"
	r_mac=$(ratio "$nezha_mac" "$nezha")
	say "$(printf '%-38s %10s' "Nezha with frame-mac / without" "${r_mac:--}")"
	record ratio_mac "${r_mac:-}"
	record ratio_sum "${r_sum:-}"
	record ratio_mptcp "${r_mptcp:-}"
	if [ -z "$r_sum" ]; then
		not_ok "target: Nezha >= 95% of the sum of single-rail iperf3" "no ratio: a measurement is missing"
	elif awk -v r="$r_sum" 'BEGIN { exit !(r >= 0.95) }'; then
		ok "target: Nezha >= 95% of the sum of single-rail iperf3 ($r_sum)"
	else
		not_ok "target: Nezha >= 95% of the sum of single-rail iperf3 ($r_sum)"
	fi
	if [ -z "$r_mptcp" ]; then
		not_ok "target: Nezha >= MPTCP" "no ratio: a measurement is missing"
	elif awk -v r="$r_mptcp" 'BEGIN { exit !(r >= 1.0) }'; then
		ok "target: Nezha >= MPTCP ($r_mptcp)"
	else
		not_ok "target: Nezha >= MPTCP ($r_mptcp)"
	fi
fi
tap_done
