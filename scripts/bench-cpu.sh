#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench-cpu: the CPU cost per byte of Nezha's data path against plain
# TCP (iperf3), on 1 and 2 rails that are not shaped, in one boot of 2 QEMU
# guests, with a profile of the Nezha runs (selftests/guest/bench_cpu.sh;
# method in Documentation/benchmarks.rst, "CPU cost per byte").
#
# usage: scripts/bench-cpu.sh
# environment: NZ_BENCH_VCPUS (1: vCPUs per guest), NZ_BENCH_SECS (15 s a
# run), NZ_BENCH_SIZE (64M), NZ_BENCH_PROFILE (1), NZ_BENCH_TIMEOUT (1200 s),
# NZ_OUT (build/bench-cpu), NZ_BENCH_INSNS (0; 1: count every guest
# instruction with the TCG plugin tools/qemu/nz_insns.c instead of perf's
# profile, and print instructions per GiB and by symbol; the plugin slows
# the guests, so that boot's throughput and CPU figures are not the ones
# to quote), NZ_BENCH_BASE (a baseline nezha.ko under the tree, e.g. a
# git worktree's: compared with ours in the same boot, alternated).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

out=${NZ_OUT:-build/bench-cpu}
mkdir -p "$out"
prof=()
[ "${NZ_BENCH_PROFILE:-1}" = 1 ] || prof=(--no-profile)
base=()
if [ -n "${NZ_BENCH_BASE:-}" ]; then
	[ -f "$NZ_BENCH_BASE" ] || { echo "NZ_BENCH_BASE=$NZ_BENCH_BASE: no such module" >&2; exit 2; }
	base=(--base "$(realpath "$NZ_BENCH_BASE")")
fi
insns=()
if [ "${NZ_BENCH_INSNS:-0}" = 1 ]; then
	insns=(-P build/tools/nz_insns.so)
	prof=(--no-profile)
	rm -f "$out"/guest*.insns.*
fi

# -B: no slub_debug (it would be measured); no -s: the NICs say nothing
# of a speed, so the job cuts the chunks it would on a fast real NIC.
selftests/qemu/vm.sh -B -n 2 -r 2 -c "${NZ_BENCH_VCPUS:-1}" -t "${NZ_BENCH_TIMEOUT:-1200}" \
	"${insns[@]}" -o "$out" selftests/guest/bench_cpu.sh --secs "${NZ_BENCH_SECS:-15}" \
	--size "${NZ_BENCH_SIZE:-64M}" "${prof[@]}" "${base[@]}"
rc=$?
if [ ${#insns[@]} -gt 0 ]; then
	scripts/insn-profile.py "$out" | tee "$out/insns.txt" || rc=1
fi
echo "# details: $out/guest0.result (sender), $out/guest1.result (receiver)," \
	"$out/guest*.out/*.perf.txt (profiles)"
exit $rc
