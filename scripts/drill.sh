#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make drill: the isolation drill of issue 20 (selftests/guest/drill.sh) on
# 2 QEMU guests with 2 rails shaped to NZ_RATE (40mbit): a 2-rank job
# moves 256 MiB alone, then again while an unprivileged user fuzzes
# /dev/nezha on one node, a second user squats the job's id on the other,
# and a host keeps 1000 junk and 1000 silent connections open to a rail.
# About 4 minutes; not part of make check (its throughput target needs an
# idle host).  Method and figures: Documentation/security.rst, "The drill".
#
# environment: NZ_RATE, NZ_OUT (build/drill), NZ_BENCH_TIMEOUT (1800 s).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${NZ_OUT:-build/drill}
mkdir -p "$out"
selftests/qemu/vm.sh -B -n 2 -r 2 -t "${NZ_BENCH_TIMEOUT:-1800}" -o "$out" -s "${NZ_RATE:-40mbit}" \
	selftests/guest/drill.sh --rate "${NZ_RATE:-40mbit}"
rc=$?
echo "# details: $out/guest0.result (rank 0, squatter, junk host), $out/guest1.result (rank 1, fuzzer)"
exit $rc
