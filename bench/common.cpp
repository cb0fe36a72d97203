#include "common.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <system_error>

namespace bench {

me::Error failure(std::string message)
{
	return me::Error(std::make_error_code(std::errc::io_error), std::move(message));
}

me::Result<Buffer> Buffer::map(std::size_t len, const std::string &what)
{
	void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		return me::Error::from_errno(errno, "cannot map " + std::to_string(len) +
							    " bytes for " + what);
	return Buffer(static_cast<std::byte *>(p), len);
}

Buffer &Buffer::operator=(Buffer &&o) noexcept
{
	if (this != &o) {
		if (p_)
			::munmap(p_, len_);
		p_ = std::exchange(o.p_, nullptr);
		len_ = std::exchange(o.len_, 0);
	}
	return *this;
}

Buffer::~Buffer()
{
	if (p_)
		::munmap(p_, len_);
}

std::size_t window_len(std::uint64_t size)
{
	return static_cast<std::size_t>(std::min<std::uint64_t>(size, kWindow));
}

std::uint8_t stamp_byte(std::uint64_t seed, std::uint64_t offset)
{
	std::uint64_t z = seed * 0x9e3779b97f4a7c15ull + offset;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return static_cast<std::uint8_t>(z ^ (z >> 31));
}

void stamp(std::byte *p, std::uint64_t size, std::uint64_t seed)
{
	const std::size_t w = window_len(size);
	for (std::size_t i = 0; i < w; i++)
		p[i] = std::byte{stamp_byte(seed, i)};
	for (std::uint64_t i = size - w; i < size; i++)
		p[i] = std::byte{stamp_byte(seed, i)};
}

bool stamp_matches(const std::byte *first, const std::byte *last, std::uint64_t size,
		   std::uint64_t seed, std::uint64_t &where)
{
	const std::size_t w = window_len(size);
	for (std::size_t i = 0; i < w; i++)
		if (first[i] != std::byte{stamp_byte(seed, i)}) {
			where = i;
			return false;
		}
	for (std::size_t i = 0; i < w; i++)
		if (last[i] != std::byte{stamp_byte(seed, size - w + i)}) {
			where = size - w + i;
			return false;
		}
	return true;
}

std::uint64_t op_seed(std::uint64_t salt, unsigned thread, std::uint64_t seq)
{
	return salt ^ (static_cast<std::uint64_t>(thread) << 48) ^ (seq * 0x100000001b3ull);
}

LatencySummary summarize(std::vector<std::uint64_t> &ns)
{
	if (ns.empty())
		return {NAN, NAN, NAN};
	auto at = [&](double q) {
		auto k = static_cast<std::size_t>(q * static_cast<double>(ns.size() - 1) + 0.5);
		std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(k), ns.end());
		return static_cast<double>(ns[k]) / 1e3;
	};
	double p99 = at(0.99);
	double med = at(0.5);
	double sum = 0;
	for (auto v : ns)
		sum += static_cast<double>(v);
	return {med, p99, sum / static_cast<double>(ns.size()) / 1e3};
}

std::string human_size(std::uint64_t bytes)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
	unsigned u = 0;
	while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
		bytes /= 1024;
		u++;
	}
	char s[32];
	std::snprintf(s, sizeof(s), "%" PRIu64 " %s", bytes, units[u]);
	return s;
}

} // namespace bench
