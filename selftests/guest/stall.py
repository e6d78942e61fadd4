#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""stall.py DEV HOLD_MS PERIOD_MS SECONDS: a late peer, not a dead one.

Holds everything DEV sends for HOLD_MS in every PERIOD_MS, for SECONDS or
until SIGTERM, from the moment it prints "ready": a
plug qdisc, blocked and released by one long-lived `tc -batch -` (a tc
process started for each change took up to a second to start in a busy
guest, and the holds came out of any length).  The frames wait in order
and all leave at the release, as behind a paused link or a peer whose CPU
was taken.  Prints "stalls=N" and the longest hold as written.
"""
import signal
import subprocess
import sys
import time


def main():
    dev, hold, period, secs = sys.argv[1], float(sys.argv[2]) / 1e3, \
        float(sys.argv[3]) / 1e3, float(sys.argv[4])
    subprocess.run(["tc", "qdisc", "replace", "dev", dev, "root", "plug",
                    "limit", "16000000"], check=True)
    tc = subprocess.Popen(["tc", "-batch", "-"], stdin=subprocess.PIPE,
                          text=True)

    def say(what):
        tc.stdin.write(f"qdisc change dev {dev} root plug {what}\n")
        tc.stdin.flush()

    say("release_indefinite")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", flush=True)
    n, longest, end = 0, 0.0, time.monotonic() + secs
    try:
        while time.monotonic() < end:
            t = time.monotonic()
            say("block")
            time.sleep(hold)
            say("release_indefinite")
            longest = max(longest, time.monotonic() - t)
            n += 1
            time.sleep(max(0.0, period - (time.monotonic() - t)))
    finally:
        say("release_indefinite")
        tc.stdin.close()
        tc.wait()
        subprocess.run(["tc", "qdisc", "del", "dev", dev, "root"])
        print(f"stalls={n} longest_ms={longest * 1e3:.0f}", flush=True)
    return 0 if tc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
