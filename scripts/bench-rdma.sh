#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench-rdma: one Nezha transfer over a TCP rail and an RDMA rail
# (Soft-RoCE) at once, against each rail alone, in one run on the same 2
# QEMU guests (selftests/guest/bench_rdma.sh; Documentation/rdma.rst).
#
# usage: scripts/bench-rdma.sh
# environment: NZ_TCP_RATE (40mbit), NZ_RDMA_RATE (20mbit), NZ_RDMA_MTU
# (4200; 1500: no jumbo frames), NZ_TCP_MTU (9000), NZ_BENCH_SECS (10 s per raw
# measurement), NZ_BENCH_SIZE (64M), NZ_BENCH_ITERS (1),
# NZ_BENCH_TIMEOUT (1500 s for the whole run), NZ_OUT (build/bench-rdma).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

out=${NZ_OUT:-build/bench-rdma}
mkdir -p "$out"
out=$(realpath "$out")

# The guests share the host's CPUs: a busy host makes them CPU bound.
echo "# host load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
selftests/qemu/vm.sh -B -n 2 -r 2 -t "${NZ_BENCH_TIMEOUT:-1500}" -o "$out" \
	selftests/guest/bench_rdma.sh \
	--tcp-rate "${NZ_TCP_RATE:-40mbit}" --rdma-rate "${NZ_RDMA_RATE:-20mbit}" \
	--mtu "${NZ_RDMA_MTU:-4200}" --tcp-mtu "${NZ_TCP_MTU:-9000}" --secs "${NZ_BENCH_SECS:-10}" \
	--size "${NZ_BENCH_SIZE:-64M}" --iters "${NZ_BENCH_ITERS:-1}"
rc=$?
echo "# host load after: $(cut -d' ' -f1-3 /proc/loadavg)"

res=$out/guest0.out/bench_rdma.results
if [ -s "$res" ]; then
	get() { awk -F= -v k="$1" '$1 == k && $2 != "" { v = $2 } END { print (v == "" ? "-" : v) }' "$res"; }
	echo "# summary, Mbit/s (rails shaped: TCP $(get tcp_rate), RDMA $(get rdma_rate); MTU TCP $(get tcp_mtu), RDMA $(get rdma_mtu);" \
		"unshaped ceilings: TCP $(get tcp_ceiling), rxe $(get rxe_ceiling)):"
	echo "#   alone: TCP $(get tcp_alone) (iperf3), RDMA $(get rdma_alone) (ib_send_bw), sum $(get sum_alone);" \
		"both tools at once $(get parallel)"
	echo "#   Nezha: TCP alone $(get nezha_tcp_alone), RDMA alone $(get nezha_rdma_alone), both $(get nezha_both)" \
		"(static weights: $(get nezha_both_static_weights), equal split: $(get nezha_both_equal))"
	echo "# ratios: Nezha both / sum of the rails alone $(get ratio_sum)," \
		"Nezha both / sum of Nezha on each rail $(get ratio_nezha_sum)," \
		"Nezha both / both tools at once $(get ratio_parallel)"
	[ "$(get cpu_bound)" = 1 ] && echo "# WARNING: the guests were CPU bound: see the report in $out/guest0.result"
fi
echo "# details: $out/guest0.result (rank 0), $out/guest0.out/*.txt"
exit $rc
