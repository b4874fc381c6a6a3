# The GPU tier (make check-gpu, tests/run gpu): libddp's NCCL backend with
# several ranks on one GPU. Linked with the shared libddp so that it finds
# libddp-nccl.so beside itself; built everywhere, it skips without a GPU.
GPU_TESTS := $(BUILD)/tests/gpu/test-gpu
$(BUILD)/tests/gpu/test-gpu.o: MOD_CFLAGS += -Itests/unit
$(GPU_TESTS): $(BUILD)/tests/gpu/test-gpu.o $(LIBDDP_SO) $(if $(filter 1,$(HAVE_NCCL)),$(LIBDDP_NCCL))
	$(CC) $(CFLAGS_ALL) -o $@ $< -L$(BUILD)/worker -l:libddp.so \
	    -Wl,-rpath,'$$ORIGIN/../../worker' $(LDFLAGS_ALL) -ldl -lm -lpthread

gpu-tests: $(GPU_TESTS)
check-gpu: all gpu-tests
	@tests/run gpu
.PHONY: gpu-tests check-gpu
