# Examples built by `make` and used by the demo (scripts/demo): programs
# against the installed-style API (multiedge/multiedge.hpp), linked with the
# static libmultiedge.

EXAMPLES_CXXFLAGS := $(CXXFLAGS_COMMON) -I$(TOP)/userlib/include $(INCLUDES)
ME_DEMO := $(BUILD)/bin/me_demo
ME_FILECOPY := $(BUILD)/bin/me_filecopy

PROGRAMS += $(ME_DEMO) $(ME_FILECOPY)

$(BUILD)/obj/examples/%.o: $(TOP)/examples/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(EXAMPLES_CXXFLAGS) -MMD -MP -c $< -o $@

$(ME_DEMO): $(BUILD)/obj/examples/me_demo.o $(LIBME_A)
	@mkdir -p $(@D)
	$(CXX) -o $@ $^ $(LIBME_LIBS)

$(ME_FILECOPY): $(BUILD)/obj/examples/me_filecopy.o $(LIBME_A)
	@mkdir -p $(@D)
	$(CXX) -o $@ $^ $(LIBME_LIBS)

-include $(wildcard $(BUILD)/obj/examples/*.d)
