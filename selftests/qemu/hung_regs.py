#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where a hung guest's vCPUs are (vm.sh, issue 18).

  hung_regs.py SOCKET [SYSTEM.MAP]

Prints every vCPU's registers (the monitor's "info registers -a") and the
first 128 words of each one's stack ("x /128gx RSP" in that vCPU's address
space).  With a System.map of the guest's kernel, booted with nokaslr (the
map's addresses are then the running ones), each RIP and every stack word
that points into the kernel's text is named: a rough backtrace, enough to
see which initcall or lock a boot stopped in.  The last lines, "# ...",
are those names.
"""
import bisect
import re
import sys

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


def name(syms, keys, addr):
    i = bisect.bisect_right(keys, addr) - 1
    # Below the first text symbol, or 1 MiB past one: not text.
    if i < 0 or addr - syms[i][0] > 0x100000:
        return None
    return "%s+%#x" % (syms[i][1], addr - syms[i][0])


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    s = hmp.connect(sys.argv[1])
    regs = hmp.command(s, "info registers -a")
    print(regs)
    cpus = []
    for block in re.split(r"^(?=CPU#\d+)", regs, flags=re.M):
        m = [re.search(p, block) for p in (r"^CPU#(\d+)", r"RSP=([0-9a-f]+)", r"RIP=([0-9a-f]+)")]
        if all(m):
            cpus.append(tuple(x.group(1) for x in m))
    stacks = {}
    for cpu, rsp, _ in cpus:
        hmp.command(s, "cpu " + cpu)
        stacks[cpu] = hmp.command(s, "x /128gx 0x" + rsp)
        print("CPU#%s stack from RSP %s:\n%s" % (cpu, rsp, stacks[cpu]))
    if len(sys.argv) < 3:
        return 0
    syms = load_map(sys.argv[2])
    if not syms:
        print("# %s names no text symbol" % sys.argv[2])
        return 0
    keys = [a for a, _ in syms]
    for cpu, _, rip in cpus:
        print("# vCPU %s at %s" % (cpu, name(syms, keys, int(rip, 16)) or rip))
        for word in re.findall(r"0x([0-9a-f]{16})", re.sub(r"^[0-9a-f]+:", "",
                                                          stacks[cpu], flags=re.M)):
            n = name(syms, keys, int(word, 16))
            if n:
                print("#   stack: %s" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
