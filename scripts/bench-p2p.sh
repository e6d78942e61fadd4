#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench-p2p: Nezha point to point against the same rails measured alone,
# together and with MPTCP, in one run on the same 2 QEMU guests
# (selftests/guest/bench_p2p.sh; method in Documentation/benchmarks.rst).
#
# usage: scripts/bench-p2p.sh
# environment: NZ_RATE (40mbit), NZ_BENCH_RAILS (2), NZ_BENCH_SECS (10 s per
# iperf3 run), NZ_BENCH_SIZE (64M), NZ_BENCH_ITERS (3),
# NZ_BENCH_TIMEOUT (900 s for the whole run), NZ_OUT (build/bench-p2p).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

out=${NZ_OUT:-build/bench-p2p}
rails=${NZ_BENCH_RAILS:-2}
mkdir -p "$out"

selftests/qemu/vm.sh -B -n 2 -r "$rails" -t "${NZ_BENCH_TIMEOUT:-900}" -o "$out" -s "${NZ_RATE:-40mbit}" \
	selftests/guest/bench_p2p.sh --rate "${NZ_RATE:-40mbit}" \
	--secs "${NZ_BENCH_SECS:-10}" --size "${NZ_BENCH_SIZE:-64M}" \
	--iters "${NZ_BENCH_ITERS:-3}"
rc=$?

res=$out/guest0.out/bench_p2p.results
if [ -s "$res" ]; then
	get() { awk -F= -v k="$1" '$1 == k && $2 != "" { v = $2 } END { print (v == "" ? "-" : v) }' "$res"; }
	sum=$(awk -F= '$1 ~ /^single_/ { s += $2; n++ } END { print (n ? s : "-") }' "$res")
	echo "# summary, Mbit/s ($rails rails x ${NZ_RATE:-40mbit}): single rails summed $sum," \
		"parallel $(get parallel), MPTCP $(get mptcp), Nezha $(get nezha)," \
		"Nezha with the per-frame MAC $(get nezha_mac)"
	echo "# ratios: Nezha / sum of single rails $(get ratio_sum), Nezha / MPTCP $(get ratio_mptcp)," \
		"per-frame MAC / none $(get ratio_mac)"
fi
echo "# details: $out/guest0.result (rank 0), $out/guest0.out/*.txt"
exit $rc
