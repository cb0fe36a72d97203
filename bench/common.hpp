// me_bench: small pieces every part of the benchmark uses — errors as
// values, mapped buffers, the per-operation data stamp, latency summaries
// and size formatting.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "multiedge/multiedge.hpp"

namespace bench {

namespace me = multiedge;
using Clock = std::chrono::steady_clock;

// The largest number of threads (connections) one run may use: the
// session's hello carries one region per thread in a single send.
constexpr unsigned kMaxThreads = 32;

// A failure of the benchmark itself (not of an errno-returning call):
// carried as a multiedge::Error so every step returns Result/Status.
me::Error failure(std::string message);

// An anonymous private mapping, populated up front, unmapped on
// destruction.  Movable, not copyable.
class Buffer {
public:
	// Fails with the errno of mmap and a sentence naming `what`.
	static me::Result<Buffer> map(std::size_t len, const std::string &what);

	Buffer() = default;
	Buffer(Buffer &&o) noexcept
		: p_(std::exchange(o.p_, nullptr)), len_(std::exchange(o.len_, 0)) {}
	Buffer &operator=(Buffer &&o) noexcept;
	Buffer(const Buffer &) = delete;
	Buffer &operator=(const Buffer &) = delete;
	~Buffer();

	std::byte *data() const noexcept { return p_; }
	std::size_t size() const noexcept { return len_; }

private:
	Buffer(std::byte *p, std::size_t len) : p_(p), len_(len) {}
	std::byte *p_ = nullptr;
	std::size_t len_ = 0;
};

// The cheap data check.  Each operation of `size` bytes carries a stamp
// that depends on a per-operation seed in its first and last kWindow bytes
// (fewer when size is smaller; the two windows then overlap and agree).
// The rest of the payload is left as it is.
constexpr std::size_t kWindow = 64;

std::size_t window_len(std::uint64_t size);
std::uint8_t stamp_byte(std::uint64_t seed, std::uint64_t offset);
// Writes the stamp of `seed` into the operation's range starting at p.
void stamp(std::byte *p, std::uint64_t size, std::uint64_t seed);
// Whether `first` (the first window) and `last` (the last window) hold
// the stamp of `seed` for an operation of `size` bytes; on a mismatch,
// `where` gets the operation-relative offset of the first bad byte.
bool stamp_matches(const std::byte *first, const std::byte *last, std::uint64_t size,
		   std::uint64_t seed, std::uint64_t &where);
// A seed unique to (salt, thread, operation number).
std::uint64_t op_seed(std::uint64_t salt, unsigned thread, std::uint64_t seq);

// Median, 99th percentile and mean of `ns` (reordered), in microseconds;
// all NaN when it is empty.
struct LatencySummary {
	double median_us;
	double p99_us;
	double mean_us;
};
LatencySummary summarize(std::vector<std::uint64_t> &ns);

// "64 KiB", "4 MiB", "8 B".
std::string human_size(std::uint64_t bytes);

inline std::uint64_t ns_between(Clock::time_point a, Clock::time_point b)
{
	return static_cast<std::uint64_t>(
		std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

inline double seconds_between(Clock::time_point a, Clock::time_point b)
{
	return std::chrono::duration<double>(b - a).count();
}

} // namespace bench
