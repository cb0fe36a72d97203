// SPDX-License-Identifier: GPL-2.0
// Hosts that stop for a while (an emulated guest's vCPU descheduled for
// 200 ms while the host's two cores run the other guest): a node that
// stalled judges no silence before it has read what came meanwhile, and
// a sender whose receiver stalled probes it with one packet per timeout
// instead of resending its window into the queue in front of it.
#include "harness.hpp"

using namespace mesim;

namespace {

// 100 ms: 20 RTOs, shorter than link_dead (a longer stall is silence the
// peer rightly judges: it takes the path down, and tells us).
constexpr uint64_t kStall = 100000000;

uint64_t stat(Sim &sim, int node, me_stat st)
{
	return me_node_stat(sim.nodes[node]->node, st);
}

// Data packets node 0 resent, found lost or timed out.
uint64_t resent(Sim &sim)
{
	return stat(sim, 0, ME_ST_TX_RTX_RTO) + stat(sim, 0, ME_ST_TX_RTX_LOSS);
}

// Node 0 streams 64 KiB writes to node 1 over one 1 Gbit/s link, 200 us
// each way, with the module's timing (link_dead 150 ms, RTO >= 5 ms).
struct Stalls {
	Sim sim;
	Workload w;
	me_conn *c = nullptr;

	explicit Stalls(uint64_t seed) : sim(seed), w(sim, seed)
	{
		LinkParams lp;
		lp.gbps = 1;
		lp.delay_ns = 200000;
		setup_pair(sim, 1, lp, module_cfg(1), module_cfg(2), 64 << 20);
		c = sim.connect(0, 1, ME_MODE_UNORDERED);
	}

	// Keeps 8 writes posted for ns.
	void stream(uint64_t ns)
	{
		const uint64_t end = sim.now + ns;
		while (sim.now < end) {
			while (w.pending() < 8 && w.submit(c, 0, Op::WRITE, 64 * 1024) == 0) {
			}
			sim.run_for(200000);
		}
	}

	void finish()
	{
		ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 2000000000));
		w.check();
		for (const auto &[k, op] : w.ops)
			EXPECT_EQ(op.status, 0) << "operation " << k << " failed";
		EXPECT_EQ(me_conn_state(c), ME_CS_ESTABLISHED);
	}
};

}  // namespace

// The sender stalls with writes in flight; the receiver's acks (and its
// keepalives) wait in the sender's receive queue, which is read only
// after the sender's timer has passed once.  That pass comes late and
// judges nothing: no timeout fires, nothing is resent, the path stays up
// (before, it took the path down for 200 ms of silence that was its own
// and resent a packet the receiver had).
TEST(Stall, sender_stalled__judges_nothing_before_reading_its_queue)
{
	for (uint64_t seed : {1, 2, 3}) {
		Stalls S(seed);
		ASSERT_NE(S.c, nullptr);
		Sim &sim = S.sim;
		S.stream(50000000);
		ASSERT_GT(S.w.pending(), 0);
		const uint64_t fired0 = stat(sim, 0, ME_ST_RTO_FIRED);
		const uint64_t rtx0 = resent(sim);
		const uint64_t down0 = stat(sim, 0, ME_ST_LINK_DOWN);
		const uint64_t late0 = stat(sim, 0, ME_ST_TIMER_LATE);
		sim.nodes[0]->frozen_until = sim.now + kStall;
		sim.run_for(kStall + 5000000);
		printf("seed %llu: after the stall %llu late passes, %llu timeouts, %llu resent, "
		       "%llu links down\n", (unsigned long long)seed,
		       (unsigned long long)(stat(sim, 0, ME_ST_TIMER_LATE) - late0),
		       (unsigned long long)(stat(sim, 0, ME_ST_RTO_FIRED) - fired0),
		       (unsigned long long)(resent(sim) - rtx0),
		       (unsigned long long)(stat(sim, 0, ME_ST_LINK_DOWN) - down0));
		EXPECT_EQ(stat(sim, 0, ME_ST_TIMER_LATE), late0 + 1);
		EXPECT_EQ(stat(sim, 0, ME_ST_RTO_FIRED), fired0) << "a timeout fired on acks unread";
		EXPECT_EQ(resent(sim), rtx0);
		EXPECT_EQ(stat(sim, 0, ME_ST_LINK_DOWN), down0)
			<< "the path went down for the sender's own silence";
		S.stream(20000000);
		ASSERT_NO_FATAL_FAILURE(S.finish());
	}
}

// A host whose every pass comes late still judges: one pass in two.  The
// receiver goes silent for good (its frames dropped) while the sender's
// timer runs 30 ms late each time: the path goes down and the writes
// time out, as on time, within a few late passes of link_dead.
TEST(Stall, always_late_timer__still_finds_a_dead_path)
{
	Stalls S(4);
	ASSERT_NE(S.c, nullptr);
	Sim &sim = S.sim;
	S.stream(20000000);
	const uint64_t down0 = stat(sim, 0, ME_ST_LINK_DOWN);
	const uint64_t late0 = stat(sim, 0, ME_ST_TIMER_LATE);
	sim.drop_hook = [](const TxEvent &e) { return e.node == 1; };
	const uint64_t silent = sim.now;
	uint64_t down_at = 0;
	while (sim.now < silent + 1000000000 && !down_at) {
		sim.nodes[0]->frozen_until = sim.now + 30000000;
		sim.run_for(31000000);
		if (stat(sim, 0, ME_ST_LINK_DOWN) > down0)
			down_at = sim.now;
	}
	printf("path down %.0f ms after the receiver went silent, %llu late passes\n",
	       (double)(down_at - silent) / 1e6,
	       (unsigned long long)(stat(sim, 0, ME_ST_TIMER_LATE) - late0));
	ASSERT_NE(down_at, 0u) << "the path never went down";
	EXPECT_LE(down_at - silent, 150000000u + 4 * 31000000u);
	EXPECT_GT(stat(sim, 0, ME_ST_TIMER_LATE), late0);
}

// The receiver stalls with a window of packets in flight to it; they
// wait in its queue.  The sender's timeouts each resend one packet, the
// oldest, while the receiver says nothing (before, the second timeout
// resent every packet in flight); once it answers, everything completes
// and nothing was written twice.
TEST(Stall, receiver_stalled__gets_probes_not_the_window)
{
	for (uint64_t seed : {5, 6, 7}) {
		Stalls S(seed);
		ASSERT_NE(S.c, nullptr);
		Sim &sim = S.sim;
		S.stream(50000000);
		const uint64_t fired0 = stat(sim, 0, ME_ST_RTO_FIRED);
		const uint64_t rtx0 = resent(sim);
		me_path_info_core pa{};
		ASSERT_TRUE(me_node_path_at(sim.nodes[0]->node, 0, 0, &pa));
		const uint64_t inflight = pa.inflight;
		sim.nodes[1]->frozen_until = sim.now + kStall;
		sim.run_for(kStall);
		const uint64_t fired = stat(sim, 0, ME_ST_RTO_FIRED) - fired0;
		const uint64_t rtx = resent(sim) - rtx0;
		printf("seed %llu: %llu bytes in flight at the stall, %llu timeouts, %llu packets "
		       "resent in it\n", (unsigned long long)seed, (unsigned long long)inflight,
		       (unsigned long long)fired, (unsigned long long)rtx);
		EXPECT_GE(fired, 2u);
		EXPECT_LE(rtx, fired) << "the window went again into a silent receiver";
		S.stream(20000000);
		ASSERT_NO_FATAL_FAILURE(S.finish());
	}
}
