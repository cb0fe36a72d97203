// SPDX-License-Identifier: GPL-2.0
// Frames from a third party on the wire: a forged HELLO must not make a
// node believe that its peer restarted (which fails every connection to
// it) nor move a live peer's address, while a real restart is still
// believed within a bounded time; and addresses are learned from HELLOs
// only (the host sends to the address the core names).
#include "harness.hpp"

using namespace mesim;

namespace {

struct SecPair {
	Sim sim;
	me_conn *c = nullptr;
	std::unique_ptr<Workload> w;
	SecPair(uint64_t seed, int links, me_node_cfg ca, me_node_cfg cb) : sim(seed)
	{
		setup_pair(sim, links, LinkParams{}, ca, cb);
		c = sim.connect(0, 1, ME_MODE_UNORDERED);
		w = std::make_unique<Workload>(sim, seed);
	}
	me_node *node(int i) { return sim.nodes[i]->node; }
};

// A HELLO as a node (src, inc) sends it on `link`, with an optional name.
std::vector<uint8_t> hello(uint32_t src, uint32_t inc, uint32_t link, const char *name = "")
{
	me_hdr h{};
	h.version = ME_WIRE_VERSION;
	h.type = ME_PT_HELLO;
	h.src_node = src;
	h.src_inc = inc;
	h.dst_node = ME_NODE_BCAST;
	h.h.link = link;
	h.payload_len = (uint16_t)strlen(name);
	std::vector<uint8_t> b(ME_HDR_MAX + h.payload_len, 0);
	uint32_t n = me_wire_build(b.data(), &h);
	memcpy(b.data() + n, name, h.payload_len);
	b.resize(n + h.payload_len);
	return b;
}

bool dead_with(const Node &n, int32_t status)
{
	for (auto &q : n.cqes)
		if (q.type == ME_CQE_CONN_DEAD && q.status == status)
			return true;
	return false;
}

}  // namespace

// A third party keeps injecting HELLOs with the peer's node id and the
// next incarnation (both read from the peer's own HELLOs) on every link,
// and HELLOs of a made-up node: the connection lives, every operation
// completes, the links keep their peer.
TEST(Security, spoofed_hello__connections_survive)
{
	SecPair P(41, 2, default_cfg(1, 70), default_cfg(2, 80));
	ASSERT_NE(P.c, nullptr);
	me_node *a = P.node(0);
	bool stop = false;
	uint64_t sent = 0;
	std::function<void()> spoof = [&] {
		if (stop)
			return;
		for (uint32_t l = 0; l < 2; l++) {
			// From the peer's own address, and from another one.
			P.sim.deliver(*P.sim.nodes[0], l, hello(2, 81, l));	// "node 2 restarted"
			P.sim.deliver(*P.sim.nodes[0], l, hello(2, 79, l));	// an older one
			P.sim.deliver(*P.sim.nodes[0], l, 0x0266, hello(2, 80, l));	// moved
			P.sim.deliver(*P.sim.nodes[0], l, hello(9, 5, l));	// another node
			sent += 3;
		}
		P.sim.at(P.sim.now + 200000, spoof);
	};
	spoof();
	for (int i = 0; i < 40; i++) {
		ASSERT_EQ(P.w->submit(P.c, 0, i % 3 == 2 ? Op::READ : Op::WRITE, 50000), 0);
		P.sim.run_for(1000000);
	}
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 200000000));
	// Longer than peer_dead_ns and link_dead_ns: nothing is believed.
	P.sim.run_for(3 * P.sim.nodes[0]->cfg.peer_dead_ns);
	stop = true;
	P.w->check();
	EXPECT_EQ(me_conn_state(P.c), ME_CS_ESTABLISHED);
	EXPECT_FALSE(dead_with(*P.sim.nodes[0], -ECONNRESET));
	me_peer_info_core pi;
	ASSERT_TRUE(me_node_peer(a, 2, &pi));
	EXPECT_EQ(pi.inc, 80u);
	EXPECT_EQ(pi.alive_links, 3u);
	for (uint32_t l = 0; l < 2; l++) {
		me_path_info_core pa;
		bool found = false;
		for (uint32_t s = 0; s < me_node_npeers(a); s++)
			if (me_node_path_at(a, s, l, &pa) && pa.node == 2) {
				found = true;
				EXPECT_EQ(pa.addr, Sim::addr(1, l)) << l;
			}
		EXPECT_TRUE(found) << l;
	}
	EXPECT_EQ(P.sim.misaddressed, 0u);
	EXPECT_EQ(me_node_stat(a, ME_ST_PEER_RESTART), 0u);
	EXPECT_GE(me_node_stat(a, ME_ST_RX_HELLO_HELD), sent);
	// And the connection still carries new work.
	ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 100000), 0);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 100000000));
	P.w->check();
}

// A real restart is believed once the old incarnation is silent on every
// link for link_dead_ns (bounded: link_dead_ns + hello_ns + a tick or two),
// with a larger or a smaller new incarnation (the module draws them at
// random), even while a third party keeps forging HELLOs of the old one's
// successor.  The connection fails with ECONNRESET and a new one works.
TEST(Security, real_restart__still_detected_in_bounded_time)
{
	for (uint32_t new_inc : {81u, 7u}) {
		SecPair P(42 + new_inc, 2, default_cfg(1, 70), default_cfg(2, 80));
		ASSERT_NE(P.c, nullptr);
		me_node *a = P.node(0);
		const me_node_cfg &cf = P.sim.nodes[0]->cfg;
		P.sim.deliver(*P.sim.nodes[0], 0, hello(2, 99, 0));	// a forgery first
		ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 200000), 0);
		P.sim.run_for(100000);
		uint64_t t0 = P.sim.now;
		P.sim.restart(1, new_inc);
		ASSERT_TRUE(P.sim.run([&] { return me_conn_state(P.c) == ME_CS_DEAD; },
				      t0 + cf.peer_dead_ns))
			<< "inc " << new_inc;
		uint64_t took = P.sim.now - t0;
		EXPECT_TRUE(dead_with(*P.sim.nodes[0], -ECONNRESET)) << "a restart, not a timeout";
		EXPECT_LE(took, cf.link_dead_ns + cf.hello_ns + 4 * cf.tick_ns + 1000000)
			<< "inc " << new_inc;
		EXPECT_GE(took + cf.hello_ns, cf.link_dead_ns) << "believed before the old one fell silent";
		EXPECT_EQ(me_node_stat(a, ME_ST_PEER_RESTART), 1u);
		for (auto &[k, op] : P.w->ops)
			EXPECT_EQ(op.completions, 1);
		ASSERT_TRUE(P.sim.run([&] {
			me_peer_info_core pi;
			return me_node_peer(a, 2, &pi) && pi.inc == new_inc && pi.alive_links == 3;
		}, P.sim.now + 20000000));
		me_conn *c2 = nullptr;
		ASSERT_EQ(me_conn_connect(a, 2, ME_MODE_UNORDERED, &c2), 0);
		ASSERT_TRUE(P.sim.run([&] { return me_conn_state(c2) == ME_CS_ESTABLISHED; },
				      P.sim.now + 50000000));
	}
}

// A HELLO naming a live peer from another address (a third party
// claiming its identity) is not believed: the path keeps its address.
// Once the peer is silent there for link_dead_ns (its NIC was replaced),
// the new address is taken.  Another node on the link is simply another
// neighbour, and nothing of it touches the peer.
TEST(Security, address_moves_only_from_a_silent_path)
{
	SecPair P(43, 1, default_cfg(1, 70), default_cfg(2, 80));
	ASSERT_NE(P.c, nullptr);
	me_node *a = P.node(0);
	const uint64_t other = 0x0277;
	auto addr_of_2 = [&] {
		me_path_info_core pa;
		for (uint32_t s = 0; s < me_node_npeers(a); s++)
			if (me_node_path_at(a, s, 0, &pa) && pa.node == 2)
				return pa.addr;
		return uint64_t(0);
	};
	P.sim.deliver(*P.sim.nodes[0], 0, other, hello(3, 30, 0));
	P.sim.deliver(*P.sim.nodes[0], 0, other, hello(2, 80, 0));
	EXPECT_EQ(addr_of_2(), Sim::addr(1, 0));
	EXPECT_EQ(me_node_stat(a, ME_ST_RX_HELLO_HELD), 1u);
	me_peer_info_core pi;
	EXPECT_TRUE(me_node_peer(a, 3, &pi)) << "another node is a neighbour";
	P.sim.nodes[1]->ticking = false;	// node 2 stops answering
	P.sim.set_wire_up(0, false);
	P.sim.run_for(P.sim.nodes[0]->cfg.link_dead_ns / 2);
	P.sim.deliver(*P.sim.nodes[0], 0, other, hello(2, 80, 0));
	EXPECT_EQ(addr_of_2(), Sim::addr(1, 0)) << "node 2 is silent for less than link_dead_ns";
	P.sim.run_for(P.sim.nodes[0]->cfg.link_dead_ns);
	P.sim.deliver(*P.sim.nodes[0], 0, other, hello(2, 80, 0));
	EXPECT_EQ(addr_of_2(), other);
	EXPECT_EQ(me_node_stat(a, ME_ST_PEER_RESTART), 0u);
}

// Only a HELLO teaches an address: a valid keepalive of the peer from
// another address is no sign of its life (counted, ignored), and junk
// teaches nothing.
TEST(Security, address_learned_only_from_hello)
{
	Sim sim(44);
	setup_pair(sim, 1, LinkParams{}, default_cfg(1, 70), default_cfg(2, 80));
	sim.nodes[0]->ticking = false;
	sim.nodes[1]->ticking = false;
	me_node *a = sim.nodes[0]->node;
	auto rx = [&](uint64_t src, const std::vector<uint8_t> &b) {
		return me_core_rx(a, 0, src, b.data(), (uint32_t)b.size());
	};
	me_hdr k{};
	k.version = ME_WIRE_VERSION;
	k.type = ME_PT_KEEPALIVE;
	k.src_node = 2;
	k.src_inc = 80;
	k.dst_node = 1;
	k.h.heard_us = 10;
	k.h.stamp = 1;
	std::vector<uint8_t> kb(ME_HDR_MAX);
	kb.resize(me_wire_build(kb.data(), &k));
	EXPECT_EQ(rx(0x0211, kb), 0);
	me_peer_info_core pi;
	EXPECT_FALSE(me_node_peer(a, 2, &pi)) << "a keepalive made a peer";
	EXPECT_EQ(rx(0x0211, hello(2, 80, 0, "node2")), 0);
	ASSERT_TRUE(me_node_peer(a, 2, &pi));
	EXPECT_STREQ(pi.name, "node2");
	me_path_info_core pa;
	ASSERT_TRUE(me_node_path_at(a, 0, 0, &pa));
	EXPECT_EQ(pa.addr, 0x0211u);
	uint64_t rx_before = pa.rx_pkts;
	EXPECT_EQ(rx(0x0212, kb), 0);
	EXPECT_EQ(me_node_stat(a, ME_ST_RX_ADDR), 1u);
	ASSERT_TRUE(me_node_path_at(a, 0, 0, &pa));
	EXPECT_EQ(pa.rx_pkts, rx_before) << "a frame from another address counted";
	EXPECT_EQ(pa.addr, 0x0211u);
	uint8_t junk[64] = {ME_WIRE_VERSION, ME_PT_HELLO};
	EXPECT_LT(me_core_rx(a, 0, 0x0213, junk, sizeof(junk)), 0);
	ASSERT_TRUE(me_node_path_at(a, 0, 0, &pa));
	EXPECT_EQ(pa.addr, 0x0211u);
	// The keepalive from the right address: the peer hears us and we
	// hear it, so the path is alive.
	EXPECT_EQ(rx(0x0211, kb), 0);
	EXPECT_EQ(me_peer_alive_links(a, 2), 1u);
}

// A node that restarts and connects at once: its peer still holds the old
// incarnation (and refuses CONNECTs from the new one) until the old one has
// been silent for link_dead_ns, so the connect must keep trying at least
// that long, not only max_retries x connect_rto (1.2 s with the module's
// timers, used here, but with link_dead_ns 1.5 s instead of 1 s).
TEST(Security, restarted_node__connects_at_once)
{
	auto modcfg = [](uint32_t id, uint32_t inc) {
		me_node_cfg c = module_cfg(id);
		c.incarnation = inc;
		c.link_dead_ns = 1500000000;
		return c;
	};
	for (uint32_t new_inc : {81u, 7u}) {
		SecPair P(60 + new_inc, 2, modcfg(1, 70), modcfg(2, 80));
		ASSERT_NE(P.c, nullptr);
		P.sim.restart(1, new_inc);
		// As soon as the restarted node knows its peer by HELLO (it
		// is alive both ways only once the peer believes the restart).
		me_peer_info_core pi;
		ASSERT_TRUE(P.sim.run([&] { return me_node_peer(P.node(1), 1, &pi); },
				      P.sim.now + 500000000));
		me_conn *c = nullptr;
		ASSERT_EQ(me_conn_connect(P.node(1), 1, ME_MODE_UNORDERED, &c), 0);
		ASSERT_TRUE(P.sim.run([&] {
			int st = me_conn_state(c);
			return st == ME_CS_ESTABLISHED || st == ME_CS_DEAD;
		}, P.sim.now + 10000000000ull));
		EXPECT_EQ(me_conn_state(c), ME_CS_ESTABLISHED) << "inc " << new_inc;
	}
}


// Blind injection (issue 13 #5): a third party that knows everything but
// the connection's cookie -- node ids, incarnations and connection ids
// (broadcast or guessable), and here even every sequence number and op id
// in flight (as if it saw each frame the peer sends) -- forges, for each
// frame node 1 sends node 0, a CLOSE and a failed STATUS at the next
// sequence number and an ACK of everything.  Without the cookie check the
// CLOSE alone ends the connection.  Every forged frame must be dropped
// (counted rx_cookie), every write complete with its data in place, the
// connection stay established.
TEST(Security, blind_injection__dropped_without_the_cookie)
{
	SecPair P(71, 2, default_cfg(1, 70), default_cfg(2, 80));
	ASSERT_NE(P.c, nullptr);
	me_node *a = P.node(0);
	uint64_t forged = 0;
	bool stop = false;
	std::vector<uint8_t> b(ME_HDR_MAX);
	auto send = [&](const me_hdr &h, uint32_t link) {
		b.assign(ME_HDR_MAX, 0);
		b.resize(me_wire_build(b.data(), &h));
		P.sim.deliver(*P.sim.nodes[0], link, b);
		forged++;
	};
	P.sim.tx_hook = [&](const TxEvent &e) {
		if (stop || e.node != 1 || !e.parsed || !e.h.dst_conn || !e.h.cookie)
			return;
		me_hdr h = e.h;
		h.cookie ^= 1ull << (forged % 64);	// one bit off: still wrong
		h.payload_len = 0;
		h.flags = 0;
		uint32_t link = e.link;
		// Forged frames arrive before the real one (it is still on the wire).
		P.sim.at(e.t, [&, h, link]() mutable {
			if (me_pt_sequenced(h.type)) {
				h.d.seq++;
				h.d.msg_len = h.d.msg_off = 0;
				h.d.op_id++;
				h.d.imm = EACCES;
				h.type = ME_PT_STATUS;
				h.flags = ME_F_ACKREQ;
				send(h, link);
				h.type = ME_PT_CLOSE;
				h.d.imm = 0;
				send(h, link);
			} else if (h.type == ME_PT_ACK || h.type == ME_PT_NACK) {
				h.type = ME_PT_ACK;
				h.a.cum = h.a.right;
				send(h, link);
			}
		});
	};
	for (int i = 0; i < 40; i++)
		ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 20000), 0);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 2000000000ull));
	stop = true;
	P.w->check();
	EXPECT_EQ(me_conn_state(P.c), ME_CS_ESTABLISHED);
	EXPECT_GT(forged, 100u);
	EXPECT_EQ(me_node_stat(a, ME_ST_RX_COOKIE), forged);
	EXPECT_FALSE(dead_with(*P.sim.nodes[0], -ECONNRESET));
}

// An ACCEPT must answer our CONNECT: one with the right ids but not the
// cookie the CONNECT offered does not establish the connection (a third
// party would otherwise choose its sequence numbers and cookie).
TEST(Security, forged_accept__ignored)
{
	Sim sim(72);
	setup_pair(sim, 1, LinkParams{}, default_cfg(1, 70), default_cfg(2, 80));
	sim.run_for(5000000);	// HELLOs
	me_node *a = sim.nodes[0]->node;
	uint64_t offered = 0;
	sim.tx_hook = [&](const TxEvent &e) {
		if (e.node == 0 && e.parsed && e.h.type == ME_PT_CONNECT)
			offered = e.h.c.cookie;
	};
	sim.set_wire_up(0, false);	// the real peer never hears the CONNECT
	me_conn *c = nullptr;
	ASSERT_EQ(me_conn_connect(a, 2, ME_MODE_UNORDERED, &c), 0);
	ASSERT_NE(offered, 0u);
	me_hdr h{};
	h.version = ME_WIRE_VERSION;
	h.type = ME_PT_ACCEPT;
	h.src_node = 2;
	h.src_inc = 80;
	h.dst_node = 1;
	h.dst_inc = 70;
	h.src_conn = 1;
	h.dst_conn = me_conn_id(c);
	h.c.isn = 1;
	h.c.credit = 64;
	h.c.window = 256;
	h.c.ops = 64;
	h.c.cookie = 0x5eed;
	std::vector<uint8_t> b(ME_HDR_CONN);
	for (uint64_t guess : {offered ^ 1, offered + 1, ~offered, uint64_t{1}}) {
		h.cookie = guess;
		b.assign(ME_HDR_CONN, 0);
		me_wire_build(b.data(), &h);
		sim.deliver(*sim.nodes[0], 0, b);
	}
	sim.run_for(1000000);
	EXPECT_EQ(me_conn_state(c), ME_CS_CONNECTING);
	EXPECT_EQ(me_node_stat(a, ME_ST_RX_COOKIE), 4u);
	// The same frame with the offered cookie is taken: the check is what
	// kept the others out.
	h.cookie = offered;
	b.assign(ME_HDR_CONN, 0);
	me_wire_build(b.data(), &h);
	sim.deliver(*sim.nodes[0], 0, b);
	sim.run_for(1000000);
	EXPECT_EQ(me_conn_state(c), ME_CS_ESTABLISHED);
}
