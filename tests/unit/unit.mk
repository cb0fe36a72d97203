# Host tests of the portable core: the simulator-based GoogleTest suite
# (ASan+UBSan), the multithreaded receive-path test (ASan+UBSan and TSan),
# the scenario figures program, and the engine's per-frame cost on the host.

UNIT_DIR := $(TOP)/tests/unit
UNIT_CXXFLAGS := $(CXXFLAGS_COMMON) $(INCLUDES)

UNIT_SRCS := $(UNIT_DIR)/sim.cpp $(wildcard $(UNIT_DIR)/test_*.cpp)
UNIT_OBJS := $(patsubst $(UNIT_DIR)/%.cpp,$(BUILD)/obj/unit/san/%.o,$(UNIT_SRCS))
ME_UNIT   := $(BUILD)/bin/me_unit

MT_SAN_OBJ  := $(BUILD)/obj/unit/san/mt_test.o
MT_TSAN_OBJ := $(BUILD)/obj/unit/tsan/mt_test.o
ME_MT       := $(BUILD)/bin/me_mt
ME_MT_TSAN  := $(BUILD)/bin/me_mt_tsan

FIG_OBJS   := $(BUILD)/obj/unit/plain/sim.o $(BUILD)/obj/unit/plain/figures.o
ME_FIGURES := $(BUILD)/bin/me_figures

CB_OBJS       := $(BUILD)/obj/unit/plain/sim.o $(BUILD)/obj/unit/plain/core_bench.o
ME_CORE_BENCH := $(BUILD)/bin/me_core_bench

HOST_TESTS += $(ME_UNIT) $(ME_MT) $(ME_MT_TSAN)
PROGRAMS   += $(ME_FIGURES) $(ME_CORE_BENCH)

$(BUILD)/obj/unit/san/%.o: $(UNIT_DIR)/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(UNIT_CXXFLAGS) $(SAN_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/unit/tsan/%.o: $(UNIT_DIR)/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(UNIT_CXXFLAGS) -fsanitize=thread -MMD -MP -c $< -o $@

$(BUILD)/obj/unit/plain/%.o: $(UNIT_DIR)/%.cpp
	@mkdir -p $(@D)
	$(CXX) $(UNIT_CXXFLAGS) -MMD -MP -c $< -o $@

$(ME_UNIT): $(UNIT_OBJS) $(CORE_LIB_SAN)
	@mkdir -p $(@D)
	$(CXX) $(SAN_FLAGS) -o $@ $(UNIT_OBJS) $(CORE_LIB_SAN) -lgtest_main $(GTEST_LIBS)

$(ME_MT): $(MT_SAN_OBJ) $(CORE_LIB_SAN)
	@mkdir -p $(@D)
	$(CXX) $(SAN_FLAGS) -o $@ $(MT_SAN_OBJ) $(CORE_LIB_SAN) -lgtest_main $(GTEST_LIBS)

$(ME_MT_TSAN): $(MT_TSAN_OBJ) $(CORE_LIB_TSAN)
	@mkdir -p $(@D)
	$(CXX) -fsanitize=thread -o $@ $(MT_TSAN_OBJ) $(CORE_LIB_TSAN) -lgtest_main $(GTEST_LIBS)

$(ME_FIGURES): $(FIG_OBJS) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CXX) -o $@ $(FIG_OBJS) $(CORE_LIB)

$(ME_CORE_BENCH): $(CB_OBJS) $(CORE_LIB)
	@mkdir -p $(@D)
	$(CXX) -o $@ $(CB_OBJS) $(CORE_LIB)

.PHONY: figures unit-test
figures: $(ME_FIGURES)
	$(ME_FIGURES)

unit-test: $(ME_UNIT) $(ME_MT) $(ME_MT_TSAN)
	$(ME_UNIT) && $(ME_MT) && $(ME_MT_TSAN)

-include $(UNIT_OBJS:.o=.d) $(MT_SAN_OBJ:.o=.d) $(MT_TSAN_OBJ:.o=.d) $(FIG_OBJS:.o=.d) \
	$(CB_OBJS:.o=.d)
