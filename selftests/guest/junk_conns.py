#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The isolation drill's hostile host (issue 20, selftests/guest/drill.sh).

Keeps JUNK connections to a rail's port that write garbage and SILENT ones
that connect and never say a word (handshakes left half done), for SECS
seconds: whenever the module closes one, it is opened again at once.
Prints what it opened and what the module closed.  A junk connection
writes as soon as it is up, or DELAY ms later; with --close, it is closed
CLOSE ms after that (and opened again) if the module has not closed it.

  junk_conns.py ADDR PORT --src SRC --junk N --silent N --secs S
                [--delay MS] [--close MS]
"""
import argparse
import errno
import os
import resource
import selectors
import signal
import socket
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("addr")
    ap.add_argument("port", type=int)
    ap.add_argument("--src", default="")
    ap.add_argument("--junk", type=int, default=1000)
    ap.add_argument("--silent", type=int, default=1000)
    ap.add_argument("--secs", type=float, default=30)
    ap.add_argument("--delay", type=float, default=0)
    ap.add_argument("--close", type=float, default=-1)
    a = ap.parse_args()

    want = a.junk + a.silent + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))

    sel = selectors.DefaultSelector()
    due = []                        # [time, socket]: junk still to write
    ends = []                       # [time, socket]: junk we close
    # opened, closed by the module, failed to connect, closed by us
    stats = {"junk": [0, 0, 0, 0], "silent": [0, 0, 0, 0]}
    live = {"junk": 0, "silent": 0}

    def open_one(kind):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            if a.src:
                s.bind((a.src, 0))
            err = s.connect_ex((a.addr, a.port))
        except OSError:
            s.close()
            stats[kind][2] += 1
            return False
        if err not in (0, errno.EINPROGRESS):
            s.close()
            stats[kind][2] += 1
            return False
        sel.register(s, selectors.EVENT_WRITE, [kind, False])
        stats[kind][0] += 1
        live[kind] += 1
        return True

    def write_junk(s):
        try:
            s.send(os.urandom(256))
        except OSError:
            pass
        if a.close >= 0:
            ends.append([time.monotonic() + a.close / 1000, s])

    def drop(s, kind, what):
        due[:] = [d for d in due if d[1] is not s]
        ends[:] = [d for d in ends if d[1] is not s]
        sel.unregister(s)
        s.close()
        stats[kind][what] += 1
        live[kind] -= 1

    # Stopped by SIGTERM (the drill, once its job is done): still report.
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    end = time.monotonic() + a.secs
    for kind, n in (("junk", a.junk), ("silent", a.silent)):
        for _ in range(n):
            open_one(kind)
    while time.monotonic() < end and not stop:
        t = time.monotonic()
        while due and due[0][0] <= t:
            write_junk(due.pop(0)[1])
        while ends and ends[0][0] <= t:
            s = ends[0][1]
            drop(s, "junk", 3)      # not the module's doing: reopen
            open_one("junk")
        nxt = [q[0][0] for q in (due, ends) if q]
        wait = min([0.2] + [max(0.0, x - t) for x in nxt])
        for key, ev in sel.select(timeout=wait):
            s, (kind, up) = key.fileobj, key.data
            if not up:
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    drop(s, kind, 2)
                    open_one(kind)
                    continue
                key.data[1] = True
                if kind == "junk" and a.delay > 0:
                    due.append([time.monotonic() + a.delay / 1000, s])
                elif kind == "junk":
                    write_junk(s)
                sel.modify(s, selectors.EVENT_READ, key.data)
                continue
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:            # the module closed it: again
                drop(s, kind, 1)
                open_one(kind)
        # connects that failed at once: keep the counts up, a few at a time
        for kind, n in (("junk", a.junk), ("silent", a.silent)):
            for _ in range(max(0, min(n - live[kind], 50))):
                if not open_one(kind):
                    break
    for kind in ("junk", "silent"):
        o, c, f, us = stats[kind]
        print(f"{kind}: {o} connections opened, {c} closed by the module, "
              f"{us} closed by us, {f} failed to connect, "
              f"{live[kind]} open at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
