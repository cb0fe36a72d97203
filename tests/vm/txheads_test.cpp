// Guest tests of frame heads (kernel/txheads.c): a stream's frames take
// their heads from pages each CPU keeps, and once a page's frames are
// gone the ring carves it again instead of asking the page allocator
// (whose pages Debian's kernels zero).  Every byte arrives.

#include <gtest/gtest.h>

#include <cstdio>

#include "cluster.hpp"

using namespace metest;

namespace {

constexpr size_t kLen = 32u << 20;
constexpr size_t kChunk = 1u << 20;

struct Heads {
	std::uint64_t reused = 0, fresh = 0;
};

Heads heads()
{
	const multiedge::DeviceInfo info = accounting();
	return {info.heads_reused, info.heads_fresh};
}

// A window of 128 packets: over a veth a frame lives until the
// receiver's thread has taken it, so a page comes back to be carved
// again only if fewer frames than a ring's heads are alive; with the
// default window (1024 packets at MTU 1500) more are, and most pages are
// fresh (design.md, frame heads).
class TxHeadsTest : public ClusterTest {
protected:
	std::string module_params() const override { return "window_kb=256"; }

	// kLen bytes from node 0 to node 1 in kChunk writes, checked at the
	// target; the ring pages carved meanwhile.
	void stream(Heads &used)
	{
		Heads h0;
		ASSERT_NO_FATAL_FAILURE(stream_checked(kLen, kChunk, 0x4ead, [&] { h0 = heads(); }));
		const Heads h1 = heads();
		used = {h1.reused - h0.reused, h1.fresh - h0.fresh};
		std::printf("head pages: %llu carved again, %llu fresh\n",
			    static_cast<unsigned long long>(used.reused),
			    static_cast<unsigned long long>(used.fresh));
	}
};

} // namespace

// Over a veth a frame's head holds its headers (its payload goes in page
// fragments), some 60 heads a 32 KiB page: 32 MiB at MTU 1500 carves
// hundreds of pages, many times what the rings of both CPUs hold (eight
// pages each), so most must be pages carved again.
TEST_F(TxHeadsTest, StreamCarvesPagesAgain)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(1));
	Heads used;
	ASSERT_NO_FATAL_FAILURE(stream(used));
	EXPECT_GT(used.reused + used.fresh, kLen / 1500 / 100) << "few heads from the rings";
	EXPECT_GT(used.reused, 4 * used.fresh) << "the rings took many fresh pages";
}
