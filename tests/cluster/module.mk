# Helpers the cluster tests run on the minicluster's host: verdict-record
# appends a verdict record as the plugin's root side does (drain.bats).
$(BUILD)/tests/cluster/verdict-record: $(BUILD)/tests/cluster/verdict-record.o $(CORE_LIB)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDFLAGS_ALL)
TARGETS += $(BUILD)/tests/cluster/verdict-record
