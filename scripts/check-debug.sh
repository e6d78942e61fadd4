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
cd "$(dirname "$0")/.."
TOP=$PWD

paths=$(scripts/debug-kernel.sh) || {
	echo "not ok 1 - debug kernel build (scripts/debug-kernel.sh)"
	echo "0 passed, 1 failed"
	exit 1
}
eval "$paths"	# NZ_KERNEL NZ_MODDIR NZ_DEBUG_KDIR

# The module for that kernel, built from a copy of the sources: kbuild
# writes its objects beside them, and the tree's own nezha.ko is for the
# Debian kernel.  NZ_DEBUG_SRC names another tree holding Kbuild, kmod/
# and uapi/ (scripts/planted-bugs.sh: a copy with a bug planted), built
# in place.
src=${NZ_DEBUG_SRC:-}
if [ -n "$src" ]; then
	mod=$src
else
	mod=$TOP/build/debug-mod
	"$TOP"/scripts/kmod-copy.sh "$mod" || exit 2
fi
if ! out=$(make -C "$NZ_DEBUG_KDIR" M="$mod" W=1 modules 2>&1); then
	echo "not ok 1 - nezha.ko builds against the debug kernel"
	echo "$out" | tail -n 30 | sed 's/^/# /'
	echo "0 passed, 1 failed"
	exit 1
fi
if grep -q 'warning:' <<<"$out"; then
	echo "# warnings building against the debug kernel:"
	grep 'warning:' <<<"$out" | head -n 20 | sed 's/^/# /'
fi

# KASAN's shadow and lockdep's tables want memory; the checks make every
# step several times slower under TCG.
export NZ_KERNEL NZ_MODDIR NZ_KO=$mod/nezha.ko NZ_RDMA_KO=$mod/nezha_rdma.ko
# Its vmlinux does not start through the PVH entry (a KASAN kernel of
# 116 MB, silent from the first instruction): boot the bzImage.
export NZ_PVH=0
# Measured: the limits suite's guest runs 6x longer, its teardown of 252
# connections 10x (sysfs and KASAN; 10 s where 1 s is the bound), more on
# a busy host: time bounds in the tests scale by 20.
export NZ_TIME_SCALE=${NZ_TIME_SCALE:-20}
# This kernel was seen to die in its first 2 s, before any module or test
# (KASAN: wild-memory-access in do_raw_spin_lock from handle_edge_irq,
# during identify_cpu; 1 boot in 4 on a busy host): such a boot is retried,
# up to 6 times.  On 2026-12-05 the hang below (after "ACPI: setting
# ELCR") stopped 5 of 12 two-guest boots, 3 in a row once: 3 retries left
# a suite about one chance in 16 of failing on boots alone.
export NZ_RETRY_BOOT=${NZ_RETRY_BOOT:-6}
# It also hangs, silent, right after the decompressor's "Booting the
# kernel" (2 guests at once: about 1 boot in 6; with earlyprintk the last
# line is KASLR's).  Without a watchdog the suite's other guest then found
# no peer, every rendezvous timed out, and the suite failed after its whole
# timeout.  Now the guests print their boot (loglevel=6, earlyprintk) and
# vm.sh stops a run whose guest stays silent for NZ_BOOT_SILENCE seconds
# before its script began; run.sh boots it again.  Measured 2026-12-02:
# nokaslr did not end the hang (1 of 6 boots still hung); the early KASAN
# report hit 2 of 12 boots.  That report interrupts identify_cpu(), which
# rebuilds the CPU's feature bits: a guess is QEMU's max CPU with LA57
# (5-level paging), whose bit drops out for that while.  Both flags stay:
# a fixed layout makes reports reproducible, and no5lvl costs nothing;
# whether either helps is not shown.
export NZ_GUEST_CMDLINE="${NZ_GUEST_CMDLINE:+$NZ_GUEST_CMDLINE }nokaslr no5lvl loglevel=6 earlyprintk=serial,ttyS0"
export NZ_BOOT_SILENCE=${NZ_BOOT_SILENCE:-180}
export NZ_GUEST_ONLY=1 NZ_DEBUG_SUITES=1 NZ_TIMEOUT_SCALE=${NZ_TIMEOUT_SCALE:-4} NZ_VM_MEM=${NZ_VM_MEM:-1024}
export NZ_OUT=${NZ_OUT:-$TOP/build/test-output-debug}
exec selftests/run.sh
