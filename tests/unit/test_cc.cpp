// SPDX-License-Identifier: GPL-2.0
// Congestion control's answer to retransmission timeouts (cc.c): a pause
// of the receiver longer than the RTO makes every packet in flight time
// out at once; the probe that opens the episode cuts nothing, a timeout
// after it that the peer answered costs half the window, not all of it,
// and only timeouts in a row with no ack between them (an outage), or a
// timeout soon after losses (congestion), reset the window to one
// packet; what the acks a pause held back took is given back once the
// receiver proves the resend needless (it got the packet twice).
#include "harness.hpp"

using namespace mesim;

namespace {

me_path_info_core path_of(Sim &sim, int node, uint32_t link)
{
	me_path_info_core pa{};
	for (uint32_t slot = 0; slot < sim.nodes[node]->cfg.max_peers; slot++)
		if (me_node_path_at(sim.nodes[node]->node, slot, link, &pa))
			return pa;
	ADD_FAILURE() << "no path at node " << node << " link " << link;
	return pa;
}

uint32_t cwnd_of(Sim &sim, int node)
{
	return path_of(sim, node, 0).cwnd;
}

uint64_t rto_fired(Sim &sim)
{
	return me_node_stat(sim.nodes[0]->node, ME_ST_RTO_FIRED);
}

// Node 0's counter `st`.
uint64_t stat0(Sim &sim, me_stat st)
{
	return me_node_stat(sim.nodes[0]->node, st);
}

constexpr uint32_t kMtu = 9000;

// Bytes of the workload's operations that completed successfully.
uint64_t completed_bytes(const Workload &w)
{
	uint64_t n = 0;
	for (const auto &[k, op] : w.ops)
		n += op.completions && op.status == 0 ? op.rw.len : 0;
	return n;
}

// Node 0 writes to node 1 over one 1 Gbit/s link with 200 us of delay each
// way, so that the window holds several packets once it has grown.
struct Stream {
	Sim sim;
	me_conn *c = nullptr;
	Workload w;

	explicit Stream(uint64_t seed, size_t mem = 16 << 20) : sim(seed), w(sim, seed)
	{
		LinkParams lp;
		lp.gbps = 1;
		lp.delay_ns = 200000;
		setup_pair(sim, 1, lp, module_cfg(1, kMtu), module_cfg(2, kMtu), mem);
		c = sim.connect(0, 1, ME_MODE_UNORDERED);
	}

	// Keeps 16 writes of 64 KiB posted for 20 ms: the window grows.
	void grow()
	{
		for (int i = 0; i < 40; i++) {
			while (w.pending() < 16)
				ASSERT_EQ(w.submit(c, 0, Op::WRITE, 64 * 1024), 0);
			sim.run_for(500000);
		}
	}
};

// A stream over a link that loses packets at random, not in a queue:
// node 0 writes 64 KiB messages (8 posted) to node 1 over one 1 Gbit/s
// link, 300 us each way, 1500-byte MTU and the module's defaults (its
// 64 KiB link window is below this path's bandwidth-delay product, so
// the window, not a queue, limits the stream and the delay stays near
// the base).  jitter_ns: every frame from node 1 waits 0-jitter_ns more,
// as the replies of a host whose threads wait for a CPU.
struct LossyStream {
	Sim sim;
	me_conn *c = nullptr;
	Workload w;

	LossyStream(uint64_t seed, bool cc, double loss, uint64_t jitter_ns) : sim(seed), w(sim, seed)
	{
		me_node_cfg a = default_cfg(1), b = default_cfg(2);
		a.mtu = b.mtu = 1500;
		a.cc = b.cc = cc;
		sim.add_node(a);
		sim.add_node(b);
		LinkParams to, from;
		to.gbps = from.gbps = 1;
		to.delay_ns = from.delay_ns = 300000;
		to.loss = from.loss = loss;
		from.reorder = jitter_ns ? 1.0 : 0;
		from.reorder_ns = jitter_ns;
		sim.add_link(0, 1, to, from);
		sim.add_region(0, kSrc, 1 << 20, kKey, ME_ACC_READ);
		fill_pattern(sim.nodes[0]->regions[kSrc], kSrc, 1000);
		sim.add_region(1, kDst, 48 << 20, kKey, ME_ACC_WRITE);
		c = sim.connect(0, 1, ME_MODE_UNORDERED);
		sim.run_for(1000000000);	// keepalives learn the path's noise
	}

	// Tops the writes posted up to 8.
	void post()
	{
		while (w.pending() < 8 && w.submit(c, 0, Op::WRITE, 64 * 1024) == 0) {
		}
	}

	uint64_t done_bytes() const { return completed_bytes(w); }

	// Keeps 8 writes posted for `ns`; returns the MB/s that completed.
	double stream(uint64_t ns)
	{
		const uint64_t done0 = done_bytes(), end = sim.now + ns;
		while (sim.now < end) {
			post();
			sim.run_for(200000);
		}
		return (double)(done_bytes() - done0) * 1e3 / (double)ns;
	}
};

}  // namespace

// A link that loses 1% of the packets at random costs a stream little:
// the losses come while the delay is near the base and one at a time,
// so each takes a fifth off the window (TCP Veno), not half, and the
// window grows back fast.  Halving for each of them kept 0.35x of the
// same stream without congestion control, and 0.29x where the replies
// jitter by up to 1 ms.  Ten seeds each.  With jitter, while the
// path's noise was read low (Cc.noise__*), half of them fell to
// 0.32-0.55x (a target inside the acks' spread; random losses at a high
// delay taken for a queue's).  Without, seeds 71 and 78 fell to 0.55x
// while one queue's loss stopped the doubling: a random loss struck
// while slow start's burst queued 180 us in the sender's link, was
// taken for a queue's, and growth by one MTU per round trip held the
// window near 30 KB (benchmarks.md, "forty-fourth").
TEST(Cc, random_loss__costs_a_fifth_not_half)
{
	std::vector<std::pair<uint64_t, uint64_t>> cases;	// jitter, seed
	for (uint64_t jitter : {0ull, 1000000ull})
		for (uint64_t seed = 70; seed < 80; seed++)
			cases.push_back({jitter, seed});
	for (const auto &[jitter, seed] : cases) {
		SCOPED_TRACE("seed " + std::to_string(seed));
		double mbs[2];
		uint64_t lost = 0, queue = 0, random = 0;
		for (int cc = 0; cc < 2; cc++) {
			LossyStream S(seed, cc, 0.01, jitter);
			ASSERT_NE(S.c, nullptr);
			mbs[cc] = S.stream(300000000);
			me_node *n = S.sim.nodes[0]->node;
			if (cc) {
				lost = me_node_stat(n, ME_ST_TX_RTX_LOSS);
				queue = me_node_stat(n, ME_ST_CC_LOSS_QUEUE);
				random = me_node_stat(n, ME_ST_CC_LOSS_RANDOM);
			}
			ASSERT_TRUE(S.sim.run([&] { return S.w.all_done(); }, S.sim.now + 2000000000));
			EXPECT_EQ(S.w.bad, 0);
		}
		printf("seed %llu, 1%% loss, replies jittered by up to %llu us: %.1f MB/s with "
		       "congestion control (%llu packets found lost: %llu taken for a queue's, %llu "
		       "random), %.1f MB/s without (%.2fx)\n", (unsigned long long)seed,
		       (unsigned long long)jitter / 1000, mbs[1], (unsigned long long)lost,
		       (unsigned long long)queue, (unsigned long long)random, mbs[0], mbs[1] / mbs[0]);
		EXPECT_GT(lost, 100u) << "too few losses: nothing tested";
		EXPECT_EQ(queue + random, lost);
		EXPECT_GT(random, 4 * queue);
		EXPECT_GE(mbs[1], 0.7 * mbs[0]);
	}
}

// The noise a path learns from its idle keepalive exchanges (cc.c) is
// the mean excess over the base of what one answer meets.  Here every
// frame from node 1 waits 0-1 ms more, uniformly: 500 us.  With the
// core's keepalive period (500 us) the two ends' keepalives cross, and
// it was read as 212-283 us over ten seeds: the peer echoed our stamp in
// each keepalive until ours, so of several answers the first to arrive,
// the least delayed, was taken; and an answer slower than our next two
// keepalives found its stamp gone.  The target (base + 3 noise) fell
// inside the data's 0.6-1.6 ms spread of delays.
TEST(Cc, noise__is_the_mean_excess_one_answer_meets)
{
	for (uint64_t seed = 70; seed < 80; seed++) {
		LossyStream S(seed, true, 0, 1000000);
		ASSERT_NE(S.c, nullptr);
		const me_path_info_core pa = path_of(S.sim, 0, 0);
		printf("seed %llu: base %u us, noise %u us, target %u us\n",
		       (unsigned long long)seed, pa.base_us, pa.noise_us, pa.target_us);
		EXPECT_NEAR(pa.base_us, 600, 10) << "seed " << seed;
		EXPECT_NEAR(pa.noise_us, 500, 100) << "seed " << seed;
	}
}

// The two guests' emulated link (benchmarks.md, "where the resent frames
// are lost"): the receiving QEMU's socket buffer holds ~200 KB and the
// QEMU, sharing the host's cores, stops draining it for milliseconds at a
// time.  Modelled as a switch port of 300 Mbit/s with a 150 KiB queue
// that stalls for 0-4 ms after every 0-10 ms of work; node 0 streams
// 64 KiB writes into it.
struct StallingPort {
	Sim sim;
	Workload w;
	int sw = -1, port = -1;
	me_conn *c = nullptr;

	explicit StallingPort(uint64_t seed, uint64_t queue = 150 * 1024) : sim(seed), w(sim, seed)
	{
		me_node_cfg a = module_cfg(1), b = module_cfg(2);
		a.mtu = b.mtu = 1500;
		sim.add_node(a);
		sim.add_node(b);
		sw = sim.add_switch(queue);
		LinkParams fast, slow;
		fast.gbps = 1;
		fast.delay_ns = 50000;
		slow.gbps = 0.3;
		slow.delay_ns = 50000;
		sim.plug(0, sw, fast, fast);
		port = sim.plug(1, sw, fast, slow);
		sim.ports[port].stall_every = 5000000;
		sim.ports[port].stall_max = 4000000;
		sim.add_region(0, kSrc, 1 << 20, kKey, ME_ACC_READ);
		fill_pattern(sim.nodes[0]->regions[kSrc], kSrc, 1000);
		sim.add_region(1, kDst, 128 << 20, kKey, ME_ACC_WRITE);
		c = sim.connect(0, 1, ME_MODE_UNORDERED);
		sim.run_for(1000000000);	// keepalives learn the path's noise
	}

	// Eight 64 KiB writes in flight for secs simulated seconds; the
	// writes start over at the region's start once it is full and
	// nothing is in flight.
	void stream(uint64_t secs)
	{
		const uint64_t end = sim.now + secs * 1000000000ull;
		while (sim.now < end) {
			int r = 0;
			while (w.pending() < 8 && (r = w.submit(c, 0, Op::WRITE, 64 * 1024)) == 0) {
			}
			if (r == -ENOSPC && !w.pending())
				w.dst_next[1][0] = 0;
			sim.run_for(200000);
		}
	}

	// Resent data packets per data packet sent, percent, over a stream.
	double resent_pct(uint64_t secs, double *mbs)
	{
		me_node *n = sim.nodes[0]->node;
		const uint64_t data0 = me_node_stat(n, ME_ST_TX_DATA);
		const uint64_t rtx0 = me_node_stat(n, ME_ST_TX_RTX_LOSS) +
				      me_node_stat(n, ME_ST_TX_RTX_RTO);
		const uint64_t done0 = completed_bytes(w);
		stream(secs);
		*mbs = (double)(completed_bytes(w) - done0) / ((double)secs * 1e6);
		return 100.0 * (double)(me_node_stat(n, ME_ST_TX_RTX_LOSS) +
					me_node_stat(n, ME_ST_TX_RTX_RTO) - rtx0) /
		       (double)(me_node_stat(n, ME_ST_TX_DATA) - data0);
	}

	void finish()
	{
		ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 2000000000));
		EXPECT_EQ(w.bad, 0);
		for (const auto &[k, op] : w.ops)
			EXPECT_EQ(op.status, 0) << "operation " << k << " failed";
	}
};

// Prints the resent share and what the port dropped.  The path's target
// (its base plus three times its noise, which the stalls make large)
// lies beyond what the queue holds, so losses, not delay, stop the
// window here; when the window could double again 64 round trips after
// a queue's loss, this resent 1.1-1.6% at ~27 MB/s, as the two guests did
// (0.8-2.7%); withheld for 1,024 round trips, 0.22-0.33% at the same
// rate (2026-11-29).  Issue 16's target is 0.5%.
TEST(Cc, stalling_shallow_port__resent_share)
{
	for (uint64_t seed : {1, 2, 3}) {
		StallingPort S(seed);
		ASSERT_NE(S.c, nullptr);
		me_node *n = S.sim.nodes[0]->node;
		const uint64_t data0 = me_node_stat(n, ME_ST_TX_DATA);
		const uint64_t loss0 = me_node_stat(n, ME_ST_TX_RTX_LOSS);
		const uint64_t rto0 = me_node_stat(n, ME_ST_TX_RTX_RTO);
		const uint64_t drops0 = S.sim.ports[S.port].queue_drops;
		const uint64_t done0 = completed_bytes(S.w), secs = 3;
		S.stream(secs);
		const uint64_t data = me_node_stat(n, ME_ST_TX_DATA) - data0;
		const uint64_t loss = me_node_stat(n, ME_ST_TX_RTX_LOSS) - loss0;
		const uint64_t rto = me_node_stat(n, ME_ST_TX_RTX_RTO) - rto0;
		const double mbs = (double)(completed_bytes(S.w) - done0) / (secs * 1e6);
		printf("seed %llu: %.1f MB/s, %llu data packets, resent %llu found lost + %llu timed "
		       "out (%.2f%%), the port dropped %llu\n", (unsigned long long)seed, mbs,
		       (unsigned long long)data, (unsigned long long)loss, (unsigned long long)rto,
		       100.0 * (double)(loss + rto) / (double)data,
		       (unsigned long long)(S.sim.ports[S.port].queue_drops - drops0));
		EXPECT_GT(mbs, 5.0) << "the stream (nearly) stopped";
		EXPECT_LE(100.0 * (double)(loss + rto) / (double)data, 0.5)
			<< "the window overran the queue again and again";
		ASSERT_NO_FATAL_FAILURE(S.finish());
	}
}

// A receiving host that stalls once (an emulated guest's vCPU waiting
// for a host core): node 0 streams two 64 KiB writes at a time to node 1
// over one 1 Gbit/s link, 300 us each way, whose replies wait 0-1 ms more
// (a noisy host: the keepalives' noise sets the path's target, some 2 ms
// above its base), and then node 1 stops for 4 ms.  The packets it held
// come back late by milliseconds and the later ones do not: one stall is
// no queue, and the window, which answers the least delay of the last one
// or two round trips (cc.c), is not cut for it.  Answering each sample,
// it was cut 3-6 times in the 20 ms before the stall (the replies' wait
// alone lifts single samples past the target) and 2-5 times after it.
TEST(Cc, stalling_receiver__one_stall_cuts_nothing)
{
	for (uint64_t seed : {1, 2, 3}) {
		Sim sim(seed);
		Workload w(sim, seed);
		me_node_cfg a = module_cfg(1, 1500), b = module_cfg(2, 1500);
		sim.add_node(a);
		sim.add_node(b);
		LinkParams to, from;
		to.gbps = from.gbps = 1;
		to.delay_ns = from.delay_ns = 300000;
		from.reorder = 1.0;
		from.reorder_ns = 1000000;
		sim.add_link(0, 1, to, from);
		sim.add_region(0, kSrc, 1 << 20, kKey, ME_ACC_READ);
		fill_pattern(sim.nodes[0]->regions[kSrc], kSrc, 1000);
		sim.add_region(1, kDst, 64 << 20, kKey, ME_ACC_WRITE);
		me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED);
		ASSERT_NE(c, nullptr);
		sim.run_for(1000000000);	// keepalives learn the path's noise
		auto run = [&](uint64_t ns) {
			const uint64_t end = sim.now + ns;
			while (sim.now < end) {
				int r = 0;
				while (w.pending() < 2 &&
				       (r = w.submit(c, 0, Op::WRITE, 64 * 1024)) == 0) {
				}
				if (r == -ENOSPC && !w.pending())
					w.dst_next[1][0] = 0;
				sim.run_for(100000);
			}
		};
		run(300000000);
		const me_path_info_core pa = path_of(sim, 0, 0);
		const uint64_t cut0 = stat0(sim, ME_ST_CC_CUT_DELAY);
		run(20000000);
		const uint64_t steady = stat0(sim, ME_ST_CC_CUT_DELAY) - cut0;
		const uint32_t before = cwnd_of(sim, 0);
		sim.nodes[1]->frozen_until = sim.now + 4000000;
		run(20000000);
		const uint64_t cuts = stat0(sim, ME_ST_CC_CUT_DELAY) - cut0 - steady;
		printf("seed %llu: base %u us, noise %u us, target %u us; window %u B before the "
		       "stall, %u B after; cut by delay %llu times in 20 ms before it, %llu after\n",
		       (unsigned long long)seed, pa.base_us, pa.noise_us, pa.target_us, before,
		       cwnd_of(sim, 0), (unsigned long long)steady, (unsigned long long)cuts);
		EXPECT_EQ(steady, 0u) << "the delay cut the window without a stall";
		EXPECT_EQ(cuts, 0u) << "one stall's late packets cut the window";
		EXPECT_GE(cwnd_of(sim, 0), before);
		ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 2000000000));
		EXPECT_EQ(w.bad, 0);
	}
}

// One packet lost at random and then a pause of the receiver past the
// RTO: the timeout's probe does not reset the window (only a queue's
// loss makes a timeout congestion), and once the receiver says it got
// the resent packet twice the window is what it was.
TEST(Cc, timeout_after_a_random_loss__no_reset_and_undone)
{
	LossyStream S(77, true, 0, 0);
	ASSERT_NE(S.c, nullptr);
	Sim &sim = S.sim;
	S.stream(20000000);
	const uint32_t mtu = 1500, grown = cwnd_of(sim, 0);
	ASSERT_GE(grown, 16 * mtu) << "the window never grew";

	// The 100th data packet from now is lost; the acks of later ones find it.
	int n = 0;
	bool hold = false;
	sim.drop_hook = [&](const TxEvent &e) {
		if (e.node == 1)
			return hold;
		return e.parsed && e.h.type == ME_PT_WRITE && ++n == 100;
	};
	const uint64_t lost0 = me_node_stat(sim.nodes[0]->node, ME_ST_TX_RTX_LOSS);
	const uint64_t cut0 = stat0(sim, ME_ST_CC_CUT_LOSS);
	ASSERT_TRUE(sim.run([&] {
		S.post();
		return me_node_stat(sim.nodes[0]->node, ME_ST_TX_RTX_LOSS) > lost0;
	}, sim.now + 100000000));
	const uint32_t after_loss = cwnd_of(sim, 0);
	EXPECT_GE(after_loss, grown * 3 / 4) << "a random loss cut more than a fifth";
	EXPECT_EQ(me_node_stat(sim.nodes[0]->node, ME_ST_CC_LOSS_RANDOM), 1u);
	EXPECT_EQ(me_node_stat(sim.nodes[0]->node, ME_ST_CC_LOSS_QUEUE), 0u);
	EXPECT_EQ(stat0(sim, ME_ST_CC_CUT_LOSS), cut0 + 1) << "the loss round's cut not counted";

	hold = true;
	const uint64_t fired0 = rto_fired(sim);
	const uint32_t before = cwnd_of(sim, 0);
	ASSERT_TRUE(sim.run([&] { return rto_fired(sim) > fired0; }, sim.now + 100000000));
	const uint32_t shrunk = cwnd_of(sim, 0);
	// The probe cut nothing (the acks already in flight when they
	// stopped may have grown it since `before`); not one packet.
	EXPECT_GE(shrunk + mtu, before) << "a timeout after a random loss cut the window";

	hold = false;
	const uint64_t spurious0 = me_node_stat(sim.nodes[0]->node, ME_ST_RTX_SPURIOUS);
	const uint64_t undo0 = stat0(sim, ME_ST_CC_UNDO), reset0 = stat0(sim, ME_ST_CC_RESET);
	ASSERT_TRUE(sim.run([&] {
		return me_node_stat(sim.nodes[0]->node, ME_ST_RTX_SPURIOUS) > spurious0;
	}, sim.now + 100000000)) << "no ack said a packet came twice";
	const uint32_t undone = cwnd_of(sim, 0);
	EXPECT_EQ(stat0(sim, ME_ST_CC_UNDO), undo0 + 1) << "the undo not counted";
	EXPECT_EQ(stat0(sim, ME_ST_CC_RESET), reset0);
	printf("window %u B grown, %u B after a random loss, %u B before the timeout, %u B after "
	       "it, %u B once the peer said the packet came twice\n", grown, after_loss, before,
	       shrunk, undone);
	EXPECT_GE(undone + mtu, before) << "the random loss blocked the undo";
	sim.drop_hook = nullptr;
	ASSERT_TRUE(sim.run([&] { return S.w.all_done(); }, sim.now + 2000000000));
	EXPECT_EQ(S.w.bad, 0);
}

TEST(Cc, timeouts__probes_cut_nothing_until_three_in_a_row)
{
	const uint32_t mtu = kMtu;
	Stream S(71);
	ASSERT_NE(S.c, nullptr);
	Sim &sim = S.sim;
	Workload &w = S.w;
	ASSERT_NO_FATAL_FAILURE(S.grow());
	const uint32_t grown = cwnd_of(sim, 0);
	ASSERT_GE(grown, 8 * mtu) << "the window never grew";

	// The receiver falls silent (as if its host stalled): the first
	// timeout sends a probe and leaves the window.
	bool hold = true;
	sim.drop_hook = [&](const TxEvent &e) { return hold && e.node == 1; };
	const uint64_t fired0 = rto_fired(sim);
	uint32_t before = cwnd_of(sim, 0);
	ASSERT_TRUE(sim.run([&] { return rto_fired(sim) > fired0; }, sim.now + 100000000));
	uint32_t after = cwnd_of(sim, 0);
	printf("window %u B after growing; %u B before the first timeout, %u B after it\n", grown,
	       before, after);
	EXPECT_GE(after + mtu, before) << "the probe cut the window";

	// Still nothing from the peer: every timeout is another probe, and
	// the third in a row resets the window to one packet.
	const uint64_t reset0 = stat0(sim, ME_ST_CC_RESET);
	ASSERT_TRUE(sim.run([&] { return rto_fired(sim) >= fired0 + 3; }, sim.now + 1000000000));
	EXPECT_EQ(cwnd_of(sim, 0), mtu);
	EXPECT_EQ(stat0(sim, ME_ST_CC_RESET), reset0 + 1) << "the reset not counted";

	// Acks again: everything completes, and the next single timeout
	// does not reset the window it grew back to.
	hold = false;
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 2000000000));
	ASSERT_NO_FATAL_FAILURE(S.grow());
	hold = true;
	const uint64_t fired1 = rto_fired(sim);
	before = cwnd_of(sim, 0);
	ASSERT_GT(before, 2 * mtu);
	ASSERT_TRUE(sim.run([&] { return rto_fired(sim) > fired1; }, sim.now + 100000000));
	after = cwnd_of(sim, 0);
	EXPECT_GE(after + mtu, before);
	EXPECT_GT(after, mtu) << "a first timeout after acks counted as one in a row";
	hold = false;
	sim.drop_hook = nullptr;
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 2000000000));
	w.check();
}

// The data stop arriving while the peer still answers (its keepalives,
// every 0.5 ms here): the probe cuts nothing, the timeout after it that
// the peer answered is a loss and halves the window (no queue lost
// anything lately: not congestion), and the third in a row without an
// ack resets it.
TEST(Cc, timeout_the_peer_answered__halves)
{
	const uint32_t mtu = kMtu;
	Sim sim(73);
	me_node_cfg a = module_cfg(1, kMtu), b = module_cfg(2, kMtu);
	a.ka_ns = b.ka_ns = 500000;
	LinkParams lp;
	lp.gbps = 1;
	lp.delay_ns = 200000;
	setup_pair(sim, 1, lp, a, b, 16 << 20);
	me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED);
	ASSERT_NE(c, nullptr);
	Workload w(sim, 73);
	for (int i = 0; i < 40; i++) {
		while (w.pending() < 16)
			ASSERT_EQ(w.submit(c, 0, Op::WRITE, 64 * 1024), 0);
		sim.run_for(500000);
	}
	const uint32_t before = cwnd_of(sim, 0);
	ASSERT_GE(before, 8 * mtu) << "the window never grew";

	bool hold = true;
	sim.drop_hook = [&](const TxEvent &e) {
		return hold && e.node == 0 && e.parsed && e.h.type == ME_PT_WRITE;
	};
	const uint64_t fired0 = rto_fired(sim), halved0 = stat0(sim, ME_ST_CC_CUT_RTO);
	ASSERT_TRUE(sim.run([&] { return rto_fired(sim) > fired0; }, sim.now + 100000000));
	const uint32_t probed = cwnd_of(sim, 0);
	EXPECT_EQ(stat0(sim, ME_ST_CC_CUT_RTO), halved0) << "the probe counted as a cut";
	ASSERT_TRUE(sim.run([&] { return rto_fired(sim) > fired0 + 1; }, sim.now + 100000000));
	const uint32_t second = cwnd_of(sim, 0);
	EXPECT_EQ(stat0(sim, ME_ST_CC_CUT_RTO), halved0 + 1) << "the halving not counted";
	printf("window %u B before, %u B after the probe, %u B after the timeout after it\n",
	       before, probed, second);
	EXPECT_GE(probed + mtu, before) << "the probe cut the window";
	EXPECT_GE(second + mtu, probed / 2);
	EXPECT_LE(second, probed / 2 + mtu) << "the answered timeout did not halve the window";
	hold = false;
	sim.drop_hook = nullptr;
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 2000000000));
	w.check();
}

// A timeout whose packet had arrived (only its ack was late or lost) is
// no congestion: the probe cuts nothing, the receiver gets the packet
// twice and says so in its next ack (ME_F_DUP), and the sender gives
// back what the late acks took (their delay includes the pause).
TEST(Cc, needless_retransmission__leaves_the_window)
{
	const uint32_t mtu = kMtu;
	Stream S(72);
	ASSERT_NE(S.c, nullptr);
	Sim &sim = S.sim;
	ASSERT_NO_FATAL_FAILURE(S.grow());

	bool hold = true;
	sim.drop_hook = [&](const TxEvent &e) { return hold && e.node == 1; };
	const uint64_t fired0 = rto_fired(sim);
	const uint32_t before = cwnd_of(sim, 0);
	ASSERT_GE(before, 8 * mtu) << "the window never grew";
	ASSERT_TRUE(sim.run([&] { return rto_fired(sim) > fired0; }, sim.now + 100000000));
	const uint32_t probed = cwnd_of(sim, 0);
	EXPECT_GE(probed + mtu, before) << "the probe cut the window";

	// The acks flow again: the resent packet is a duplicate at node 1.
	hold = false;
	sim.drop_hook = nullptr;
	const uint64_t spurious0 = me_node_stat(sim.nodes[0]->node, ME_ST_RTX_SPURIOUS);
	ASSERT_TRUE(sim.run([&] {
		return me_node_stat(sim.nodes[0]->node, ME_ST_RTX_SPURIOUS) > spurious0;
	}, sim.now + 100000000)) << "no ack said a packet came twice";
	EXPECT_GT(me_node_stat(sim.nodes[1]->node, ME_ST_RX_DUP), 0u);
	const uint32_t after = cwnd_of(sim, 0);
	printf("window %u B before the timeout, %u B after its probe, %u B once the peer said the "
	       "packet came twice\n", before, probed, after);
	EXPECT_GE(after + mtu, probed);
	ASSERT_TRUE(sim.run([&] { return S.w.all_done(); }, sim.now + 2000000000));
	S.w.check();
}

// A timeout on a path that has just lost packets (found by the acks of
// later ones: a queue overflowed) is congestion: the window goes to one
// packet at once.
TEST(Cc, timeout_after_losses__resets_the_window)
{
	const uint32_t mtu = kMtu;
	Stream S(72);
	ASSERT_NE(S.c, nullptr);
	Sim &sim = S.sim;
	Workload &w = S.w;
	ASSERT_NO_FATAL_FAILURE(S.grow());
	ASSERT_GE(cwnd_of(sim, 0), 8 * mtu) << "the window never grew";

	// Every fourth data packet is lost until the acks found losses taken
	// for a queue's; then the acks stop.  Not the first loss found: how
	// many holes the first ack shows, and so whether it shows a burst,
	// depends on when the receiver sent it (4 of seeds 70-81 failed
	// that way).  A round losing a quarter of a window of 8 packets or
	// more shows one.
	const uint64_t queue0 = stat0(sim, ME_ST_CC_LOSS_QUEUE);
	int n = 0;
	bool hold = false;
	sim.drop_hook = [&](const TxEvent &e) {
		if (e.node == 1)
			return hold;
		return e.parsed && e.h.type == ME_PT_WRITE && ++n % 4 == 0;
	};
	EXPECT_TRUE(sim.run([&] { return stat0(sim, ME_ST_CC_LOSS_QUEUE) > queue0; },
			    sim.now + 100000000))
		<< "a quarter of the packets lost was not taken for a queue's";
	// Each taken for a queue's by one rule, or before a delay was measured.
	EXPECT_LE(stat0(sim, ME_ST_CC_QUEUE_DELAY) + stat0(sim, ME_ST_CC_QUEUE_BURST) +
		  stat0(sim, ME_ST_CC_QUEUE_FULL), stat0(sim, ME_ST_CC_LOSS_QUEUE));
	EXPECT_GT(stat0(sim, ME_ST_CC_QUEUE_DELAY) + stat0(sim, ME_ST_CC_QUEUE_BURST) +
		  stat0(sim, ME_ST_CC_QUEUE_FULL), 0u) << "no rule named";
	hold = true;
	const uint64_t fired0 = rto_fired(sim), reset0 = stat0(sim, ME_ST_CC_RESET);
	ASSERT_TRUE(sim.run([&] { return rto_fired(sim) > fired0; }, sim.now + 100000000));
	EXPECT_EQ(cwnd_of(sim, 0), mtu);
	EXPECT_EQ(stat0(sim, ME_ST_CC_RESET), reset0 + 1) << "the reset not counted";
	sim.drop_hook = nullptr;
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 2000000000));
	w.check();
}

// Two idle links between two nodes; on the second every frame from node 1
// waits 0-2 ms more (uniform), as replies from a host whose threads wait
// for a CPU.  Node 0's target for that path rises above the noise its
// keepalive exchanges show; the quiet link keeps the configured target.
TEST(Cc, noisy_path__target_above_its_noise)
{
	Sim sim(74);
	me_node_cfg a = module_cfg(1, kMtu), b = module_cfg(2, kMtu);
	sim.add_node(a);
	sim.add_node(b);
	LinkParams quiet, noisy;
	noisy.reorder = 1.0;
	noisy.reorder_ns = 2000000;
	sim.add_link(0, 1, quiet);
	sim.add_link(0, 1, quiet, noisy);
	sim.run_for(3000000000ull);	// some 150 exchanges per path

	const me_path_info_core q = path_of(sim, 0, 0), n = path_of(sim, 0, 1);
	printf("quiet path: base %u us, noise %u us, target %u us; noisy path: base %u us, "
	       "noise %u us, target %u us\n", q.base_us, q.noise_us, q.target_us, n.base_us,
	       n.noise_us, n.target_us);
	EXPECT_LE(q.noise_us, 5u);
	EXPECT_EQ(q.target_us, a.cc_target_ns / 1000);
	// Mean excess of uniform 0-2 ms over its least: about 1 ms.
	EXPECT_GE(n.noise_us, 600u);
	EXPECT_LE(n.noise_us, 1400u);
	EXPECT_GE(n.target_us + 3, n.base_us + 3 * n.noise_us);
}

// Eight links between two nodes, every one as noisy as the last test's
// second.  Paths of identical hosts must read nearly the same noise:
// flows meeting at one bottleneck aim at their targets, and a path
// whose estimate came out high takes more than its share (a guest
// incast 4->1 gave one sender 40% of the port).  With a gain of 1/8 the
// eight estimates spread 2.0x from the least to the most (540-1085 us);
// as a long mean 1.16-1.22x over seeds 76-80.
TEST(Cc, identical_noisy_paths__read_the_same_noise)
{
	constexpr uint32_t kLinks = 8;
	Sim sim(76);
	sim.add_node(module_cfg(1, kMtu));
	sim.add_node(module_cfg(2, kMtu));
	LinkParams quiet, noisy;
	noisy.reorder = 1.0;
	noisy.reorder_ns = 2000000;
	for (uint32_t l = 0; l < kLinks; l++)
		sim.add_link(0, 1, quiet, noisy);
	sim.run_for(3000000000ull);

	uint32_t lo = ~0u, hi = 0;
	printf("noise per path (us):");
	for (uint32_t l = 0; l < kLinks; l++) {
		const uint32_t noise = path_of(sim, 0, l).noise_us;
		printf(" %u", noise);
		lo = std::min(lo, noise);
		hi = std::max(hi, noise);
	}
	printf("\n");
	EXPECT_GE(lo, 600u);
	EXPECT_LE(hi, 1400u);
	EXPECT_LE(10 * hi, 13 * lo) << "identical paths' noises differ by more than 30%";
}

// The receiver of a stream probes its path (it hears data, not acks):
// the replies queue behind the data, but that delay is of this traffic,
// not the path's noise, and must not raise the target.
TEST(Cc, queue_of_own_traffic__is_not_noise)
{
	Stream S(75, 32 << 20);
	ASSERT_NE(S.c, nullptr);
	for (int i = 0; i < 6; i++)	// 120 ms: six keepalive periods
		ASSERT_NO_FATAL_FAILURE(S.grow());
	const me_path_info_core rx = path_of(S.sim, 1, 0), tx = path_of(S.sim, 0, 0);
	printf("sender: delay %u us, base %u us, noise %u us; receiver: noise %u us, "
	       "keepalive round trip %u us\n", tx.data_delay_us, tx.base_us, tx.noise_us,
	       rx.noise_us, rx.rtt_us);
	EXPECT_GT(tx.data_delay_us, tx.base_us + 100) << "no queue formed: nothing tested";
	EXPECT_LE(rx.noise_us, 5u);
	EXPECT_LE(tx.noise_us, 5u);
	ASSERT_TRUE(S.sim.run([&] { return S.w.all_done(); }, S.sim.now + 2000000000));
	S.w.check();
}

// A queue three times shallower (48 KiB): the stalls make the path's
// noise, and so its target, large, and most losses come with a delay
// below the rule that calls a loss a queue's.  Taken for random losses
// (a fifth off, the window free to double back), they recurred every
// few round trips: 1.06-1.07% resent.  A path whose target its noise
// sets remembers the window its queue overflowed at (the least since it
// was forgotten, rising a quarter of the way to a larger one); a loss
// round that begins at or above it is a queue's, and from 3/4 of it the
// window creeps: 0.15-0.28% at the same 25 MB/s (2026-11-30).  Once the
// queue deepens and stops losing, the window grows past it.
TEST(Cc, shallow_queue__window_creeps_below_where_it_overflowed)
{
	for (uint64_t seed : {1, 2}) {
		StallingPort S(seed, 48 * 1024);
		ASSERT_NE(S.c, nullptr);
		double mbs;
		const double pct = S.resent_pct(3, &mbs);
		printf("seed %llu: 48 KiB queue: %.1f MB/s, resent %.2f%%, window %u\n",
		       (unsigned long long)seed, mbs, pct, cwnd_of(S.sim, 0));
		EXPECT_GT(mbs, 20.0) << "the window starved the port";
		EXPECT_LE(pct, 0.5) << "the window overran the queue again and again";

		// The port stops stalling and its queue holds 1 MiB.
		S.sim.switches[S.sw].queue_bytes = 1 << 20;
		S.sim.ports[S.port].stall_every = 0;
		S.stream(2);
		const double deep = S.resent_pct(1, &mbs);
		printf("seed %llu: 1 MiB queue, no stalls: %.1f MB/s, resent %.2f%%, window %u\n",
		       (unsigned long long)seed, mbs, deep, cwnd_of(S.sim, 0));
		EXPECT_GT(cwnd_of(S.sim, 0), 96u * 1024) << "the window stayed where the queue was";
		EXPECT_GT(mbs, 0.85 * 37.5) << "the port is not full";
		ASSERT_NO_FATAL_FAILURE(S.finish());
	}
}

// The same memory must not hold back a quiet path that loses packets at
// random behind a switch: its losses come with a queue's delay (the
// port is slower than the sender) and are taken for a queue's, at
// whatever window the random loss struck.  Were the window to creep
// below the least of those, each loss would lower it further: 1% lost
// each way, the stream made 15-17 MB/s instead of 31.  The delay shows
// this path's queue (its target is not its noise's), so no window is
// remembered.
TEST(Cc, lossy_quiet_path_behind_a_switch__window_not_held_back)
{
	for (uint64_t seed : {1, 2}) {
		Sim sim(seed);
		Workload w(sim, seed);
		me_node_cfg a = module_cfg(1), b = module_cfg(2);
		a.mtu = b.mtu = 1500;
		sim.add_node(a);
		sim.add_node(b);
		const int sw = sim.add_switch(64 * 1024);
		LinkParams fast, slow;
		fast.gbps = 1;
		fast.delay_ns = 50000;
		fast.loss = 0.01;
		slow = fast;
		slow.gbps = 0.5;
		sim.plug(0, sw, fast, fast);
		sim.plug(1, sw, fast, slow);
		sim.add_region(0, kSrc, 1 << 20, kKey, ME_ACC_READ);
		fill_pattern(sim.nodes[0]->regions[kSrc], kSrc, 1000);
		sim.add_region(1, kDst, 128 << 20, kKey, ME_ACC_WRITE);
		me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED);
		ASSERT_NE(c, nullptr);
		sim.run_for(1000000000);
		const uint64_t end = sim.now + 2000000000ull, done0 = completed_bytes(w);
		while (sim.now < end) {
			while (w.pending() < 8 && w.submit(c, 0, Op::WRITE, 64 * 1024) == 0) {
			}
			sim.run_for(200000);
		}
		const double mbs = (double)(completed_bytes(w) - done0) / 2e6;
		me_node *n = sim.nodes[0]->node;
		printf("seed %llu: 1%% lost each way: %.1f MB/s, losses taken for a queue's %llu, "
		       "random %llu\n", (unsigned long long)seed, mbs,
		       (unsigned long long)me_node_stat(n, ME_ST_CC_LOSS_QUEUE),
		       (unsigned long long)me_node_stat(n, ME_ST_CC_LOSS_RANDOM));
		EXPECT_GT(mbs, 25.0) << "the window was held below where random losses struck";
		ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 2000000000));
		EXPECT_EQ(w.bad, 0);
	}
}

// A path that sends again after a pause with nothing in flight restarts
// its window as TCP after idle: halved for each of its retransmission
// timeouts the pause lasted (two round trips, rto_min at least: 5 ms
// here), down to the first window, and slow start takes it back to where
// it was within a few round trips (ssthresh keeps 3/4 of it).  A pause
// shorter than that costs nothing.  The pause runs from the ack that
// emptied the path; the window is read as the first packet after it
// leaves, before any ack.
TEST(Cc, pause__window_halved_per_timeout_and_grown_back)
{
	Stream s(83);
	ASSERT_NO_FATAL_FAILURE(s.grow());
	ASSERT_TRUE(s.sim.run([&] { return s.w.all_done(); }, s.sim.now + 100000000));
	const me_node_cfg &cf = s.sim.nodes[0]->cfg;
	const uint32_t init = std::max(cf.cc_init, cf.mtu);
	const uint32_t grown = cwnd_of(s.sim, 0);
	ASSERT_GE(grown, 4 * init) << "the window did not grow";
	ASSERT_LT(2 * path_of(s.sim, 0, 0).data_rtt_us * 1000ull, cf.rto_min_ns)
		<< "the unit of the pause must be rto_min here";

	auto resume_after = [&](uint64_t pause) {
		s.sim.run_for(pause);
		EXPECT_EQ(s.w.submit(s.c, 0, Op::WRITE, 64 * 1024), 0);
		s.sim.run_for(1000);
		return cwnd_of(s.sim, 0);
	};
	const uint64_t idle0 = stat0(s.sim, ME_ST_CC_IDLE);
	// Less than one timeout of pause after the ack that emptied the
	// path: the window stays.
	EXPECT_EQ(resume_after(cf.rto_min_ns / 2), grown);
	EXPECT_EQ(stat0(s.sim, ME_ST_CC_IDLE), idle0);
	ASSERT_TRUE(s.sim.run([&] { return s.w.all_done(); }, s.sim.now + 100000000));
	const uint32_t before = cwnd_of(s.sim, 0);
	// Two and a half timeouts after the emptying ack: a quarter.
	EXPECT_EQ(resume_after(cf.rto_min_ns * 5 / 2), std::max(before / 4, init));
	EXPECT_EQ(stat0(s.sim, ME_ST_CC_IDLE), idle0 + 1);
	ASSERT_TRUE(s.sim.run([&] { return s.w.all_done(); }, s.sim.now + 100000000));
	// A second: down to the first window.
	EXPECT_EQ(resume_after(1000000000), init);
	EXPECT_EQ(stat0(s.sim, ME_ST_CC_IDLE), idle0 + 2);
	// The path is as it was: slow start finds the window again.
	ASSERT_NO_FATAL_FAILURE(s.grow());
	printf("window %u grown, %u after 2.5 timeouts' pause, %u after a second's "
	       "and 20 ms of stream\n", grown, std::max(before / 4, init), cwnd_of(s.sim, 0));
	EXPECT_GE(cwnd_of(s.sim, 0), grown / 2);
}
