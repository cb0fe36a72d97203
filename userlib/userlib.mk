# libmultiedge (static for in-tree users, versioned shared for installs)
# and the mectl tool.

LIBME_VERSION := 0.3.1
# Before 1.0 every minor version may change the C++ ABI (class layouts:
# 0.2 grew Message, ConnectionInfo and Connection; 0.3 added the remote
# atomics and CompletionType::Atomic), so the soname carries it: a program
# built against 0.2 does not load 0.3 by mistake.
LIBME_SONAME  := libmultiedge.so.$(basename $(LIBME_VERSION))
LIBME_SRCS := $(wildcard $(TOP)/userlib/src/*.cpp)
LIBME_OBJS := $(patsubst $(TOP)/userlib/src/%.cpp,$(BUILD)/obj/userlib/%.o,$(LIBME_SRCS))
LIBME_A    := $(BUILD)/lib/libmultiedge.a
LIBME_SO   := $(BUILD)/lib/libmultiedge.so.$(LIBME_VERSION)
LIBME_PC   := $(BUILD)/lib/pkgconfig/multiedge.pc
LIBME_CXXFLAGS := $(CXXFLAGS_COMMON) -fPIC -I$(TOP)/userlib/include $(INCLUDES)
MECTL := $(BUILD)/bin/mectl
# What a program linked with the static library links too.
LIBME_LIBS := -luring

LIBRARIES += $(LIBME_A) $(LIBME_SO) $(LIBME_PC)
PROGRAMS  += $(MECTL)

$(BUILD)/obj/userlib/%.o: $(TOP)/userlib/src/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(LIBME_CXXFLAGS) -MMD -MP -c $< -o $@

$(LIBME_A): $(LIBME_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(LIBME_SO): $(LIBME_OBJS) $(TOP)/userlib/libmultiedge.map
	@mkdir -p $(@D)
	$(CXX) -shared -Wl,-soname,$(LIBME_SONAME) \
		-Wl,--version-script=$(TOP)/userlib/libmultiedge.map -o $@ $(LIBME_OBJS) $(LIBME_LIBS)
	ln -sf $(notdir $@) $(BUILD)/lib/$(LIBME_SONAME)
	ln -sf $(LIBME_SONAME) $(BUILD)/lib/libmultiedge.so

$(LIBME_PC): $(TOP)/userlib/multiedge.pc.in
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(LIBME_VERSION)|' $< > $@

# mectl up reads the boot configuration under SYSCONFDIR (packaging.mk).
$(BUILD)/obj/userlib/mectl.o: $(TOP)/userlib/mectl.cpp
	@mkdir -p $(@D)
	$(CXX) $(LIBME_CXXFLAGS) -DME_LINKS_CONF='"$(SYSCONFDIR)/multiedge/links.conf"' -MMD -MP -c $< -o $@

$(MECTL): $(BUILD)/obj/userlib/mectl.o $(LIBME_A)
	@mkdir -p $(@D)
	$(CXX) -o $@ $^ $(LIBME_LIBS)

-include $(LIBME_OBJS:.o=.d) $(BUILD)/obj/userlib/mectl.d
