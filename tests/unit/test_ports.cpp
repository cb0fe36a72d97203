// SPDX-License-Identifier: GPL-2.0
// Ports (wire 5): a CONNECT names the endpoint it opens; the peer accepts
// it only if its host says the port is open, else refuses it at once with
// an ABORT that carries the CONNECT's cookie, so the opener fails with
// ECONNREFUSED instead of timing out, and nobody who did not see the
// CONNECT can refuse it.
#include "harness.hpp"

using namespace mesim;

namespace {

int32_t dead_status(const Node &n, uint32_t conn)
{
	for (auto &q : n.cqes)
		if (q.conn == conn && q.type == ME_CQE_CONN_DEAD)
			return q.status;
	return 0;
}

// A refusal from node 2 (incarnation 80) of node 1's (70) connect `conn`.
me_hdr refusal(uint32_t conn, uint64_t cookie, uint32_t status = ECONNREFUSED)
{
	me_hdr h{};
	h.version = ME_WIRE_VERSION;
	h.type = ME_PT_ABORT;
	h.src_node = 2;
	h.src_inc = 80;
	h.dst_node = 1;
	h.dst_inc = 70;
	h.dst_conn = conn;
	h.cookie = cookie;
	h.x.status = status;
	return h;
}

// The passive connection node b accepted, or nullptr.
me_conn *passive_of(Node &b)
{
	for (uint32_t s = 0; s < me_node_nconns(b.node); s++) {
		me_conn *c = me_node_conn_at(b.node, s);
		if (c && !me_conn_active(c))
			return c;
	}
	return nullptr;
}

}  // namespace

TEST(Ports, open_port__accepted_and_known_on_both_sides)
{
	Sim sim(81);
	setup_pair(sim, 1, LinkParams{}, default_cfg(1, 70), default_cfg(2, 80));
	sim.nodes[1]->open_ports = {40000};
	sim.run_for(5000000);
	me_conn *c = nullptr;
	ASSERT_EQ(me_conn_connect_port(sim.nodes[0]->node, 2, ME_MODE_UNORDERED, 40000, &c), 0);
	ASSERT_TRUE(sim.run([&] { return me_conn_state(c) != ME_CS_CONNECTING; },
			    sim.now + 1000000000ull));
	EXPECT_EQ(me_conn_state(c), ME_CS_ESTABLISHED);
	EXPECT_EQ(me_conn_port(c), 40000u);
	me_conn *p = passive_of(*sim.nodes[1]);
	ASSERT_NE(p, nullptr);
	EXPECT_EQ(me_conn_port(p), 40000u);
	EXPECT_EQ(me_conn_end_status(c), 0);
	// Port 0 still means "any": no port_open asked.
	me_conn *any = nullptr;
	ASSERT_EQ(me_conn_connect(sim.nodes[0]->node, 2, ME_MODE_UNORDERED, &any), 0);
	ASSERT_TRUE(sim.run([&] { return me_conn_state(any) != ME_CS_CONNECTING; },
			    sim.now + 1000000000ull));
	EXPECT_EQ(me_conn_state(any), ME_CS_ESTABLISHED);
	EXPECT_EQ(me_conn_port(any), 0u);
	EXPECT_EQ(me_conn_connect_port(sim.nodes[0]->node, 2, ME_MODE_UNORDERED, 0x10000, &any),
		  -EINVAL);
}

TEST(Ports, closed_port__refused_at_once_without_state)
{
	Sim sim(82);
	setup_pair(sim, 1, LinkParams{}, default_cfg(1, 70), default_cfg(2, 80));
	sim.nodes[1]->open_ports = {40000};
	sim.run_for(5000000);
	uint64_t t0 = sim.now;
	me_conn *c = nullptr;
	ASSERT_EQ(me_conn_connect_port(sim.nodes[0]->node, 2, ME_MODE_ORDERED, 40001, &c), 0);
	uint32_t id = me_conn_id(c);
	ASSERT_TRUE(sim.run([&] { return me_conn_state(c) != ME_CS_CONNECTING; },
			    sim.now + 1000000000ull));
	EXPECT_EQ(me_conn_state(c), ME_CS_DEAD);
	EXPECT_EQ(me_conn_end_status(c), -ECONNREFUSED);
	EXPECT_EQ(dead_status(*sim.nodes[0], id), -ECONNREFUSED);
	// One round trip, not the connect timeout.
	EXPECT_LT(sim.now - t0, sim.nodes[0]->cfg.connect_rto_ns);
	EXPECT_EQ(passive_of(*sim.nodes[1]), nullptr);
	EXPECT_EQ(me_node_stat(sim.nodes[1]->node, ME_ST_CONN_REFUSED), 1u);
}

// A peer that holds max_passive connections from a node refuses the next
// one at once with ENOSPC (it used to let it time out).
TEST(Ports, no_room__refused_with_enospc)
{
	Sim sim(84);
	me_node_cfg b = default_cfg(2, 80);
	b.max_passive = 2;
	setup_pair(sim, 1, LinkParams{}, default_cfg(1, 70), b);
	sim.run_for(5000000);
	me_conn *c[3] = {};
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(me_conn_connect(sim.nodes[0]->node, 2, ME_MODE_UNORDERED, &c[i]), 0);
		ASSERT_TRUE(sim.run([&] { return me_conn_state(c[i]) != ME_CS_CONNECTING; },
				    sim.now + 1000000000ull));
	}
	EXPECT_EQ(me_conn_state(c[0]), ME_CS_ESTABLISHED);
	EXPECT_EQ(me_conn_state(c[1]), ME_CS_ESTABLISHED);
	EXPECT_EQ(me_conn_state(c[2]), ME_CS_DEAD);
	EXPECT_EQ(me_conn_end_status(c[2]), -ENOSPC);
	EXPECT_EQ(me_node_stat(sim.nodes[1]->node, ME_ST_CONN_REFUSED), 1u);
}

// A refusal must carry the cookie the CONNECT offered: a third party's
// guesses leave the connect alone, which then completes normally.
TEST(Ports, forged_refusal__ignored)
{
	Sim sim(83);
	setup_pair(sim, 1, LinkParams{}, default_cfg(1, 70), default_cfg(2, 80));
	sim.nodes[1]->open_ports = {40000};
	sim.run_for(5000000);
	uint64_t offered = 0;
	sim.tx_hook = [&](const TxEvent &e) {
		if (e.node == 0 && e.parsed && e.h.type == ME_PT_CONNECT)
			offered = e.h.c.cookie;
	};
	sim.set_wire_up(0, false);	// the peer does not hear the CONNECT yet
	me_conn *c = nullptr;
	ASSERT_EQ(me_conn_connect_port(sim.nodes[0]->node, 2, ME_MODE_UNORDERED, 40000, &c), 0);
	ASSERT_NE(offered, 0u);
	me_hdr h = refusal(me_conn_id(c), 0);
	std::vector<uint8_t> b(ME_HDR_ABORT);
	for (uint64_t guess : {offered ^ 1, offered + 1, ~offered, uint64_t{1}}) {
		h.cookie = guess;
		b.assign(ME_HDR_ABORT, 0);
		me_wire_build(b.data(), &h);
		sim.deliver(*sim.nodes[0], 0, b);
	}
	sim.run_for(1000000);
	EXPECT_EQ(me_conn_state(c), ME_CS_CONNECTING);
	EXPECT_EQ(me_node_stat(sim.nodes[0]->node, ME_ST_RX_STALE), 4u);
	sim.set_wire_up(0, true);
	ASSERT_TRUE(sim.run([&] { return me_conn_state(c) != ME_CS_CONNECTING; },
			    sim.now + 10000000000ull));
	EXPECT_EQ(me_conn_state(c), ME_CS_ESTABLISHED);
}

// Parsing: a port beyond 16 bits, a refusal with a status other than
// ECONNREFUSED, ENOSPC or EEXIST, or one without a cookie are malformed.
TEST(Ports, wire__port_and_refusal_fields_checked)
{
	me_hdr h{};
	h.version = ME_WIRE_VERSION;
	h.type = ME_PT_CONNECT;
	h.src_node = 1;
	h.src_inc = 70;
	h.dst_node = 2;
	h.src_conn = 5;
	h.c.isn = 1;
	h.c.credit = 64;
	h.c.window = 256;
	h.c.ops = 64;
	h.c.cookie = 9;
	h.c.port = 65535;
	std::vector<uint8_t> b(ME_HDR_MAX);
	me_hdr out{};
	ASSERT_EQ(me_wire_build(b.data(), &h), (uint32_t)ME_HDR_CONN);
	ASSERT_EQ(me_wire_parse(b.data(), ME_HDR_CONN, &out), 0);
	EXPECT_EQ(out.c.port, 65535u);
	b[64] = 1;	// port 0x0100ffff
	EXPECT_EQ(me_wire_parse(b.data(), ME_HDR_CONN, &out), ME_EWIRE_FIELD);
	b[64] = 0;
	b[71] = 1;	// reserved
	EXPECT_EQ(me_wire_parse(b.data(), ME_HDR_CONN, &out), ME_EWIRE_FIELD);

	me_hdr r = refusal(5, 9);
	b.assign(ME_HDR_MAX, 0);
	me_wire_build(b.data(), &r);
	EXPECT_EQ(me_wire_parse(b.data(), ME_HDR_ABORT, &out), 0);
	r.x.status = ENOSPC;
	me_wire_build(b.data(), &r);
	EXPECT_EQ(me_wire_parse(b.data(), ME_HDR_ABORT, &out), 0);
	r.x.status = EEXIST;	// wire 12: a shared connection of the peer's is kept
	me_wire_build(b.data(), &r);
	EXPECT_EQ(me_wire_parse(b.data(), ME_HDR_ABORT, &out), 0);
	r.x.status = ECONNRESET;
	me_wire_build(b.data(), &r);
	EXPECT_EQ(me_wire_parse(b.data(), ME_HDR_ABORT, &out), ME_EWIRE_FIELD);
	r.x.status = ECONNREFUSED;
	r.cookie = 0;
	me_wire_build(b.data(), &r);
	EXPECT_EQ(me_wire_parse(b.data(), ME_HDR_ABORT, &out), ME_EWIRE_FIELD);
}

// Wire 10: a shared connection (the one between two nodes that every
// endpoint of both uses) is opened to no port, is shared on the passive
// side too, carries writes, notifies and reads like any, and hands the
// host each packet's key, which a send on it uses for its ports.
TEST(Ports, shared_connection__to_no_port_both_sides_know_it)
{
	Sim sim(85);
	setup_pair(sim, 1, LinkParams{}, default_cfg(1, 70), default_cfg(2, 80));
	sim.run_for(5000000);
	me_conn *bad = nullptr;
	EXPECT_EQ(me_conn_connect_port(sim.nodes[0]->node, 2, ME_MODE_SHARED, 40000, &bad),
		  -EINVAL);
	EXPECT_EQ(me_conn_connect_port(sim.nodes[0]->node, 2, ME_MODE_SHARED + 1, 0, &bad),
		  -EINVAL);
	me_conn *c = sim.connect(0, 1, ME_MODE_SHARED);
	ASSERT_NE(c, nullptr);
	EXPECT_EQ(me_conn_mode(c), (uint32_t)ME_MODE_SHARED);
	EXPECT_EQ(me_conn_port(c), 0u);
	me_conn *p = passive_of(*sim.nodes[1]);
	ASSERT_NE(p, nullptr);
	EXPECT_EQ(me_conn_mode(p), (uint32_t)ME_MODE_SHARED);
	EXPECT_EQ(me_conn_port(p), 0u);

	Workload w(sim, 85);
	for (int i = 0; i < 8; i++) {
		ASSERT_EQ(w.submit(c, 0, Op::WRITE, 3000), 0);
		ASSERT_EQ(w.submit(c, 0, Op::NOTIFY, 700), 0);
		ASSERT_EQ(w.submit(c, 0, Op::READ, 5000), 0);
		ASSERT_EQ(w.submit(p, 1, Op::WRITE, 2000), 0);
	}
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 1000000000ull));
	w.check();
	// Writes into kDst carried its key to the host; reads' data carry none.
	EXPECT_EQ(sim.nodes[1]->write_keys.count(kKey), 1u);
	EXPECT_EQ(sim.nodes[0]->write_keys.count(0), 1u);
}

// Wire 12: two nodes that open their shared connection to each other at
// once keep one, the one the lower node id opened: the higher's CONNECT is
// refused (EEXIST) at once, and the higher node has the lower's as its
// passive connection, which carries both ways.  Also when the higher's
// CONNECT is lost until the lower's is up (then refused for an established
// one).  A node that has one, from either side, opens no other (-EEXIST).
TEST(Ports, shared_connection__opened_from_both_sides__the_lower_ids_kept)
{
	for (bool later : {false, true}) {
		SCOPED_TRACE(later ? "the higher's CONNECT lost until the lower's is up" : "at once");
		Sim sim(86);
		setup_pair(sim, 1, LinkParams{}, default_cfg(1, 70), default_cfg(2, 80));
		sim.run_for(5000000);
		me_conn *lo = nullptr, *hi = nullptr;
		// The higher's CONNECTs go nowhere until the lower's is up.
		if (later)
			sim.drop_hook = [&](const TxEvent &e) {
				return e.node == 1 && e.parsed && e.h.type == ME_PT_CONNECT &&
				       me_conn_state(lo) != ME_CS_ESTABLISHED;
			};
		ASSERT_EQ(me_conn_connect_port(sim.nodes[0]->node, 2, ME_MODE_SHARED, 0, &lo), 0);
		ASSERT_EQ(me_conn_connect_port(sim.nodes[1]->node, 1, ME_MODE_SHARED, 0, &hi), 0);
		uint32_t hi_id = me_conn_id(hi);
		uint64_t t0 = sim.now;
		ASSERT_TRUE(sim.run([&] {
			return me_conn_state(lo) != ME_CS_CONNECTING &&
			       me_conn_state(hi) != ME_CS_CONNECTING;
		}, sim.now + 1000000000ull));
		EXPECT_EQ(me_conn_state(lo), ME_CS_ESTABLISHED);
		EXPECT_EQ(me_conn_state(hi), ME_CS_DEAD);
		EXPECT_EQ(me_conn_end_status(hi), -EEXIST);
		EXPECT_EQ(dead_status(*sim.nodes[1], hi_id), -EEXIST);
		if (!later) {	// else at its first resend that gets through
			EXPECT_LT(sim.now - t0, sim.nodes[1]->cfg.connect_rto_ns) << "refused at once";
		}
		EXPECT_EQ(passive_of(*sim.nodes[0]), nullptr) << "the lower took the higher's too";
		me_conn *p = passive_of(*sim.nodes[1]);
		ASSERT_NE(p, nullptr);
		EXPECT_EQ(me_conn_state(p), ME_CS_ESTABLISHED);
		EXPECT_EQ(me_conn_mode(p), (uint32_t)ME_MODE_SHARED);
		EXPECT_EQ(me_node_stat(sim.nodes[0]->node, ME_ST_CONN_REFUSED), 1u);

		me_conn *again = nullptr;
		EXPECT_EQ(me_conn_connect_port(sim.nodes[1]->node, 1, ME_MODE_SHARED, 0, &again),
			  -EEXIST) << "the higher opened a second";
		EXPECT_EQ(me_conn_connect_port(sim.nodes[0]->node, 2, ME_MODE_SHARED, 0, &again),
			  -EEXIST) << "the lower opened a second";

		Workload w(sim, 86);
		for (int i = 0; i < 4; i++) {
			ASSERT_EQ(w.submit(lo, 0, Op::WRITE, 3000), 0);
			ASSERT_EQ(w.submit(p, 1, Op::WRITE, 2000), 0);
			ASSERT_EQ(w.submit(p, 1, Op::READ, 4000), 0);
		}
		ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 1000000000ull));
		w.check();
	}
}

// An ordered or unordered CONNECT is never refused for a shared connection
// of this side, and the higher id's shared one is not refused by the lower
// that has none.
TEST(Ports, shared_connection__only_a_shared_connect_to_the_lower_that_has_one_is_refused)
{
	Sim sim(87);
	setup_pair(sim, 1, LinkParams{}, default_cfg(1, 70), default_cfg(2, 80));
	sim.run_for(5000000);
	me_conn *lo = sim.connect(0, 1, ME_MODE_SHARED);
	ASSERT_NE(lo, nullptr);
	me_conn *plain = nullptr;
	ASSERT_EQ(me_conn_connect(sim.nodes[1]->node, 1, ME_MODE_UNORDERED, &plain), 0);
	ASSERT_TRUE(sim.run([&] { return me_conn_state(plain) != ME_CS_CONNECTING; },
			    sim.now + 1000000000ull));
	EXPECT_EQ(me_conn_state(plain), ME_CS_ESTABLISHED);

	Sim sim2(88);
	setup_pair(sim2, 1, LinkParams{}, default_cfg(1, 70), default_cfg(2, 80));
	sim2.run_for(5000000);
	me_conn *hi = sim2.connect(1, 0, ME_MODE_SHARED);
	ASSERT_NE(hi, nullptr) << "node 1 has no shared connection of its own: it accepts";
	EXPECT_EQ(me_conn_state(hi), ME_CS_ESTABLISHED);
}
