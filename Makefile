# multiedge: top-level build.
#
#   make            module, user library, tools, tests
#   make test       install missing deps, build, host unit tests, guest suite
#                   on each of KERNELS (default: 6.1 6.12)
#   make demo       boot three guests on two rails: each writes to and reads from the others
#   make bench      multiedge against TCP, Soft-RoCE and memcpy in the guests:
#                   table and plots in build/bench/ (BENCH_ARGS=--quick: short run)
#   make install    module, library, mectl, udev rule, modprobe options, boot
#                   configuration (packaging/packaging.mk; also uninstall,
#                   dkms-install, dkms-uninstall)
#   make clean
#
# User-space pieces are described by small fragments (*.mk) included below;
# each appends to the lists declared here.  The module is built by Kbuild in
# kernel/ against KDIR.

SHELL := /bin/bash
.DEFAULT_GOAL := all

TOP   := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
BUILD := $(TOP)/build

# Kernel to build against: see scripts/kdir for the rule.
KDIR ?= $(shell $(TOP)/scripts/kdir)
KVER := $(shell $(TOP)/scripts/kdir --version $(KDIR) 2>/dev/null)

CC  ?= gcc
CXX ?= g++
CLANG ?= clang
PREFIX ?= /usr/local

# The kernels `make test` runs the guest suite on, by series
# (scripts/kernel-headers): Debian 12's 6.1 and bookworm-backports' 6.12.
KERNELS ?= 6.1 6.12

WARN_C   := -Wall -Wextra -Werror
WARN_CXX := -Wall -Wextra -Werror
CFLAGS_COMMON   := -std=gnu11 -O2 -g $(WARN_C)
CXXFLAGS_COMMON := -std=c++20 -O2 -g $(WARN_CXX)
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
             -fno-omit-frame-pointer
INCLUDES  := -I$(TOP) -I$(TOP)/uapi
GTEST_LIBS := -lgtest -lgmock -pthread

# Lists the fragments append to.
HOST_TESTS   :=   # GoogleTest binaries run on the host by `make test`
HOST_SCRIPTS :=   # executables run on the host by `make test`, 1 test each
GUEST_TESTS  :=   # GoogleTest binaries run inside the guest
GUEST_SCRIPTS :=  # executables run inside the guest after them, 1 test each
GUEST_PAIR_SCRIPTS := # run in both of two guests after the pair test, 1 test each
PROGRAMS     :=   # tools and examples built by `make`
TEST_PROGRAMS :=  # built only by `make test` and `make bench` (long builds only they need)
LIBRARIES    :=   # libraries built by `make`

include $(wildcard $(TOP)/kernel/core/core.mk)
include $(TOP)/userlib/userlib.mk
include $(TOP)/fabric/fabric.mk
include $(TOP)/packaging/packaging.mk
include $(TOP)/examples/examples.mk
include $(TOP)/bench/bench.mk
include $(wildcard $(TOP)/tests/unit/unit.mk)
include $(TOP)/tests/unit/userlib/userlib_tests.mk
include $(wildcard $(TOP)/tests/fuzz/fuzz.mk)
include $(TOP)/tests/vm/vm.mk
include $(TOP)/tests/install/install.mk

# Keep every intermediate (objects built through pattern chains): nothing is
# deleted behind the user's back, and nothing is printed after the summary.
.SECONDARY:

.PHONY: all module userspace test demo bench run-tests run-demo run-bench clean deps guest-kernel \
	print-kver

all: module userspace

userspace: $(LIBRARIES) $(PROGRAMS) $(HOST_TESTS) $(GUEST_TESTS)

# W=1 is part of the contract: the module must build without a warning.
module:
	@test -n "$(KDIR)" || { echo "error: no kernel headers found; run scripts/deps or set KDIR" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(TOP)/kernel W=1 modules

# The release the module in kernel/ is built for (tests/install).
print-kver:
	@echo $(KVER)

deps:
	$(TOP)/scripts/deps

guest-kernel:
	$(TOP)/scripts/guest-kernel $(KVER)

# deps first, then a fresh make: KDIR and KVER are only known once the
# headers are installed.
test:
	@$(TOP)/scripts/deps
	@$(MAKE) --no-print-directory -j$$(nproc) run-tests

demo:
	@$(TOP)/scripts/deps
	@$(MAKE) --no-print-directory -j$$(nproc) run-demo

bench:
	@$(TOP)/scripts/deps
	@$(MAKE) --no-print-directory -j$$(nproc) run-bench

# The module is built again for each of KERNELS, in build/kmod/<release>/.
run-tests: all $(TEST_PROGRAMS)
	@$(TOP)/scripts/test-modules $(BUILD)/kmod/kernels $(KERNELS)
	@$(TOP)/scripts/run-tests --kernels $(BUILD)/kmod/kernels \
		--host "$(HOST_TESTS)" --host-scripts "$(HOST_SCRIPTS)" \
		--guest "$(GUEST_TESTS)" --guest-scripts "$(GUEST_SCRIPTS)" --pair "$(GUEST_PAIR_TEST)" \
		--pair-scripts "$(GUEST_PAIR_SCRIPTS)"

run-demo: all
	@$(TOP)/scripts/guest-kernel $(KVER) >/dev/null
	@$(TOP)/scripts/vm --kver $(KVER) --nodes 3 --links 2 -- $(TOP)/scripts/demo

run-bench: all $(TEST_PROGRAMS)
	@$(TOP)/scripts/guest-kernel $(KVER) >/dev/null
	@$(TOP)/scripts/bench $(BENCH_ARGS)

clean:
	-$(MAKE) -C $(KDIR) M=$(TOP)/kernel clean 2>/dev/null
	rm -rf $(BUILD)/obj $(BUILD)/bin $(BUILD)/lib $(BUILD)/results $(BUILD)/kmod
