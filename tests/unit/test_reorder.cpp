// SPDX-License-Identifier: GPL-2.0
// Loss detection on a path that reorders by more than reorder_ns: the
// peer's reports of packets that came twice (ME_F_DUP) widen the path's
// reordering window, so the needless resends stop (path.c,
// me_path_reorder()).
#include "harness.hpp"

using namespace mesim;

namespace {

struct Halves {
	uint64_t dup_first = 0, dup_second = 0;	// receiver's duplicates
	uint64_t lost_first = 0, lost_second = 0; // sender's resends by acks
	uint64_t rto_second = 0;		// ... by the timer
	uint64_t ns_second = 0;			// how long the second half took
};

// 40 rounds of 64 small writes, each round awaited, between nodes
// configured as the module configures them (reorder_ns 2 ms, RTO at
// least 5 ms); the counters taken after the first 20 and at the end.
Halves run(uint64_t seed, const LinkParams &lp)
{
	Halves h;
	Sim sim(seed);
	setup_pair(sim, 1, lp, module_cfg(1), module_cfg(2));
	me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED);
	EXPECT_NE(c, nullptr);
	if (!c)
		return h;
	Workload w(sim, seed);
	me_node *a = sim.nodes[0]->node, *b = sim.nodes[1]->node;
	for (int round = 0; round < 40; round++) {
		if (round == 20) {
			h.dup_first = me_node_stat(b, ME_ST_RX_DUP);
			h.lost_first = me_node_stat(a, ME_ST_TX_RTX_LOSS);
			h.rto_second = me_node_stat(a, ME_ST_TX_RTX_RTO);
			h.ns_second = sim.now;
		}
		for (int i = 0; i < 64; i++)
			EXPECT_EQ(w.submit(c, 0, Op::WRITE, 64), 0);
		EXPECT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 2000000000ull))
			<< "round " << round;
	}
	w.check();
	h.dup_second = me_node_stat(b, ME_ST_RX_DUP) - h.dup_first;
	h.lost_second = me_node_stat(a, ME_ST_TX_RTX_LOSS) - h.lost_first;
	h.rto_second = me_node_stat(a, ME_ST_TX_RTX_RTO) - h.rto_second;
	h.ns_second = sim.now - h.ns_second;
	printf("duplicates at the receiver %llu then %llu, resent by acks %llu then %llu, "
	       "by the timer %llu in the second half, which took %.1f ms\n",
	       (unsigned long long)h.dup_first, (unsigned long long)h.dup_second,
	       (unsigned long long)h.lost_first, (unsigned long long)h.lost_second,
	       (unsigned long long)h.rto_second, h.ns_second / 1e6);
	return h;
}

}  // namespace

// 5% of the packets arrive up to 1 ms late on a path of a 6 ms round
// trip (well within a timeout); reorder_ns is 2 ms, less than the round
// trip, so the first late ones are resent needlessly as soon as 16 later
// ones are acked; once the peer has said so, hardly any are.
TEST(Reorder, late_packets__window_widens__needless_resends_stop)
{
	LinkParams lp;
	lp.delay_ns = 3000000;
	lp.reorder = 0.05;
	lp.reorder_ns = 1000000;
	for (uint64_t seed = 601; seed < 604; seed++) {
		SCOPED_TRACE(seed);
		Halves h = run(seed, lp);
		// The scenario: resends by acks at first, each one needless.
		EXPECT_GT(h.lost_first, 0u);
		EXPECT_LE(h.lost_second * 4, h.lost_first);
		EXPECT_LE(h.dup_second * 4, h.dup_first);
	}
}

// Real losses on a path that also reorders are still resent within
// about two round trips of their sending (the widened wait is at most a
// round trip beyond one), not after timeouts that back off: the rounds
// with 1% loss take little longer than those without.
TEST(Reorder, losses_among_late_packets__resent_within_two_round_trips)
{
	LinkParams lp;
	lp.delay_ns = 3000000;
	lp.reorder = 0.05;
	lp.reorder_ns = 1000000;
	Halves clean = run(611, lp);
	lp.loss = 0.01;
	Halves lossy = run(611, lp);
	const uint64_t resent = lossy.lost_second + lossy.rto_second;
	EXPECT_GT(resent, 0u);
	// A round is about two round trips (12 ms); a lost packet adds at
	// most about two and a half more (15 ms) to its round.
	EXPECT_LE(lossy.ns_second, clean.ns_second + resent * 15000000ull);
}
