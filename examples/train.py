#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# A plain PyTorch DistributedDataParallel training script in the style of
# the PyTorch tutorials: nothing in it knows about Slurm. Run it with
#   srun --nodes=2 --gpus-per-node=4 --ddp python3 examples/train.py
#   srun --nodes=2 --ntasks-per-node=2 --ddp python3 examples/train.py  (CPU)
# --ddp provides RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT;
# init_method="env://" reads them. --ddp leaves all of the step's GPUs of a
# node visible to each of its ranks, so each rank picks its own with
# LOCAL_RANK: without torch.cuda.set_device every rank would use GPU 0.
# With CUDA the ranks talk NCCL, else Gloo. Every rank prints a checksum of
# its final weights: data-parallel training is correct when all checksums
# are equal.
import argparse
import os
import sys

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


def pick_device(want, rank, local_rank):
    """The device and backend of this rank: its own GPU with NCCL, or the
    CPU with Gloo. Exits with a message that says what would work when the
    request cannot be met."""
    if want == "cpu" or (want == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu"), "gloo"
    if not torch.cuda.is_available():
        sys.exit(f"train.py: rank {rank}: --device cuda, but PyTorch sees no "
                 "GPU (torch.cuda.is_available() is False); ask Slurm for GPUs "
                 "(srun --gpus-per-node=N --ddp) or use --device cpu")
    gpus = torch.cuda.device_count()
    if local_rank >= gpus:
        sys.exit(f"train.py: rank {rank}: LOCAL_RANK {local_rank} but this "
                 f"node shows {gpus} GPU(s); start one rank per GPU "
                 f"(srun --gpus-per-node={gpus} --ddp, without "
                 "--ntasks-per-node) or use --device cpu")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank), "nccl"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                    help="auto: this rank's GPU (LOCAL_RANK) when CUDA is "
                         "available, else the CPU")
    args = ap.parse_args()

    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device, backend = pick_device(args.device, rank, local_rank)
    dist.init_process_group(backend, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # identical initial weights (DDP broadcasts anyway)

    data = make_data()
    sampler = DistributedSampler(data, num_replicas=world, rank=rank,
                                 shuffle=True, seed=42)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    model.to(device)
    ddp_model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp_model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            opt.zero_grad()
            loss = loss_fn(ddp_model(x), y)
            loss.backward()
            opt.step()
            total += loss.item()
        if rank == 0:
            print(f"epoch {epoch} loss {total / len(loader):.4f}", flush=True)

    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    print(f"rank {rank} local_rank {local_rank} world {world} "
          f"device {device} backend {backend} checksum {checksum:.10f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
