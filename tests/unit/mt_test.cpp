// SPDX-License-Identifier: GPL-2.0
// Several receive threads per node feed me_core_rx concurrently (as the
// module's per-NIC threads will), with a timer thread per node, real time,
// random loss and duplication.  Built with ASan+UBSan and with TSan.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

extern "C" {
#include "kernel/core/me_core.h"
}

namespace {

constexpr int kLinks = 3;
constexpr int kRxThreads = 4;
constexpr size_t kMem = 4 << 20;
constexpr int kOpsPerRound = 120;
constexpr int kMaxRounds = 4;
constexpr int kMaxOps = kOpsPerRound * kMaxRounds;	// op cookies 1..kMaxOps

struct MtNode;

// A link's frames on their way to a node, each due at `at` (now_ns()).
struct Frame {
	uint64_t at;
	std::vector<uint8_t> bytes;
};

struct Queue {
	std::mutex mu;
	std::condition_variable cv;
	std::deque<Frame> q;	// due times ascend: every frame takes the same delay
};

struct MtNode {
	int idx;
	me_node *node = nullptr;
	MtNode *peer = nullptr;
	Queue rxq[kLinks];
	std::vector<uint8_t> src, dst;
	std::unique_ptr<std::atomic<uint8_t>[]> wcount;
	std::mutex cq_mu;
	std::vector<me_cqe> cqes;
	std::atomic<uint64_t> rng{1};
	uint64_t wire_ns = 0;	// one-way delay of every frame it sends
	// Zero-copy references per op cookie (1..kMaxOps), and misuses: a
	// put below zero, or a transmission with no reference held.
	std::atomic<int> zc_refs[kMaxOps + 1] = {};
	std::atomic<int> zc_bad{0};
	std::atomic<int> misaddressed{0};	// frames sent to a wrong address
	std::atomic<int> zc_tx_pkts{0};
	// Read answers by reference (resp_hold): references held, packets.
	std::atomic<int> resp_refs{0};
	std::atomic<int> resp_tx_pkts{0};
	// Pacing (ops.pace_kick): me_core_pace() is due at pace_at (0: not),
	// run by the node's pacer thread.
	std::mutex pace_mu;
	std::condition_variable pace_cv;
	uint64_t pace_at = 0;
	std::atomic<int> pace_calls{0};
	std::atomic<int> pump_kicks{0};	// ops.pump_kick calls: handed-off acks
};

uint64_t now_ns(void *)
{
	return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
		std::chrono::steady_clock::now().time_since_epoch()).count();
}

MtNode &M(void *ctx) { return *static_cast<MtNode *>(ctx); }

// A node's link-layer address on a link.
uint64_t addr_of(int idx, uint32_t link)
{
	return 0x020000000000ull | (uint64_t)(idx + 1) << 8 | link;
}

int tx(void *ctx, uint32_t link, uint64_t dst, const void *buf, uint32_t len)
{
	if (dst != ME_ADDR_BCAST && dst != addr_of(M(ctx).peer->idx, link))
		M(ctx).misaddressed++;	// not where the peer is

	MtNode &n = M(ctx);
	uint64_t r = n.rng.fetch_add(0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
	r ^= r >> 31;
	int copies = (r % 100) == 0 ? 0 : (r % 100) == 1 ? 2 : 1;	// 1% loss, 1% dup
	Queue &q = n.peer->rxq[link];
	uint64_t at = now_ns(nullptr) + n.wire_ns;
	std::lock_guard<std::mutex> g(q.mu);
	for (int i = 0; i < copies; i++)
		q.q.push_back({at, std::vector<uint8_t>((const uint8_t *)buf, (const uint8_t *)buf + len)});
	q.cv.notify_one();
	return 0;
}

int mr_check(void *, uint32_t region, uint64_t key, uint64_t off, uint64_t len,
	     uint32_t access)
{
	if (key != 42)
		return -EACCES;
	if ((region == 1 && access != ME_ACC_READ) || (region == 2 && access != ME_ACC_WRITE))
		return -EACCES;
	if (region != 1 && region != 2)
		return -ENOENT;
	return off + len <= kMem ? 0 : -ERANGE;
}

int mr_local(void *, uint32_t region, uint64_t off, uint64_t len, uint32_t)
{
	return (region == 1 || region == 2) && off + len <= kMem ? 0 : -ERANGE;
}

int mr_write(void *ctx, uint32_t, uint32_t region, uint64_t, uint64_t off, const void *src,
	     uint32_t len, void *)
{
	MtNode &n = M(ctx);
	if (region != 2)
		return -EACCES;
	memcpy(n.dst.data() + off, src, len);
	for (uint32_t i = 0; i < len; i++)
		n.wcount[off + i].fetch_add(1);
	return 0;
}

int mr_read(void *ctx, uint32_t region, uint64_t off, void *dst, uint32_t len)
{
	MtNode &n = M(ctx);
	memcpy(dst, (region == 1 ? n.src : n.dst).data() + off, len);
	return 0;
}

void complete(void *ctx, const me_cqe *q)
{
	MtNode &n = M(ctx);
	std::lock_guard<std::mutex> g(n.cq_mu);
	n.cqes.push_back(*q);
}

void *alloc(void *, size_t s) { return malloc(s); }
void pfree(void *, void *p) { free(p); }

std::atomic<int> *zc_ref(void *ctx, uint64_t cookie)
{
	MtNode &n = M(ctx);
	if (cookie == 0 || cookie > kMaxOps) {
		n.zc_bad++;
		return nullptr;
	}
	return &n.zc_refs[cookie];
}

void zc_hold(void *ctx, uint64_t cookie)
{
	if (auto *r = zc_ref(ctx, cookie))
		r->fetch_add(1);
}

void zc_put(void *ctx, uint64_t cookie)
{
	if (auto *r = zc_ref(ctx, cookie); r && r->fetch_sub(1) <= 0)
		M(ctx).zc_bad++;
}

int zc_tx(void *ctx, uint32_t link, uint64_t dst, const void *hdr, uint32_t hdr_len, uint32_t region,
	  uint64_t off, uint32_t len, uint64_t cookie)
{
	MtNode &n = M(ctx);
	auto *r = zc_ref(ctx, cookie);
	if (!r || r->load() <= 0 || region != 1 || off + len > kMem) {
		n.zc_bad++;
		return -EINVAL;
	}
	std::vector<uint8_t> pkt(hdr_len + len);
	memcpy(pkt.data(), hdr, hdr_len);
	memcpy(pkt.data() + hdr_len, n.src.data() + off, len);
	n.zc_tx_pkts++;
	return tx(ctx, link, dst, pkt.data(), (uint32_t)pkt.size());
}

// The handle names the region (1, the source) while a reference is held.
uint64_t resp_hold(void *ctx, uint32_t region, uint64_t off, uint32_t len)
{
	MtNode &n = M(ctx);
	if (region != 1 || off + len > kMem)
		return 0;
	n.resp_refs++;
	return region;
}

int resp_tx(void *ctx, uint32_t link, uint64_t dst, const void *hdr, uint32_t hdr_len,
	    uint64_t handle, uint64_t off, uint32_t len)
{
	MtNode &n = M(ctx);
	if (handle != 1 || n.resp_refs.load() <= 0 || off + len > kMem) {
		n.zc_bad++;
		return -EINVAL;
	}
	std::vector<uint8_t> pkt(hdr_len + len);
	memcpy(pkt.data(), hdr, hdr_len);
	memcpy(pkt.data() + hdr_len, n.src.data() + off, len);
	n.resp_tx_pkts++;
	return tx(ctx, link, dst, pkt.data(), (uint32_t)pkt.size());
}

void resp_put(void *ctx, uint64_t handle)
{
	MtNode &n = M(ctx);
	if (handle != 1 || n.resp_refs.fetch_sub(1) <= 0)
		n.zc_bad++;
}

void pace_kick(void *ctx, uint64_t at)
{
	MtNode &n = M(ctx);
	std::lock_guard<std::mutex> g(n.pace_mu);
	if (!n.pace_at || at < n.pace_at) {
		n.pace_at = at;
		n.pace_cv.notify_one();
	}
}

// A handoff (me_rx_batch.handoff): me_core_pace() now, by the pacer thread.
void pump_kick(void *ctx)
{
	M(ctx).pump_kicks++;
	pace_kick(ctx, now_ns(nullptr));
}

const me_plat_ops ops = {now_ns, tx, mr_check, mr_write, mr_local, mr_read,
			 complete, alloc, pfree, zc_tx, zc_hold, zc_put, nullptr, nullptr, nullptr, nullptr,
			 nullptr, nullptr, nullptr, nullptr, pace_kick, pump_kick,
			 resp_hold, resp_tx, resp_put,
			 nullptr /* ack_kick: the timer's passes send held acks */,
			 nullptr /* mr_place: the core's mr_check, then mr_write */,
			 nullptr /* msg_end: no message region */};

enum class Mode {
	plain,
	// Every path paced at 100% with no burst (pacing, path.c), its pumps
	// brought back by a pacer thread per node while the receive and timer
	// threads pump too.
	paced,
	// Receive batches marked handoff (as the module marks those a receive
	// thread sent itself over veth): what their acks release is sent by
	// the pacer thread, while the other threads pump too.
	handoff,
};

// One round: kOpsPerRound ops (cookies round * kOpsPerRound + 1 ...): writes
// and notifies into ascending chunks of b.dst, reads of b.src into
// ascending chunks of a.dst (second half).  Waits for every completion and
// 50 ms more (a late duplicate would land then), checks each op happened
// exactly once with the right bytes, and clears what the round wrote.
void run_round(MtNode &a, MtNode &b, me_conn *c, int round)
{
	const uint64_t first = (uint64_t)round * kOpsPerRound + 1;
	uint64_t woff = 0, roff = kMem / 2;
	struct Rec { int kind; me_rw rw; };
	std::vector<Rec> recs;
	for (int i = 0; i < kOpsPerRound; i++) {
		me_rw rw{};
		uint32_t len = (uint32_t)((i * 7919) % 30000) + (i % 5 == 0 ? 0 : 1);
		int kind = i % 3;
		rw.cookie = first + i;
		rw.len = len;
		rw.remote_key = 42;
		rw.imm = (uint32_t)rw.cookie;
		if (kind == 2) {
			rw.remote_region = 1;
			rw.remote_off = (i * 4099) % (kMem / 2);
			rw.local_region = 2;
			rw.local_off = roff;
			roff += len;
		} else {
			rw.local_region = 1;
			rw.local_off = (i * 577) % (kMem / 2);
			rw.remote_region = 2;
			rw.remote_off = woff;
			woff += len;
		}
		int r;
		do {
			r = kind == 2 ? me_conn_read(c, &rw) :
			    kind == 1 ? me_conn_notify(c, &rw) : me_conn_write(c, &rw);
			if (r == -EAGAIN)
				std::this_thread::sleep_for(std::chrono::microseconds(200));
		} while (r == -EAGAIN);
		ASSERT_EQ(r, 0);
		recs.push_back({kind, rw});
	}
	auto ndone = [&] {
		std::lock_guard<std::mutex> g(a.cq_mu);
		int k = 0;
		for (auto &q : a.cqes)
			if (q.type == ME_CQE_WRITE || q.type == ME_CQE_READ)
				k++;
		return k;
	};
	const int want = (round + 1) * kOpsPerRound;
	auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
	while (ndone() < want && std::chrono::steady_clock::now() < deadline)
		std::this_thread::sleep_for(std::chrono::milliseconds(2));
	std::this_thread::sleep_for(std::chrono::milliseconds(50));

	std::vector<int> count(kOpsPerRound, 0), notes(kOpsPerRound, 0);
	auto slot = [&](uint64_t cookie) -> int {
		return cookie >= first && cookie < first + kOpsPerRound ? (int)(cookie - first) : -1;
	};
	{
		std::lock_guard<std::mutex> g(a.cq_mu);
		for (auto &q : a.cqes)
			if (q.type == ME_CQE_WRITE || q.type == ME_CQE_READ) {
				ASSERT_GE(q.cookie, 1u);
				ASSERT_LE(q.cookie, (uint64_t)kMaxOps);
				if (int k = slot(q.cookie); k >= 0) {
					EXPECT_EQ(q.status, 0);
					count[k]++;
				}
			}
	}
	{
		std::lock_guard<std::mutex> g(b.cq_mu);
		for (auto &q : b.cqes)
			if (q.type == ME_CQE_NOTIFY) {
				ASSERT_GE(q.imm, 1u);
				ASSERT_LE(q.imm, (uint32_t)kMaxOps);
				if (int k = slot(q.imm); k >= 0)
					notes[k]++;
			}
	}
	for (auto &r : recs) {
		int k = slot(r.rw.cookie);
		EXPECT_EQ(count[k], 1) << r.rw.cookie;
		if (r.kind == 1) {
			EXPECT_EQ(notes[k], 1) << r.rw.cookie;
		}
		MtNode &t = r.kind == 2 ? a : b;
		const MtNode &s = r.kind == 2 ? b : a;
		uint64_t to = r.kind == 2 ? r.rw.local_off : r.rw.remote_off;
		uint64_t so = r.kind == 2 ? r.rw.remote_off : r.rw.local_off;
		EXPECT_EQ(memcmp(t.dst.data() + to, s.src.data() + so, r.rw.len), 0) << r.rw.cookie;
		uint32_t wrong = 0;
		for (uint32_t j = 0; j < r.rw.len; j++)
			wrong += t.wcount[to + j].load() != 1;
		EXPECT_EQ(wrong, 0u) << "bytes written twice or never, cookie " << r.rw.cookie;
		memset(t.dst.data() + to, 0, r.rw.len);
		for (uint32_t j = 0; j < r.rw.len; j++)
			t.wcount[to + j].store(0);
	}
}

void concurrent_rx(Mode mode)
{
	const bool paced = mode == Mode::paced;
	MtNode a, b;
	a.idx = 0;
	b.idx = 1;
	a.peer = &b;
	b.peer = &a;
	MtNode *nodes[2] = {&a, &b};
	for (int i = 0; i < 2; i++) {
		MtNode &n = *nodes[i];
		n.src.resize(kMem);
		for (size_t k = 0; k < kMem; k++)
			n.src[k] = (uint8_t)((k * 131 + i * 7) >> 3) | 1;
		n.dst.assign(kMem, 0);
		n.wcount.reset(new std::atomic<uint8_t>[kMem]());
		n.rng = 1234 + i;
		me_node_cfg cfg;
		me_node_cfg_default(&cfg);
		cfg.node_id = i + 1;
		cfg.incarnation = 1;
		cfg.mtu = 9000;
		cfg.window = 128;
		cfg.credit = 128;
		cfg.rto_min_ns = 2000000;
		cfg.link_dead_ns = 2000000000ull;
		cfg.peer_dead_ns = 20000000000ull;
		cfg.ka_ns = 100000000;
		// Give-ups far beyond the round's own 60 s deadline: under TSan
		// on two loaded cores a thread can stall for seconds, and an
		// answer limit of 2 s (the default) or 50 retries (about 3 s)
		// once ended the connection mid-round (-ENOTCONN at the next
		// submit).  A packet really lost for good still fails the round,
		// by its deadline.
		cfg.answer_ns = 120000000000ull;
		cfg.max_retries = 2000;
		cfg.zc_min = 1024;
		if (paced) {
			cfg.pace_pct = 100;
			cfg.pace_burst = 1;
			// A millisecond of wire and a target above what 13 threads
			// on two cores queue: windows grow to link_window (64 KiB),
			// whose pace (a 9000-byte packet per ~140 us) is slower than
			// a pump with work sends, so pacing stops pumps from the
			// first measured round trip on (with the threads' delays
			// alone, the window and not the pace ran out almost always).
			n.wire_ns = 1000000;
			cfg.cc_target_ns = 20000000;
		}
		n.node = me_node_create(&cfg, &ops, &n);
		ASSERT_NE(n.node, nullptr);
		for (int l = 0; l < kLinks; l++)
			ASSERT_EQ(me_link_add(n.node, l, 9000, 10000), 0);
	}

	std::atomic<bool> stop{false};
	std::vector<std::thread> threads;
	for (MtNode *np : nodes) {
		for (int t = 0; t < kRxThreads; t++)
			threads.emplace_back([np, t, mode, &stop] {
				// Threads share the link queues: several threads per link.
				// Every other thread of a link takes what is queued as receive batches
				// (acks deferred to the batch's end), as the module's do.
				while (!stop.load()) {
					Queue &q = np->rxq[t % kLinks];
					std::vector<std::vector<uint8_t>> pkts;
					size_t take = (t / kLinks) % 2 ? 16 : 1;
					{
						std::unique_lock<std::mutex> g(q.mu);
						uint64_t now = now_ns(nullptr);
						if (q.q.empty() || q.q.front().at > now) {
							uint64_t wait = q.q.empty() ? 1000000 :
								std::min<uint64_t>(q.q.front().at - now, 1000000);
							q.cv.wait_for(g, std::chrono::nanoseconds(wait));
							now = now_ns(nullptr);
						}
						while (!q.q.empty() && q.q.front().at <= now &&
						       pkts.size() < take) {
							pkts.push_back(std::move(q.q.front().bytes));
							q.q.pop_front();
						}
					}
					if (pkts.empty())
						continue;
					me_rx_batch b;
					me_core_rx_batch_begin(&b);
					b.handoff = mode == Mode::handoff;
					for (auto &pkt : pkts)
						me_core_rx_batch(np->node, take > 1 ? &b : nullptr, t % kLinks,
								 addr_of(np->peer->idx, t % kLinks), pkt.data(),
								 (uint32_t)pkt.size(), nullptr);
					me_core_rx_batch_end(&b);
				}
			});
		threads.emplace_back([np, &stop] {
			while (!stop.load()) {
				me_core_timer(np->node);
				std::this_thread::sleep_for(std::chrono::microseconds(100));
			}
		});
		threads.emplace_back([np, &stop] {
			while (!stop.load()) {
				{
					std::unique_lock<std::mutex> g(np->pace_mu);
					if (!np->pace_at) {
						np->pace_cv.wait_for(g, std::chrono::milliseconds(1));
						continue;
					}
					uint64_t now = now_ns(nullptr);
					if (now < np->pace_at) {
						np->pace_cv.wait_for(g, std::chrono::nanoseconds(np->pace_at - now));
						continue;
					}
					np->pace_at = 0;
				}
				np->pace_calls++;
				me_core_pace(np->node);
			}
		});
	}

	// However this function returns, every thread stops and is joined,
	// then the nodes are destroyed (dropping what they still hold).
	struct Teardown {
		std::atomic<bool> &stop;
		std::vector<std::thread> &threads;
		MtNode *const *nodes;
		void operator()()
		{
			stop = true;
			for (auto &t : threads)
				if (t.joinable())
					t.join();
			for (int i = 0; i < 2; i++) {
				me_node_destroy(nodes[i]->node);
				nodes[i]->node = nullptr;
			}
		}
		~Teardown()
		{
			if (nodes[0]->node)
				(*this)();
		}
	} teardown{stop, threads, nodes};

	// Discovery first: a connection needs a peer alive on some link.
	auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
	while (!me_peer_alive_links(a.node, 2) && std::chrono::steady_clock::now() < deadline)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	ASSERT_NE(me_peer_alive_links(a.node, 2), 0u) << "node 2 never came alive at node 1";
	me_conn *c = nullptr;
	ASSERT_EQ(me_conn_connect(a.node, 2, ME_MODE_UNORDERED, &c), 0);
	while (me_conn_state(c) != ME_CS_ESTABLISHED &&
	       std::chrono::steady_clock::now() < deadline)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	ASSERT_EQ(me_conn_state(c), ME_CS_ESTABLISHED);

	// A paced run needs node a's pacer to have run at least once (the
	// wire delay above makes that the rule from the first round trip);
	// should a loaded host still keep it from happening, more rounds.
	auto seen = [&] { return !paced || a.pace_calls.load() > 0; };
	int rounds = 0;
	while (rounds < kMaxRounds && (!rounds || !seen())) {
		run_round(a, b, c, rounds++);
		if (::testing::Test::HasFatalFailure())
			return;
	}
	teardown();
	// Every payload reference was dropped, none misused.
	EXPECT_GT(a.zc_tx_pkts.load(), 0);
	for (int i = 0; i <= kMaxOps; i++)
		EXPECT_EQ(a.zc_refs[i].load(), 0) << "cookie " << i;
	EXPECT_GT(b.resp_tx_pkts.load(), 0);
	EXPECT_EQ(b.resp_refs.load(), 0);
	EXPECT_EQ(a.zc_bad.load(), 0);
	EXPECT_EQ(b.zc_bad.load(), 0);
	EXPECT_EQ(a.misaddressed.load() + b.misaddressed.load(), 0);
	if (paced) {
		EXPECT_GT(a.pace_calls.load(), 0)
			<< "pacing never stopped a pump in " << rounds << " rounds";
	} else if (mode == Mode::handoff) {
		EXPECT_GT(a.pump_kicks.load(), 0) << "no ack handed its pump off";
		EXPECT_GT(a.pace_calls.load(), 0);
	} else {
		EXPECT_EQ(a.pace_calls.load() + b.pace_calls.load(), 0);
	}
	if (mode != Mode::handoff) {
		EXPECT_EQ(a.pump_kicks.load() + b.pump_kicks.load(), 0);
	}
}

TEST(MultiThread, concurrent_rx__exactly_once)
{
	concurrent_rx(Mode::plain);
}

TEST(MultiThread, concurrent_rx_paced__exactly_once)
{
	concurrent_rx(Mode::paced);
}

TEST(MultiThread, concurrent_rx_handoff__exactly_once)
{
	concurrent_rx(Mode::handoff);
}

}  // namespace
