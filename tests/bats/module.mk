# Helpers of the tests in tests/bats: srun-optscan answers which srun
# options the plugin's scan of srun's command line takes a value after
# (srun-options.bats).
$(BUILD)/tests/bats/srun-optscan: $(BUILD)/tests/bats/srun-optscan.o $(BUILD)/plugin/args.o $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL) $(HWLOC_LIBS)
$(BUILD)/tests/bats/srun-optscan.o: MOD_CFLAGS += -Iplugin
TARGETS += $(BUILD)/tests/bats/srun-optscan
# stop-note reads stop notes as slurmstepd does and writes them back
# (stop-python.bats: the Python module's note against the C parser).
$(BUILD)/tests/bats/stop-note: $(BUILD)/tests/bats/stop-note.o $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL) $(HWLOC_LIBS)
TARGETS += $(BUILD)/tests/bats/stop-note
