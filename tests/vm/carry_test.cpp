// Guest tests of acks carried by replies (wire 9, ack_hold_us): node 0
// sends requests (write_notify) on its connection to node 1, node 1
// answers each on its own connection back, as me_bench and the libfabric
// provider do.  Once node 1 is seen answering quickly, a request's ack
// waits for the answer and travels in front of it (ME_F_CARRY), and the
// same the other way.  Every byte lands where it should, every operation
// completes once, and a request nobody answers completes one hold later.
// With ack_hold_us=0 every ack travels alone, as before wire 9; so does
// the ack of a request whose poster waits for it (Post::AckNow, wire 18).

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "cluster.hpp"

using namespace metest;
using multiedge::Access;
using multiedge::CompletionType;
using namespace std::chrono_literals;

namespace {

constexpr size_t kLen = 1u << 20;
constexpr int kRounds = 300;

class CarryTest : public ClusterTest {
protected:
	// The longest hold: an emulated guest may take a millisecond to answer.
	std::string module_params() const override { return "ack_hold_us=4000"; }

	struct Counts {
		uint64_t carried, held, expired, acks, now;
	};
	static Counts counts(const multiedge::Device &d)
	{
		return {engine_stat(d, "ack_carried"), engine_stat(d, "ack_held"),
			engine_stat(d, "ack_hold_expired"), engine_stat(d, "tx_ack"),
			engine_stat(d, "ack_now")};
	}

	// kRounds requests of 1..3000 B from node 0 (posted `how`), each
	// answered by node 1 with as many bytes of its own; every byte
	// checked on both sides.
	void ping_pong(multiedge::Post how = multiedge::Post::Blocking)
	{
		ASSERT_NO_FATAL_FAILURE(make_pair(1));
		multiedge::Device &a = c_->dev(0), &b = c_->dev(1);
		Buffer a_src(kLen), a_dst(kLen), b_src(kLen), b_dst(kLen);
		fill_random(a_src.data(), kLen, 11);
		fill_random(b_src.data(), kLen, 12);
		auto mas = a.register_memory(a_src.data(), kLen, Access::None);
		auto mad = a.register_memory(a_dst.data(), kLen, Access::RemoteReadWrite);
		auto mbs = b.register_memory(b_src.data(), kLen, Access::None);
		auto mbd = b.register_memory(b_dst.data(), kLen, Access::RemoteReadWrite);
		ME_ASSERT_OK(mas);
		ME_ASSERT_OK(mad);
		ME_ASSERT_OK(mbs);
		ME_ASSERT_OK(mbd);
		auto ab = a.connect(c_->id(1));
		ME_ASSERT_OK(ab);
		auto ba = b.connect(c_->id(0));
		ME_ASSERT_OK(ba);
		const auto to_b = multiedge::remote_of(mbd.value());
		const auto to_a = multiedge::remote_of(mad.value());
		a0_ = counts(a);
		b0_ = counts(b);

		// Waits on d for the notify `imm`, harvesting write completions.
		auto notified = [](multiedge::Device &d, uint32_t imm, int &writes) -> bool {
			for (auto deadline = std::chrono::steady_clock::now() + 10s;
			     std::chrono::steady_clock::now() < deadline;) {
				auto cs = d.wait(16, 100ms);
				if (!cs) {
					ADD_FAILURE() << cs.error().message();
					return false;
				}
				bool got = false;
				for (const auto &c : cs.value()) {
					EXPECT_TRUE(c.ok()) << c.describe();
					if (c.type == CompletionType::Write) {
						writes++;
					} else {
						EXPECT_EQ(c.type, CompletionType::Notify) << c.describe();
						EXPECT_EQ(c.imm, imm) << c.describe();
						got = true;
					}
				}
				if (got)
					return true;
			}
			ADD_FAILURE() << "no notify " << imm;
			return false;
		};
		int a_writes = 0, b_writes = 0;
		for (int i = 0; i < kRounds; i++) {
			const uint32_t len = 1 + static_cast<uint32_t>(i * 677) % 3000;
			const uint64_t off = static_cast<uint64_t>(i) * 3001 % (kLen - 3000);
			const uint32_t imm = 0x1000 + static_cast<uint32_t>(i);
			ME_ASSERT_OK(ab->write_notify(mas.value(), off, to_b, off, len, imm, 1 + i, how));
			ASSERT_TRUE(notified(b, imm, b_writes)) << "request " << i;
			ASSERT_EQ(first_difference(a_src.data() + off, b_dst.data() + off, len), -1)
				<< "request " << i;
			ME_ASSERT_OK(ba->write_notify(mbs.value(), off, to_a, off, len, imm, 1 + i));
			ASSERT_TRUE(notified(a, imm, a_writes)) << "answer " << i;
			ASSERT_EQ(first_difference(b_src.data() + off, a_dst.data() + off, len), -1)
				<< "answer " << i;
		}
		// The last answer's ack waits for nothing: one hold, then alone.
		for (auto deadline = std::chrono::steady_clock::now() + 10s;
		     (a_writes < kRounds || b_writes < kRounds) &&
		     std::chrono::steady_clock::now() < deadline;) {
			for (auto *d : {&a, &b}) {
				auto cs = d->wait(16, 10ms);
				ME_ASSERT_OK(cs);
				for (const auto &c : cs.value()) {
					EXPECT_TRUE(c.ok()) << c.describe();
					EXPECT_EQ(c.type, CompletionType::Write) << c.describe();
					(d == &a ? a_writes : b_writes)++;
				}
			}
		}
		EXPECT_EQ(a_writes, kRounds);
		EXPECT_EQ(b_writes, kRounds);
		a1_ = counts(a);
		b1_ = counts(b);
		std::printf("%d round trips: node 0 carried %llu acks, sent %llu alone (%llu held, "
			    "%llu expired); node 1 carried %llu, alone %llu (%llu held, %llu expired)\n",
			    kRounds, (unsigned long long)(a1_.carried - a0_.carried),
			    (unsigned long long)(a1_.acks - a0_.acks),
			    (unsigned long long)(a1_.held - a0_.held),
			    (unsigned long long)(a1_.expired - a0_.expired),
			    (unsigned long long)(b1_.carried - b0_.carried),
			    (unsigned long long)(b1_.acks - b0_.acks),
			    (unsigned long long)(b1_.held - b0_.held),
			    (unsigned long long)(b1_.expired - b0_.expired));
	}

	Counts a0_{}, b0_{}, a1_{}, b1_{};
};

class CarryOffTest : public CarryTest {
protected:
	std::string module_params() const override { return "ack_hold_us=0"; }
};

} // namespace

// Requests and answers carry each other's acks; both sides hold far fewer
// acks alone than round trips (each carried ack is one frame less).
TEST_F(CarryTest, AnswersCarryTheAcksOfRequests)
{
	ASSERT_NO_FATAL_FAILURE(ping_pong());
	EXPECT_GE(b1_.carried - b0_.carried, static_cast<uint64_t>(kRounds) / 2)
		<< "node 1's answers carried few acks";
	EXPECT_GE(a1_.carried - a0_.carried, static_cast<uint64_t>(kRounds) / 2)
		<< "node 0's requests carried few acks";
	EXPECT_LT(b1_.acks - b0_.acks, static_cast<uint64_t>(kRounds) / 2);
	EXPECT_EQ(b1_.now - b0_.now, 0u);	// nothing asked for a prompt ack
}

// Requests posted with Post::AckNow: node 1 acks each at once, holds and
// carries none of them, although it answers them all; node 0 still holds
// the answers' acks for its next requests.
TEST_F(CarryTest, WaitedRequestsAckedAtOnce)
{
	ASSERT_NO_FATAL_FAILURE(ping_pong(multiedge::Post::AckNow));
	EXPECT_EQ(b1_.now - b0_.now, static_cast<uint64_t>(kRounds));
	EXPECT_EQ(b1_.held - b0_.held, 0u);
	EXPECT_EQ(b1_.carried - b0_.carried, 0u);
	EXPECT_GE(b1_.acks - b0_.acks, static_cast<uint64_t>(kRounds) * 95 / 100);
	EXPECT_GE(a1_.carried - a0_.carried, static_cast<uint64_t>(kRounds) / 2)
		<< "node 0's requests carried few acks";
}

// After the answers, node 0 writes on without answers: node 1 held the
// first write's ack in vain (it completes one hold late), then acks at
// once again; everything completes.
TEST_F(CarryTest, UnansweredRequestsEndTheHolding)
{
	ASSERT_NO_FATAL_FAILURE(ping_pong());
	multiedge::Device &a = c_->dev(0), &b = c_->dev(1);
	Buffer src(4096), dst(4096);
	fill_random(src.data(), 4096, 13);
	auto ms = a.register_memory(src.data(), 4096, Access::None);
	auto md = b.register_memory(dst.data(), 4096, Access::RemoteReadWrite);
	ME_ASSERT_OK(ms);
	ME_ASSERT_OK(md);
	auto conn = a.connect(c_->id(1));
	ME_ASSERT_OK(conn);
	const auto rd = multiedge::remote_of(md.value());
	for (uint64_t i = 0; i < 20; i++) {
		ME_ASSERT_OK(conn->write(ms.value(), i * 64, rd, i * 64, 64, 5000 + i));
		auto c = a.wait_for(5000 + i, 10s);
		ME_ASSERT_OK(c);
		ASSERT_TRUE(c->ok()) << c->describe();
	}
	EXPECT_EQ(first_difference(src.data(), dst.data(), 20 * 64), -1);
	const Counts b2 = counts(b);
	EXPECT_GE(b2.expired - b1_.expired, 1u);
	// Holding ended with the first expiry: at most a few more were held.
	EXPECT_LE(b2.held - b1_.held, 3u);
}

// ack_hold_us=0: no ack waits, none is carried.
TEST_F(CarryOffTest, EveryAckAlone)
{
	ASSERT_NO_FATAL_FAILURE(ping_pong());
	EXPECT_EQ(a1_.held - a0_.held, 0u);
	EXPECT_EQ(b1_.held - b0_.held, 0u);
	EXPECT_EQ(a1_.carried - a0_.carried, 0u);
	EXPECT_EQ(b1_.carried - b0_.carried, 0u);
	// An ack per request, each alone; two requests may share one when a
	// late copy of the first (resent on a loaded host) arrives with the
	// second (a clean-clone run on a busy host counted 298 of 300).
	EXPECT_GE(b1_.acks - b0_.acks, static_cast<uint64_t>(kRounds) * 95 / 100);
}
