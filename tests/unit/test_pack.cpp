// SPDX-License-Identifier: GPL-2.0
// PACK (wire 8): small writes queued together (ME_RW_MORE) travel several
// to a frame, and each still takes effect exactly once, with its own
// completion, notification and error.
#include "harness.hpp"

using namespace mesim;

namespace {

struct Frames {
	uint64_t packs = 0, singles = 0;	// first transmissions by node 0
};

// Counts node 0's PACK and single WRITE/NOTIFY frames (not resends).
void count_frames(Sim &sim, Frames &f)
{
	sim.tx_hook = [&f](const TxEvent &e) {
		if (!e.parsed || e.node != 0 || (e.h.flags & ME_F_RTX))
			return;
		if (e.h.type == ME_PT_PACK)
			f.packs++;
		else if (e.h.type == ME_PT_WRITE || e.h.type == ME_PT_NOTIFY)
			f.singles++;
	};
}

// Writes and notifies of 1..300 bytes, groups of `group` posted with
// ME_RW_MORE on all but the group's last; the simulation runs while the
// connection's queue is full.
void post_groups(Workload &w, me_conn *c, int n, int group)
{
	for (int i = 0; i < n; i++) {
		uint32_t len = 1 + (uint32_t)w.sim.rng.below(300);
		Op::Kind k = i % 3 == 1 ? Op::NOTIFY : Op::WRITE;
		uint32_t fl = (i + 1) % group && i + 1 < n ? ME_RW_MORE : 0;
		int r;
		while ((r = w.submit(c, 0, k, len, fl)) == -EAGAIN)
			w.sim.run_for(10000);
		ASSERT_EQ(r, 0) << i;
	}
}

void packed_run(uint64_t seed, uint32_t mode, uint32_t window, LinkParams lp = {})
{
	Sim sim(seed);
	me_node_cfg a = default_cfg(1), b = default_cfg(2);
	b.window = window;
	b.credit = window;
	setup_pair(sim, 1, lp, a, b);
	me_conn *c = sim.connect(0, 1, mode);
	ASSERT_NE(c, nullptr);
	Workload w(sim, seed);
	Frames f;
	count_frames(sim, f);
	const int n = 400;
	post_groups(w, c, n, 16);
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 2000000000ull));
	w.check();
	me_node *node = sim.nodes[0]->node;
	uint64_t packed = me_node_stat(node, ME_ST_TX_PACKED);
	uint64_t packs = me_node_stat(node, ME_ST_TX_PACKS);
	EXPECT_EQ(packs, f.packs);
	// Every op went once, in a PACK or alone.
	EXPECT_EQ(packed + f.singles, (uint64_t)n);
	// The receiver's response ring bounds a PACK: a quarter of its window.
	uint32_t most = std::min<uint32_t>(ME_PACK_MAX, window / 4);
	EXPECT_LE(packed, packs * most);
	// Groups of 16 fill packs of 2..most entries; a lone op is rare
	// (a group's tail that did not fit).
	EXPECT_GE(packed, (uint64_t)n * 3 / 4);
	EXPECT_LE(f.packs + f.singles, (uint64_t)n / 2);
}

}  // namespace

TEST(Pack, queued_writes__packed__each_once)
{
	packed_run(501, ME_MODE_UNORDERED, 256);
}

TEST(Pack, ordered__packed__each_once_in_order)
{
	packed_run(502, ME_MODE_ORDERED, 256);
}

// A window of 8 leaves two entries per PACK (two STATUS credits of 8).
TEST(Pack, small_peer_window__two_per_pack)
{
	packed_run(503, ME_MODE_UNORDERED, 8);
}

// Lost, duplicated and reordered PACKs: resent whole, placed once, every
// notify raised once (Workload::check).
TEST(Pack, lossy_link__each_once)
{
	LinkParams lp;
	lp.loss = 0.05;
	lp.dup = 0.05;
	lp.reorder = 0.05;
	for (uint64_t seed = 510; seed < 514; seed++) {
		SCOPED_TRACE(seed);
		packed_run(seed, seed & 1 ? ME_MODE_ORDERED : ME_MODE_UNORDERED, 256, lp);
	}
}

// Nothing follows the ops queued with ME_RW_MORE: the timer sends them.
TEST(Pack, more_without_a_last__sent_by_the_timer)
{
	Sim sim(520);
	setup_pair(sim, 1, {}, default_cfg(1), default_cfg(2));
	me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED);
	ASSERT_NE(c, nullptr);
	Workload w(sim, 520);
	Frames f;
	count_frames(sim, f);
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(w.submit(c, 0, Op::WRITE, 64, ME_RW_MORE), 0);
	// Queued, not sent, until the next tick.
	sim.run_for(1000);
	EXPECT_EQ(f.packs + f.singles, 0u);
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 100000000));
	w.check();
	EXPECT_EQ(f.packs, 1u);
	EXPECT_EQ(f.singles, 0u);
}

// One entry of a PACK is refused (wrong key, out of range): it alone
// fails, with the error a single write gets; the others take effect.
TEST(Pack, refused_entry__fails_alone)
{
	Sim sim(530);
	setup_pair(sim, 1, {}, default_cfg(1), default_cfg(2));
	me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED);
	ASSERT_NE(c, nullptr);
	Frames f;
	count_frames(sim, f);
	Region &dst = sim.nodes[1]->regions[kDst];
	const uint64_t end = dst.mem.size();
	struct Case { uint64_t key, off; int want; };
	const Case cases[] = {
		{kKey, 0, 0}, {kKey + 1, 100, -EACCES}, {kKey, 200, 0},
		{kKey, end - 10, -ERANGE}, {kKey, 300, 0},
	};
	uint64_t cookie = 1;
	for (const Case &k : cases) {
		me_rw rw{};
		rw.cookie = cookie++;
		rw.len = 20;
		rw.local_region = kSrc;
		rw.local_off = 1000;
		rw.remote_region = kDst;
		rw.remote_key = k.key;
		rw.remote_off = k.off;
		rw.flags = &k == &cases[4] ? 0 : ME_RW_MORE;
		ASSERT_EQ(me_conn_write(c, &rw), 0);
	}
	std::vector<me_cqe> cq;
	sim.cqe_hook = [&cq](Node &, const me_cqe &q) {
		if (q.type == ME_CQE_WRITE)
			cq.push_back(q);
	};
	ASSERT_TRUE(sim.run([&] { return cq.size() >= 5; }, sim.now + 100000000));
	sim.run_for(1000000);
	EXPECT_EQ(f.packs, 1u);
	EXPECT_EQ(f.singles, 0u);
	ASSERT_EQ(cq.size(), 5u);
	for (const me_cqe &q : cq) {
		ASSERT_GE(q.cookie, 1u);
		ASSERT_LE(q.cookie, 5u);
		const Case &k = cases[q.cookie - 1];
		EXPECT_EQ(q.status, k.want) << q.cookie;
		uint32_t written = 0;
		for (uint64_t i = k.off; i < k.off + 20 && i < end; i++)
			written += dst.wcount[i];
		EXPECT_EQ(written, k.want ? 0u : 20u) << q.cookie;
	}
}
