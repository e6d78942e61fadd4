#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""QEMU monitor (HMP) commands for the guests of vm.sh.

  hmp.py -c SOCKET COMMAND   run COMMAND on one guest, print its reply
  hmp.py SOCKET...           serve: read lines "G[,G...] COMMAND" on stdin,
                             send COMMAND to every guest listed back to back,
                             then print their replies and a line "."

The serving mode keeps its monitor connections open, so a host script
(bench_failover_host.sh) fails a rail on several guests within
microseconds of each other, and starts no interpreter at the moment of the
fault: on a 2-core host the guests' vCPUs compete with that start-up.
"""
import re
import socket
import sys


def connect(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(path)
    until_prompt(s)
    return s


def until_prompt(s):
    buf = b""
    while not buf.endswith(b"(qemu) "):
        d = s.recv(4096)
        if not d:
            break
        buf += d
    return buf


def reply(s):
    out = until_prompt(s).decode(errors="replace")
    out = re.sub(r"\x1b\[[0-9;]*[A-Za-z]|\r", "", out)
    lines = out.split("\n")[1:]          # the echoed command
    if lines and lines[-1].startswith("(qemu)"):
        lines.pop()
    return "\n".join(lines)


def command(s, cmd):
    """Send one command on connection s; its reply."""
    s.sendall(cmd.encode() + b"\n")
    return reply(s)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "-c":
        out = command(connect(sys.argv[2]), sys.argv[3])
        if out:
            print(out)
        return 0
    mons = [connect(p) for p in sys.argv[1:]]
    for line in sys.stdin:
        guests, _, cmd = line.strip().partition(" ")
        try:
            which = [mons[int(g)] for g in guests.split(",")]
        except (ValueError, IndexError):
            print(f"bad guest list '{guests}'\n.", flush=True)
            continue
        for s in which:
            s.sendall(cmd.encode() + b"\n")
        for s in which:
            out = reply(s)
            if out:
                print(out)
        print(".", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
