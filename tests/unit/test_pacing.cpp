// SPDX-License-Identifier: GPL-2.0
// Pacing (cfg.pace_pct, path.c): a path's packets leave spread over its
// round trip instead of as bursts of its window, at pace_pct percent of
// window / base RTT, with pace_burst bytes back to back at most; the host
// brings a paced pump back at the next departure (ops.pace_kick,
// me_core_pace).  Paced or not, every byte arrives once.
#include "harness.hpp"

#include <cstdio>

using namespace mesim;

namespace {

struct StreamResult {
	uint32_t burst = 0;	// most data packets node 0 handed over at one instant
	uint64_t bytes = 0;	// written in the measured interval
	uint64_t rtx = 0;	// packets sent again
	uint64_t tx = 0;
	uint64_t pace_calls = 0;
};

// Node 0 keeps 8 writes of 256 KiB posted to node 1 over one 10 Gbit/s
// link with a 100 us round trip, for 20 ms after a 10 ms warm-up.
StreamResult stream(uint32_t pace_pct, uint64_t seed)
{
	constexpr uint32_t kLen = 256 * 1024, kDepth = 8;
	Sim sim(seed);
	me_node_cfg a = module_cfg(1), b = module_cfg(2);
	a.pace_pct = pace_pct;
	a.pace_burst = 2 * a.mtu;
	setup_pair(sim, 1, LinkParams{10.0, 50000}, a, b, 4 << 20);
	me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED);
	EXPECT_NE(c, nullptr);
	StreamResult r;
	if (!c)
		return r;
	bool measuring = false;
	uint64_t last_t = ~0ull, posted = 0, done = 0, failed = 0;
	uint32_t run = 0;
	sim.tx_hook = [&](const TxEvent &e) {
		if (!measuring || e.node != 0 || !e.parsed || e.h.type != ME_PT_WRITE)
			return;
		run = e.t == last_t ? run + 1 : 1;
		last_t = e.t;
		r.burst = std::max(r.burst, run);
	};
	auto post = [&] {
		me_rw rw{};
		rw.cookie = ++posted;
		rw.len = kLen;
		rw.remote_key = kKey;
		rw.local_region = kSrc;
		rw.local_off = posted % 16 * kLen;
		rw.remote_region = kDst;
		rw.remote_off = rw.local_off;
		EXPECT_EQ(me_conn_write(c, &rw), 0);
	};
	bool stop = false;
	sim.cqe_hook = [&](Node &n, const me_cqe &q) {
		if (n.idx != 0 || q.type != ME_CQE_WRITE)
			return;
		if (q.status)
			failed++;
		else if (measuring)
			r.bytes += kLen;
		done++;
		if (!stop)
			sim.at(sim.now, post);
	};
	for (uint32_t i = 0; i < kDepth; i++)
		post();
	sim.run_for(10000000);
	me_node *n = sim.nodes[0]->node;
	const uint64_t tx0 = me_node_stat(n, ME_ST_TX_DATA);
	const uint64_t rtx0 = me_node_stat(n, ME_ST_TX_RTX_LOSS) + me_node_stat(n, ME_ST_TX_RTX_RTO);
	const uint64_t calls0 = sim.nodes[0]->pace_calls;
	measuring = true;
	sim.run_for(20000000);
	measuring = false;
	stop = true;
	r.tx = me_node_stat(n, ME_ST_TX_DATA) - tx0;
	r.rtx = me_node_stat(n, ME_ST_TX_RTX_LOSS) + me_node_stat(n, ME_ST_TX_RTX_RTO) - rtx0;
	r.pace_calls = sim.nodes[0]->pace_calls - calls0;
	EXPECT_TRUE(sim.run([&] { return done == posted; }, sim.now + 2000000000ull));
	EXPECT_EQ(failed, 0u);
	const Region &src = sim.nodes[0]->regions[kSrc], &dst = sim.nodes[1]->regions[kDst];
	EXPECT_EQ(memcmp(src.mem.data(), dst.mem.data(), 16 * kLen), 0);
	printf("  pace %3u%%: burst %u packets, %.2f Gbit/s, rtx %llu of %llu, pace calls %llu\n",
	       pace_pct, r.burst, (double)r.bytes * 8 / 20e-3 / 1e9, (unsigned long long)r.rtx,
	       (unsigned long long)r.tx, (unsigned long long)r.pace_calls);
	return r;
}

}  // namespace

// Unpaced, a window's acks release bursts of many packets at once; paced
// at 150%, no more than pace_burst leaves at one instant, and the stream
// still fills the link.
TEST(Pacing, a_window_leaves_spread_and_still_fills_the_link)
{
	StreamResult off = stream(0, 61), on = stream(150, 61);
	EXPECT_GT(off.burst, 4u) << "the unpaced stream never burst: nothing to compare";
	EXPECT_LE(on.burst, 2u);
	EXPECT_GT(on.pace_calls, 100u);
	EXPECT_GE((double)on.bytes, 0.9 * (double)off.bytes);
	EXPECT_EQ(off.pace_calls, 0u);
}

// The configuration is checked: pacing needs the host's pace_kick, a
// percentage of at least 100 (at most 1000) and a burst of at most 4 MiB.
TEST(Pacing, bad_configurations_are_refused)
{
	Sim sim(5);
	me_node_cfg c = module_cfg(1);
	c.pace_pct = 99;
	EXPECT_EQ(me_node_create(&c, sim_plat(), nullptr), nullptr);
	c.pace_pct = 1001;
	EXPECT_EQ(me_node_create(&c, sim_plat(), nullptr), nullptr);
	c.pace_pct = 150;
	c.pace_burst = (4u << 20) + 1;
	EXPECT_EQ(me_node_create(&c, sim_plat(), nullptr), nullptr);
	me_plat_ops no_kick = *sim_plat();
	no_kick.pace_kick = nullptr;
	c.pace_burst = 2 * c.mtu;
	EXPECT_EQ(me_node_create(&c, &no_kick, nullptr), nullptr);
}
