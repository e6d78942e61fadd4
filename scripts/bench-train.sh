#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench-train: DDP training steps/s on the "nezha" torch.distributed
# backend against Gloo on both NICs and on one NIC, in one run on the same
# 2 QEMU guests and rails (selftests/guest/bench_train.sh,
# tools/train_bench.py; method in Documentation/pytorch.rst).  Scenarios:
# (i) 2 x 40 Mbit/s, (ii) 40 + 10 Mbit/s, (iii) TCP 40 Mbit/s + an RDMA
# (rxe) rail, (iv) a rail pulled mid-run.  Prints the table of ratios.
#
# usage: scripts/bench-train.sh
# environment: NZ_RATE (40mbit per rail), NZ_TRAIN_STEPS (3 timed steps per
# run), NZ_TRAIN_SCENARIOS ("i ii iii iv"), NZ_BENCH_TIMEOUT (3600 s),
# NZ_OUT (build/bench-train).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

out=${NZ_OUT:-build/bench-train}
mkdir -p "$out"
out=$(realpath "$out")
scripts/setup.sh || exit 2

echo "# host load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
NZ_TRAIN_SCENARIOS=${NZ_TRAIN_SCENARIOS:-i ii iii iv} \
selftests/qemu/vm.sh -B -n 2 -r 2 -m 1536 -t "${NZ_BENCH_TIMEOUT:-3600}" -o "$out" \
	-s "${NZ_RATE:-40mbit}" -H selftests/guest/failover_host.sh \
	selftests/guest/bench_train.sh --rate "${NZ_RATE:-40mbit}" --steps "${NZ_TRAIN_STEPS:-3}"
rc=$?
echo "# host load after: $(cut -d' ' -f1-3 /proc/loadavg)"
tab=$out/guest0.out/bench_train.table
if [ -s "$tab" ]; then
	echo "# DDP steps/s, 2 ranks (one per guest), same boot and rails; targets (comm model):"
	echo "#   (i) nezha >= 1.8 x gloo-one, >= 1.0 x gloo-all; (ii), (iii) >= 1.5 x gloo-all; (iv) nezha finishes every step"
	sed 's/^/# /' "$tab"
fi
echo "# details: $out/guest0.result, $out/guest0.out/train-*.txt"
exit $rc
