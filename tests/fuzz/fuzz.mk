# libFuzzer targets for the portable core (see Documentation/simulator.md,
# "Fuzzing").  The core sources are compiled again with clang and the fuzzer
# instrumentation; the gcc-built libmecore is not used here.
#
#   make                     builds the fuzzers (PROGRAMS)
#   make test                runs tests/fuzz/smoke (20 s per target)
#   make fuzz                long run, FUZZ_SECONDS per target (default 600),
#                            and the guest ioctl/io_uring fuzzer (tests/vm/vm.mk,
#                            FUZZ_GUEST_SECONDS, default 300)
#   make fuzz-corpus         regenerates the seed corpus of fuzz_wire

FUZZ_DIR   := $(TOP)/tests/fuzz
FUZZ_OBJ   := $(BUILD)/obj/fuzz
FUZZ_BIN   := $(BUILD)/bin/fuzz
FUZZ_CXX   ?= clang++
FUZZ_SAN   := -fsanitize=address,undefined -fno-sanitize-recover=all \
              -fno-omit-frame-pointer
FUZZ_CFLAGS   := $(CFLAGS_COMMON) $(INCLUDES) -I$(TOP)/kernel/core \
                 $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_CXXFLAGS := $(CXXFLAGS_COMMON) $(INCLUDES) $(FUZZ_SAN) \
                 -fsanitize=fuzzer-no-link
FUZZ_LDFLAGS  := $(FUZZ_SAN) -fsanitize=fuzzer

FUZZ_CORE_OBJS := $(patsubst $(TOP)/kernel/core/%.c,$(FUZZ_OBJ)/core/%.o,$(CORE_SRCS))
FUZZ_TARGETS   := fuzz_wire fuzz_rx
FUZZ_PROGS     := $(addprefix $(FUZZ_BIN)/,$(FUZZ_TARGETS))
FUZZ_GEN       := $(FUZZ_BIN)/gen_corpus
FUZZ_SECONDS   ?= 600

PROGRAMS     += $(FUZZ_PROGS)
HOST_SCRIPTS += $(FUZZ_DIR)/smoke

$(FUZZ_OBJ)/core/%.o: $(TOP)/kernel/core/%.c
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_OBJ)/fuzz_wire.o: $(FUZZ_DIR)/fuzz_wire.c
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_OBJ)/fuzz_rx.o: $(FUZZ_DIR)/fuzz_rx.cpp
	@mkdir -p $(@D)
	$(FUZZ_CXX) $(FUZZ_CXXFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_BIN)/fuzz_wire: $(FUZZ_OBJ)/fuzz_wire.o $(FUZZ_OBJ)/core/wire.o
	@mkdir -p $(@D)
	$(CLANG) $(FUZZ_LDFLAGS) -o $@ $^

$(FUZZ_BIN)/fuzz_rx: $(FUZZ_OBJ)/fuzz_rx.o $(FUZZ_CORE_OBJS)
	@mkdir -p $(@D)
	$(FUZZ_CXX) $(FUZZ_LDFLAGS) -o $@ $^

$(FUZZ_GEN): $(FUZZ_DIR)/gen_corpus.c $(TOP)/kernel/core/wire.c
	@mkdir -p $(@D)
	$(CLANG) $(CFLAGS_COMMON) $(INCLUDES) -I$(TOP)/kernel/core -o $@ $^

.PHONY: fuzz fuzz-corpus
fuzz: $(FUZZ_PROGS)
	@set -e; for t in $(FUZZ_TARGETS); do \
		work=$$(mktemp -d); \
		cp -r $(FUZZ_DIR)/corpus/$$t/. $$work/; \
		echo "== $$t: $(FUZZ_SECONDS) s"; \
		$(FUZZ_BIN)/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
			-artifact_prefix=$(BUILD)/fuzz-$$t- $$work \
			|| { rm -rf $$work; exit 1; }; \
		rm -rf $$work; \
	done

fuzz-corpus: $(FUZZ_GEN)
	$(FUZZ_GEN) $(FUZZ_DIR)/corpus

-include $(FUZZ_CORE_OBJS:.o=.d) $(FUZZ_OBJ)/fuzz_wire.d $(FUZZ_OBJ)/fuzz_rx.d
