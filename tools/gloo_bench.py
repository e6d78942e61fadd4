#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Gloo allreduce through torch.distributed, as a trainer calls it.

The reference that nezha-bench allreduce is compared with
(selftests/guest/bench_gloo.sh, Documentation/collectives.rst).  One
process per rank, set up like nezha-bench: MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE; GLOO_SOCKET_IFNAME names the NIC(s) Gloo may use (a comma
separated list gives Gloo one device per NIC, which it uses round robin,
one collective per device).

For every size: a barrier, warm-up iterations, then timed ones; the time
of an iteration is the mean, the largest over the ranks (as nezha-bench).
Float32, sum.  busbw = algbw * 2(n-1)/n (nccl-tests).  --concurrent K runs
K allreduces at once (async_op) per iteration; algbw then counts all K.

Output, one line per size (rank 0):
    gloo allreduce size=8 count=2 conc=1 iters=20 time_us=3210.5 algbw_MBps=0.002 busbw_MBps=0.002
"""
import argparse
import os
import sys
import time


def parse_size(s):
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    s = s.strip().lower()
    if s and s[-1] in mult:
        return int(s[:-1]) * mult[s[-1]]
    return int(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-b", "--min", default="8", help="smallest size in bytes (K/M/G)")
    ap.add_argument("-e", "--max", default="64K", help="largest size in bytes")
    ap.add_argument("-f", "--factor", type=int, default=2)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup", type=int, default=5)
    ap.add_argument("-t", "--time-cap", type=float, default=0,
                    help="fewer iterations when they would take longer (seconds)")
    ap.add_argument("-N", "--concurrent", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600, help="Gloo timeout, seconds")
    ap.add_argument("--sweep", action="append", default=[],
                    help="MIN:MAX:FACTOR:ITERS:WARMUP:CONCURRENT, repeatable; replaces "
                         "-b/-e/-f/-n/-w/-N (one torch import for all)")
    a = ap.parse_args()
    sweeps = []
    for sw in a.sweep:
        f = sw.split(":")
        if len(f) != 6:
            ap.error("--sweep wants MIN:MAX:FACTOR:ITERS:WARMUP:CONCURRENT, not %s" % sw)
        sweeps.append((parse_size(f[0]), parse_size(f[1]), int(f[2]), int(f[3]),
                       int(f[4]), int(f[5])))
    if not sweeps:
        sweeps = [(parse_size(a.min), parse_size(a.max), a.factor, a.iters, a.warmup,
                   a.concurrent)]

    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print("gloo_bench: SKIP: cannot import torch: %s" % e)
        return 77
    if not dist.is_available() or not dist.is_gloo_available():
        print("gloo_bench: SKIP: this torch has no distributed gloo backend")
        return 77
    from datetime import timedelta

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    url = "tcp://%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world,
                            timeout=timedelta(seconds=a.timeout))
    if rank == 0:
        print("# gloo_bench: torch %s, %d ranks, GLOO_SOCKET_IFNAME=%s"
              % (torch.__version__, world, os.environ.get("GLOO_SOCKET_IFNAME", "")),
              flush=True)

    def iteration(ts):
        if len(ts) == 1:
            dist.all_reduce(ts[0])
            return
        works = [dist.all_reduce(t, async_op=True) for t in ts]
        for w in works:
            w.wait()

    for size, last, factor, max_iters, warmup, conc in sweeps:
        while size <= last:
            count = max(1, size // 4)
            ts = [torch.ones(count, dtype=torch.float32) for _ in range(conc)]
            dist.barrier()
            start = time.monotonic()
            for _ in range(warmup):
                iteration(ts)
            iters = max_iters
            if a.time_cap and warmup:
                each = (time.monotonic() - start) / warmup
                plan = torch.tensor([min(max_iters, max(1, int(a.time_cap / each)))
                                     if each > 0 else max_iters], dtype=torch.int64)
                dist.broadcast(plan, 0)
                iters = int(plan.item())
                dist.barrier()
            t0 = time.monotonic()
            for _ in range(iters):
                iteration(ts)
            el = torch.tensor([(time.monotonic() - t0) / iters], dtype=torch.float64)
            dist.all_reduce(el, op=dist.ReduceOp.MAX)
            t = el.item()
            algbw = count * 4 * conc / t / 1e6
            busbw = algbw * 2 * (world - 1) / world
            if rank == 0:
                print("gloo allreduce size=%d count=%d conc=%d iters=%d time_us=%.1f "
                      "algbw_MBps=%.4f busbw_MBps=%.4f"
                      % (count * 4, count, conc, iters, t * 1e6, algbw, busbw), flush=True)
            size *= factor
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
