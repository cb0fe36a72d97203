// Guest tests of receive areas and page flipping: memory mapped from
// /dev/multiedge whose pages the receive threads replace by pages that
// arrived whole in a frame (paper §3.2).  Over veth the receiver gets the
// sender's skb, and with writes staged (tx_stage_kb, loaded here) its
// payload is in whole pages of the module's, so with packets of 8 KiB
// (MTU 9000) every whole destination page can be flipped; at MTU 1500 no
// packet carries a page and everything is copied.
//
// Every test checks the bytes, the module's flip counters, and that the
// pages come back (area_pages 0 in the teardown's accounting check).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "area_util.hpp"
#include "cluster.hpp"

using namespace metest;
using multiedge::Access;
using multiedge::MemoryRegion;
using multiedge::Placement;
using multiedge::ReceiveArea;
using multiedge::RemoteRegion;
using namespace std::chrono_literals;

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kLen = 1 << 20;
constexpr size_t kPages = kLen / kPage;

// Staged writes: by default frames over veth carry the writer's own
// pages, which no area may take (link.c, untracked()).
constexpr const char *kStaged = "tx_stage_kb=16384";

// Node 0 writes from pinned memory into an area of node 1.
class AreaTest : public ClusterTest {
protected:
	std::string module_params() const override { return kStaged; }

	void SetUpPair(unsigned mtu, Placement placement = Placement::Default, unsigned links = 1)
	{
		ASSERT_NO_FATAL_FAILURE(make_pair(links, mtu));
		src_.emplace(kLen);
		fill_random(src_->data(), kLen, test_seed(77));
		auto s = c_->dev(0).register_memory(src_->data(), kLen, Access::RemoteRead);
		ME_ASSERT_OK(s);
		mr_src_.emplace(std::move(s).value());
		auto a = c_->dev(1).map_area(kLen);
		ME_ASSERT_OK(a);
		area_.emplace(std::move(a).value());
		auto d = c_->dev(1).register_memory(area_->data(), kLen, Access::RemoteReadWrite,
						    placement);
		ME_ASSERT_OK(d);
		ASSERT_TRUE(d->is_area());
		mr_dst_.emplace(std::move(d).value());
		auto cn = c_->dev(0).connect(c_->id(1));
		ME_ASSERT_OK(cn);
		conn_.emplace(std::move(cn).value());
	}

	void TearDown() override
	{
		conn_.reset();
		mr_src_.reset();
		mr_dst_.reset();
		area_.reset();
		ClusterTest::TearDown();
	}

	// Writes src[off, off + len) to the area at the same offset, waits.
	void write(uint64_t off, uint64_t len, uint64_t cookie)
	{
		ME_ASSERT_OK(conn_->write(*mr_src_, off, multiedge::remote_of(*mr_dst_), off, len,
					  cookie));
		auto c = c_->dev(0).wait_for(cookie, 30s);
		ME_ASSERT_OK(c);
		ASSERT_TRUE(c->ok()) << c->describe();
	}

	void expect_same(uint64_t off, uint64_t len)
	{
		EXPECT_EQ(first_difference(src_->data() + off, area_->data() + off, len), -1)
			<< "at " << off << " +" << len;
	}

	std::optional<Buffer> src_;
	std::optional<ReceiveArea> area_;
	std::optional<MemoryRegion> mr_src_, mr_dst_;
	std::optional<multiedge::Connection> conn_;
};

// Frames by reference, tracked as on a NIC: the veth copies them.
class AreaZcTest : public AreaTest {
protected:
	std::string module_params() const override { return "tx_zc_min=1024 tx_veth_track=1"; }
};

// The defaults: frames by reference, untracked, carry the writer's pages.
class AreaRefTest : public AreaTest {
protected:
	std::string module_params() const override { return ""; }
};

class AreaEagerParamTest : public AreaTest {
protected:
	std::string module_params() const override
	{
		return std::string(kStaged) + " flip_tlb=eager";
	}
};

class AreaNoFlipParamTest : public AreaTest {
protected:
	std::string module_params() const override
	{
		return std::string(kStaged) + " rx_flip=0";
	}
};

} // namespace

// A page-aligned 1 MiB write in 8 KiB packets: every page is flipped, the
// process sees every byte, and the module's page count returns to zero.
TEST_F(AreaTest, AlignedWriteIsPlacedByFlip)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(9000));
	EXPECT_EQ(accounting().area_pages, kPages);
	Flips before = flips();
	ASSERT_NO_FATAL_FAILURE(write(0, kLen, 1));
	expect_same(0, kLen);
	Flips d = flips() - before;
	EXPECT_EQ(d.flipped, kPages);
	EXPECT_EQ(d.copied, 0u);
	EXPECT_GT(d.tlb, 0u);
	// Replaced pages left the area: it still has exactly its own.
	EXPECT_EQ(accounting().area_pages, kPages);
}

// Unaligned offsets and lengths: the partial pages at either end are
// copied, the whole pages in between flipped, every byte right; later
// writes over flipped pages land too.
TEST_F(AreaTest, UnalignedAndMixedWritesAreIntact)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(9000));
	const std::pair<uint64_t, uint32_t> cases[] = {
		{100, 300000}, {kLen / 2 + 4095, 70001}, {3 * kPage, kPage}, {5 * kPage + 1, 1},
		{7 * kPage - 10, 2 * kPage + 20}, {kLen - 12345, 12345}};
	uint64_t cookie = 1, flipped = 0;
	for (auto [off, len] : cases) {
		Flips before = flips();
		ASSERT_NO_FATAL_FAILURE(write(off, len, cookie++));
		Flips d = flips() - before;
		// Every whole page of the range, and only those, was flipped.
		uint64_t first = (off + kPage - 1) / kPage, end = (off + len) / kPage;
		EXPECT_EQ(d.flipped, end > first ? end - first : 0) << "at " << off << " +" << len;
		EXPECT_EQ(d.copied, 0u) << "at " << off << " +" << len;
		flipped += d.flipped;
	}
	for (auto [off, len] : cases)
		expect_same(off, len);
	EXPECT_GT(flipped, 60u);
	// The whole area once more, after the mix.
	ASSERT_NO_FATAL_FAILURE(write(0, kLen, cookie++));
	expect_same(0, kLen);
}

// The same data copied: the region asked for copies, or the module was
// loaded with rx_flip=0, or the packets are too small to carry a page.
TEST_F(AreaTest, CopyPlacementNeverFlips)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(9000, Placement::Copy));
	Flips before = flips();
	ASSERT_NO_FATAL_FAILURE(write(0, kLen, 1));
	expect_same(0, kLen);
	Flips d = flips() - before;
	EXPECT_EQ(d.flipped, 0u);
	EXPECT_EQ(d.tlb, 0u);
}

TEST_F(AreaNoFlipParamTest, ModuleParameterTurnsFlippingOff)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(9000));
	Flips before = flips();
	ASSERT_NO_FATAL_FAILURE(write(0, kLen, 1));
	expect_same(0, kLen);
	Flips d = flips() - before;
	EXPECT_EQ(d.flipped, 0u);
	EXPECT_EQ(d.tlb, 0u);
}

TEST_F(AreaTest, SmallPacketsAreCopied)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(1500));
	Flips before = flips();
	ASSERT_NO_FATAL_FAILURE(write(0, kLen, 1));
	expect_same(0, kLen);
	EXPECT_EQ((flips() - before).flipped, 0u);
}

// Eager invalidation costs one page table update per page, lazy one per
// message; both place the same bytes.
TEST_F(AreaTest, EagerInvalidatesPerPageLazyPerMessage)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(9000, Placement::FlipEager));
	Flips before = flips();
	ASSERT_NO_FATAL_FAILURE(write(0, kLen, 1));
	expect_same(0, kLen);
	Flips eager = flips() - before;
	EXPECT_EQ(eager.flipped, kPages);
	EXPECT_EQ(eager.tlb, kPages);

	auto d = c_->dev(1).register_memory(area_->data(), kLen, Access::RemoteReadWrite,
					    Placement::FlipLazy);
	ME_ASSERT_OK(d);
	fill_random(src_->data(), kLen, 78);
	before = flips();
	ME_ASSERT_OK(conn_->write(*mr_src_, 0, multiedge::remote_of(d.value()), 0, kLen, 2));
	auto c = c_->dev(0).wait_for(2, 30s);
	ME_ASSERT_OK(c);
	ASSERT_TRUE(c->ok()) << c->describe();
	expect_same(0, kLen);
	Flips lazy = flips() - before;
	EXPECT_EQ(lazy.flipped, kPages);
	EXPECT_EQ(lazy.tlb, 1u);
}

TEST_F(AreaEagerParamTest, ModuleParameterChoosesEager)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(9000));
	Flips before = flips();
	ASSERT_NO_FATAL_FAILURE(write(0, 64 * kPage, 1));
	expect_same(0, 64 * kPage);
	EXPECT_EQ((flips() - before).tlb, 64u);
}

// Read responses flip too: node 1 reads node 0's memory into its area.
TEST_F(AreaTest, ReadResponsesAreFlipped)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(9000));
	auto back = c_->dev(1).connect(c_->id(0));
	ME_ASSERT_OK(back);
	Flips before = flips();
	ME_ASSERT_OK(back->read(*mr_dst_, 0, multiedge::remote_of(*mr_src_), 0, kLen, 9));
	auto c = c_->dev(1).wait_for(9, 30s);
	ME_ASSERT_OK(c);
	ASSERT_TRUE(c->ok()) << c->describe();
	expect_same(0, kLen);
	EXPECT_EQ((flips() - before).flipped, kPages);
}

// A packet tap on the receiving node keeps clones of the frames it takes:
// the module's skb then owns no page exclusively, and those pages are
// copied and counted as such.  The receiver's acks then ask for filled
// packets (FILL, wire 16), whose pages straddle packets and are copied
// uncounted, until a message's first packet can be flipped again: with
// the tap gone, the write after next flips every page.  Every byte right.
TEST_F(AreaTest, SharedFramesAreCopiedAndCounted)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(9000));
	int tap = -1;
	{
		Cluster::Enter in(c_->ns(1));
		ASSERT_TRUE(in.ok());
		tap = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
	}
	ASSERT_GE(tap, 0) << errno_name(errno);
	Flips before = flips();
	ASSERT_NO_FATAL_FAILURE(write(0, kLen, 1));
	::close(tap);
	expect_same(0, kLen);
	Flips d = flips() - before;
	EXPECT_GT(d.copied, 0u);
	EXPECT_LE(d.flipped + d.copied, kPages);
	for (uint64_t k = 2; k <= 3; k++) {
		fill_random(src_->data(), kLen, 40 + k);
		before = flips();
		ASSERT_NO_FATAL_FAILURE(write(0, kLen, k));
		expect_same(0, kLen);
	}
	d = flips() - before;
	EXPECT_EQ(d.flipped, kPages) << "not cut at the receiver's pages again";
	EXPECT_EQ(d.copied, 0u);
}

// Zero-copy transmit, tracked: veth copies the sender's pinned pages into
// fresh pages when it forwards, and those are flipped.
TEST_F(AreaZcTest, ZeroCopyFramesAreFlipped)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(9000));
	Flips before = flips();
	ASSERT_NO_FATAL_FAILURE(write(0, kLen, 1));
	expect_same(0, kLen);
	EXPECT_EQ((flips() - before).flipped, kPages);
}

// Untracked (the default over veth): the frames carry the writer's own
// pinned pages, which must never become the area's; every page is copied.
// Those a packet held whole are counted; the receiver's acks ask for
// filled packets from the first on (FILL), so some of a second write's
// pages straddle two packets, copied uncounted.
TEST_F(AreaRefTest, WritersPagesAreCopiedNeverFlipped)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(9000));
	Flips before = flips();
	ASSERT_NO_FATAL_FAILURE(write(0, kLen, 1));
	expect_same(0, kLen);
	Flips d = flips() - before;
	EXPECT_EQ(d.flipped, 0u);
	EXPECT_GT(d.copied, 0u);
	fill_random(src_->data(), kLen, 41);
	before = flips();
	ASSERT_NO_FATAL_FAILURE(write(0, kLen, 2));
	expect_same(0, kLen);
	d = flips() - before;
	EXPECT_EQ(d.flipped, 0u);
	EXPECT_GT(d.copied, 0u);
	EXPECT_LT(d.copied, kPages) << "the second write's packets cut at the receiver's pages";
}

// Notifications announce the data: when the target sees the event, the
// flipped pages are already what its page table maps.
TEST_F(AreaTest, NotifySeesFlippedData)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(9000));
	for (uint64_t k = 1; k <= 8; k++) {
		fill_random(src_->data(), kLen, 100 + k);
		ME_ASSERT_OK(conn_->write_notify(*mr_src_, 0, multiedge::remote_of(*mr_dst_), 0,
						 kLen, static_cast<uint32_t>(k), k));
		bool seen = false;
		for (int i = 0; i < 100 && !seen; i++) {
			auto ev = c_->dev(1).wait(16, 1s);
			ME_ASSERT_OK(ev);
			for (const auto &e : ev.value())
				if (e.type == multiedge::CompletionType::Notify && e.imm == k) {
					seen = true;
					expect_same(0, kLen);
				}
		}
		ASSERT_TRUE(seen) << "notification " << k << " never came";
		auto c = c_->dev(0).wait_for(k, 30s);
		ME_ASSERT_OK(c);
	}
}

// An ordered connection keeps early packets in its ring: those are copied
// whole (the frame's pages filled in first), and the data are right.
TEST_F(AreaTest, OrderedConnectionsAreIntact)
{
	ASSERT_NO_FATAL_FAILURE(SetUpPair(9000, Placement::Default, 2));
	auto oc = c_->dev(0).connect(c_->id(1), multiedge::Ordering::Ordered);
	ME_ASSERT_OK(oc);
	for (uint64_t k = 1; k <= 4; k++) {
		fill_random(src_->data(), kLen, 200 + k);
		ME_ASSERT_OK(oc->write(*mr_src_, 0, multiedge::remote_of(*mr_dst_), 0, kLen, k));
		auto c = c_->dev(0).wait_for(k, 30s);
		ME_ASSERT_OK(c);
		ASSERT_TRUE(c->ok()) << c->describe();
		expect_same(0, kLen);
	}
}
