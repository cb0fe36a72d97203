// SPDX-License-Identifier: GPL-2.0
// Focused tests: header validation, incarnations, duplicates, nack, RTO
// backoff and cap, failover and recovery, access errors, peer death.
#include <set>

#include "harness.hpp"

using namespace mesim;

namespace {

std::vector<uint8_t> build(const me_hdr &h, uint32_t pay = 0)
{
	std::vector<uint8_t> b(ME_HDR_MAX + pay, 0);
	uint32_t n = me_wire_build(b.data(), &h);
	b.resize(n + pay);
	return b;
}

me_hdr data_hdr()
{
	me_hdr h{};
	h.type = ME_PT_WRITE;
	h.src_node = 1;
	h.dst_node = 2;
	h.src_inc = 5;
	h.dst_inc = 6;
	h.src_conn = 1;
	h.dst_conn = 1;
	h.cookie = 0x0123456789abcdefull;
	h.payload_len = 10;
	h.d.seq = 100;
	h.d.msg_len = 10;
	h.flags = ME_F_LAST;
	return h;
}

}  // namespace

TEST(Wire, roundtrip__every_type)
{
	for (uint32_t t = ME_PT_HELLO; t < ME_PT_MAX_; t++) {
		me_hdr h = data_hdr(), o{};
		if (t == ME_PT_PACK)
			continue;	// needs entries: Wire.pack__*
		h.type = (uint8_t)t;
		h.payload_len = 0;
		if (t == ME_PT_CONNECT || t == ME_PT_ACCEPT) {
			h.c.window = 256; h.c.credit = 200; h.c.ops = 64; h.c.isn = 77; h.c.mode = 1;
			h.c.cookie = 0xfeedfacecafebeefull;
			if (t == ME_PT_CONNECT)
				h.cookie = 0;
		} else if (t == ME_PT_HELLO || t == ME_PT_KEEPALIVE) {
			h.cookie = 0;
			h.src_conn = h.dst_conn = 0;	// no connection's
			if (t == ME_PT_KEEPALIVE) {
				h.h.heard_us = 1234;
				h.h.echo = 0x1122334455667788ull;
				h.h.down = 0x8001;
				h.h.hold = 77;
				h.h.stamp = 0x99aabbccddeeff01ull;
				h.flags = ME_F_REPLY;
			}
		} else if (t == ME_PT_ACK || t == ME_PT_NACK) {
			h.a.cum = 5; h.a.right = 90; h.a.sack[3] = 0x81;
			h.a.hold = 0x10203040; h.a.echo = 0x50607080;
			h.flags = ME_F_DUP;
		} else if (t == ME_PT_READ_REQ) {
			h.payload_len = ME_READ_REQ_PAY;
		} else if (t == ME_PT_ATOMIC) {
			h.payload_len = ME_ATOMIC_PAY;
			h.d.msg_len = 8;
			h.d.imm = ME_AOP_ADD;
		} else if (me_pt_sequenced(t)) {
			h.d.msg_len = (t == ME_PT_STATUS || t == ME_PT_CLOSE) ? 0 : 10;
			h.payload_len = (uint16_t)h.d.msg_len;
		}
		if (me_pt_sequenced(t))
			h.d.stamp = 0xa1b2c3d4;
		if ((!me_pt_sequenced(t) || t == ME_PT_STATUS || t == ME_PT_CLOSE ||
		     t == ME_PT_READ_REQ) && t != ME_PT_ACK && t != ME_PT_NACK &&
		    t != ME_PT_KEEPALIVE)
			h.flags = 0;
		auto b = build(h, h.payload_len);
		ASSERT_EQ(me_wire_parse(b.data(), (uint32_t)b.size(), &o), 0) << t;
		EXPECT_EQ(o.type, t);
		EXPECT_EQ(o.src_inc, 5u);
		EXPECT_EQ(o.hdr_len, me_wire_hdr_len(t));
		EXPECT_EQ(o.cookie, h.cookie);
		if (t == ME_PT_CONNECT || t == ME_PT_ACCEPT) {
			EXPECT_EQ(o.c.cookie, 0xfeedfacecafebeefull);
		}
		if (t == ME_PT_KEEPALIVE) {
			EXPECT_EQ(o.h.heard_us, 1234u);
			EXPECT_EQ(o.h.echo, 0x1122334455667788ull);
			EXPECT_EQ(o.h.down, 0x8001u);
			EXPECT_EQ(o.h.hold, 77u);
			EXPECT_EQ(o.h.stamp, 0x99aabbccddeeff01ull);
			EXPECT_EQ(o.flags, ME_F_REPLY);
		}
		if (me_pt_sequenced(t)) {
			EXPECT_EQ(o.d.stamp, 0xa1b2c3d4u);
		}
		if (t == ME_PT_ACK || t == ME_PT_NACK) {
			EXPECT_EQ(o.flags, ME_F_DUP);
			EXPECT_EQ(o.a.hold, 0x10203040u);
			EXPECT_EQ(o.a.echo, 0x50607080u);
		}
		if (t == ME_PT_ACK) {
			EXPECT_EQ(o.a.right, 90u);
			EXPECT_TRUE(me_sack_test(o.a.sack, 24));
			EXPECT_TRUE(me_sack_test(o.a.sack, 31));
			EXPECT_FALSE(me_sack_test(o.a.sack, 25));
		}
	}
}

namespace {

// A PACK of the given entry lengths (header msg_len: their count).
std::vector<uint8_t> pack(const std::vector<uint32_t> &lens)
{
	me_hdr h = data_hdr();
	uint32_t pay = 0;
	for (uint32_t l : lens)
		pay += ME_PACK_ENT + l;
	h.type = ME_PT_PACK;
	h.payload_len = (uint16_t)pay;
	h.d.msg_len = (uint32_t)lens.size();
	h.flags = ME_F_LAST | ME_F_ACKREQ;
	auto b = build(h, pay);
	uint8_t *p = b.data() + ME_HDR_SEQ;
	uint32_t i = 0;
	for (uint32_t l : lens) {
		me_pack_ent e{};
		e.type = i % 2 ? ME_PT_NOTIFY : ME_PT_WRITE;
		e.len = l;
		e.op_id = 40 + i;
		e.region = 7;
		e.imm = 1000 + i;
		e.key = 0x1122334455667788ull + i;
		e.addr = 4096ull * i;
		p += me_wire_pack_put(p, &e);
		memset(p, 'a' + i, l);
		p += l;
		i++;
	}
	return b;
}

}  // namespace

TEST(Wire, pack__roundtrip)
{
	auto b = pack({8, 0, 300, 1});
	me_hdr o;
	ASSERT_EQ(me_wire_parse(b.data(), (uint32_t)b.size(), &o), 0);
	EXPECT_EQ(o.type, ME_PT_PACK);
	EXPECT_TRUE(me_pt_sequenced(o.type));
	EXPECT_EQ(o.d.msg_len, 4u);
	const uint8_t *p = o.payload;
	uint32_t rem = o.payload_len;
	const uint32_t lens[] = {8, 0, 300, 1};
	for (uint32_t i = 0; i < 4; i++) {
		me_pack_ent e;
		int n = me_wire_pack_next(p, rem, &e);
		ASSERT_EQ(n, (int)(ME_PACK_ENT + lens[i])) << i;
		EXPECT_EQ(e.type, i % 2 ? (uint32_t)ME_PT_NOTIFY : (uint32_t)ME_PT_WRITE);
		EXPECT_EQ(e.len, lens[i]);
		EXPECT_EQ(e.op_id, 40 + i);
		EXPECT_EQ(e.region, 7u);
		EXPECT_EQ(e.imm, 1000 + i);
		EXPECT_EQ(e.key, 0x1122334455667788ull + i);
		EXPECT_EQ(e.addr, 4096ull * i);
		EXPECT_EQ(e.data, p + ME_PACK_ENT);
		if (lens[i]) {
			EXPECT_EQ(e.data[lens[i] - 1], 'a' + i);
		}
		p += n;
		rem -= (uint32_t)n;
	}
	EXPECT_EQ(rem, 0u);
	// The most entries a PACK may hold.
	b = pack(std::vector<uint32_t>(ME_PACK_MAX, 8));
	EXPECT_EQ(me_wire_parse(b.data(), (uint32_t)b.size(), &o), 0);
}

TEST(Wire, pack__malformed)
{
	me_hdr o;
	auto bad = [&](std::vector<uint8_t> c, auto mut, int want) {
		mut(c);
		EXPECT_EQ(me_wire_parse(c.data(), (uint32_t)c.size(), &o), want);
	};
	auto two = pack({8, 8});
	const uint32_t e1 = ME_HDR_SEQ + ME_PACK_ENT + 8;	// second entry
	auto none = [](auto &) {};
	bad(pack({8}), none, ME_EWIRE_FIELD);				// one entry
	bad(pack(std::vector<uint32_t>(ME_PACK_MAX + 1, 8)), none, ME_EWIRE_FIELD);
	bad(two, [](auto &c) { me_put_be32(&c[52], 3); }, ME_EWIRE_FIELD);	// count > entries
	bad(two, [](auto &c) { me_put_be32(&c[52], 1); }, ME_EWIRE_FIELD);	// bytes left over
	bad(two, [](auto &c) { me_put_be32(&c[44], 1); }, ME_EWIRE_FIELD);	// msg_id
	bad(two, [](auto &c) { me_put_be32(&c[48], 1); }, ME_EWIRE_FIELD);	// op_id
	bad(two, [](auto &c) { me_put_be32(&c[60], 1); }, ME_EWIRE_FIELD);	// region
	bad(two, [](auto &c) { me_put_be32(&c[64], 1); }, ME_EWIRE_FIELD);	// imm
	bad(two, [](auto &c) { me_put_be64(&c[72], 1); }, ME_EWIRE_FIELD);	// key
	bad(two, [](auto &c) { me_put_be64(&c[80], 1); }, ME_EWIRE_FIELD);	// addr
	bad(two, [](auto &c) { me_put_be16(&c[2], ME_F_ACKREQ); }, ME_EWIRE_FIELD);	// not LAST
	bad(two, [&](auto &c) { c[e1] = ME_PT_READ_REQ; }, ME_EWIRE_FIELD);	// entry type
	bad(two, [&](auto &c) { c[e1] = ME_PT_PACK; }, ME_EWIRE_FIELD);
	bad(two, [&](auto &c) { c[e1 + 1] = 1; }, ME_EWIRE_FIELD);		// reserved
	bad(two, [&](auto &c) { me_put_be16(&c[e1 + 2], 9); }, ME_EWIRE_FIELD);	// past the end
	bad(two, [&](auto &c) { me_put_be64(&c[e1 + 24], ~0ull - 4); }, ME_EWIRE_FIELD);	// wraps
	// Every truncation of the payload (payload_len says the whole).
	for (uint32_t l = ME_HDR_SEQ; l < two.size(); l++)
		EXPECT_NE(me_wire_parse(two.data(), l, &o), 0) << l;
	EXPECT_EQ(me_wire_parse(two.data(), (uint32_t)two.size(), &o), 0);
}

TEST(Wire, parse__truncated_every_length)
{
	auto b = build(data_hdr(), 10);
	me_hdr o;
	for (uint32_t l = 0; l < b.size(); l++)
		EXPECT_NE(me_wire_parse(b.data(), l, &o), 0) << l;
	b.push_back(0);	// Ethernet padding is fine
	EXPECT_EQ(me_wire_parse(b.data(), (uint32_t)b.size(), &o), 0);
}

TEST(Wire, parse__bad_fields)
{
	me_hdr o;
	auto b = build(data_hdr(), 10);
	auto bad = [&](auto mut, int want) {
		auto c = b;
		mut(c);
		EXPECT_EQ(me_wire_parse(c.data(), (uint32_t)c.size(), &o), want);
	};
	bad([](auto &c) { c[0] = 1; }, ME_EWIRE_VERSION);		// before cookies
	bad([](auto &c) { c[0] = 2; }, ME_EWIRE_VERSION);		// before neighbours
	bad([](auto &c) { c[0] = 3; }, ME_EWIRE_VERSION);		// before completion by ack
	bad([](auto &c) { c[0] = 4; }, ME_EWIRE_VERSION);		// before ports
	bad([](auto &c) { c[0] = 5; }, ME_EWIRE_VERSION);		// before DUP and hold
	bad([](auto &c) { c[0] = 6; }, ME_EWIRE_VERSION);		// before keepalive holds
	bad([](auto &c) { c[0] = 7; }, ME_EWIRE_VERSION);		// before PACK
	bad([](auto &c) { c[0] = 8; }, ME_EWIRE_VERSION);		// before CARRY
	bad([](auto &c) { c[0] = 9; }, ME_EWIRE_VERSION);		// before shared
	bad([](auto &c) { c[0] = 10; }, ME_EWIRE_VERSION);		// before atomics
	bad([](auto &c) { c[0] = 11; }, ME_EWIRE_VERSION);		// before EEXIST refusals
	bad([](auto &c) { c[0] = 12; }, ME_EWIRE_VERSION);		// before FRESH
	bad([](auto &c) { c[0] = 13; }, ME_EWIRE_VERSION);		// before beacons
	bad([](auto &c) { c[0] = 14; }, ME_EWIRE_VERSION);		// before the close cut
	bad([](auto &c) { c[0] = 15; }, ME_EWIRE_VERSION);		// before FILL
	bad([](auto &c) { c[0] = 16; }, ME_EWIRE_VERSION);		// before sends of packets
	bad([](auto &c) { c[0] = 17; }, ME_EWIRE_VERSION);		// before NOW
	bad([](auto &c) { c[0] = 19; }, ME_EWIRE_VERSION);
	bad([](auto &c) { c[3] |= ME_F_CARRY; }, ME_EWIRE_FIELD);	// only an ack carries
	bad([](auto &c) { c[3] |= ME_F_FRESH; }, ME_EWIRE_FIELD);	// only a shared CONNECT
	bad([](auto &c) { c[3] |= ME_F_ASK; }, ME_EWIRE_FIELD);	// only a keepalive
	bad([](auto &c) { c[2] |= ME_F_FILL >> 8; }, ME_EWIRE_FIELD);	// only an ack
	bad([](auto &c) { c[1] = 0; }, ME_EWIRE_TYPE);
	bad([](auto &c) { c[1] = ME_PT_MAX_; }, ME_EWIRE_TYPE);
	bad([](auto &c) { c[2] = 0x04; }, ME_EWIRE_FIELD);		// unknown flags
	bad([](auto &c) { c[5] = 76; }, ME_EWIRE_FIELD);		// hdr_len
	bad([](auto &c) { c[7] = 11; }, ME_EWIRE_SHORT);		// payload len
	bad([](auto &c) { me_put_be32(&c[8], 0); }, ME_EWIRE_FIELD);	// src node
	bad([](auto &c) { me_put_be32(&c[16], 0); }, ME_EWIRE_FIELD);	// src inc
	bad([](auto &c) { me_put_be32(&c[52], 9); }, ME_EWIRE_FIELD);	// off+len > msg
	bad([](auto &c) { me_put_be32(&c[56], 5); }, ME_EWIRE_FIELD);	// msg_off
	bad([](auto &c) { me_put_be32(&c[52], 0x80000000u); }, ME_EWIRE_FIELD);
	bad([](auto &c) { me_put_be64(&c[80], ~0ull); }, ME_EWIRE_FIELD);	// addr wraps
	bad([](auto &c) { me_put_be32(&c[28], 0); }, ME_EWIRE_FIELD);	// dst conn
	bad([](auto &c) { me_put_be64(&c[32], 0); }, ME_EWIRE_FIELD);	// no cookie
	{
		// Any 64-bit key is carried whole.
		me_hdr k = data_hdr();
		k.d.key = 0x8765432112345678ull;
		auto kb = build(k, 10);
		ASSERT_EQ(me_wire_parse(kb.data(), (uint32_t)kb.size(), &o), 0);
		EXPECT_EQ(o.d.key, 0x8765432112345678ull);
	}

	me_hdr a = data_hdr();
	a.type = ME_PT_ACK;
	a.payload_len = 0;
	a.flags = 0;
	a.a.cum = 100;
	a.a.right = 50;
	auto ab = build(a);
	EXPECT_EQ(me_wire_parse(ab.data(), (uint32_t)ab.size(), &o), ME_EWIRE_FIELD);
	// The sack base is carried and bounded: the bitmap stays within
	// ME_WIN_MAX of cum.
	a.a.right = 200;
	a.a.base = ME_WIN_MAX - ME_SACK_BITS;
	ab = build(a);
	ASSERT_EQ(me_wire_parse(ab.data(), (uint32_t)ab.size(), &o), 0);
	EXPECT_EQ(o.a.base, (uint32_t)(ME_WIN_MAX - ME_SACK_BITS));
	a.flags = ME_F_FILL;	// an ack's own flag
	ab = build(a);
	ASSERT_EQ(me_wire_parse(ab.data(), (uint32_t)ab.size(), &o), 0);
	EXPECT_EQ(o.flags, ME_F_FILL);
	a.flags = 0;
	ab = build(a);
	me_put_be32(&ab[64], ME_WIN_MAX - ME_SACK_BITS + 1);
	EXPECT_EQ(me_wire_parse(ab.data(), (uint32_t)ab.size(), &o), ME_EWIRE_FIELD);
	me_hdr c = data_hdr();
	c.type = ME_PT_CONNECT;
	c.payload_len = 0;
	c.flags = 0;
	c.c.window = 100;	// not a power of two
	c.c.credit = 10;
	c.c.ops = 8;
	c.c.mode = 0;
	c.c.cookie = 7;
	c.cookie = 0;
	auto cb = build(c);
	EXPECT_EQ(me_wire_parse(cb.data(), (uint32_t)cb.size(), &o), ME_EWIRE_FIELD);
	// The cookies of the handshake: a CONNECT offers one (nonzero) and
	// cannot know the other's; an ACCEPT carries the one it answers.
	c.c.window = 64;
	cb = build(c);
	ASSERT_EQ(me_wire_parse(cb.data(), (uint32_t)cb.size(), &o), 0);
	c.cookie = 5;
	cb = build(c);
	EXPECT_EQ(me_wire_parse(cb.data(), (uint32_t)cb.size(), &o), ME_EWIRE_FIELD);
	c.cookie = 0;
	c.c.cookie = 0;
	cb = build(c);
	EXPECT_EQ(me_wire_parse(cb.data(), (uint32_t)cb.size(), &o), ME_EWIRE_FIELD);
	c.type = ME_PT_ACCEPT;
	c.c.cookie = 7;
	cb = build(c);
	EXPECT_EQ(me_wire_parse(cb.data(), (uint32_t)cb.size(), &o), ME_EWIRE_FIELD);
	c.cookie = 9;
	cb = build(c);
	EXPECT_EQ(me_wire_parse(cb.data(), (uint32_t)cb.size(), &o), 0);
	// Modes: unordered, ordered, shared; a shared connection serves
	// every port, so it is opened to none.
	c.c.mode = ME_MODE_SHARED;
	cb = build(c);
	ASSERT_EQ(me_wire_parse(cb.data(), (uint32_t)cb.size(), &o), 0);
	EXPECT_EQ(o.c.mode, (uint32_t)ME_MODE_SHARED);
	c.c.port = 5;
	cb = build(c);
	EXPECT_EQ(me_wire_parse(cb.data(), (uint32_t)cb.size(), &o), ME_EWIRE_FIELD);
	c.c.port = 0;
	c.c.mode = 3;
	cb = build(c);
	EXPECT_EQ(me_wire_parse(cb.data(), (uint32_t)cb.size(), &o), ME_EWIRE_FIELD);
	// HELLO and KEEPALIVE belong to no connection: no cookie.
	me_hdr hl = data_hdr();
	hl.type = ME_PT_HELLO;
	hl.payload_len = 0;
	hl.flags = 0;
	hl.src_conn = hl.dst_conn = 0;
	auto hb = build(hl);
	EXPECT_EQ(me_wire_parse(hb.data(), (uint32_t)hb.size(), &o), ME_EWIRE_FIELD);
	hl.cookie = 0;
	hb = build(hl);
	EXPECT_EQ(me_wire_parse(hb.data(), (uint32_t)hb.size(), &o), 0);
	// A KEEPALIVE's down mask names links 0..15 only; its tail is zero.
	hl.type = ME_PT_KEEPALIVE;
	hl.dst_node = 2;
	hl.h.stamp = 1;
	hl.h.down = 0xffff;
	hb = build(hl);
	EXPECT_EQ(me_wire_parse(hb.data(), (uint32_t)hb.size(), &o), 0);
	EXPECT_EQ(o.h.down, 0xffffu);
	hl.h.down = 0x10000;
	hb = build(hl);
	EXPECT_EQ(me_wire_parse(hb.data(), (uint32_t)hb.size(), &o), ME_EWIRE_FIELD);
	// Wire 14: every keepalive is stamped; a hold is an echo's, and a
	// reply echoes its probe; a keepalive is a probe (ASK), a reply or
	// a beacon (neither), never both.
	hl.h.down = 1;
	hl.h.stamp = 0;
	hb = build(hl);
	EXPECT_EQ(me_wire_parse(hb.data(), (uint32_t)hb.size(), &o), ME_EWIRE_FIELD);
	hl.h.stamp = 0x0102030405060708ull;
	hl.h.echo = 0;
	hl.h.hold = 0x01020304;
	hb = build(hl);
	EXPECT_EQ(me_wire_parse(hb.data(), (uint32_t)hb.size(), &o), ME_EWIRE_FIELD);
	hl.h.hold = 0;
	hl.flags = ME_F_REPLY;
	hb = build(hl);
	EXPECT_EQ(me_wire_parse(hb.data(), (uint32_t)hb.size(), &o), ME_EWIRE_FIELD);
	hl.h.echo = 9;
	hl.h.hold = 0x01020304;
	hb = build(hl);
	EXPECT_EQ(me_wire_parse(hb.data(), (uint32_t)hb.size(), &o), 0);
	EXPECT_EQ(o.h.hold, 0x01020304u);
	EXPECT_EQ(o.h.echo, 9u);
	EXPECT_EQ(o.h.stamp, 0x0102030405060708ull);
	hl.flags = ME_F_REPLY | ME_F_ASK;
	hb = build(hl);
	EXPECT_EQ(me_wire_parse(hb.data(), (uint32_t)hb.size(), &o), ME_EWIRE_FIELD);
	for (uint16_t f : {0, (int)ME_F_ASK}) {	// a beacon, a probe: echo or not
		hl.flags = f;
		hb = build(hl);
		EXPECT_EQ(me_wire_parse(hb.data(), (uint32_t)hb.size(), &o), 0) << f;
		EXPECT_EQ(o.flags, f);
		hl.h.echo = hl.h.hold = 0;
		hb = build(hl);
		EXPECT_EQ(me_wire_parse(hb.data(), (uint32_t)hb.size(), &o), 0) << f;
		hl.h.echo = 9;
		hl.h.hold = 5;
	}
}

// Receive threads store timestamps after the timer read its clock: ages
// computed from them must not wrap (busy links and peers were once declared
// dead that way in the kernel).
TEST(Types, elapsed__never_wraps)
{
	EXPECT_EQ(me_elapsed(1000, 400), 600u);
	EXPECT_EQ(me_elapsed(1000, 1000), 0u);
	EXPECT_EQ(me_elapsed(1000, 1001), 0u);
	EXPECT_EQ(me_elapsed(0, UINT64_MAX), 0u);
}

TEST(Node, rx__malformed_counted_and_dropped)
{
	Sim sim(3);
	setup_pair(sim, 1, LinkParams{}, default_cfg(1), default_cfg(2));
	me_node *n = sim.nodes[1]->node;
	uint8_t junk[100] = {ME_WIRE_VERSION, 77};
	EXPECT_NE(me_core_rx(n, 0, 0, junk, 10), 0);
	EXPECT_NE(me_core_rx(n, 0, 0, junk, sizeof(junk)), 0);
	junk[0] = ME_WIRE_VERSION + 1;
	EXPECT_NE(me_core_rx(n, 0, 0, junk, sizeof(junk)), 0);
	EXPECT_EQ(me_node_stat(n, ME_ST_RX_SHORT), 1u);
	EXPECT_EQ(me_node_stat(n, ME_ST_RX_TYPE), 1u);
	EXPECT_EQ(me_node_stat(n, ME_ST_RX_VERSION), 1u);
	EXPECT_EQ(me_core_rx(n, 5, 0, junk, sizeof(junk)), -EINVAL);	// no such link
}

struct Pair {
	Sim sim;
	me_conn *c = nullptr, *p = nullptr;
	std::unique_ptr<Workload> w;
	Pair(uint64_t seed, int links, LinkParams lp = {}, me_node_cfg ca = default_cfg(1),
	     me_node_cfg cb = default_cfg(2), uint32_t mode = ME_MODE_UNORDERED)
		: sim(seed)
	{
		setup_pair(sim, links, lp, ca, cb);
		uint32_t pid = 0;
		c = sim.connect(0, 1, mode, &pid);
		if (c)
			p = me_conn_get(sim.nodes[1]->node, pid);
		w = std::make_unique<Workload>(sim, seed);
	}
};

TEST(Conn, incarnation__stale_packets_rejected)
{
	me_node_cfg ca = default_cfg(1), cb = default_cfg(2);
	ca.incarnation = 50;
	cb.incarnation = 60;
	Pair P(11, 1, {}, ca, cb);
	ASSERT_NE(P.c, nullptr);
	std::vector<std::vector<uint8_t>> captured;
	P.sim.tx_hook = [&](const TxEvent &e) {
		if (e.parsed && e.node == 0 && e.h.type == ME_PT_WRITE) {
			me_hdr h = e.h;
			std::vector<uint8_t> b(ME_HDR_SEQ + h.payload_len);
			me_wire_build(b.data(), &h);
			captured.push_back(b);
		}
	};
	ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 100), 0);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 50000000));
	ASSERT_FALSE(captured.empty());
	me_node *b = P.sim.nodes[1]->node;
	uint64_t stale = me_node_stat(b, ME_ST_RX_STALE);
	// Same packet claiming an older incarnation of the sender.
	auto pkt = captured[0];
	me_put_be32(&pkt[16], me_get_be32(&pkt[16]) - 1);
	me_core_rx(b, 0, Sim::addr(0, 0), pkt.data(), (uint32_t)pkt.size());
	EXPECT_EQ(me_node_stat(b, ME_ST_RX_STALE), stale + 1);
	// Addressed to an older incarnation of the receiver.
	pkt = captured[0];
	me_put_be32(&pkt[20], me_get_be32(&pkt[20]) + 7);
	me_core_rx(b, 0, Sim::addr(0, 0), pkt.data(), (uint32_t)pkt.size());
	EXPECT_EQ(me_node_stat(b, ME_ST_RX_STALE), stale + 2);
	// An earlier life of the connection (another conn id).
	pkt = captured[0];
	me_put_be32(&pkt[24], 99);
	me_core_rx(b, 0, Sim::addr(0, 0), pkt.data(), (uint32_t)pkt.size());
	EXPECT_EQ(me_node_stat(b, ME_ST_RX_STALE), stale + 3);
	P.w->check();

	// The peer restarts: our connection dies with ECONNRESET and the
	// new incarnation rejects packets of the old connection.
	ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 100000), 0);
	P.sim.restart(1, 61);
	ASSERT_TRUE(P.sim.run([&] { return me_conn_state(P.c) == ME_CS_DEAD; },
			      P.sim.now + 100000000));
	bool reset = false;
	for (auto &q : P.sim.nodes[0]->cqes)
		if (q.type == ME_CQE_CONN_DEAD && q.status == -ECONNRESET)
			reset = true;
	EXPECT_TRUE(reset);
	EXPECT_GT(me_node_stat(P.sim.nodes[1]->node, ME_ST_RX_STALE), 0u);
	for (auto &[k, op] : P.w->ops)
		EXPECT_EQ(op.completions, 1);
	// A new connection to the restarted peer works.
	me_conn *c2 = nullptr;
	ASSERT_EQ(me_conn_connect(P.sim.nodes[0]->node, 2, 0, &c2), 0);
	ASSERT_TRUE(P.sim.run([&] { return me_conn_state(c2) == ME_CS_ESTABLISHED; },
			      P.sim.now + 50000000));
}

TEST(Window, duplicates__suppressed)
{
	LinkParams lp;
	lp.dup = 1.0;	// every packet arrives twice
	Pair P(12, 2, lp);
	ASSERT_NE(P.c, nullptr);
	for (int i = 0; i < 10; i++)
		ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 30000), 0);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 100000000));
	P.w->check();
	EXPECT_GT(me_node_stat(P.sim.nodes[1]->node, ME_ST_RX_DUP), 10u);
}

TEST(Window, gap__nack_and_fast_retransmit)
{
	Pair P(13, 1);
	ASSERT_NE(P.c, nullptr);
	int seen = 0;
	P.sim.drop_hook = [&](const TxEvent &e) {
		return e.parsed && e.node == 0 && e.h.type == ME_PT_WRITE &&
		       !(e.h.flags & ME_F_RTX) && ++seen == 3;
	};
	uint64_t t0 = P.sim.now;
	ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 200000), 0);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 100000000));
	P.w->check();
	EXPECT_GE(me_node_stat(P.sim.nodes[1]->node, ME_ST_TX_NACK), 1u);
	EXPECT_GE(me_node_stat(P.sim.nodes[0]->node, ME_ST_TX_RTX_LOSS), 1u);
	EXPECT_EQ(me_node_stat(P.sim.nodes[0]->node, ME_ST_RTO_FIRED), 0u);
	EXPECT_LT(P.sim.now - t0, 2000000u);	// well under the initial RTO
}

// A connection's first packet lost: before any ack of data its RTO comes
// from the keepalives' round trip to the peer (at least rto_min), not
// rto_init -- at the start of an incast a whole first window may be lost,
// and every sender would stall for rto_init.  Both ends: the active one
// writes, the passive one answers a read.
TEST(Window, first_packet_lost__resent_after_rto_min_not_rto_init)
{
	for (int passive = 0; passive < 2; passive++) {
		SCOPED_TRACE(passive ? "the passive end's answer" : "the active end's write");
		Sim sim(15 + passive);
		me_node_cfg ca = module_cfg(1), cb = module_cfg(2);	// rto_init 20 ms, rto_min 5
		setup_pair(sim, 2, {}, ca, cb);
		// Keepalives have measured both paths both ways.
		ASSERT_TRUE(sim.run([&] {
			for (int i = 0; i < 2; i++)
				for (uint32_t l = 0; l < 2; l++) {
					me_path_info_core pi{};
					if (!me_node_path_at(sim.nodes[i]->node, 0, l, &pi) || !pi.rtt_us)
						return false;
				}
			return true;
		}, 500000000));
		me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED);
		ASSERT_NE(c, nullptr);
		Workload w(sim, 15);
		const int from = passive ? 1 : 0;
		const uint8_t type = passive ? ME_PT_READ_RESP : ME_PT_WRITE;
		uint64_t first = 0, again = 0;
		sim.drop_hook = [&](const TxEvent &e) {
			if (!e.parsed || e.node != from || e.h.type != type)
				return false;
			if (!(e.h.flags & ME_F_RTX) && !first) {
				first = e.t;
				return true;
			}
			if (!again)
				again = e.t;
			return false;
		};
		ASSERT_EQ(w.submit(c, 0, passive ? Op::READ : Op::WRITE, 100), 0);
		ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 200000000));
		w.check();
		ASSERT_NE(first, 0u);
		ASSERT_NE(again, 0u);
		EXPECT_GE(again - first, ca.rto_min_ns);
		EXPECT_LT(again - first, ca.rto_min_ns + 2 * ca.tick_ns) << "not rto_init's 20 ms";
	}
}

TEST(Window, rto__backoff_doubles_up_to_cap_then_peer_dead)
{
	me_node_cfg ca = default_cfg(1), cb = default_cfg(2);
	ca.rto_init_ns = ca.rto_min_ns = 1000000;
	ca.rto_max_ns = 8000000;
	ca.max_retries = 7;
	ca.link_dead_ns = ca.peer_dead_ns = 10000000000ull;
	ca.ka_ns = 10000000000ull;
	Pair P(14, 1, {}, ca, cb);
	ASSERT_NE(P.c, nullptr);
	std::vector<uint64_t> times;
	P.sim.tx_hook = [&](const TxEvent &e) {
		if (e.parsed && e.node == 0 && e.h.type == ME_PT_WRITE)
			times.push_back(e.t);
	};
	P.sim.set_wire_up(0, false);	// silently lose everything
	ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 100), 0);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 1000000000));
	ASSERT_EQ(times.size(), 8u);	// first send + max_retries
	std::vector<uint64_t> gaps;
	for (size_t i = 1; i < times.size(); i++)
		gaps.push_back(times[i] - times[i - 1]);
	for (size_t i = 1; i < gaps.size(); i++) {
		double want = std::min(1e6 * (1 << i), 8e6);
		EXPECT_NEAR((double)gaps[i], want, 0.1 * want + 40000) << i;
	}
	EXPECT_EQ(me_conn_state(P.c), ME_CS_DEAD);
	EXPECT_EQ(P.w->ops.begin()->second.status, -ETIMEDOUT);
	P.w->check(false);
}

// While the peer answers (its keepalives keep coming) and the connection
// has a packet or two in flight, its packets are lost to a queue, not to
// an outage: the RTO doubles once, not per timeout (incast: a sender that
// backs off further starves behind the others), and the connection is
// still given up no sooner than max_retries doubling timeouts would take.
TEST(Window, rto__peer_answers__doubles_once_and_gives_up_as_late)
{
	me_node_cfg ca = default_cfg(1), cb = default_cfg(2);
	ca.rto_init_ns = ca.rto_min_ns = 1000000;
	ca.rto_max_ns = 8000000;
	ca.max_retries = 7;
	ca.ka_ns = cb.ka_ns = 500000;
	ca.link_dead_ns = cb.link_dead_ns = 100000000;
	ca.peer_dead_ns = cb.peer_dead_ns = 1000000000;
	Pair P(14, 1, {}, ca, cb);
	ASSERT_NE(P.c, nullptr);
	std::vector<uint64_t> times;
	uint64_t heard = 0;	// frames of the peer that node 0 received
	P.sim.tx_hook = [&](const TxEvent &e) {
		if (e.parsed && e.node == 0 && e.h.type == ME_PT_WRITE)
			times.push_back(e.t);
	};
	// Every data packet of node 0 is lost; everything else gets through.
	P.sim.drop_hook = [&](const TxEvent &e) {
		if (e.node == 1)
			heard++;
		return e.parsed && e.node == 0 && e.h.type == ME_PT_WRITE;
	};
	ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 100), 0);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 1000000000));
	EXPECT_EQ(me_conn_state(P.c), ME_CS_DEAD);
	EXPECT_EQ(P.w->ops.begin()->second.status, -ETIMEDOUT);
	EXPECT_GT(heard, 20u);
	ASSERT_GE(times.size(), 3u);
	// 1 ms, then 2 ms per timeout however many there are.
	EXPECT_NEAR((double)(times[1] - times[0]), 1e6, 0.1e6 + 40000);
	for (size_t i = 2; i < times.size(); i++)
		EXPECT_NEAR((double)(times[i] - times[i - 1]), 2e6, 0.2e6 + 40000) << i;
	// 1 + 2 + 4 + 8 + 8 + 8 + 8 ms: what seven doubling timeouts take.
	const uint64_t give_up = 39000000;
	EXPECT_GE(times.size(), 1 + give_up / 2000000);
	uint64_t died = P.sim.now - times[0];
	EXPECT_GE(died, give_up);
	EXPECT_LE(died, give_up + 2000000 + 100000);
	P.w->check(false);
}

TEST(Path, link_failure__failover_then_recovery)
{
	Pair P(15, 2);
	ASSERT_NE(P.c, nullptr);
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 300000), 0);
	P.sim.run_for(300000);
	P.sim.set_wire_up(0, false);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 500000000));
	P.w->check();
	me_node *a = P.sim.nodes[0]->node;
	EXPECT_EQ(me_link_alive(a, 0), 0);
	EXPECT_GE(me_node_stat(a, ME_ST_LINK_DOWN), 1u);
	EXPECT_GE(me_node_stat(a, ME_ST_TX_RTX_FAIL) + me_node_stat(a, ME_ST_TX_RTX_RTO), 1u);

	// Bring it back: it is detected alive and carries data again.
	P.sim.set_wire_up(0, true);
	ASSERT_TRUE(P.sim.run([&] { return me_link_alive(a, 0) == 1; }, P.sim.now + 50000000));
	uint64_t on0 = 0;
	P.sim.tx_hook = [&](const TxEvent &e) {
		if (e.parsed && e.node == 0 && e.link == 0 && e.h.type == ME_PT_WRITE)
			on0++;
	};
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 150000), 0);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 500000000));
	P.w->check();
	EXPECT_GT(on0, 30u);
}

TEST(Path, unequal_links__split_by_rate)
{
	LinkParams fast, slow;
	fast.gbps = 10;
	slow.gbps = 1;
	Sim sim(16);
	sim.add_node(default_cfg(1));
	sim.add_node(default_cfg(2));
	sim.add_link(0, 1, fast);
	sim.add_link(0, 1, slow);
	for (int n = 0; n < 2; n++) {
		sim.add_region(n, kSrc, 4 << 20, kKey, ME_ACC_READ);
		sim.add_region(n, kDst, 4 << 20, kKey, ME_ACC_WRITE);
		sim.add_region(n, kRd, 4 << 20, kKey, ME_ACC_WRITE);
	}
	me_conn *c = sim.connect(0, 1, 0);
	ASSERT_NE(c, nullptr);
	Workload w(sim, 16);
	for (int i = 0; i < 16; i++)
		ASSERT_EQ(w.submit(c, 0, Op::WRITE, 200000), 0);
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 500000000));
	w.check();
	double f = (double)sim.wires[0].bytes[0], s = (double)sim.wires[1].bytes[0];
	EXPECT_GT(f / (f + s), 0.8);
	EXPECT_GT(s, 0.0);
}

TEST(Access, bad_key_range_permission__error_and_target_unchanged)
{
	Pair P(17, 2);
	ASSERT_NE(P.c, nullptr);
	P.sim.add_region(1, 9, 1 << 20, kKey, ME_ACC_READ);	// no remote write
	struct Case { uint32_t region, key; uint64_t off; uint32_t len; bool read; int want; };
	Case cases[] = {
		{kDst, kKey + 1, 0, 100, false, -EACCES},
		{kDst, kKey + 1, 0, 300000, false, -EACCES},	// multi-packet
		{kDst, kKey, (4 << 20) - 10, 100, false, -ERANGE},
		{kDst, kKey, (4 << 20) - 100000, 200000, false, -ERANGE},
		{9, kKey, 0, 50000, false, -EACCES},		// permission
		{77, kKey, 0, 10, false, -EACCES},		// no such region
		{kSrc, kKey + 1, 0, 100, true, -EACCES},
		{kSrc, kKey, (4 << 20) - 1, 2, true, -ERANGE},
		{kDst, kKey, 0, 100, true, -EACCES},		// not readable
	};
	std::map<uint64_t, int> want;
	uint64_t cookie = 1000;
	for (auto &k : cases) {
		me_rw rw{};
		rw.cookie = cookie;
		rw.len = k.len;
		rw.remote_region = k.region;
		rw.remote_key = k.key;
		rw.remote_off = k.off;
		rw.local_region = k.read ? kRd : kSrc;
		int r = k.read ? me_conn_read(P.c, &rw) : me_conn_write(P.c, &rw);
		ASSERT_EQ(r, 0);
		want[cookie++] = k.want;
	}
	std::map<uint64_t, int> got, count;
	auto &cq = P.sim.nodes[0]->cqes;
	ASSERT_TRUE(P.sim.run([&] {
		for (auto &q : cq)
			if (q.cookie >= 1000 && !got.count(q.cookie))
				got[q.cookie] = q.status, count[q.cookie] = 0;
		return got.size() == want.size();
	}, P.sim.now + 100000000));
	P.sim.run_for(5000000);
	for (auto &q : cq)
		if (q.cookie >= 1000)
			count[q.cookie]++;
	for (auto &[k, v] : want) {
		EXPECT_EQ(got[k], v) << k;
		EXPECT_EQ(count[k], 1) << k;
	}
	for (auto &[id, r] : P.sim.nodes[1]->regions)
		for (size_t i = 0; i < r.wcount.size(); i++)
			ASSERT_EQ(r.wcount[i], 0) << "region " << id;
	for (auto &[id, r] : P.sim.nodes[0]->regions)
		for (size_t i = 0; i < r.wcount.size(); i++)
			ASSERT_EQ(r.wcount[i], 0) << "region " << id;
	// Local validation at submission.
	me_rw rw{};
	rw.local_region = 55;
	rw.len = 1;
	EXPECT_EQ(me_conn_write(P.c, &rw), -ENOENT);
}

// Operations of which a packet left fail with ETIMEDOUT (they may have
// taken effect); those never sent with ECANCELED, and nothing of them
// reached the target.
TEST(Conn, peer_death__pending_ops_fail)
{
	Pair P(18, 2);
	ASSERT_NE(P.c, nullptr);
	for (int i = 0; i < 6; i++)
		ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 400000), 0);
	ASSERT_EQ(P.w->submit(P.c, 0, Op::READ, 400000), 0);
	P.sim.run_for(200000);
	P.sim.nodes[1]->ticking = false;
	P.sim.set_wire_up(0, false);
	P.sim.set_wire_up(1, false);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 2000000000ull));
	EXPECT_EQ(me_conn_state(P.c), ME_CS_DEAD);
	int failed = 0, canceled = 0;
	for (auto &[k, op] : P.w->ops) {
		EXPECT_EQ(op.completions, 1);
		if (op.status == -ECANCELED) {
			// Never sent: not a byte of it at the target.
			canceled++;
			int tgt = op.kind == Op::READ ? op.from : 1 - op.from;
			Region &t = P.sim.nodes[tgt]->regions[dst_region(op.kind == Op::READ)];
			uint64_t off = op.kind == Op::READ ? op.rw.local_off : op.rw.remote_off;
			for (uint32_t i = 0; i < op.rw.len; i++)
				ASSERT_EQ(t.wcount[off + i], 0) << "cookie " << k << " byte " << i;
		} else if (op.status) {
			EXPECT_EQ(op.status, -ETIMEDOUT);
			failed++;
		}
	}
	EXPECT_GT(failed, 0) << "operations sent and then lost";
	EXPECT_GT(canceled, 0) << "operations never sent";
	P.w->check(false);
}

// A peer that acknowledges every packet but never answers (the STATUS of
// a write that failed there, whose acks say a STATUS is due, or a read's
// data, never arrive): past answer_ns the operation fails with ETIMEDOUT
// and the connection is given up, instead of waiting forever (issue 13
// #6).  The peer's own side of the connection may live on.
TEST(Conn, unanswered_operation__fails_after_answer_timeout)
{
	for (uint32_t type : {(uint32_t)ME_PT_STATUS, (uint32_t)ME_PT_READ_RESP}) {
		SCOPED_TRACE(type == ME_PT_STATUS ? "failed write, no STATUS" : "read, no data");
		me_node_cfg ca = default_cfg(1), cb = default_cfg(2);
		ca.answer_ns = 100000000;	// 100 ms
		ca.peer_dead_ns = cb.peer_dead_ns = 10000000000ull;
		Pair P(19, 1, {}, ca, cb);
		ASSERT_NE(P.c, nullptr);
		P.sim.drop_hook = [&](const TxEvent &e) {
			return e.parsed && e.node == 1 && e.h.type == type;
		};
		// A write that succeeds completes by its ack: make it fail.
		if (type == ME_PT_STATUS)
			P.sim.nodes[1]->regions[kDst].access = ME_ACC_READ;
		uint64_t t0 = P.sim.now;
		ASSERT_EQ(P.w->submit(P.c, 0, type == ME_PT_STATUS ? Op::WRITE : Op::READ, 5000), 0);
		ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 2000000000ull))
			<< "the operation never completed";
		EXPECT_EQ(P.w->ops.begin()->second.status, -ETIMEDOUT);
		EXPECT_EQ(me_conn_state(P.c), ME_CS_DEAD);
		EXPECT_GE(P.sim.now - t0, 100000000u);
		EXPECT_LT(P.sim.now - t0, 150000000u);	// answer_ns + one scan period
		P.w->check(false);
		// The peer (which still acks, and has nothing to send) is told
		// with an ABORT, not left holding its side for good.
		ASSERT_TRUE(P.sim.run([&] { return me_conn_state(P.p) == ME_CS_DEAD; },
				      P.sim.now + 10000000));
		EXPECT_EQ(me_node_stat(P.sim.nodes[1]->node, ME_ST_PEER_ABORT), 1u);
	}
}

// An ABORT is a connection frame like any other: one without the
// connection's cookie (a blind sender's) changes nothing.
TEST(Conn, abort_without_the_cookie__ignored)
{
	Pair P(26, 1);
	ASSERT_NE(P.c, nullptr);
	me_hdr h{};
	h.version = ME_WIRE_VERSION;
	h.type = ME_PT_ABORT;
	h.src_node = 1;
	h.src_inc = P.sim.nodes[0]->cfg.incarnation;
	h.dst_node = 2;
	h.dst_inc = P.sim.nodes[1]->cfg.incarnation;
	h.src_conn = me_conn_id(P.c);
	h.dst_conn = me_conn_id(P.p);
	h.cookie = 12345;
	h.x.status = ECONNABORTED;
	std::vector<uint8_t> b(ME_HDR_ABORT);
	me_wire_build(b.data(), &h);
	P.sim.deliver(*P.sim.nodes[1], 0, b);
	P.sim.run_for(1000000);
	EXPECT_EQ(me_conn_state(P.p), ME_CS_ESTABLISHED);
	EXPECT_EQ(me_node_stat(P.sim.nodes[1]->node, ME_ST_RX_COOKIE), 1u);
	EXPECT_EQ(me_node_stat(P.sim.nodes[1]->node, ME_ST_PEER_ABORT), 0u);
}

// Acks of new data and answers that keep coming, however slowly, are
// progress: reads and a write taking several times answer_ns complete,
// also the write whose answer waits behind the reads' data and one
// retransmission of its STATUS.
TEST(Conn, slow_answers__not_an_answer_timeout)
{
	me_node_cfg ca = default_cfg(1), cb = default_cfg(2);
	ca.answer_ns = cb.answer_ns = 50000000;	// 50 ms
	LinkParams lp;
	lp.gbps = 0.1;
	Pair P(20, 1, lp, ca, cb);
	ASSERT_NE(P.c, nullptr);
	uint64_t t0 = P.sim.now;
	ASSERT_EQ(P.w->submit(P.c, 0, Op::READ, 2000000), 0);
	ASSERT_EQ(P.w->submit(P.c, 0, Op::READ, 1000), 0);	// answered after the long one
	ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 2000000), 0);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 2000000000ull));
	EXPECT_GT(P.sim.now - t0, 100000000u) << "the transfer took longer than answer_ns";
	P.w->check();
}

// No state for a sender we do not know: a CONNECT from a node that is not
// the link's peer by HELLO (or from an old incarnation of it) creates no
// connection (issue 13 #3).
TEST(Conn, connect_from_unknown_node__refused)
{
	Sim sim(21);
	setup_pair(sim, 1, LinkParams{}, default_cfg(1), default_cfg(2));
	sim.run_for(5000000);	// HELLOs: node 1 knows node 0 on link 0
	me_node *n = sim.nodes[1]->node;
	ASSERT_EQ(me_peer_alive_links(n, 1), 1u);
	auto forge = [&](uint32_t src, uint32_t inc, uint32_t conn) {
		me_hdr h{};
		h.version = ME_WIRE_VERSION;
		h.type = ME_PT_CONNECT;
		h.src_node = src;
		h.dst_node = 2;
		h.src_inc = inc;
		h.src_conn = conn;
		h.c.isn = 1000;
		h.c.credit = 64;
		h.c.window = 256;
		h.c.mode = ME_MODE_ORDERED;	// the costlier one
		h.c.ops = 64;
		h.c.cookie = 0x1234;
		std::vector<uint8_t> b(ME_HDR_CONN);
		b.resize(me_wire_build(b.data(), &h));
		return b;
	};
	for (uint32_t i = 0; i < 100; i++)
		sim.deliver(*sim.nodes[1], 0, forge(1000 + i, 1, 1));	// strangers
	for (uint32_t i = 0; i < 100; i++)
		sim.deliver(*sim.nodes[1], 0, forge(1, 2, 1 + i));	// node 0, wrong incarnation
	EXPECT_EQ(me_node_nconns(n), 0u) << "a connection was created for an unvalidated sender";
	EXPECT_EQ(me_node_stat(n, ME_ST_CONN_REFUSED), 200u);
	// The real node 0 still connects.
	EXPECT_NE(sim.connect(0, 1, ME_MODE_UNORDERED), nullptr);
}

// Initial sequence numbers come from the platform's random bits: a blind
// sender who knows the incarnation (it is in every HELLO) and the
// connection id cannot compute them (they were mix32(inc * K + id)).
TEST(Conn, initial_sequence_numbers__unpredictable)
{
	Sim sim(24);
	setup_pair(sim, 1, LinkParams{}, default_cfg(1), default_cfg(2));
	std::vector<uint32_t> isns;
	sim.tx_hook = [&](const TxEvent &e) {
		if (e.parsed && (e.h.type == ME_PT_CONNECT || e.h.type == ME_PT_ACCEPT))
			isns.push_back(e.h.c.isn);
	};
	for (int i = 0; i < 8; i++)
		ASSERT_NE(sim.connect(i % 2, 1 - i % 2, ME_MODE_UNORDERED), nullptr);
	auto old_rule = [](uint32_t inc, uint32_t id) {
		uint32_t x = inc * 2654435761u + id;
		x ^= x >> 16;
		x *= 0x7feb352d;
		x ^= x >> 15;
		x *= 0x846ca68b;
		x ^= x >> 16;
		return x;
	};
	ASSERT_GE(isns.size(), 16u);
	std::set<uint32_t> seen(isns.begin(), isns.end());
	EXPECT_GE(seen.size(), 16u) << "initial sequence numbers repeat";
	for (uint32_t id = 1; id <= 8; id++)
		EXPECT_EQ(seen.count(old_rule(1, id)), 0u) << "the ISN of connection " << id
							   << " follows from its id";
}

// A peer may hold at most max_passive live connections to us; closing
// one makes room again.
TEST(Conn, passive_connections_per_peer__bounded)
{
	me_node_cfg ca = default_cfg(1), cb = default_cfg(2);
	cb.max_passive = 3;
	Sim sim(22);
	setup_pair(sim, 1, LinkParams{}, ca, cb);
	std::vector<me_conn *> cs;
	for (int i = 0; i < 3; i++) {
		cs.push_back(sim.connect(0, 1, ME_MODE_UNORDERED));
		ASSERT_NE(cs.back(), nullptr) << i;
	}
	me_conn *extra = nullptr;
	ASSERT_EQ(me_conn_connect(sim.nodes[0]->node, 2, ME_MODE_UNORDERED, &extra), 0);
	sim.run_for(500000000);
	EXPECT_NE(me_conn_state(extra), ME_CS_ESTABLISHED) << "a fourth passive connection";
	EXPECT_GE(me_node_stat(sim.nodes[1]->node, ME_ST_CONN_REFUSED), 1u);
	EXPECT_EQ(me_node_nconns(sim.nodes[1]->node), 3u);
	ASSERT_EQ(me_conn_close(cs[0]), 0);
	ASSERT_TRUE(sim.run([&] { return me_conn_state(cs[0]) == ME_CS_CLOSED; },
			    sim.now + 100000000));
	sim.run_for(10000000);
	EXPECT_NE(sim.connect(0, 1, ME_MODE_UNORDERED), nullptr) << "no room after a close";
}

// Accesses with a wrong key are answered EACCES up to key_fail_max; the
// next one aborts the connection at the target, which tells the initiator
// (ABORT): its other operations fail ECONNRESET at once (issue 13 #4: keys
// cannot be guessed through a connection).  Accesses to a region that does not exist answer EACCES too
// but do not count (a write arriving after its region went is no attack).
TEST(Access, refused_accesses__connection_aborted_after_limit)
{
	me_node_cfg ca = default_cfg(1), cb = default_cfg(2);
	cb.key_fail_max = 4;
	ca.answer_ns = 100000000;
	Pair P(23, 1, {}, ca, cb);
	ASSERT_NE(P.c, nullptr);
	for (int i = 0; i < 12; i++) {
		me_rw rw{};
		rw.cookie = 1000 + i;
		// First four to regions that do not exist, then wrong keys.
		rw.remote_region = i < 4 ? 77 + i : kDst;
		rw.remote_key = kKey + 1 + i;
		rw.len = 100 + i;
		bool read = i % 3 == 2;
		rw.local_region = read ? kRd : kSrc;
		ASSERT_EQ(read ? me_conn_read(P.c, &rw) : me_conn_write(P.c, &rw), 0);
	}
	std::map<uint64_t, int> st;
	P.sim.cqe_hook = [&](Node &n, const me_cqe &q) {
		if (n.idx == 0 && (q.type == ME_CQE_WRITE || q.type == ME_CQE_READ))
			st[q.cookie] = q.status;
	};
	ASSERT_TRUE(P.sim.run([&] { return st.size() == 12; }, P.sim.now + 2000000000ull));
	int denied = 0;
	for (auto &[ck, s] : st) {
		EXPECT_TRUE(s == -EACCES || s == -ECONNRESET || s == -ECANCELED) << ck << ": " << s;
		denied += s == -EACCES;
	}
	EXPECT_EQ(denied, 4 + 4);	// the missing regions, then four wrong keys
	EXPECT_EQ(me_node_stat(P.sim.nodes[1]->node, ME_ST_KEY_REJECTED), 5u);
	EXPECT_EQ(me_node_stat(P.sim.nodes[1]->node, ME_ST_CONN_ABORTED), 1u);
	EXPECT_EQ(me_node_stat(P.sim.nodes[0]->node, ME_ST_PEER_ABORT), 1u);
	EXPECT_EQ(me_conn_state(P.p), ME_CS_DEAD);
	EXPECT_EQ(me_conn_state(P.c), ME_CS_DEAD);
	for (auto &[id, r] : P.sim.nodes[1]->regions)
		for (size_t i = 0; i < r.wcount.size(); i++)
			ASSERT_EQ(r.wcount[i], 0) << "region " << id;
}

// ---- zero copy (me_plat_ops.zc_*): references on an op's payload ----------

// Payload of writes and notifies at least zc_min long goes by reference,
// across loss, duplication and reordering; every reference is dropped once
// acknowledged, and none is used after its operation is gone.
TEST(ZeroCopy, writes_by_reference__references_dropped_after_acks)
{
	LinkParams lp;
	lp.loss = 0.02;
	lp.dup = 0.01;
	lp.reorder = 0.05;
	Pair P(31, 2, lp);
	ASSERT_NE(P.c, nullptr);
	for (int i = 0; i < 10; i++)
		ASSERT_EQ(P.w->submit(P.c, 0, i % 3 ? Op::WRITE : Op::NOTIFY, 100000 + i * 777), 0);
	ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 700), 0);	// below zc_min: copied
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 2000000000ull));
	P.w->check();
	Node &a = *P.sim.nodes[0];
	EXPECT_GT(a.zc_tx_pkts, 100u);
	// The packetizer's bursts held packets (as the module does) and closed
	// every one it opened.
	EXPECT_GT(a.burst_held, 100u);
	EXPECT_EQ(a.burst_bad, 0u);
	EXPECT_EQ(a.burst_depth, 0);
	EXPECT_GT(me_node_stat(a.node, ME_ST_TX_RTX_LOSS) + me_node_stat(a.node, ME_ST_TX_RTX_RTO),
		  0u) << "no retransmission exercised the reference path";
	ASSERT_TRUE(P.sim.run([&] { return P.sim.zc_outstanding() == 0; }, P.sim.now + 100000000));
	EXPECT_EQ(P.sim.zc_bad(), 0u);
	EXPECT_EQ(a.zc_revived, 0u);
}

// An op completes (status from the target) before every one of its
// packets is acknowledged when acks are lost: its entries keep their
// references until the acks come, and retransmissions meanwhile never use
// a reference that is gone.
TEST(ZeroCopy, lost_acks__entries_hold_references_past_completion)
{
	Pair P(32, 1);
	ASSERT_NE(P.c, nullptr);
	uint64_t dropped = 0;
	P.sim.drop_hook = [&](const TxEvent &e) {
		// Node 1's pure acks, every other one, while the writes run.
		return e.parsed && e.node == 1 && e.h.type == ME_PT_ACK && (dropped++ % 2) == 0;
	};
	for (int i = 0; i < 6; i++)
		ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 200000), 0);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 2000000000ull));
	P.w->check();
	P.sim.drop_hook = nullptr;
	ASSERT_TRUE(P.sim.run([&] { return P.sim.zc_outstanding() == 0; }, P.sim.now + 500000000));
	EXPECT_GT(dropped, 0u);
	EXPECT_EQ(P.sim.zc_bad(), 0u);
	EXPECT_EQ(P.sim.nodes[0]->zc_revived, 0u);
}

// The peer dies with writes in flight: ops fail, the entries' and the
// unsent ops' references are all dropped with the connection.
TEST(ZeroCopy, peer_death__every_reference_dropped)
{
	Pair P(33, 2);
	ASSERT_NE(P.c, nullptr);
	for (int i = 0; i < 8; i++)	// more than the window: some never packed
		ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 400000), 0);
	P.sim.run_for(200000);
	EXPECT_GT(P.sim.zc_outstanding(), 0);
	P.sim.nodes[1]->ticking = false;
	P.sim.set_wire_up(0, false);
	P.sim.set_wire_up(1, false);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 2000000000ull));
	EXPECT_EQ(me_conn_state(P.c), ME_CS_DEAD);
	EXPECT_EQ(P.sim.zc_outstanding(), 0);
	EXPECT_EQ(P.sim.zc_bad(), 0u);
	P.w->check(false);
}

// zc_min 0: nothing goes by reference, and no reference is taken.
TEST(ZeroCopy, off__payload_copied)
{
	me_node_cfg ca = default_cfg(1), cb = default_cfg(2);
	ca.zc_min = cb.zc_min = 0;
	Pair P(34, 1, {}, ca, cb);
	ASSERT_NE(P.c, nullptr);
	ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 300000), 0);
	ASSERT_EQ(P.w->submit(P.c, 0, Op::READ, 300000), 0);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 1000000000ull));
	P.w->check();
	EXPECT_EQ(P.sim.nodes[0]->zc_tx_pkts, 0u);
	EXPECT_TRUE(P.sim.nodes[0]->zc_refs.empty());
	EXPECT_EQ(P.sim.nodes[1]->resp_tx_pkts, 0u);
	EXPECT_EQ(P.sim.nodes[1]->resp_next, 1u) << "a reference was taken";
}

// A read's answer of at least zc_min bytes per packet goes by reference to
// the region it reads (resp_hold), across loss, duplication and
// reordering: retransmissions send from the region again, and every
// entry's reference is dropped once acknowledged.
TEST(ZeroCopy, read_answers_by_reference__references_dropped_after_acks)
{
	LinkParams lp;
	lp.loss = 0.02;
	lp.dup = 0.01;
	lp.reorder = 0.05;
	Pair P(35, 2, lp);
	ASSERT_NE(P.c, nullptr);
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(P.w->submit(P.c, 0, Op::READ, 100000 + i * 777), 0);
	ASSERT_EQ(P.w->submit(P.c, 0, Op::READ, 700), 0);	// below zc_min: copied
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 2000000000ull));
	P.w->check();
	Node &b = *P.sim.nodes[1];
	EXPECT_GT(b.resp_tx_pkts, 100u);
	EXPECT_GT(me_node_stat(b.node, ME_ST_TX_RTX_LOSS) + me_node_stat(b.node, ME_ST_TX_RTX_RTO),
		  0u) << "no retransmission exercised the reference path";
	ASSERT_TRUE(P.sim.run([&] { return P.sim.zc_outstanding() == 0; }, P.sim.now + 100000000));
	EXPECT_EQ(P.sim.zc_bad(), 0u);
}

// The reader dies with answers in flight: the answering side's entries
// drop their references on the region when it gives the connection up.
TEST(ZeroCopy, reader_death__answer_references_dropped)
{
	Pair P(36, 2);
	ASSERT_NE(P.c, nullptr);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(P.w->submit(P.c, 0, Op::READ, 400000), 0);
	ASSERT_TRUE(P.sim.run([&] { return !P.sim.nodes[1]->resp_held.empty(); },
			      P.sim.now + 100000000));
	P.sim.nodes[0]->ticking = false;
	P.sim.set_wire_up(0, false);
	P.sim.set_wire_up(1, false);
	ASSERT_TRUE(P.sim.run([&] { return me_conn_state(P.p) == ME_CS_DEAD; },
			      P.sim.now + 20000000000ull));
	EXPECT_TRUE(P.sim.nodes[1]->resp_held.empty());
	EXPECT_EQ(P.sim.zc_bad(), 0u);
}

// The region a read reads is deregistered while its answer is being sent:
// the rest of the answer cannot be built, and the connection ends as when
// a copy fails; the entries' references go with it.
TEST(ZeroCopy, region_gone_during_the_answer__connection_ends)
{
	Pair P(37, 1);
	ASSERT_NE(P.c, nullptr);
	ASSERT_EQ(P.w->submit(P.c, 0, Op::READ, 3 << 20), 0);
	ASSERT_TRUE(P.sim.run([&] { return !P.sim.nodes[1]->resp_held.empty(); },
			      P.sim.now + 100000000));
	P.sim.nodes[1]->regions.erase(kSrc);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 20000000000ull));
	EXPECT_NE(P.w->ops.begin()->second.status, 0);
	EXPECT_EQ(me_conn_state(P.p), ME_CS_DEAD);
	EXPECT_TRUE(P.sim.nodes[1]->resp_held.empty());
	EXPECT_EQ(P.sim.zc_bad(), 0u);
	P.w->check(false);
}

// A connection that dies with data in flight (its acks lost, then the peer
// aborts it) gives its packets' bytes back to the link's in-flight budget:
// before, they stayed counted for good, and once a link_window's worth had
// accumulated no connection could send on the link any more (found by the
// guest ioctl fuzzer as operations that never completed).
TEST(Conn, dead_connection__returns_its_links_budget)
{
	me_node_cfg ca = default_cfg(1), cb = default_cfg(2);
	cb.key_fail_max = 1;
	Pair P(27, 1, {}, ca, cb);
	ASSERT_NE(P.c, nullptr);
	bool drop_acks = true;
	P.sim.drop_hook = [&](const TxEvent &e) {
		return drop_acks && e.parsed && e.node == 1 &&
		       (e.h.type == ME_PT_ACK || e.h.type == ME_PT_NACK);
	};
	// A link_window (64 KiB) and more in flight, never acked.
	ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 200000), 0);
	P.sim.run_for(2000000);
	// Two accesses with a wrong key: the target aborts the connection.
	for (int i = 0; i < 2; i++) {
		me_rw rw{};
		rw.cookie = 900 + i;
		rw.local_region = kSrc;
		rw.remote_region = kDst;
		rw.remote_key = kKey + 1;
		rw.len = 10;
		ASSERT_EQ(me_conn_write(P.c, &rw), 0);
	}
	ASSERT_TRUE(P.sim.run([&] { return me_conn_state(P.c) == ME_CS_DEAD; },
			      P.sim.now + 1000000000ull));
	drop_acks = false;
	me_conn *c2 = P.sim.connect(0, 1, ME_MODE_UNORDERED);
	ASSERT_NE(c2, nullptr);
	Workload w2(P.sim, 28);
	ASSERT_EQ(w2.submit(c2, 0, Op::WRITE, 500000), 0);
	EXPECT_TRUE(P.sim.run([&] { return w2.all_done(); }, P.sim.now + 1000000000ull))
		<< "the link's budget is still held by the dead connection";
}

// Wire 4: a write completes on the ack of its last packet; the target sends
// a STATUS only for a failure.  64 small writes in flight cost about one
// frame each way per write (data; ack), not two (data and the STATUS's
// ack; the ack and the STATUS).
// 64 writes of 8 B in flight at once, checked; counts the frames other than
// HELLO and KEEPALIVE each node sent meanwhile.
static void small_writes(Pair &P, int n, uint64_t frames[2])
{
	frames[0] = frames[1] = 0;
	P.sim.tx_hook = [frames](const TxEvent &e) {
		if (e.parsed && e.h.type != ME_PT_HELLO && e.h.type != ME_PT_KEEPALIVE)
			frames[e.node]++;
	};
	for (int i = 0; i < n; i++)
		ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 8), 0);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 100000000));
	P.w->check();
	P.sim.tx_hook = nullptr;
	printf("%d writes of 8 B%s: %.2f frames per write from the initiator, %.2f from the target\n",
	       n, P.sim.rx_batch_ns ? ", batched receive" : "", (double)frames[0] / n,
	       (double)frames[1] / n);
}

TEST(Msg, small_writes__about_one_frame_each_way)
{
	Pair P(31, 1);
	ASSERT_NE(P.c, nullptr);
	uint64_t frames[2];
	const int n = 64;
	ASSERT_NO_FATAL_FAILURE(small_writes(P, n, frames));
	EXPECT_LE(frames[0], (uint64_t)n * 5 / 4);
	EXPECT_LE(frames[1], (uint64_t)n * 5 / 4);
	EXPECT_EQ(me_node_stat(P.sim.nodes[1]->node, ME_ST_TX_DATA), 0u) << "a STATUS for a success";
}

// Receive batches: a receive thread that hands the engine every frame
// queued since it woke sends one ack per connection per batch, so 64 small
// writes in flight are acked by a few frames, not 64; every write still
// completes once, with its bytes in place.
TEST(Msg, receive_batches__one_ack_per_batch)
{
	Pair P(33, 1);
	ASSERT_NE(P.c, nullptr);
	P.sim.rx_batch_ns = 20000;
	uint64_t frames[2];
	const int n = 64;
	ASSERT_NO_FATAL_FAILURE(small_writes(P, n, frames));
	EXPECT_LE(frames[0], (uint64_t)n * 5 / 4);
	EXPECT_LE(frames[1], (uint64_t)n / 4) << "an ack per write, not per batch";
	EXPECT_GE(frames[1], 1u);
}

// A receive batch that holds a sender's whole window (full packets for
// 1 ms, the module's 512 KiB path window) acks every quarter window of
// bytes, not once at its end: an ack at the end would find the sender
// stopped since the batch began.
TEST(Msg, receive_batches__a_window_of_full_packets_is_acked_within_the_batch)
{
	me_node_cfg ca = module_cfg(1, 9000), cb = module_cfg(2, 9000);
	ca.cc = cb.cc = 0;	// the whole path window from the start
	Pair P(34, 1, {}, ca, cb);
	ASSERT_NE(P.c, nullptr);
	P.sim.rx_batch_ns = 1000000;
	uint64_t data = 0, acks = 0;
	P.sim.tx_hook = [&](const TxEvent &e) {
		if (!e.parsed)
			return;
		if (e.node == 0 && e.h.type == ME_PT_WRITE)
			data++;
		else if (e.node == 1 && e.h.type == ME_PT_ACK)
			acks++;
	};
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(P.w->submit(P.c, 0, Op::WRITE, 256 * 1024), 0);
	ASSERT_TRUE(P.sim.run([&] { return P.w->all_done(); }, P.sim.now + 1000000000));
	P.w->check();
	P.sim.tx_hook = nullptr;
	const me_node_cfg cfg = module_cfg(2, 9000);	// the receiver's
	const uint64_t per_quarter = cfg.link_window / 4 / cfg.mtu + 1;
	printf("%llu data packets, %llu acks (a quarter window is %llu packets)\n",
	       (unsigned long long)data, (unsigned long long)acks, (unsigned long long)per_quarter);
	EXPECT_GE(acks * (per_quarter + 2), data) << "acks only at the ends of batches";
}

// Failures among successes: each failed write completes with the target's
// error (its STATUS), each other one with success (its ack), exactly once,
// also when the STATUS frames are delayed behind the acks that count them,
// and when only the first one is: the second then arrives first, and an
// ack counting one STATUS must not take it for the first (the fabric
// provider lost a refused send that way, its STATUS passed by a later one).
TEST(Msg, failed_writes_among_successes__each_told_its_own)
{
	for (int variant = 0; variant < 6; variant++) {
		int loss = variant % 3;	// 0: none, 1: every first copy, 2: the first STATUS's
		bool batched = variant >= 3;
		SCOPED_TRACE(loss == 0 ? "in order" : loss == 1 ? "STATUS delayed" : "first STATUS overtaken");
		SCOPED_TRACE(batched ? "receive batches" : "frame by frame");
		Pair P(32, 2);
		ASSERT_NE(P.c, nullptr);
		P.sim.rx_batch_ns = batched ? 15000 : 0;
		P.sim.add_region(1, 9, 4096, kKey, ME_ACC_READ);	// not writable
		std::map<uint64_t, std::pair<int, int32_t>> done;	// cookie -> (count, status)
		P.sim.cqe_hook = [&](Node &nd, const me_cqe &q) {
			if (nd.idx == 0 && q.type == ME_CQE_WRITE) {
				done[q.cookie].first++;
				done[q.cookie].second = q.status;
			}
		};
		int statuses = 0;
		if (loss) {
			// The first copy of every STATUS (or of the first one) is
			// lost: the acks that count it arrive long before its
			// retransmission.
			P.sim.drop_hook = [&](const TxEvent &e) {
				if (!e.parsed || e.node != 1 || e.h.type != ME_PT_STATUS ||
				    (e.h.flags & ME_F_RTX))
					return false;
				return loss == 1 || statuses++ == 0;
			};
		}
		for (uint64_t i = 1; i <= 40; i++) {
			me_rw rw{};
			rw.cookie = i;
			rw.len = 100;
			rw.remote_key = kKey;
			rw.local_region = kSrc;
			rw.remote_region = i % 4 == 0 ? 9 : kDst;
			rw.remote_off = i % 4 == 0 ? 0 : i * 128;
			ASSERT_EQ(me_conn_write(P.c, &rw), 0);
		}
		ASSERT_TRUE(P.sim.run([&] { return done.size() == 40; }, P.sim.now + 2000000000ull));
		for (uint64_t i = 1; i <= 40; i++) {
			EXPECT_EQ(done[i].first, 1) << "cookie " << i;
			EXPECT_EQ(done[i].second, i % 4 == 0 ? -EACCES : 0) << "cookie " << i;
		}
		EXPECT_EQ(me_conn_state(P.c), ME_CS_ESTABLISHED);
	}
}
