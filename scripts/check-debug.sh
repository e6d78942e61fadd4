#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The debug-kernel lane (`make check-debug`, Documentation/testing.rst):
# every guest suite on a kernel with KASAN, lockdep, kmemleak, UBSAN,
# DEBUG_OBJECTS and KFENCE, against nezha.ko and nezha_rdma.ko built for
# that kernel.  A suite fails on any report of theirs (vm.sh's console
# patterns, and a kmemleak scan at the end of each guest's run).
#
#   scripts/check-debug.sh                 every suite in selftests/guest/suites
#   NZ_SUITES="basic limits" scripts/check-debug.sh      only these
#
# The kernel is built once and cached (scripts/debug-kernel.sh, ~15 min on
# 2 cores); the module build takes seconds.  Prints TAP and the runner's
# "N passed, N failed" line; exit status 0 iff nothing failed.
set -u
cd "$(dirname "$0")/.." || exit 2
TOP=$PWD

. scripts/debug-lane.sh
debug_kernel || {
	echo "not ok 1 - debug kernel build (scripts/debug-kernel.sh)"
	echo "0 passed, 1 failed"
	exit 1
}

# NZ_DEBUG_SRC names another tree holding Kbuild, kmod/ and uapi/
# (scripts/planted-bugs.sh: a copy with a bug planted), built in place.
if ! debug_module "${NZ_DEBUG_SRC:-}"; then
	echo "not ok 1 - nezha.ko builds against the debug kernel"
	echo "$debug_module_out" | tail -n 30 | sed 's/^/# /'
	echo "0 passed, 1 failed"
	exit 1
fi
if grep -q 'warning:' <<<"$debug_module_out"; then
	echo "# warnings building against the debug kernel:"
	grep 'warning:' <<<"$debug_module_out" | head -n 20 | sed 's/^/# /'
fi

debug_guest_env
# The checks make every step several times slower under TCG.  Measured:
# the limits suite's guest runs 6x longer, its teardown of 252
# connections 10x (sysfs and KASAN; 10 s where 1 s is the bound), more on
# a busy host: time bounds in the tests scale by 20.
export NZ_TIME_SCALE=${NZ_TIME_SCALE:-20}
# A boot that dies early (debug_guest_env) is retried, up to 6 times.  On
# 2026-12-05 boots also hung after "ACPI: setting ELCR" (5 of 12 two-guest
# boots, 3 in a row once): that was the kernel's RCU-tasks self-test
# deadlocking, patched since (scripts/debug-kernel.d/).
export NZ_RETRY_BOOT=${NZ_RETRY_BOOT:-6}
export NZ_BOOT_SILENCE=${NZ_BOOT_SILENCE:-180}
export NZ_GUEST_ONLY=1 NZ_DEBUG_SUITES=1 NZ_TIMEOUT_SCALE=${NZ_TIMEOUT_SCALE:-4}
export NZ_OUT=${NZ_OUT:-$TOP/build/test-output-debug}
exec selftests/run.sh
