# SPDX-License-Identifier: BSD-3-Clause
# libddp (the worker runtime): shared and static library, pkg-config file,
# the optional NCCL backend object, examples/train, unit tests and fuzzers.

WORKER_SRC := worker/comm.c worker/proto.c worker/reduce.c worker/rdv.c \
              worker/tcp.c worker/grad.c
WORKER_OBJ := $(WORKER_SRC:%.c=$(BUILD)/%.o)
WORKER_LIBS := $(MUNGE_LIBS) -lpthread -ldl -lm
LIBDDP_SO := $(BUILD)/worker/libddp.so
LIBDDP_A := $(BUILD)/worker/libddp.a
LIBDDP_PC := $(BUILD)/worker/ddp.pc
LIBDDP_NCCL := $(BUILD)/worker/libddp-nccl.so
TRAIN := $(BUILD)/examples/train

# The reduction loops are on the ring's critical path; -O3 vectorises them.
$(BUILD)/worker/reduce.o: CFLAGS += -O3

# Where an installed libddp finds libddp-nccl.so when it is linked
# statically (no dladdr path to look beside).
$(BUILD)/worker/comm.o: CFLAGS += -DDDP_PLUGIN_DIR='"$(LIBDIR)"'

$(LIBDDP_SO): $(WORKER_OBJ) $(CORE_LIB) worker/libddp.map
	@mkdir -p $(@D)
	$(CC) -shared -o $@ -Wl,-soname,libddp.so.1 \
	    -Wl,--version-script=worker/libddp.map $(WORKER_OBJ) $(CORE_LIB) \
	    $(LDFLAGS_ALL) $(WORKER_LIBS)
	ln -sf libddp.so $(@D)/libddp.so.1

# The static library carries the core helpers it uses, so -lddp is enough.
$(LIBDDP_A): $(WORKER_OBJ) $(BUILD)/common/ddp_util.o
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

# The pkg-config file names the directories of the installation, so
# install-worker writes it again with the PREFIX given to `make install`.
LIBDDP_PC_SED = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	    -e 's|@LIBS_PRIVATE@|$(WORKER_LIBS)|g' worker/ddp.pc.in
$(LIBDDP_PC): worker/ddp.pc.in worker/module.mk
	@mkdir -p $(@D)
	$(LIBDDP_PC_SED) >$@

TARGETS += $(LIBDDP_SO) $(LIBDDP_A) $(LIBDDP_PC) $(TRAIN)

# NCCL backend: its own object, loaded with dlopen at run time, so libddp
# itself never needs CUDA. It resolves CUDA and NCCL with dlopen as well.
ifeq ($(HAVE_NCCL),1)
$(BUILD)/worker/nccl.o: worker/nccl.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -isystem $(CUDA_HOME)/include -MMD -MP -c $< -o $@
$(LIBDDP_NCCL): $(BUILD)/worker/nccl.o worker/libddp-nccl.map
	@mkdir -p $(@D)
	$(CC) -shared -o $@ -Wl,--version-script=worker/libddp-nccl.map \
	    $(BUILD)/worker/nccl.o $(LDFLAGS_ALL) -ldl -lpthread
TARGETS += $(LIBDDP_NCCL)
OPTIONAL_BUILT += libddp-nccl.so
else
OPTIONAL_SKIPPED += libddp-nccl.so (no nccl.h/cuda_runtime.h under CUDA_HOME=$(CUDA_HOME))
endif

# examples/train: static libddp so it runs on any node of the job without
# a library path.
$(TRAIN): $(BUILD)/examples/train.o $(LIBDDP_A)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIBDDP_A) $(LDFLAGS_ALL) $(WORKER_LIBS)

# Unit tests: linked with the static library; test-worker-nccl uses the
# shared one so that libddp finds libddp-nccl.so beside itself.
WORKER_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/test-worker-*.c))
WORKER_TESTS_STATIC := $(filter-out $(BUILD)/tests/unit/test-worker-nccl,$(WORKER_TESTS))
$(WORKER_TESTS_STATIC): $(BUILD)/tests/unit/test-worker-%: $(BUILD)/tests/unit/test-worker-%.o $(LIBDDP_A)
	$(CC) $(CFLAGS_ALL) -o $@ $< $(LIBDDP_A) $(LDFLAGS_ALL) $(WORKER_LIBS)
$(BUILD)/tests/unit/test-worker-nccl: $(BUILD)/tests/unit/test-worker-nccl.o $(LIBDDP_SO) $(if $(filter 1,$(HAVE_NCCL)),$(LIBDDP_NCCL))
	$(CC) $(CFLAGS_ALL) -o $@ $< -L$(BUILD)/worker -l:libddp.so \
	    -Wl,-rpath,'$$ORIGIN/../../worker' $(LDFLAGS_ALL) -lpthread
$(BUILD)/tests/unit/test-worker-nccl.o: CFLAGS += -DHAVE_NCCL_BUILD=$(HAVE_NCCL)
# Tests may use the internal header (wire formats, conversions).
$(BUILD)/tests/unit/test-worker-%.o: CFLAGS += -Iworker
UNIT_TESTS += $(WORKER_TESTS)

# libFuzzer target for the rendezvous and frame parsers (internal header).
$(BUILD)/tests/fuzz/fuzz-rdv.o: CFLAGS += -Iworker
$(BUILD)/fuzz-rdv: $(BUILD)/tests/fuzz/fuzz-rdv.o $(BUILD)/worker/proto.o $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(FUZZ_LD)
FUZZERS += $(BUILD)/fuzz-rdv

.PHONY: install-worker
install-worker: $(LIBDDP_SO) $(LIBDDP_A) $(LIBDDP_PC) $(TRAIN)
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
	    $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man3 \
	    $(DESTDIR)$(LIBEXECDIR)/examples
	install -m 0755 $(LIBDDP_SO) $(DESTDIR)$(LIBDIR)/libddp.so.1
	ln -sf libddp.so.1 $(DESTDIR)$(LIBDIR)/libddp.so
	install -m 0644 $(LIBDDP_A) $(DESTDIR)$(LIBDIR)/libddp.a
	install -m 0644 worker/include/ddp.h $(DESTDIR)$(INCLUDEDIR)/ddp.h
	$(LIBDDP_PC_SED) >$(DESTDIR)$(PKGCONFIGDIR)/ddp.pc
	install -m 0644 doc/libddp.3 $(DESTDIR)$(MANDIR)/man3/libddp.3
	install -m 0755 $(TRAIN) $(DESTDIR)$(LIBEXECDIR)/examples/train
	$(if $(filter 1,$(HAVE_NCCL)),install -m 0755 $(LIBDDP_NCCL) $(DESTDIR)$(LIBDIR)/libddp-nccl.so)
INSTALL_RULES += install-worker
