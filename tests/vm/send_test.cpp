// Guest tests of sends of several packets (ABI 26, wire 17): a send of up
// to ME_SEND_MAX bytes reaches the peer's receive queue whole, whatever
// links its packets took and in whatever order they came; the bytes a
// namespace holds in messages are bounded (recv_kb), and given back when
// messages are taken or their connection ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "cluster.hpp"
#include "uapi/multiedge.h"

using namespace metest;
using multiedge::Access;
using multiedge::CompletionType;
using multiedge::Device;
using multiedge::Ordering;

namespace {

constexpr auto kOpTimeout = std::chrono::seconds(60);
constexpr size_t kSlot = ME_SEND_MAX;	// each message's own source range

class LargeSends : public ClusterTest, public ::testing::WithParamInterface<PairParam> {};

// Sizes around the edges (one packet, pages, ME_SEND_MAX_VER0 and
// ME_SEND_MAX) and random ones between; each at least 4 bytes (its index).
std::vector<uint32_t> sizes(uint64_t seed)
{
	std::vector<uint32_t> s = {4,    1024, 1025, 1400, 1500, 4095, 4096, 4097,
				   8192, 8999, 9000, 9001, 16384, 32768, 65535, 65536};
	std::mt19937_64 g(seed);
	std::uniform_int_distribution<uint32_t> d(4, ME_SEND_MAX);
	while (s.size() < 64)
		s.push_back(d(g));
	std::shuffle(s.begin(), s.end(), g);
	return s;
}

} // namespace

// Sends of every size up to ME_SEND_MAX, 16 in flight, arrive whole and
// intact, each once; in order on an ordered connection.  One above is
// refused at posting.
TEST_P(LargeSends, ArriveWholeAndIntact)
{
	const PairParam p = GetParam();
	ASSERT_NO_FATAL_FAILURE(make_pair(p.links, p.mtu));
	Device &a = c_->dev(0);
	Device &b = c_->dev(1);
	const uint64_t seed = test_seed(0x5e4d);
	RecordProperty("seed", std::to_string(seed));
	const std::vector<uint32_t> len = sizes(seed);

	Buffer src(len.size() * kSlot);
	fill_random(src.data(), src.size(), seed);
	for (uint32_t i = 0; i < len.size(); i++)
		std::memcpy(src.data() + i * kSlot, &i, sizeof(i));
	auto mr = a.register_memory(src.data(), src.size(), Access::None);
	ME_ASSERT_OK(mr);
	auto conn = a.connect(c_->id(1), p.ordering);
	ME_ASSERT_OK(conn);

	const auto info = a.query();
	ME_ASSERT_OK(info);
	EXPECT_TRUE(info->features & ME_FEATURE_SEND_LARGE);

	std::map<uint32_t, int> got;	// index -> times received
	uint32_t next = 0;		// ordered: the index that must come next
	auto take = [&](std::chrono::milliseconds wait) {
		auto m = b.recv(c_->id(0), wait);
		if (!m)
			return false;
		EXPECT_GE(m->data.size(), 4u);
		uint32_t i = 0;
		std::memcpy(&i, m->data.data(), sizeof(i));
		EXPECT_LT(i, len.size());
		if (i >= len.size())
			return true;
		if (p.ordering == Ordering::Ordered) {
			EXPECT_EQ(i, next) << "out of order";
			next++;
		}
		EXPECT_EQ(m->data.size(), len[i]) << "message " << i;
		EXPECT_EQ(first_difference(reinterpret_cast<const uint8_t *>(m->data.data()),
					   src.data() + i * kSlot,
					   std::min<size_t>(m->data.size(), len[i])),
			  -1)
			<< "message " << i << " of " << len[i] << " bytes";
		got[i]++;
		return true;
	};

	const uint32_t kInFlight = 16;
	for (uint32_t i = 0; i < len.size(); i++) {
		if (i >= kInFlight) {
			auto done = a.wait_for(i - kInFlight + 1, kOpTimeout);
			ME_ASSERT_OK(done);
			ASSERT_EQ(done->status, 0) << done->describe();
			EXPECT_EQ(done->type, CompletionType::Send);
			EXPECT_EQ(done->len, len[i - kInFlight]);
			// Take what came, so the queue never fills.
			while (take(std::chrono::milliseconds(0)))
				;
		}
		ME_ASSERT_OK(conn->send(mr.value(), i * kSlot, len[i], i + 1));
	}
	for (uint32_t i = len.size() > kInFlight ? len.size() - kInFlight : 0; i < len.size(); i++) {
		auto done = a.wait_for(i + 1, kOpTimeout);
		ME_ASSERT_OK(done);
		ASSERT_EQ(done->status, 0) << done->describe();
	}
	while (got.size() < len.size() && take(std::chrono::seconds(10)))
		;
	for (uint32_t i = 0; i < len.size(); i++)
		EXPECT_EQ(got[i], 1) << "message " << i << " of " << len[i] << " bytes";
	EXPECT_FALSE(take(std::chrono::milliseconds(200))) << "a message too many";

	auto big = conn->send(mr.value(), 0, ME_SEND_MAX + 1, 1000);
	ASSERT_FALSE(big);
	EXPECT_EQ(big.error().code(), std::errc::message_size);
}

INSTANTIATE_TEST_SUITE_P(Links, LargeSends,
			 ::testing::Values(PairParam{2, 1500, Ordering::Unordered},
					   PairParam{2, 9000, Ordering::Unordered},
					   PairParam{1, 1500, Ordering::Ordered}),
			 pair_param_name);

// recv_kb bounds what a namespace holds in messages: with 256 KiB, four
// sends of 64 KiB wait and the next send of any size is refused
// (ENOBUFS); a connection that ends with its messages untaken gives back
// what they held; taking one makes room for one.
class SendBudget : public ClusterTest {
protected:
	std::string module_params() const override { return "recv_kb=256"; }
};

TEST_F(SendBudget, MessagesHeldAreBoundedAndGivenBack)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(1));
	Device &a = c_->dev(0);
	Device &b = c_->dev(1);
	Buffer src(ME_SEND_MAX);
	fill_random(src.data(), src.size(), 0xb0d6e7);
	auto mr = a.register_memory(src.data(), src.size(), Access::None);
	ME_ASSERT_OK(mr);
	auto conn = a.connect(c_->id(1));
	ME_ASSERT_OK(conn);
	multiedge::Connection *on = &conn.value();

	uint64_t cookie = 1;
	auto send = [&](uint32_t len) {
		auto st = on->send(mr.value(), 0, len, cookie);
		EXPECT_TRUE(st.ok()) << st.error().message();
		auto done = a.wait_for(cookie++, kOpTimeout);
		EXPECT_TRUE(done.ok()) << done.error().message();
		return done.ok() ? done->status : 1;
	};
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(send(ME_SEND_MAX), 0) << "send " << i;
	EXPECT_EQ(send(ME_SEND_MAX), ENOBUFS);
	EXPECT_EQ(send(100), ENOBUFS);
	EXPECT_EQ(send(5000), ENOBUFS);

	// They wait on a connection nobody took: when it ends (and its slot
	// is retired, after its linger) they go, and their room comes back.
	ME_ASSERT_OK(conn->close());
	auto conn2 = a.connect(c_->id(1));
	ME_ASSERT_OK(conn2);
	int status = 1;
	for (int tries = 0; tries < 300 && status; tries++) {
		ME_ASSERT_OK(conn2->send(mr.value(), 0, ME_SEND_MAX, cookie));
		auto done = a.wait_for(cookie++, kOpTimeout);
		ME_ASSERT_OK(done);
		status = done->status;
		if (status) {
			ASSERT_EQ(status, ENOBUFS) << done->describe();
			std::this_thread::sleep_for(std::chrono::milliseconds(100));
		}
	}
	ASSERT_EQ(status, 0) << "the closed connection's messages are still held";
	on = &conn2.value();

	// Taking a message gives its room back.
	auto m = b.recv(c_->id(0), std::chrono::seconds(10));
	ME_ASSERT_OK(m);
	ASSERT_EQ(m->data.size(), size_t{ME_SEND_MAX});
	EXPECT_EQ(std::memcmp(m->data.data(), src.data(), ME_SEND_MAX), 0);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(send(ME_SEND_MAX), 0) << "send " << i;
	EXPECT_EQ(send(100), ENOBUFS);
	ME_ASSERT_OK(b.recv(c_->id(0), std::chrono::seconds(10)));
	EXPECT_EQ(send(100), 0);
	for (int i = 0; i < 4; i++) {
		auto r = b.recv(c_->id(0), std::chrono::seconds(10));
		ME_ASSERT_OK(r);
		EXPECT_EQ(r->data.size(), i < 3 ? size_t{ME_SEND_MAX} : 100u);
	}
}
