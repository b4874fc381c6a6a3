#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""examples/train's model in PyTorch DDP with NCCL, for bench/train-gpu.

The same MLP (3072-H-10, ReLU, cross-entropy, plain SGD, fp32 without
TF32), batch B per rank, on synthetic data that lives on the GPU, with
gradients as bucket views as examples/train uses them. Started once per
rank with the env:// variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT), as srun --ddp sets them. --no-overlap reduces the gradients
only after the whole backward pass (one flat allreduce), the baseline for
how much communication the overlap hides.

Rank 0 prints one line:
  RESULT impl=torch world=N hidden=H batch=B overlap=0|1 steps=S step_ms=X
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--no-overlap", action="store_true")
    a = ap.parse_args()

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", local)

    torch.manual_seed(1000 + rank)
    model = torch.nn.Sequential(
        torch.nn.Linear(3072, a.hidden), torch.nn.ReLU(), torch.nn.Linear(a.hidden, 10)
    ).to(dev)
    ddp = DDP(model, device_ids=[local], gradient_as_bucket_view=True)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator(device=dev).manual_seed(12345 + rank)
    n_batches = 16
    xs = torch.rand(n_batches, a.batch, 3072, device=dev, generator=gen) - 0.5
    ys = torch.randint(0, 10, (n_batches, a.batch), device=dev, generator=gen)

    def step(i):
        x, y = xs[i % n_batches], ys[i % n_batches]
        opt.zero_grad(set_to_none=False)
        if a.no_overlap:
            with ddp.no_sync():
                loss_fn(ddp(x), y).backward()
            grads = [p.grad for p in model.parameters()]
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat, op=dist.ReduceOp.AVG)
            off = 0
            for g in grads:
                g.copy_(flat[off : off + g.numel()].view_as(g))
                off += g.numel()
        else:
            loss_fn(ddp(x), y).backward()
        opt.step()

    for i in range(a.warmup):
        step(i)
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(a.steps):
        step(i)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / a.steps
    if rank == 0:
        print(
            f"RESULT impl=torch world={world} hidden={a.hidden} batch={a.batch} "
            f"overlap={0 if a.no_overlap else 1} steps={a.steps} step_ms={ms:.3f}",
            flush=True,
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
