// SPDX-License-Identifier: GPL-2.0
#include "sim.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mesim {

static Node &N(void *ctx) { return *static_cast<Node *>(ctx); }

static uint64_t p_now(void *ctx) { return N(ctx).sim->now; }

// Inside a burst a packet waits for its close (a loss there is silent).
static int send_or_hold(Node &n, uint32_t link, uint64_t dst, const void *buf, uint32_t len)
{
	if (!n.burst_depth)
		return n.sim->tx(n, link, dst, buf, len);
	const auto *p = static_cast<const uint8_t *>(buf);
	n.burst.push_back({link, dst, std::vector<uint8_t>(p, p + len)});
	n.burst_held++;
	return 0;
}

static int p_tx(void *ctx, uint32_t link, uint64_t dst, const void *buf, uint32_t len)
{
	return send_or_hold(N(ctx), link, dst, buf, len);
}

static void p_tx_burst(void *ctx, bool open)
{
	Node &n = N(ctx);
	if (open) {
		n.burst_depth++;
		return;
	}
	if (n.burst_depth <= 0) {
		n.burst_bad++;
		return;
	}
	if (--n.burst_depth)
		return;
	auto held = std::move(n.burst);
	n.burst.clear();
	for (const auto &h : held)
		n.sim->tx(n, h.link, h.dst, h.pkt.data(), (uint32_t)h.pkt.size());
}

static int p_mr_check(void *ctx, uint32_t region, uint64_t key, uint64_t off,
		      uint64_t len, uint32_t access)
{
	auto &rs = N(ctx).regions;
	auto it = rs.find(region);
	if (it == rs.end())
		return -ENOENT;
	if (it->second.key != key)
		return -EKEYREJECTED;
	if ((it->second.access & access) != access)
		return -EACCES;
	if (off > it->second.mem.size() || len > it->second.mem.size() - off)
		return -ERANGE;
	return 0;
}

static int p_mr_local(void *ctx, uint32_t region, uint64_t off, uint64_t len,
		      uint32_t)
{
	auto &rs = N(ctx).regions;
	auto it = rs.find(region);
	if (it == rs.end())
		return -ENOENT;
	if (off > it->second.mem.size() || len > it->second.mem.size() - off)
		return -ERANGE;
	return 0;
}

static int p_mr_write(void *ctx, uint32_t conn, uint32_t region, uint64_t key, uint64_t off,
		      const void *src, uint32_t len, void *rx)
{
	Node &n = N(ctx);
	auto it = n.regions.find(region);
	if (it == n.regions.end() || off + len > it->second.mem.size())
		return -ERANGE;	// the core must never get here
	if (n.conn_over[conn])
		n.writes_after_close++;
	n.write_keys.insert(key);
	if (rx) {
		// As a host flipping pages: the payload comes from the frame's
		// own bytes, not from what is in the buffer at src.
		auto *f = static_cast<RxFrame *>(rx);
		auto *s = static_cast<const uint8_t *>(src);
		if (s < f->buf || s + len > f->buf + f->saved.size()) {
			n.rx_bad++;
			return -EFAULT;
		}
		src = f->saved.data() + (s - f->buf);
	}
	memcpy(it->second.mem.data() + off, src, len);
	// A flipping host may defer work on what came with a frame.
	if (rx)
		n.undone[region].push_back({off, len});
	for (uint32_t i = 0; i < len; i++)
		it->second.wcount[off + i]++;
	n.places.push_back({conn, region, off, len});
	const uint64_t page = 4096, first = (off + page - 1) & ~(page - 1);
	return rx && n.copies_pages && first + page <= off + len ? ME_PLACE_COPIED : 0;
}

static int p_mr_read(void *ctx, uint32_t region, uint64_t off, void *dst,
		     uint32_t len)
{
	auto &rs = N(ctx).regions;
	auto it = rs.find(region);
	if (it == rs.end() || off + len > it->second.mem.size())
		return -ERANGE;
	memcpy(dst, it->second.mem.data() + off, len);
	return 0;
}

// Applies an atomic as a host does (one thread at a time here); the
// simulated memory is little-endian whatever the machine running it.
static int p_mr_atomic(void *ctx, uint32_t region, uint64_t off, uint32_t size, uint32_t aop,
		       uint64_t operand, uint64_t compare, uint64_t *old)
{
	Node &n = N(ctx);
	auto it = n.regions.find(region);
	if (it == n.regions.end() || off + size > it->second.mem.size())
		return -ERANGE;	// the core must never get here
	if (off % size)
		return -EINVAL;	// a region's memory starts aligned here
	uint8_t *p = it->second.mem.data() + off;
	uint64_t v = 0;
	for (uint32_t i = 0; i < size; i++)
		v |= (uint64_t)p[i] << (8 * i);
	*old = v;
	v = me_aop_apply(aop, size, v, operand, compare);
	for (uint32_t i = 0; i < size; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	n.atomics++;
	return 0;
}

static void p_rx_fill(void *ctx, void *rx)
{
	auto *f = static_cast<RxFrame *>(rx);
	memcpy(f->buf, f->saved.data(), f->saved.size());
	if (N(ctx).sim->rx_fill_hook)
		N(ctx).sim->rx_fill_hook(N(ctx));
}

// Every placed range must be announced done before its message completes.
static void p_mr_done(void *ctx, uint32_t region, uint64_t off, uint64_t len)
{
	Node &n = N(ctx);
	auto &u = n.undone[region];
	std::erase_if(u, [&](const std::pair<uint64_t, uint32_t> &p) {
		return p.first >= off && p.first + p.second <= off + len;
	});
	n.mr_dones++;
}

static void p_complete(void *ctx, const me_cqe *q)
{
	Node &n = N(ctx);
	if (q->type == ME_CQE_NOTIFY && !q->status) {
		for (const auto &[o, l] : n.undone[q->region])
			if (o >= q->off && o + l <= q->off + q->len)
				n.rx_bad++;
	}
	if (q->type == ME_CQE_WRITE)
		n.zc_engine_done[q->cookie] = true;
	n.cqes.push_back(*q);
	if (q->type == ME_CQE_CONN_CLOSED || q->type == ME_CQE_CONN_DEAD)
		n.conn_over[q->conn] = true;
	if (n.sim->cqe_hook)
		n.sim->cqe_hook(n, *q);
}

static void *p_alloc(void *, size_t size) { return malloc(size); }
static void p_free(void *, void *p) { free(p); }

static void p_zc_hold(void *ctx, uint64_t cookie)
{
	Node &n = N(ctx);
	int64_t &r = n.zc_refs[cookie];
	if (r == 0 && n.zc_engine_done[cookie]) {
		n.zc_revived++;
		n.zc_engine_done[cookie] = false;
	}
	r++;
}

static void p_zc_put(void *ctx, uint64_t cookie)
{
	Node &n = N(ctx);
	if (--n.zc_refs[cookie] < 0) {
		n.zc_bad++;
		n.zc_refs[cookie] = 0;
	}
}

// Sends header + region bytes, as a module builds a frame from pinned pages.
static int p_zc_tx(void *ctx, uint32_t link, uint64_t dst, const void *hdr, uint32_t hdr_len,
		   uint32_t region, uint64_t off, uint32_t len, uint64_t cookie)
{
	Node &n = N(ctx);
	if (n.zc_refs[cookie] <= 0) {
		n.zc_bad++;
		return -EINVAL;
	}
	auto it = n.regions.find(region);
	if (it == n.regions.end() || off + len > it->second.mem.size())
		return -ERANGE;
	std::vector<uint8_t> pkt(hdr_len + len);
	memcpy(pkt.data(), hdr, hdr_len);
	memcpy(pkt.data() + hdr_len, it->second.mem.data() + off, len);
	n.zc_tx_pkts++;
	return send_or_hold(n, link, dst, pkt.data(), (uint32_t)pkt.size());
}

// A read's answer by reference: the handle names the region while held.
static uint64_t p_resp_hold(void *ctx, uint32_t region, uint64_t off, uint32_t len)
{
	Node &n = N(ctx);
	auto it = n.regions.find(region);
	if (it == n.regions.end() || off + len > it->second.mem.size())
		return 0;
	n.resp_held[n.resp_next] = region;
	return n.resp_next++;
}

static int p_resp_tx(void *ctx, uint32_t link, uint64_t dst, const void *hdr, uint32_t hdr_len,
		     uint64_t handle, uint64_t off, uint32_t len)
{
	Node &n = N(ctx);
	auto h = n.resp_held.find(handle);
	if (h == n.resp_held.end()) {
		n.zc_bad++;
		return -EINVAL;
	}
	auto it = n.regions.find(h->second);
	if (it == n.regions.end() || off + len > it->second.mem.size())
		return -ERANGE;
	std::vector<uint8_t> pkt(hdr_len + len);
	memcpy(pkt.data(), hdr, hdr_len);
	memcpy(pkt.data() + hdr_len, it->second.mem.data() + off, len);
	n.resp_tx_pkts++;
	return send_or_hold(n, link, dst, pkt.data(), (uint32_t)pkt.size());
}

static void p_resp_put(void *ctx, uint64_t handle)
{
	Node &n = N(ctx);
	if (!n.resp_held.erase(handle))
		n.zc_bad++;
}

// Deterministic per seed, like everything else in the simulator.
static uint32_t p_random_u32(void *ctx) { return (uint32_t)N(ctx).sim->rng.next(); }

// Nothing runs concurrently with the timer that retires it: freed at once.
static void p_retire(void *ctx, me_conn *c)
{
	N(ctx).retired.push_back(me_conn_id(c));
	me_conn_free(c);
}

static bool p_port_open(void *ctx, uint32_t port) { return N(ctx).open_ports.count(port); }

// As a host with one lookup for both (the kernel's): the check, then the write.
static int p_mr_place(void *ctx, uint32_t conn, uint32_t msg_id, uint32_t region,
		      uint64_t key, uint64_t addr, uint64_t len, uint64_t off, const void *src,
		      uint32_t n, void *rx)
{
	int err = p_mr_check(ctx, region, key, addr, len, ME_ACC_WRITE);

	N(ctx).mr_places++;
	N(ctx).msg_bytes[{conn, msg_id}] += n;
	return err || !n ? err : p_mr_write(ctx, conn, region, key, off, src, n, rx);
}

// As a host that gathers messages (the kernel's sends): records each end.
static int p_msg_end(void *ctx, uint32_t conn, uint32_t msg_id, uint32_t region,
		     uint64_t /* key */, uint64_t len, int err)
{
	Node &n = N(ctx);
	uint64_t placed = n.msg_bytes[{conn, msg_id}];

	n.msg_bytes.erase({conn, msg_id});
	n.msg_ends.push_back({conn, msg_id, region, len, placed, err});
	return err ? err : n.msg_end_ret;
}

static void p_timer_kick(void *ctx) { N(ctx).sim->timer_kick(N(ctx)); }
static void p_pace_kick(void *ctx, uint64_t at) { N(ctx).sim->pace_kick(N(ctx), at); }
static void p_ack_kick(void *ctx, uint64_t at) { N(ctx).sim->ack_kick(N(ctx), at); }

static const me_plat_ops plat = {
	p_now, p_tx, p_mr_check, p_mr_write, p_mr_local, p_mr_read,
	p_complete, p_alloc, p_free, p_zc_tx, p_zc_hold, p_zc_put,
	p_rx_fill, p_mr_done, p_random_u32, p_retire, p_port_open, p_tx_burst,
	p_mr_atomic, p_timer_kick, p_pace_kick,
	nullptr,	// pump_kick: no receive batch here asks for a handoff
	p_resp_hold, p_resp_tx, p_resp_put, p_ack_kick, p_mr_place, p_msg_end,
};

const me_plat_ops *sim_plat() { return &plat; }

int64_t Sim::zc_outstanding() const
{
	int64_t s = 0;
	for (const auto &n : nodes)
		s += n->zc_outstanding();
	return s;
}

uint64_t Sim::zc_bad() const
{
	uint64_t s = 0;
	for (const auto &n : nodes)
		s += n->zc_bad;
	return s;
}

me_node_cfg default_cfg(uint32_t id, uint32_t inc)
{
	me_node_cfg c;
	me_node_cfg_default(&c);
	c.node_id = id;
	c.incarnation = inc;
	c.mtu = 9000;
	c.zc_min = 1024;	// payload of 1 KiB and more by reference
	snprintf(c.name, sizeof(c.name), "node%u", id);
	return c;
}

me_node_cfg module_cfg(uint32_t id, uint32_t mtu)
{
	me_node_cfg c = default_cfg(id);
	c.mtu = mtu;
	c.window = 1024;
	while ((uint64_t)c.window * mtu > 2048 * 1024)
		c.window /= 2;
	c.credit = c.window;
	c.ops = 256;
	c.ack_every = 16;
	c.link_window = 1024 * 1024;
	c.max_retries = 12;
	c.dupthresh = 16;
	c.reorder_ns = 2000000;
	c.tick_ns = 1000000;
	c.rto_init_ns = 20000000;
	c.rto_min_ns = 5000000;
	c.rto_max_ns = 1000000000;
	c.connect_rto_ns = 100000000;
	c.hello_ns = 100000000;
	c.ka_ns = 20000000;
	c.link_dead_ns = 150000000;
	c.max_peers = 256;
	c.peer_dead_ns = 3000000000ull;
	c.rate_ns = 10000000;
	c.cc_init = 2 * mtu;
	c.cc_target_ns = 100000;
	return c;
}

Sim::Sim(uint64_t seed) : rng(seed) {}

Sim::~Sim()
{
	for (auto &n : nodes)
		if (n->node)
			me_node_destroy(n->node);
	// Every zero-copy reference is dropped at the latest when its node
	// is destroyed (me_plat.h): anything else is a leak in the core.
	for (auto &n : nodes)
		if (n->rx_bad) {
			fprintf(stderr, "sim: node %d: %llu payload bytes read outside the host's frame or announced before mr_done\n",
				n->idx, (unsigned long long)n->rx_bad);
			abort();
		}
	if (zc_outstanding() || zc_bad()) {
		fprintf(stderr, "sim: %lld zero-copy references leaked, %llu misused\n",
			(long long)zc_outstanding(), (unsigned long long)zc_bad());
		abort();
	}
}

void Sim::start_node(Node &n)
{
	n.node = me_node_create(&n.cfg, &plat, &n);
	if (!n.node)
		abort();
	for (size_t l = 0; l < n.link_wire.size(); l++) {
		double gbps;
		if (n.link_wire[l] >= 0) {
			const Wire &w = wires[n.link_wire[l]];
			int d = w.node[0] == n.idx && w.link[0] == l ? 0 : 1;
			gbps = w.p[d].gbps;
		} else {
			gbps = ports[n.link_port[l]].up.gbps;
		}
		me_link_add(n.node, (uint32_t)l, 9216, (uint32_t)(gbps * 1000));
	}
}

Node &Sim::add_node(const me_node_cfg &cfg)
{
	auto n = std::make_unique<Node>();
	n->sim = this;
	n->idx = (int)nodes.size();
	n->cfg = cfg;
	nodes.push_back(std::move(n));
	Node &r = *nodes.back();
	start_node(r);
	// Hosts' timers keep their own phases: the same one on every node
	// would time their retransmissions together (an incast's senders).
	// Derived from the index, so that the seed's draws stay the tests'.
	schedule_tick(r, now + 1 + (((uint64_t)r.idx + 1) * 0x9E3779B97F4A7C15ull >> 24) %
				     cfg.tick_ns);
	return r;
}

int Sim::add_link(int a, int b, const LinkParams &pa, const LinkParams &pb)
{
	Wire w;
	w.node[0] = a;
	w.node[1] = b;
	w.link[0] = (uint32_t)nodes[a]->link_wire.size();
	w.link[1] = (uint32_t)nodes[b]->link_wire.size();
	w.p[0] = pa;
	w.p[1] = pb;
	wires.push_back(w);
	int id = (int)wires.size() - 1;
	nodes[a]->link_wire.push_back(id);
	nodes[a]->link_port.push_back(-1);
	nodes[b]->link_wire.push_back(id);
	nodes[b]->link_port.push_back(-1);
	me_link_add(nodes[a]->node, w.link[0], 9216, (uint32_t)(pa.gbps * 1000));
	me_link_add(nodes[b]->node, w.link[1], 9216, (uint32_t)(pb.gbps * 1000));
	return id;
}

void Sim::restart(int idx, uint32_t new_inc)
{
	Node &n = *nodes[idx];
	me_node_destroy(n.node);
	n.cfg.incarnation = new_inc;
	n.conn_over.clear();
	n.pace_at = 0;		// the old engine's requests die with it
	n.ack_at = 0;
	n.ack_gen++;
	start_node(n);
}

void Sim::add_region(int node, uint32_t id, size_t size, uint64_t key,
		     uint32_t access, uint8_t fill)
{
	Region r;
	r.mem.assign(size, fill);
	r.wcount.assign(size, 0);
	r.key = key;
	r.access = access;
	nodes[node]->regions[id] = std::move(r);
}

void Sim::at(uint64_t t, std::function<void()> fn)
{
	q.push(Ev{t, evseq++, std::move(fn)});
}

void Sim::schedule_tick(Node &n, uint64_t t)
{
	const uint64_t gen = ++n.tick_gen;
	const int idx = n.idx;
	n.next_tick = t;
	at(t, [this, idx, gen] { tick(idx, gen); });
}

void Sim::tick(int idx, uint64_t gen)
{
	Node &n = *nodes[idx];
	if (gen != n.tick_gen)
		return;		// a kick moved it
	if (now < n.frozen_until) {
		at(n.frozen_until, [this, idx, gen] { tick(idx, gen); });
		return;
	}
	uint64_t next = n.cfg.tick_ns;
	if (n.ticking) {
		next = me_core_timer(n.node);
		n.timer_passes++;
	}
	schedule_tick(n, now + next);
}

void Sim::timer_kick(Node &n)
{
	n.timer_kicks++;
	if (n.next_tick > now + n.cfg.tick_ns)
		schedule_tick(n, now + n.cfg.tick_ns);
}

void Sim::pace_kick(Node &n, uint64_t at)
{
	if (n.pace_at && n.pace_at <= at)
		return;		// a call is due sooner
	n.pace_at = at;
	me_node *engine = n.node;
	int idx = n.idx;
	this->at(std::max(at, now), [this, idx, engine] {
		Node &m = *nodes[idx];
		if (m.node != engine)
			return;	// restarted since
		if (now < m.frozen_until) {
			pace_kick(m, m.frozen_until);
			return;
		}
		m.pace_at = 0;
		m.pace_calls++;
		me_core_pace(m.node);
	});
}

void Sim::ack_kick(Node &n, uint64_t at)
{
	if (!at) {
		if (n.ack_at && !me_core_acks_pending(n.node)) {
			n.ack_at = 0;
			n.ack_gen++;
			n.ack_cancels++;
		}
		return;
	}
	if (n.ack_at && n.ack_at <= at)
		return;		// a call is due sooner
	n.ack_at = at;
	const uint64_t gen = ++n.ack_gen;
	me_node *engine = n.node;
	int idx = n.idx;
	this->at(std::max(at, now), [this, idx, engine, gen] {
		Node &m = *nodes[idx];
		if (m.node != engine || m.ack_gen != gen)
			return;	// restarted, dropped or moved since
		m.ack_at = 0;
		if (now < m.frozen_until) {
			ack_kick(m, m.frozen_until);
			return;
		}
		m.ack_calls++;
		me_core_acks(m.node);
	});
}

bool Sim::run(const std::function<bool()> &pred, uint64_t limit)
{
	while (!pred()) {
		if (q.empty() || q.top().t > limit) {
			now = limit;
			return pred();
		}
		Ev e = q.top();
		q.pop();
		now = e.t;
		e.fn();
	}
	return true;
}

void Sim::run_for(uint64_t dt)
{
	run([] { return false; }, now + dt);
}

static uint32_t seqmax(uint32_t a, uint32_t b)
{
	return me_seq_lt(a, b) ? b : a;
}

void Sim::credit_check(int node, const me_hdr &h)
{
	int dst = (int)h.dst_node - 1;
	switch (h.type) {
	case ME_PT_CONNECT:
		conn_req[{node, h.src_conn}] = {h.c.isn, h.c.credit};
		break;
	case ME_PT_ACCEPT: {
		auto it = conn_req.find({dst, h.dst_conn});
		if (it == conn_req.end())
			break;
		auto k1 = std::make_pair(node, h.src_conn);
		auto k2 = std::make_pair(dst, h.dst_conn);
		uint32_t r1 = h.c.isn + it->second.second;
		uint32_t r2 = it->second.first + h.c.credit;
		right[k1] = right.count(k1) ? seqmax(right[k1], r1) : r1;
		right[k2] = right.count(k2) ? seqmax(right[k2], r2) : r2;
		break;
	}
	case ME_PT_ACK:
	case ME_PT_NACK: {
		auto k = std::make_pair(dst, h.dst_conn);
		if (right.count(k))
			right[k] = seqmax(right[k], h.a.right);
		break;
	}
	default:
		if (me_pt_sequenced(h.type)) {
			data_pkts++;
			auto k = std::make_pair(node, h.src_conn);
			if (!right.count(k) || !me_seq_lt(h.d.seq, right[k]))
				credit_violations++;
		}
	}
}

// The packets of a frame (an ack may carry one more), each checked
// against the credit its receiver gave and shown to tx_hook.
std::vector<TxEvent> Sim::frame_events(Node &n, uint32_t link, const void *buf, uint32_t len)
{
	std::vector<TxEvent> evs;
	const uint8_t *p = (const uint8_t *)buf;
	for (;;) {
		TxEvent te{n.idx, link, now, {}, false};
		te.carried = !evs.empty();
		te.raw = p;
		te.raw_len = len;
		te.parsed = me_wire_parse(p, len, &te.h) == 0;
		if (te.parsed)
			credit_check(n.idx, te.h);
		if (tx_hook)
			tx_hook(te);
		evs.push_back(te);
		if (te.carried || !te.parsed || !(te.h.flags & ME_F_CARRY))
			return evs;
		p += ME_HDR_ACK;
		len -= ME_HDR_ACK;
	}
}

// drop_hook sees every packet of the frame; one it drops takes the frame.
bool Sim::frame_dropped(const std::vector<TxEvent> &evs)
{
	bool drop = false;
	if (drop_hook)
		for (const auto &te : evs)
			drop = drop_hook(te) || drop;
	return drop;
}

int Sim::tx(Node &n, uint32_t link, uint64_t dst, const void *buf, uint32_t len)
{
	if (link >= n.link_wire.size())
		return -EINVAL;
	if (n.link_port[link] >= 0)
		return port_tx(n, link, dst, buf, len);
	int wid = n.link_wire[link];
	Wire &w = wires[wid];
	int d = w.node[0] == n.idx && w.link[0] == link ? 0 : 1;
	const LinkParams &p = w.p[d];

	const auto evs = frame_events(n, link, buf, len);
	uint64_t ser = (uint64_t)((len + kEthOverhead) * 8 / p.gbps);
	uint64_t start = std::max(now, w.busy_until[d]);
	w.busy_until[d] = start + ser;
	for (const auto &te : evs)
		if (te.parsed && me_pt_sequenced(te.h.type))
			w.bytes[d] += te.h.payload_len;
	if (!w.up)
		return 0;	// a cut cable: the sender cannot tell
	if (frame_dropped(evs))
		return 0;
	if (rng.uni() < p.loss)
		return 0;
	int copies = rng.uni() < p.dup ? 2 : 1;
	std::vector<uint8_t> pkt((const uint8_t *)buf, (const uint8_t *)buf + len);
	int to = w.node[1 - d];
	uint32_t tolink = w.link[1 - d];
	// A NIC takes frames for its address and broadcasts only.
	if (dst != ME_ADDR_BCAST && dst != addr(to, tolink)) {
		misaddressed++;
		return 0;
	}
	for (int i = 0; i < copies; i++) {
		uint64_t arr = start + ser + p.delay_ns + (uint64_t)i * 1000;
		if (rng.uni() < p.reorder)
			arr += rng.below(p.reorder_ns);
		uint64_t src = addr(n.idx, link);
		at(arr, [this, to, tolink, wid, src, pkt] {
			if (!wires[wid].up)
				return;
			deliver(*nodes[to], tolink, src, pkt);
		});
	}
	return 0;
}

// Data frames go in as a flipping host hands them over: the payload is
// scribbled in the buffer and only reachable through mr_write's rx (or
// after rx_fill), so a core reading payload any other way reads garbage.
void Sim::deliver(Node &n, uint32_t link, uint64_t src, std::vector<uint8_t> pkt)
{
	if (!rx_batch_ns && now >= n.frozen_until) {
		deliver_one(n, link, src, std::move(pkt), nullptr);
		return;
	}
	n.rxq[link].push_back({src, now, std::move(pkt)});
	if (!n.rx_armed[link]) {
		n.rx_armed[link] = true;
		at(now + rx_batch_ns, [this, &n, link] { rx_drain(n, link); });
	}
}

void Sim::rx_handle(Node &n, uint32_t link, std::vector<Node::Queued> &q)
{
	for (size_t i = 0; i < q.size();) {
		me_rx_batch b;
		me_core_rx_batch_begin(&b);
		for (size_t k = 0; k < kRxBatch && i < q.size(); k++, i++) {
			b.rx_ns = q[i].t;	// round trips without our queue
			deliver_one(n, link, q[i].src, std::move(q[i].pkt), &b);
		}
		me_core_rx_batch_end(&b);
	}
}

void Sim::rx_drain(Node &n, uint32_t link)
{
	auto &q = n.rxq[link];
	if (now < n.frozen_until) {
		at(n.frozen_until + 1, [this, &n, link] { rx_drain(n, link); });
		return;
	}
	if (!rx_cpu_ns_per_kb) {
		auto all = std::move(q);
		q.clear();
		n.rx_armed[link] = false;
		rx_handle(n, link, all);
		return;
	}
	if (n.rx_cpu_free > now) {
		at(n.rx_cpu_free, [this, &n, link] { rx_drain(n, link); });
		return;
	}
	// One batch, handled when the CPU has done its work; then the
	// thread goes on after whoever waited for the CPU meanwhile.
	size_t cnt = std::min(q.size(), kRxBatch);
	auto batch = std::make_shared<std::vector<Node::Queued>>(
		std::make_move_iterator(q.begin()), std::make_move_iterator(q.begin() + (long)cnt));
	q.erase(q.begin(), q.begin() + (long)cnt);
	uint64_t bytes = 0;
	for (const auto &f : *batch)
		bytes += f.pkt.size();
	n.rx_cpu_free = now + std::max<uint64_t>(bytes * rx_cpu_ns_per_kb / 1024, 1);
	at(n.rx_cpu_free, [this, &n, link, batch] { rx_finish(n, link, batch); });
}

// A batch's CPU work is done (or the node was frozen in it: then after
// the thaw); the thread goes on with what queued meanwhile.
void Sim::rx_finish(Node &n, uint32_t link, std::shared_ptr<std::vector<Node::Queued>> batch)
{
	if (now < n.frozen_until) {
		n.rx_cpu_free = n.frozen_until + 1;
		at(n.rx_cpu_free, [this, &n, link, batch] { rx_finish(n, link, batch); });
		return;
	}
	rx_handle(n, link, *batch);
	if (n.rxq[link].empty())
		n.rx_armed[link] = false;
	else
		at(now, [this, &n, link] { rx_drain(n, link); });
}

void Sim::deliver_one(Node &n, uint32_t link, uint64_t src, std::vector<uint8_t> pkt,
		      me_rx_batch *b)
{
	uint8_t t = pkt.size() > 1 ? pkt[1] : 0;
	if (!frame_payload || pkt.size() < ME_HDR_COMMON ||
	    (t != ME_PT_WRITE && t != ME_PT_NOTIFY && t != ME_PT_READ_RESP)) {
		me_core_rx_batch(n.node, b, link, src, pkt.data(), (uint32_t)pkt.size(), nullptr);
		return;
	}
	RxFrame f;
	f.buf = pkt.data();
	f.saved = pkt;
	uint32_t hdr = (uint32_t)pkt[4] << 8 | pkt[5];
	if (hdr < pkt.size())
		memset(pkt.data() + hdr, 0xEE, pkt.size() - hdr);
	me_core_rx_batch(n.node, b, link, src, pkt.data(), (uint32_t)pkt.size(), &f);
}

int Sim::add_switch(uint64_t queue_bytes)
{
	switches.push_back(Switch{queue_bytes, {}});
	return (int)switches.size() - 1;
}

int Sim::plug(int node, int sw, const LinkParams &up, const LinkParams &down)
{
	Node &n = *nodes[node];
	Port p;
	p.sw = sw;
	p.node = node;
	p.link = (uint32_t)n.link_wire.size();
	p.up = up;
	p.down = down;
	ports.push_back(p);
	int id = (int)ports.size() - 1;
	switches[sw].ports.push_back(id);
	n.link_wire.push_back(-1);
	n.link_port.push_back(id);
	me_link_add(n.node, p.link, 9216, (uint32_t)(up.gbps * 1000));
	return id;
}

// The node's NIC serializes the frame onto its cable to the switch.
int Sim::port_tx(Node &n, uint32_t link, uint64_t dst, const void *buf, uint32_t len)
{
	int pid = n.link_port[link];
	Port &p = ports[pid];
	const auto evs = frame_events(n, link, buf, len);
	uint64_t ser = (uint64_t)((len + kEthOverhead) * 8 / p.up.gbps);
	uint64_t start = std::max(now, p.nic_busy);
	p.nic_busy = start + ser;
	if (!p.tx_ok)
		return 0;	// a NIC that no longer transmits: nobody can tell
	if (frame_dropped(evs))
		return 0;
	if (rng.uni() < p.up.loss)
		return 0;
	std::vector<uint8_t> pkt((const uint8_t *)buf, (const uint8_t *)buf + len);
	uint64_t src = addr(n.idx, link);
	at(start + ser + p.up.delay_ns, [this, pid, src, dst, pkt] {
		switch_forward(pid, src, dst, pkt);
	});
	return 0;
}

// Store and forward: every output port is a FIFO with a finite queue.
void Sim::switch_forward(int in, uint64_t src, uint64_t dst, const std::vector<uint8_t> &pkt)
{
	Switch &s = switches[ports[in].sw];
	for (int out : s.ports) {
		if (out == in)
			continue;
		Port &o = ports[out];
		if (dst != ME_ADDR_BCAST && dst != addr(o.node, o.link))
			continue;
		uint64_t ser = (uint64_t)((pkt.size() + kEthOverhead) * 8 / o.down.gbps);
		if (o.stall_every && now >= o.next_stall) {
			// The stall starts after what is queued already.
			o.stall_start = std::max(o.out_busy, now);
			o.stall_end = o.stall_start + rng.below(o.stall_max);
			o.out_busy = o.stall_end;
			o.next_stall = o.stall_end + rng.below(2 * o.stall_every);
		}
		// The queue holds frames, not the stall's idle time.
		uint64_t backlog = o.out_busy > now ? o.out_busy - now : 0;
		if (o.stall_end > now)
			backlog -= std::min(backlog, o.stall_end - std::max(now, o.stall_start));
		if ((double)backlog * o.down.gbps / 8 > (double)s.queue_bytes) {
			o.queue_drops++;
			continue;
		}
		uint64_t start = std::max(now, o.out_busy);
		o.out_busy = start + ser;
		o.out_max = std::max(o.out_max, (uint64_t)((double)backlog * o.down.gbps / 8));
		if (rng.uni() < o.down.loss)
			continue;
		int to = o.node;
		uint32_t tolink = o.link;
		at(start + ser + o.down.delay_ns, [this, out, to, tolink, src, pkt] {
			if (ports[out].rx_ok)
				deliver(*nodes[to], tolink, src, pkt);
		});
	}
	if (dst != ME_ADDR_BCAST) {
		bool found = false;
		for (int out : s.ports)
			found |= out != in && dst == addr(ports[out].node, ports[out].link);
		if (!found)
			misaddressed++;
	}
}

void Sim::deliver(Node &n, uint32_t link, std::vector<uint8_t> pkt)
{
	uint64_t src = 0;
	if (link < n.link_wire.size() && n.link_wire[link] >= 0) {
		const Wire &w = wires[n.link_wire[link]];
		int d = w.node[0] == n.idx && w.link[0] == link ? 0 : 1;
		src = addr(w.node[1 - d], w.link[1 - d]);
	}
	deliver(n, link, src, std::move(pkt));
}

me_conn *Sim::connect(int a, int b, uint32_t mode, uint32_t *peer_id)
{
	// Let HELLOs flow so both sides know their links.
	run([&] {
		for (size_t l = 0; l < nodes[a]->link_wire.size(); l++)
			if (!me_link_alive(nodes[a]->node, (uint32_t)l))
				return false;
		for (size_t l = 0; l < nodes[b]->link_wire.size(); l++)
			if (!me_link_alive(nodes[b]->node, (uint32_t)l))
				return false;
		return true;
	}, now + std::max<uint64_t>(20000000, 3 * nodes[a]->cfg.hello_ns));
	me_conn *c = nullptr;
	if (me_conn_connect(nodes[a]->node, (uint32_t)b + 1, mode, &c))
		return nullptr;
	size_t base_b = nodes[b]->cqes.size();
	bool ok = run([&] {
		if (me_conn_state(c) != ME_CS_ESTABLISHED)
			return false;
		for (size_t i = base_b; i < nodes[b]->cqes.size(); i++)
			if (nodes[b]->cqes[i].type == ME_CQE_CONN_UP) {
				if (peer_id)
					*peer_id = nodes[b]->cqes[i].conn;
				return true;
			}
		return false;
	}, now + std::max<uint64_t>(50000000, 3 * nodes[a]->cfg.connect_rto_ns));
	return ok ? c : nullptr;
}

}  // namespace mesim
