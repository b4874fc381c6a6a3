#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# A plain PyTorch DistributedDataParallel training script in the style of
# the PyTorch tutorials: nothing in it knows about Slurm. Run it with
#   srun --nodes=2 --ntasks-per-node=2 --ddp python3 examples/train.py
# --ddp provides RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT;
# init_method="env://" reads them. Every rank prints a checksum of its final
# weights: data-parallel training is correct when all checksums are equal.
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def make_data(n=2048, dim=32, classes=4):
    # The same synthetic data set on every rank (fixed seed); the sampler
    # gives each rank its own shard.
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(n, dim, generator=g)
    w = torch.randn(dim, classes, generator=g)
    y = (x @ w).argmax(dim=1)
    return TensorDataset(x, y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    args = ap.parse_args()

    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.manual_seed(0)  # identical initial weights (DDP broadcasts anyway)

    data = make_data()
    sampler = DistributedSampler(data, num_replicas=world, rank=rank,
                                 shuffle=True, seed=42)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    ddp_model = DDP(model)
    opt = torch.optim.SGD(ddp_model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = 0.0
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(ddp_model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
        if rank == 0:
            print(f"epoch {epoch} loss {total / len(loader):.4f}", flush=True)

    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    print(f"rank {rank} local_rank {local_rank} world {world} "
          f"checksum {checksum:.10f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
