#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Instructions per GiB, and where they go, from a bench-cpu run made with
the instruction-counting TCG plugin (NZ_BENCH_INSNS=1 make bench-cpu;
tools/qemu/nz_insns.c, Documentation/benchmarks.rst).

usage: scripts/insn-profile.py OUTDIR [TOP]

For each guest (0 sends, 1 receives) and each measured run: the guest
instructions executed between the run's two markers, per GiB its rails
carried (sent on guest 0, received on guest 1), split into user space, the
kernel and nezha.ko, against iperf3's on the same rails; then the TOP (15)
symbols of each run, and for each Nezha run the TOP symbols where it
spends the most more per GiB than iperf3 on the same rails (and the
least: where it saves), with what all the others add up to.  Every
block's instructions go to the symbol that holds its first instruction
(from the guest's /proc/kallsyms of that run).
"""
import bisect
import os
import sys

USER_TOP = 1 << 47          # x86-64: user addresses are below
PAIRS = {"nezha1": "iperf1", "nezha1c": "iperf1", "nezha2": "iperf2"}
COPIES = ("copy_user_generic_string", "_copy_to_iter", "_copy_from_iter",
          "copy_user_enhanced_fast_string", "__zerocopy_sg_from_iter")


def load_syms(path):
    addrs, names = [], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 3:
                continue
            name = parts[2] + (" " + parts[3] if len(parts) > 3 else "")
            addrs.append(int(parts[0], 16))
            names.append(name)
    order = sorted(range(len(addrs)), key=addrs.__getitem__)
    return [addrs[i] for i in order], [names[i] for i in order]


def profile(counts_path, syms):
    addrs, names = syms
    by_sym, total, user, mod = {}, 0, 0, 0
    with open(counts_path) as f:
        for line in f:
            a, c = line.split()
            a, c = int(a, 16), int(c)
            total += c
            if a < USER_TOP:
                user += c
                name = "[user space]"
            else:
                i = bisect.bisect_right(addrs, a) - 1
                name = names[i] if i >= 0 else "[kernel, no symbol]"
                if name.endswith("[nezha]"):
                    mod += c
            by_sym[name] = by_sym.get(name, 0) + c
    return total, user, mod, by_sym


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    found = False
    for g, side in ((0, "sender"), (1, "receiver")):
        gdir = os.path.join(out, "guest%d.out" % g)
        mpath = os.path.join(gdir, "insns.map")
        if not os.path.exists(mpath):
            print("# guest %d: no %s (run with NZ_BENCH_INSNS=1)" % (g, mpath))
            continue
        found = True
        per_gib, rows = {}, []
        with open(mpath) as f:
            runs = [line.split() for line in f if line.strip()]
        for n, name, txb, rxb in runs:
            nbytes = int(txb if g == 0 else rxb)
            counts = os.path.join(out, "guest%d.insns.%s" % (g, n))
            syms = load_syms(os.path.join(gdir, "kallsyms-" + name))
            total, user, mod, by_sym = profile(counts, syms)
            gib = nbytes / 2**30
            per_gib[name] = total / gib if gib > 0 else None
            rows.append((name, total, user, mod, gib, by_sym))
        print("# guest %d (%s): guest instructions per GiB on its rails" % (g, side))
        print("# %-8s %12s %8s %12s %8s %8s %9s %s" %
              ("run", "insns (M)", "GiB", "insns/GiB(M)", "user %", "kernel %",
               "nezha.ko %", "vs iperf3"))
        for name, total, user, mod, gib, _ in rows:
            pg = per_gib[name]
            base = per_gib.get(PAIRS.get(name, ""))
            vs = "%.2fx" % (pg / base) if pg and base else "-"
            print("# %-8s %12.1f %8.2f %12s %8.1f %8.1f %9.1f %s" %
                  (name, total / 1e6, gib,
                   "%.1f" % (pg / 1e6) if pg else "-",
                   100.0 * user / max(total, 1),
                   100.0 * (total - user) / max(total, 1),
                   100.0 * mod / max(total, 1), vs))
        for name, total, _, _, gib, by_sym in rows:
            print("# guest %d, %s: top %d symbols (instructions per GiB, share)" %
                  (g, name, top))
            for sym, c in sorted(by_sym.items(), key=lambda kv: -kv[1])[:top]:
                print("#   %10.1fM/GiB %5.1f%%  %s" %
                      (c / gib / 1e6 if gib > 0 else 0, 100.0 * c / max(total, 1), sym))
        by_name = {r[0]: r for r in rows}
        for name, _, _, _, gib, by_sym in rows:
            base = by_name.get(PAIRS.get(name, ""))
            if not base or gib <= 0 or base[4] <= 0:
                continue
            diff = per_symbol_diff(by_sym, gib, base[5], base[4])
            print("# guest %d, %s against %s: M instructions per GiB more (+) "
                  "or fewer (-), by symbol; %+.1fM/GiB in all" %
                  (g, name, base[0], sum(d for _, d in diff)))
            shown = diff[:top] + [x for x in diff[-(top // 3):] if x[1] < 0 and x not in diff[:top]]
            for sym, d in shown:
                print("#   %+10.1f  %s" % (d, sym))
            rest = sum(d for x, d in diff if (x, d) not in shown)
            print("#   %+10.1f  the other %d symbols" % (rest, len(diff) - len(shown)))
    return 0 if found else 1


def per_symbol_diff(by_sym, gib, base_sym, base_gib):
    """[(symbol, M instructions per GiB more than the base)], most first.
    The two copy routines (iperf3 reads into user memory, Nezha into
    pinned pages through an iterator) count as one: the copy."""
    def norm(d, g):
        out = {}
        for sym, c in d.items():
            key = "[the copy]" if sym in COPIES else sym
            out[key] = out.get(key, 0) + c / g / 1e6
        return out
    a, b = norm(by_sym, gib), norm(base_sym, base_gib)
    diff = [(sym, a.get(sym, 0) - b.get(sym, 0)) for sym in set(a) | set(b)]
    return sorted(diff, key=lambda x: -x[1])


if __name__ == "__main__":
    sys.exit(main())
