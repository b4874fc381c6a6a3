# SPDX-License-Identifier: BSD-3-Clause
# slurm-ddp: one Makefile. Each part adds its targets in its own module.mk;
# everything is built under $(BUILD) so a sanitizer build can sit beside the
# normal one (make SAN=1 BUILD=build/san).

CC        ?= gcc
BUILD     ?= build
PREFIX    ?= /usr/local
DESTDIR   ?=
BINDIR    ?= $(PREFIX)/bin
SBINDIR   ?= $(PREFIX)/sbin
LIBDIR    ?= $(PREFIX)/lib
LIBEXECDIR ?= $(PREFIX)/libexec/slurm-ddp
INCLUDEDIR ?= $(PREFIX)/include
DATADIR   ?= $(PREFIX)/share/slurm-ddp
MANDIR    ?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
# libddp and ddp-check load the NCCL backend from here when it is not
# beside libddp (packages keep it out of the public library directory).
NCCL_PLUGINDIR ?= $(LIBDIR)
# ddp-nodectl's boot units and slurmd's drop-in (systemd reads
# /usr/local/lib/systemd/system too).
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
# Slurm loads SPANK plugins by absolute path from plugstack.conf, or
# relative to its PluginDir; default to the PluginDir of the installed Slurm.
SLURM_PLUGINDIR ?= $(shell d=$$(dirname "$$(ls /usr/lib/*/slurm-wlm/spank*.so /usr/lib*/slurm/*.so 2>/dev/null | head -n 1)" 2>/dev/null); [ -n "$$d" ] && [ "$$d" != . ] && echo "$$d" || echo $(LIBDIR)/slurm)
DDP_CONF  ?= $(SYSCONFDIR)/slurm/ddp.conf

CUDA_HOME ?= /usr/local/cuda
HAVE_NCCL := $(shell [ -f "$(CUDA_HOME)/include/nccl.h" ] && [ -f "$(CUDA_HOME)/include/cuda_runtime.h" ] && echo 1 || echo 0)
NVCC      ?= $(CUDA_HOME)/bin/nvcc
HAVE_NVCC := $(shell [ -x "$(NVCC)" ] && echo 1 || echo 0)

WARN      := -Wall -Wextra -Werror -Wformat=2 -Wshadow -Wpointer-arith \
             -Wstrict-prototypes -Wmissing-prototypes -Wvla -Wno-unused-parameter
CSTD      := -std=gnu11
# The release, from the one-line file VERSION (debian/changelog and
# slurm-ddp.spec name the same): what the programs' --version prints.
DDP_VERSION := $(shell cat VERSION)
ifeq ($(DDP_VERSION),)
  $(error VERSION is missing or empty)
endif
DEFS      := -D_GNU_SOURCE -DDDP_CONF_DEFAULT='"$(DDP_CONF)"' \
             -DDDP_CHECK_PATH='"$(BINDIR)/ddp-check"' \
             -DDDP_RESTART_PATH='"$(LIBEXECDIR)/ddp-restart"' \
             -DDDP_VERSION='"$(DDP_VERSION)"'
INCLUDES  := -Icommon -Iworker/include
ifeq ($(SAN),1)
  CC      := clang
  OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
             -fno-sanitize-recover=undefined
  HARDEN  := -fPIC
  SANLD   := -fsanitize=address,undefined
else
  OPT     ?= -O2 -g
  HARDEN  := -fPIC -fstack-protector-strong -fstack-clash-protection \
             -D_FORTIFY_SOURCE=2 -fcf-protection
  SANLD   :=
endif
# Per-target project flags go in MOD_CFLAGS (target-specific, in the
# module.mk files), never in CFLAGS: CFLAGS belongs to the user (make
# CFLAGS=-g, as packaging does) and comes last, so it wins but never
# drops what a target needs.
MOD_CFLAGS :=
CFLAGS_ALL  = $(CSTD) $(OPT) $(WARN) $(HARDEN) -fvisibility=hidden $(DEFS) $(INCLUDES) $(MOD_CFLAGS) $(CFLAGS)
LDFLAGS_ALL = -Wl,-z,relro,-z,now -Wl,--as-needed $(SANLD) $(LDFLAGS)
# Link flags for libFuzzer targets (see the fuzzers target).
FUZZ_LD     := -fsanitize=fuzzer,address,undefined

HWLOC_CFLAGS := $(shell pkg-config --cflags hwloc 2>/dev/null)
HWLOC_LIBS   := $(shell pkg-config --libs hwloc 2>/dev/null || echo -lhwloc)
MUNGE_LIBS   := $(shell pkg-config --libs munge 2>/dev/null || echo -lmunge)

# install-man SRC DEST: a manual page with the paths of this installation
# in place of the /usr/local ones it is written with.
MAN_PATHS_SED = sed -e 's|/usr/local/libexec/slurm-ddp|$(LIBEXECDIR)|g' \
	-e 's|/usr/local/share/slurm-ddp|$(DATADIR)|g' \
	-e 's|/usr/local/sbin|$(SBINDIR)|g' -e 's|/usr/local/bin|$(BINDIR)|g' \
	-e 's|/usr/local/lib/slurm|$(SLURM_PLUGINDIR)|g'
install-man = $(MAN_PATHS_SED) $(1) >$(2).tmp && chmod 0644 $(2).tmp && mv -f $(2).tmp $(2)

# Filled in by the module.mk files.
TARGETS      :=
UNIT_TESTS   :=
FUZZERS      :=
INSTALL_RULES :=
OPTIONAL_BUILT :=
OPTIONAL_SKIPPED :=

# check-gpu (tests/gpu/module.mk): the GPU tier alone, on a node with a GPU.
.PHONY: all install check check-unit check-san lint format format-check \
        fuzzers clean deps demo stage bench bench-gpu bench-recovery deb rpm
all:

# Keep objects of programs built in one step (unit tests, tools).
.SECONDARY:

# V=1 shows the compiler command lines.
Q := $(if $(filter 1,$(V)),,@)

# The objects that print the release are built again when VERSION changes.
DDP_VERSION_USERS := worker/comm.c plugin/local.c plugin/ddp-plan.c \
	plugin/spank_ddp.c prolog/ddp-nodectl.c check/ddp-check.c \
	tests/unit/test-worker-version.c
$(DDP_VERSION_USERS:%.c=$(BUILD)/%.o): VERSION

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(if $(Q),@echo "  CC      $@")
	$(Q)$(CC) $(CFLAGS_ALL) $(HWLOC_CFLAGS) -MMD -MP -c $< -o $@

# Slurm-free core shared by the plugin, the prolog helper, the runtime's
# tools and the tests.
CORE_SRC := $(wildcard common/*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
CORE_LIB := $(BUILD)/libddpcore.a
$(CORE_LIB): $(CORE_OBJ)
	@mkdir -p $(@D)
	$(Q)$(AR) rcs $@ $^
TARGETS += $(CORE_LIB)

include $(sort $(wildcard */module.mk tests/*/module.mk))

all: $(TARGETS)
	@echo "slurm-ddp: built $(if $(OPTIONAL_BUILT),optional parts: $(strip $(OPTIONAL_BUILT)),no optional parts)"
	@$(if $(OPTIONAL_SKIPPED),echo "slurm-ddp: skipped optional parts: $(strip $(OPTIONAL_SKIPPED))",true)

unit-tests: $(UNIT_TESTS)
.PHONY: unit-tests

# A private installation tree for the minicluster, laid out as a site would
# install it.
STAGE := $(abspath $(BUILD))/stage
stage: all
	$(MAKE) --no-print-directory install DESTDIR=$(STAGE) PREFIX=/usr/local \
	    SLURM_PLUGINDIR=/usr/local/lib/slurm >/dev/null

install: all $(INSTALL_RULES)

# make deps and make demo change the machine (packages, the Slurm and munge
# services, /var/cache/slurm-ddp, the minicluster): they go on only on a
# throw-away machine, or with DEMO_ON_THIS_HOST=1 (tests/lib/throwaway-host).
deps:
	@tests/lib/install-deps

# Packages for the Slurm the build is made against, in build/pkg (see
# packaging/build-packages): Debian's, checked by lintian, and RPMs from
# slurm-ddp.spec, checked by rpmlint. make deb SLURM_VERSION=24.11 builds
# the Debian packages for another Slurm inside its root file system
# (tests/lib/slurm-root), in build/pkg/slurm-24.11.
deb:
	@packaging/build-packages deb $(if $(SLURM_VERSION),--slurm $(SLURM_VERSION))

rpm:
	@packaging/build-packages rpm

check: all unit-tests gpu-tests
	@$(MAKE) --no-print-directory SAN=1 BUILD=build/san unit-tests
	@$(MAKE) --no-print-directory fuzzers
	@$(MAKE) --no-print-directory stage
	@$(MAKE) --no-print-directory deb
	@tests/run

# libFuzzer targets always build with clang, beside the normal build.
fuzzers:
	@$(MAKE) --no-print-directory BUILD=build/fuzz CC=clang FUZZ=1 \
	    OPT="-O1 -g -fsanitize=fuzzer-no-link,address,undefined" fuzz-targets
fuzz-targets: $(FUZZERS)
.PHONY: fuzz-targets

demo:
	@tests/lib/throwaway-host "make demo"
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory stage
	@tests/cluster/demo

bench: all stage
	@bench/run

# On a node with a GPU (no Slurm needed): bench/gpu-run.
bench-gpu: all bench-progs-gpu bench-progs-ddp
	@bench/gpu-run

# On the minicluster, as root: time from a fault to the resumed training.
bench-recovery: all stage
	@bench/recovery

lint:
	@tests/lint/run

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	@clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build

-include $(shell find $(BUILD) -path '*/stage' -prune -o -type f -name '*.d' -print 2>/dev/null)
