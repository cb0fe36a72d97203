# me_bench: the micro-benchmark tool (one-way / two-way write throughput,
# ping-pong latency, memory-copy reference), run by `make bench`.  Linked
# with the static libmultiedge and libnuma (scripts/packages: libnuma-dev).

BENCH_CXXFLAGS := $(CXXFLAGS_COMMON) -pthread -I$(TOP)/userlib/include $(INCLUDES)
BENCH_SRCS := $(wildcard $(TOP)/bench/*.cpp)
BENCH_OBJS := $(patsubst $(TOP)/bench/%.cpp,$(BUILD)/obj/bench/%.o,$(BENCH_SRCS))
ME_BENCH := $(BUILD)/bin/me_bench

PROGRAMS += $(ME_BENCH)

$(BUILD)/obj/bench/%.o: $(TOP)/bench/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(BENCH_CXXFLAGS) -MMD -MP -c $< -o $@

$(ME_BENCH): $(BENCH_OBJS) $(LIBME_A)
	@mkdir -p $(@D)
	$(CXX) -pthread -o $@ $(BENCH_OBJS) $(LIBME_A) $(LIBME_LIBS) -lnuma

-include $(BENCH_OBJS:.o=.d)

# me_bench's TCP ping-pong and echo over the host's loopback.
HOST_SCRIPTS += $(TOP)/tests/bench/me-bench-tcp-check
# collect.py's busy share over a stream's stretch (TCP's CPU per MB).
HOST_SCRIPTS += $(TOP)/tests/bench/steady-busy
