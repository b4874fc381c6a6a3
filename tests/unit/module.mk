# Unit tests of the Slurm-free core (common/): tests/unit/test-common-*.c,
# each linked with the core library only. Other parts register their unit
# tests in their own module.mk.
COMMON_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/test-common-*.c))
$(BUILD)/tests/unit/test-common-%: $(BUILD)/tests/unit/test-common-%.o $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL) $(HWLOC_LIBS)
UNIT_TESTS += $(COMMON_TESTS)
