// SPDX-License-Identifier: GPL-2.0
// Remote atomic operations (wire 11): what each does, that each is applied
// exactly once whatever the links lose or repeat, and what is refused.
#include <set>

#include "harness.hpp"

using namespace mesim;

namespace {

constexpr uint32_t kCtr = 10;	// the target's counters (read + write)
constexpr uint32_t kRo = 11;	// the target's read-only words
constexpr uint32_t kRes = 12;	// the initiator's results

uint64_t load(const Region &r, uint64_t off, uint32_t size)
{
	uint64_t v = 0;
	for (uint32_t i = 0; i < size; i++)
		v |= (uint64_t)r.mem[off + i] << (8 * i);
	return v;
}

void store(Region &r, uint64_t off, uint32_t size, uint64_t v)
{
	for (uint32_t i = 0; i < size; i++)
		r.mem[off + i] = (uint8_t)(v >> (8 * i));
}

struct Done {
	int count = 0;
	int32_t status = 1;
	uint32_t type = 0;
	uint32_t len = 0;
};

struct AtomicPair {
	Sim sim;
	me_conn *c = nullptr;
	std::map<uint64_t, Done> done;	// cookie -> its completions
	uint64_t next = 1;

	explicit AtomicPair(uint64_t seed, const LinkParams &p = LinkParams{}, int links = 2,
			    uint32_t mode = ME_MODE_UNORDERED)
		: sim(seed)
	{
		sim.add_node(default_cfg(1));
		sim.add_node(default_cfg(2));
		for (int i = 0; i < links; i++)
			sim.add_link(0, 1, p);
		sim.add_region(1, kCtr, 4096, kKey, ME_ACC_READ | ME_ACC_WRITE);
		sim.add_region(1, kRo, 4096, kKey, ME_ACC_READ);
		sim.add_region(0, kRes, 1 << 20, kKey, ME_ACC_WRITE);
		sim.cqe_hook = [this](Node &n, const me_cqe &q) {
			if (n.idx != 0 || q.type == ME_CQE_CONN_UP)
				return;
			Done &d = done[q.cookie];
			d.count++;
			d.status = q.status;
			d.type = q.type;
			d.len = q.len;
		};
		c = sim.connect(0, 1, mode);
	}

	me_rw rw(uint32_t aop, uint32_t size, uint32_t region, uint64_t roff, uint64_t loff,
		 uint64_t operand, uint64_t compare = 0)
	{
		me_rw r{};
		r.cookie = next++;
		r.local_region = kRes;
		r.local_off = loff;
		r.remote_region = region;
		r.remote_key = kKey;
		r.remote_off = roff;
		r.len = size;
		r.imm = aop;
		r.operand = operand;
		r.compare = compare;
		return r;
	}

	// Posts one, runs until it completes; its completion.
	Done one(const me_rw &r)
	{
		EXPECT_EQ(me_conn_atomic(c, &r), 0);
		EXPECT_TRUE(sim.run([&] { return done[r.cookie].count > 0; }, sim.now + 100000000));
		return done[r.cookie];
	}

	Region &res() { return sim.nodes[0]->regions[kRes]; }
	Region &ctr() { return sim.nodes[1]->regions[kCtr]; }
};

}  // namespace

TEST(Wire, atomic__malformed)
{
	me_hdr h{};
	h.type = ME_PT_ATOMIC;
	h.src_node = 1;
	h.dst_node = 2;
	h.src_inc = 5;
	h.dst_inc = 6;
	h.src_conn = 1;
	h.dst_conn = 2;
	h.cookie = 7;
	h.payload_len = ME_ATOMIC_PAY;
	h.d.seq = 1;
	h.d.msg_len = 8;
	h.d.imm = ME_AOP_CSWAP;
	h.d.addr = 64;
	std::vector<uint8_t> good(ME_HDR_MAX + ME_ATOMIC_PAY, 0);
	uint32_t hl = me_wire_build(good.data(), &h);
	good.resize(hl + ME_ATOMIC_PAY);
	me_atomic_req a{3, 24, 0x1122334455667788ull, 0x99};
	me_wire_atomic_put(good.data() + hl, &a);

	me_hdr o;
	ASSERT_EQ(me_wire_parse(good.data(), (uint32_t)good.size(), &o), 0);
	me_atomic_req b{};
	me_wire_atomic_get(o.payload, &b);
	EXPECT_EQ(b.lregion, 3u);
	EXPECT_EQ(b.laddr, 24u);
	EXPECT_EQ(b.operand, 0x1122334455667788ull);
	EXPECT_EQ(b.compare, 0x99u);

	auto bad = [&](auto mut) {
		auto c = good;
		mut(c);
		EXPECT_EQ(me_wire_parse(c.data(), (uint32_t)c.size(), &o), ME_EWIRE_FIELD);
	};
	for (uint32_t size : {0u, 1u, 2u, 3u, 5u, 16u})
		bad([&](auto &c) { me_put_be32(&c[52], size); });
	bad([](auto &c) { me_put_be32(&c[64], 0); });			// no operation
	bad([](auto &c) { me_put_be32(&c[64], ME_AOP_MAX_); });	// unknown one
	bad([](auto &c) { me_put_be32(&c[56], 4); });			// msg_off
	bad([&](auto &c) { me_put_be32(&c[hl + 4], 1); });		// reserved
	bad([&](auto &c) { me_put_be32(&c[64], ME_AOP_ADD); });	// compare without CSWAP
	bad([&](auto &c) {						// wider than 4 bytes
		me_put_be32(&c[52], 4);
		me_put_be64(&c[hl + 24], 0);
	});
	bad([&](auto &c) {						// READ takes no operand
		me_put_be32(&c[64], ME_AOP_READ);
		me_put_be64(&c[hl + 24], 0);
	});
	auto shorter = good;
	me_put_be16(&shorter[6], ME_ATOMIC_PAY - 8);
	shorter.resize(shorter.size() - 8);
	EXPECT_EQ(me_wire_parse(shorter.data(), (uint32_t)shorter.size(), &o), ME_EWIRE_FIELD);

	// The same 4-byte operation with a 32-bit operand is fine.
	auto four = good;
	me_put_be32(&four[52], 4);
	me_put_be64(&four[hl + 16], 0xfffffffful);
	me_put_be64(&four[hl + 24], 0x80000000ul);
	EXPECT_EQ(me_wire_parse(four.data(), (uint32_t)four.size(), &o), 0);
}

// Every operation at both sizes: the value found lands at the initiator,
// the value left is what the operation defines.
TEST(Atomic, each_operation__finds_and_leaves_the_right_value)
{
	struct Case {
		uint32_t aop, size;
		uint64_t before, operand, compare, after;
	};
	const uint64_t m5 = (uint64_t)-5, m5_32 = 0xfffffffbu;
	const Case cases[] = {
		{ME_AOP_ADD, 8, 40, 2, 0, 42},
		{ME_AOP_ADD, 8, ~0ull, 2, 0, 1},			// wraps
		{ME_AOP_ADD, 4, 0xffffffffu, 3, 0, 2},		// wraps in 32 bits
		{ME_AOP_AND, 8, 0xff00ff00ff00ff00ull, 0x0ff00ff00ff00ff0ull, 0,
		 0x0f000f000f000f00ull},
		{ME_AOP_OR, 4, 0x0f0f0000u, 0x0000f0f0u, 0, 0x0f0ff0f0u},
		{ME_AOP_XOR, 8, 0xaaaa, 0xffff, 0, 0x5555},
		{ME_AOP_SWAP, 8, 7, 0x123456789abcdef0ull, 0, 0x123456789abcdef0ull},
		{ME_AOP_CSWAP, 8, 7, 9, 7, 9},				// matches
		{ME_AOP_CSWAP, 8, 7, 9, 8, 7},				// does not
		{ME_AOP_CSWAP, 4, 0xffffffffu, 1, 0xffffffffu, 1},
		{ME_AOP_SMIN, 8, 3, m5, 0, m5},
		{ME_AOP_SMAX, 8, 3, m5, 0, 3},
		{ME_AOP_SMIN, 4, 3, m5_32, 0, m5_32},
		{ME_AOP_SMAX, 4, m5_32, 3, 0, 3},
		{ME_AOP_UMIN, 8, 3, m5, 0, 3},
		{ME_AOP_UMAX, 4, 3, m5_32, 0, m5_32},
		{ME_AOP_READ, 8, 0x0102030405060708ull, 0, 0, 0x0102030405060708ull},
	};
	for (uint32_t mode : {ME_MODE_UNORDERED, ME_MODE_ORDERED}) {
		AtomicPair t(21 + mode, LinkParams{}, 2, mode);
		ASSERT_NE(t.c, nullptr);
		uint64_t off = 0;
		for (const Case &k : cases) {
			store(t.ctr(), off, k.size, k.before);
			store(t.res(), off, 8, 0x5a5a5a5a5a5a5a5aull);
			Done d = t.one(t.rw(k.aop, k.size, kCtr, off, off, k.operand, k.compare));
			EXPECT_EQ(d.count, 1);
			EXPECT_EQ(d.status, 0) << "aop " << k.aop;
			EXPECT_EQ(d.type, (uint32_t)ME_CQE_ATOMIC);
			EXPECT_EQ(d.len, k.size);
			EXPECT_EQ(load(t.res(), off, k.size), k.before) << "aop " << k.aop;
			EXPECT_EQ(load(t.ctr(), off, k.size), k.after) << "aop " << k.aop;
			// Nothing beyond its size moved, on either side.
			if (k.size == 4) {
				EXPECT_EQ(load(t.res(), off + 4, 4), 0x5a5a5a5au);
				EXPECT_EQ(load(t.ctr(), off + 4, 4), 0u);
			}
			off += 8;
		}
		EXPECT_EQ(t.sim.nodes[1]->atomics, std::size(cases));
	}
}

// Fetch-adds from two nodes onto one counter over lossy, duplicating,
// reordering links: each applied exactly once, so the counter ends at the
// total and the values found are every value from 0 to it, once each.
TEST(Atomic, fetch_add_on_bad_links__applied_exactly_once)
{
	LinkParams p;
	p.loss = 0.05;
	p.dup = 0.05;
	p.reorder = 0.1;
	Sim sim(33);
	sim.add_node(default_cfg(1));
	sim.add_node(default_cfg(2));
	sim.add_node(default_cfg(3));
	for (int a = 0; a < 3; a++)
		for (int b = a + 1; b < 3; b++)
			for (int i = 0; i < 2; i++)
				sim.add_link(a, b, p);
	sim.add_region(2, kCtr, 4096, kKey, ME_ACC_READ | ME_ACC_WRITE);
	constexpr int kPer = 600;
	for (int n = 0; n < 2; n++)
		sim.add_region(n, kRes, kPer * 8, kKey, ME_ACC_WRITE);
	std::map<std::pair<int, uint64_t>, int> completions;
	int failed = 0;
	sim.cqe_hook = [&](Node &n, const me_cqe &q) {
		if (q.type != ME_CQE_ATOMIC)
			return;
		completions[{n.idx, q.cookie}]++;
		failed += q.status != 0;
	};
	me_conn *c[2] = {sim.connect(0, 2, ME_MODE_UNORDERED), sim.connect(1, 2, ME_MODE_UNORDERED)};
	ASSERT_NE(c[0], nullptr);
	ASSERT_NE(c[1], nullptr);
	int posted[2] = {0, 0};
	auto post_more = [&] {
		for (int n = 0; n < 2; n++) {
			while (posted[n] < kPer) {
				me_rw r{};
				r.cookie = (uint64_t)posted[n] + 1;
				r.local_region = kRes;
				r.local_off = (uint64_t)posted[n] * 8;
				r.remote_region = kCtr;
				r.remote_key = kKey;
				r.remote_off = 16;
				r.len = 8;
				r.imm = ME_AOP_ADD;
				r.operand = 1;
				if (me_conn_atomic(c[n], &r) != 0)
					break;	// queue full: later
				posted[n]++;
			}
		}
		return completions.size() == 2 * kPer;
	};
	ASSERT_TRUE(sim.run(post_more, sim.now + 20000000000ull));
	sim.run_for(10000000);
	EXPECT_EQ(failed, 0);
	for (const auto &[k, cnt] : completions)
		EXPECT_EQ(cnt, 1) << "node " << k.first << " cookie " << k.second;
	EXPECT_EQ(load(sim.nodes[2]->regions[kCtr], 16, 8), 2u * kPer);
	EXPECT_EQ(sim.nodes[2]->atomics, 2u * kPer);
	std::set<uint64_t> found;
	for (int n = 0; n < 2; n++)
		for (int i = 0; i < kPer; i++)
			found.insert(load(sim.nodes[n]->regions[kRes], (uint64_t)i * 8, 8));
	EXPECT_EQ(found.size(), 2u * kPer);
	EXPECT_EQ(*found.begin(), 0u);
	EXPECT_EQ(*found.rbegin(), 2u * kPer - 1);
	EXPECT_GT(me_node_stat(sim.nodes[2]->node, ME_ST_RX_DUP), 0u);	// the links did repeat
}

TEST(Atomic, refused__nothing_changes)
{
	AtomicPair t(44);
	ASSERT_NE(t.c, nullptr);
	store(t.ctr(), 0, 8, 5);
	store(t.res(), 0, 8, 0x77);
	auto refused = [&](me_rw r, int32_t want) {
		Done d = t.one(r);
		EXPECT_EQ(d.count, 1);
		EXPECT_EQ(d.status, want);
		EXPECT_EQ(d.len, 0u);
		EXPECT_EQ(load(t.ctr(), 0, 8), 5u);
		EXPECT_EQ(load(t.res(), 0, 8), 0x77u);
	};
	me_rw r = t.rw(ME_AOP_ADD, 8, kCtr, 0, 0, 1);
	r.remote_key = kKey + 1;
	refused(r, -EACCES);					// wrong key
	refused(t.rw(ME_AOP_ADD, 8, kRo, 0, 0, 1), -EACCES);	// read-only
	refused(t.rw(ME_AOP_ADD, 8, 99, 0, 0, 1), -EACCES);	// no such region
	refused(t.rw(ME_AOP_ADD, 8, kCtr, 4, 0, 1), -EINVAL);	// misaligned
	refused(t.rw(ME_AOP_ADD, 8, kCtr, 4096, 0, 1), -ERANGE);	// beyond
	refused(t.rw(ME_AOP_ADD, 4, kCtr, 4094, 0, 1), -ERANGE);	// across the end
	// A read-only region still answers READ.
	store(t.sim.nodes[1]->regions[kRo], 8, 8, 0xfeed);
	Done d = t.one(t.rw(ME_AOP_READ, 8, kRo, 8, 0, 0));
	EXPECT_EQ(d.status, 0);
	EXPECT_EQ(load(t.res(), 0, 8), 0xfeedu);

	// Refused at submission: nothing is sent.
	me_rw bad = t.rw(0, 8, kCtr, 0, 0, 1);
	EXPECT_EQ(me_conn_atomic(t.c, &bad), -EOPNOTSUPP);
	bad = t.rw(ME_AOP_MAX_, 8, kCtr, 0, 0, 1);
	EXPECT_EQ(me_conn_atomic(t.c, &bad), -EOPNOTSUPP);
	for (uint32_t size : {0u, 1u, 2u, 16u}) {
		bad = t.rw(ME_AOP_ADD, size, kCtr, 0, 0, 1);
		EXPECT_EQ(me_conn_atomic(t.c, &bad), -EINVAL) << size;
	}
	bad = t.rw(ME_AOP_ADD, 4, kCtr, 0, 0, 1ull << 32);
	EXPECT_EQ(me_conn_atomic(t.c, &bad), -EINVAL);
	bad = t.rw(ME_AOP_ADD, 8, kCtr, 0, 0, 1, 2);		// compare without CSWAP
	EXPECT_EQ(me_conn_atomic(t.c, &bad), -EINVAL);
	bad = t.rw(ME_AOP_READ, 8, kCtr, 0, 0, 1);		// READ takes no operand
	EXPECT_EQ(me_conn_atomic(t.c, &bad), -EINVAL);
	bad = t.rw(ME_AOP_ADD, 8, kCtr, 0, (1 << 20) - 4, 1);	// result beyond the local region
	EXPECT_EQ(me_conn_atomic(t.c, &bad), -ERANGE);
	t.sim.run_for(10000000);
	EXPECT_EQ(t.sim.nodes[1]->atomics, 1u);	// only the READ was applied
}
