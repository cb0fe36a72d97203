#include "cpu.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>

namespace bench {

me::Result<CpuTimes> read_cpu_times()
{
	std::FILE *f = std::fopen("/proc/stat", "re");
	if (!f)
		return me::Error::from_errno(errno, "cannot open /proc/stat");
	unsigned long long v[8] = {};
	int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			    &v[3], &v[4], &v[5], &v[6], &v[7]);
	std::fclose(f);
	if (n < 5)
		return failure("cannot parse the first line of /proc/stat");
	// The whole time is the clock's: uptime times the CPUs online.  The
	// busy ticks miss time (a tick that comes late counts one jiffy; a
	// TCG vCPU's come late while QEMU emulates a device for it), the
	// idle time is measured by the clock (benchmarks.md, forty-eighth).
	f = std::fopen("/proc/uptime", "re");
	if (!f)
		return me::Error::from_errno(errno, "cannot open /proc/uptime");
	double up = 0;
	const int m = std::fscanf(f, "%lf", &up);
	std::fclose(f);
	const long ncpu = ::sysconf(_SC_NPROCESSORS_ONLN);
	if (m != 1 || !(up > 0) || ncpu < 1)
		return failure("cannot read the uptime or the number of CPUs");
	CpuTimes t;
	// user nice system idle iowait irq softirq steal
	const std::uint64_t idle = v[3] + v[4];
	t.total = static_cast<std::uint64_t>(std::llround(up * static_cast<double>(ncpu) *
							  static_cast<double>(::sysconf(_SC_CLK_TCK))));
	t.busy = t.total > idle ? t.total - idle : 0;
	return t;
}

double cpu_util(const CpuTimes &a, const CpuTimes &b)
{
	if (b.total <= a.total)
		return NAN;
	return 100.0 * static_cast<double>(b.busy - a.busy) / static_cast<double>(b.total - a.total);
}

double ticks_to_us(std::uint64_t ticks)
{
	static const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
	return static_cast<double>(ticks) * 1e6 / tick;
}

double cpu_us_per_mb(const CpuTimes &a, const CpuTimes &b, std::uint64_t bytes)
{
	if (bytes == 0 || b.total < a.total)
		return NAN;
	return ticks_to_us(b.busy - a.busy) / (static_cast<double>(bytes) / 1e6);
}

double cpu_us_per_op(const CpuTimes &a, const CpuTimes &b, std::uint64_t ops)
{
	if (ops == 0 || b.total < a.total)
		return NAN;
	return ticks_to_us(b.busy - a.busy) / static_cast<double>(ops);
}

} // namespace bench
