// SPDX-License-Identifier: GPL-2.0
// Clusters in the simulator: N nodes on M rails, one switch per rail with
// finite output queues.  Every node reaches every other through every
// rail: the neighbour model (per (link, peer) paths) must discover them
// all, stripe each connection over its paths, send every frame to the
// right address, and move traffic off a path that fails in one direction
// only, without losing a connection.
#include "harness.hpp"

#include <cstdio>

using namespace mesim;

namespace {

constexpr uint32_t kSlot = 64 * 1024;	// per source node in a destination

struct Cluster {
	Sim sim;
	int n;
	std::vector<int> sw;
	// conns[i][j]: node i's connection to node j (i != j).
	std::vector<std::vector<me_conn *>> conns;
	uint64_t next_cookie = 1;
	struct Want {
		int from, to;
		Op::Kind kind;
		uint32_t len;
		uint64_t off;	// in the target region
		int done = 0;
		int32_t status = 1;
	};
	std::map<uint64_t, Want> ops;

	Cluster(uint64_t seed, int nodes, int rails, me_node_cfg (*cfg)(uint32_t),
		const LinkParams &lp = {}, uint64_t queue = 256 * 1024)
		: sim(seed), n(nodes)
	{
		for (int i = 0; i < n; i++) {
			me_node_cfg c = cfg((uint32_t)i + 1);
			sim.add_node(c);
		}
		for (int r = 0; r < rails; r++) {
			sw.push_back(sim.add_switch(queue));
			for (int i = 0; i < n; i++)
				sim.plug(i, sw.back(), lp);
		}
		for (int i = 0; i < n; i++) {
			sim.add_region(i, kSrc, kSlot, kKey, ME_ACC_READ);
			fill_pattern(sim.nodes[i]->regions[kSrc], kSrc, 500 + i);
			sim.add_region(i, kDst, (size_t)kSlot * n, kKey, ME_ACC_WRITE);
			sim.add_region(i, kRd, (size_t)kSlot * n, kKey, ME_ACC_WRITE);
		}
		sim.cqe_hook = [this](Node &nd, const me_cqe &q) {
			if (q.type != ME_CQE_WRITE && q.type != ME_CQE_READ)
				return;
			auto it = ops.find(q.cookie);
			if (it == ops.end() || it->second.from != nd.idx) {
				ADD_FAILURE() << "a completion nobody asked for";
				return;
			}
			it->second.done++;
			it->second.status = q.status;
		};
	}

	// Every node sees every other alive on `links` links.
	bool meshed(int links)
	{
		for (int i = 0; i < n; i++)
			for (int j = 0; j < n; j++)
				if (i != j && __builtin_popcount(me_peer_alive_links(
						      sim.nodes[i]->node, (uint32_t)j + 1)) != links)
					return false;
		return true;
	}

	bool connect_all(uint64_t limit)
	{
		conns.assign(n, std::vector<me_conn *>(n, nullptr));
		for (int i = 0; i < n; i++)
			for (int j = 0; j < n; j++)
				if (i != j && me_conn_connect(sim.nodes[i]->node, (uint32_t)j + 1,
							      ME_MODE_UNORDERED, &conns[i][j]))
					return false;
		return sim.run([&] {
			for (int i = 0; i < n; i++)
				for (int j = 0; j < n; j++)
					if (i != j && me_conn_state(conns[i][j]) != ME_CS_ESTABLISHED)
						return false;
			return true;
		}, sim.now + limit);
	}

	// i writes its source into j's kDst at slot i, or reads j's source
	// into its kRd at slot j.
	int post(int i, int j, Op::Kind kind, uint32_t len)
	{
		me_rw rw{};
		rw.cookie = next_cookie;
		rw.len = len;
		rw.remote_key = kKey;
		Want w{i, j, kind, len, 0};
		if (kind == Op::READ) {
			rw.remote_region = kSrc;
			rw.local_region = kRd;
			rw.local_off = (uint64_t)j * kSlot;
			w.off = rw.local_off;
		} else {
			rw.local_region = kSrc;
			rw.remote_region = kDst;
			rw.remote_off = (uint64_t)i * kSlot;
			rw.imm = (uint32_t)next_cookie;
			w.off = rw.remote_off;
		}
		me_conn *c = conns[i][j];
		int r = kind == Op::READ ? me_conn_read(c, &rw) :
			kind == Op::NOTIFY ? me_conn_notify(c, &rw) : me_conn_write(c, &rw);
		if (!r)
			ops[next_cookie++] = w;
		return r;
	}

	bool all_done() const
	{
		for (auto &[k, w] : ops)
			if (!w.done)
				return false;
		return true;
	}

	// Every op once, successfully, with the source's bytes in place.
	void check()
	{
		for (auto &[k, w] : ops) {
			EXPECT_EQ(w.done, 1) << "cookie " << k;
			EXPECT_EQ(w.status, 0) << "cookie " << k;
			int src = w.kind == Op::READ ? w.to : w.from;
			int tgt = w.kind == Op::READ ? w.from : w.to;
			Region &t = sim.nodes[tgt]->regions[w.kind == Op::READ ? kRd : kDst];
			Region &s = sim.nodes[src]->regions[kSrc];
			EXPECT_EQ(memcmp(t.mem.data() + w.off, s.mem.data(), w.len), 0)
				<< "cookie " << k << ": " << w.from << " -> " << w.to;
		}
		EXPECT_EQ(sim.misaddressed, 0u) << "frames to an address nobody has";
	}

	// Data packets node i sent to node j on link l.
	uint64_t tx_pkts(int i, int j, uint32_t l)
	{
		me_node *nd = sim.nodes[i]->node;
		me_path_info_core pa;
		for (uint32_t s = 0; s < me_node_npeers(nd); s++)
			if (me_node_path_at(nd, s, l, &pa) && pa.node == (uint32_t)j + 1)
				return pa.tx_pkts;
		return 0;
	}

	bool path_alive(int i, int j, uint32_t l)
	{
		return me_peer_alive_links(sim.nodes[i]->node, (uint32_t)j + 1) & (1u << l);
	}
};

me_node_cfg small_cfg(uint32_t id)
{
	me_node_cfg c = default_cfg(id);
	c.max_conns = 32;
	c.max_peers = 32;
	return c;
}

}  // namespace

// 4 nodes, 2 rails: discovery finds every neighbour, all 12 ordered pairs
// write, notify and read at once with every byte checked, and every
// connection stripes over both rails.
TEST(Cluster, four_nodes_two_rails__all_to_all)
{
	Cluster C(71, 4, 2, small_cfg);
	ASSERT_TRUE(C.sim.run([&] { return C.meshed(2); }, 50000000)) << "discovery";
	ASSERT_TRUE(C.connect_all(50000000));
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++) {
			if (i == j)
				continue;
			ASSERT_EQ(C.post(i, j, (i + j) % 2 ? Op::NOTIFY : Op::WRITE, kSlot), 0);
			ASSERT_EQ(C.post(i, j, Op::READ, kSlot / 2), 0);
		}
	ASSERT_TRUE(C.sim.run([&] { return C.all_done(); }, C.sim.now + 500000000));
	C.check();
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 4; j++)
			for (uint32_t l = 0; l < 2 && i != j; l++) {
				EXPECT_GT(C.tx_pkts(i, j, l), 0u) << i << "->" << j << " link " << l;
			}
}

// 16 nodes on one switch over random seeds, with loss: everything
// completes exactly once, nothing goes to a wrong address.
class ClusterSeeds : public ::testing::TestWithParam<int> {};

TEST_P(ClusterSeeds, sixteen_nodes__all_to_all_with_loss)
{
	LinkParams lp;
	lp.loss = 0.002;
	Cluster C(1000 + GetParam(), 16, 1, small_cfg, lp);
	ASSERT_TRUE(C.sim.run([&] { return C.meshed(1); }, 100000000)) << "discovery";
	ASSERT_TRUE(C.connect_all(200000000));
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 16; j++) {
			if (i == j)
				continue;
			ASSERT_EQ(C.post(i, j, (i * 16 + j + GetParam()) % 3 == 0 ? Op::READ :
					       Op::WRITE, 8192 + 512 * ((i + j) % 8)), 0);
		}
	ASSERT_TRUE(C.sim.run([&] { return C.all_done(); }, C.sim.now + 2000000000ull));
	C.check();
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 16; j++) {
			if (i != j) {
				EXPECT_EQ(me_conn_state(C.conns[i][j]), ME_CS_ESTABLISHED);
			}
		}
}

INSTANTIATE_TEST_SUITE_P(Seeds, ClusterSeeds, ::testing::Range(0, 4));

// One node's NIC on rail 0 stops transmitting (it still receives): both
// ends stop using (rail 0, each other) and the transfer between them moves
// to rail 1, no connection dies, and pairs not involving that NIC keep
// rail 0.  The failover time is printed in round trips.
TEST(Cluster, one_way_failure__traffic_moves_connections_live)
{
	auto cfg = [](uint32_t id) {
		me_node_cfg c = small_cfg(id);
		c.ka_ns = 100000;		// 100 us: 5 round trips here
		c.link_dead_ns = 400000;
		c.rto_min_ns = 100000;
		return c;
	};
	Cluster C(72, 3, 2, cfg);
	ASSERT_TRUE(C.sim.run([&] { return C.meshed(2); }, 50000000));
	ASSERT_TRUE(C.connect_all(50000000));
	const int a = 0, b = 1;
	// A steady stream a -> b, and b -> a, b -> c, c -> a beside it.  The
	// mute node finds out from its own stalled data to a: a node whose
	// only frames on the path are acks (wire 4: writes complete by ack)
	// cannot tell that they vanish, nor can its peer, whose data on the
	// path are acked by the acks of the other rail; both then wait
	// link_dead_ns (protocol.md).
	int rounds = 0;
	std::function<void()> feed = [&] {
		if (rounds++ >= 60)
			return;
		C.post(a, b, Op::WRITE, kSlot);
		C.post(b, a, Op::WRITE, kSlot / 16);
		C.post(b, 2, Op::WRITE, kSlot / 4);
		C.post(2, a, Op::READ, kSlot / 4);
		C.sim.at(C.sim.now + 50000, feed);
	};
	feed();
	C.sim.run_for(1000000);
	const uint64_t rtt = 4 * LinkParams{}.delay_ns;	// NIC-switch-NIC, both ways
	const uint64_t t_fail = C.sim.now;
	int port_b0 = -1;
	for (size_t p = 0; p < C.sim.ports.size(); p++)
		if (C.sim.ports[p].node == b && C.sim.ports[p].link == 0)
			port_b0 = (int)p;
	ASSERT_GE(port_b0, 0);
	C.sim.ports[port_b0].tx_ok = false;
	uint64_t t_a = 0, t_b = 0;
	ASSERT_TRUE(C.sim.run([&] {
		if (!t_a && !C.path_alive(a, b, 0))
			t_a = C.sim.now;
		if (!t_b && !C.path_alive(b, a, 0))
			t_b = C.sim.now;
		return t_a && t_b;
	}, t_fail + 50000000)) << "the one-way failure was never noticed";
	printf("one-way failure on rail 0 of node %d: node %d stopped using it after %.1f us "
	       "(%.1f RTTs), node %d after %.1f us (%.1f RTTs)\n",
	       b + 1, a + 1, (t_a - t_fail) / 1e3, double(t_a - t_fail) / rtt, b + 1,
	       (t_b - t_fail) / 1e3, double(t_b - t_fail) / rtt);
	// The mute node finds out from its stalled data; its peer, which still
	// hears it everywhere else, is told by its keepalives, not by a
	// link_dead_ns silence (20 round trips here).
	EXPECT_LT(t_b - t_fail, 10 * rtt);
	EXPECT_LT(t_a - t_fail, 10 * rtt);
	EXPECT_GT(me_node_stat(C.sim.nodes[a]->node, ME_ST_PATH_TOLD_DOWN), 0u);
	uint64_t ab0 = C.tx_pkts(a, b, 0), ab1 = C.tx_pkts(a, b, 1);
	ASSERT_TRUE(C.sim.run([&] { return C.all_done(); }, C.sim.now + 1000000000));
	C.check();
	EXPECT_GT(C.tx_pkts(a, b, 1), ab1) << "the stream moved to rail 1";
	EXPECT_LE(C.tx_pkts(a, b, 0), ab0 + 2) << "rail 0 kept carrying a -> b";
	EXPECT_TRUE(C.path_alive(a, 2, 0)) << "a's rail 0 to the third node is fine";
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++) {
			if (i != j) {
				EXPECT_EQ(me_conn_state(C.conns[i][j]), ME_CS_ESTABLISHED) << i << j;
			}
		}
	// Healed: the path comes back.
	C.sim.ports[port_b0].tx_ok = true;
	EXPECT_TRUE(C.sim.run([&] { return C.path_alive(a, b, 0) && C.path_alive(b, a, 0); },
			      C.sim.now + 10000000));
}

// A peer table smaller than the cluster: a node keeps max_peers peers;
// new ones are dropped (counted), and a node without connections that
// leaves is forgotten, making room.
TEST(Cluster, peer_table__bounded_and_forgets_silent_peers)
{
	auto cfg = [](uint32_t id) {
		me_node_cfg c = small_cfg(id);
		c.max_peers = id == 1 ? 4 : 32;
		c.peer_dead_ns = 20000000;
		return c;
	};
	Cluster C(73, 8, 1, cfg);
	me_node *a = C.sim.nodes[0]->node;
	C.sim.run_for(20000000);
	uint32_t known = 0;
	for (uint32_t s = 0; s < me_node_npeers(a); s++) {
		me_peer_info_core pi;
		known += me_node_peer_at(a, s, &pi);
	}
	EXPECT_EQ(known, 4u);
	EXPECT_GT(me_node_stat(a, ME_ST_PEER_TABLE_FULL), 0u);
	// Node 2 (index 1) is known and goes away: forgotten after
	// peer_dead_ns, and another node takes its slot.
	me_peer_info_core pi;
	int gone = -1;
	for (int j = 1; j < 8 && gone < 0; j++)
		if (me_node_peer(a, (uint32_t)j + 1, &pi))
			gone = j;
	ASSERT_GE(gone, 0);
	C.sim.nodes[gone]->ticking = false;
	for (auto &p : C.sim.ports)
		if (p.node == gone)
			p.tx_ok = false;
	ASSERT_TRUE(C.sim.run([&] { return !me_node_peer(a, (uint32_t)gone + 1, &pi); },
			      C.sim.now + 200000000));
	EXPECT_GE(me_node_stat(a, ME_ST_PEER_FORGOTTEN), 1u);
	EXPECT_TRUE(C.sim.run([&] {
		uint32_t k = 0;
		for (uint32_t s = 0; s < me_node_npeers(a); s++)
			k += me_node_peer_at(a, s, &pi);
		return k == 4;
	}, C.sim.now + 50000000)) << "another node took the slot";
}

// Sixteen idle nodes on one switch with the module's timing: each node's
// timer passes for its fifteen paths' keepalives, which share passes (no
// pass sooner than a quarter keepalive after the last walk): at most
// about 200 passes a second however many paths, and every path stays
// alive on the beacons those passes send.
TEST(Cluster, sixteen_idle_nodes__timer_passes_shared_by_the_paths)
{
	Cluster C(74, 16, 1, [](uint32_t id) { return module_cfg(id); });
	ASSERT_TRUE(C.sim.run([&] { return C.meshed(1); }, 1000000000)) << "discovery";
	C.sim.run_for(200000000);
	std::vector<uint64_t> p0;
	for (int i = 0; i < 16; i++)
		p0.push_back(C.sim.nodes[i]->timer_passes);
	C.sim.run_for(1000000000);
	uint64_t least = ~0ull, most = 0;
	for (int i = 0; i < 16; i++) {
		const uint64_t p = C.sim.nodes[i]->timer_passes - p0[i];
		least = std::min(least, p);
		most = std::max(most, p);
	}
	printf("16 idle nodes, 1 s: %llu-%llu timer passes per node\n",
	       (unsigned long long)least, (unsigned long long)most);
	EXPECT_GE(least, 50u);
	EXPECT_LE(most, 210u);
	EXPECT_TRUE(C.meshed(1)) << "a path went down";
}
