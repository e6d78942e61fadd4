#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The `make demo` story, run in each of 2 guests (scripts/demo.sh):
#
#    nz0 (rank 0)                                   nz1 (rank 1)
#    rail0 10.77.0.1 ==tbf 40mbit== bridge ==tbf 40mbit== 10.77.0.2 rail0
#    rail1 10.77.1.1 ==tbf 40mbit== bridge ==tbf 40mbit== 10.77.1.2 rail1
#
# Each guest shapes its rails, loads nezha.ko and declares one TCP rail per
# interface with nezhactl (the commands are shown as they run); then rank 0
# sends to rank 1 with nezha-bench p2p, which prints a table of sizes and
# bandwidths and the share of the bytes each rail carried; both ranks run
# allreduces (nezha-bench allreduce, every result checked); and rank 0
# streams to rank 1 while rail1's link goes down on nz0 and comes back:
# the stream goes on over rail0, every byte checked, and the module's
# events show the failover and the rail's return.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/bench_lib.sh"
set -u

RATE=${1:-40mbit}

if [ "${NZ_NODES:-0}" != 2 ]; then
	skip "demo" "needs exactly 2 guests"
	tap_done
	exit
fi

say "=== node nz$NZ_NODE: rank $NZ_NODE of $NZ_NODES; rails ${NZ_IFS// /, } = ${NZ_ADDRS// /, } ==="
say ""
say "--- 1. two network rails, each shaped to $RATE (the physical limit is their sum) ---"
st=ok
shape_rails "$RATE" || st=fail
if [ $st = ok ]; then ok "rails shaped"; else not_ok "rails shaped"; fi

say ""
say "--- 2. load Nezha and give it both rails ---"
nezha_up || st=fail
if [ $st = ok ]; then
	ok "nezha.ko loaded with $NZ_RAILS TCP rails"
else
	not_ok "nezha.ko loaded with $NZ_RAILS TCP rails" "see the commands above"
fi

barrier ready 180 $st || { not_ok "both nodes ready"; tap_done; exit 1; }
if [ "$NZ_ALL_OK" != 1 ]; then
	say "the other node could not set Nezha up: stopping here"
	not_ok "both nodes set up"
	rmmod nezha 2>/dev/null
	tap_done
	exit 1
fi

say ""
if [ "$NZ_NODE" = 0 ]; then
	say "--- 3. rank 0 sends to rank 1 over Nezha: one message at a time is striped over both rails ---"
else
	say "--- 3. rank 1 receives (rank 0 prints the results) ---"
fi
out=$NZ_OUT/demo-bench.txt
klog=$(klog_mark)
if nezha_bench "$out" "${NZ_DEMO_BENCH_TIMEOUT:-400}" -b 4K -e 16M -f 4 -n 3 -w 1 -W 2 --check -T 150; then
	ok "nezha-bench p2p (rank $NZ_NODE)"
else
	not_ok "nezha-bench p2p (rank $NZ_NODE)" "$(grep -v '^#' "$out" | tail -2 | tr '\n' ' ')"
	klog_since "$klog"
fi
if [ "$NZ_NODE" = 0 ]; then
	say ""
	say "Reading the table: algbw = size / time per message; for point to point"
	say "busbw = algbw.  Two $RATE rails give at most 2 x $RATE; the rail split"
	say "shows each rail's share of the bytes (small messages may stay on one rail)."
fi
show_run timeout 30 "$NZ_BIN/tools/nezhactl" rail show || true

say ""
say "--- 4. a collective: both ranks run allreduces (sum of floats), every result checked ---"
out=$NZ_OUT/demo-allreduce.txt
klog=$(klog_mark)
if NZ_BENCH_MODE=allreduce NZ_MASTER_PORT=29510 nezha_bench "$out" "${NZ_DEMO_BENCH_TIMEOUT:-400}" \
	-b 64K -e 4M -f 4 -n 3 -w 1 -c 1 -T 150; then
	ok "nezha-bench allreduce (rank $NZ_NODE)"
else
	not_ok "nezha-bench allreduce (rank $NZ_NODE)" "$(grep -v '^#' "$out" | tail -2 | tr '\n' ' ')"
	klog_since "$klog"
fi
[ "$NZ_NODE" = 0 ] && say "With 2 ranks the ring's bus bandwidth is the algorithm bandwidth; #wrong counts elements that differ from the reference."

say ""
say "--- 5. a failover: rail1's link goes down on nz0 4 s into a 12 s stream of 2 MiB messages, and back up at 7 s ---"
"$NZ_BIN/tools/nezhactl" monitor timeout 40 >"$NZ_OUT/demo-monitor.log" 2>&1 &
mon=$!
cmds=()
[ "$NZ_NODE" = 0 ] && cmds=("4:ip link set ${nz_ifs[1]} down" "7:ip link set ${nz_ifs[1]} up")
say "\$ nz_p2p drill 12 ${cmds[*]}"
MASTER_ADDR=$NZ_BAR_ADDR MASTER_PORT=29520 RANK=$NZ_NODE WORLD_SIZE=$NZ_NODES \
	timeout -k 5 120 "$NZ_BIN/guest/nz_p2p" drill 12 "${cmds[@]}" >"$NZ_OUT/demo-failover.txt" 2>&1
rc=$?
sleep 1
kill "$mon" 2>/dev/null
grep '^# rank' "$NZ_OUT/demo-failover.txt" | comment
if [ $rc = 0 ]; then
	ok "the stream survived rail1's loss (rank $NZ_NODE)"
else
	not_ok "the stream survived rail1's loss (rank $NZ_NODE)" "exit status $rc"
fi
say "the module's events (nezhactl monitor):"
grep -E ': (down|up)' "$NZ_OUT/demo-monitor.log" | sed 's/ job [0-9a-f]*//' | comment
if [ "$NZ_NODE" = 0 ]; then
	say "Reading it: the t= times are when the ip commands ran (a guest this busy"
	say "starts a command a second or more late).  'down (Network is down)' is"
	say "rail1's loss, seen from its carrier at once; its unacknowledged chunks"
	say "were rerouted to rail0, and 'up' is rail1 re-admitted once its link came"
	say "back.  A 'down (Connection timed out)' followed by 'up' within tens of ms"
	say "is a path suspected because its answers came late, then re-admitted when"
	say "its probe came back: a false alarm (stats/false_suspects), most often in"
	say "a job's first second, before the module has learned how late this peer"
	say "answers (Documentation/health.rst, \"A busy node is not a dead path\")."
else
	say "Reading it: rank 1 checked every byte.  The longest gap is the time it"
	say "waited between two messages; one 2 MiB message takes 0.4 s on one rail"
	say "at 40 Mbit/s, so the gap is mostly that, with the rail lost mid-message."
	say "make bench-failover measures the failover gap itself (tens of ms)."
	say "Rank 1, the receiver, was owed nothing on rail1, so it declared no"
	say "failover during the outage; its 'down (Connection reset by peer)' is its"
	say "old rail1 connection ending when nz0 dialled again, then 'up' on the new."
fi
show_run timeout 30 "$NZ_BIN/tools/nezhactl" rail show || true
rmmod nezha 2>/dev/null
barrier finished 300 || true
tap_done
