# Host tests of libmultiedge, the uapi header, the libfabric provider's
# message header (fabric/wire.cpp) and the guest harness's log
# scanner; built with ASan + UBSan.  fake_module.cpp answers the ioctls of
# one temporary file as the module would (the host cannot load it).

USERLIB_TEST_SRCS := $(wildcard $(TOP)/tests/unit/userlib/*_test.cpp) $(TOP)/tests/vm/kmsg.cpp \
		     $(TOP)/tests/unit/userlib/fake_module.cpp $(LIBME_SRCS) \
		     $(TOP)/fabric/wire.cpp
USERLIB_TEST_OBJS := $(patsubst $(TOP)/%.cpp,$(BUILD)/obj/san/%.o,$(USERLIB_TEST_SRCS))
USERLIB_TEST := $(BUILD)/bin/unit/userlib_test

HOST_TESTS   += $(USERLIB_TEST)
HOST_SCRIPTS += $(TOP)/tests/unit/userlib/uapi-compile-check

# Sanitized objects of any C++ source in the tree, mirrored under obj/san.
$(BUILD)/obj/san/%.o: $(TOP)/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_COMMON) $(SAN_FLAGS) -I$(TOP)/userlib/include $(INCLUDES) -MMD -MP -c $< -o $@

$(USERLIB_TEST): $(USERLIB_TEST_OBJS)
	@mkdir -p $(@D)
	$(CXX) $(SAN_FLAGS) -o $@ $^ -lgtest_main $(GTEST_LIBS) $(LIBME_LIBS)

-include $(USERLIB_TEST_OBJS:.o=.d)
