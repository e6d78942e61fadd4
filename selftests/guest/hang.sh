#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A guest script that never ends, for the test bed's own check (run.sh,
# "harness/"): vm.sh's timeout must stop it and first have the guest's
# kernel write every task's stack to the console (tasks_to_console).
# For the host script (hold_mon_host.sh): this kernel's symbols at their
# running addresses, so that its hung_regs.py finds the printk buffer, and
# a line of ours in that buffer for it to find.
echo "nz_hang_probe: a line for hung_regs.py to find" >/dev/kmsg
if [ -n "${NZ_OUT:-}" ]; then
	cat /proc/kallsyms >"$NZ_OUT/kallsyms.tmp" && mv "$NZ_OUT/kallsyms.tmp" "$NZ_OUT/kallsyms"
fi
echo "1..1"
echo "ok 1 - started; now waiting in nz_hang_probe until the timeout"
# A name of its own, easy to find in the task list.
cp /bin/sleep /tmp/nz_hang_probe
exec /tmp/nz_hang_probe 3600
