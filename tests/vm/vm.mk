# Guest tests: GoogleTest binaries run inside the QEMU guest by
# tests/vm/run-suite (the real module through the real library).

GUEST_BIN := $(BUILD)/bin/guest
GUEST_COMMON_SRCS := $(TOP)/tests/vm/guest_main.cpp $(TOP)/tests/vm/kmsg.cpp \
		     $(TOP)/tests/vm/module_util.cpp
GUEST_COMMON_OBJS := $(patsubst $(TOP)/tests/vm/%.cpp,$(BUILD)/obj/vm/%.o,$(GUEST_COMMON_SRCS))
GUEST_CXXFLAGS := $(CXXFLAGS_COMMON) -I$(TOP)/userlib/include $(INCLUDES) \
		  -DME_KO_DEFAULT='"$(TOP)/kernel/multiedge.ko"' \
		  -DME_BIN_DIR='"$(BUILD)/bin"'

GUEST_TESTS += $(GUEST_BIN)/module_test $(GUEST_BIN)/link_test $(GUEST_BIN)/mr_test
# Extra objects join $^ after the library: the recipes put objects first.
$(GUEST_BIN)/module_test $(GUEST_BIN)/link_test: $(BUILD)/obj/vm/netns.o

# The data path suites drive several nodes (namespaces) through cluster.cpp.
GUEST_CLUSTER_TESTS := $(addprefix $(GUEST_BIN)/,data_test fault_test ops_ioctl_test uring_test \
					       examples_test zerocopy_test area_test area_life_test \
					       mixed_test switch_test incast_test ioctl_fuzz_test \
					       fabric_test txburst_test train_test txheads_test rxdirect_test carry_test \
					       shared_test atomic_test loopback_test send_test)
GUEST_TESTS += $(GUEST_CLUSTER_TESTS)

$(BUILD)/obj/vm/%.o: $(TOP)/tests/vm/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(GUEST_CXXFLAGS) -MMD -MP -c $< -o $@

$(GUEST_BIN)/%: $(BUILD)/obj/vm/%.o $(GUEST_COMMON_OBJS) $(LIBME_A)
	@mkdir -p $(@D)
	$(CXX) -o $@ $(filter %.o,$^) $(filter-out %.o,$^) $(LIBME_LIBS) $(GTEST_LIBS)

$(GUEST_CLUSTER_TESTS): $(GUEST_BIN)/%: $(BUILD)/obj/vm/%.o $(BUILD)/obj/vm/cluster.o $(BUILD)/obj/vm/netns.o \
		$(GUEST_COMMON_OBJS) $(LIBME_A)
	@mkdir -p $(@D)
	$(CXX) -o $@ $(filter %.o,$^) $(filter-out %.o,$^) $(LIBME_LIBS) $(GTEST_LIBS)

# The mixed load (mixed_load.cpp) runs in one guest (mixed_test) and
# between two (pair_test, run by scripts/run-tests in a boot of its own).
# Extra objects join $^ after the library: the recipes put objects first.
GUEST_PAIR_TEST := $(GUEST_BIN)/pair_test
$(GUEST_BIN)/mixed_test $(GUEST_PAIR_TEST): $(BUILD)/obj/vm/mixed_load.o
# The wire attacks build and parse frames with the core's own wire code.
$(GUEST_BIN)/fault_test: $(BUILD)/obj/core/plain/wire.o
$(GUEST_PAIR_TEST): $(BUILD)/obj/vm/cluster.o $(BUILD)/obj/vm/netns.o
PROGRAMS += $(GUEST_PAIR_TEST)
# An unchanged MPI program, run by Open MPI over the provider (a script).
GUEST_MPI_CHECK := $(GUEST_BIN)/mpi_check
$(GUEST_MPI_CHECK): $(TOP)/tests/vm/mpi/mpi_check.cpp | $(MEFI_SO)
	@mkdir -p $(@D)
	mpicxx.openmpi $(CXXFLAGS_COMMON) -DOMPI_SKIP_MPICXX -o $@ $<
PROGRAMS += $(GUEST_MPI_CHECK)
GUEST_SCRIPTS += $(TOP)/tests/vm/mpi/mpi-openmpi
# The same program between two guests, one rank each.
GUEST_PAIR_SCRIPTS += $(TOP)/tests/vm/mpi/mpi-pair
# And run by MPICH: Debian 12's, built from its source package for
# libfabric (scripts/mpich: its binary package is built for UCX), which
# only `make test` and `make bench` build (TEST_PROGRAMS; about 8 minutes,
# once).
MPICH_INST := $(BUILD)/mpich/inst
$(MPICH_INST)/.built: $(TOP)/scripts/mpich
	$(TOP)/scripts/mpich $(BUILD)/mpich
GUEST_MPICH_CHECK := $(GUEST_BIN)/mpi_check_mpich
$(GUEST_MPICH_CHECK): $(TOP)/tests/vm/mpi/mpi_check.cpp $(MPICH_INST)/.built | $(MEFI_SO)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_COMMON) -I$(MPICH_INST)/include -o $@ $< -L$(MPICH_INST)/lib \
		-Wl,-rpath,$(MPICH_INST)/lib -lmpi
TEST_PROGRAMS += $(GUEST_MPICH_CHECK)
GUEST_SCRIPTS += $(TOP)/tests/vm/mpi/mpi-mpich

# The provider's tests call libfabric, which loads the provider built here.
$(GUEST_BIN)/fabric_test: LIBME_LIBS += -lfabric
$(GUEST_BIN)/fabric_test: | $(MEFI_SO)

-include $(wildcard $(BUILD)/obj/vm/*.d)

# `make fuzz` (tests/fuzz/fuzz.mk) also runs the ioctl and io_uring fuzzer
# in a guest for FUZZ_GUEST_SECONDS (`make test` runs it for 15 s, last).
FUZZ_GUEST_SECONDS ?= 300
.PHONY: fuzz-guest
fuzz: fuzz-guest
fuzz-guest: module $(GUEST_BIN)/ioctl_fuzz_test
	@$(TOP)/scripts/guest-kernel $(KVER) >/dev/null
	$(TOP)/scripts/vm --kver $(KVER) --timeout $$(($(FUZZ_GUEST_SECONDS) + 600)) -- \
		env ME_FUZZ_SECONDS=$(FUZZ_GUEST_SECONDS) $(GUEST_BIN)/ioctl_fuzz_test --gtest_color=no
