// SPDX-License-Identifier: GPL-2.0
// The idle timer: a node whose connections have nothing that times out
// runs its timer at its paths' deadlines (a keepalive every ka_ns), not
// every tick, and the first work after that for the next tick (an op
// the pump could not send) kicks it back to the tick, so nothing waits
// for the long period.  The
// simulator runs each node's timer as the module does (Sim::tick,
// Sim::timer_kick).
#include "harness.hpp"

using namespace mesim;

namespace {

// Two nodes with the module's timing (1 ms tick, 20 ms keepalives, 100
// ms HELLOs and CONNECT retries), one link of 50 us, a connection up and
// settled.
struct IdlePair {
	Sim sim;
	me_conn *c = nullptr;
	Workload w;

	explicit IdlePair(uint64_t seed, double gbps = 10.0, size_t mem = 4 << 20)
		: sim(seed), w(sim, seed)
	{
		LinkParams lp;
		lp.gbps = gbps;
		lp.delay_ns = 50000;
		setup_pair(sim, 1, lp, module_cfg(1), module_cfg(2), mem);
		c = sim.connect(0, 1, ME_MODE_UNORDERED);
		sim.run_for(200000000);
	}

	// Timer passes of node i over the next `ns`.
	uint64_t passes_over(int i, uint64_t ns)
	{
		const uint64_t p0 = sim.nodes[i]->timer_passes;
		sim.run_for(ns);
		return sim.nodes[i]->timer_passes - p0;
	}
};

}  // namespace

// Idle for a second, both nodes' timers passed for their keepalives
// (every 20 ms) and HELLOs (every 100 ms): about 60 passes, not the 200
// of a pass every quarter keepalive nor the 1000 of a 1 ms tick, and the
// path stayed alive on the keepalives those passes send.
TEST(IdleTimer, idle_node_runs_its_timer_at_its_deadlines)
{
	IdlePair P(91);
	ASSERT_NE(P.c, nullptr);
	for (int i = 0; i < 2; i++) {
		const uint64_t passes = P.passes_over(i, 1000000000);
		printf("node %d idle for 1 s: %llu timer passes\n", i, (unsigned long long)passes);
		EXPECT_GE(passes, 50u);
		EXPECT_LE(passes, 80u);
	}
	EXPECT_NE(me_peer_alive_links(P.sim.nodes[0]->node, 2), 0u);
	EXPECT_NE(me_peer_alive_links(P.sim.nodes[1]->node, 1), 0u);
	EXPECT_EQ(me_conn_state(P.c), (uint32_t)ME_CS_ESTABLISHED);
}

// Work after idle intervals of every phase against the 20 ms sleep
// kicks each timer at most once: a packet that times out (5 ms at least)
// before the sleeping timer's next pass asks for it sooner, and the
// receiver's ack goes at once (an ack request), with the answer, or by
// the ack timer (ops.ack_kick) when its hold ends.  Each node's timer
// passes at most once in the millisecond of the op, and the ops
// complete in a round trip.
TEST(IdleTimer, work_after_idle__kicks_each_timer_once_at_most)
{
	IdlePair P(92);
	ASSERT_NE(P.c, nullptr);
	Node &a = *P.sim.nodes[0], &b = *P.sim.nodes[1];
	uint64_t worst = 0;
	for (int i = 0; i < 40; i++) {
		P.sim.run_for(20000000 + P.sim.rng.below(5000000));
		const uint64_t ka = a.timer_kicks, pa = a.timer_passes;
		const uint64_t kb = b.timer_kicks, pb = b.timer_passes;
		const uint64_t t0 = P.sim.now;
		ASSERT_EQ(P.w.submit(P.c, 0, i % 2 ? Op::READ : Op::WRITE, 8), 0);
		ASSERT_TRUE(P.sim.run([&] { return P.w.all_done(); }, P.sim.now + 1000000000));
		worst = std::max(worst, P.sim.now - t0);
		P.sim.run_for(t0 + 1000000 - std::min(P.sim.now, t0 + 1000000));
		EXPECT_LE(a.timer_kicks, ka + 1) << i;
		EXPECT_LE(b.timer_kicks, kb + 1) << i;
		EXPECT_LE(a.timer_passes, pa + 1) << i;
		EXPECT_LE(b.timer_passes, pb + 1) << i;
	}
	printf("40 ops after idle: slowest %llu us\n", (unsigned long long)worst / 1000);
	EXPECT_LT(worst, 500000u);
	P.w.check();
}

// An op the window cannot send yet (posted with more to come, no
// submit after it) is the timer's to pump: it kicks the sleeping timer,
// which sends it within a tick.
TEST(IdleTimer, op_left_for_the_pump__wakes_the_timer)
{
	IdlePair P(94);
	ASSERT_NE(P.c, nullptr);
	Node &a = *P.sim.nodes[0];
	P.sim.run_for(20000000);
	const uint64_t ka = a.timer_kicks, t0 = P.sim.now;
	ASSERT_EQ(P.w.submit(P.c, 0, Op::WRITE, 8, ME_RW_MORE), 0);
	ASSERT_TRUE(P.sim.run([&] { return P.w.all_done(); }, P.sim.now + 1000000000));
	printf("op posted with more to come, none came: done in %llu us\n",
	       (unsigned long long)(P.sim.now - t0) / 1000);
	EXPECT_EQ(a.timer_kicks, ka + 1);
	EXPECT_LT(P.sim.now - t0, 1500000u);
	P.w.check();
}

// A stream does not keep the timer at its tick either: the sender's
// pump, stopped by a full window, is restarted by the acks that open it
// (or the pacing call), and the receiver's owed acks go with the next
// ack due or from the ack timer (ops.ack_kick), not from the timer's
// pass.  So the sender's timer passes by its packets' timeouts (5 ms at
// least) and its rate samples (rate_ns, 10 ms), the receiver's by its
// keepalives: a stream of 64 KiB writes (8 posted) over a 1 Gbit/s link
// for 100 ms, which kept a pass every millisecond on the sender before,
// sees fewer than 40 on each node, and every write lands.
TEST(IdleTimer, stream_leaves_the_timer_to_its_deadlines)
{
	IdlePair P(93, 1.0, 32 << 20);
	ASSERT_NE(P.c, nullptr);
	Node &a = *P.sim.nodes[0], &b = *P.sim.nodes[1];
	const uint64_t pa = a.timer_passes, pb = b.timer_passes, cb = b.ack_calls;
	const uint64_t tx0 = me_node_stat(a.node, ME_ST_TX_DATA), end = P.sim.now + 100000000;
	while (P.sim.now < end) {
		while (P.w.pending() < 8)
			ASSERT_EQ(P.w.submit(P.c, 0, Op::WRITE, 65536), 0);
		P.sim.run_for(200000);
	}
	const uint64_t pkts = me_node_stat(a.node, ME_ST_TX_DATA) - tx0;
	printf("100 ms of writes, %llu packets: %llu timer passes on the sender, %llu on the "
	       "receiver, %llu ack timer calls on the receiver\n", (unsigned long long)pkts,
	       (unsigned long long)(a.timer_passes - pa), (unsigned long long)(b.timer_passes - pb),
	       (unsigned long long)(b.ack_calls - cb));
	EXPECT_GE(pkts, 500u) << "no stream: nothing tested";
	EXPECT_LT(a.timer_passes - pa, 40u);
	EXPECT_LT(b.timer_passes - pb, 40u);
	ASSERT_TRUE(P.sim.run([&] { return P.w.all_done(); }, P.sim.now + 2000000000));
	P.w.check();
}
