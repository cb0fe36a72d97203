// Guest tests of remote atomic operations (ABI 19, ME_OP_ATOMIC) through
// raw ioctls: every operation at both sizes finds and leaves the right
// value in the real module; fetch-adds from a peer and the region owner's
// own CPU atomics on one counter all count, each exactly once; atomics on
// a receive area's pages; what is refused, at posting and by the target,
// leaves the target unchanged; and the library's calls, through the ioctl
// and io_uring doors.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <set>
#include <sys/ioctl.h>
#include <thread>

#include "cluster.hpp"
#include "module_util.hpp"
#include "multiedge/uring.hpp"
#include "raw_ioctl.hpp"
#include "uapi/multiedge.h"

using namespace metest;
using multiedge::Access;
using multiedge::AtomicOp;
using multiedge::CompletionType;
using multiedge::MemoryRegion;
using multiedge::Placement;
using multiedge::UringQueue;
using namespace std::chrono_literals;

namespace {

constexpr size_t kLen = 1 << 16;

uint64_t load(const uint8_t *p, uint32_t size)
{
	if (size == 4) {
		uint32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

void store(uint8_t *p, uint32_t size, uint64_t v)
{
	if (size == 4) {
		uint32_t w = static_cast<uint32_t>(v);
		memcpy(p, &w, 4);
	} else {
		memcpy(p, &v, 8);
	}
}

class AtomicTest : public ClusterTest {
protected:
	void SetUp() override
	{
		ClusterTest::SetUp();
		ASSERT_NO_FATAL_FAILURE(make_pair(2));
		local_.emplace(kLen);
		target_.emplace(kLen);
		ro_.emplace(4096);
		auto l = c_->dev(0).register_memory(local_->data(), kLen, Access::None);
		ME_ASSERT_OK(l);
		mr_local_.emplace(std::move(l).value());
		auto t = c_->dev(1).register_memory(target_->data(), kLen, Access::RemoteReadWrite);
		ME_ASSERT_OK(t);
		mr_target_.emplace(std::move(t).value());
		auto r = c_->dev(1).register_memory(ro_->data(), 4096, Access::RemoteRead);
		ME_ASSERT_OK(r);
		mr_ro_.emplace(std::move(r).value());
		auto cn = c_->dev(0).connect(c_->id(1));
		ME_ASSERT_OK(cn);
		conn_ = cn.value().id();
		conn_obj_.emplace(std::move(cn).value());
	}

	void TearDown() override
	{
		conn_obj_.reset();
		mr_local_.reset();
		mr_target_.reset();
		mr_ro_.reset();
		mr_area_.reset();
		ClusterTest::TearDown();
	}

	int fd0() { return c_->dev(0).fd(); }

	// An atomic from node 0's local buffer at loff onto `mr` at roff.
	me_post atomic(uint32_t aop, uint32_t size, const MemoryRegion &mr, uint64_t roff,
		       uint64_t loff, uint64_t cookie)
	{
		me_post p = post_of(ME_OP_ATOMIC, conn_, mr_local_->id(), loff, size);
		p.imm = aop;
		p.remote_region = mr.id();
		p.remote_key = static_cast<uint32_t>(mr.key());
		p.remote_key_hi = static_cast<uint32_t>(mr.key() >> 32);
		p.remote_off = roff;
		p.cookie = cookie;
		return p;
	}

	// Waits for the completion of `cookie` (others are kept for later).
	me_completion wait(uint64_t cookie)
	{
		for (int i = 0; i < 200 && !done_.count(cookie); i++) {
			me_completion e[64];
			me_poll_cq q{};
			q.size = sizeof(q);
			q.flags = ME_POLL_F_WAIT;
			q.count = 64;
			q.entry_size = sizeof(me_completion);
			q.entries = reinterpret_cast<uintptr_t>(e);
			q.timeout_ms = 100;
			EXPECT_EQ(io(fd0(), ME_IOC_POLL_CQ, &q), 0);
			for (uint32_t k = 0; k < q.count; k++) {
				EXPECT_EQ(done_.count(e[k].cookie), 0u) << "cookie " << e[k].cookie << " twice";
				done_[e[k].cookie] = e[k];
			}
		}
		EXPECT_EQ(done_.count(cookie), 1u) << "cookie " << cookie << " never completed";
		me_completion c = done_[cookie];
		done_.erase(cookie);
		return c;
	}

	std::optional<Buffer> local_, target_, ro_;
	std::optional<MemoryRegion> mr_local_, mr_target_, mr_ro_, mr_area_;
	std::optional<multiedge::Connection> conn_obj_;
	uint32_t conn_ = 0;
	std::map<uint64_t, me_completion> done_;
};

TEST_F(AtomicTest, EachOperationFindsAndLeavesTheRightValue)
{
	struct Case {
		uint32_t aop, size;
		uint64_t before, operand, compare, after;
	};
	const uint64_t m5 = static_cast<uint64_t>(-5), m5_32 = 0xfffffffbu;
	const Case cases[] = {
		{ME_ATOMIC_ADD, 8, 40, 2, 0, 42},
		{ME_ATOMIC_ADD, 4, 0xffffffffu, 3, 0, 2},
		{ME_ATOMIC_AND, 8, 0xff00ff00ff00ff00ull, 0x0ff00ff00ff00ff0ull, 0, 0x0f000f000f000f00ull},
		{ME_ATOMIC_OR, 4, 0x0f0f0000u, 0x0000f0f0u, 0, 0x0f0ff0f0u},
		{ME_ATOMIC_XOR, 8, 0xaaaa, 0xffff, 0, 0x5555},
		{ME_ATOMIC_SWAP, 8, 7, 0x123456789abcdef0ull, 0, 0x123456789abcdef0ull},
		{ME_ATOMIC_CSWAP, 8, 7, 9, 7, 9},
		{ME_ATOMIC_CSWAP, 8, 7, 9, 8, 7},
		{ME_ATOMIC_CSWAP, 4, 0xffffffffu, 1, 0xffffffffu, 1},
		{ME_ATOMIC_SMIN, 8, 3, m5, 0, m5},
		{ME_ATOMIC_SMAX, 4, m5_32, 3, 0, 3},
		{ME_ATOMIC_UMIN, 8, 3, m5, 0, 3},
		{ME_ATOMIC_UMAX, 4, 3, m5_32, 0, m5_32},
		{ME_ATOMIC_READ, 8, 0x0102030405060708ull, 0, 0, 0x0102030405060708ull},
	};
	uint64_t off = 0, cookie = 1;
	for (const Case &k : cases) {
		SCOPED_TRACE("operation " + std::to_string(k.aop) + " size " + std::to_string(k.size));
		memset(target_->data() + off, 0, 8);
		store(target_->data() + off, k.size, k.before);
		// The operand (and the compare value) go in the local buffer.
		uint8_t *l = local_->data() + 2 * off;
		memset(l, 0x5a, 16);
		if (k.aop != ME_ATOMIC_READ)
			store(l, k.size, k.operand);
		if (k.aop == ME_ATOMIC_CSWAP)
			store(l + k.size, k.size, k.compare);
		me_post p = atomic(k.aop, k.size, *mr_target_, off, 2 * off, cookie);
		ASSERT_EQ(errno_name(io(fd0(), ME_IOC_POST, &p)), "0");
		me_completion c = wait(cookie++);
		EXPECT_EQ(c.status, 0);
		EXPECT_EQ(c.type, static_cast<uint32_t>(ME_CQ_ATOMIC));
		EXPECT_EQ(c.len, k.size);
		EXPECT_EQ(load(l, k.size), k.before) << "the value found";
		EXPECT_EQ(load(target_->data() + off, k.size), k.after) << "the value left";
		if (k.size == 4) {
			EXPECT_EQ(load(target_->data() + off + 4, 4), 0u) << "beyond the 4 bytes";
			EXPECT_EQ(load(l + 4, 4), k.aop == ME_ATOMIC_CSWAP ? k.compare : 0x5a5a5a5au)
				<< "the local buffer beyond the value found";
		}
		off += 8;
	}
}

// A peer's fetch-adds (64 in flight) and the owner's own atomic increments
// on one counter: every one counts once, and the values the peer found
// are all different.
TEST_F(AtomicTest, PeerAndOwnerAddToOneCounterExactly)
{
	constexpr int kRemote = 3000, kWindow = 64;
	constexpr uint64_t kCtr = 4096;
	memset(target_->data() + kCtr, 0, 8);
	auto *ctr = reinterpret_cast<uint64_t *>(target_->data() + kCtr);
	// The owner adds for as long as the peer's operations run.
	std::atomic<bool> stop{false};
	uint64_t local = 0;
	std::thread owner([&] {
		while (!stop.load()) {
			__atomic_fetch_add(ctr, 1, __ATOMIC_SEQ_CST);
			local++;
		}
	});
	int posted = 0, completed = 0;
	std::set<uint64_t> found;
	bool failed = false;	// no ASSERT while the owner's thread runs
	while (completed < kRemote && !failed) {
		while (posted < kRemote && posted - completed < kWindow) {
			uint64_t loff = static_cast<uint64_t>(posted) * 8;
			store(local_->data() + loff, 8, 1);
			me_post p = atomic(ME_ATOMIC_ADD, 8, *mr_target_, kCtr, loff, posted + 1);
			int err = io(fd0(), ME_IOC_POST, &p);
			EXPECT_EQ(errno_name(err), "0");
			if (err) {
				failed = true;
				break;
			}
			posted++;
		}
		me_completion c = wait(completed + 1);
		EXPECT_EQ(c.status, 0) << "atomic " << completed;
		failed |= c.status != 0;
		found.insert(load(local_->data() + static_cast<uint64_t>(completed) * 8, 8));
		completed++;
	}
	stop = true;
	owner.join();
	ASSERT_FALSE(failed);
	EXPECT_GT(local, 0u);
	EXPECT_EQ(__atomic_load_n(ctr, __ATOMIC_SEQ_CST), kRemote + local);
	EXPECT_EQ(found.size(), static_cast<size_t>(kRemote)) << "two adds found the same value";
	EXPECT_LT(*found.rbegin(), kRemote + local);
	std::cout << "[ info ] " << kRemote << " remote adds beside " << local << " of the owner's\n";
}

// A figure, not a check: an atomic is one round trip, as an 8-byte read
// is.  Alternating, one at a time, post to completion; medians printed.
TEST_F(AtomicTest, RoundTripBesideAnEightByteRead)
{
	constexpr int kRounds = 400;
	std::vector<double> at, rd;
	for (int i = 0; i < 2 * kRounds; i++) {
		const bool atomic_turn = i % 2 == 0;
		me_post p = atomic(ME_ATOMIC_ADD, 8, *mr_target_, 256, 0, 1000 + i);
		if (!atomic_turn) {
			p.opcode = ME_OP_READ;
			p.imm = 0;
		}
		store(local_->data(), 8, 1);
		auto t0 = std::chrono::steady_clock::now();
		ASSERT_EQ(errno_name(io(fd0(), ME_IOC_POST, &p)), "0");
		ASSERT_EQ(wait(1000 + i).status, 0);
		double us = std::chrono::duration<double, std::micro>(
				    std::chrono::steady_clock::now() - t0).count();
		(atomic_turn ? at : rd).push_back(us);
	}
	EXPECT_EQ(load(target_->data() + 256, 8), static_cast<uint64_t>(kRounds));
	auto median = [](std::vector<double> v) {
		std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
		return v[v.size() / 2];
	};
	const double ma = median(at), mr = median(rd);
	std::cout << "[ info ] round trip, post to completion, median of " << kRounds
		  << ": fetch-add " << ma << " us, 8-byte read " << mr << " us (" << ma / mr
		  << "x)\n";
}

// The module's own pages (a receive area, ABI 6) take atomics as well.
TEST_F(AtomicTest, OnAReceiveArea)
{
	auto area = c_->dev(1).map_area(2 * 4096);
	ME_ASSERT_OK(area);
	auto mr = c_->dev(1).register_memory(area->data(), area->size(), Access::RemoteReadWrite,
					     Placement::Default);
	ME_ASSERT_OK(mr);
	mr_area_.emplace(std::move(mr).value());
	store(area->data() + 4096 + 24, 8, 1000);
	for (uint64_t i = 0; i < 10; i++) {
		store(local_->data() + 8 * i, 8, 5);
		me_post p = atomic(ME_ATOMIC_ADD, 8, *mr_area_, 4096 + 24, 8 * i, 100 + i);
		ASSERT_EQ(errno_name(io(fd0(), ME_IOC_POST, &p)), "0");
	}
	for (uint64_t i = 0; i < 10; i++)
		EXPECT_EQ(wait(100 + i).status, 0);
	EXPECT_EQ(load(area->data() + 4096 + 24, 8), 1050u);
	mr_area_.reset();
}

// Connection::atomic/compare_swap and UringQueue::atomic against the
// real module.
TEST_F(AtomicTest, ThroughTheLibrary)
{
	auto &dev = c_->dev(0);
	const multiedge::RemoteRegion remote = multiedge::remote_of(*mr_target_);
	store(target_->data() + 64, 8, 10);
	ME_ASSERT_OK(conn_obj_->atomic(AtomicOp::Add, *mr_local_, 0, remote, 64, 8, 5, 1));
	auto d = dev.wait_for(1, 10s);
	ME_ASSERT_OK(d);
	EXPECT_EQ(d->type, CompletionType::Atomic);
	EXPECT_TRUE(d->ok()) << d->describe();
	EXPECT_EQ(multiedge::atomic_value(*mr_local_, 0, 8).value(), 10u);
	EXPECT_EQ(load(target_->data() + 64, 8), 15u);
	// Matching, then no longer.
	for (uint64_t cookie : {2, 3}) {
		ME_ASSERT_OK(conn_obj_->compare_swap(*mr_local_, 16, remote, 64, 8, 15, 99, cookie));
		d = dev.wait_for(cookie, 10s);
		ME_ASSERT_OK(d);
		EXPECT_TRUE(d->ok()) << d->describe();
		EXPECT_EQ(multiedge::atomic_value(*mr_local_, 16, 8).value(), cookie == 2 ? 15u : 99u);
		EXPECT_EQ(load(target_->data() + 64, 8), 99u);
	}
	// A refusal the library explains.
	ME_ASSERT_OK(conn_obj_->atomic(AtomicOp::Add, *mr_local_, 0, remote, 68, 8, 1, 4));
	d = dev.wait_for(4, 10s);
	ME_ASSERT_OK(d);
	EXPECT_EQ(d->status, EINVAL) << d->describe();

	// 32 fetch-adds in one submission of the io_uring door.
	auto q = UringQueue::create(dev);
	ME_ASSERT_OK(q);
	constexpr int kN = 32;
	for (int i = 0; i < kN; i++)
		ME_ASSERT_OK(q->atomic(*conn_obj_, AtomicOp::Add, *mr_local_, 64 + 8 * i, remote, 64, 8,
				       1, 100 + i));
	ME_ASSERT_OK(q->submit());
	std::set<uint64_t> found, cookies;
	for (int got = 0, tries = 0; got < kN && tries < 100; tries++) {
		auto r = q->reap(kN - got, 1, 1s);
		ME_ASSERT_OK(r);
		for (const auto &c : r.value()) {
			EXPECT_EQ(c.type, CompletionType::Atomic);
			EXPECT_TRUE(c.ok()) << c.describe();
			EXPECT_TRUE(cookies.insert(c.cookie).second) << "twice: " << c.describe();
			found.insert(multiedge::atomic_value(*mr_local_, 64 + 8 * (c.cookie - 100), 8).value());
			got++;
		}
	}
	EXPECT_EQ(cookies.size(), static_cast<size_t>(kN));
	EXPECT_EQ(found.size(), static_cast<size_t>(kN));
	EXPECT_EQ(*found.begin(), 99u);
	EXPECT_EQ(load(target_->data() + 64, 8), 99u + kN);
}

TEST_F(AtomicTest, RefusedLeavesTheTargetUnchanged)
{
	store(target_->data(), 8, 5);
	store(local_->data(), 8, 1);
	const int fd = fd0();
	uint64_t cookie = 1;
	auto refused = [&](me_post p, int32_t want, const char *what) {
		SCOPED_TRACE(what);
		p.cookie = cookie;
		ASSERT_EQ(errno_name(io(fd, ME_IOC_POST, &p)), "0");
		me_completion c = wait(cookie++);
		EXPECT_EQ(c.type, static_cast<uint32_t>(ME_CQ_ATOMIC));
		EXPECT_EQ(errno_name(-c.status), errno_name(-want));
		EXPECT_EQ(c.len, 0u);
		EXPECT_EQ(load(target_->data(), 8), 5u);
		EXPECT_EQ(load(local_->data(), 8), 1u) << "nothing landed locally";
	};
	me_post p = atomic(ME_ATOMIC_ADD, 8, *mr_target_, 0, 0, 0);
	p.remote_key ^= 1;
	refused(p, -EACCES, "wrong key");
	refused(atomic(ME_ATOMIC_ADD, 8, *mr_ro_, 0, 0, 0), -EACCES, "read-only region");
	refused(atomic(ME_ATOMIC_ADD, 8, *mr_target_, 4, 0, 0), -EINVAL, "misaligned");
	refused(atomic(ME_ATOMIC_ADD, 8, *mr_target_, kLen, 0, 0), -ERANGE, "beyond the region");
	// READ needs read access only.
	store(ro_->data() + 8, 8, 0xfeed);
	me_post rd = atomic(ME_ATOMIC_READ, 8, *mr_ro_, 8, 8, cookie);
	ASSERT_EQ(errno_name(io(fd, ME_IOC_POST, &rd)), "0");
	EXPECT_EQ(wait(cookie++).status, 0);
	EXPECT_EQ(load(local_->data() + 8, 8), 0xfeedu);

	// Refused at posting: nothing sent.
	struct Bad {
		const char *what;
		me_post p;
		int err;
	};
	auto with = [&](auto f) {
		me_post b = atomic(ME_ATOMIC_ADD, 8, *mr_target_, 0, 0, 999);
		f(b);
		return b;
	};
	const Bad bad[] = {
		{"no operation", with([](me_post &b) { b.imm = 0; }), EOPNOTSUPP},
		{"unknown operation", with([](me_post &b) { b.imm = ME_ATOMIC_READ + 1; }), EOPNOTSUPP},
		{"size 2", with([](me_post &b) { b.len = 2; }), EINVAL},
		{"size 16", with([](me_post &b) { b.len = 16; }), EINVAL},
		{"a port", with([](me_post &b) { b.port = 5; }), EINVAL},
		{"result beyond the local region", with([](me_post &b) { b.local_off = kLen - 4; }),
		 ERANGE},
		{"compare value beyond the local region", with([](me_post &b) {
			 b.imm = ME_ATOMIC_CSWAP;
			 b.local_off = kLen - 8;
		 }), ERANGE},
	};
	for (const Bad &b : bad) {
		me_post q = b.p;
		EXPECT_EQ(errno_name(io(fd, ME_IOC_POST, &q)), errno_name(b.err)) << b.what;
	}
	std::this_thread::sleep_for(200ms);
	EXPECT_EQ(load(target_->data(), 8), 5u);
	me_completion e[4];
	me_poll_cq q{};
	q.size = sizeof(q);
	q.count = 4;
	q.entry_size = sizeof(me_completion);
	q.entries = reinterpret_cast<uintptr_t>(e);
	EXPECT_EQ(io(fd, ME_IOC_POLL_CQ, &q), 0);
	EXPECT_EQ(q.count, 0u) << "a refused post completed";
}

} // namespace
