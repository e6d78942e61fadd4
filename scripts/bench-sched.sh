#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench-sched: the measured scheduler on 2 unequal TCP rails (40 Mbit/s
# + 1 ms, 10 Mbit/s + 10 ms) against the rails alone, MPTCP and the static
# equal split, in one run on the same 2 QEMU guests
# (selftests/guest/bench_sched.sh; Documentation/benchmarks.rst).
#
# environment: NZ_BENCH_SECS (10 s per iperf3 run), NZ_OUT (build/bench-sched)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${NZ_OUT:-build/bench-sched}
rm -rf "$out"
mkdir -p "$out"
selftests/qemu/vm.sh -B -n 2 -r 2 -t "${NZ_BENCH_TIMEOUT:-1500}" -o "$out" \
	selftests/guest/bench_sched.sh
rc=$?
echo "# figures: $out/guest0.out/bench_sched.results; tables: $out/guest0.out/*.txt"
exit $rc
