# The SPANK plugin spank_ddp.so and its helper ddp-plan. Only
# plugin/spank_ddp.c speaks to Slurm; the decisions live in the core.
DDP_PLAN := $(BUILD)/bin/ddp-plan
$(DDP_PLAN): $(BUILD)/plugin/ddp-plan.o $(CORE_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL) $(HWLOC_LIBS)
TARGETS += $(DDP_PLAN)
