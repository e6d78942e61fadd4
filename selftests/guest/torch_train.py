#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A plain DistributedDataParallel training, the backend its only knob:
an MLP on scikit-learn's digits (8x8 images of handwritten digits, shipped
by python3-sklearn), SGD with momentum, fixed seeds, each rank its shard of
every batch.  Prints one line per step, "step N loss L" (the loss averaged
over the ranks, as every rank sees it), for comparing backends.

It is the same script under torchrun (env://) and when started by hand.
The one line a Gloo script needs to run on Nezha is the import below.

usage: torch_train.py --backend gloo|nezha [--steps 50] [--batch 64]
       [--width 256] [--pull-step N --pull-cmd CMD]
(--pull-step: at that step rank 0 runs CMD, e.g. to ask the host to pull
a rail's cable, then keeps training.)
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
from sklearn.datasets import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    import nezha_torch  # noqa: F401  registers backend "nezha"
except ImportError:
    pass

p = argparse.ArgumentParser()
p.add_argument("--backend", default="gloo")
p.add_argument("--steps", type=int, default=50)
p.add_argument("--batch", type=int, default=64)
p.add_argument("--width", type=int, default=256)
p.add_argument("--timeout", type=int, default=1800, help="seconds (torch's default)")
p.add_argument("--pull-step", type=int, default=-1)
p.add_argument("--pull-cmd", default="")
args = p.parse_args()

dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=args.timeout))
rank, world = dist.get_rank(), dist.get_world_size()

torch.manual_seed(0)
digits = load_digits()
X = torch.tensor(digits.data, dtype=torch.float32) / 16.0
Y = torch.tensor(digits.target, dtype=torch.int64)
perm = torch.randperm(len(X), generator=torch.Generator().manual_seed(1))
X, Y = X[perm], Y[perm]

model = nn.Sequential(nn.Linear(64, args.width), nn.ReLU(),
                      nn.Linear(args.width, args.width), nn.ReLU(),
                      nn.Linear(args.width, 10))
ddp = DDP(model, bucket_cap_mb=1)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
lossf = nn.CrossEntropyLoss()
per = args.batch // world
t0 = time.time()
for step in range(args.steps):
    if step == args.pull_step and rank == 0 and args.pull_cmd:
        subprocess.run(args.pull_cmd, shell=True, check=False)
        print(f"# step {step}: ran {args.pull_cmd!r}", flush=True)
    lo = (step * args.batch) % (len(X) - args.batch)
    xb = X[lo + rank * per: lo + (rank + 1) * per]
    yb = Y[lo + rank * per: lo + (rank + 1) * per]
    opt.zero_grad()
    loss = lossf(ddp(xb), yb)
    loss.backward()
    opt.step()
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    print(f"step {step} loss {mean.item() / world:.9f}", flush=True)
print(f"# {args.backend}: {args.steps} steps in {time.time() - t0:.1f} s", flush=True)
dist.destroy_process_group()
sys.exit(0)
