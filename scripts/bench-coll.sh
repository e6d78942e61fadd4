#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench-coll: Nezha's allreduce against Gloo's (torch.distributed,
# backend gloo) in one run on the same 2 QEMU guests and the same 2 shaped
# rails (selftests/guest/bench_gloo.sh; method in
# Documentation/collectives.rst).  Gloo comes from Debian's python3-torch,
# installed by scripts/setup-bench.sh (large, so not part of make check);
# without it the Gloo half SKIPs with the reason.
#
# usage: scripts/bench-coll.sh
# environment: NZ_BENCH_NODES (2 guests, one rank each; 4 and 8 are the
# scale runs of Documentation/collectives.rst), NZ_RATE (40mbit per rail), NZ_BENCH_ITERS (20 latency
# iterations), NZ_BENCH_MAX (64M), NZ_BENCH_CONC_SIZE (16M),
# NZ_BENCH_TIMEOUT (1800 s for the whole run), NZ_MTU (9000: the rails'
# MTU, the same for Gloo and Nezha), NZ_OUT (build/bench-coll).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

out=${NZ_OUT:-build/bench-coll}
mkdir -p "$out"
if ! scripts/setup-bench.sh; then
	echo "# bench-coll: python3-torch is not usable here; the Gloo half will SKIP" >&2
fi

nodes=${NZ_BENCH_NODES:-2}
selftests/qemu/vm.sh -B -n "$nodes" -r 2 -t "${NZ_BENCH_TIMEOUT:-1800}" -o "$out" -s "${NZ_RATE:-40mbit}" \
	selftests/guest/bench_gloo.sh --rate "${NZ_RATE:-40mbit}" \
	--iters "${NZ_BENCH_ITERS:-20}" --max "${NZ_BENCH_MAX:-64M}" \
	--conc-size "${NZ_BENCH_CONC_SIZE:-16M}" --mtu "${NZ_MTU:-9000}"
rc=$?

res=$out/guest0.out/bench_coll.results
if [ -s "$res" ]; then
	get() { awk -F= -v k="$1" '$1 == k && $2 != "" { v = $2 } END { print (v == "" ? "-" : v) }' "$res"; }
	echo "# summary ($nodes ranks, 2 rails x ${NZ_RATE:-40mbit}, MTU $(get mtu)): latency Gloo/Nezha worst $(get lat_ratio_min)" \
		"(geometric mean $(get lat_ratio_geomean); target >= 1.7)," \
		"busbw Nezha/Gloo worst $(get bw_ratio_min_large) (target >= 1.8 at every size)," \
		"two at once Nezha/Gloo $(get conc_ratio) (target >= 1; Gloo's own gain $(get gloo_conc_gain))"
fi
echo "# details: $out/guest0.result (rank 0), $out/guest0.out/{gloo,nezha-*}.txt"
exit $rc
