#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot the debug lane's kernel over and over, to count and catch its boot
# hangs (issue 18: boots that stopped after "ACPI: setting ELCR", the
# RCU-tasks self-test deadlock that scripts/debug-kernel.d/ patches;
# Documentation/testing.rst).  Each round boots 2 guests x 1 rail as the
# lane does (same command line, memory, watchdog) and runs the test bed's
# smoke test in them; a guest silent for NZ_BOOT_SILENCE (60) seconds
# before its script began is a hung boot, and vm.sh leaves its vCPUs,
# local APIC and printk buffer in guestG.hung-regs (hung_regs.py).
#
#   scripts/boot-soak.sh [ROUNDS]        (8)
#
# environment: NZ_GUEST_CMDLINE (added to the lane's: try a mitigation),
# NZ_OUT (build/boot-soak).  Prints a line per round and the totals:
# "N guest boots: H hung, F failed otherwise".  Exit status 0 iff no boot
# hung or failed.  Not part of make check (each round boots a KASAN
# kernel: ~1-2 min, 1 more when one hangs).
set -u
cd "$(dirname "$0")/.." || exit 2
rounds=${1:-8}
TOP=$PWD
. scripts/debug-lane.sh
debug_kernel || { echo "no debug kernel (scripts/debug-kernel.sh)" >&2; exit 2; }
# The smoke test loads no module, but vm.sh wants one built for the
# guest's kernel.
debug_module "" || {
	echo "nezha.ko does not build against the debug kernel:" >&2
	echo "$debug_module_out" | tail -n 20 >&2
	exit 2
}
debug_guest_env
export NZ_BOOT_SILENCE=${NZ_BOOT_SILENCE:-60}
out=${NZ_OUT:-build/boot-soak}
rm -rf "$out"
mkdir -p "$out"
echo "# $rounds rounds of 2 guests, kernel $NZ_KERNEL, command line +'$NZ_GUEST_CMDLINE'"
boots=0 hung=0 failed=0
for ((i = 1; i <= rounds; i++)); do
	o=$out/round$i
	start=$SECONDS
	selftests/qemu/vm.sh -n 2 -r 1 -t 600 -o "$o" selftests/guest/harness_smoke.sh \
		>"$o.log" 2>&1
	rc=$?
	if [ -e "$o/boot-hung" ]; then
		# The watchdog stops every guest at the first hang: the other
		# guest's boot counts only if its script had begun.
		g=$(cut -d' ' -f1 "$o/boot-hung")
		hung=$((hung + 1))
		boots=$((boots + 1 + $(grep -c '^# g[01]: script started' "$o.log")))
		echo "round $i: $g hung after '$(tail -n 1 "$o/guest${g#g}.console" | tr -d '\r' | cut -c1-80)' ($((SECONDS - start)) s)"
		grep -a '^# vCPU\|^# printk\|^# log:' "$o/guest${g#g}.hung-regs" 2>/dev/null | tail -n 12 | sed 's/^/#   /'
	else
		boots=$((boots + 2))
		if [ $rc -ne 0 ]; then
			failed=$((failed + 1))
			echo "round $i: vm.sh exited $rc, no hang ($((SECONDS - start)) s; see $o.log)"
		else
			echo "round $i: both guests booted ($((SECONDS - start)) s)"
		fi
	fi
done
echo "$boots guest boots: $hung hung, $failed failed otherwise"
[ $hung -eq 0 ] && [ $failed -eq 0 ]
