// SPDX-License-Identifier: GPL-2.0
// Connections are reused (issue 13 #3, issue 15): a connection the host
// released, once closed or dead and past linger_ns, leaves the table; its
// slot takes the next generation's id.  A node with max_conns slots opens
// and closes connections forever, frames of an earlier generation reach
// nothing, and a connection the host still holds is never retired.
#include "harness.hpp"

using namespace mesim;

namespace {

// The passive side releases every connection it learns of (CONN_UP): it
// keeps no pointer to them.
// (Install after any Workload: it chains to the hook it finds.)
struct Releasing {
	Sim &sim;
	explicit Releasing(Sim &s) : sim(s)
	{
		auto prev = sim.cqe_hook;
		sim.cqe_hook = [prev](Node &n, const me_cqe &q) {
			if (prev)
				prev(n, q);
			if (q.type == ME_CQE_CONN_UP && n.idx == 1) {
				me_conn *c = me_conn_get(n.node, q.conn);
				if (c)
					me_conn_release(c);
			}
		};
	}
};

me_node_cfg small(uint32_t id)
{
	me_node_cfg c = default_cfg(id);
	c.max_conns = 4;
	c.max_passive = 4;
	c.linger_ns = 5000000;	// 5 ms
	return c;
}

}  // namespace

// 60 connections through 4 slots, each carrying a write that must land
// intact, then closed and released: every one opens (no -ENOSPC), the
// table never holds more than 4, and every id is new (a reused slot's id
// moves on by 4, the power of two >= max_conns).
TEST(Reclaim, open_write_close__forever_in_four_slots)
{
	Sim sim(81);
	setup_pair(sim, 1, LinkParams{}, small(1), small(2));
	Workload w(sim, 81);
	Releasing rel(sim);
	std::set<uint32_t> ids;
	for (int i = 0; i < 60; i++) {
		me_conn *c = sim.connect(0, 1, i % 3 ? ME_MODE_UNORDERED : ME_MODE_ORDERED);
		ASSERT_NE(c, nullptr) << "connection " << i << " could not open";
		uint32_t id = me_conn_id(c);
		EXPECT_TRUE(ids.insert(id).second) << "id " << id << " handed out twice";
		EXPECT_LE(me_node_live_conns(sim.nodes[0]->node), 4u);
		ASSERT_EQ(w.submit(c, 0, Op::WRITE, 20000), 0);
		ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 100000000));
		ASSERT_EQ(me_conn_close(c), 0);
		ASSERT_TRUE(sim.run([&] { return me_conn_state(c) == ME_CS_CLOSED; },
				    sim.now + 100000000));
		me_conn_release(c);	// c must not be used after this
		// Keep one or two slots lingering: the table fills, then drains.
		if (i % 3 == 2)
			sim.run_for(6000000);
	}
	w.check();
	// Let the last ones linger out.
	sim.run_for(20000000);
	EXPECT_EQ(me_node_live_conns(sim.nodes[0]->node), 0u);
	EXPECT_EQ(me_node_live_conns(sim.nodes[1]->node), 0u);
	EXPECT_LE(me_node_nconns(sim.nodes[0]->node), 4u) << "more slots than max_conns";
	EXPECT_EQ(sim.nodes[0]->retired.size(), 60u);
	EXPECT_EQ(sim.nodes[1]->retired.size(), 60u);
	EXPECT_GT(*ids.rbegin(), 4u * 14) << "ids did not move on by generations";
}

// Frames of a retired connection (ids, cookie and sequence numbers all
// right for it) replayed after its slot was reused at both ends: they reach
// nothing (RX_STALE, nothing placed), and the slot's new connection moves
// its data intact.
TEST(Reclaim, frames_of_an_earlier_generation__reach_nothing)
{
	Sim sim(82);
	setup_pair(sim, 1, LinkParams{}, small(1), small(2));
	Workload w(sim, 82);
	Releasing rel(sim);
	me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED);
	ASSERT_NE(c, nullptr);
	std::vector<me_hdr> old;	// node 0's connection frames to node 1
	sim.tx_hook = [&](const TxEvent &e) {
		if (e.node == 0 && e.parsed && e.h.dst_conn)
			old.push_back(e.h);
	};
	ASSERT_EQ(w.submit(c, 0, Op::WRITE, 100000), 0);
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 100000000));
	sim.tx_hook = nullptr;
	ASSERT_GT(old.size(), 3u);
	const uint32_t old_id = old[0].dst_conn;	// node 1's id of it
	ASSERT_EQ(me_conn_close(c), 0);
	ASSERT_TRUE(sim.run([&] { return me_conn_state(c) == ME_CS_CLOSED; }, sim.now + 100000000));
	me_conn_release(c);
	sim.run_for(20000000);
	ASSERT_EQ(me_conn_get(sim.nodes[1]->node, old_id), nullptr) << "not retired";

	uint32_t new_id = 0;
	me_conn *c2 = sim.connect(0, 1, ME_MODE_UNORDERED, &new_id);
	ASSERT_NE(c2, nullptr);
	EXPECT_EQ((new_id - 1) & 3u, (old_id - 1) & 3u) << "the slot was not reused";
	EXPECT_NE(new_id, old_id);
	ASSERT_EQ(w.submit(c2, 0, Op::WRITE, 30000), 0);
	me_node *b = sim.nodes[1]->node;
	const uint64_t stale0 = me_node_stat(b, ME_ST_RX_STALE);
	const size_t places0 = sim.nodes[1]->places.size();
	for (const me_hdr &h0 : old) {
		me_hdr h = h0;
		std::vector<uint8_t> f(ME_HDR_MAX + h.payload_len, 0xab);
		uint32_t n = me_wire_build(f.data(), &h);
		f.resize(n + h.payload_len);
		sim.deliver(*sim.nodes[1], 0, f);
	}
	EXPECT_EQ(me_node_stat(b, ME_ST_RX_STALE) - stale0, old.size());
	for (size_t i = places0; i < sim.nodes[1]->places.size(); i++)
		EXPECT_NE(sim.nodes[1]->places[i].conn, old_id) << "a retired connection placed data";
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 100000000));
	w.check();
	EXPECT_EQ(me_conn_state(c2), ME_CS_ESTABLISHED);
}

// A connection the host has not released is never retired, however long
// it has been closed (the host may still read its state and counters).
TEST(Reclaim, unreleased_connection__stays)
{
	Sim sim(84);
	setup_pair(sim, 1, LinkParams{}, small(1), small(2));
	me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED);
	ASSERT_NE(c, nullptr);
	ASSERT_EQ(me_conn_close(c), 0);
	ASSERT_TRUE(sim.run([&] { return me_conn_state(c) == ME_CS_CLOSED; }, sim.now + 100000000));
	sim.run_for(50000000);	// ten times linger_ns
	EXPECT_EQ(me_conn_get(sim.nodes[0]->node, me_conn_id(c)), c);
	EXPECT_EQ(me_conn_state(c), ME_CS_CLOSED);
	EXPECT_TRUE(sim.nodes[0]->retired.empty());
	EXPECT_TRUE(sim.nodes[1]->retired.empty()) << "nobody released the passive side either";
}

// All slots held: a further connect is refused with -ENOSPC, and works
// again once one is closed, released and has lingered.
TEST(Reclaim, full_table__enospc_until_a_slot_is_retired)
{
	Sim sim(85);
	setup_pair(sim, 1, LinkParams{}, small(1), small(2));
	Releasing rel(sim);
	std::vector<me_conn *> cs;
	for (int i = 0; i < 4; i++) {
		cs.push_back(sim.connect(0, 1, ME_MODE_UNORDERED));
		ASSERT_NE(cs.back(), nullptr);
	}
	me_conn *extra = nullptr;
	EXPECT_EQ(me_conn_connect(sim.nodes[0]->node, 2, ME_MODE_UNORDERED, &extra), -ENOSPC);
	ASSERT_EQ(me_conn_close(cs[2]), 0);
	ASSERT_TRUE(sim.run([&] { return me_conn_state(cs[2]) == ME_CS_CLOSED; },
			    sim.now + 100000000));
	me_conn_release(cs[2]);
	EXPECT_EQ(me_conn_connect(sim.nodes[0]->node, 2, ME_MODE_UNORDERED, &extra), -ENOSPC)
		<< "reused before linger_ns";
	sim.run_for(10000000);
	EXPECT_NE(sim.connect(0, 1, ME_MODE_UNORDERED), nullptr);
}
