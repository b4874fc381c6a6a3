# SPDX-License-Identifier: BSD-3-Clause
"""slurm-ddp for Python programs: what libddp gives C programs, for
PyTorch (torch.distributed) and any Python program.

    from slurm_ddp import Stopper
    stopper = Stopper()                  # after init_process_group
    ...                                  # each step, after optimizer.step():
    if stopper.should_stop(): save(); stopper.exit()

stop: every rank stops after the same step, checkpointed, before the
time limit, on preemption or on a signal (common/stop.h's contract).
"""

from .stop import STOP_EXIT_STATUS, Stopper

__all__ = ["STOP_EXIT_STATUS", "Stopper"]
