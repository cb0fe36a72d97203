// SPDX-License-Identifier: GPL-2.0
// A shared connection one side lost (wire 13).  A node opens a shared
// connection only while it holds none with the peer, so a new shared
// CONNECT says its sender lost any the receiver still has up with it
// (its ABORTs lost): the receiver ends that one, if quiet, and takes the
// new one, instead of keeping a connection that reaches nobody.  The
// lower node id refuses a shared CONNECT while its own is up (wire 12:
// the two may have crossed); a higher node refused so, holding no shared
// connection of the lower's, asks again flagged FRESH, and the lower's
// quiet one then gives way.
#include "harness.hpp"

using namespace mesim;

namespace {

constexpr uint64_t kLimit = 2000000000ull;

// Both nodes up on one link: node 0 is id 1 (the lower), node 1 id 2.
void pair(Sim &sim)
{
	setup_pair(sim, 1, LinkParams{}, default_cfg(1, 70), default_cfg(2, 80));
	sim.run_for(5000000);
}

// The live shared connection of node `n` with its peer other than `not_this`.
me_conn *shared_of(Node &n, const me_conn *not_this = nullptr)
{
	for (uint32_t s = 0; s < me_node_nconns(n.node); s++) {
		me_conn *c = me_node_conn_at(n.node, s);
		if (c && c != not_this && me_conn_mode(c) == ME_MODE_SHARED &&
		    me_conn_state(c) == ME_CS_ESTABLISHED)
			return c;
	}
	return nullptr;
}

// Node `n` loses its side of `c` without the peer hearing of it: a write
// of n's is never acknowledged (its packets are lost) until n gives the
// connection up, and every ABORT it then sends is lost too.
void lose_silently(Sim &sim, int n, me_conn *c)
{
	sim.drop_hook = [n](const TxEvent &e) {
		return e.node == n && e.parsed &&
		       (e.h.type == ME_PT_ABORT || me_pt_sequenced(e.h.type));
	};
	{
		Workload w(sim, 93);
		ASSERT_EQ(w.submit(c, n, Op::WRITE, 3000), 0);
		ASSERT_TRUE(sim.run([&] { return me_conn_state(c) == ME_CS_DEAD; },
				    sim.now + 10 * kLimit));
	}
	sim.cqe_hook = nullptr;
	// Past the ABORTs' retries and the quiet time the other side needs.
	sim.run_for(10 * sim.nodes[n]->cfg.connect_rto_ns);
	sim.drop_hook = nullptr;
}

// Opens a shared connection from node `a` and waits for it to settle.
me_conn *open_shared(Sim &sim, int a)
{
	me_conn *c = nullptr;
	uint32_t peer = a == 0 ? 2 : 1;
	if (me_conn_connect_port(sim.nodes[a]->node, peer, ME_MODE_SHARED, 0, &c) != 0)
		return nullptr;
	if (!sim.run([&] { return me_conn_state(c) != ME_CS_CONNECTING; }, sim.now + kLimit))
		return nullptr;
	return c;
}

// Writes and reads both ways over the pair `x` (node 0's) and `y` (node 1's).
void carries_both_ways(Sim &sim, me_conn *x, me_conn *y)
{
	Workload w(sim, 91);
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(w.submit(x, 0, Op::WRITE, 3000), 0);
		ASSERT_EQ(w.submit(y, 1, Op::WRITE, 2000), 0);
		ASSERT_EQ(w.submit(y, 1, Op::READ, 4000), 0);
	}
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + kLimit));
	w.check();
}

// A shared CONNECT flagged FRESH from node id 2 (incarnation 80) to 1 (70).
me_hdr fresh_connect()
{
	me_hdr h{};
	h.version = ME_WIRE_VERSION;
	h.type = ME_PT_CONNECT;
	h.flags = ME_F_FRESH;
	h.src_node = 2;
	h.src_inc = 80;
	h.dst_node = 1;
	h.dst_inc = 70;
	h.src_conn = 77;
	h.c.isn = 1;
	h.c.credit = 64;
	h.c.window = 256;
	h.c.mode = ME_MODE_SHARED;
	h.c.ops = 64;
	h.c.cookie = 12345;
	return h;
}

}  // namespace

// The lower opened it; the higher lost its side.  The higher's new CONNECT
// is refused (the lower's is up), the higher finds none of the lower's
// and asks again flagged FRESH; the lower ends its quiet one and accepts.
TEST(SharedLost, lower_kept_one_the_higher_lost__fresh_connect_replaces_it)
{
	Sim sim(301);
	pair(sim);
	me_conn *lo = open_shared(sim, 0);
	ASSERT_NE(lo, nullptr);
	ASSERT_EQ(me_conn_state(lo), ME_CS_ESTABLISHED);
	me_conn *hi_side = shared_of(*sim.nodes[1]);
	ASSERT_NE(hi_side, nullptr);
	lose_silently(sim, 1, hi_side);
	ASSERT_EQ(me_conn_state(lo), ME_CS_ESTABLISHED) << "the lower heard nothing";

	int fresh = 0, refusals = 0;
	sim.tx_hook = [&](const TxEvent &e) {
		if (e.node == 1 && e.parsed && e.h.type == ME_PT_CONNECT && (e.h.flags & ME_F_FRESH))
			fresh++;
		if (e.node == 0 && e.parsed && e.h.type == ME_PT_ABORT && !e.h.src_conn)
			refusals++;
	};
	me_conn *hi = open_shared(sim, 1);
	ASSERT_NE(hi, nullptr);
	EXPECT_EQ(me_conn_state(hi), ME_CS_ESTABLISHED);
	EXPECT_EQ(refusals, 1) << "refused once, for the lower's own";
	EXPECT_GE(fresh, 1);
	EXPECT_EQ(me_conn_state(lo), ME_CS_DEAD);
	EXPECT_EQ(me_conn_end_status(lo), -ECONNRESET);
	EXPECT_EQ(me_node_stat(sim.nodes[0]->node, ME_ST_SHARED_LOST), 1u);
	me_conn *p = shared_of(*sim.nodes[0]);
	ASSERT_NE(p, nullptr);
	EXPECT_FALSE(me_conn_active(p));
	carries_both_ways(sim, p, hi);
}

// The higher opened it; the higher lost its side and opens another: the
// lower ends the one it accepted before, so its endpoints cannot join it.
// The same the other way round: the lower lost its side of the higher's.
TEST(SharedLost, a_new_shared_connect_ends_the_quiet_one_its_sender_lost)
{
	for (int loser : {1, 0}) {
		SCOPED_TRACE(loser == 1 ? "the higher opened and lost it" :
					  "the higher opened it, the lower lost it");
		Sim sim(302 + loser);
		pair(sim);
		me_conn *hi = open_shared(sim, 1);
		ASSERT_NE(hi, nullptr);
		ASSERT_EQ(me_conn_state(hi), ME_CS_ESTABLISHED);
		me_conn *lo_side = shared_of(*sim.nodes[0]);
		ASSERT_NE(lo_side, nullptr);
		me_conn *lost = loser == 1 ? hi : lo_side;
		me_conn *kept = loser == 1 ? lo_side : hi;
		lose_silently(sim, loser, lost);
		ASSERT_EQ(me_conn_state(kept), ME_CS_ESTABLISHED);

		me_conn *again = open_shared(sim, loser);
		ASSERT_NE(again, nullptr);
		EXPECT_EQ(me_conn_state(again), ME_CS_ESTABLISHED);
		EXPECT_EQ(me_conn_state(kept), ME_CS_DEAD);
		EXPECT_EQ(me_node_stat(sim.nodes[1 - loser]->node, ME_ST_SHARED_LOST), 1u);
		EXPECT_EQ(me_node_stat(sim.nodes[0]->node, ME_ST_CONN_REFUSED) +
				  me_node_stat(sim.nodes[1]->node, ME_ST_CONN_REFUSED),
			  0u);
		me_conn *other = shared_of(*sim.nodes[1 - loser]);
		ASSERT_NE(other, nullptr);
		EXPECT_EQ(shared_of(*sim.nodes[1 - loser], other), nullptr) << "one each side";
		if (loser == 1)
			carries_both_ways(sim, other, again);
		else
			carries_both_ways(sim, again, other);
	}
}

// A shared connection that is heard from is not ended: a CONNECT flagged
// FRESH (forged: the higher holds its side) while writes flow is refused,
// and the connection carries on.
TEST(SharedLost, busy_connection__a_fresh_connect_is_refused)
{
	Sim sim(305);
	pair(sim);
	me_conn *lo = open_shared(sim, 0);
	ASSERT_NE(lo, nullptr);
	me_conn *hi_side = shared_of(*sim.nodes[1]);
	ASSERT_NE(hi_side, nullptr);
	Workload w(sim, 92);
	for (int i = 0; i < 40; i++)
		ASSERT_EQ(w.submit(hi_side, 1, Op::WRITE, 3000), 0);
	sim.run_for(sim.nodes[0]->cfg.connect_rto_ns / 4);

	me_hdr h = fresh_connect();
	std::vector<uint8_t> b(ME_HDR_CONN);
	me_wire_build(b.data(), &h);
	sim.deliver(*sim.nodes[0], 0, Sim::addr(1, 0), b);
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + kLimit));
	w.check();
	EXPECT_EQ(me_conn_state(lo), ME_CS_ESTABLISHED);
	EXPECT_EQ(me_node_stat(sim.nodes[0]->node, ME_ST_SHARED_LOST), 0u);
	EXPECT_EQ(me_node_stat(sim.nodes[0]->node, ME_ST_CONN_REFUSED), 1u);
}

// FRESH only on a shared CONNECT: on an ordered CONNECT, an ACCEPT or any
// other packet it is malformed.
TEST(SharedLost, wire__fresh_only_on_a_shared_connect)
{
	me_hdr h = fresh_connect();
	std::vector<uint8_t> b(ME_HDR_MAX);
	me_hdr out{};
	me_wire_build(b.data(), &h);
	EXPECT_EQ(me_wire_parse(b.data(), ME_HDR_CONN, &out), 0);
	EXPECT_EQ(out.flags, (uint16_t)ME_F_FRESH);
	h.c.mode = ME_MODE_ORDERED;
	me_wire_build(b.data(), &h);
	EXPECT_EQ(me_wire_parse(b.data(), ME_HDR_CONN, &out), ME_EWIRE_FIELD);
	h.c.mode = ME_MODE_SHARED;
	h.flags = ME_F_FRESH | ME_F_ACKREQ;
	me_wire_build(b.data(), &h);
	EXPECT_EQ(me_wire_parse(b.data(), ME_HDR_CONN, &out), ME_EWIRE_FIELD);
	h.flags = ME_F_FRESH;
	h.type = ME_PT_ACCEPT;
	h.dst_conn = 3;
	h.dst_inc = 80;
	h.cookie = 11;
	me_wire_build(b.data(), &h);
	EXPECT_EQ(me_wire_parse(b.data(), ME_HDR_CONN, &out), ME_EWIRE_FIELD);

	me_hdr a{};
	a.version = ME_WIRE_VERSION;
	a.type = ME_PT_ACK;
	a.flags = ME_F_FRESH;
	a.src_node = 1;
	a.src_inc = 70;
	a.dst_node = 2;
	a.dst_inc = 80;
	a.src_conn = 5;
	a.dst_conn = 3;
	a.cookie = 11;
	a.a.cum = 10;
	a.a.right = 10;
	b.assign(ME_HDR_MAX, 0);
	me_wire_build(b.data(), &a);
	EXPECT_EQ(me_wire_parse(b.data(), ME_HDR_ACK, &out), ME_EWIRE_FIELD);
	a.flags = 0;
	me_wire_build(b.data(), &a);
	EXPECT_EQ(me_wire_parse(b.data(), ME_HDR_ACK, &out), 0);
}
