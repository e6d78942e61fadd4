#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A guest script that never ends, for the test bed's own check (run.sh,
# "harness/"): vm.sh's timeout must stop it and first have the guest's
# kernel write every task's stack to the console (tasks_to_console).
echo "1..1"
echo "ok 1 - started; now waiting in nz_hang_probe until the timeout"
# A name of its own, easy to find in the task list.
cp /bin/sleep /tmp/nz_hang_probe
exec /tmp/nz_hang_probe 3600
