#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""DDP training throughput of the "nezha" backend against Gloo on the same
ranks, in one process per rank (selftests/guest/bench_train.sh).

The process opens three process groups on one store: the default one on
"nezha", Gloo on every NIC (GLOO_SOCKET_IFNAME=IFS_ALL: Gloo spreads whole
operations over them) and Gloo on the first NIC alone.  For each model it
trains with DDP over each group in turn (same seeds, same synthetic data),
WARMUP steps and then STEPS timed ones, and prints one line per run:

  result MODEL GROUP steps_per_s=X compute=Y steps=N

compute is the share of the step spent computing (forward, backward and
the optimizer, measured without communication first).

Models: "comm", one linear layer of 6.25 M parameters on one sample per
rank (the gradients' allreduce dominates), and "compute", an MLP of 1.3 M
parameters on 4 samples per rank.  --pull STEP:CMD runs CMD on rank 0 before step STEP of the
nezha and gloo-all runs (to have the host pull a rail's cable); the runs
then report how many steps they finished and the error, if any.

usage: train_bench.py --ifs rail0,rail1 [--models comm,compute]
       [--steps 3] [--warmup 1] [--groups nezha,gloo-all,gloo-one]
       [--pull STEP:CMD[|||CMD2]] [--timeout S]
"""
import argparse
import datetime
import os
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import nezha_torch  # noqa: F401  registers backend "nezha"

p = argparse.ArgumentParser()
p.add_argument("--ifs", required=True)
p.add_argument("--models", default="comm,compute")
p.add_argument("--groups", default="nezha,gloo-all,gloo-one")
p.add_argument("--steps", type=int, default=3)
p.add_argument("--warmup", type=int, default=1)
p.add_argument("--pull", default="")
p.add_argument("--timeout", type=int, default=1800)
args = p.parse_args()

tmo = datetime.timedelta(seconds=args.timeout)
dist.init_process_group("nezha", timeout=tmo)
rank, world = dist.get_rank(), dist.get_world_size()
groups = {"nezha": dist.group.WORLD}
os.environ["GLOO_SOCKET_IFNAME"] = args.ifs
groups["gloo-all"] = dist.new_group(backend="gloo", timeout=tmo)
os.environ["GLOO_SOCKET_IFNAME"] = args.ifs.split(",")[0]
groups["gloo-one"] = dist.new_group(backend="gloo", timeout=tmo)

# Under TCG a guest computes at ~0.1 GFLOP/s: the comm model is one wide
# layer on one sample (its backward needs no input gradient), the compute
# model a small MLP on a few samples, sized so that compute is about a
# third of its step (the run prints the share it measured).
MODELS = {  # name: (layer widths, batch per rank)
    "comm": ([2500, 2500], 1),
    "compute": ([256, 1024, 1024, 10], 4),
}
pull_step, pull_cmds = -1, []
if args.pull:
    s, c = args.pull.split(":", 1)
    pull_step, pull_cmds = int(s), c.split("|||")


def make(widths):
    torch.manual_seed(0)
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def step(model, opt, x, y):
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


for mname in args.models.split(","):
    widths, batch = MODELS[mname]
    g = torch.Generator().manual_seed(rank + 1)
    x = torch.randn(batch, widths[0], generator=g)
    y = torch.randint(0, widths[-1], (batch,), generator=g)
    # compute alone: the same model, no communication
    m = make(widths)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    step(m, opt, x, y)
    t0 = time.time()
    for _ in range(2):
        step(m, opt, x, y)
    t_compute = (time.time() - t0) / 2
    nparams = sum(q.numel() for q in m.parameters())
    if rank == 0:
        print(f"# model {mname}: {nparams / 1e6:.2f} M parameters, batch {batch} per rank, "
              f"compute {t_compute:.3f} s per step", flush=True)
    for gname in args.groups.split(","):
        m = make(widths)
        ddp = DDP(m, process_group=groups[gname])
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        done, err, t0 = 0, "", None
        try:
            for k in range(args.warmup + args.steps):
                if k == args.warmup:
                    t0 = time.time()
                if k == pull_step and gname != "gloo-one" and rank == 0 and pull_cmds:
                    subprocess.run(pull_cmds.pop(0), shell=True, check=False)
                    print(f"# {mname} {gname}: pulled before step {k}", flush=True)
                step(ddp, opt, x, y)
                done += 1
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            err = str(e).splitlines()[0][:200]
        secs = time.time() - t0 if t0 else 0
        timed = max(done - args.warmup, 0)
        sps = timed / secs if secs > 0 and timed else 0.0
        share = t_compute * sps if sps else 0.0
        if rank == 0:
            print(f"result {mname} {gname} steps_per_s={sps:.4f} compute={share:.2f} "
                  f"steps={done}/{args.warmup + args.steps}" + (f" error={err!r}" if err else ""),
                  flush=True)
        if err:
            os._exit(3)  # a failed Gloo group cannot be torn down cleanly
        dist.barrier(group=groups["nezha"])
dist.destroy_process_group()
sys.exit(0)
