# SPDX-License-Identifier: BSD-3-Clause
# libddp (the worker runtime): shared and static library, pkg-config file,
# the optional NCCL backend object, examples/train, unit tests and fuzzers.

WORKER_SRC := worker/status.c worker/comm.c worker/proto.c worker/reduce.c \
              worker/auth.c worker/rdv.c worker/rdv_accept.c \
              worker/rdv_master.c worker/rdv_leader.c worker/rdv_join.c \
              worker/rdv_roster.c worker/rdv_common.c worker/tcp.c \
              worker/tcp_coll.c worker/grad.c worker/shm.c worker/hier.c \
              worker/peers.c worker/host.c worker/straggler.c \
              worker/shrink.c worker/cause.c worker/wish.c
# Resuming from a checkpoint: the restart count and atomic files.
WORKER_SRC += worker/resume.c
WORKER_OBJ := $(WORKER_SRC:%.c=$(BUILD)/%.o)
# No -lmunge: libddp loads libmunge.so.2 when munge authentication is
# used (worker/auth.c), so its programs start on hosts without MUNGE.
WORKER_LIBS := -lpthread -ldl -lm
LIBDDP_SO := $(BUILD)/worker/libddp.so
LIBDDP_A := $(BUILD)/worker/libddp.a
LIBDDP_PC := $(BUILD)/worker/ddp.pc
LIBDDP_NCCL := $(BUILD)/worker/libddp-nccl.so
TRAIN := $(BUILD)/examples/train

# The reduction loops are on the ring's critical path; -O3 vectorises them.
$(BUILD)/worker/reduce.o: MOD_CFLAGS += -O3
$(BUILD)/worker/hier.o: MOD_CFLAGS += -O3

# Where an installed libddp finds libddp-nccl.so when it is linked
# statically (no dladdr path to look beside).
$(BUILD)/worker/comm.o: MOD_CFLAGS += -DDDP_PLUGIN_DIR='"$(NCCL_PLUGINDIR)"'

$(LIBDDP_SO): $(WORKER_OBJ) $(CORE_LIB) worker/libddp.map
	@mkdir -p $(@D)
	$(CC) -shared -o $@ -Wl,-soname,libddp.so.1 \
	    -Wl,--version-script=worker/libddp.map $(WORKER_OBJ) $(CORE_LIB) \
	    $(LDFLAGS_ALL) $(WORKER_LIBS)
	ln -sf libddp.so $(@D)/libddp.so.1

# The static library carries the core helpers it uses, so -lddp is enough,
# and exports only the API: its objects are linked into one relocatable
# object whose globals are cut to what libddp.so exports (ddp.h's
# DDP_EXPORT functions), so a program's own symbols never meet libddp's
# internals. The unit tests, which reach the internals, link the plain
# archive.
LIBDDP_INTERNAL := $(BUILD)/worker/libddp-internal.a
# The core objects libddp uses: the static libraries carry them (stepkey's
# reader, and jobdir for the rest of stepkey.o; the naming line's
# formatter, and hostlist for the rest of failure.o; stop.h's words and
# the stop note).
LIBDDP_CORE_OBJ := $(BUILD)/common/ddp_util.o $(BUILD)/common/sha256.o \
                   $(BUILD)/common/stepkey.o $(BUILD)/common/jobdir.o \
                   $(BUILD)/common/ddp_host.o $(BUILD)/common/ddp_net.o \
                   $(BUILD)/common/ddp_guard.o $(BUILD)/common/failure.o \
                   $(BUILD)/common/hostlist.o $(BUILD)/common/stop.o
$(LIBDDP_INTERNAL): $(WORKER_OBJ) $(LIBDDP_CORE_OBJ)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^
$(LIBDDP_A): $(WORKER_OBJ) $(LIBDDP_CORE_OBJ) $(LIBDDP_SO)
	@mkdir -p $(@D)
	rm -f $@ $@.o $@.api
	$(LD) -r -o $@.o $(WORKER_OBJ) $(LIBDDP_CORE_OBJ)
	nm -D --defined-only $(LIBDDP_SO) | awk '$$2 == "T" {sub(/@.*/, "", $$3); print $$3}' >$@.api
	objcopy --keep-global-symbols=$@.api $@.o
	$(AR) rcs $@ $@.o
	rm -f $@.o $@.api

# The pkg-config file names the directories of the installation, so
# install-worker writes it again with the PREFIX given to `make install`.
# libdir and includedir are written relative to ${prefix} when they lie
# under PREFIX, so pkg-config --define-variable=prefix=... relocates them.
LIBDDP_PC_SED = sed -e 's|@PREFIX@|$(PREFIX)|g' \
	    -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|g' \
	    -e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|g' \
	    -e 's|@LIBS_PRIVATE@|$(WORKER_LIBS)|g' \
	    -e 's|@VERSION@|$(DDP_VERSION)|g' worker/ddp.pc.in
$(LIBDDP_PC): worker/ddp.pc.in worker/module.mk VERSION
	@mkdir -p $(@D)
	$(LIBDDP_PC_SED) >$@

TARGETS += $(LIBDDP_SO) $(LIBDDP_A) $(LIBDDP_PC) $(TRAIN)

# NCCL backend: its own object, loaded with dlopen at run time, so libddp
# itself never needs CUDA. It resolves CUDA and NCCL with dlopen as well.
ifeq ($(HAVE_NCCL),1)
$(BUILD)/worker/nccl.o: worker/nccl.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -isystem $(CUDA_HOME)/include -MMD -MP -c $< -o $@
$(LIBDDP_NCCL): $(BUILD)/worker/nccl.o $(BUILD)/common/ddp_util.o worker/libddp-nccl.map
	@mkdir -p $(@D)
	$(CC) -shared -o $@ -Wl,--version-script=worker/libddp-nccl.map \
	    $(BUILD)/worker/nccl.o $(BUILD)/common/ddp_util.o $(LDFLAGS_ALL) -ldl -lpthread
TARGETS += $(LIBDDP_NCCL)
OPTIONAL_BUILT += libddp-nccl.so
else
OPTIONAL_SKIPPED += libddp-nccl.so (no nccl.h/cuda_runtime.h under CUDA_HOME=$(CUDA_HOME))
endif

# examples/train: static libddp so it runs on any node of the job without
# a library path. Its GPU compute is a module of its own (train-gpu.so,
# beside it), loaded at run time: the program itself never needs CUDA.
TRAIN_OBJ := $(BUILD)/examples/train.o $(BUILD)/examples/train_ckpt.o
$(TRAIN): $(TRAIN_OBJ) $(LIBDDP_A)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -o $@ $(TRAIN_OBJ) $(LIBDDP_A) $(LDFLAGS_ALL) $(WORKER_LIBS)

# examples/train (libddp built in) finds the NCCL backend beside itself,
# as an installed program finds it in libddp's directory: so that
# build/examples/train uses the GPUs on a GPU cluster with no setting.
$(BUILD)/examples/libddp-nccl.so: $(LIBDDP_NCCL)
	@mkdir -p $(@D)
	ln -sf ../worker/libddp-nccl.so $@
ifeq ($(HAVE_NCCL),1)
TARGETS += $(BUILD)/examples/libddp-nccl.so
endif

TRAIN_GPU := $(BUILD)/examples/train-gpu.so
# sm_80 and sm_90 code, and PTX for newer GPUs; cudart linked in, cuBLAS
# from the node.
NVCC_ARCH ?= -gencode arch=compute_80,code=sm_80 \
	     -gencode arch=compute_90,code=[sm_90,compute_90]
ifeq ($(HAVE_NVCC),1)
$(TRAIN_GPU): examples/train_gpu.cu examples/train_compute.h
	@mkdir -p $(@D)
	$(NVCC) -O3 -std=c++17 $(NVCC_ARCH) -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror \
	    -Werror all-warnings -shared -Iexamples -o $@ $< -lcublas
TARGETS += $(TRAIN_GPU)
OPTIONAL_BUILT += train-gpu.so
else
OPTIONAL_SKIPPED += train-gpu.so (no nvcc at $(NVCC))
endif

# Unit tests: linked with the static library; test-worker-nccl uses the
# shared one so that libddp finds libddp-nccl.so beside itself.
WORKER_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/test-worker-*.c))
WORKER_TESTS_STATIC := $(filter-out $(BUILD)/tests/unit/test-worker-nccl,$(WORKER_TESTS))
$(WORKER_TESTS_STATIC): $(BUILD)/tests/unit/test-worker-%: $(BUILD)/tests/unit/test-worker-%.o $(LIBDDP_INTERNAL)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIBDDP_INTERNAL) $(LDFLAGS_ALL) $(WORKER_LIBS)
$(BUILD)/tests/unit/test-worker-nccl: $(BUILD)/tests/unit/test-worker-nccl.o $(LIBDDP_SO) $(if $(filter 1,$(HAVE_NCCL)),$(LIBDDP_NCCL))
	$(CC) $(CFLAGS_ALL) -o $@ $< -L$(BUILD)/worker -l:libddp.so \
	    -Wl,-rpath,'$$ORIGIN/../../worker' $(LDFLAGS_ALL) -lpthread
$(BUILD)/tests/unit/test-worker-nccl.o: MOD_CFLAGS += -DHAVE_NCCL_BUILD=$(HAVE_NCCL)
# Tests may use the internal header (wire formats, conversions).
$(BUILD)/tests/unit/test-worker-%.o: MOD_CFLAGS += -Iworker
UNIT_TESTS += $(WORKER_TESTS)
# The one test that makes its own credentials with libmunge; it also runs
# examples/train on a host without libmunge.
$(BUILD)/tests/unit/test-worker-auth: WORKER_LIBS += $(MUNGE_LIBS)
$(BUILD)/tests/unit/test-worker-auth: | $(TRAIN)

# libFuzzer target for the rendezvous and frame parsers (internal header).
$(BUILD)/tests/fuzz/fuzz-rdv.o: MOD_CFLAGS += -Iworker
$(BUILD)/fuzz-rdv: $(BUILD)/tests/fuzz/fuzz-rdv.o $(BUILD)/worker/proto.o $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(FUZZ_LD)
FUZZERS += $(BUILD)/fuzz-rdv
# libFuzzer target for the data-port hello.
$(BUILD)/tests/fuzz/fuzz-peer.o: MOD_CFLAGS += -Iworker
$(BUILD)/fuzz-peer: $(BUILD)/tests/fuzz/fuzz-peer.o $(BUILD)/worker/proto.o $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(FUZZ_LD)
FUZZERS += $(BUILD)/fuzz-peer
# libFuzzer target for an ABORT frame's cause and the naming line it
# becomes.
$(BUILD)/tests/fuzz/fuzz-abort.o: MOD_CFLAGS += -Iworker
$(BUILD)/fuzz-abort: $(BUILD)/tests/fuzz/fuzz-abort.o $(BUILD)/worker/proto.o $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(FUZZ_LD)
FUZZERS += $(BUILD)/fuzz-abort

.PHONY: install-worker
install-worker: $(LIBDDP_SO) $(LIBDDP_A) $(LIBDDP_PC) $(TRAIN) $(if $(filter 1,$(HAVE_NVCC)),$(TRAIN_GPU))
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
	    $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man3 \
	    $(DESTDIR)$(LIBEXECDIR)/examples
	install -m 0755 $(LIBDDP_SO) $(DESTDIR)$(LIBDIR)/libddp.so.1
	ln -sf libddp.so.1 $(DESTDIR)$(LIBDIR)/libddp.so
	install -m 0644 $(LIBDDP_A) $(DESTDIR)$(LIBDIR)/libddp.a
	install -m 0644 worker/include/ddp.h $(DESTDIR)$(INCLUDEDIR)/ddp.h
	$(LIBDDP_PC_SED) >$(DESTDIR)$(PKGCONFIGDIR)/ddp.pc
	$(call install-man,doc/libddp.3,$(DESTDIR)$(MANDIR)/man3/libddp.3)
	install -m 0755 $(TRAIN) $(DESTDIR)$(LIBEXECDIR)/examples/train
	install -d $(DESTDIR)$(DATADIR)/examples
	install -m 0644 examples/train.c examples/train_ckpt.c examples/train_ckpt.h \
	    examples/train_compute.h examples/train_gpu.cu $(DESTDIR)$(DATADIR)/examples/
	install -m 0755 examples/train.py $(DESTDIR)$(DATADIR)/examples/train.py
	$(if $(filter 1,$(HAVE_NVCC)),install -m 0755 $(TRAIN_GPU) $(DESTDIR)$(LIBEXECDIR)/examples/train-gpu.so)
	$(if $(filter 1,$(HAVE_NCCL)),install -d $(DESTDIR)$(NCCL_PLUGINDIR))
	$(if $(filter 1,$(HAVE_NCCL)),install -m 0755 $(LIBDDP_NCCL) $(DESTDIR)$(NCCL_PLUGINDIR)/libddp-nccl.so)
INSTALL_RULES += install-worker
