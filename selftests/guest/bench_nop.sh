#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Benchmark (not a test): NOP commands/s through /dev/nezha vs IORING_OP_NOP.
. "$(dirname "$0")/lib.sh"
nz_load || { echo "not ok 1 - insmod"; exit 1; }
"$NZ_BIN/tools/nezha-bench" nop -n ${NZ_BENCH_N:-200000} -r 3 | sed 's/^/# /'
rc=${PIPESTATUS[0]}
nz_unload
[ "$rc" = 0 ] && echo "ok 1 - nezha-bench nop ran" || echo "not ok 1 - nezha-bench nop ran"
