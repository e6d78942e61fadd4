#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Every operation of the "nezha" torch.distributed backend, checked element
by element against the Gloo backend's result on the same inputs.

Each rank opens both process groups on one store: the default group on
"nezha" and a Gloo group (dist.new_group(backend="gloo")).  Every case runs
the operation on both with identical inputs; where Gloo 1.13 lacks an
operation or a dtype, the reference is computed from Gloo's all_gather of
every rank's inputs (the line says so).  Rank 0 prints one TAP line per
case with the verdict of every rank (the mismatch counts are summed over
Gloo); the exit status is 0 iff every case passed everywhere.

usage (env:// variables set): torch_ops.py
"""
import datetime
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

import nezha_torch  # registers backend "nezha"

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
dist.init_process_group("nezha", timeout=datetime.timedelta(seconds=300))
GLOO = dist.new_group(backend="gloo")
N = 0
FAILED = 0

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.int32, torch.int64, torch.uint8]
DTYPES = FLOATS + INTS
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT,
       "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX,
       "avg": dist.ReduceOp.AVG}


def name(dt):
    return str(dt).replace("torch.", "")


def gen(dt, n, op, rank, seed):
    """Rank rank's input: exact in any order of evaluation for sum/min/max
    (small integers), products of +-1, 2, 0.5; random bits for integers."""
    g = torch.Generator().manual_seed(seed * 131 + rank * 7 + 1)
    if dt.is_floating_point:
        if op == "product":
            return torch.tensor([1.0, 2.0, -1.0, 0.5])[torch.randint(0, 4, (n,), generator=g)].to(dt)
        return torch.randint(-5, 6, (n,), generator=g).to(dt)
    info = torch.iinfo(dt)
    return torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(dt)


def all_inputs(t):
    """Every rank's t, through Gloo (as raw bytes: every dtype)."""
    raw = t.contiguous().view(torch.uint8) if t.numel() else t.view(torch.uint8)
    outs = [torch.empty_like(raw) for _ in range(WORLD)]
    dist.all_gather(outs, raw, group=GLOO)
    return [o.view(t.dtype).reshape(t.shape) for o in outs]


def fold(xs, op, dt):
    """Reference reduction of a list of tensors (in float64 / int64 where
    that is exact, wrapping for integers like libnezha and Gloo)."""
    if dt.is_floating_point:
        acc = xs[0].double()
        for x in xs[1:]:
            x = x.double()
            acc = {"sum": acc + x, "avg": acc + x, "product": acc * x,
                   "min": torch.minimum(acc, x), "max": torch.maximum(acc, x)}[op]
        if op == "avg":
            acc = acc / WORLD
        return acc.to(dt)
    acc = xs[0].clone()
    for x in xs[1:]:
        acc = {"sum": acc + x, "avg": acc + x, "product": acc * x,
               "min": torch.minimum(acc, x), "max": torch.maximum(acc, x)}[op]
    if op == "avg":   # the wrapped sum, divided with truncation
        acc = torch.div(acc.to(torch.int64), WORLD, rounding_mode="trunc").to(dt)
    return acc


def report(desc, bad, why=""):
    """bad: elements wrong on this rank; the verdict is over all ranks."""
    global N, FAILED
    v = torch.tensor([int(bad)], dtype=torch.int64)
    dist.all_reduce(v, group=GLOO)
    N += 1
    if v.item():
        FAILED += 1
    if RANK == 0:
        line = ("ok" if not v.item() else "not ok") + f" {N} - {desc} ({WORLD} ranks)"
        print(line + (f": {v.item()} wrong elements" if v.item() else ""), flush=True)
        if why:
            print(f"# {why}", flush=True)
    elif bad and why:
        # Only rank 0's output is TAP; a failing rank's reason goes to its log.
        print(f"# {desc}: {why}", flush=True)


def differ(a, b, tol=0.0):
    if a.shape != b.shape or a.dtype != b.dtype:
        return max(a.numel(), b.numel(), 1)
    if tol:
        return int((~torch.isclose(a.double(), b.double(), rtol=tol, atol=tol)).sum())
    return int((a.view(-1) != b.view(-1)).sum()) if a.numel() else 0


def case(desc, fn):
    """Run fn() -> wrong element count; an exception counts as a failure."""
    t0 = time.time()
    try:
        bad, why = fn()
    except Exception as e:      # noqa: BLE001 - any failure fails the case
        bad, why = 1, f"rank {RANK}: {type(e).__name__}: {e}".replace("\n", " ")[:400]
    report(desc, bad, why)
    if RANK == 0 and time.time() - t0 > 5:
        print(f"# that case took {time.time() - t0:.1f} s", flush=True)


def gloo_or_ref(gloo_fn, ref_fn):
    """Gloo's result, or when Gloo cannot do it the local reference."""
    try:
        return gloo_fn(), ""
    except RuntimeError as e:
        return ref_fn(), f"(gloo cannot: {str(e).splitlines()[0][:60]}; reference from gloo's all_gather of the inputs)"


# ---- allreduce: every dtype x operator ----
def allreduce_case(dt, op, n, seed):
    def run():
        x = gen(dt, n, op, RANK, seed)
        a = x.clone()
        dist.all_reduce(a, op=OPS[op])
        if op == "avg":   # Gloo has no AVG: its SUM, divided as above
            xs = all_inputs(x)
            want = fold(xs, op, dt)
            tol = 1e-2 if dt in (torch.float16, torch.bfloat16) else 1e-6 if dt.is_floating_point else 0.0
            return differ(a, want, tol), ""

        def g():
            b = x.clone()
            dist.all_reduce(b, op=OPS[op], group=GLOO)
            return b
        want, why = gloo_or_ref(g, lambda: fold(all_inputs(x), op, dt))
        return differ(a, want), why
    return run


for dt in DTYPES:
    for op in OPS:
        case(f"allreduce {name(dt)} {op} x 1031", allreduce_case(dt, op, 1031, 1))
case("allreduce float32 sum x 1 Mi (ring)", allreduce_case(torch.float32, "sum", 1 << 20, 2))
case("allreduce float32 sum x 0", allreduce_case(torch.float32, "sum", 0, 3))
case("allreduce int64 max x 1", allreduce_case(torch.int64, "max", 1, 4))


def f16_avg_overflow():
    x = torch.full((1000,), 20000.0, dtype=torch.float16)
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    return int((x != 20000.0).sum()), f"got {x[0].item()}"


case("allreduce float16 avg of 20000 on every rank: no overflow", f16_avg_overflow)


def non_contiguous():
    base = gen(torch.float32, 64 * 8, "sum", RANK, 5).reshape(64, 8)
    a = base.clone().t()       # a transposed view: not contiguous
    dist.all_reduce(a)
    b = base.clone().t().contiguous()
    dist.all_reduce(b, group=GLOO)
    return differ(a.contiguous(), b), ""


case("allreduce of a non-contiguous (transposed) tensor", non_contiguous)


def coalesced():
    xs = [gen(torch.float32, n, "sum", RANK, 6 + n) for n in (3, 1000, 77)]
    a = [x.clone() for x in xs]
    dist.all_reduce_coalesced(a)
    b = [x.clone() for x in xs]
    dist.all_reduce_coalesced(b, group=GLOO)
    return sum(differ(p, q) for p, q in zip(a, b)), ""


case("allreduce_coalesced of 3 float32 tensors", coalesced)


# ---- broadcast, reduce ----
def bcast(dt, root):
    def run():
        x = gen(dt, 999, "sum", RANK, 7)
        a = x.clone()
        dist.broadcast(a, root)
        b = x.clone()
        dist.broadcast(b, root, group=GLOO)
        return differ(a, b), ""
    return run


for dt in (torch.float32, torch.int64, torch.float16, torch.uint8):
    case(f"broadcast {name(dt)} from rank {WORLD - 1}", bcast(dt, WORLD - 1))


def reduce_vs_gloo(dt, op, root):
    def run():
        x = gen(dt, 517, op, RANK, 8)
        a = x.clone()
        dist.reduce(a, root, op=OPS[op])
        b = x.clone()
        dist.reduce(b, root, op=OPS[op], group=GLOO)
        return (differ(a, b) if RANK == root else 0), ""
    return run


for dt, op in ((torch.float32, "sum"), (torch.int32, "max"), (torch.float64, "product")):
    case(f"reduce {name(dt)} {op} to rank 1", reduce_vs_gloo(dt, op, 1))


# ---- allgather, _allgather_base ----
def allgather(dt):
    def run():
        x = gen(dt, 333, "sum", RANK, 9)
        a = [torch.empty_like(x) for _ in range(WORLD)]
        dist.all_gather(a, x)

        def g():
            b = [torch.empty_like(x) for _ in range(WORLD)]
            dist.all_gather(b, x, group=GLOO)
            return b
        want, why = gloo_or_ref(g, lambda: all_inputs(x))
        return sum(differ(p, q) for p, q in zip(a, want)), why
    return run


for dt in (torch.float32, torch.int8, torch.bfloat16):
    case(f"allgather {name(dt)}", allgather(dt))


def allgather_base():
    x = gen(torch.float32, 257, "sum", RANK, 10)
    a = torch.empty(257 * WORLD)
    dist._all_gather_base(a, x)

    def g():
        b = torch.empty(257 * WORLD)
        dist._all_gather_base(b, x, group=GLOO)
        return b
    want, why = gloo_or_ref(g, lambda: torch.cat(all_inputs(x)))
    return differ(a, want), why


case("_allgather_base float32", allgather_base)


# ---- reduce_scatter, _reduce_scatter_base ----
def reduce_scatter(dt, op):
    def run():
        xs = [gen(dt, 129, op, RANK, 11 + r) for r in range(WORLD)]
        a = torch.empty_like(xs[0])
        dist.reduce_scatter(a, [x.clone() for x in xs], op=OPS[op])

        def g():
            b = torch.empty_like(xs[0])
            dist.reduce_scatter(b, [x.clone() for x in xs], op=OPS[op], group=GLOO)
            return b
        # reference: every rank's block RANK (one all_gather per block)
        want, why = gloo_or_ref(g, lambda: fold([all_inputs(x) for x in xs][RANK], op, dt))
        return differ(a, want), why
    return run


for dt, op in ((torch.float32, "sum"), (torch.int64, "min"), (torch.float16, "avg")):
    case(f"reduce_scatter {name(dt)} {op}", reduce_scatter(dt, op))


def reduce_scatter_base():
    x = gen(torch.float32, 100 * WORLD, "sum", RANK, 12)
    a = torch.empty(100)
    dist._reduce_scatter_base(a, x.clone())

    def g():
        b = torch.empty(100)
        dist._reduce_scatter_base(b, x.clone(), group=GLOO)
        return b
    want, why = gloo_or_ref(g, lambda: fold(all_inputs(x), "sum", torch.float32)[RANK * 100:(RANK + 1) * 100])
    return differ(a, want), why


case("_reduce_scatter_base float32 sum", reduce_scatter_base)


# ---- alltoall ----
def alltoall_base(uneven):
    def run():
        if uneven:   # rank r sends r + j + 1 rows to rank j
            ins = [RANK + j + 1 for j in range(WORLD)]
            outs = [j + RANK + 1 for j in range(WORLD)]
        else:
            ins = outs = None
        rows_in = sum(ins) if ins else 2 * WORLD
        rows_out = sum(outs) if outs else 2 * WORLD
        x = gen(torch.float32, rows_in * 3, "sum", RANK, 13).reshape(rows_in, 3)
        a = torch.empty(rows_out, 3)
        dist.all_to_all_single(a, x, outs, ins)

        def g():
            b = torch.empty(rows_out, 3)
            dist.all_to_all_single(b, x, outs, ins, group=GLOO)
            return b

        def ref():
            every = all_inputs_padded(x, rows_in)
            parts = []
            for j in range(WORLD):
                split = [j + k + 1 for k in range(WORLD)] if uneven else [2] * WORLD
                off = sum(split[:RANK])
                parts.append(every[j][off:off + split[RANK]])
            return torch.cat(parts)
        want, why = gloo_or_ref(g, ref)
        return differ(a, want), why
    return run


def all_inputs_padded(x, rows):
    """all_gather of tensors of different row counts: pad to the largest."""
    n = torch.tensor([rows])
    ns = [torch.empty_like(n) for _ in range(WORLD)]
    dist.all_gather(ns, n, group=GLOO)
    m = max(int(v) for v in ns)
    pad = torch.zeros(m, x.shape[1], dtype=x.dtype)
    pad[:rows] = x
    outs = [torch.empty_like(pad) for _ in range(WORLD)]
    dist.all_gather(outs, pad, group=GLOO)
    return [o[:int(ns[i])] for i, o in enumerate(outs)]


case("alltoall_base float32, equal splits", alltoall_base(False))
case("alltoall_base float32, uneven split sizes", alltoall_base(True))


def alltoall_list():
    xs = [gen(torch.int32, 10 + j, "sum", RANK, 14 + j) for j in range(WORLD)]
    a = [torch.empty(10 + RANK, dtype=torch.int32) for _ in range(WORLD)]
    dist.all_to_all(a, xs)

    def g():
        b = [torch.empty(10 + RANK, dtype=torch.int32) for _ in range(WORLD)]
        dist.all_to_all(b, xs, group=GLOO)
        return b

    def ref():
        out = []
        for j in range(WORLD):
            every = all_inputs(xs[j])    # block j of every rank
            out.append(every)
        return [out[RANK][j] for j in range(WORLD)]
    want, why = gloo_or_ref(g, ref)
    return sum(differ(p, q) for p, q in zip(a, want)), why


case("alltoall (lists) int32, a different size per destination", alltoall_list)


# ---- gather, scatter ----
def gather():
    x = gen(torch.float64, 211, "sum", RANK, 15)
    root = WORLD - 1
    a = [torch.empty_like(x) for _ in range(WORLD)] if RANK == root else None
    dist.gather(x, a, dst=root)
    b = [torch.empty_like(x) for _ in range(WORLD)] if RANK == root else None
    dist.gather(x, b, dst=root, group=GLOO)
    return (sum(differ(p, q) for p, q in zip(a, b)) if RANK == root else 0), ""


case("gather float64 to the last rank", gather)


def scatter():
    root = 0
    xs = [gen(torch.int64, 97, "sum", 9, 16 + j) for j in range(WORLD)]
    a = torch.empty(97, dtype=torch.int64)
    dist.scatter(a, xs if RANK == root else None, src=root)
    b = torch.empty(97, dtype=torch.int64)
    dist.scatter(b, xs if RANK == root else None, src=root, group=GLOO)
    return differ(a, b), ""


case("scatter int64 from rank 0", scatter)


# ---- barrier, send/recv, object collectives, async ----
def barrier():
    # Start together (Gloo's barrier), so that a rank still busy with the
    # previous case does not count its own lateness as time waited; a
    # barrier that does not wait lets ranks 1.. go at once (~0 s), one
    # that does keeps them ~1 s: 0.5 s tells the two apart even when the
    # start is a few hundred ms apart on loaded guests.
    dist.barrier(group=GLOO)
    t0 = time.time()
    if RANK == 0:
        time.sleep(1.0)
    dist.barrier()
    waited = time.time() - t0
    return (0 if waited >= 0.5 else 1), f"rank {RANK} left the barrier after {waited:.2f} s"


case("barrier waits for the last rank (rank 0 sleeps 1 s)", barrier)


def sendrecv():
    bad = 0
    # a ring: every rank sends to the next, under two tags, the second
    # posted first on the receive side: tags keep them apart.
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    m1 = gen(torch.float32, 50, "sum", RANK, 17)
    m2 = gen(torch.int64, 70, "sum", RANK, 18)
    r1 = torch.empty(50)
    r2 = torch.empty(70, dtype=torch.int64)
    w2 = dist.irecv(r2, prv, tag=7)
    w1 = dist.irecv(r1, prv, tag=3)
    s1 = dist.isend(m1, nxt, tag=3)
    s2 = dist.isend(m2, nxt, tag=7)
    for w in (w1, w2, s1, s2):
        w.wait()
    g1 = torch.empty(50)
    g2 = torch.empty(70, dtype=torch.int64)
    gw = [dist.irecv(g1, prv, tag=3, group=GLOO), dist.irecv(g2, prv, tag=7, group=GLOO),
          dist.isend(m1, nxt, tag=3, group=GLOO), dist.isend(m2, nxt, tag=7, group=GLOO)]
    for w in gw:
        w.wait()
    bad += differ(r1, g1) + differ(r2, g2)
    return bad, ""


case("send/recv with tags around a ring, receives posted in the other order", sendrecv)


def objects():
    obj = {"rank": RANK, "text": "x" * (RANK * 100 + 1), "list": list(range(RANK + 2))}
    a = [None] * WORLD
    dist.all_gather_object(a, obj)
    b = [None] * WORLD
    dist.all_gather_object(b, obj, group=GLOO)
    lst = [obj] if RANK == 1 else [None]
    dist.broadcast_object_list(lst, src=1)
    return (0 if a == b and lst[0]["rank"] == 1 else 1), ""


case("all_gather_object and broadcast_object_list", objects)


def async_many():
    """8 allreduces in flight at once, completed through their futures."""
    xs = [gen(torch.float32, 20000 + k, "sum", RANK, 19 + k) for k in range(8)]
    a = [x.clone() for x in xs]
    futs = [dist.all_reduce(t, async_op=True).get_future() for t in a]
    done = torch.futures.collect_all(futs)
    done.wait()
    b = [x.clone() for x in xs]
    for t in b:
        dist.all_reduce(t, group=GLOO)
    return sum(differ(p, q) for p, q in zip(a, b)), ""


case("8 async allreduces in flight, completed through get_future()", async_many)


def threads():
    """Two threads post to one process group (in an agreed order)."""
    xs = [gen(torch.float32, 5000, "sum", RANK, 30 + k) for k in range(2)]
    a = [x.clone() for x in xs]
    works = [None, None]
    lock = threading.Lock()
    order = threading.Event()

    def post(k):
        if k == 1:
            order.wait()
        with lock:
            works[k] = dist.all_reduce(a[k], async_op=True)
        if k == 0:
            order.set()
    ts = [threading.Thread(target=post, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for w in works:
        w.wait()
    b = [x.clone() for x in xs]
    for t in b:
        dist.all_reduce(t, group=GLOO)
    return sum(differ(p, q) for p, q in zip(a, b)), ""


case("allreduces posted from two threads", threads)


def wait_timeout():
    """wait(timeout) on a receive nobody answers raises, in about that time."""
    g = dist.new_group(backend="nezha")
    if RANK != 0:
        dist.barrier(group=GLOO)
        return 0, ""
    t = torch.empty(4)
    w = dist.irecv(t, 1, group=g, tag=99)
    t0 = time.time()
    try:
        w.wait(datetime.timedelta(seconds=2))
        bad, why = 1, "the receive completed"
    except RuntimeError as e:
        dt = time.time() - t0
        bad = 0 if 1.5 < dt < 20 and "nezha" in str(e) else 1
        why = f"{dt:.1f} s: {e}"
    # abort from another thread while the receive is still in flight
    th = threading.Thread(target=g.abort)
    th.start()
    th.join()
    try:
        w.wait()
        bad, why = 1, why + "; the receive completed after the abort"
    except RuntimeError as e:
        if "abort" not in str(e) and "ancel" not in str(e):
            bad, why = 1, why + f"; after abort: {e}"
        else:
            why += f"; after abort: {e}"
    dist.barrier(group=GLOO)
    return bad, why


case("wait(timeout) raises on a receive nobody answers; abort() from another thread fails it", wait_timeout)


def error_message():
    """A failure is a Python exception carrying libnezha's message."""
    if RANK == 0:
        w = dist.isend(torch.zeros(100), 1, tag=5)
        try:
            w.wait()
        except RuntimeError:
            pass
        return 0, ""
    if RANK == 1:
        try:
            dist.recv(torch.empty(10), 0, tag=5)
            return 1, "a 400-byte message into a 40-byte tensor did not fail"
        except RuntimeError as e:
            msg = str(e)
            return (0 if "nezha" in msg and ("long" in msg or "size" in msg) else 1), msg[:200]
    return 0, ""


case("recv of a message longer than the tensor raises RuntimeError with libnezha's reason", error_message)

dist.barrier(group=GLOO)
if RANK == 0:
    print(f"1..{N}")
    print(f"# {FAILED} of {N} failed", flush=True)
dist.destroy_process_group()
sys.exit(1 if FAILED else 0)
