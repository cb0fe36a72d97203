# libmultiedge-fi.so: multiedge as a libfabric provider (Documentation/
# libfabric.md).  libfabric loads it from its provider directory or from
# FI_PROVIDER_PATH; it needs libfabric's headers (libfabric-dev).

MEFI_SRCS := $(wildcard $(TOP)/fabric/*.cpp)
MEFI_OBJS := $(patsubst $(TOP)/fabric/%.cpp,$(BUILD)/obj/fabric/%.o,$(MEFI_SRCS))
MEFI_SO   := $(BUILD)/lib/libfabric/libmultiedge-fi.so
# Only fi_prov_ini is exported (FI_EXT_INI makes it visible).
MEFI_CXXFLAGS := $(CXXFLAGS_COMMON) -fPIC -fvisibility=hidden $(INCLUDES)

LIBRARIES += $(MEFI_SO)

$(BUILD)/obj/fabric/%.o: $(TOP)/fabric/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(MEFI_CXXFLAGS) -MMD -MP -c $< -o $@

$(MEFI_SO): $(MEFI_OBJS)
	@mkdir -p $(@D)
	$(CXX) -shared -Wl,--no-undefined -o $@ $^ -lfabric

-include $(MEFI_OBJS:.o=.d)
