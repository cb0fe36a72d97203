// SPDX-License-Identifier: GPL-2.0
// fuzz_rx.cpp - libFuzzer target for the full receive path (me_core_rx).
//
// Every input starts from the same state: two nodes wired back-to-back in
// process (no network: tx appends to a bounded in-memory queue per
// direction, the clock only moves when the input says so), a connection
// opened by node A and accepted by node B through a real handshake, and a
// write from A left in flight so that acks have something to act on.  The
// rest of the input is a program of small records that
//
//   - inject packets built from valid header templates (the real node ids,
//     incarnations, connection ids and sequence numbers learned by sniffing
//     the traffic) with fuzzed fields, optionally with raw byte overwrites,
//     so ack/nack, data, read, status and close processing are all reached;
//   - inject raw bytes;
//   - deliver or drop the genuine queued traffic;
//   - advance the clock and run the timers;
//   - submit writes, notifies and reads, and close the connection.
//
// The registered-memory callbacks bounds-check every access: the core must
// have checked a region before it touches it, so an out-of-range
// mr_write/mr_read aborts.  Completions are checked to arrive exactly once
// per submitted operation.  ASan/UBSan catch memory errors and leaks.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>
#include <vector>

extern "C" {
#include "kernel/core/me_core.h"
#include "kernel/core/wire.h"
}

#define CHECK(cond)                                                        \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "fuzz_rx: %s:%d: %s\n", __FILE__, \
				__LINE__, #cond);                          \
			abort();                                           \
		}                                                          \
	} while (0)

namespace {

constexpr u32 kMtu = 512;
constexpr size_t kQueueMax = 256;
constexpr u32 kIds[2] = {1, 2};
constexpr u32 kIncs[2] = {0x11, 0x22};

struct Region {
	u32 key;
	u32 access;
	std::vector<u8> mem;
};

struct Harness;

struct Plat {
	Harness *hs;
	int idx;
	me_node *node = nullptr;
	Region regions[2];
	// Sniffed from this node's own transmissions.
	u32 conn = 0;		// its connection id
	u64 cookie = 0;		// the cookie it chose for that connection
	u32 next_seq = 0;	// one past the highest sequence number sent
	bool seq_known = false;
	u32 last_ack_cum = 0;
	std::set<u64> pending;	// cookies of submitted, uncompleted ops
	u64 next_cookie = 1;
};

struct Harness {
	u64 now = 1000000000ull;
	Plat p[2];
	std::deque<std::vector<u8>> q[2];	// q[i]: packets sent by node i
};

u64 now_ns(void *ctx)
{
	return static_cast<Plat *>(ctx)->hs->now;
}

void sniff(Plat *pl, const u8 *buf, u32 len)
{
	me_hdr h;

	if (me_wire_parse(buf, len, &h))
		return;
	if (h.type == ME_PT_CONNECT || h.type == ME_PT_ACCEPT) {
		pl->conn = h.src_conn;
		pl->cookie = h.c.cookie;
		if (!pl->seq_known) {
			pl->next_seq = h.c.isn;
			pl->seq_known = true;
		}
	} else if (me_pt_sequenced(h.type)) {
		if (!pl->seq_known || me_seq_le(pl->next_seq, h.d.seq))
			pl->next_seq = h.d.seq + 1;
		pl->seq_known = true;
	} else if (h.type == ME_PT_ACK || h.type == ME_PT_NACK) {
		pl->last_ack_cum = h.a.cum;
	}
}

// Node i's link-layer address.
u64 addr_of(int i)
{
	return 0x020000000000ull | (u64)(i + 1);
}

int tx(void *ctx, u32 link, u64 dst, const void *buf, u32 len)
{
	Plat *pl = static_cast<Plat *>(ctx);
	auto &q = pl->hs->q[pl->idx];

	CHECK(link == 0);
	// Frames go to an address a HELLO taught (the peer's, or the third
	// one injected frames come from), or to all.
	CHECK(dst == ME_ADDR_BCAST || dst == addr_of(!pl->idx) || dst == addr_of(2));
	CHECK(len >= ME_HDR_COMMON && len <= kMtu);
	sniff(pl, static_cast<const u8 *>(buf), len);
	if (q.size() >= kQueueMax)
		return -ENOBUFS;
	q.emplace_back(static_cast<const u8 *>(buf),
		       static_cast<const u8 *>(buf) + len);
	return 0;
}

Region *region(Plat *pl, u32 r)
{
	return r >= 1 && r <= 2 ? &pl->regions[r - 1] : nullptr;
}

bool in_range(const Region *r, u64 off, u64 len)
{
	return off <= r->mem.size() && len <= r->mem.size() - off;
}

int mr_check(void *ctx, u32 reg, u64 key, u64 off, u64 len, u32 access)
{
	Region *r = region(static_cast<Plat *>(ctx), reg);

	if (!r)
		return -ENOENT;
	if (key != r->key || (access & ~r->access))
		return -EACCES;
	return in_range(r, off, len) ? 0 : -ERANGE;
}

int mr_write(void *ctx, u32 conn, u32 reg, u64, u64 off, const void *src, u32 len, void *)
{
	Plat *pl = static_cast<Plat *>(ctx);
	Region *r = region(pl, reg);

	CHECK(conn != 0);
	CHECK(r && in_range(r, off, len));
	if (len)
		memcpy(r->mem.data() + off, src, len);
	return 0;
}

int mr_local(void *ctx, u32 reg, u64 off, u64 len, u32 access)
{
	Region *r = region(static_cast<Plat *>(ctx), reg);

	(void)access;
	if (!r)
		return -ENOENT;
	return in_range(r, off, len) ? 0 : -ERANGE;
}

int mr_read(void *ctx, u32 reg, u64 off, void *dst, u32 len)
{
	Region *r = region(static_cast<Plat *>(ctx), reg);

	CHECK(r && in_range(r, off, len));
	if (len)
		memcpy(dst, r->mem.data() + off, len);
	return 0;
}

// Only what mr_check allowed, aligned as a host demands.
int mr_atomic(void *ctx, u32 reg, u64 off, u32 size, u32 aop, u64 operand, u64 compare,
	      u64 *old)
{
	Region *r = region(static_cast<Plat *>(ctx), reg);

	CHECK(r && in_range(r, off, size));
	CHECK(size == 4 || size == 8);
	CHECK(aop >= ME_AOP_ADD && aop < ME_AOP_MAX_);
	CHECK((r->access & ME_AOP_ACCESS(aop)) == ME_AOP_ACCESS(aop));
	if (off % size)
		return -EINVAL;
	u64 v = 0;
	memcpy(&v, r->mem.data() + off, size);
	*old = v;
	v = me_aop_apply(aop, size, v, operand, compare);
	memcpy(r->mem.data() + off, &v, size);
	return 0;
}

void complete(void *ctx, const me_cqe *cqe)
{
	Plat *pl = static_cast<Plat *>(ctx);

	CHECK(cqe->type >= ME_CQE_WRITE && cqe->type <= ME_CQE_ATOMIC);
	CHECK(cqe->status <= 0 && cqe->status >= -ME_MAX_ERRNO);
	if (cqe->type == ME_CQE_WRITE || cqe->type == ME_CQE_READ ||
	    cqe->type == ME_CQE_ATOMIC) {
		// Exactly once per submitted operation.
		CHECK(pl->pending.erase(cqe->cookie) == 1);
	}
	if (cqe->type == ME_CQE_CONN_UP && !pl->conn)
		pl->conn = cqe->conn;
}

void *alloc(void *ctx, size_t size)
{
	(void)ctx;
	return malloc(size);
}

void release(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

const me_plat_ops kOps = {
	.now_ns = now_ns,
	.tx = tx,
	.mr_check = mr_check,
	.mr_write = mr_write,
	.mr_local = mr_local,
	.mr_read = mr_read,
	.complete = complete,
	.alloc = alloc,
	.free = release,
	.mr_atomic = mr_atomic,
};

// Reads the input; past its end every value is 0.
struct Input {
	const u8 *d;
	size_t n, i = 0;
	bool more() const { return i < n; }
	u8 u8v() { return i < n ? d[i++] : 0; }
	u16 u16v() { return (u16)(u8v() << 8 | u8v()); }
	u32 u32v() { return (u32)u16v() << 16 | u16v(); }
};

// Delivers up to k queued packets from node `from`; drop_mask bit i drops
// the i-th.
void deliver(Harness &hs, int from, u32 k, u32 drop_mask)
{
	for (u32 i = 0; i < k && !hs.q[from].empty(); i++) {
		std::vector<u8> pkt = std::move(hs.q[from].front());

		hs.q[from].pop_front();
		if (drop_mask & (1u << (i & 31)))
			continue;
		me_core_rx(hs.p[!from].node, 0, addr_of(from), pkt.data(), (u32)pkt.size());
	}
}

void settle(Harness &hs, int rounds)
{
	for (int r = 0; r < rounds && (!hs.q[0].empty() || !hs.q[1].empty());
	     r++) {
		deliver(hs, 0, kQueueMax, 0);
		deliver(hs, 1, kQueueMax, 0);
	}
}

void submit(Harness &hs, int who, me_conn *c, Input &in)
{
	Plat &pl = hs.p[who];
	u8 kind = in.u8v() % 4;
	me_rw rw{};
	int ret;

	rw.cookie = pl.next_cookie++;
	rw.local_region = 1 + (in.u8v() & 1);
	rw.local_off = in.u16v() % 4200;
	rw.remote_region = in.u8v() % 4;
	rw.remote_key = in.u8v() & 1 ? 0x1234 : 0x5678;
	rw.remote_off = in.u16v() % 4200;
	rw.len = in.u16v() % 4200;
	rw.imm = in.u8v();
	// Queued without sending: the next submission or the timer packs it.
	rw.flags = in.u8v() & 1 ? ME_RW_MORE : 0;
	pl.pending.insert(rw.cookie);
	if (kind == 0)
		ret = me_conn_write(c, &rw);
	else if (kind == 1)
		ret = me_conn_notify(c, &rw);
	else if (kind == 2)
		ret = me_conn_read(c, &rw);
	else {
		// Mostly well-formed: sizes 4 and 8, operands that fit.
		rw.len = in.u8v() & 1 ? 4 : 8;
		rw.imm %= ME_AOP_MAX_ + 1;
		rw.operand = rw.imm == ME_AOP_READ ? 0 : in.u32v();
		rw.compare = rw.imm == ME_AOP_CSWAP ? in.u8v() : 0;
		ret = me_conn_atomic(c, &rw);
	}
	// A failed submission produces no completion.
	if (ret)
		CHECK(pl.pending.erase(rw.cookie) == 1);
}

const u8 kTypes[] = {
	ME_PT_ACK,	ME_PT_NACK,	ME_PT_WRITE,	 ME_PT_NOTIFY,
	ME_PT_READ_REQ, ME_PT_READ_RESP, ME_PT_STATUS,	 ME_PT_CLOSE,
	ME_PT_ACK,	ME_PT_NACK,	ME_PT_CONNECT, ME_PT_ACCEPT,
	ME_PT_HELLO,	ME_PT_KEEPALIVE, ME_PT_ABORT,	 ME_PT_WRITE,
	ME_PT_PACK,	ME_PT_PACK,	ME_PT_ATOMIC,	 ME_PT_ATOMIC,
};

// The entries of a crafted PACK at p (header fields: h), well-formed when
// `valid` (then only the targets are fuzzed), in at most `room` bytes of
// payload; returns the payload length.
u32 craft_pack(me_hdr &h, u8 *p, Input &in, bool valid, u32 room)
{
	u32 n = 1 + in.u8v() % (ME_PACK_MAX + 1), pay = 0;

	h.d.msg_id = h.d.op_id = h.d.msg_off = h.d.region = h.d.imm = 0;
	h.d.key = h.d.addr = 0;
	if (valid)
		h.flags |= ME_F_LAST;
	h.d.msg_len = valid ? (n < 2 ? 2 : n) : in.u8v();
	for (u32 i = 0; i < h.d.msg_len && i < ME_PACK_MAX + 1; i++) {
		me_pack_ent e{};
		u32 len = in.u8v() % 200;

		if (pay + ME_PACK_ENT + len > room)
			break;
		e.type = valid || in.u8v() & 1 ? (in.u8v() & 1 ? ME_PT_WRITE : ME_PT_NOTIFY)
					       : in.u8v();
		e.len = len;
		e.op_id = in.u8v();
		e.region = in.u8v() % 4;
		e.imm = in.u16v();
		e.key = in.u8v() & 1 ? 0x1234 : in.u32v();
		e.addr = in.u16v() % 4200;
		me_wire_pack_put(p + pay, &e);
		for (u32 k = 0; k < len; k++)
			p[pay + ME_PACK_ENT + k] = in.u8v();
		pay += ME_PACK_ENT + len;
	}
	return pay;
}

// Builds at buf, in at most `room` bytes, a packet as node `from` would
// send it to node `!from`, with fuzzed fields (of type `type` if nonzero);
// returns its length.
u32 craft(Harness &hs, int from, Input &in, u8 *buf, u32 room, u8 type)
{
	Plat &src = hs.p[from], &dst = hs.p[!from];
	me_hdr h{};
	u8 sel = in.u8v();
	u8 shape = in.u8v();
	u32 len, pay;

	h.version = ME_WIRE_VERSION;
	h.type = type ? type : kTypes[sel % sizeof(kTypes)];
	h.flags = in.u8v() & ME_F_KNOWN;
	h.src_node = kIds[from];
	h.dst_node = kIds[!from];
	h.src_inc = kIncs[from];
	h.dst_inc = kIncs[!from];
	h.src_conn = src.conn;
	h.dst_conn = dst.conn;
	if (shape & 0x80) {	// occasionally aim at other connections
		h.src_conn += (s8)in.u8v() % 3;
		h.dst_conn += (s8)in.u8v() % 3;
	}
	// The receiver's cookie, or sometimes a guess (a blind injection).
	h.cookie = shape & 0x40 ? in.u8v() : dst.cookie;

	switch (h.type) {
	case ME_PT_ACK:
	case ME_PT_NACK: {
		// Relative to what the receiver has actually sent.
		u8 nsack = in.u8v() % (ME_SACK_BITS / 8 + 1);

		h.a.cum = dst.next_seq + (s8)in.u8v();
		if (shape & 1)
			h.a.cum = dst.next_seq - (in.u8v() & 31);
		h.a.right = h.a.cum + in.u8v();
		for (u8 i = 0; i < nsack; i++)
			h.a.sack[i] = in.u8v();
		pay = 0;
		break;
	}
	case ME_PT_CONNECT:
	case ME_PT_ACCEPT:
		h.c.isn = shape & 1 ? src.next_seq : in.u32v();
		h.c.window = 8u << (in.u8v() % 4);
		h.c.credit = 1 + in.u8v() % h.c.window;
		h.c.mode = in.u8v() & 1;
		h.c.ops = 1u << (in.u8v() % 8);
		h.c.cookie = src.cookie;
		if (h.type == ME_PT_CONNECT)
			h.cookie = 0;
		pay = 0;
		break;
	case ME_PT_ABORT:
		h.x.status = 1 + in.u8v();
		pay = 0;
		break;
	case ME_PT_HELLO:
	case ME_PT_KEEPALIVE:
		h.h.link = in.u8v() % 2;
		h.cookie = 0;
		if (h.type == ME_PT_KEEPALIVE) {	/* wire 14: stamped, maybe echoing */
			h.h.stamp = 1 + in.u8v();
			h.h.echo = in.u8v() & 1 ? in.u32v() : 0;
			h.h.hold = h.h.echo ? in.u16v() : 0;
		}
		pay = h.type == ME_PT_HELLO ? in.u8v() % (ME_HELLO_NAME + 1)
					    : 0;
		break;
	default:
		h.d.seq = src.next_seq + (s8)in.u8v();
		h.d.msg_id = in.u8v();
		h.d.op_id = in.u8v();
		h.d.msg_off = in.u16v() % 4200;
		h.d.region = in.u8v() % 4;
		h.d.key = in.u8v() & 1 ? 0x1234 : u64{in.u32v()} << (in.u8v() & 32);
		h.d.addr = in.u16v() % 4200;
		h.d.imm = in.u16v();
		pay = in.u16v() % (room - ME_HDR_SEQ + 1);
		h.d.msg_len = in.u16v() % 8400;
		if (h.type == ME_PT_READ_REQ) {
			pay = ME_READ_REQ_PAY;
			h.d.msg_off = 0;
		} else if (h.type == ME_PT_STATUS || h.type == ME_PT_CLOSE) {
			pay = 0;
			h.d.msg_len = h.d.msg_off = 0;
			h.d.imm %= ME_MAX_ERRNO + 1;
		} else if (h.type == ME_PT_PACK) {
			pay = craft_pack(h, buf + ME_HDR_SEQ, in, shape & 2, room - ME_HDR_SEQ);
		} else if (h.type == ME_PT_ATOMIC) {
			pay = ME_ATOMIC_PAY;
			h.d.msg_off = 0;
			if (shape & 2) {
				h.d.msg_len = in.u8v() & 1 ? 4 : 8;
				h.d.imm = 1 + in.u8v() % (ME_AOP_MAX_ - 1);
			}
		} else if (shape & 2) {
			// Make the message fields consistent with the payload.
			if (h.flags & ME_F_LAST)
				h.d.msg_len = h.d.msg_off + pay;
			else if (h.d.msg_len < h.d.msg_off + pay)
				h.d.msg_len = h.d.msg_off + pay;
		}
		break;
	}
	h.payload_len = (u16)pay;
	len = me_wire_build(buf, &h);
	if (h.type == ME_PT_ATOMIC && (shape & 2)) {
		// Well-formed: the operands the operation takes, that fit.
		me_atomic_req a{};
		a.lregion = in.u8v() % 4;
		a.laddr = in.u16v() % 4200;
		if (h.d.imm != ME_AOP_READ)
			a.operand = in.u16v();
		if (h.d.imm == ME_AOP_CSWAP)
			a.compare = in.u8v();
		me_wire_atomic_put(buf + len, &a);
	} else if (h.type != ME_PT_PACK) {	// its entries are in place
		for (u32 i = 0; i < pay; i++)
			buf[len + i] = in.u8v();
	}
	len += pay;
	// Raw overwrites let any field take any value.
	for (u8 k = (shape >> 2) & 3; k; k--) {
		u8 off = in.u8v();

		buf[off % len] = in.u8v();
	}
	return len;
}

// A crafted packet from node `from` to node `!from`; an ack with CARRY
// carries a second one (wire 9), mostly sequenced.
void inject_crafted(Harness &hs, int from, Input &in)
{
	static const u8 carried[] = {
		ME_PT_WRITE, ME_PT_NOTIFY, ME_PT_READ_REQ, ME_PT_READ_RESP,
		ME_PT_STATUS, ME_PT_PACK, ME_PT_CLOSE, ME_PT_ATOMIC,
	};
	u8 buf[kMtu];
	u8 how = in.u8v();
	u32 len = craft(hs, from, in, buf, kMtu, 0);

	if (len == ME_HDR_ACK && buf[1] == ME_PT_ACK && (buf[3] & ME_F_CARRY))
		len += craft(hs, from, in, buf + len, kMtu - len, carried[how % sizeof(carried)]);
	// From the peer's own address (the strongest forgery) or another.
	me_core_rx(hs.p[!from].node, 0, how & 0x80 ? addr_of(2) : addr_of(from), buf, len);
}

void inject_raw(Harness &hs, int to, Input &in)
{
	u32 len = in.u16v() % (kMtu + 1);
	std::vector<u8> buf(len);

	for (auto &b : buf)
		b = in.u8v();
	me_core_rx(hs.p[to].node, 0, addr_of(!to), buf.data(), len);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	Harness hs;
	Input in{data, size};
	me_conn *ca = nullptr, *cb;
	u32 mode = in.u8v() & 1;
	int steps = 0;

	for (int i = 0; i < 2; i++) {
		Plat &pl = hs.p[i];
		me_node_cfg cfg;

		pl.hs = &hs;
		pl.idx = i;
		pl.regions[0] = {0x1234, ME_ACC_READ | ME_ACC_WRITE,
				 std::vector<u8>(4096, (u8)i)};
		pl.regions[1] = {0x5678, ME_ACC_READ,
				 std::vector<u8>(256, (u8)(i + 8))};
		me_node_cfg_default(&cfg);
		cfg.node_id = kIds[i];
		cfg.incarnation = kIncs[i];
		cfg.mtu = kMtu;
		cfg.window = 16;
		cfg.credit = 16;
		cfg.ops = 16;
		cfg.max_conns = 4;
		cfg.ack_every = 4;
		cfg.link_window = 4096;
		cfg.max_retries = 4;
		pl.node = me_node_create(&cfg, &kOps, &pl);
		CHECK(pl.node);
		CHECK(me_link_add(pl.node, 0, kMtu, 10000) == 0);
	}
	me_core_timer(hs.p[0].node);
	me_core_timer(hs.p[1].node);
	settle(hs, 8);
	CHECK(me_conn_connect(hs.p[0].node, kIds[1], mode, &ca) == 0);
	settle(hs, 8);
	CHECK(me_conn_state(ca) == ME_CS_ESTABLISHED);
	CHECK(hs.p[0].conn && hs.p[1].conn);
	cb = me_conn_get(hs.p[1].node, hs.p[1].conn);
	CHECK(cb && me_conn_state(cb) == ME_CS_ESTABLISHED);

	// A write in flight: three packets sent, none delivered yet.
	{
		me_rw rw{};

		rw.cookie = hs.p[0].next_cookie++;
		rw.local_region = 1;
		rw.remote_region = 1;
		rw.remote_key = 0x1234;
		rw.len = 1200;
		hs.p[0].pending.insert(rw.cookie);
		CHECK(me_conn_write(ca, &rw) == 0);
	}

	while (in.more() && steps++ < 256) {
		u8 op = in.u8v();

		switch (op % 8) {
		case 0:
		case 1:
			inject_crafted(hs, op & 1, in);
			break;
		case 2:
			inject_raw(hs, (op >> 3) & 1, in);
			break;
		case 3: {
			u32 k = 1 + in.u8v() % 16;

			deliver(hs, (op >> 3) & 1, k, op & 0x80 ? in.u8v() : 0);
			break;
		}
		case 4: {
			u32 d = in.u8v();

			hs.now += op & 0x80 ? (u64)d * 1000000 : (u64)d * 20000;
			me_core_timer(hs.p[0].node);
			me_core_timer(hs.p[1].node);
			break;
		}
		case 5:
			submit(hs, (op >> 3) & 1, (op >> 3) & 1 ? cb : ca, in);
			break;
		case 6:
			me_conn_close((op >> 3) & 1 ? cb : ca);
			break;
		case 7:
			settle(hs, 1 + in.u8v() % 4);
			break;
		}
	}
	settle(hs, 4);
	me_node_destroy(hs.p[0].node);
	me_node_destroy(hs.p[1].node);
	return 0;
}
