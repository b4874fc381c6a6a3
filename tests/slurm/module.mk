# spank_ddp.so and ddp-restart for each extra Slurm version, beside the ones built against
# the machine's own Slurm: compiled against the version's headers, from the
# root file system tests/lib/slurm-root prepares (make deps), in
# $(BUILD)/slurm-VERSION/ with the same flags and -Werror. A version without
# a root is skipped, named on the "skipped optional parts" line. Slurm
# version differences live in plugin/slurm_compat.h.
ifneq ($(FUZZ),1)
ifneq ($(SAN),1)
# "VERSION:SUITE:STATE:ROOT" per version.
SLURM_EXTRA := $(shell tests/lib/slurm-root list 2>/dev/null | tr ' ' ':')
slurm_field = $(word $(2),$(subst :, ,$(1)))

# slurm_version_rules VERSION ROOT
define slurm_version_rules
SLURM_DIR_$(1) := $(BUILD)/slurm-$(1)
SLURM_PLUGIN_OBJ_$(1) := $$(patsubst $(BUILD)/%,$$(SLURM_DIR_$(1))/%,$(PLUGIN_OBJ))

# Only the Slurm headers come from the root, as system headers (like the
# machine's own in /usr/include); everything else is the machine's.
$$(SLURM_DIR_$(1))/include/slurm/spank.h: $(2)/usr/include/slurm/spank.h
	@mkdir -p $$(SLURM_DIR_$(1))/include
	$(Q)ln -sfn $(2)/usr/include/slurm $$(SLURM_DIR_$(1))/include/slurm
	$(Q)touch -h $$(SLURM_DIR_$(1))/include/slurm

$$(SLURM_DIR_$(1))/plugin/%.o: plugin/%.c $$(SLURM_DIR_$(1))/include/slurm/spank.h
	@mkdir -p $$(@D)
	$$(if $$(Q),@echo "  CC      $$@")
	$$(Q)$$(CC) $$(CFLAGS_ALL) -isystem $$(SLURM_DIR_$(1))/include $$(HWLOC_CFLAGS) -MMD -MP -c $$< -o $$@

$$(SLURM_DIR_$(1))/plugin/spank_ddp.so: $$(SLURM_PLUGIN_OBJ_$(1)) $$(CORE_LIB) plugin/spank_ddp.lds
	@mkdir -p $$(@D)
	$$(CC) -shared $$(CFLAGS_ALL) -o $$@ $$(SLURM_PLUGIN_OBJ_$(1)) $$(CORE_LIB) \
	    $$(LDFLAGS_ALL) -Wl,--version-script=plugin/spank_ddp.lds $$(HWLOC_LIBS)
TARGETS += $$(SLURM_DIR_$(1))/plugin/spank_ddp.so
OPTIONAL_BUILT += slurm-$(1)/spank_ddp.so

# ddp-restart links libslurm (its requeue), whose soname changes with the
# version: linked against the root's, it runs beside that Slurm. The
# root's libslurm needs the root's C library, which the nodes of that
# version have and this machine's linker need not check.
$$(SLURM_DIR_$(1))/bin/ddp-restart: $$(addprefix $$(SLURM_DIR_$(1))/plugin/,ddp-restart.o restart.o slurm_requeue.o args.o) $(CORE_LIB)
	@mkdir -p $$(@D)
	$$(CC) $$(CFLAGS_ALL) -o $$@ $$^ $$(LDFLAGS_ALL) \
	    -Wl,--allow-shlib-undefined $$(firstword $$(wildcard $(2)/usr/lib/*/libslurm.so)) $$(HWLOC_LIBS)
TARGETS += $$(SLURM_DIR_$(1))/bin/ddp-restart
OPTIONAL_BUILT += slurm-$(1)/ddp-restart
endef

$(foreach e,$(SLURM_EXTRA),$(if $(filter ready,$(call slurm_field,$(e),3)),\
    $(eval $(call slurm_version_rules,$(call slurm_field,$(e),1),$(call slurm_field,$(e),4))),\
    $(eval OPTIONAL_SKIPPED += slurm-$(call slurm_field,$(e),1)/spank_ddp.so (Slurm $(call slurm_field,$(e),1) $(call slurm_field,$(e),3): no root file system, see make deps))))
endif
endif
