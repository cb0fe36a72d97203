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

// A 6 ms round trip on which 5% of the packets arrive up to 1 ms late.
LinkParams late_link()
{
	LinkParams lp;
	lp.delay_ns = 3000000;
	lp.reorder = 0.05;
	lp.reorder_ns = 1000000;
	return lp;
}

// One round: 64 small writes, awaited.
void write_round(Sim &sim, Workload &w, me_conn *c, int round)
{
	for (int i = 0; i < 64; i++)
		EXPECT_EQ(w.submit(c, 0, Op::WRITE, 64), 0);
	EXPECT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 2000000000ull))
		<< "round " << round;
}

// `rounds` rounds of 64 small writes, each round awaited, between nodes
// configured as the module configures them (reorder_ns 2 ms, RTO at
// least 5 ms); the counters taken after round `split` and at the end.
Halves run(uint64_t seed, const LinkParams &lp, int rounds = 40, int split = 20)
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
	for (int round = 0; round < rounds; round++) {
		if (round == split) {
			h.dup_first = me_node_stat(b, ME_ST_RX_DUP);
			h.lost_first = me_node_stat(a, ME_ST_TX_RTX_LOSS);
			h.rto_second = me_node_stat(a, ME_ST_TX_RTX_RTO);
			h.ns_second = sim.now;
		}
		write_round(sim, w, c, round);
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

// Late packets for 40 rounds, then 100 rounds without reordering (with 5%
// loss, or none), then late packets again for 40 rounds: the needless
// resends of the last stretch.
uint64_t resent_after_a_pause(uint64_t seed, double pause_loss)
{
	const LinkParams late = late_link();
	LinkParams pause;
	pause.delay_ns = late.delay_ns;
	pause.loss = pause_loss;
	Sim sim(seed);
	setup_pair(sim, 1, late, module_cfg(1), module_cfg(2));
	me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED);
	EXPECT_NE(c, nullptr);
	if (!c)
		return 0;
	Workload w(sim, seed);
	me_node *b = sim.nodes[1]->node;
	uint64_t dup = 0;
	for (int round = 0; round < 180; round++) {
		if (round == 40 || round == 140) {
			// The data's way only: lost acks would make timeouts
			// resend needlessly, and their reports widen it again.
			sim.wires[0].p[0] = round == 40 ? pause : late;
			dup = me_node_stat(b, ME_ST_RX_DUP);
		}
		write_round(sim, w, c, round);
	}
	w.check();
	dup = me_node_stat(b, ME_ST_RX_DUP) - dup;
	printf("with %.0f%% loss between: duplicates at the receiver in the last 40 rounds %llu\n",
	       pause_loss * 100, (unsigned long long)dup);
	return dup;
}

}  // namespace

// 5% of the packets arrive up to 1 ms late on a path of a 6 ms round
// trip (well within a timeout); reorder_ns is 2 ms, less than the round
// trip, so the first late ones are resent needlessly as soon as 16 later
// ones are acked; once the peer has said so, hardly any are.
TEST(Reorder, late_packets__window_widens__needless_resends_stop)
{
	LinkParams lp = late_link();
	for (uint64_t seed = 601; seed < 604; seed++) {
		SCOPED_TRACE(seed);
		Halves h = run(seed, lp);
		// The scenario: resends by acks at first, each one needless.
		EXPECT_GT(h.lost_first, 0u);
		EXPECT_LE(h.lost_second * 4, h.lost_first);
		EXPECT_LE(h.dup_second * 4, h.dup_first);
	}
}

// The same late packets for about 1.5 s, counted from 0.6 s on, past
// the second after the peer's reports of the first: the widened window
// holds as long as no loss round spent it (RFC 8985 keeps its raise for
// 16 recoveries), so late packets do not go twice again once a second
// has passed (they did every second while the raise lasted one: a veth
// whose CPUs' queues reorder all the time resent a burst and cut its
// window each time).
TEST(Reorder, lasting_reordering__window_stays_wide__no_needless_resends_later)
{
	LinkParams lp = late_link();
	Halves h = run(621, lp, 220, 90);
	EXPECT_GT(h.ns_second, 800000000ull);
	EXPECT_GT(h.lost_first, 0u);
	EXPECT_EQ(h.lost_second, 0u);
	EXPECT_EQ(h.dup_second, 0u);
}

// Real losses on a path that also reorders are still resent within
// about two round trips of their sending (the widened wait is at most a
// round trip beyond one), not after timeouts that back off: the rounds
// with 1% loss take little longer than those without.
TEST(Reorder, losses_among_late_packets__resent_within_two_round_trips)
{
	LinkParams lp = late_link();
	Halves clean = run(611, lp);
	lp.loss = 0.01;
	Halves lossy = run(611, lp);
	const uint64_t resent = lossy.lost_second + lossy.rto_second;
	EXPECT_GT(resent, 0u);
	// A round is about two round trips (12 ms); a lost packet adds at
	// most about two and a half more (15 ms) to its round.
	EXPECT_LE(lossy.ns_second, clean.ns_second + resent * 15000000ull);
}

// The widened window lapses after 16 loss rounds without a report, not
// before: after a stretch without reordering or loss the late packets
// that come back find it wide (no needless resend); after a stretch with
// 5% loss (real resends, a round each) they find the configured 2 ms
// again and go twice once more, until the peer's reports widen it anew.
TEST(Reorder, widened_window__lapses_after_loss_rounds_only)
{
	EXPECT_EQ(resent_after_a_pause(631, 0), 0u);
	EXPECT_GT(resent_after_a_pause(631, 0.05), 0u);
}
