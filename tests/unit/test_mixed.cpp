// SPDX-License-Identifier: GPL-2.0
// Sustained mixed load (issue 14): both nodes keep operations in flight on
// an ordered and an unordered connection at once, for a bounded time, and
// no operation may take longer than a bound derived from the protocol's
// timers.  Every operation owns a slot of its target region while it is in
// flight, so each completion is checked byte by byte (and each byte was
// written exactly once by it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "sim.hpp"

using namespace mesim;

namespace {

constexpr uint32_t kSrc = 1, kDst = 2, kRd = 3, kKey = 0x5eed;
constexpr uint32_t kSlot = 256 * 1024 + 4096;	// largest op + offset slack
constexpr int kSlots = 8;			// per (node, connection)
constexpr int kConns = 2;			// ordered, unordered
constexpr size_t kMem = (size_t)kSlot * kSlots * kConns;

struct Flight {
	bool busy = false;
	int kind = 0;		// 0 write, 1 notify, 2 read
	me_rw rw{};
	uint64_t t0 = 0;
	std::vector<uint8_t> before;	// wcount of the target range at submit
	bool notified = false;
};

struct Mixed {
	Sim sim;
	me_conn *conn[2][kConns] = {};	// [node][0 ordered, 1 unordered]
	Flight fl[2][kConns][kSlots];
	uint64_t ops_done = 0, bytes_done = 0, max_lat = 0, bad = 0;
	uint64_t max_lat_ordered = 0;
	uint64_t cookie = 1;
	bool stop = false;

	explicit Mixed(uint64_t seed) : sim(seed) {}

	Flight *by_cookie(uint64_t ck, int *node, int *ci)
	{
		// cookie = ((node * kConns + ci) * kSlots + slot) + 1 + 65536 * n
		uint64_t k = (ck - 1) % 65536;
		*node = (int)(k / (kConns * kSlots));
		*ci = (int)(k / kSlots % kConns);
		if (*node > 1)
			return nullptr;
		return &fl[*node][*ci][k % kSlots];
	}

	Region &target(int from, const Flight &f)
	{
		return f.kind == 2 ? sim.nodes[from]->regions[kRd] :
				     sim.nodes[1 - from]->regions[kDst];
	}
	uint64_t toff(const Flight &f) { return f.kind == 2 ? f.rw.local_off : f.rw.remote_off; }
	uint64_t soff(const Flight &f) { return f.kind == 2 ? f.rw.remote_off : f.rw.local_off; }
	Region &source(int from, const Flight &f)
	{
		return sim.nodes[f.kind == 2 ? 1 - from : from]->regions[kSrc];
	}

	void on_cqe(Node &n, const me_cqe &q)
	{
		int node, ci;
		if (q.type == ME_CQE_NOTIFY) {
			Flight *f = by_cookie(q.imm, &node, &ci);
			if (!f || !f->busy || f->kind != 1 || n.idx != 1 - node || f->notified)
				bad++;
			else
				f->notified = true;
			return;
		}
		if (q.type != ME_CQE_WRITE && q.type != ME_CQE_READ)
			return;
		Flight *f = by_cookie(q.cookie, &node, &ci);
		if (!f || !f->busy || n.idx != node || q.status) {
			ADD_FAILURE() << "completion cookie " << q.cookie << " status " << q.status;
			bad++;
			return;
		}
		Region &t = target(node, *f), &s = source(node, *f);
		uint64_t to = toff(*f), so = soff(*f);
		if (memcmp(t.mem.data() + to, s.mem.data() + so, f->rw.len)) {
			ADD_FAILURE() << "bytes wrong, cookie " << q.cookie;
			bad++;
		}
		for (uint32_t i = 0; i < f->rw.len; i++)
			if ((uint8_t)(t.wcount[to + i] - f->before[i]) != 1) {
				ADD_FAILURE() << "byte " << i << " of cookie " << q.cookie
					      << " written " << (int)(uint8_t)(t.wcount[to + i] - f->before[i])
					      << " times";
				bad++;
				break;
			}
		if (f->kind == 1 && !f->notified) {
			ADD_FAILURE() << "notify completed before its notification";
			bad++;
		}
		uint64_t lat = sim.now - f->t0;
		max_lat = std::max(max_lat, lat);
		if (ci == 0)
			max_lat_ordered = std::max(max_lat_ordered, lat);
		ops_done++;
		bytes_done += f->rw.len;
		f->busy = false;
		if (!stop)
			issue(node, ci, (int)(f - fl[node][ci]));
	}

	void issue(int node, int ci, int slot)
	{
		Flight &f = fl[node][ci][slot];
		Rng &r = sim.rng;
		// Sizes 1 B .. 256 KiB, log-uniform, at unaligned offsets.
		uint32_t len = (uint32_t)(1 + r.below(1u << (1 + r.below(18))));
		len = std::min(len, kSlot - 4096);
		f.kind = (int)r.below(3);
		f.rw = me_rw{};
		f.rw.cookie = (uint64_t)((node * kConns + ci) * kSlots + slot) + 1 +
			      65536 * (cookie++);
		f.rw.len = len;
		f.rw.remote_key = kKey;
		f.rw.imm = (uint32_t)((f.rw.cookie - 1) % 65536 + 1);
		uint64_t slot_base = (uint64_t)(ci * kSlots + slot) * kSlot;
		uint64_t dst = slot_base + r.below(4096);
		uint64_t src = r.below(kMem - len);
		if (f.kind == 2) {
			f.rw.remote_region = kSrc;
			f.rw.remote_off = src;
			f.rw.local_region = kRd;
			f.rw.local_off = dst;
		} else {
			f.rw.local_region = kSrc;
			f.rw.local_off = src;
			f.rw.remote_region = kDst;
			f.rw.remote_off = dst;
		}
		Region &t = target(node, f);
		f.before.assign(t.wcount.begin() + (long)dst, t.wcount.begin() + (long)(dst + len));
		f.t0 = sim.now;
		f.busy = true;
		f.notified = false;
		me_conn *c = conn[node][ci];
		int ret = f.kind == 2 ? me_conn_read(c, &f.rw) :
			  f.kind == 1 ? me_conn_notify(c, &f.rw) : me_conn_write(c, &f.rw);
		if (ret) {
			ADD_FAILURE() << "submit: " << ret;
			bad++;
			f.busy = false;
		}
	}

	// Two nodes, `links` links, an ordered and an unordered connection.
	bool setup(int links, const LinkParams &p, uint32_t mtu)
	{
		me_node_cfg ca = module_cfg(1, mtu), cb = module_cfg(2, mtu);
		sim.add_node(ca);
		sim.add_node(cb);
		for (int i = 0; i < links; i++)
			sim.add_link(0, 1, p);
		for (int n = 0; n < 2; n++) {
			sim.add_region(n, kSrc, kMem, kKey, ME_ACC_READ);
			Region &s = sim.nodes[n]->regions[kSrc];
			Rng fill(77 + n);
			for (auto &b : s.mem)
				b = (uint8_t)fill.next();
			sim.add_region(n, kDst, kMem, kKey, ME_ACC_WRITE);
			sim.add_region(n, kRd, kMem, kKey, ME_ACC_WRITE);
		}
		uint32_t pid[kConns];
		for (int ci = 0; ci < kConns; ci++) {
			conn[0][ci] = sim.connect(0, 1, ci == 0 ? ME_MODE_ORDERED : ME_MODE_UNORDERED,
						  &pid[ci]);
			if (!conn[0][ci])
				return false;
			conn[1][ci] = me_conn_get(sim.nodes[1]->node, pid[ci]);
		}
		sim.cqe_hook = [this](Node &n, const me_cqe &q) { on_cqe(n, q); };
		return true;
	}

	bool idle() const
	{
		for (auto &a : fl)
			for (auto &b : a)
				for (auto &f : b)
					if (f.busy)
						return false;
		return true;
	}
};

/*
 * The bound: an operation waits behind at most the other 15 of its node
 * (16 x 256 KiB = 4 MiB, 210 ms at 200 Mbit/s on one link) plus loss
 * recovery: sack-based within reorder_ns, else the RTO (rto_init 20 ms,
 * rto_min 5 ms, doubling per consecutive timeout of the same connection).
 * Even a loss burst costing three backed-off timeouts (20 + 40 + 80 ms)
 * on top of a full queue stays under 1 s; a stall (it lasted as long as
 * the load in issue 14) cannot hide in it.
 */
constexpr uint64_t kBoundNs = 1000000000;

void run(uint64_t seed, int links, double loss, uint32_t mtu, uint64_t dur_ns)
{
	Mixed m(seed);
	LinkParams p;
	p.gbps = 0.2;
	p.delay_ns = 100000;
	p.loss = loss;
	p.reorder = loss ? 0.01 : 0;
	ASSERT_TRUE(m.setup(links, p, mtu));
	/*
	 * Bursts of loss, as a receiver whose ring overflows drops every
	 * frame for a while (seen in the guests): now and then a link loses
	 * everything in one direction for 50-400 us.
	 */
	Rng burst(seed * 7919);
	std::vector<std::pair<uint64_t, uint64_t>> bursts[2][2];	// [node][link]
	for (int n = 0; n < 2; n++)
		for (int l = 0; l < links; l++)
			for (uint64_t t = m.sim.now; t < m.sim.now + dur_ns;) {
				t += 5000000 + burst.below(40000000);
				bursts[n][l].push_back({t, t + 50000 + burst.below(350000)});
			}
	m.sim.drop_hook = [&](const TxEvent &e) {
		for (auto &[a, b] : bursts[e.node][e.link])
			if (e.t >= a && e.t < b)
				return true;
		return false;
	};
	for (int n = 0; n < 2; n++)
		for (int ci = 0; ci < kConns; ci++)
			for (int s = 0; s < kSlots; s++)
				m.issue(n, ci, s);
	uint64_t end = m.sim.now + dur_ns;
	// Watch for a stall while the load runs, not only at the end.
	uint64_t worst_open = 0;
	while (m.sim.now < end && !m.bad) {
		m.sim.run_for(10000000);
		for (auto &a : m.fl)
			for (auto &b : a)
				for (auto &f : b)
					if (f.busy)
						worst_open = std::max(worst_open, m.sim.now - f.t0);
	}
	m.stop = true;
	ASSERT_TRUE(m.sim.run([&] { return m.idle(); }, m.sim.now + 10000000000ull))
		<< "seed " << seed << ": operations never completed";
	printf("  seed %llu links %d loss %.3f mtu %u: %llu ops, %.1f MB, max latency %.1f ms (ordered %.1f ms)\n",
	       (unsigned long long)seed, links, loss, mtu, (unsigned long long)m.ops_done,
	       m.bytes_done / 1e6, m.max_lat / 1e6, m.max_lat_ordered / 1e6);
	EXPECT_EQ(m.bad, 0u) << "seed " << seed;
	EXPECT_LE(std::max(m.max_lat, worst_open), kBoundNs)
		<< "seed " << seed << ": an operation took " << std::max(m.max_lat, worst_open) / 1e6
		<< " ms, bound " << kBoundNs / 1e6 << " ms";
	EXPECT_GT(m.ops_done, 200u) << "seed " << seed;
	// Entries hold payload references until their own ack, which may
	// come after the operation completed (a lost ack): let them settle.
	m.sim.drop_hook = nullptr;
	m.sim.run_for(3000000000ull);
	EXPECT_EQ(m.sim.zc_outstanding(), 0) << "seed " << seed;
}

}  // namespace

TEST(Mixed, ordered_and_unordered__sustained_load_bounded_latency)
{
	for (uint64_t seed = 1; seed <= 6; seed++)
		run(seed, 1 + (int)(seed & 1), seed % 3 ? 0.002 : 0.0, seed < 4 ? 1500 : 9000,
		    4000000000ull);
}
