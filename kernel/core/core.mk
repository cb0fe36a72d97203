# The portable core built for userspace: three flavours of static library
# (sanitized for the tests, plain for the figures, TSan for the threaded
# test).  The kernel build uses kernel/core/Kbuild.inc instead.

CORE_SRCS := $(wildcard $(TOP)/kernel/core/*.c)
CORE_CFLAGS := $(CFLAGS_COMMON) $(INCLUDES) -I$(TOP)/kernel/core

CORE_SAN_OBJS   := $(patsubst $(TOP)/kernel/core/%.c,$(BUILD)/obj/core/san/%.o,$(CORE_SRCS))
CORE_PLAIN_OBJS := $(patsubst $(TOP)/kernel/core/%.c,$(BUILD)/obj/core/plain/%.o,$(CORE_SRCS))
CORE_TSAN_OBJS  := $(patsubst $(TOP)/kernel/core/%.c,$(BUILD)/obj/core/tsan/%.o,$(CORE_SRCS))

CORE_LIB_SAN   := $(BUILD)/lib/libmecore-san.a
CORE_LIB       := $(BUILD)/lib/libmecore.a
CORE_LIB_TSAN  := $(BUILD)/lib/libmecore-tsan.a

LIBRARIES += $(CORE_LIB) $(CORE_LIB_SAN)

$(BUILD)/obj/core/san/%.o: $(TOP)/kernel/core/%.c
	@mkdir -p $(@D)
	$(CC) $(CORE_CFLAGS) $(SAN_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/core/plain/%.o: $(TOP)/kernel/core/%.c
	@mkdir -p $(@D)
	$(CC) $(CORE_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/core/tsan/%.o: $(TOP)/kernel/core/%.c
	@mkdir -p $(@D)
	$(CC) $(CORE_CFLAGS) -fsanitize=thread -MMD -MP -c $< -o $@

$(CORE_LIB_SAN): $(CORE_SAN_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(CORE_LIB): $(CORE_PLAIN_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(CORE_LIB_TSAN): $(CORE_TSAN_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

-include $(CORE_SAN_OBJS:.o=.d) $(CORE_PLAIN_OBJS:.o=.d) $(CORE_TSAN_OBJS:.o=.d)
