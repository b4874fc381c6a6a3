# SPDX-License-Identifier: BSD-3-Clause
# ddp-check: the step check that srun --ddp-check runs from every task
# (and that runs alone as `srun --ddp ddp-check`). Linked with the static
# libddp, like examples/train, so it runs on any node of the job.
CHECK_OBJ := $(BUILD)/check/ddp-check.o $(BUILD)/check/gpu.o \
             $(BUILD)/check/links.o $(BUILD)/check/report.o \
             $(BUILD)/check/plan.o $(BUILD)/check/progress.o \
             $(BUILD)/check/json.o $(BUILD)/check/json_file.o
DDP_CHECK := $(BUILD)/bin/ddp-check
# worker/module.mk is read after this file: name its library directly.
CHECK_LIBDDP := $(BUILD)/worker/libddp.a

# libddp.a exports only the API; the core helpers come from the core.
$(DDP_CHECK): $(CHECK_OBJ) $(CHECK_LIBDDP) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -o $@ $(CHECK_OBJ) $(CHECK_LIBDDP) $(CORE_LIB) \
	    $(LDFLAGS_ALL) $(WORKER_LIBS)
ifneq ($(FUZZ),1)
TARGETS += $(DDP_CHECK)
endif

.PHONY: install-check
install-check: $(DDP_CHECK)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 0755 $(DDP_CHECK) $(DESTDIR)$(BINDIR)/ddp-check
	$(call install-man,doc/ddp-check.1,$(DESTDIR)$(MANDIR)/man1/ddp-check.1)
INSTALL_RULES += install-check

# Unit tests of the decisions (options, slow links, the report, the
# collectives' plan).
CHECK_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/test-check-*.c))
$(CHECK_TESTS): $(BUILD)/tests/unit/test-check-%: $(BUILD)/tests/unit/test-check-%.o $(BUILD)/check/report.o $(BUILD)/check/links.o $(BUILD)/check/plan.o $(BUILD)/check/progress.o $(BUILD)/check/json.o $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL) -lm -lpthread
$(BUILD)/tests/unit/test-check-%.o: MOD_CFLAGS += -Icheck
UNIT_TESTS += $(CHECK_TESTS)
