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
# bandwidths and the share of the bytes each rail carried.
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
if nezha_bench "$out" "${NZ_DEMO_BENCH_TIMEOUT:-400}" -b 4K -e 16M -f 4 -n 3 -w 1 -W 2 --check -T 150; then
	ok "nezha-bench p2p (rank $NZ_NODE)"
else
	not_ok "nezha-bench p2p (rank $NZ_NODE)" "$(grep -v '^#' "$out" | tail -2 | tr '\n' ' ')"
fi
if [ "$NZ_NODE" = 0 ]; then
	say ""
	say "Reading the table: algbw = size / time per message; for point to point"
	say "busbw = algbw.  Two $RATE rails give at most 2 x $RATE; the rail split"
	say "shows each rail's share of the bytes (small messages may stay on one rail)."
fi
show_run timeout 30 "$NZ_BIN/tools/nezhactl" rail show || true
rmmod nezha 2>/dev/null
barrier finished 300 || true
tap_done
