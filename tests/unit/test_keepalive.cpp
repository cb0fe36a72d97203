// SPDX-License-Identifier: GPL-2.0
// Keepalives (wire 14): the two ends of a quiet, alive path send each
// other one unanswered beacon per keepalive period, each echoing the
// other's last, and each end still measures the round trip from them;
// probes (answered at once) are for paths not proven both ways.
#include "harness.hpp"

using namespace mesim;

namespace {

struct KaCount {
	uint64_t beacons = 0, probes = 0, replies = 0;
};

// Two nodes with the module's timing over one link of 50 us each way,
// idle for a second: the path is alive.
void settled_pair(Sim &sim)
{
	LinkParams lp;
	lp.delay_ns = 50000;
	sim.add_node(module_cfg(1));
	sim.add_node(module_cfg(2));
	sim.add_link(0, 1, lp);
	sim.run_for(1000000000);
	ASSERT_NE(me_peer_alive_links(sim.nodes[0]->node, 2), 0u);
}

}  // namespace

// Idle for two seconds with the module's timing (keepalives every 20 ms,
// one link of 50 us each way): each node sends about one beacon per
// period, no probe and no reply, where a probe and a reply each way went
// before (four frames per period, not two); both ends' round trips are
// the link's, without the time a beacon waited for the next one.
TEST(Keepalive, idle_path__one_beacon_each_way_per_period)
{
	Sim sim(95);
	ASSERT_NO_FATAL_FAILURE(settled_pair(sim));
	KaCount k[2];
	sim.tx_hook = [&k](const TxEvent &e) {
		if (!e.parsed || e.h.type != ME_PT_KEEPALIVE)
			return;
		KaCount &c = k[e.node];
		if (e.h.flags & ME_F_ASK)
			c.probes++;
		else if (e.h.flags & ME_F_REPLY)
			c.replies++;
		else
			c.beacons++;
	};
	sim.run_for(2000000000);
	sim.tx_hook = nullptr;
	for (int i = 0; i < 2; i++) {
		me_path_info_core pi;
		ASSERT_TRUE(me_node_path_at(sim.nodes[i]->node, 0, 0, &pi));
		printf("node %d in 2 s: %llu beacons, %llu probes, %llu replies; round trip %u us\n",
		       i, (unsigned long long)k[i].beacons, (unsigned long long)k[i].probes,
		       (unsigned long long)k[i].replies, pi.rtt_us);
		EXPECT_GE(k[i].beacons, 70u);
		EXPECT_LE(k[i].beacons, 101u);
		EXPECT_EQ(k[i].probes, 0u);
		EXPECT_EQ(k[i].replies, 0u);
		EXPECT_GE(pi.rtt_us, 100u);
		EXPECT_LE(pi.rtt_us, 110u);
		EXPECT_NE(pi.flags & ME_PATH_ALIVE, 0u);
	}
}

// A path that stops carrying one direction is probed (answered at once)
// and goes dead within link_dead_ns; when the direction comes back, a
// probe's answer brings it up again within a keepalive period or two.
TEST(Keepalive, path_down_is_probed_and_comes_back)
{
	Sim sim(96);
	ASSERT_NO_FATAL_FAILURE(settled_pair(sim));
	uint64_t probes = 0;
	bool cut = true;
	sim.drop_hook = [&cut](const TxEvent &e) { return cut && e.node == 1; };
	sim.tx_hook = [&probes](const TxEvent &e) {
		if (e.parsed && e.node == 0 && e.h.type == ME_PT_KEEPALIVE && (e.h.flags & ME_F_ASK))
			probes++;
	};
	const uint64_t t0 = sim.now;
	ASSERT_TRUE(sim.run([&] { return me_peer_alive_links(sim.nodes[0]->node, 2) == 0; },
			    sim.now + 1000000000));
	const uint64_t down = sim.now - t0;
	EXPECT_LE(down, 160000000u);
	sim.run_for(200000000);
	EXPECT_GE(probes, 5u) << "a path not heard is probed every period";
	cut = false;
	const uint64_t t1 = sim.now;
	ASSERT_TRUE(sim.run([&] { return me_peer_alive_links(sim.nodes[0]->node, 2) != 0; },
			    sim.now + 1000000000));
	printf("down after %llu ms of silence, %llu probes, up %llu ms after it came back\n",
	       (unsigned long long)down / 1000000, (unsigned long long)probes,
	       (unsigned long long)(sim.now - t1) / 1000000);
	EXPECT_LE(sim.now - t1, 50000000u);
	sim.drop_hook = nullptr;
	sim.tx_hook = nullptr;
}
