#!/usr/bin/env python3
"""train_ddp.py - a small PyTorch DDP trainer that reports to `grit launch` and resumes
exactly: after any crash it continues from its newest complete checkpoint and ends with the
same weights, bit for bit, as a run that never failed.

Run it with torchrun (gloo on CPU, NCCL when every rank has a GPU):

    torchrun --nproc_per_node 2 examples/pytorch/train_ddp.py --ckpt-dir ckpt --out final.pt

and under grit's supervisor, one torchrun per node slot (docs/pytorch.md):

    grit launch --nodes 2 --spares 1 --run runs/pt -- \
        python3 -m grit_client torchrun --master_port 29611 \
        examples/pytorch/train_ddp.py --ckpt-dir runs/pt/ckpt --out runs/pt/final.pt

What "exactly" takes (all of it is in each checkpoint, written by rank 0 atomically):
- model and optimiser state (AdamW moments, step counts) and the LR scheduler;
- the data position: the sample order is a pure function of (seed, epoch) through
  DistributedSampler.set_epoch, so the step number alone says where to continue;
- every rank's RNG states (torch, Python's random, NumPy): dropout and the noise
  augmentation differ per rank, so rank 0 gathers all of them into the checkpoint;
- deterministic kernels: one thread (torch.set_num_threads(1)) and
  torch.use_deterministic_algorithms(True); the all-reduce runs at the same point of every
  step (a communication hook, also timed for the heartbeat's comm_time).
A checkpoint from a different world size is refused (the per-rank RNG streams and the data
split depend on it).
"""
import argparse
import os
import random
import sys
import threading
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler, TensorDataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import grit_client as grit  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=60, help="optimiser steps in all (default 60)")
    p.add_argument("--batch", type=int, default=8, help="samples per rank per step (8)")
    p.add_argument("--samples", type=int, default=512, help="synthetic data set size (512)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--ckpt-dir", required=True, help="checkpoints: step_NNNNNNNN.pt")
    p.add_argument("--ckpt-every", type=int, default=5, help="steps between checkpoints (5)")
    p.add_argument("--keep", type=int, default=3, help="checkpoints kept (3)")
    p.add_argument("--out", help="final model and optimiser state (torch.save), by rank 0")
    p.add_argument("--step-sleep", type=float, default=0.0,
                   help="seconds of extra work per step (stands in for a bigger model)")
    p.add_argument("--chatter", type=float, default=0.0,
                   help="print a line every S seconds from a side thread, even while a step "
                        "is stuck (tests: output keeps growing during a hang)")
    return p.parse_args()


class Net(nn.Module):
    """A small MLP with dropout (so the torch RNG state matters)."""

    def __init__(self, d_in=16, d_hidden=64, d_out=4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, d_hidden), nn.GELU(), nn.Dropout(0.1),
                                 nn.Linear(d_hidden, d_hidden), nn.GELU(),
                                 nn.Linear(d_hidden, d_out))

    def forward(self, x):
        return self.net(x)


def synthetic_data(n, seed):
    """A fixed regression task: y = tanh(x W) + noise, from its own generator."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    w = torch.randn(16, 4, generator=g)
    y = torch.tanh(x @ w) + 0.05 * torch.randn(n, 4, generator=g)
    return TensorDataset(x, y)


def rng_state(cuda):
    s = {"torch": torch.get_rng_state(), "python": random.getstate(),
         "numpy": np.random.get_state()}
    if cuda:  # dropout on a GPU draws from the device's generator
        s["cuda"] = torch.cuda.get_rng_state()
    return s


def set_rng_state(s):
    torch.set_rng_state(s["torch"])
    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    if "cuda" in s:
        torch.cuda.set_rng_state(s["cuda"])


def main():
    args = parse_args()
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    distributed = "WORLD_SIZE" in os.environ
    cuda = torch.cuda.is_available() and distributed and \
        torch.cuda.device_count() >= int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if distributed:
        dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else \
        torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    grit.init(rank=rank)
    print("train_ddp: rank %d/%d pid %d node %s %s" % (
        rank, world, os.getpid(), grit.node() or "-",
        "supervised" if grit.enabled() else "not supervised"), flush=True)

    # the same initial weights everywhere; then a per-rank stream for dropout and noise
    torch.manual_seed(args.seed)
    model = Net().to(device)
    torch.manual_seed(args.seed * 1000 + rank + 1)  # also seeds the CUDA generators
    random.seed(args.seed * 1000 + rank + 1)
    np.random.seed(args.seed * 1000 + rank + 1)
    data = synthetic_data(args.samples, args.seed)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True,
                                 seed=args.seed, drop_last=True)
    steps_per_epoch = len(sampler) // args.batch
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 10) * max(0.1, 1 - s / max(1, args.steps)))

    # resume: rank 0 picks the newest complete checkpoint, everyone loads that one
    pick = [grit.latest_checkpoint(args.ckpt_dir) if rank == 0 else None]
    if distributed:
        dist.broadcast_object_list(pick, src=0)
    start = 0
    if pick[0] is not None:
        step0, path = pick[0]
        ck = torch.load(path, map_location="cpu")
        if ck["world"] != world:
            sys.exit("train_ddp: %s was written by %d ranks, this run has %d; exact resume "
                     "needs the same world size" % (path, ck["world"], world))
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
        sched.load_state_dict(ck["sched"])
        set_rng_state(ck["rng"][rank])
        start = ck["step"]
        assert start == step0, (start, step0)
        grit.checkpoint_loaded(start, path)
        print("train_ddp: rank %d resumed from %s (step %d)" % (rank, path, start), flush=True)
    if distributed:
        dist.barrier()  # nobody saves (and prunes) before everyone has loaded

    comm = [0.0]
    if distributed:
        def timed_allreduce(_, bucket):
            # a synchronous all-reduce at a fixed point of the step: deterministic, and its
            # wall time is this rank's wait for the others (the heartbeat's comm_time)
            t = time.perf_counter()
            buf = bucket.buffer()
            dist.all_reduce(buf)
            if cuda:
                torch.cuda.synchronize()
            buf.div_(world)
            comm[0] += time.perf_counter() - t
            fut = torch.futures.Future()
            fut.set_result(buf)
            return fut
        model = DDP(model, device_ids=[device.index] if cuda else None)
        model.register_comm_hook(None, timed_allreduce)

    # the side thread is stopped and joined before the interpreter exits: a daemon thread
    # caught printing at shutdown can abort Python ("could not acquire lock for <stdout> at
    # interpreter shutdown"), a failed worker after a finished run
    chatter_stop, chatter_thread = threading.Event(), None
    if args.chatter > 0:
        def chatter():
            while not chatter_stop.wait(args.chatter):
                print("train_ddp: rank %d alive" % rank, flush=True)
        chatter_thread = threading.Thread(target=chatter, daemon=True)
        chatter_thread.start()

    loss_fn = nn.MSELoss()
    step = start
    model.train()
    while step < args.steps:
        epoch, k = divmod(step, steps_per_epoch)
        sampler.set_epoch(epoch)
        idx = list(sampler)[k * args.batch:(k + 1) * args.batch]
        t0 = time.perf_counter()
        comm[0] = 0.0
        x, y = data.tensors[0][idx], data.tensors[1][idx]
        noise = torch.from_numpy(np.random.standard_normal(x.shape).astype(np.float32))
        scale = 0.02 if random.random() < 0.5 else 0.0  # Python's RNG: sometimes no noise
        x, y = (x + scale * noise).to(device), y.to(device)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        if args.step_sleep > 0:
            time.sleep(args.step_sleep)
        step += 1
        dt = time.perf_counter() - t0
        grit.beat(step, loss=loss.item(), tokens=step * args.batch * world, step_time=dt,
                  comm_time=comm[0])
        if rank == 0:
            print("train_ddp: step %d loss %.6f" % (step, loss.item()), flush=True)
        if step % args.ckpt_every == 0 or step == args.steps:
            rngs = [None] * world
            if distributed:
                dist.all_gather_object(rngs, rng_state(cuda))
            else:
                rngs[0] = rng_state(cuda)
            if rank == 0:
                inner = model.module if distributed else model
                grit.save_checkpoint({"step": step, "world": world, "model": inner.state_dict(),
                                      "optim": opt.state_dict(), "sched": sched.state_dict(),
                                      "rng": rngs, "args": vars(args)},
                                     args.ckpt_dir, step, keep=args.keep)
    if distributed:
        dist.barrier()
    if rank == 0 and args.out:
        inner = model.module if distributed else model
        state = {"model": inner.state_dict(), "optim": opt.state_dict(), "step": step}
        tmp = args.out + ".tmp"
        torch.save(state, tmp)
        os.replace(tmp, args.out)
        print("train_ddp: wrote %s" % args.out, flush=True)
    if chatter_thread is not None:
        chatter_stop.set()
        chatter_thread.join()
    grit.done(step)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
