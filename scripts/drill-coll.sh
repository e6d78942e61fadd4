#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make drill-coll: the allreduce failover drill of issue 23
# (selftests/guest/coll_drill.sh) on NZ_BENCH_NODES (4) QEMU guests with 2
# rails shaped to NZ_RATE (40mbit): allreduces of NZ_DRILL_SIZE (4 MiB)
# for NZ_DRILL_SECS (40), one node's rail1 pulled from 1/4 to 3/4 of it
# (NZ_DRILL_FAULT=0: no pull; every failover is then a false one).  A few minutes;
# not part of make check (its targets need an idle host).  Method and
# figures: Documentation/health.rst, "A rail pulled under allreduces".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${NZ_OUT:-build/drill-coll}
mkdir -p "$out"
rate=${NZ_RATE:-40mbit}
selftests/qemu/vm.sh -B -n "${NZ_BENCH_NODES:-4}" -r 2 -t "${NZ_BENCH_TIMEOUT:-1200}" -o "$out" -s "$rate" \
	-H selftests/guest/failover_host.sh \
	selftests/guest/coll_drill.sh --rate "$rate" --size "${NZ_DRILL_SIZE:-4194304}" \
	--secs "${NZ_DRILL_SECS:-40}" --mtu "${NZ_MTU:-9000}" --fault "${NZ_DRILL_FAULT:-1}"
rc=$?
echo "# every iteration: $out/guest0.out/loop-rank0.log"
exit $rc
