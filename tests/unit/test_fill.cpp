// SPDX-License-Identifier: GPL-2.0
// Filled packets (wire 16).  A sender cuts a transfer at the receiver's page
// boundaries so whole pages can be flipped into place (paper §3.3); at MTU
// 9000 that is two pages a packet, 8% more packets than filling them.  A
// receiver that copies whole pages anyway (its frames hold no page it can
// flip, or it places from its own copy, as an ordered connection does) says
// so in its acks (ME_F_FILL) and the sender fills its packets instead.
#include "harness.hpp"

using namespace mesim;

namespace {

constexpr uint32_t kMsg = 256 * 1024;
constexpr uint32_t kPage = 4096;

struct Stream {
	Sim sim;
	me_conn *c = nullptr;
	uint32_t maxpay = 0;
	uint64_t completed = 0;
	int failed = 0;
	std::vector<uint32_t> payloads;	// node 0's data packets, in order sent
	std::vector<size_t> msg_start;	// where each message's packets begin
	uint64_t fill_acks = 0, acks = 0;

	Stream(uint64_t seed, uint32_t mode, bool copies) : sim(seed)
	{
		me_node_cfg ca = module_cfg(1, 9000), cb = module_cfg(2, 9000);
		setup_pair(sim, 1, LinkParams{}, ca, cb, 16 << 20);
		sim.nodes[1]->copies_pages = copies;
		maxpay = ca.mtu - ME_HDR_SEQ;
		uint32_t pid = 0;
		c = sim.connect(0, 1, mode, &pid);
		sim.tx_hook = [this](const TxEvent &e) {
			if (!e.parsed)
				return;
			if (e.node == 0 && e.h.type == ME_PT_WRITE && !(e.h.flags & ME_F_RTX))
				payloads.push_back(e.h.payload_len);
			if (e.node == 1 && (e.h.type == ME_PT_ACK || e.h.type == ME_PT_NACK)) {
				acks++;
				fill_acks += !!(e.h.flags & ME_F_FILL);
			}
		};
		sim.cqe_hook = [this](Node &n, const me_cqe &q) {
			if (n.idx != 0 || q.type != ME_CQE_WRITE)
				return;
			completed++;
			failed += q.status != 0;
		};
	}

	// One write of kMsg at a page-aligned offset, run to its completion.
	void write_one(uint32_t i)
	{
		me_rw rw;
		memset(&rw, 0, sizeof(rw));
		rw.cookie = i + 1;
		rw.len = kMsg;
		rw.local_region = kSrc;
		rw.local_off = (uint64_t)i * kPage;
		rw.remote_region = kDst;
		rw.remote_off = (uint64_t)i * kMsg;
		rw.remote_key = kKey;
		msg_start.push_back(payloads.size());
		const uint64_t want = completed + 1;
		ASSERT_EQ(me_conn_write(c, &rw), 0);
		ASSERT_TRUE(sim.run([&] { return completed >= want; }, sim.now + 100000000));
		ASSERT_EQ(failed, 0);
		const auto &dst = sim.nodes[1]->regions[kDst].mem;
		const auto &src = sim.nodes[0]->regions[kSrc].mem;
		ASSERT_EQ(memcmp(dst.data() + rw.remote_off, src.data() + rw.local_off, kMsg), 0)
			<< "write " << i << " landed wrong";
	}

	// Writes from..to-1, each run to its completion.
	void write_range(uint32_t from, uint32_t to)
	{
		for (uint32_t i = from; i < to; i++)
			ASSERT_NO_FATAL_FAILURE(write_one(i));
	}

	// Message i's packets (those sent while it was the only one queued).
	std::vector<uint32_t> packets_of(size_t i) const
	{
		size_t end = i + 1 < msg_start.size() ? msg_start[i + 1] : payloads.size();
		return {payloads.begin() + (long)msg_start[i], payloads.begin() + (long)end};
	}
};

uint32_t packets_filled(uint32_t len, uint32_t maxpay) { return (len + maxpay - 1) / maxpay; }

}  // namespace

// A receiver that flips (or could) keeps the cut at its pages: every packet
// of a page-aligned 256 KiB write carries whole pages, two at MTU 9000.
TEST(Fill, receiver_that_flips__packets_cut_at_its_pages)
{
	Stream s(61, ME_MODE_UNORDERED, false);
	ASSERT_NE(s.c, nullptr);
	ASSERT_NO_FATAL_FAILURE(s.write_range(0, 6));
	for (size_t i = 0; i < 6; i++) {
		auto p = s.packets_of(i);
		EXPECT_EQ(p.size(), (size_t)kMsg / (2 * kPage)) << "message " << i;
		for (uint32_t len : p)
			EXPECT_EQ(len % kPage, 0u) << "message " << i << ": a packet not of whole pages";
	}
	EXPECT_GT(s.acks, 0u);
	EXPECT_EQ(s.fill_acks, 0u);
}

// A receiver whose whole pages are copied says so from its first ack on,
// and from the next message on every packet but a message's last is full.
TEST(Fill, receiver_that_copies__packets_filled)
{
	Stream s(62, ME_MODE_UNORDERED, true);
	ASSERT_NE(s.c, nullptr);
	ASSERT_NO_FATAL_FAILURE(s.write_range(0, 6));
	EXPECT_GT(s.fill_acks, 0u);
	EXPECT_EQ(s.fill_acks, s.acks) << "an ack without FILL though every page was copied";
	for (size_t i = 1; i < 6; i++) {
		auto p = s.packets_of(i);
		EXPECT_EQ(p.size(), packets_filled(kMsg, s.maxpay)) << "message " << i;
		for (size_t k = 0; k + 1 < p.size(); k++)
			EXPECT_EQ(p[k], s.maxpay) << "message " << i << " packet " << k;
	}
	EXPECT_LT(packets_filled(kMsg, s.maxpay), kMsg / (2 * kPage));
}

// An ordered connection places from its own copy of each packet, never
// flipping, so its acks ask for filled packets whatever the host could do.
TEST(Fill, ordered_connection__packets_filled)
{
	Stream s(63, ME_MODE_ORDERED, false);
	ASSERT_NE(s.c, nullptr);
	ASSERT_NO_FATAL_FAILURE(s.write_range(0, 4));
	EXPECT_GT(s.fill_acks, 0u);
	for (size_t i = 1; i < 4; i++)
		EXPECT_EQ(s.packets_of(i).size(), packets_filled(kMsg, s.maxpay)) << "message " << i;
}

// Each message's first packet starts at a page of the receiver, so a
// receiver that can flip again is seen to and the cut at its pages comes
// back (and goes again when it copies again).
TEST(Fill, receiver_that_flips_again__cut_at_its_pages_again)
{
	Stream s(64, ME_MODE_UNORDERED, true);
	ASSERT_NE(s.c, nullptr);
	ASSERT_NO_FATAL_FAILURE(s.write_range(0, 3));
	EXPECT_EQ(s.packets_of(2).size(), packets_filled(kMsg, s.maxpay));
	s.sim.nodes[1]->copies_pages = false;
	ASSERT_NO_FATAL_FAILURE(s.write_range(3, 6));
	for (uint32_t len : s.packets_of(5))
		EXPECT_EQ(len, 2 * kPage) << "not cut at the receiver's pages again";
	s.sim.nodes[1]->copies_pages = true;
	ASSERT_NO_FATAL_FAILURE(s.write_range(6, 9));
	EXPECT_EQ(s.packets_of(8).size(), packets_filled(kMsg, s.maxpay));
}
