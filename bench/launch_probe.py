#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Launch probe: the same PyTorch script under srun --ddp and torchrun.

Joins the job with env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT as
either launcher sets them), completes one Gloo all_reduce and prints the
wall-clock time on rank 0, so bench/run measures srun-to-first-allreduce.
"""
import sys
import time

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", init_method="env://")
    t = torch.ones(1)
    dist.all_reduce(t)
    now = time.time()
    n = dist.get_world_size()
    if dist.get_rank() == 0:
        print("first_allreduce %.6f world %d sum %g" % (now, n, float(t[0])),
              flush=True)
    dist.destroy_process_group()
    return 0 if float(t[0]) == n else 1


if __name__ == "__main__":
    sys.exit(main())
