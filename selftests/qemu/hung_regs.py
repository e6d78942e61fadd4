#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where a hung guest's vCPUs are (vm.sh, issue 18).

  hung_regs.py [-n SAMPLES] [-i SECONDS] SOCKET [SYSTEM.MAP]

Prints every vCPU's registers (the monitor's "info registers -a") and the
first 128 words of each one's stack ("x /128gx RSP" in that vCPU's address
space) and its local APIC ("info lapic": the timer's mode, mask and counts,
the interrupts requested and in service), SAMPLES times (3) SECONDS apart (2): one sample cannot tell a vCPU
stuck in one place from one that passes through it often (a guest that
spends its time in timer interrupts looks stuck in each of them).  With a
System.map of the guest's kernel, booted with nokaslr (the map's
addresses are then the running ones), each RIP and every stack word that
points into the kernel's text is named: a rough backtrace, enough to see
which initcall or lock a boot stopped in.  The last lines, "# ...", are
those names, and for each vCPU how many of the samples found it at the
same RIP, and its local APIC timer in each sample: a vCPU halted with
interrupts on and its timer masked, stopped (current_count 0 in one-shot
mode) or its vector stuck in service waits for nothing that will come.
With a map that names the printk buffer (log_buf, log_buf_len: a
System.map, or a /proc/kallsyms of the running kernel), the buffer is
saved through the monitor (memsave) and its last messages printed, "# log:
...": what the kernel logged but the console never showed, if anything.
"""
import bisect
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import hmp  # noqa: E402


def load_map(path):
    syms = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[1] in "tTwW":
                syms.append((int(parts[0], 16), parts[2]))
    syms.sort()
    return syms


def load_data(path):
    """The printk buffer's two variables, {name: address}, from the map."""
    want, found = ("log_buf", "log_buf_len"), {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[2] in want and parts[1] in "dDbB":
                found[parts[2]] = int(parts[0], 16)
    return found


def read_word(s, fmt, addr):
    """One word at a kernel address (x /1gx or x /1wx), or None."""
    m = re.search(r":\s*0x([0-9a-f]+)", hmp.command(s, "x /1%s %#x" % (fmt, addr)))
    return int(m.group(1), 16) if m else None


def printk_tail(s, data, last=30):
    """The last messages of the guest's printk buffer, as lines to print.

    The buffer's text ring holds each message after an 8-byte id, in the
    order written; early in a boot it has not wrapped, and its last
    strings are the newest.  (Wrapped, they are the ones written just
    before the oldest: said so.)"""
    if "log_buf" not in data or "log_buf_len" not in data:
        return ["# printk buffer: log_buf and log_buf_len not in the map"]
    buf = read_word(s, "gx", data["log_buf"])
    size = read_word(s, "wx", data["log_buf_len"])
    if not buf or not size or size > (32 << 20):
        return ["# printk buffer: unreadable (log_buf %s, log_buf_len %s)" % (buf, size)]
    d = tempfile.mkdtemp(prefix="hung_regs.")
    path = os.path.join(d, "log_buf")
    try:
        # Quoted: unquoted, the size's expression reads on into the
        # path ("262144 /tmp": a division) and fails.
        err = hmp.command(s, 'memsave %#x %d "%s"' % (buf, size, path))
        if not os.path.exists(path):
            return ["# printk buffer: memsave failed: %s" % err.strip()[:80]]
        with open(path, "rb") as f:
            raw = f.read()
    finally:
        if os.path.exists(path):
            os.unlink(path)
        os.rmdir(d)
    texts = [t.decode() for t in re.findall(rb"[\x20-\x7e]{4,}", raw)]
    wrapped = raw.rstrip(b"\0") == raw
    out = ["# printk buffer: %d messages in %d bytes%s, the last %d:" %
           (len(texts), size, " (full: it may have wrapped)" if wrapped else "",
            min(last, len(texts)))]
    out += ["# log: " + t for t in texts[-last:]]
    return out


def name(syms, keys, addr):
    i = bisect.bisect_right(keys, addr) - 1
    # Below the first text symbol, or 1 MiB past one: not text.
    if i < 0 or addr - syms[i][0] > 0x100000:
        return None
    return "%s+%#x" % (syms[i][1], addr - syms[i][0])


def sample(s):
    """One sample: the registers' text, [(cpu, rsp, rip)], {cpu: stack},
    {cpu: local APIC}."""
    regs = hmp.command(s, "info registers -a")
    cpus = []
    for block in re.split(r"^(?=CPU#\d+)", regs, flags=re.M):
        m = [re.search(p, block) for p in (r"^CPU#(\d+)", r"RSP=([0-9a-f]+)", r"RIP=([0-9a-f]+)")]
        if all(m):
            cpus.append(tuple(x.group(1) for x in m))
    stacks, lapics = {}, {}
    for cpu, rsp, _ in cpus:
        hmp.command(s, "cpu " + cpu)
        stacks[cpu] = hmp.command(s, "x /128gx 0x" + rsp)
        lapics[cpu] = hmp.command(s, "info lapic")
    return regs, cpus, stacks, lapics


def lapic_summary(text):
    """The lines of "info lapic" that say whether a timer interrupt can
    come: the timer's LVT entry, its counts, what is in service and
    requested."""
    keep = []
    for line in text.splitlines():
        f = line.split(None, 1)
        if f and f[0] in ("LVTT", "Timer", "ISR", "IRR"):
            keep.append(" ".join(line.split()))
    return "; ".join(keep) or "no local APIC state (%s)" % (text.strip()[:60] or "empty reply")


def main():
    args = sys.argv[1:]
    n, interval = 3, 2.0
    while len(args) >= 2 and args[0] in ("-n", "-i"):
        if args[0] == "-n":
            n = int(args[1])
        else:
            interval = float(args[1])
        args = args[2:]
    if len(args) not in (1, 2) or n < 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    s = hmp.connect(args[0])
    samples = []
    for k in range(n):
        if k:
            time.sleep(interval)
        regs, cpus, stacks, lapics = sample(s)
        samples.append((cpus, stacks, lapics))
        print("## sample %d of %d, %.1f s after the first" % (k + 1, n, k * interval))
        print(regs)
        for cpu, rsp, _ in cpus:
            print("CPU#%s stack from RSP %s:\n%s" % (cpu, rsp, stacks[cpu]))
            print("CPU#%s local APIC:\n%s" % (cpu, lapics[cpu]))
    syms = load_map(args[1]) if len(args) == 2 else []
    if len(args) == 2 and not syms:
        print("# %s names no text symbol" % args[1])
    keys = [a for a, _ in syms]
    rips = {}
    for k, (cpus, stacks, lapics) in enumerate(samples):
        for cpu, _, rip in cpus:
            rips.setdefault(cpu, []).append(rip)
            print("# vCPU %s local APIC (sample %d of %d): %s" %
                  (cpu, k + 1, n, lapic_summary(lapics[cpu])))
            if not syms:
                continue
            print("# vCPU %s at %s (sample %d of %d)" %
                  (cpu, name(syms, keys, int(rip, 16)) or rip, k + 1, n))
            for word in re.findall(r"0x([0-9a-f]{16})", re.sub(r"^[0-9a-f]+:", "",
                                                              stacks[cpu], flags=re.M)):
                w = name(syms, keys, int(word, 16))
                if w:
                    print("#   stack: %s" % w)
    for cpu, r in sorted(rips.items()):
        most = max(r.count(x) for x in r)
        print("# vCPU %s: %d of %d samples at the same RIP (%d distinct)" %
              (cpu, most, len(r), len(set(r))))
    if len(args) == 2:
        for line in printk_tail(s, load_data(args[1])):
            print(line)
    # NZ_HUNG_NMI=1: then inject an NMI.  A kernel booted with
    # "unknown_nmi_panic panic_print=1" panics on it and, verbose,
    # writes every task's stack to its console and buffer: where the boot
    # thread waits.  The guest is lost either way.
    if os.environ.get("NZ_HUNG_NMI") == "1":
        print("# NMI injected (NZ_HUNG_NMI=1): %s" % (hmp.command(s, "nmi").strip() or "ok"))
        time.sleep(15)
        if len(args) == 2:
            for line in printk_tail(s, load_data(args[1]), 2000):
                print(line.replace("# log:", "# after NMI:", 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
