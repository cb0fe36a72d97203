// me_bench: how busy the whole machine's CPUs were, from /proc/stat and
// /proc/uptime.
#pragma once

#include <cstdint>

#include "common.hpp"

namespace bench {

// The CPUs' time in clock ticks summed over all CPUs: the whole by the
// clock (uptime x CPUs online), the idle and iowait from /proc/stat.
struct CpuTimes {
	std::uint64_t busy = 0;		// total - idle - iowait
	std::uint64_t total = 0;	// uptime x CPUs, in ticks
};

// Fails only if /proc/stat or /proc/uptime cannot be read or parsed.
me::Result<CpuTimes> read_cpu_times();

// Percent of all CPUs busy between a and b (NaN if no tick passed).
double cpu_util(const CpuTimes &a, const CpuTimes &b);
// Busy CPU-microseconds per MB (1e6 bytes) moved between a and b.
double cpu_us_per_mb(const CpuTimes &a, const CpuTimes &b, std::uint64_t bytes);
// Busy CPU-microseconds per operation between a and b.
double cpu_us_per_op(const CpuTimes &a, const CpuTimes &b, std::uint64_t ops);
// Microseconds in `ticks` clock ticks of /proc/stat.
double ticks_to_us(std::uint64_t ticks);

} // namespace bench
