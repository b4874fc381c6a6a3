# SPDX-License-Identifier: BSD-3-Clause
# bench/: benchmark programs, built by bench/run (make bench-progs) and
# never by `make`/`all`, so the build does not need Open MPI. Fragments are
# included in name order, before worker/module.mk: name libddp's archive
# literally in prerequisites, and use $(WORKER_LIBS) only in recipes.

BENCH_OUT := $(BUILD)/bench
BENCH_LIBDDP := $(BUILD)/worker/libddp.a
MPICC ?= mpicc

$(BENCH_OUT)/allreduce_ddp: $(BUILD)/bench/allreduce_ddp.o \
    $(BUILD)/bench/ar_driver.o $(BENCH_LIBDDP)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL) $(WORKER_LIBS)

$(BENCH_OUT)/launch_ddp: $(BUILD)/bench/launch_ddp.o $(BENCH_LIBDDP)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL) $(WORKER_LIBS)

$(BENCH_OUT)/overlap: $(BUILD)/bench/overlap.o $(BENCH_LIBDDP)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL) $(WORKER_LIBS)

# Open MPI's wrapper compiler, with the project's warnings.
$(BENCH_OUT)/allreduce_mpi: bench/allreduce_mpi.c bench/ar_driver.c \
    bench/ar_driver.h
	@mkdir -p $(@D)
	$(MPICC) $(CSTD) -O2 -g $(WARN) $(DEFS) -o $@ bench/allreduce_mpi.c \
	    bench/ar_driver.c

$(BENCH_OUT)/launch_mpi: bench/launch_mpi.c bench/launch_stats.h
	@mkdir -p $(@D)
	$(MPICC) $(CSTD) -O2 -g $(WARN) $(DEFS) -o $@ bench/launch_mpi.c

# The GPU benchmark calls CUDA and NCCL directly for its baselines.
$(BUILD)/bench/gpu.o: MOD_CFLAGS += -isystem $(CUDA_HOME)/include
$(BENCH_OUT)/gpu: $(BUILD)/bench/gpu.o $(BENCH_LIBDDP)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL) $(WORKER_LIBS) \
	    -L$(CUDA_HOME)/lib64 -lcudart -lnccl

.PHONY: bench-progs bench-progs-ddp bench-progs-mpi bench-progs-gpu
ifeq ($(HAVE_NCCL),1)
bench-progs-gpu: $(BENCH_OUT)/gpu $(BUILD)/worker/libddp-nccl.so
else
bench-progs-gpu:
	@echo "bench-progs-gpu: no nccl.h/cuda_runtime.h under CUDA_HOME=$(CUDA_HOME) (set CUDA_HOME)" >&2; exit 1
endif
bench-progs-ddp: $(BENCH_OUT)/allreduce_ddp $(BENCH_OUT)/launch_ddp \
    $(BENCH_OUT)/overlap \
    $(BUILD)/examples/train
bench-progs-mpi: $(BENCH_OUT)/allreduce_mpi $(BENCH_OUT)/launch_mpi
bench-progs: bench-progs-ddp bench-progs-mpi
