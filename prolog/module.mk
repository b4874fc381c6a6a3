# Prolog tooling: ddp-nodectl (the helper that makes every decision), the
# thin Prolog/Epilog/HealthCheckProgram scripts and NHC check, their unit tests, the ddp.conf, nft listing
# and mountinfo fuzzers and the install rule.
PROLOG_CORE_SRC := prolog/nodectl_util.c prolog/nodectl_fw.c \
    prolog/nodectl_state.c prolog/nodectl_fs.c
PROLOG_CORE_OBJ := $(PROLOG_CORE_SRC:%.c=$(BUILD)/%.o)
PROLOG_LIB := $(BUILD)/libddpprolog.a
$(PROLOG_LIB): $(PROLOG_CORE_OBJ)
	@mkdir -p $(@D)
	$(AR) rcs $@ $^

# main and its table, the command families, and what they share
# (nodectl_cmd.h).
NODECTL_SRC := prolog/ddp-nodectl.c prolog/nodectl_cmd.c \
    prolog/nodectl_job.c prolog/nodectl_reconcile.c \
    prolog/nodectl_health.c prolog/nodectl_setup.c prolog/nodectl_doctor.c
# doctor names where make install puts the scripts and the plugin.
$(BUILD)/prolog/nodectl_doctor.o: MOD_CFLAGS += \
    -DDDP_LIBEXECDIR='"$(LIBEXECDIR)"' \
    -DDDP_SLURM_PLUGINDIR='"$(SLURM_PLUGINDIR)"'
$(BUILD)/bin/ddp-nodectl: $(NODECTL_SRC:%.c=$(BUILD)/%.o) $(PROLOG_LIB) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL)
TARGETS += $(BUILD)/bin/ddp-nodectl

# The helper's unit tests include its private header.
$(BUILD)/tests/unit/test-prolog-%.o: MOD_CFLAGS += -Iprolog
PROLOG_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/test-prolog-*.c))
$(BUILD)/tests/unit/test-prolog-%: $(BUILD)/tests/unit/test-prolog-%.o $(PROLOG_LIB) $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL)
UNIT_TESTS += $(PROLOG_TESTS)
# The shared-memory cleanup is tested on a segment libddp's own code made
# (its internal library, worker/module.mk): the names it removes are
# libddp's.
$(BUILD)/tests/unit/test-prolog-shm.o: MOD_CFLAGS += -Iworker
$(BUILD)/tests/unit/test-prolog-shm: $(BUILD)/tests/unit/test-prolog-shm.o $(PROLOG_LIB) $(BUILD)/worker/libddp-internal.a $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL) -lpthread

# libFuzzer target for the ddp.conf reader (built by "make fuzzers").
$(BUILD)/fuzz-conf: $(BUILD)/tests/fuzz/fuzz-conf.o $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(FUZZ_LD)
FUZZERS += $(BUILD)/fuzz-conf

# libFuzzer targets for the helper's parsers of what it reads as root: nft
# set listings and /proc/self/mountinfo.
PROLOG_FUZZ := nftlist mountinfo
$(addprefix $(BUILD)/tests/fuzz/fuzz-,$(addsuffix .o,$(PROLOG_FUZZ))): MOD_CFLAGS += -Iprolog
$(addprefix $(BUILD)/fuzz-,$(PROLOG_FUZZ)): $(BUILD)/fuzz-%: $(BUILD)/tests/fuzz/fuzz-%.o $(PROLOG_LIB) $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(FUZZ_LD)
FUZZERS += $(addprefix $(BUILD)/fuzz-,$(PROLOG_FUZZ))

# The scripts find the helper next to them (../../sbin from
# $(LIBEXECDIR)) or at the installed $(SBINDIR).
install-prolog: $(BUILD)/bin/ddp-nodectl
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBEXECDIR) \
	    $(DESTDIR)$(DATADIR)/examples $(DESTDIR)$(DATADIR)/nhc \
	    $(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(BUILD)/bin/ddp-nodectl $(DESTDIR)$(SBINDIR)/ddp-nodectl
	for s in ddp-prolog ddp-epilog ddp-healthcheck; do \
	    sed 's|@SBINDIR@|$(SBINDIR)|g' prolog/$$s >$(DESTDIR)$(LIBEXECDIR)/$$s.tmp && \
	    chmod 0755 $(DESTDIR)$(LIBEXECDIR)/$$s.tmp && \
	    mv -f $(DESTDIR)$(LIBEXECDIR)/$$s.tmp $(DESTDIR)$(LIBEXECDIR)/$$s || exit 1; \
	done
	sed 's|@SBINDIR@|$(SBINDIR)|g' prolog/ddp.nhc >$(DESTDIR)$(DATADIR)/nhc/ddp.nhc
	chmod 0644 $(DESTDIR)$(DATADIR)/nhc/ddp.nhc
	install -m 0644 examples/ddp.conf $(DESTDIR)$(DATADIR)/examples/ddp.conf
	$(call install-man,doc/ddp-prolog.8,$(DESTDIR)$(MANDIR)/man8/ddp-prolog.8)
	install -d $(DESTDIR)$(MANDIR)/man5
	$(call install-man,doc/ddp.conf.5,$(DESTDIR)$(MANDIR)/man5/ddp.conf.5)
	for m in ddp-epilog ddp-healthcheck ddp-nodectl; do \
	    echo '.so man8/ddp-prolog.8' >$(DESTDIR)$(MANDIR)/man8/$$m.8 || exit 1; \
	done
	install -d $(DESTDIR)$(SYSTEMDUNITDIR)/slurmd.service.d
	for u in ddp-nodectl-install ddp-nodectl-reconcile; do \
	    sed 's|@SBINDIR@|$(SBINDIR)|g' prolog/systemd/$$u.service.in \
	        >$(DESTDIR)$(SYSTEMDUNITDIR)/$$u.service && \
	    chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/$$u.service || exit 1; \
	done
	install -m 0644 prolog/systemd/slurmd-ddp.conf \
	    $(DESTDIR)$(SYSTEMDUNITDIR)/slurmd.service.d/ddp.conf
.PHONY: install-prolog
INSTALL_RULES += install-prolog
