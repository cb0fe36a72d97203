// SPDX-License-Identifier: GPL-2.0
// Congestion control's answer to retransmission timeouts (cc.c): a pause
// of the receiver longer than the RTO makes every packet in flight time
// out at once; that costs half the window, not all of it, and only
// timeouts in a row with no ack between them (an outage), or a timeout
// soon after losses (congestion), reset the window to one packet; a
// timeout the receiver proves needless (it got the packet twice) is
// undone.
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

size_t in_flight(const Workload &w)
{
	size_t n = 0;
	for (const auto &[cookie, op] : w.ops)
		n += op.completions == 0;
	return n;
}

uint64_t rto_fired(Sim &sim)
{
	return me_node_stat(sim.nodes[0]->node, ME_ST_RTO_FIRED);
}

constexpr uint32_t kMtu = 9000;

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
			while (in_flight(w) < 16)
				ASSERT_EQ(w.submit(c, 0, Op::WRITE, 64 * 1024), 0);
			sim.run_for(500000);
		}
	}
};

}  // namespace

TEST(Cc, timeouts__halve_the_window_until_three_in_a_row)
{
	const uint32_t mtu = kMtu;
	Stream S(71);
	ASSERT_NE(S.c, nullptr);
	Sim &sim = S.sim;
	Workload &w = S.w;
	ASSERT_NO_FATAL_FAILURE(S.grow());
	const uint32_t grown = cwnd_of(sim, 0);
	ASSERT_GE(grown, 8 * mtu) << "the window never grew";

	// The receiver's acks stop (as if its receive thread stalled): the
	// first timeout halves the window.
	bool hold = true;
	sim.drop_hook = [&](const TxEvent &e) { return hold && e.node == 1; };
	const uint64_t fired0 = rto_fired(sim);
	uint32_t before = cwnd_of(sim, 0);
	ASSERT_TRUE(sim.run([&] { return rto_fired(sim) > fired0; }, sim.now + 100000000));
	uint32_t after = cwnd_of(sim, 0);
	printf("window %u B after growing; %u B before the first timeout, %u B after it\n", grown,
	       before, after);
	EXPECT_GE(after, before / 2 - mtu);
	EXPECT_LE(after, before / 2 + mtu);

	// Still no ack: the third timeout in a row resets it to one packet.
	ASSERT_TRUE(sim.run([&] { return rto_fired(sim) >= fired0 + 3; }, sim.now + 1000000000));
	EXPECT_EQ(cwnd_of(sim, 0), mtu);

	// Acks again: everything completes, and the next single timeout
	// halves the window it grew back to, it does not reset it.
	hold = false;
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 2000000000));
	ASSERT_NO_FATAL_FAILURE(S.grow());
	hold = true;
	const uint64_t fired1 = rto_fired(sim);
	before = cwnd_of(sim, 0);
	ASSERT_GT(before, 2 * mtu);
	ASSERT_TRUE(sim.run([&] { return rto_fired(sim) > fired1; }, sim.now + 100000000));
	after = cwnd_of(sim, 0);
	EXPECT_GE(after, before / 2 - mtu);
	EXPECT_GT(after, mtu) << "a first timeout after acks counted as one in a row";
	hold = false;
	sim.drop_hook = nullptr;
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 2000000000));
	w.check();
}

// A timeout whose packet had arrived (only its ack was late or lost) is
// no congestion: the receiver gets the packet twice, says so in its next
// ack (ME_F_DUP), and the sender gets back the window the timeout took.
TEST(Cc, needless_retransmission__gives_the_window_back)
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
	const uint32_t shrunk = cwnd_of(sim, 0);
	EXPECT_LE(shrunk, before / 2 + mtu);

	// The acks flow again: the resent packets are duplicates at node 1.
	hold = false;
	sim.drop_hook = nullptr;
	const uint64_t spurious0 = me_node_stat(sim.nodes[0]->node, ME_ST_RTX_SPURIOUS);
	ASSERT_TRUE(sim.run([&] {
		return me_node_stat(sim.nodes[0]->node, ME_ST_RTX_SPURIOUS) > spurious0;
	}, sim.now + 100000000)) << "no ack said a packet came twice";
	EXPECT_GT(me_node_stat(sim.nodes[1]->node, ME_ST_RX_DUP), 0u);
	const uint32_t after = cwnd_of(sim, 0);
	printf("window %u B before the timeout, %u B after it, %u B once the peer said the "
	       "packet came twice\n", before, shrunk, after);
	// What the timeout halved (the window then, a little under `before`:
	// the acks in flight when they stopped had moved it).
	EXPECT_GE(after + mtu, 2 * shrunk);
	ASSERT_TRUE(sim.run([&] { return S.w.all_done(); }, sim.now + 2000000000));
	S.w.check();
}

// A timeout on a path that has just lost packets (found by the acks of
// later ones: a queue overflowed) is congestion: the window goes to one
// packet at once.
TEST(Cc, timeout_after_losses__resets_the_window)
{
	const uint32_t mtu = kMtu;
	Stream S(73);
	ASSERT_NE(S.c, nullptr);
	Sim &sim = S.sim;
	Workload &w = S.w;
	ASSERT_NO_FATAL_FAILURE(S.grow());
	ASSERT_GE(cwnd_of(sim, 0), 8 * mtu) << "the window never grew";

	// Every fourth data packet is lost until the acks found a loss; then
	// the acks stop.
	const uint64_t lost0 = me_node_stat(sim.nodes[0]->node, ME_ST_TX_RTX_LOSS);
	int n = 0;
	bool hold = false;
	sim.drop_hook = [&](const TxEvent &e) {
		if (e.node == 1)
			return hold;
		return e.parsed && e.h.type == ME_PT_WRITE && ++n % 4 == 0;
	};
	ASSERT_TRUE(sim.run([&] {
		return me_node_stat(sim.nodes[0]->node, ME_ST_TX_RTX_LOSS) > lost0;
	}, sim.now + 100000000));
	hold = true;
	const uint64_t fired0 = rto_fired(sim);
	ASSERT_TRUE(sim.run([&] { return rto_fired(sim) > fired0; }, sim.now + 100000000));
	EXPECT_EQ(cwnd_of(sim, 0), mtu);
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
