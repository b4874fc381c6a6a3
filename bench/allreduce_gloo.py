#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Allreduce benchmark of PyTorch's Gloo backend (fp32 sum, in place).

The same method and CSV as bench/ar_driver.c: warm-up, then iterations each
preceded by a barrier, per-iteration time = max over ranks, buffer refilled
and verified at every iteration. Rank environment: RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT (env://), GLOO_SOCKET_IFNAME pins the interface.
"""
import argparse
import sys
import time

import torch
import torch.distributed as dist


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("-s", default="8,1024,1048576", help="sizes in bytes")
    p.add_argument("-n", type=int, default=20, help="min iterations")
    p.add_argument("-t", type=float, default=0.25, help="min seconds")
    p.add_argument("-f", type=int, default=5, help="floor iterations")
    p.add_argument("-c", type=float, default=1.0, help="cap seconds")
    p.add_argument("-m", type=int, default=1000, help="max iterations")
    p.add_argument("-w", type=int, default=5, help="warm-up iterations")
    p.add_argument("-W", type=int, default=2, help="warm-up from 32 MiB")
    a = p.parse_args(argv)
    a.sizes = [int(x) for x in a.s.split(",")]
    if any(b < 4 or b % 4 for b in a.sizes):
        p.error("sizes must be multiples of 4 bytes")
    return a


def run_size(a, nbytes, rank, n):
    count = nbytes // 4
    idx = torch.arange(count, dtype=torch.int64) % 13 + 1
    init = (idx + rank).to(torch.float32)
    want = (n * idx + n * (n - 1) // 2).to(torch.float32)
    buf = torch.empty(count, dtype=torch.float32)
    tmax = torch.zeros(1, dtype=torch.float64)
    bad = 0
    for _ in range(a.W if nbytes >= 32 << 20 else a.w):
        buf.copy_(init)
        dist.all_reduce(buf)
        bad += int((buf != want).sum())
    times, total = [], 0.0
    while True:
        it = len(times)
        if (it >= a.m or (it >= a.n and total >= a.t)
                or (it >= a.f and total >= a.c)):
            break
        buf.copy_(init)
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        t = time.perf_counter() - t0
        bad += int((buf != want).sum())
        tmax[0] = t
        dist.all_reduce(tmax, op=dist.ReduceOp.MAX)
        times.append(float(tmax[0]))
        total += float(tmax[0])
    tmax[0] = bad
    dist.all_reduce(tmax, op=dist.ReduceOp.MAX)
    bad = int(tmax[0])
    times.sort()
    it = len(times)
    med = times[it // 2] if it % 2 else (times[it // 2 - 1] + times[it // 2]) / 2
    p95 = times[(it * 95 + 99) // 100 - 1]
    algbw = nbytes / med / 1e9
    busbw = algbw * 2 * (n - 1) / n
    if rank == 0:
        print("%d,%d,%.3f,%.3f,%.3f,%.3f,%.6f,%.6f,%s" % (
            nbytes, it, med * 1e6, p95 * 1e6, times[0] * 1e6, times[-1] * 1e6,
            algbw, busbw, "yes" if bad == 0 else "NO"), flush=True)
    if bad and rank == 0:
        print("allreduce of %d bytes: %d wrong elements" % (nbytes, bad),
              file=sys.stderr)
    return bad == 0


def main():
    a = parse(sys.argv[1:])
    dist.init_process_group("gloo", init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print("bytes,iters,median_us,p95_us,min_us,max_us,"
              "algbw_GBps,busbw_GBps,ok", flush=True)
    ok = True
    for nbytes in a.sizes:
        ok = run_size(a, nbytes, rank, n) and ok
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
