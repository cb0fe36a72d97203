// libmultiedge's UringQueue on the host, against the stand-in module of
// fake_module.hpp: the host cannot load multiedge.ko, so the fake file's
// io_uring commands complete with -EOPNOTSUPP (a regular file has no
// uring_cmd); everything the library does around them — checks, slots,
// user_data, submit, reap, take() on a shared ring, the refusals — is real.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <liburing.h>
#include <set>
#include <vector>

#include "fake_module.hpp"
#include "multiedge/multiedge.hpp"

using namespace std::chrono_literals;
using multiedge::Completion;
using multiedge::CompletionType;
using multiedge::Device;
using multiedge::UringQueue;

namespace {

bool contains(const std::string &s, const std::string &part)
{
	return s.find(part) != std::string::npos;
}

// io_uring may be forbidden where the tests run (a seccomp profile): then
// the library must say so, which is checked instead.
bool uring_usable(const multiedge::Result<UringQueue> &q)
{
	if (q)
		return true;
	int err = q.error().code().value();
	EXPECT_TRUE(err == ENOSYS || err == EPERM || err == EACCES) << q.error().message();
	EXPECT_TRUE(contains(q.error().message(), "ioctl path")) << q.error().message();
	return false;
}

class UringFake : public ::testing::Test {
protected:
	fake::FakeModule mod;
	std::optional<Device> dev;
	std::vector<char> buf = std::vector<char>(1 << 16);
	std::optional<multiedge::MemoryRegion> mr;
	std::optional<multiedge::Connection> conn;
	multiedge::RemoteRegion remote{21, 0xfeed, 1 << 20};

	void SetUp() override
	{
		auto d = Device::open(mod.path());
		ASSERT_TRUE(d) << d.error().message();
		dev.emplace(std::move(d).value());
		auto m = dev->register_memory(buf.data(), buf.size(), multiedge::Access::None);
		ASSERT_TRUE(m) << m.error().message();
		mr.emplace(std::move(m).value());
		auto c = dev->connect(2);
		ASSERT_TRUE(c) << c.error().message();
		conn.emplace(std::move(c).value());
	}
};

class UringFakeSqe : public UringFake, public ::testing::WithParamInterface<bool> {
protected:
	// The SQE at ring position `pos` (128-byte SQEs take two slots).
	io_uring_sqe *sqe_of(io_uring &ring, unsigned pos) const
	{
		return &ring.sq.sqes[(pos & ring.sq.ring_mask) << (GetParam() ? 1 : 0)];
	}
	// The struct me_post an SQE carries, inline or through its pointer.
	me_post post_of(const io_uring_sqe *sqe) const
	{
		me_post p{};
		if (GetParam()) {
			std::memcpy(&p, sqe->cmd, sizeof(p));
		} else {
			me_uring_ptr ptr{};
			std::memcpy(&ptr, sqe->cmd, sizeof(ptr));
			std::memcpy(&p, reinterpret_cast<const void *>(ptr.arg), sizeof(p));
		}
		return p;
	}
};

} // namespace

TEST_F(UringFake, RefusesAModuleWithoutTheDoor)
{
	mod.query.abi_version = 4;
	mod.query.features = 0;
	auto q = UringQueue::create(*dev);
	ASSERT_FALSE(q);
	EXPECT_EQ(q.error().code(), std::errc::not_supported);
	EXPECT_TRUE(contains(q.error().message(), "ABI 4")) << q.error().message();
	EXPECT_TRUE(contains(q.error().message(), "Connection::write")) << q.error().message();
}

TEST_F(UringFake, RejectsBadOptions)
{
	UringQueue::Options o;
	o.sq_entries = 0;
	auto q = UringQueue::create(*dev, o);
	ASSERT_FALSE(q);
	EXPECT_EQ(q.error().code(), std::errc::invalid_argument);
	o = {};
	o.max_inflight = 0;
	q = UringQueue::create(*dev, o);
	ASSERT_FALSE(q);
	EXPECT_TRUE(contains(q.error().message(), "max_inflight")) << q.error().message();
}

TEST_P(UringFakeSqe, EveryPreparedOperationCompletesOnceWithItsUserData)
{
	UringQueue::Options o;
	o.sqe128 = GetParam();
	auto q = UringQueue::create(*dev, o);
	if (!uring_usable(q))
		return;
	ASSERT_TRUE(q->write(*conn, *mr, 0, remote, 0, 100, 1));
	ASSERT_TRUE(q->write_notify(*conn, *mr, 100, remote, 4096, 200, 77, 2));
	ASSERT_TRUE(q->read(*conn, *mr, 300, remote, 8192, 300, 3));
	ASSERT_TRUE(q->send(*conn, *mr, 600, 16, 4));
	EXPECT_EQ(q->inflight(), 4u);
	auto n = q->submit();
	ASSERT_TRUE(n) << n.error().message();
	EXPECT_EQ(n.value(), 4u);
	auto done = q->reap(16, 4, 10s);
	ASSERT_TRUE(done) << done.error().message();
	ASSERT_EQ(done->size(), 4u);
	EXPECT_EQ(q->inflight(), 0u);
	std::set<std::uint64_t> cookies;
	for (const Completion &c : done.value()) {
		cookies.insert(c.cookie);
		// A regular file has no uring_cmd: the host kernel refuses each.
		EXPECT_EQ(c.status, EOPNOTSUPP) << c.describe();
		EXPECT_EQ(c.len, 0u);
		EXPECT_EQ(c.conn, conn->id());
		EXPECT_EQ(c.peer, 2u);
		switch (c.cookie) {
		case 1:
		case 2:
			EXPECT_EQ(c.type, CompletionType::Write);
			EXPECT_EQ(c.imm, c.cookie == 2 ? 77u : 0u);
			break;
		case 3:
			EXPECT_EQ(c.type, CompletionType::Read);
			break;
		case 4:
			EXPECT_EQ(c.type, CompletionType::Send);
			break;
		}
	}
	EXPECT_EQ(cookies, (std::set<std::uint64_t>{1, 2, 3, 4}));
	// Nothing left: a reap without a minimum returns at once, empty.
	auto none = q->reap(16, 0, 10s);
	ASSERT_TRUE(none);
	EXPECT_TRUE(none->empty());
}

INSTANTIATE_TEST_SUITE_P(SqeSize, UringFakeSqe, ::testing::Values(false, true),
			 [](const auto &info) { return info.param ? "Sqe128" : "Sqe64"; });

TEST_F(UringFake, MaxInflightIsEnforcedAndFreedByReaping)
{
	UringQueue::Options o;
	o.max_inflight = 3;
	auto q = UringQueue::create(*dev, o);
	if (!uring_usable(q))
		return;
	for (std::uint64_t i = 0; i < 3; i++)
		ASSERT_TRUE(q->write(*conn, *mr, 0, remote, 0, 8, i));
	auto st = q->write(*conn, *mr, 0, remote, 0, 8, 9);
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::device_or_resource_busy);
	EXPECT_TRUE(contains(st.error().message(), "reap")) << st.error().message();
	auto done = q->reap(8, 3, 10s);
	ASSERT_TRUE(done);
	EXPECT_EQ(done->size(), 3u);
	EXPECT_TRUE(q->write(*conn, *mr, 0, remote, 0, 8, 9));
}

TEST_F(UringFake, AFullSubmissionRingIsSubmittedToMakeRoom)
{
	UringQueue::Options o;
	o.sq_entries = 2;
	auto q = UringQueue::create(*dev, o);
	if (!uring_usable(q))
		return;
	for (std::uint64_t i = 0; i < 7; i++)
		ASSERT_TRUE(q->write(*conn, *mr, 0, remote, 0, 8, i));
	auto done = q->reap(16, 7, 10s);
	ASSERT_TRUE(done);
	EXPECT_EQ(done->size(), 7u);
}

TEST_F(UringFake, ObjectsOfAnotherDeviceAreRefused)
{
	auto q = UringQueue::create(*dev);
	if (!uring_usable(q))
		return;
	auto other = Device::open(mod.path());
	ASSERT_TRUE(other);
	auto omr = other->register_memory(buf.data(), 64, multiedge::Access::None);
	ASSERT_TRUE(omr);
	auto st = q->write(*conn, omr.value(), 0, remote, 0, 8, 1);
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::invalid_argument);
	EXPECT_TRUE(contains(st.error().message(), "another Device")) << st.error().message();
	auto oconn = other->connect(2);
	ASSERT_TRUE(oconn);
	st = q->write(oconn.value(), *mr, 0, remote, 0, 8, 1);
	ASSERT_FALSE(st);
	EXPECT_TRUE(contains(st.error().message(), "another Device")) << st.error().message();
	multiedge::MemoryRegion moved = std::move(*mr);
	st = q->write(*conn, *mr, 0, remote, 0, 8, 1);
	ASSERT_FALSE(st);
	EXPECT_TRUE(contains(st.error().message(), "empty")) << st.error().message();
	EXPECT_EQ(q->inflight(), 0u);
}

// The application's ring: its own CQEs are not the queue's; reap() is
// refused; a polled ring cannot carry remote operations.
TEST_F(UringFake, AttachedQueueSharesTheApplicationsRing)
{
	io_uring ring{};
	int r = io_uring_queue_init(8, &ring, 0);
	if (r < 0) {
		EXPECT_TRUE(r == -ENOSYS || r == -EPERM) << r;
		return;
	}
	{
		auto q = UringQueue::attach(*dev, &ring, 16);
		ASSERT_TRUE(q) << q.error().message();
		ASSERT_TRUE(q->write(*conn, *mr, 0, remote, 0, 8, 41));
		io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		ASSERT_NE(sqe, nullptr);
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, 5);
		ASSERT_TRUE(q->write(*conn, *mr, 0, remote, 0, 8, 42));
		EXPECT_EQ(io_uring_submit(&ring), 3);
		auto reaped = q->reap();
		ASSERT_FALSE(reaped);
		EXPECT_TRUE(contains(reaped.error().message(), "take()")) << reaped.error().message();

		std::set<std::uint64_t> ours;
		int foreign = 0;
		for (int i = 0; i < 3; i++) {
			io_uring_cqe *cqe = nullptr;
			ASSERT_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
			if (auto c = q->take(cqe)) {
				ours.insert(c->cookie);
			} else {
				EXPECT_EQ(io_uring_cqe_get_data64(cqe), 5u);
				foreign++;
			}
			io_uring_cqe_seen(&ring, cqe);
		}
		EXPECT_EQ(ours, (std::set<std::uint64_t>{41, 42}));
		EXPECT_EQ(foreign, 1);
		EXPECT_EQ(q->inflight(), 0u);
	}
	io_uring_queue_exit(&ring);

	io_uring polled{};
	if (io_uring_queue_init(8, &polled, IORING_SETUP_IOPOLL) == 0) {
		auto q = UringQueue::attach(*dev, &polled);
		ASSERT_FALSE(q);
		EXPECT_TRUE(contains(q.error().message(), "IOPOLL")) << q.error().message();
		io_uring_queue_exit(&polled);
	}
}

// The posts of one batch: all but the last on each connection carry
// ME_POST_F_MORE (the module sends a connection's batch at its last, small
// writes packed); a batch already submitted is never touched again; a
// module without the flag never sees it.
TEST_P(UringFakeSqe, AllButEachConnectionsLastPostOfABatchSayMore)
{
	io_uring ring{};
	int r = io_uring_queue_init(16, &ring, GetParam() ? IORING_SETUP_SQE128 : 0);
	if (r < 0) {
		EXPECT_TRUE(r == -ENOSYS || r == -EPERM) << r;
		return;
	}
	auto other = dev->connect(3);
	ASSERT_TRUE(other) << other.error().message();
	// The post an SQE carries, inline or by address.
	auto post_of = [&](const io_uring_sqe *sqe) {
		me_post p{};
		if (GetParam()) {
			std::memcpy(&p, sqe->cmd, sizeof(p));
		} else {
			me_uring_ptr ptr{};
			std::memcpy(&ptr, sqe->cmd, sizeof(ptr));
			std::memcpy(&p, reinterpret_cast<const void *>(ptr.arg), sizeof(p));
		}
		return p;
	};
	auto sqe_at = [&](unsigned pos) {
		return &ring.sq.sqes[(pos & ring.sq.ring_mask) << (GetParam() ? 1 : 0)];
	};
	for (bool module_has_it : {true, false}) {
		SCOPED_TRACE(module_has_it);
		mod.query.features = ME_FEATURE_URING_CMD | (module_has_it ? ME_FEATURE_POST_MORE : 0);
		auto q = UringQueue::attach(*dev, &ring, 16);
		ASSERT_TRUE(q) << q.error().message();
		unsigned first = ring.sq.sqe_tail;
		// a1 b1 a2 a3 b2 | submitted | a4
		const multiedge::Connection *on[] = {&*conn, &other.value(), &*conn, &*conn,
						     &other.value()};
		for (unsigned i = 0; i < 5; i++)
			ASSERT_TRUE(q->write(*on[i], *mr, 0, remote, 0, 8, 100 + i));
		const bool more[] = {true, true, true, false, false};
		for (unsigned i = 0; i < 5; i++) {
			me_post p = post_of(sqe_at(first + i));
			EXPECT_EQ(p.conn, on[i]->id()) << i;
			EXPECT_EQ(p.flags, more[i] && module_has_it ? ME_POST_F_MORE : 0u) << i;
		}
		ASSERT_EQ(io_uring_submit(&ring), 5);
		ASSERT_TRUE(q->write(*conn, *mr, 0, remote, 0, 8, 105));
		EXPECT_EQ(post_of(sqe_at(first + 5)).flags, 0u);
		// a3 went in the submitted batch: a4 left it as it was.
		EXPECT_EQ(io_uring_submit(&ring), 1);
		for (int i = 0; i < 6; i++) {
			io_uring_cqe *cqe = nullptr;
			ASSERT_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
			EXPECT_TRUE(q->take(cqe));
			io_uring_cqe_seen(&ring, cqe);
		}
		EXPECT_EQ(q->inflight(), 0u);
	}
	io_uring_queue_exit(&ring);
}

// send_to() puts the port into the post the SQE carries (ABI 18); port 0
// and a module before ABI 18 are refused before an SQE is taken.
TEST_P(UringFakeSqe, SendToCarriesThePort)
{
	io_uring ring{};
	int r = io_uring_queue_init(8, &ring, GetParam() ? IORING_SETUP_SQE128 : 0);
	if (r < 0) {
		EXPECT_TRUE(r == -ENOSYS || r == -EPERM) << r;
		return;
	}
	auto sqe_at = [&](unsigned pos) { return sqe_of(ring, pos); };
	{
		// The Device's view of the module is taken at open.
		mod.query.features |= ME_FEATURE_SHARED;
		auto d = Device::open(mod.path());
		ASSERT_TRUE(d) << d.error().message();
		auto m = d->register_memory(buf.data(), buf.size(), multiedge::Access::None);
		ASSERT_TRUE(m) << m.error().message();
		auto c = d->connect_shared(2);
		ASSERT_TRUE(c) << c.error().message();
		auto q = UringQueue::attach(d.value(), &ring, 8);
		ASSERT_TRUE(q) << q.error().message();
		unsigned first = ring.sq.sqe_tail;
		ASSERT_TRUE(q->send_to(c.value(), 5001, m.value(), 64, 32, 9));
		me_post p = post_of(sqe_at(first));
		EXPECT_EQ(p.size, static_cast<unsigned>(ME_POST_SIZE_VER1));
		EXPECT_EQ(p.opcode, static_cast<unsigned>(ME_OP_SEND));
		EXPECT_EQ(p.conn, c->id());
		EXPECT_EQ(p.port, 5001u);
		EXPECT_EQ(p.local_off, 64u);
		EXPECT_EQ(p.len, 32u);
		auto zero = q->send_to(c.value(), 0, m.value(), 0, 8, 10);
		ASSERT_FALSE(zero);
		EXPECT_EQ(zero.error().code(), std::errc::destination_address_required);
		EXPECT_EQ(q->inflight(), 1u);
		ASSERT_EQ(io_uring_submit(&ring), 1);
		io_uring_cqe *cqe = nullptr;
		ASSERT_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
		EXPECT_TRUE(q->take(cqe));
		io_uring_cqe_seen(&ring, cqe);
	}
	// The fixture's Device saw a module without shared connections.
	auto q = UringQueue::attach(*dev, &ring, 8);
	ASSERT_TRUE(q) << q.error().message();
	auto old = q->send_to(*conn, 5001, *mr, 0, 8, 11);
	ASSERT_FALSE(old);
	EXPECT_EQ(old.error().code(), std::errc::operation_not_supported);
	EXPECT_TRUE(contains(old.error().message(), "ABI 18")) << old.error().message();
	EXPECT_EQ(q->inflight(), 0u);
	EXPECT_EQ(io_uring_sq_ready(&ring), 0u);
	io_uring_queue_exit(&ring);
}

// Atomics (ABI 19): the post names the operation and the size, the values
// are in the local buffer by submission, the CQE is an Atomic completion;
// what the library can see is refused before an SQE is taken, with nothing
// written; a module without atomics is refused likewise.
TEST_P(UringFakeSqe, AtomicsPutTheirValuesAndCompleteAsAtomic)
{
	io_uring ring{};
	int r = io_uring_queue_init(8, &ring, GetParam() ? IORING_SETUP_SQE128 : 0);
	if (r < 0) {
		EXPECT_TRUE(r == -ENOSYS || r == -EPERM) << r;
		return;
	}
	auto sqe_at = [&](unsigned pos) { return sqe_of(ring, pos); };
	auto load = [&](std::size_t off, std::uint32_t size) -> std::uint64_t {
		std::uint64_t v = 0;
		if (size == 4) {
			std::uint32_t w;
			std::memcpy(&w, &buf[off], 4);
			v = w;
		} else {
			std::memcpy(&v, &buf[off], 8);
		}
		return v;
	};
	auto untouched = [&] {
		return std::all_of(buf.begin(), buf.end(), [](char c) { return c == 0x5a; });
	};
	using multiedge::AtomicOp;
	std::fill(buf.begin(), buf.end(), 0x5a);
	{
		mod.query.features |= ME_FEATURE_ATOMIC;
		auto d = Device::open(mod.path());
		ASSERT_TRUE(d) << d.error().message();
		auto m = d->register_memory(buf.data(), buf.size(), multiedge::Access::None);
		ASSERT_TRUE(m) << m.error().message();
		auto c = d->connect(2);
		ASSERT_TRUE(c) << c.error().message();
		auto q = UringQueue::attach(d.value(), &ring, 8);
		ASSERT_TRUE(q) << q.error().message();

		// Refused: nothing prepared, nothing written.
		auto st = q->atomic(c.value(), AtomicOp::Add, m.value(), 0, remote, 0, 3, 1, 1);
		ASSERT_FALSE(st);
		EXPECT_EQ(st.error().code(), std::errc::invalid_argument);
		EXPECT_TRUE(contains(st.error().message(), "4 or 8 bytes")) << st.error().message();
		st = q->compare_swap(c.value(), m.value(), buf.size() - 8, remote, 0, 8, 1, 2, 1);
		ASSERT_FALSE(st);
		EXPECT_EQ(st.error().code(), std::errc::result_out_of_range);
		EXPECT_TRUE(contains(st.error().message(), "cannot post compare_swap"))
			<< st.error().message();
		st = q->atomic(c.value(), AtomicOp::CompareSwap, m.value(), 0, remote, 0, 8, 1, 1);
		ASSERT_FALSE(st);
		EXPECT_TRUE(contains(st.error().message(), "compare_swap()")) << st.error().message();
		st = q->atomic(c.value(), AtomicOp::Add, *mr, 0, remote, 0, 8, 1, 1);
		ASSERT_FALSE(st);
		EXPECT_TRUE(contains(st.error().message(), "another Device")) << st.error().message();
		EXPECT_EQ(q->inflight(), 0u);
		EXPECT_EQ(io_uring_sq_ready(&ring), 0u);
		EXPECT_TRUE(untouched());

		unsigned first = ring.sq.sqe_tail;
		ASSERT_TRUE(q->atomic(c.value(), AtomicOp::UnsignedMax, m.value(), 64, remote, 4096, 8,
				      0x01020304'05060708ull, 1));
		ASSERT_TRUE(q->compare_swap(c.value(), m.value(), 128, remote, 8, 4,
					    /*expected=*/7, /*desired=*/9, 2));
		ASSERT_TRUE(q->atomic(c.value(), AtomicOp::Read, m.value(), 256, remote, 16, 4, 99, 3));
		me_post p = post_of(sqe_at(first));
		EXPECT_EQ(p.opcode, static_cast<unsigned>(ME_OP_ATOMIC));
		EXPECT_EQ(p.imm, static_cast<unsigned>(ME_ATOMIC_UMAX));
		EXPECT_EQ(p.len, 8u);
		EXPECT_EQ(p.local_off, 64u);
		EXPECT_EQ(p.remote_off, 4096u);
		EXPECT_EQ(p.remote_region, remote.id);
		EXPECT_EQ(p.conn, c->id());
		EXPECT_EQ(load(64, 8), 0x01020304'05060708ull);
		p = post_of(sqe_at(first + 1));
		EXPECT_EQ(p.imm, static_cast<unsigned>(ME_ATOMIC_CSWAP));
		EXPECT_EQ(p.len, 4u);
		EXPECT_EQ(p.local_off, 128u);
		EXPECT_EQ(load(128, 4), 9u);
		EXPECT_EQ(load(132, 4), 7u);
		p = post_of(sqe_at(first + 2));
		EXPECT_EQ(p.imm, static_cast<unsigned>(ME_ATOMIC_READ));
		EXPECT_EQ(load(256, 4), 0x5a5a5a5au) << "Read wrote its ignored operand";

		ASSERT_EQ(io_uring_submit(&ring), 3);
		std::set<std::uint64_t> cookies;
		for (int i = 0; i < 3; i++) {
			io_uring_cqe *cqe = nullptr;
			ASSERT_EQ(io_uring_wait_cqe(&ring, &cqe), 0);
			auto done = q->take(cqe);
			io_uring_cqe_seen(&ring, cqe);
			ASSERT_TRUE(done);
			EXPECT_EQ(done->type, CompletionType::Atomic);
			EXPECT_EQ(done->status, EOPNOTSUPP) << done->describe();
			EXPECT_EQ(done->imm, 0u);
			cookies.insert(done->cookie);
		}
		EXPECT_EQ(cookies, (std::set<std::uint64_t>{1, 2, 3}));
	}
	// The fixture's Device saw a module without atomics.
	std::fill(buf.begin(), buf.end(), 0x5a);
	auto q = UringQueue::attach(*dev, &ring, 8);
	ASSERT_TRUE(q) << q.error().message();
	auto old = q->atomic(*conn, AtomicOp::Add, *mr, 0, remote, 0, 8, 1, 4);
	ASSERT_FALSE(old);
	EXPECT_EQ(old.error().code(), std::errc::operation_not_supported);
	EXPECT_TRUE(contains(old.error().message(), "ABI 19")) << old.error().message();
	old = q->compare_swap(*conn, *mr, 0, remote, 0, 8, 1, 2, 5);
	ASSERT_FALSE(old);
	EXPECT_EQ(old.error().code(), std::errc::operation_not_supported);
	EXPECT_EQ(q->inflight(), 0u);
	EXPECT_EQ(io_uring_sq_ready(&ring), 0u);
	EXPECT_TRUE(untouched());
	io_uring_queue_exit(&ring);
}

// Destroying a queue on the application's ring while its CQEs are still to
// be taken is a programming error: the kernel may still read the slots.
TEST_F(UringFake, AttachedQueueDestroyedWithOperationsInFlightAborts)
{
	io_uring probe{};
	if (io_uring_queue_init(8, &probe, 0) < 0)
		return;	// no io_uring here: nothing to attach to
	io_uring_queue_exit(&probe);
	GTEST_FLAG_SET(death_test_style, "threadsafe");
	EXPECT_DEATH(
		{
			io_uring ring{};
			if (io_uring_queue_init(8, &ring, 0) == 0) {
				auto q = UringQueue::attach(*dev, &ring);
				if (q)
					(void)q->write(*conn, *mr, 0, remote, 0, 8, 1);
			}
		},
		"destroyed with 1 operations in flight");
}
