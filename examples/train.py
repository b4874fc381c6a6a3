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
# are equal. It also prints "params_sha256 HEX rank R", a digest of the
# weights' bytes, equal bit for bit on every rank.
#
# --checkpoint DIR: rank 0 saves the model, the optimizer and the epoch to
# DIR/train.pt every --checkpoint-every E epochs (default 1) and after the
# last, and every rank resumes from it when it is there: a run killed at
# any moment and started again the same way ends with the weights of an
# uninterrupted run, bit for bit. DIR must be a directory every node sees,
# such as the job's $DDP_SHARED_DIR.
#
# An agreed stop (python/slurm_ddp, the Python side of srun --ddp's stop:
# the time limit near, preemption, a signal to any rank): every rank
# stops after the same step and prints "train.py: rank R stopped after
# step G (WHY)", G the steps trained since the training began; with
# --checkpoint rank 0 saves that step ("train.py: checkpoint at step G in
# DIR/train.pt"), and the run started again goes on with the next batch
# of that epoch ("resuming from ...: S of M epochs done, step G"), ending
# bit-identical to an uninterrupted run. The ranks exit with status 75.
#
# --times (or DDP_TRAIN_TIMES=1): every rank also prints one line per phase
# of its start, "train.py: time rank R PHASE SECONDS" with SECONDS from
# CLOCK_REALTIME (comparable across nodes): start (the script began),
# rendezvous (init_process_group returned), checkpoint (loaded, with
# --checkpoint) and first-allreduce (the first step's gradients reduced).
# bench/recovery reads them.
import argparse
import hashlib
import os
import sys
import tempfile
import time

STARTED = time.clock_gettime(time.CLOCK_REALTIME)

import itertools

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

try:
    from slurm_ddp import Stopper
except ImportError:
    # Run from the source tree: the module is in python/ beside examples/.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "python"))
    try:
        from slurm_ddp import Stopper
    except ImportError:
        sys.exit("train.py: the Python module slurm_ddp is not installed "
                 "(make install, or the python3-slurm-ddp package; from a "
                 "source tree, PYTHONPATH=python)")


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


CKPT_NAME = "train.pt"
# Version 2 adds the batches done in the epoch under way (an agreed stop
# saves in the middle of an epoch) and that epoch's loss so far; version
# 1 (whole epochs only) is still read.
CKPT_VERSION = 2


def save_checkpoint(directory, model, opt, epochs_done, world, batches=0,
                    loss_total=0.0):
    """Rank 0: the state after epochs_done epochs and batches batches of
    the next one into DIR/train.pt, so that no crash leaves a torn file
    under that name: a new file beside it (mkstemp: O_EXCL, 0600) is
    written and synced, renamed over it, and the directory synced. The
    data order needs no state of its own: the DistributedSampler's
    set_epoch makes it a function of the epoch."""
    state = {"version": CKPT_VERSION, "world": world, "epoch": epochs_done,
             "batches": batches, "loss_total": loss_total,
             "model": model.state_dict(), "optimizer": opt.state_dict()}
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{CKPT_NAME}.tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(directory, CKPT_NAME))
    except BaseException:
        os.unlink(tmp)
        raise
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def load_checkpoint(directory, model, opt, device, world):
    """Every rank: (epochs done, batches done of the next epoch, that
    epoch's loss so far) according to DIR/train.pt, with the model and
    the optimizer restored; (0, 0, 0.0) when there is no checkpoint yet.
    Exits saying why when the checkpoint does not fit this run."""
    path = os.path.join(directory, CKPT_NAME)
    try:
        state = torch.load(path, map_location=device)
    except FileNotFoundError:
        return 0, 0, 0.0
    except Exception as e:  # a damaged file: pickle and zip errors vary
        sys.exit(f"train.py: {path} cannot be loaded ({e}); remove it to "
                 "train from the start")
    if not isinstance(state, dict) or state.get("version") not in (1, 2):
        sys.exit(f"train.py: {path} is not a version 1 or 2 checkpoint of "
                 "train.py; remove it to train from the start")
    if state["world"] != world:
        sys.exit(f"train.py: {path} was written by a world of "
                 f"{state['world']} ranks, this run has {world}: each "
                 "rank's share of the data, and so the training, depends "
                 f"on the world size; run with {state['world']} ranks, or "
                 "give another --checkpoint directory to train from the "
                 "start")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    return (state["epoch"], state.get("batches", 0),
            state.get("loss_total", 0.0))


def params_digest(model):
    """SHA-256 of the parameters' bytes: equal only when bit-identical."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def say_time(on, rank, phase, when=None):
    # Flushed at once: a rank may be killed right after.
    if on:
        if when is None:
            when = time.clock_gettime(time.CLOCK_REALTIME)
        print(f"train.py: time rank {rank} {phase} {when:.6f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                    help="auto: this rank's GPU (LOCAL_RANK) when CUDA is "
                         "available, else the CPU")
    ap.add_argument("--checkpoint", metavar="DIR",
                    help="save to and resume from DIR/train.pt")
    ap.add_argument("--checkpoint-every", type=int, metavar="E",
                    help="epochs between two checkpoints (default 1)")
    ap.add_argument("--times", action="store_true",
                    help="each rank prints \"train.py: time rank R PHASE "
                         "SECONDS\" (CLOCK_REALTIME) for start, rendezvous, "
                         "checkpoint and first-allreduce (also "
                         "DDP_TRAIN_TIMES=1)")
    args = ap.parse_args()
    times = args.times or os.environ.get("DDP_TRAIN_TIMES") == "1"
    if args.checkpoint_every is not None and not args.checkpoint:
        ap.error("--checkpoint-every needs --checkpoint DIR")
    if args.checkpoint_every is not None and args.checkpoint_every < 1:
        ap.error("--checkpoint-every must be 1 or more")
    if args.checkpoint and not os.path.isdir(args.checkpoint):
        ap.error(f"--checkpoint {args.checkpoint}: no such directory (give "
                 "a directory that exists on every node, such as "
                 "$DDP_SHARED_DIR)")
    every = args.checkpoint_every or 1

    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device, backend = pick_device(args.device, rank, local_rank)
    dist.init_process_group(backend, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    say_time(times, rank, "start", STARTED)
    say_time(times, rank, "rendezvous")
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

    # Every rank asks after each step whether the ranks agreed to stop.
    stopper = Stopper()
    per_epoch = len(loader)
    start, skip, resumed_total = 0, 0, 0.0
    if args.checkpoint:
        start, skip, resumed_total = load_checkpoint(args.checkpoint, model,
                                                     opt, device, world)
        # Every rank must go on from the same step: a directory that is
        # not shared would otherwise train ranks on different epochs.
        at = start * per_epoch + skip
        seen = torch.tensor([at, -at], dtype=torch.int64, device=device)
        dist.all_reduce(seen, op=dist.ReduceOp.MAX)
        if seen[0].item() != -seen[1].item():
            sys.exit(f"train.py: rank {rank}: the ranks did not all find the "
                     f"same checkpoint in {args.checkpoint}: it must be a "
                     "directory that every node shares")
        say_time(times, rank, "checkpoint")
        restarts = os.environ.get("DDP_RESTART_COUNT",
                                  os.environ.get("SLURM_RESTART_COUNT", "0"))
        if rank == 0 and (start or skip):
            print(f"train.py: resuming from "
                  f"{os.path.join(args.checkpoint, CKPT_NAME)} (restart "
                  f"{restarts}): {start} of {args.epochs} epochs done"
                  + (f", step {at}" if skip else ""), flush=True)

    # DDP lays its gradient buckets out anew after its first backward pass,
    # in the order the gradients became ready: a resumed run's first step
    # would sum in another order than the uninterrupted run's step at the
    # same epoch, and with three ranks or more round differently. One
    # backward pass of a zero loss (its gradients are exact zeros, and no
    # optimizer step follows it) makes every training step of a fresh or a
    # resumed run use the rebuilt layout.
    warm = data.tensors[0][:args.batch_size].to(device)
    (ddp_model(warm).sum() * 0).backward()
    opt.zero_grad()

    first = True
    for epoch in range(start, args.epochs):
        sampler.set_epoch(epoch)
        total = 0.0
        batches = enumerate(loader)
        if epoch == start and skip:
            # The epoch an agreed stop cut: the same order, from the batch
            # after the last one trained (those before are read and
            # dropped; a large data set would skip their indices instead).
            batches = itertools.islice(batches, skip, None)
            total = resumed_total
        for i, (x, y) in stopper.watch(batches):
            x, y = x.to(device), y.to(device)
            opt.zero_grad()
            loss = loss_fn(ddp_model(x), y)
            loss.backward()
            opt.step()
            if first:
                say_time(times, rank, "first-allreduce")
                first = False
            total += loss.item()
            if stopper.should_stop():
                step = epoch * per_epoch + i + 1
                print(f"train.py: rank {rank} stopped after step {step} "
                      f"({stopper.why})", flush=True)
                if args.checkpoint and rank == 0:
                    save_checkpoint(args.checkpoint, model, opt, epoch, world,
                                    i + 1, total)
                    print(f"train.py: checkpoint at step {step} in "
                          f"{os.path.join(args.checkpoint, CKPT_NAME)}",
                          flush=True)
                stopper.exit()
        if rank == 0:
            print(f"epoch {epoch} loss {total / len(loader):.4f}", flush=True)
        done = epoch + 1
        if (args.checkpoint and rank == 0
                and (done % every == 0 or done == args.epochs)):
            with stopper.checkpointing():
                save_checkpoint(args.checkpoint, model, opt, done, world)
            print(f"train.py: checkpoint of epoch {done} in "
                  f"{os.path.join(args.checkpoint, CKPT_NAME)}", flush=True)

    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    print(f"rank {rank} local_rank {local_rank} world {world} "
          f"device {device} backend {backend} checksum {checksum:.10f}", flush=True)
    print(f"params_sha256 {params_digest(model)} rank {rank}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
