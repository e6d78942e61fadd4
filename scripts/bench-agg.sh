#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench-agg: an allreduce split between a TCP rail and the
# aggregation rail, against each alone, Gloo and a ring over MPTCP, in one
# run on the same QEMU guests and rails (selftests/guest/bench_agg.sh;
# Documentation/aggregation.rst).  4 ranks and an aggregation node: 5
# guests.  Gloo comes from Debian's python3-torch (scripts/setup-bench.sh);
# without it Gloo and MPTCP SKIP with the reason.
#
# usage: scripts/bench-agg.sh
# environment: NZ_BENCH_NODES (5: ranks + 1), NZ_RATE (40mbit per rail),
# NZ_BENCH_ITERS (10 latency iterations), NZ_BENCH_MAX (16M), NZ_MTU (9000),
# NZ_BENCH_TIMEOUT (3600 s for the whole run), NZ_OUT (build/bench-agg).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

out=${NZ_OUT:-build/bench-agg}
mkdir -p "$out"
if ! scripts/setup-bench.sh; then
	echo "# bench-agg: python3-torch is not usable here; Gloo and MPTCP will SKIP" >&2
fi
nodes=${NZ_BENCH_NODES:-5}
selftests/qemu/vm.sh -B -n "$nodes" -r 2 -t "${NZ_BENCH_TIMEOUT:-3600}" -o "$out" -s "${NZ_RATE:-40mbit}" \
	selftests/guest/bench_agg.sh --rate "${NZ_RATE:-40mbit}" --iters "${NZ_BENCH_ITERS:-10}" \
	--max "${NZ_BENCH_MAX:-16M}" --mtu "${NZ_MTU:-9000}"
rc=$?
res=$out/guest0.out/bench_agg.results
if [ -s "$res" ]; then
	get() { awk -F= -v k="$1" '$1 == k { v = $2 } END { print (v == "" ? "-" : v) }' "$res"; }
	echo "# summary ($((nodes - 1)) ranks + a node, ${NZ_RATE:-40mbit} per rail): busbw split/MPTCP worst from 4 MiB $(get bw_vs_mptcp_min) (target >= 1.8)," \
		"split/capacity $(get bw_vs_capacity_min) (target >= 0.9), latency <= 4 KiB split/best $(get lat_vs_best_max) (target <= 1)"
fi
echo "# details: $out/guest0.result (rank 0), $out/guest*.out/{gloo,mptcp,nezha-*}.txt"
exit $rc
