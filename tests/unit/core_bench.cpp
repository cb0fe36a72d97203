// SPDX-License-Identifier: GPL-2.0
// What the portable engine costs per frame, natively: two nodes in one
// process, one link, writes kept in flight, frames passed through
// in-memory queues on one thread, the receiver taking them in batches of
// up to 64 as the module's receive threads do.  Prints the rate and the
// wall-clock time per data frame, both payload copies included (the
// sender's into its frame, the receiver's into its memory).  No kernel,
// no stack: run it under `perf record` to see where the engine's own
// time goes with exact attribution (a guest under TCG smears it).
//
// Usage: me_core_bench [seconds [write-bytes [mtu [in-flight [ns-per-frame]]]]]
//   defaults: 3 s, 1048576-byte writes, MTU 9000, 8 writes in flight,
//   the real clock.  ns-per-frame: a virtual clock instead, moving that
//   much per frame handled (and on to the next timer call when nothing
//   is in flight), the seconds its own: the engine's timed work (acks
//   owed, held, timeouts) then no longer depends on how fast the host
//   runs it, so two runs under valgrind count the same instructions.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

extern "C" {
#include "kernel/core/me_core.h"
}

#include "sim.hpp"

namespace {

constexpr uint32_t kSrcRegion = 1;
constexpr uint32_t kDstRegion = 2;
constexpr uint64_t kKey = 42;
constexpr unsigned kBatch = 64;

struct Node {
	int idx = 0;
	me_node *node = nullptr;
	Node *peer = nullptr;
	std::deque<std::vector<uint8_t>> inbox;	// frames sent to this node
	std::vector<uint8_t> mem;		// both regions: [0, half) src, [half, end) dst
	uint64_t half = 0;
	uint64_t writes_done = 0;
	uint64_t write_errors = 0;
	uint64_t frames_sent = 0;
};

Node &N(void *ctx) { return *static_cast<Node *>(ctx); }

// The virtual clock: its step per frame handled (0: the real clock).
uint64_t vstep = 0;
uint64_t vnow = 1000000000;

uint64_t now_ns(void *)
{
	if (vstep)
		return vnow;
	return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
		std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t addr_of(int idx) { return 0x020000000000ull | (uint64_t)(idx + 1) << 8; }

int tx(void *ctx, uint32_t, uint64_t, const void *buf, uint32_t len)
{
	Node &n = N(ctx);
	n.frames_sent++;
	n.peer->inbox.emplace_back(static_cast<const uint8_t *>(buf),
				   static_cast<const uint8_t *>(buf) + len);
	return 0;
}

bool in_region(const Node &n, uint32_t region, uint64_t off, uint64_t len)
{
	return (region == kSrcRegion || region == kDstRegion) && off <= n.half &&
	       len <= n.half - off;
}

int mr_check(void *ctx, uint32_t region, uint64_t key, uint64_t off, uint64_t len, uint32_t access)
{
	if (key != kKey || region != kDstRegion || access != ME_ACC_WRITE)
		return -EACCES;
	return in_region(N(ctx), region, off, len) ? 0 : -ERANGE;
}

int mr_local(void *ctx, uint32_t region, uint64_t off, uint64_t len, uint32_t)
{
	return in_region(N(ctx), region, off, len) ? 0 : -ERANGE;
}

uint8_t *region_at(Node &n, uint32_t region, uint64_t off)
{
	return n.mem.data() + (region == kDstRegion ? n.half : 0) + off;
}

int mr_write(void *ctx, uint32_t, uint32_t region, uint64_t, uint64_t off, const void *src,
	     uint32_t len, void *)
{
	Node &n = N(ctx);
	if (!in_region(n, region, off, len))
		return -ERANGE;
	memcpy(region_at(n, region, off), src, len);
	return 0;
}

// As the kernel does: a write packet's check and placement in one call.
int mr_place(void *ctx, uint32_t conn, uint32_t /* msg_id */, uint32_t region, uint64_t key,
	     uint64_t addr, uint64_t len, uint64_t off, const void *src, uint32_t n, void *rx)
{
	int err = mr_check(ctx, region, key, addr, len, ME_ACC_WRITE);

	return err || !n ? err : mr_write(ctx, conn, region, key, off, src, n, rx);
}

int mr_read(void *ctx, uint32_t region, uint64_t off, void *dst, uint32_t len)
{
	Node &n = N(ctx);
	if (!in_region(n, region, off, len))
		return -ERANGE;
	memcpy(dst, region_at(n, region, off), len);
	return 0;
}

void complete(void *ctx, const me_cqe *q)
{
	Node &n = N(ctx);
	if (q->type != ME_CQE_WRITE)
		return;
	n.writes_done++;
	if (q->status)
		n.write_errors++;
}

void *alloc(void *, size_t s) { return calloc(1, s); }
void pfree(void *, void *p) { free(p); }

// No zero-copy, pacing or handoff: the engine's own path, copies included.
const me_plat_ops ops = {
	.now_ns = now_ns,
	.tx = tx,
	.mr_check = mr_check,
	.mr_write = mr_write,
	.mr_local = mr_local,
	.mr_read = mr_read,
	.complete = complete,
	.alloc = alloc,
	.free = pfree,
	.zc_tx = nullptr,
	.zc_hold = nullptr,
	.zc_put = nullptr,
	.rx_fill = nullptr,
	.mr_done = nullptr,
	.random_u32 = nullptr,
	.retire = nullptr,
	.port_open = nullptr,
	.tx_burst = nullptr,
	.mr_atomic = nullptr,
	.timer_kick = nullptr,
	.pace_kick = nullptr,
	.pump_kick = nullptr,
	.resp_hold = nullptr,
	.resp_tx = nullptr,
	.resp_put = nullptr,
	.ack_kick = nullptr,	// held acks: the timer's passes send them
	.mr_place = mr_place,
	.msg_end = nullptr,	// no message region: writes only
};

// Everything queued for @n, as receive batches.
void drain(Node &n)
{
	while (!n.inbox.empty()) {
		me_rx_batch b;
		me_core_rx_batch_begin(&b);
		for (unsigned i = 0; i < kBatch && !n.inbox.empty(); i++) {
			std::vector<uint8_t> f = std::move(n.inbox.front());
			n.inbox.pop_front();
			me_core_rx_batch(n.node, &b, 0, addr_of(n.peer->idx), f.data(),
					 (uint32_t)f.size(), nullptr);
			vnow += vstep;
		}
		me_core_rx_batch_end(&b);
	}
}

// The nodes' timers, each when it asked to be called next.
struct Timers {
	uint64_t at[2] = {0, 0};

	void run(Node &a, Node &b, uint64_t now)
	{
		Node *nodes[2] = {&a, &b};
		for (int i = 0; i < 2; i++)
			if (now >= at[i])
				at[i] = now + me_core_timer(nodes[i]->node);
	}

	// Nothing in flight (after what could be posted was): the virtual
	// clock moves on to the next call.
	void idle(const Node &a, const Node &b) const
	{
		if (vstep && a.inbox.empty() && b.inbox.empty())
			vnow = std::max(vnow + vstep, std::min(at[0], at[1]));
	}
};

void turn(Node &a, Node &b, Timers &timers)
{
	timers.run(a, b, now_ns(nullptr));
	drain(a);
	drain(b);
	timers.idle(a, b);
}

bool parse(const char *s, double lo, double hi, double &out)
{
	char *end = nullptr;
	double v = strtod(s, &end);
	if (!end || *end || v < lo || v > hi)
		return false;
	out = v;
	return true;
}

int usage()
{
	fprintf(stderr, "usage: me_core_bench [seconds (0.1-600) [write-bytes (1-67108864) "
			"[mtu (600-9000) [in-flight (1-64) [ns-per-frame (0-1000000)]]]]]\n");
	return 2;
}

} // namespace

int main(int argc, char **argv)
{
	double secs = 3, size = 1 << 20, mtu = 9000, depth = 8, step = 0;
	if (argc > 6 || (argc > 1 && !parse(argv[1], 0.1, 600, secs)) ||
	    (argc > 2 && !parse(argv[2], 1, 64 << 20, size)) ||
	    (argc > 3 && !parse(argv[3], 600, 9000, mtu)) ||
	    (argc > 4 && !parse(argv[4], 1, 64, depth)) ||
	    (argc > 5 && !parse(argv[5], 0, 1000000, step)))
		return usage();
	vstep = (uint64_t)step;
	const uint32_t len = (uint32_t)size, inflight = (uint32_t)depth;
	if ((uint64_t)len * inflight > (1ull << 30)) {
		fprintf(stderr, "me_core_bench: write-bytes x in-flight must not exceed 1 GiB "
				"(each node holds twice that)\n");
		return 2;
	}

	Node a, b;
	a.idx = 0;
	b.idx = 1;
	a.peer = &b;
	b.peer = &a;
	for (Node *n : {&a, &b}) {
		n->half = (uint64_t)len * inflight;
		n->mem.assign(2 * n->half, (uint8_t)(n->idx + 1));
		// As the module configures it (2 MiB of packets per connection,
		// 1 MiB per path), its timeouts long enough for one thread that
		// drains a whole window between two timer calls; no zero copy.
		me_node_cfg cfg = mesim::module_cfg((uint32_t)n->idx + 1, (uint32_t)mtu);
		cfg.zc_min = 0;
		n->node = me_node_create(&cfg, &ops, n);
		if (!n->node || me_link_add(n->node, 0, (uint32_t)mtu, 10000)) {
			fprintf(stderr, "me_core_bench: cannot create node %d\n", n->idx + 1);
			return 1;
		}
	}

	const uint64_t t0 = now_ns(nullptr);
	Timers timers;
	me_conn *c = nullptr;
	while (!me_peer_alive_links(a.node, 2) && now_ns(nullptr) - t0 < 5000000000ull)
		turn(a, b, timers);
	if (!me_peer_alive_links(a.node, 2) || me_conn_connect(a.node, 2, ME_MODE_UNORDERED, &c)) {
		fprintf(stderr, "me_core_bench: the nodes did not find each other\n");
		return 1;
	}
	while (me_conn_state(c) != ME_CS_ESTABLISHED && now_ns(nullptr) - t0 < 10000000000ull)
		turn(a, b, timers);
	if (me_conn_state(c) != ME_CS_ESTABLISHED) {
		fprintf(stderr, "me_core_bench: the connection was not established\n");
		return 1;
	}

	uint64_t posted = 0, turns = 0, idle_turns = 0;
	a.frames_sent = b.frames_sent = 0;
	const uint64_t start = now_ns(nullptr), until = start + (uint64_t)(secs * 1e9);
	for (uint64_t t = start; t < until; t = now_ns(nullptr)) {
		while (posted - a.writes_done < inflight) {
			me_rw rw{};
			rw.cookie = posted + 1;
			rw.len = len;
			rw.local_region = kSrcRegion;
			rw.local_off = (posted % inflight) * len;
			rw.remote_region = kDstRegion;
			rw.remote_off = rw.local_off;
			rw.remote_key = kKey;
			int r = me_conn_write(c, &rw);
			if (r == -EAGAIN)
				break;
			if (r) {
				fprintf(stderr, "me_core_bench: write: %s\n", strerror(-r));
				return 1;
			}
			posted++;
		}
		turns++;
		if (a.inbox.empty() && b.inbox.empty()) {
			idle_turns++;	// nothing in flight: waiting for a timer
			timers.idle(a, b);
		}
		drain(b);
		drain(a);
		timers.run(a, b, vstep ? vnow : t);
	}
	const double el = (double)(now_ns(nullptr) - start) / 1e9;
	const uint64_t data_frames = a.frames_sent;
	printf("%llu writes of %u B in %.2f s: %.1f MB/s; %llu frames (%.1f per MB), "
	       "%llu acks (%.1f per MB); %.3f us per frame, both copies included; "
	       "%.1f%% of turns found nothing in flight\n",
	       (unsigned long long)a.writes_done, len, el,
	       (double)a.writes_done * len / el / 1e6, (unsigned long long)data_frames,
	       (double)data_frames / ((double)a.writes_done * len / 1e6),
	       (unsigned long long)b.frames_sent,
	       (double)b.frames_sent / ((double)a.writes_done * len / 1e6),
	       data_frames ? el * 1e6 / (double)data_frames : 0.0,
	       turns ? 100.0 * (double)idle_turns / (double)turns : 0.0);
	if (vstep)
		printf("(the times are the virtual clock's: %llu ns per frame handled)\n",
		       (unsigned long long)vstep);
	me_node_destroy(a.node);
	me_node_destroy(b.node);
	if (a.write_errors) {
		fprintf(stderr, "me_core_bench: %llu writes failed\n",
			(unsigned long long)a.write_errors);
		return 1;
	}
	return 0;
}
