// Guest tests of softirq-direct receive (kernel/rx.c, rx_direct): a small
// frame that finds its link's ring empty is handled by the NIC's softirq
// instead of waking a receive thread; so is a frame whose page fragments
// are the sender's memory (a veth's frame by reference), built on a
// per-CPU buffer.  Small writes, notifies and reads must land intact and
// complete exactly once either way, also into a receive area (whose page
// locks and page table work must then be safe in softirq), and large
// messages too.
// rx_direct is on by default; these load the module with it named; with
// rx_direct=0 no frame is handled there.

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "cluster.hpp"

using namespace metest;
using multiedge::Access;
using multiedge::Placement;
using namespace std::chrono_literals;

namespace {

constexpr size_t kLen = 1u << 20;
constexpr int kSmallOps = 600;
constexpr int kByRefOps = 8;

uint64_t rx_direct(multiedge::Device &d)
{
	auto links = d.links();
	if (!links) {
		ADD_FAILURE() << links.error().message();
		return 0;
	}
	uint64_t n = 0;
	for (const auto &l : links.value())
		n += l.rx_direct;
	return n;
}

class RxDirectTest : public ClusterTest {
protected:
	std::string module_params() const override { return "rx_direct=1"; }

	// Small writes and notifies of 1..512 B at scattered offsets into
	// `dst` at node 1, then 8 B reads of some of them back, then one
	// large write; every byte checked at the target and in what was read.
	// With `placement`, dst is a receive area of node 1.
	void exchange(uint8_t *dst, size_t dlen, std::optional<Placement> placement = {})
	{
		Buffer src(kLen), back(kLen);
		fill_random(src.data(), kLen, 1234);
		std::memset(back.data(), 0, kLen);
		auto ms = c_->dev(0).register_memory(src.data(), kLen, Access::None);
		ME_ASSERT_OK(ms);
		auto mb = c_->dev(0).register_memory(back.data(), kLen, Access::None);
		ME_ASSERT_OK(mb);
		auto md = placement ? c_->dev(1).register_memory(dst, dlen, Access::RemoteReadWrite,
								 *placement)
				    : c_->dev(1).register_memory(dst, dlen, Access::RemoteReadWrite);
		ME_ASSERT_OK(md);
		auto conn = c_->dev(0).connect(c_->id(1));
		ME_ASSERT_OK(conn);
		const auto rd = multiedge::remote_of(md.value());

		uint64_t cookie = 1;
		int notifies = 0;
		for (int i = 0; i < kSmallOps; i++) {
			const size_t len = 1 + (static_cast<size_t>(i) * 37) % 512;
			const size_t off = (static_cast<size_t>(i) * 1543) % (kLen / 2 - 512);
			if (i % 3 == 0) {
				ME_ASSERT_OK(conn->write_notify(ms.value(), off, rd, off, len,
								static_cast<uint32_t>(i), cookie));
				notifies++;
			} else {
				ME_ASSERT_OK(conn->write(ms.value(), off, rd, off, len, cookie));
			}
			auto c = c_->dev(0).wait_for(cookie, 10s);
			ME_ASSERT_OK(c);
			ASSERT_TRUE(c->ok()) << c->describe();
			cookie++;
		}
		// Every notification arrives once, with its value.
		int seen = 0;
		for (auto deadline = std::chrono::steady_clock::now() + 10s;
		     seen < notifies && std::chrono::steady_clock::now() < deadline;) {
			auto got = c_->dev(1).poll();
			ME_ASSERT_OK(got);
			for (const auto &n : got.value()) {
				if (n.type != multiedge::CompletionType::Notify)
					continue;
				ASSERT_TRUE(n.ok()) << n.describe();
				EXPECT_EQ(n.imm % 3, 0u) << "notification of a plain write";
				seen++;
			}
			if (got->empty())
				std::this_thread::sleep_for(1ms);
		}
		EXPECT_EQ(seen, notifies);
		for (int i = 0; i < kSmallOps; i++) {
			const size_t len = 1 + (static_cast<size_t>(i) * 37) % 512;
			const size_t off = (static_cast<size_t>(i) * 1543) % (kLen / 2 - 512);
			ASSERT_EQ(first_difference(src.data() + off, dst + off, len), -1)
				<< "write " << i << " (" << len << " B at " << off << ")";
		}
		for (int i = 0; i < kSmallOps; i += 7) {
			const size_t off = (static_cast<size_t>(i) * 1543) % (kLen / 2 - 512);
			ME_ASSERT_OK(conn->read(mb.value(), off, rd, off, 8, cookie));
			auto c = c_->dev(0).wait_for(cookie++, 10s);
			ME_ASSERT_OK(c);
			ASSERT_TRUE(c->ok()) << c->describe();
			ASSERT_EQ(first_difference(dst + off, back.data() + off, 8), -1) << "read " << i;
		}
		// A large write over what the small ones wrote: the threads' frames.
		ME_ASSERT_OK(conn->write(ms.value(), 0, rd, 0, kLen, cookie));
		auto c = c_->dev(0).wait_for(cookie, 30s);
		ME_ASSERT_OK(c);
		ASSERT_TRUE(c->ok()) << c->describe();
		EXPECT_EQ(first_difference(src.data(), dst, kLen), -1);
	}

	// Frames node 1 handled in softirq during writes of 64 KiB by
	// reference one at a time, each after a pause; and during as many
	// with eight in flight.
	struct ByReference {
		uint64_t one_at_a_time = 0;
		uint64_t eight_in_flight = 0;
	};

	// kByRefOps writes one at a time, then as many with eight in flight,
	// then kByRefOps reads back; every byte checked.
	ByReference by_reference(bool print)
	{
		constexpr uint32_t kOp = 64 << 10;
		constexpr size_t kStride = kOp + 101;	// never page-aligned twice
		ByReference r;
		Buffer src(kLen), dst(kLen), back(kLen);
		fill_random(src.data(), kLen, 77);
		std::memset(dst.data(), 0, kLen);
		std::memset(back.data(), 0, kLen);
		auto ms = c_->dev(0).register_memory(src.data(), kLen, Access::None);
		EXPECT_TRUE(ms) << ms.error().message();
		auto mb = c_->dev(0).register_memory(back.data(), kLen, Access::None);
		EXPECT_TRUE(mb) << mb.error().message();
		auto md = c_->dev(1).register_memory(dst.data(), kLen, Access::RemoteReadWrite);
		EXPECT_TRUE(md) << md.error().message();
		auto conn = c_->dev(0).connect(c_->id(1));
		EXPECT_TRUE(conn) << conn.error().message();
		if (!ms || !mb || !md || !conn)
			return r;
		const auto rd = multiedge::remote_of(md.value());
		auto done = [&](uint64_t cookie) {
			auto c = c_->dev(0).wait_for(cookie, 10s);
			if (!c) {
				ADD_FAILURE() << c.error().message();
				return false;
			}
			EXPECT_TRUE(c->ok()) << c->describe();
			return c->ok();
		};
		uint64_t cookie = 1, t0 = rx_direct(c_->dev(1));
		for (int i = 0; i < kByRefOps; i++) {
			const size_t off = static_cast<size_t>(i) * kStride;
			// The threads idle well past the softirq's 100 us.
			std::this_thread::sleep_for(2ms);
			EXPECT_TRUE(conn->write(ms.value(), off, rd, off, kOp, cookie));
			if (!done(cookie++))
				return r;
		}
		r.one_at_a_time = rx_direct(c_->dev(1)) - t0;
		t0 = rx_direct(c_->dev(1));
		const uint64_t first = cookie;
		for (int i = 0; i < kByRefOps; i++) {
			if (i >= 8 && !done(first + static_cast<uint64_t>(i) - 8))
				return r;
			// The same bytes again, from the other end of the buffer.
			const size_t off = kLen - kOp - static_cast<size_t>(i) * kStride;
			EXPECT_TRUE(conn->write(ms.value(), off, rd, off, kOp, cookie++));
		}
		for (uint64_t k = first + kByRefOps - 8; k < cookie; k++)
			if (!done(k))
				return r;
		r.eight_in_flight = rx_direct(c_->dev(1)) - t0;
		for (int i = 0; i < kByRefOps; i++) {
			const size_t off = static_cast<size_t>(i) * kStride;
			EXPECT_TRUE(conn->read(mb.value(), off, rd, off, kOp, cookie));
			if (!done(cookie++))
				return r;
		}
		for (int i = 0; i < kByRefOps; i++) {
			const size_t off = static_cast<size_t>(i) * kStride;
			const size_t end = kLen - kOp - static_cast<size_t>(i) * kStride;
			EXPECT_EQ(first_difference(src.data() + off, dst.data() + off, kOp), -1)
				<< "write " << i;
			EXPECT_EQ(first_difference(src.data() + end, dst.data() + end, kOp), -1)
				<< "write " << i << " of eight in flight";
			EXPECT_EQ(first_difference(src.data() + off, back.data() + off, kOp), -1)
				<< "read " << i;
		}
		if (print)
			std::printf("frames handled in softirq at the target: %llu of %d writes one "
				    "at a time, %llu of %d eight in flight\n",
				    static_cast<unsigned long long>(r.one_at_a_time), kByRefOps,
				    static_cast<unsigned long long>(r.eight_in_flight), kByRefOps);
		return r;
	}
};

class RxDirectOffTest : public RxDirectTest {
protected:
	std::string module_params() const override { return "rx_direct=0"; }
};

class RxDirectByRefOffTest : public RxDirectTest {
protected:
	std::string module_params() const override { return "rx_direct=1 rx_direct_kb=0"; }
};

} // namespace

// Small operations between two nodes land intact and complete once; the
// target handled data frames and the initiator acks in softirq.
TEST_F(RxDirectTest, SmallOperationsAreHandledInSoftirqAndLandIntact)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(1));
	Buffer dst(kLen);
	std::memset(dst.data(), 0, kLen);
	ASSERT_NO_FATAL_FAILURE(exchange(dst.data(), kLen));
	const uint64_t at_target = rx_direct(c_->dev(1)), at_initiator = rx_direct(c_->dev(0));
	std::printf("handled in softirq: %llu frames at the target, %llu at the initiator\n",
		    static_cast<unsigned long long>(at_target),
		    static_cast<unsigned long long>(at_initiator));
	EXPECT_GT(at_target, static_cast<uint64_t>(kSmallOps) / 4);
	EXPECT_GT(at_initiator, static_cast<uint64_t>(kSmallOps) / 4);
}

// Writes and reads of 64 KiB over a veth: their frames go by reference
// (page fragments of the sender's pinned memory).  One at a time after a
// pause, the link's threads idle, the softirq handles them itself (up to
// rx_direct_kb each time the threads went idle); eight in flight, the
// threads take what the budget leaves.  Every byte lands, every
// operation completes once.
TEST_F(RxDirectTest, FramesByReferenceOnAnIdleLinkAreHandledInSoftirqIntact)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(1));
	const ByReference r = by_reference(true);
	// 47 data frames per write; those by reference (all but the last,
	// whose few bytes are copied) are the softirq's within its budget.
	EXPECT_GT(r.one_at_a_time, static_cast<uint64_t>(kByRefOps) * 47 / 2);
}

// rx_direct_kb=0: frames by reference always go to the threads.
TEST_F(RxDirectByRefOffTest, FramesByReferenceGoToTheThreads)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(1));
	const ByReference r = by_reference(false);
	// A write's last frame, copied into one buffer, may still be.
	EXPECT_LE(r.one_at_a_time, static_cast<uint64_t>(kByRefOps) * 2);
}

// The same into a receive area (lazy flips of the large write's pages,
// copies of the small ones, possibly in softirq): every byte right.
TEST_F(RxDirectTest, SmallOperationsIntoAReceiveArea)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(1, 9000));
	auto area = c_->dev(1).map_area(kLen);
	ME_ASSERT_OK(area);
	ASSERT_NO_FATAL_FAILURE(exchange(area->data(), kLen, Placement::FlipLazy));
	EXPECT_GT(rx_direct(c_->dev(1)), static_cast<uint64_t>(kSmallOps) / 4);
}

// rx_direct=0: every frame goes through the threads, nothing in softirq.
TEST_F(RxDirectOffTest, NoFrameIsHandledInSoftirq)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(1));
	Buffer dst(kLen);
	std::memset(dst.data(), 0, kLen);
	ASSERT_NO_FATAL_FAILURE(exchange(dst.data(), kLen));
	EXPECT_EQ(rx_direct(c_->dev(1)), 0u);
	EXPECT_EQ(rx_direct(c_->dev(0)), 0u);
}
