// Guest tests of the loopback (ABI 20, ME_CONN_LOOPBACK): writes, notifies,
// reads and atomics between two Devices of one node, done by the module
// without a connection or a link; the checks a peer's module makes (key,
// access, range, alignment), with its errors in the completion and the
// target untouched; what posting refuses; no region of another node is
// reachable; a receive area as target; two threads' fetch-adds beside the
// owner's own on one counter; the library's calls and the io_uring door.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <set>
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
using multiedge::Device;
using multiedge::MemoryRegion;
using multiedge::Placement;
using multiedge::UringQueue;
using namespace std::chrono_literals;

namespace {

constexpr size_t kLen = 1 << 20;

uint64_t load8(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

void store8(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

// Node 0 (no link) with two Devices: a (the poster) and b (the target's
// owner); node 1 exists only to hold a region no loopback may reach.
class LoopbackTest : public ClusterTest {
protected:
	void SetUp() override
	{
		ClusterTest::SetUp();
		ASSERT_EQ(c_->add_node(), 0);
		ASSERT_EQ(c_->add_node(), 1);
		ASSERT_TRUE(c_->start());
		auto b = c_->open_in(0);
		ME_ASSERT_OK(b);
		b_.emplace(std::move(b).value());
		src_.emplace(kLen);
		dst_.emplace(kLen);
		ro_.emplace(4096);
		far_.emplace(4096);
		auto s = a().register_memory(src_->data(), kLen, Access::None);
		ME_ASSERT_OK(s);
		mr_src_.emplace(std::move(s).value());
		auto d = b_->register_memory(dst_->data(), kLen, Access::RemoteReadWrite);
		ME_ASSERT_OK(d);
		mr_dst_.emplace(std::move(d).value());
		auto r = b_->register_memory(ro_->data(), 4096, Access::RemoteRead);
		ME_ASSERT_OK(r);
		mr_ro_.emplace(std::move(r).value());
		auto f = c_->dev(1).register_memory(far_->data(), 4096, Access::RemoteReadWrite);
		ME_ASSERT_OK(f);
		mr_far_.emplace(std::move(f).value());
	}

	void TearDown() override
	{
		mr_src_.reset();
		mr_dst_.reset();
		mr_ro_.reset();
		mr_far_.reset();
		b_.reset();
		ClusterTest::TearDown();
	}

	Device &a() { return c_->dev(0); }

	// A raw post from a's source region at loff onto `mr` at roff.
	me_post post(uint32_t opcode, const MemoryRegion &mr, uint64_t roff, uint64_t loff,
		     uint32_t len, uint64_t cookie)
	{
		me_post p = post_of(opcode, ME_CONN_LOOPBACK, mr_src_->id(), loff, len);
		p.remote_region = mr.id();
		p.remote_key = static_cast<uint32_t>(mr.key());
		p.remote_key_hi = static_cast<uint32_t>(mr.key() >> 32);
		p.remote_off = roff;
		p.cookie = cookie;
		return p;
	}

	// The completions queued on `fd` right now (a loopback's is there
	// when its post returns: no waiting).
	static std::vector<me_completion> harvest(int fd)
	{
		me_completion e[64];
		me_poll_cq q{};
		q.size = sizeof(q);
		q.count = 64;
		q.entry_size = sizeof(me_completion);
		q.entries = reinterpret_cast<uintptr_t>(e);
		EXPECT_EQ(io(fd, ME_IOC_POLL_CQ, &q), 0);
		return {e, e + q.count};
	}

	// Posts p on a and returns its completion, which must be the only one.
	me_completion run(me_post p)
	{
		EXPECT_EQ(errno_name(io(a().fd(), ME_IOC_POST, &p)), "0");
		auto got = harvest(a().fd());
		EXPECT_EQ(got.size(), 1u) << "one completion, queued before the post returned";
		return got.empty() ? me_completion{} : got[0];
	}

	std::optional<Device> b_;
	std::optional<Buffer> src_, dst_, ro_, far_;
	std::optional<MemoryRegion> mr_src_, mr_dst_, mr_ro_, mr_far_;
};

TEST_F(LoopbackTest, WritesNotifiesAndReadsAnotherDevicesRegion)
{
	std::mt19937_64 rng(7);
	for (size_t i = 0; i < kLen; i += 8)
		store8(src_->data() + i, rng());
	const uint32_t node = c_->id(0);

	// Unaligned on both sides, across many pages.
	constexpr uint32_t kBig = 700 * 1000;
	me_completion c = run(post(ME_OP_WRITE, *mr_dst_, 3001, 100, kBig, 1));
	EXPECT_EQ(c.cookie, 1u);
	EXPECT_EQ(c.type, static_cast<uint32_t>(ME_CQ_WRITE));
	EXPECT_EQ(c.status, 0);
	EXPECT_EQ(c.len, kBig);
	EXPECT_EQ(c.conn, ME_CONN_LOOPBACK);
	EXPECT_EQ(c.peer, node);
	EXPECT_EQ(memcmp(dst_->data() + 3001, src_->data() + 100, kBig), 0);
	EXPECT_EQ(dst_->data()[3000], 0) << "written before its range";
	EXPECT_EQ(dst_->data()[3001 + kBig], 0) << "written past its range";
	EXPECT_TRUE(harvest(b_->fd()).empty()) << "a plain write tells the target nothing";

	// A notify: the target's owner hears of it, with the loopback's ids.
	me_post p = post(ME_OP_NOTIFY, *mr_dst_, 8, 64, 16, 2);
	p.imm = 0xfeed;
	c = run(p);
	EXPECT_EQ(c.type, static_cast<uint32_t>(ME_CQ_WRITE));
	EXPECT_EQ(c.status, 0);
	EXPECT_EQ(c.imm, 0xfeedu);
	auto ev = harvest(b_->fd());
	ASSERT_EQ(ev.size(), 1u);
	EXPECT_EQ(ev[0].type, static_cast<uint32_t>(ME_CQ_NOTIFY));
	EXPECT_EQ(ev[0].status, 0);
	EXPECT_EQ(ev[0].imm, 0xfeedu);
	EXPECT_EQ(ev[0].region, mr_dst_->id());
	EXPECT_EQ(ev[0].off, 8u);
	EXPECT_EQ(ev[0].len, 16u);
	EXPECT_EQ(ev[0].conn, ME_CONN_LOOPBACK);
	EXPECT_EQ(ev[0].peer, node);
	EXPECT_EQ(memcmp(dst_->data() + 8, src_->data() + 64, 16), 0);

	// A read back into another part of a's region.
	memset(dst_->data() + 200000, 0xab, 5000);
	c = run(post(ME_OP_READ, *mr_dst_, 200000, kLen - 5000, 5000, 3));
	EXPECT_EQ(c.type, static_cast<uint32_t>(ME_CQ_READ));
	EXPECT_EQ(c.status, 0);
	EXPECT_EQ(c.len, 5000u);
	for (size_t i = kLen - 5000; i < kLen; i++)
		ASSERT_EQ(src_->data()[i], 0xab) << "byte " << i;
	// A read-only region gives its bytes too.
	memset(ro_->data(), 0x11, 4096);
	c = run(post(ME_OP_READ, *mr_ro_, 0, 0, 4096, 4));
	EXPECT_EQ(c.status, 0);
	EXPECT_EQ(src_->data()[4095], 0x11);
	// And a's own region is a target like any other, if its access says so.
	auto own = a().register_memory(ro_->data(), 4096, Access::RemoteWrite);
	ME_ASSERT_OK(own);
	c = run(post(ME_OP_WRITE, own.value(), 0, 8, 8, 5));
	EXPECT_EQ(c.status, 0);
	EXPECT_EQ(memcmp(ro_->data(), src_->data() + 8, 8), 0);
}

TEST_F(LoopbackTest, AtomicsFindAndLeaveTheRightValues)
{
	store8(dst_->data() + 64, 40);
	store8(src_->data(), 2);
	me_post p = post(ME_OP_ATOMIC, *mr_dst_, 64, 0, 8, 1);
	p.imm = ME_ATOMIC_ADD;
	me_completion c = run(p);
	EXPECT_EQ(c.type, static_cast<uint32_t>(ME_CQ_ATOMIC));
	EXPECT_EQ(c.status, 0);
	EXPECT_EQ(c.len, 8u);
	EXPECT_EQ(load8(src_->data()), 40u) << "the value found";
	EXPECT_EQ(load8(dst_->data() + 64), 42u) << "the value left";

	// Compare-and-swap, 4 bytes: the operand, then the value compared with.
	uint32_t v = 0xffffffffu, operand = 7, compare = 0xffffffffu;
	memcpy(dst_->data() + 72, &v, 4);
	memcpy(src_->data() + 16, &operand, 4);
	memcpy(src_->data() + 20, &compare, 4);
	p = post(ME_OP_ATOMIC, *mr_dst_, 72, 16, 4, 2);
	p.imm = ME_ATOMIC_CSWAP;
	c = run(p);
	EXPECT_EQ(c.status, 0);
	memcpy(&v, src_->data() + 16, 4);
	EXPECT_EQ(v, 0xffffffffu);
	memcpy(&v, dst_->data() + 72, 4);
	EXPECT_EQ(v, 7u);
	memcpy(&v, dst_->data() + 76, 4);
	EXPECT_EQ(v, 0u) << "beyond the 4 bytes";

	// A read needs only remote read.
	store8(ro_->data() + 8, 0x0102030405060708ull);
	p = post(ME_OP_ATOMIC, *mr_ro_, 8, 32, 8, 3);
	p.imm = ME_ATOMIC_READ;
	c = run(p);
	EXPECT_EQ(c.status, 0);
	EXPECT_EQ(load8(src_->data() + 32), 0x0102030405060708ull);
}

// Everything a peer's module refuses, this node's refuses the same way, in
// the completion, and the target keeps its bytes.
TEST_F(LoopbackTest, RefusedAsAPeerWouldBe)
{
	memset(dst_->data(), 0x33, 4096);
	memset(ro_->data(), 0x44, 4096);
	memset(src_->data(), 0x55, 4096);
	uint64_t cookie = 1;
	auto refused = [&](me_post p, int32_t want, const char *what) {
		SCOPED_TRACE(what);
		p.cookie = cookie++;
		me_completion c = run(p);
		EXPECT_EQ(c.cookie, p.cookie);
		EXPECT_EQ(c.status, want);
		EXPECT_EQ(c.len, 0u);
	};
	me_post p = post(ME_OP_WRITE, *mr_dst_, 0, 0, 64, 0);
	p.remote_key ^= 1;
	refused(p, -EACCES, "wrong key");
	p = post(ME_OP_READ, *mr_dst_, 0, 0, 64, 0);
	p.remote_key_hi ^= 0x80000000u;
	refused(p, -EACCES, "wrong key, high half");
	refused(post(ME_OP_WRITE, *mr_ro_, 0, 0, 64, 0), -EACCES, "a read-only region written");
	me_post at = post(ME_OP_ATOMIC, *mr_ro_, 0, 0, 8, 0);
	at.imm = ME_ATOMIC_ADD;
	refused(at, -EACCES, "an atomic that writes a read-only region");
	refused(post(ME_OP_WRITE, *mr_dst_, kLen - 32, 0, 64, 0), -ERANGE, "past the end");
	refused(post(ME_OP_READ, *mr_dst_, kLen + 4096, 0, 64, 0), -ERANGE, "beyond the region");
	p = post(ME_OP_WRITE, *mr_dst_, 0, 0, 64, 0);
	p.remote_region = 0x7fffffff;
	refused(p, -EACCES, "no such region");
	// Node 1's region: the right id and key, another node.
	refused(post(ME_OP_WRITE, *mr_far_, 0, 0, 64, 0), -EACCES, "another node's region");
	at = post(ME_OP_ATOMIC, *mr_dst_, 4, 0, 8, 0);
	at.imm = ME_ATOMIC_SWAP;
	refused(at, -EINVAL, "an atomic on memory not aligned to its size");
	me_post notify = post(ME_OP_NOTIFY, *mr_ro_, 0, 0, 8, 0);
	notify.imm = 9;
	refused(notify, -EACCES, "a notify into a read-only region");
	EXPECT_TRUE(harvest(b_->fd()).empty()) << "a refused notify tells the owner nothing";

	for (size_t i = 0; i < 4096; i++) {
		ASSERT_EQ(dst_->data()[i], 0x33) << "target byte " << i;
		ASSERT_EQ(ro_->data()[i], 0x44) << "read-only byte " << i;
		ASSERT_EQ(src_->data()[i], 0x55) << "local byte " << i << " (a refused read)";
	}
	EXPECT_EQ(far_->data()[0], 0);
}

// What posting refuses: nothing done, nothing queued.
TEST_F(LoopbackTest, PostingRefusals)
{
	const int fd = a().fd();
	me_post p = post_of(ME_OP_SEND, ME_CONN_LOOPBACK, mr_src_->id(), 0, 16);
	EXPECT_EQ(errno_name(io(fd, ME_IOC_POST, &p)), "EOPNOTSUPP") << "a send";
	p = post(ME_OP_WRITE, *mr_dst_, 0, 0, 64, 1);
	p.local_region = mr_dst_->id();
	EXPECT_EQ(errno_name(io(fd, ME_IOC_POST, &p)), "ENOENT") << "b's region as the local one";
	p = post(ME_OP_WRITE, *mr_dst_, 0, kLen - 8, 64, 1);
	EXPECT_EQ(errno_name(io(fd, ME_IOC_POST, &p)), "ERANGE") << "past the local region";
	p = post(ME_OP_WRITE, *mr_dst_, ~0ull - 8, 0, 64, 1);
	EXPECT_EQ(errno_name(io(fd, ME_IOC_POST, &p)), "ERANGE") << "the remote range wraps";
	p = post(ME_OP_ATOMIC, *mr_dst_, 0, 0, 8, 1);
	p.imm = ME_ATOMIC_CSWAP;
	p.local_off = kLen - 8;
	EXPECT_EQ(errno_name(io(fd, ME_IOC_POST, &p)), "ERANGE") << "no room for the compare value";
	p = post(ME_OP_ATOMIC, *mr_dst_, 0, 0, 2, 1);
	p.imm = ME_ATOMIC_ADD;
	EXPECT_EQ(errno_name(io(fd, ME_IOC_POST, &p)), "EINVAL") << "a 2-byte atomic";
	EXPECT_TRUE(harvest(fd).empty());
	EXPECT_TRUE(harvest(b_->fd()).empty());
}

// Whole pages written into a receive area (ABI 6) land, and atomics work
// on its pages.
TEST_F(LoopbackTest, IntoAReceiveArea)
{
	auto area = b_->map_area(4 * 4096);
	ME_ASSERT_OK(area);
	auto mr = b_->register_memory(area->data(), area->size(), Access::RemoteReadWrite,
				      Placement::Default);
	ME_ASSERT_OK(mr);
	for (size_t i = 0; i < 3 * 4096; i++)
		src_->data()[i] = static_cast<uint8_t>(i * 7 + 1);
	me_completion c = run(post(ME_OP_WRITE, mr.value(), 4096, 0, 3 * 4096, 1));
	EXPECT_EQ(c.status, 0);
	EXPECT_EQ(memcmp(area->data() + 4096, src_->data(), 3 * 4096), 0);
	store8(area->data() + 16, 5);
	store8(src_->data() + 64, 10);
	me_post p = post(ME_OP_ATOMIC, mr.value(), 16, 64, 8, 2);
	p.imm = ME_ATOMIC_ADD;
	c = run(p);
	EXPECT_EQ(c.status, 0);
	EXPECT_EQ(load8(src_->data() + 64), 5u);
	EXPECT_EQ(load8(area->data() + 16), 15u);
}

// Two posting threads' fetch-adds and the owner's own atomic increments on
// one counter: each counts once.
TEST_F(LoopbackTest, ConcurrentFetchAddsCountExactly)
{
	constexpr int kEach = 2000;
	auto second = c_->open_in(0);
	ME_ASSERT_OK(second);
	Buffer buf2(4096);
	auto mr2 = second->register_memory(buf2.data(), 4096, Access::None);
	ME_ASSERT_OK(mr2);
	std::atomic<bool> stop{false};
	std::atomic<uint64_t> own{0};
	auto *counter = reinterpret_cast<std::atomic<uint64_t> *>(dst_->data() + 128);
	counter->store(0);
	std::thread owner([&] {
		while (!stop.load()) {
			counter->fetch_add(1);
			own.fetch_add(1);
		}
	});
	auto adder = [&](Device &d, const MemoryRegion &local, std::set<uint64_t> &found) {
		for (int i = 0; i < kEach; i++) {
			store8(local.id() == mr_src_->id() ? src_->data() : buf2.data(), 1);
			me_post p = post_of(ME_OP_ATOMIC, ME_CONN_LOOPBACK, local.id(), 0, 8);
			p.imm = ME_ATOMIC_ADD;
			p.remote_region = mr_dst_->id();
			p.remote_key = static_cast<uint32_t>(mr_dst_->key());
			p.remote_key_hi = static_cast<uint32_t>(mr_dst_->key() >> 32);
			p.remote_off = 128;
			p.cookie = static_cast<uint64_t>(i) + 1;
			ASSERT_EQ(io(d.fd(), ME_IOC_POST, &p), 0);
			auto got = harvest(d.fd());
			ASSERT_EQ(got.size(), 1u);
			ASSERT_EQ(got[0].status, 0);
			found.insert(load8(local.id() == mr_src_->id() ? src_->data() : buf2.data()));
		}
	};
	std::set<uint64_t> f1, f2;
	std::thread t1([&] { adder(a(), *mr_src_, f1); });
	std::thread t2([&] { adder(second.value(), mr2.value(), f2); });
	t1.join();
	t2.join();
	stop.store(true);
	owner.join();
	EXPECT_EQ(counter->load(), 2u * kEach + own.load());
	EXPECT_EQ(f1.size(), static_cast<size_t>(kEach)) << "values found twice by one poster";
	EXPECT_EQ(f2.size(), static_cast<size_t>(kEach)) << "values found twice by one poster";
	for (uint64_t v : f1)
		EXPECT_EQ(f2.count(v), 0u) << "both posters found " << v;
}

// Device::loopback() and its operations, the io_uring door, and the
// library's words for what it refuses.
TEST_F(LoopbackTest, ThroughTheLibrary)
{
	auto lb = a().loopback();
	ME_ASSERT_OK(lb);
	EXPECT_TRUE(lb->loopback());
	EXPECT_FALSE(lb->shared());
	EXPECT_EQ(lb->id(), ME_CONN_LOOPBACK);
	EXPECT_EQ(lb->peer(), c_->id(0));
	const multiedge::RemoteRegion remote = multiedge::remote_of(*mr_dst_);
	memset(src_->data(), 0x5c, 4096);
	ME_ASSERT_OK(lb->write_notify(*mr_src_, 0, remote, 4096, 4096, 77, 1));
	auto d = a().wait_for(1, 1s);
	ME_ASSERT_OK(d);
	EXPECT_TRUE(d->ok()) << d->describe();
	EXPECT_EQ(d->conn, ME_CONN_LOOPBACK);
	auto n = b_->wait(1, 1s);
	ME_ASSERT_OK(n);
	ASSERT_EQ(n->size(), 1u);
	EXPECT_EQ(n->front().type, CompletionType::Notify);
	EXPECT_NE(n->front().describe().find("on connection loopback"), std::string::npos)
		<< n->front().describe();
	EXPECT_EQ(dst_->data()[8191], 0x5c);

	store8(dst_->data() + 256, 1);
	ME_ASSERT_OK(lb->atomic(AtomicOp::Add, *mr_src_, 0, remote, 256, 8, 41, 2));
	d = a().wait_for(2, 1s);
	ME_ASSERT_OK(d);
	EXPECT_EQ(d->type, CompletionType::Atomic);
	EXPECT_EQ(multiedge::atomic_value(*mr_src_, 0, 8).value(), 1u);
	EXPECT_EQ(load8(dst_->data() + 256), 42u);

	// A refusal in words.
	multiedge::RemoteRegion wrong = remote;
	wrong.key ^= 1;
	ME_ASSERT_OK(lb->read(*mr_src_, 0, wrong, 0, 8, 3));
	d = a().wait_for(3, 1s);
	ME_ASSERT_OK(d);
	EXPECT_EQ(d->status, EACCES);
	EXPECT_NE(d->describe().find("loopback"), std::string::npos) << d->describe();
	// No sends: refused at the call, saying why.
	auto st = lb->send(*mr_src_, 0, 8, 4);
	ASSERT_FALSE(st.ok());
	EXPECT_EQ(st.error().code(), std::errc::operation_not_supported);
	EXPECT_NE(st.error().message().find("loopback"), std::string::npos) << st.error().message();
	// close() gives nothing back, and the loopback stays usable.
	ME_ASSERT_OK(lb->close());
	auto lb2 = a().loopback();
	ME_ASSERT_OK(lb2);

	// 64 writes in one io_uring submission.
	auto q = UringQueue::create(a());
	ME_ASSERT_OK(q);
	constexpr int kN = 64;
	for (int i = 0; i < kN; i++) {
		memset(src_->data() + 8192 + 64 * i, i + 1, 64);
		ME_ASSERT_OK(q->write(lb2.value(), *mr_src_, 8192 + 64 * i, remote, 65536 + 64 * i, 64,
				      100 + i));
	}
	ME_ASSERT_OK(q->submit());
	std::set<uint64_t> cookies;
	for (int tries = 0; cookies.size() < kN && tries < 50; tries++) {
		auto r = q->reap(kN, 1, 1s);
		ME_ASSERT_OK(r);
		for (const auto &c : r.value()) {
			EXPECT_TRUE(c.ok()) << c.describe();
			EXPECT_TRUE(cookies.insert(c.cookie).second) << "twice: " << c.describe();
		}
	}
	EXPECT_EQ(cookies.size(), static_cast<size_t>(kN));
	for (int i = 0; i < kN; i++)
		EXPECT_EQ(dst_->data()[65536 + 64 * i + 63], i + 1) << "write " << i;
}

} // namespace

namespace {

// A figure, not a check: 1 MiB loopback writes between two Devices of one
// node against memcpy of the same bytes in this process (both copy once).
TEST_F(LoopbackTest, WriteRateAgainstMemcpy)
{
	constexpr uint32_t kChunk = 1 << 20;
	constexpr int kRounds = 64;
	auto lb = a().loopback();
	ME_ASSERT_OK(lb);
	const multiedge::RemoteRegion remote = multiedge::remote_of(*mr_dst_);
	auto rate = [](std::chrono::steady_clock::duration d) {
		return static_cast<double>(kChunk) * kRounds /
		       std::chrono::duration<double>(d).count() / 1e6;
	};
	double me = 0, mc = 0;
	for (int pass = 0; pass < 3; pass++) {
		auto t0 = std::chrono::steady_clock::now();
		for (int i = 0; i < kRounds; i++) {
			ME_ASSERT_OK(lb->write(*mr_src_, 0, remote, 0, kChunk, 1));
			auto d = a().wait_for(1, 1s);
			ME_ASSERT_OK(d);
			ASSERT_TRUE(d->ok()) << d->describe();
		}
		auto t1 = std::chrono::steady_clock::now();
		for (int i = 0; i < kRounds; i++) {
			memcpy(dst_->data(), src_->data(), kChunk);
			asm volatile("" ::: "memory");
		}
		auto t2 = std::chrono::steady_clock::now();
		me = std::max(me, rate(t1 - t0));
		mc = std::max(mc, rate(t2 - t1));
	}
	std::cout << "[ info ] 1 MiB writes, best of 3 x " << kRounds << ": loopback " << me
		  << " MB/s, memcpy " << mc << " MB/s (" << me / mc << "x)\n";
}

} // namespace
