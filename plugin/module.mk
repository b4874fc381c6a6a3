# The SPANK plugin spank_ddp.so and its helpers ddp-plan and ddp-restart.
# spank_ddp.c holds the SPANK hooks and dispatches to local.c (srun,
# sbatch, salloc) and remote.c (slurmstepd, with remote_topo.c and
# remote_check.c), failure.c (a failed rank ends the step; srun names the
# first), stopping.c (the job's end time for the ranks, and what follows
# an agreed stop); args.c is their Slurm-free parsing; the decisions live in the
# core. ddp-restart (--ddp-restart's supervisor, which srun's side of the
# plugin runs in srun's place) is a thin program around restart.c, the
# Slurm-free decisions.
DDP_PLAN := $(BUILD)/bin/ddp-plan
$(DDP_PLAN): $(BUILD)/plugin/ddp-plan.o $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL) $(HWLOC_LIBS)
TARGETS += $(DDP_PLAN)

DDP_RESTART := $(BUILD)/bin/ddp-restart
# It links libslurm for the requeue when no spare node is left: like the
# plugin, it runs only with the Slurm it was built for.
$(DDP_RESTART): $(BUILD)/plugin/ddp-restart.o $(BUILD)/plugin/restart.o $(BUILD)/plugin/slurm_requeue.o $(BUILD)/plugin/args.o $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL) -lslurm $(HWLOC_LIBS)
TARGETS += $(DDP_RESTART)

PLUGIN_SO := $(BUILD)/plugin/spank_ddp.so
PLUGIN_OBJ := $(addprefix $(BUILD)/plugin/,spank_ddp.o local.o remote.o remote_topo.o remote_check.o requeue.o slurm_requeue.o failure.o stopping.o args.o)
# slurm_spank_* and slurm_hostlist_* resolve in the loading program
# (srun, sbatch, salloc and slurmstepd all carry libslurmfull).
$(PLUGIN_SO): $(PLUGIN_OBJ) $(CORE_LIB) plugin/spank_ddp.lds
	@mkdir -p $(@D)
	$(CC) -shared $(CFLAGS_ALL) -o $@ $(PLUGIN_OBJ) $(CORE_LIB) \
	    $(LDFLAGS_ALL) -Wl,--version-script=plugin/spank_ddp.lds $(HWLOC_LIBS)
ifneq ($(FUZZ),1)
ifneq ($(SAN),1)
TARGETS += $(PLUGIN_SO)
endif
endif

install-plugin: $(PLUGIN_SO) $(DDP_PLAN) $(DDP_RESTART)
	install -d $(DESTDIR)$(SLURM_PLUGINDIR) $(DESTDIR)$(BINDIR) \
	    $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(LIBEXECDIR)
	install -m 0755 $(PLUGIN_SO) $(DESTDIR)$(SLURM_PLUGINDIR)/spank_ddp.so
	install -m 0755 $(DDP_PLAN) $(DESTDIR)$(BINDIR)/ddp-plan
	install -m 0755 $(DDP_RESTART) $(DESTDIR)$(LIBEXECDIR)/ddp-restart
	install -d $(DESTDIR)$(MANDIR)/man1
	$(call install-man,doc/spank-ddp.8,$(DESTDIR)$(MANDIR)/man8/spank-ddp.8)
	$(call install-man,doc/ddp-plan.1,$(DESTDIR)$(MANDIR)/man1/ddp-plan.1)
	install -d $(DESTDIR)$(DATADIR)/examples/plugstack.conf.d
	sed -e 's|/usr/local/lib/slurm/spank_ddp.so|$(SLURM_PLUGINDIR)/spank_ddp.so|g' \
	    -e 's|/etc/slurm/ddp.conf|$(DDP_CONF)|g' examples/plugstack.conf.d/ddp.conf \
	    >$(DESTDIR)$(DATADIR)/examples/plugstack.conf.d/ddp.conf
.PHONY: install-plugin
INSTALL_RULES += install-plugin

# Unit tests of the plugin's Slurm-free parsing and restart decisions.
$(BUILD)/tests/unit/test-plugin-%: $(BUILD)/tests/unit/test-plugin-%.o $(BUILD)/plugin/restart.o $(BUILD)/plugin/args.o $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL) $(HWLOC_LIBS)
UNIT_TESTS += $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/test-plugin-*.c))

# libFuzzer targets (make fuzzers): parsers of hostlists, tasks-per-node
# strings, GPU lists, the plugin's options and the verdict lines a task
# hands slurmstepd.
PLUGIN_FUZZ := hostlist tasks gpulist options requeue failure
$(addprefix $(BUILD)/fuzz-,$(PLUGIN_FUZZ)): $(BUILD)/fuzz-%: $(BUILD)/tests/fuzz/fuzz-%.o $(BUILD)/plugin/args.o $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(FUZZ_LD) $(HWLOC_LIBS)
FUZZERS += $(addprefix $(BUILD)/fuzz-,$(PLUGIN_FUZZ))
# The plugin's tests and fuzzers include plugin/args.h.
$(BUILD)/tests/unit/test-plugin-%.o: MOD_CFLAGS += -Iplugin
$(addprefix $(BUILD)/tests/fuzz/fuzz-,$(addsuffix .o,$(PLUGIN_FUZZ))): MOD_CFLAGS += -Iplugin
