#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Failover gap of one TCP (or MPTCP) stream, as its receiver sees it.

  gap_tcp.py server ADDR PORT STOPFILE    receive, print gap_ms= and bytes=
  gap_tcp.py client ADDR PORT STOPFILE    send until STOPFILE exists

Run under an MPTCP wrapper (LD_PRELOAD shim or mptcpize) to measure MPTCP.
The gap is the longest time between two reads that returned data, after
the first second; a stream that never resumes reports the time from its
last data to STOPFILE.  Every wait is bounded by STOPFILE plus 30 s.
"""
import os
import socket
import sys
import time


def server(addr, port, stop):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(1)
    ls.settimeout(30)
    c, _ = ls.accept()
    c.settimeout(0.05)
    start = last = time.monotonic()
    gap = 0.0
    total = 0
    while True:
        try:
            d = c.recv(1 << 16)
            if not d:
                break
            now = time.monotonic()
            total += len(d)
            if now - start > 1.0:
                gap = max(gap, now - last)
            last = now
        except socket.timeout:
            if os.path.exists(stop):
                break
    now = time.monotonic()
    if os.path.exists(stop) and now - last > gap:
        gap = now - last        # it never came back
    print("gap_ms=%d bytes=%d" % (gap * 1000, total))


def client(addr, port, stop):
    end = time.monotonic() + 30
    while True:
        try:
            s = socket.create_connection((addr, port), timeout=2)
            break
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)
    s.settimeout(0.2)
    buf = b"\x5a" * (1 << 16)
    deadline = time.monotonic() + 120
    while not os.path.exists(stop) and time.monotonic() < deadline:
        try:
            s.send(buf)
        except socket.timeout:
            pass
        except OSError:
            break
    s.close()


if __name__ == "__main__":
    role, addr, port, stopfile = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    (server if role == "server" else client)(addr, port, stopfile)
