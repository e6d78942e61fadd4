#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Host side of the test bed's own check (run.sh, "harness/"): holds guest
# 0's monitor (NZ_MON_0) for the whole run, as the failover suite's host
# script does.  A QEMU monitor serves one client at a time, so vm.sh's own
# diagnostics must not depend on that one.  Meanwhile it takes what vm.sh
# takes of a hung boot (hung_regs.py, 3 samples 1 s apart) through guest
# 0's other monitor, and prints the lines run.sh checks: each sample's
# header, each vCPU's summary and local APIC, and the printk buffer's
# line that hang.sh wrote.
python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
print("# host: holding", sys.argv[1], flush=True)
time.sleep(3600)
' "$NZ_MON_0" &
# The guest leaves its /proc/kallsyms (hang.sh): the map, with the
# running addresses, that names its printk buffer.
map=$OUTDIR/guest0.out/kallsyms
for ((i = 0; i < 60; i++)); do
	[ -s "$map" ] && break
	sleep 1
done
[ -s "$map" ] || { echo "# host: no $map from the guest"; map=; }
python3 "$NZ_TOP/selftests/qemu/hung_regs.py" -n 3 -i 1 "${NZ_MON_0%.mon}.diag" ${map:+"$map"} 2>&1 |
	grep -a '^## sample\|^# vCPU [0-9]*\(:\| local\)\|^# printk\|^# log: nz_hang_probe\|Error\|error' |
	sed 's/^/# host: hung_regs: /'
wait
