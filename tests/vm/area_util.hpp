// Receive-area tests' shared helpers: the module's flip counters.
#pragma once

#include <cstdint>

#include "cluster.hpp"

namespace metest {

// Pages flipped, whole area pages copied, TLB invalidations (module-wide).
struct Flips {
	std::uint64_t flipped = 0, copied = 0, tlb = 0;
};

inline Flips flips()
{
	auto i = accounting();
	return {i.rx_flipped, i.rx_flip_copied, i.tlb_flushes};
}

inline Flips operator-(const Flips &a, const Flips &b)
{
	return {a.flipped - b.flipped, a.copied - b.copied, a.tlb - b.tlb};
}

} // namespace metest
