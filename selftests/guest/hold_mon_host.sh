#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Host side of the test bed's own check (run.sh, "harness/"): holds guest
# 0's monitor (NZ_MON_0) for the whole run, as the failover suite's host
# script does.  A QEMU monitor serves one client at a time, so vm.sh's own
# diagnostics must not depend on that one.
exec python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
print("# host: holding", sys.argv[1], flush=True)
time.sleep(3600)
' "$NZ_MON_0"
