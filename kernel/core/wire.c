// SPDX-License-Identifier: GPL-2.0
/*
 * wire.c - build and validate packet headers.
 *
 * Validation is total: a buffer either parses into a fully range-checked
 * struct me_hdr or is rejected with one of the ME_EWIRE_* codes, and no
 * field of a rejected packet is ever used.  Semantic checks that need
 * connection state (sequence window, incarnation) come later in the
 * receive path; here only what the packet alone can prove is checked.
 */
#include "wire.h"

u16 me_wire_hdr_len(u32 type)
{
	switch (type) {
	case ME_PT_HELLO:
		return ME_HDR_HELLO;
	case ME_PT_KEEPALIVE:
		return ME_HDR_KA;
	case ME_PT_CONNECT:
	case ME_PT_ACCEPT:
		return ME_HDR_CONN;
	case ME_PT_ACK:
	case ME_PT_NACK:
		return ME_HDR_ACK;
	case ME_PT_WRITE:
	case ME_PT_NOTIFY:
	case ME_PT_READ_REQ:
	case ME_PT_READ_RESP:
	case ME_PT_STATUS:
	case ME_PT_CLOSE:
	case ME_PT_PACK:
	case ME_PT_ATOMIC:
		return ME_HDR_SEQ;
	case ME_PT_ABORT:
		return ME_HDR_ABORT;
	default:
		return 0;
	}
}

bool me_sack_test(const u8 *sack, u32 bit)
{
	return sack[bit >> 3] & (0x80 >> (bit & 7));
}

void me_sack_set(u8 *sack, u32 bit)
{
	sack[bit >> 3] |= 0x80 >> (bit & 7);
}

static bool is_pow2(u32 v)
{
	return v && !(v & (v - 1));
}

int me_wire_pack_next(const u8 *p, u32 rem, struct me_pack_ent *e)
{
	if (rem < ME_PACK_ENT)
		return ME_EWIRE_SHORT;
	e->type = p[0];
	e->len = me_get_be16(p + 2);
	e->op_id = me_get_be32(p + 4);
	e->region = me_get_be32(p + 8);
	e->imm = me_get_be32(p + 12);
	e->key = me_get_be64(p + 16);
	e->addr = me_get_be64(p + 24);
	e->data = p + ME_PACK_ENT;
	if ((e->type != ME_PT_WRITE && e->type != ME_PT_NOTIFY) || p[1] ||
	    e->addr + e->len < e->addr)
		return ME_EWIRE_FIELD;
	if (rem - ME_PACK_ENT < e->len)
		return ME_EWIRE_SHORT;
	return (int)(ME_PACK_ENT + e->len);
}

u32 me_wire_pack_put(u8 *p, const struct me_pack_ent *e)
{
	p[0] = (u8)e->type;
	p[1] = 0;
	me_put_be16(p + 2, (u16)e->len);
	me_put_be32(p + 4, e->op_id);
	me_put_be32(p + 8, e->region);
	me_put_be32(p + 12, e->imm);
	me_put_be64(p + 16, e->key);
	me_put_be64(p + 24, e->addr);
	return ME_PACK_ENT;
}

/* Exactly msg_len entries, 2..ME_PACK_MAX, filling the payload. */
static int check_pack(const struct me_hdr *h)
{
	const u8 *p = h->payload;
	u32 rem = h->payload_len, i;
	struct me_pack_ent e;

	if (h->d.msg_len < 2 || h->d.msg_len > ME_PACK_MAX || h->d.msg_id ||
	    h->d.op_id || h->d.msg_off || h->d.region || h->d.imm ||
	    h->d.key || h->d.addr || !(h->flags & ME_F_LAST))
		return ME_EWIRE_FIELD;
	for (i = 0; i < h->d.msg_len; i++) {
		int n = me_wire_pack_next(p, rem, &e);

		if (n < 0)
			return n;
		p += n;
		rem -= (u32)n;
	}
	return rem ? ME_EWIRE_FIELD : 0;
}

void me_wire_atomic_get(const u8 *p, struct me_atomic_req *a)
{
	a->lregion = me_get_be32(p);
	a->laddr = me_get_be64(p + 8);
	a->operand = me_get_be64(p + 16);
	a->compare = me_get_be64(p + 24);
}

void me_wire_atomic_put(u8 *p, const struct me_atomic_req *a)
{
	me_put_be32(p, a->lregion);
	me_put_be32(p + 4, 0);
	me_put_be64(p + 8, a->laddr);
	me_put_be64(p + 16, a->operand);
	me_put_be64(p + 24, a->compare);
}

/* The size, the operation and the operands that go with it. */
static int check_atomic(const struct me_hdr *h)
{
	struct me_atomic_req a;

	if (h->payload_len != ME_ATOMIC_PAY || h->d.msg_off || me_get_be32(h->payload + 4))
		return ME_EWIRE_FIELD;
	if (h->d.msg_len != 4 && h->d.msg_len != 8)
		return ME_EWIRE_FIELD;
	if (h->d.imm < ME_AOP_ADD || h->d.imm >= ME_AOP_MAX_)
		return ME_EWIRE_FIELD;
	me_wire_atomic_get(h->payload, &a);
	if (h->d.msg_len == 4 && (a.operand >> 32 || a.compare >> 32))
		return ME_EWIRE_FIELD;
	if ((h->d.imm != ME_AOP_CSWAP && a.compare) || (h->d.imm == ME_AOP_READ && a.operand))
		return ME_EWIRE_FIELD;
	return 0;
}

static int check_seq(struct me_hdr *h, const u8 *p)
{
	u32 pay = h->payload_len;
	struct me_hdr *x = h;

	x->d.seq = me_get_be32(p + 40);
	x->d.msg_id = me_get_be32(p + 44);
	x->d.op_id = me_get_be32(p + 48);
	x->d.msg_len = me_get_be32(p + 52);
	x->d.msg_off = me_get_be32(p + 56);
	x->d.region = me_get_be32(p + 60);
	x->d.imm = me_get_be32(p + 64);
	x->d.stamp = me_get_be32(p + 68);
	x->d.key = me_get_be64(p + 72);
	x->d.addr = me_get_be64(p + 80);
	if (h->d.msg_len > ME_MAX_MSG)
		return ME_EWIRE_FIELD;
	if (h->d.addr + h->d.msg_len < h->d.addr)
		return ME_EWIRE_FIELD;

	switch (h->type) {
	case ME_PT_WRITE:
	case ME_PT_NOTIFY:
	case ME_PT_READ_RESP:
		if ((u64)h->d.msg_off + pay > h->d.msg_len)
			return ME_EWIRE_FIELD;
		/* Only an empty message may carry an empty packet. */
		if (!pay && h->d.msg_len)
			return ME_EWIRE_FIELD;
		if ((h->flags & ME_F_LAST) &&
		    h->d.msg_off + pay != h->d.msg_len)
			return ME_EWIRE_FIELD;
		break;
	case ME_PT_READ_REQ:
		/* msg_len is the length to read; the payload names the
		 * initiator's destination. */
		if (pay != ME_READ_REQ_PAY || h->d.msg_off)
			return ME_EWIRE_FIELD;
		break;
	case ME_PT_STATUS:
		if (pay || h->d.msg_len || h->d.msg_off ||
		    h->d.imm > ME_MAX_ERRNO)
			return ME_EWIRE_FIELD;
		break;
	case ME_PT_CLOSE:
		if (pay || h->d.msg_len || h->d.msg_off)
			return ME_EWIRE_FIELD;
		break;
	case ME_PT_PACK:
		return check_pack(h);
	case ME_PT_ATOMIC:
		return check_atomic(h);
	}
	return 0;
}

int me_wire_parse(const void *buf, u32 len, struct me_hdr *h)
{
	const u8 *p = buf;
	u16 want;

	if (len < ME_HDR_COMMON)
		return ME_EWIRE_SHORT;
	h->version = p[0];
	h->type = p[1];
	h->flags = me_get_be16(p + 2);
	h->hdr_len = me_get_be16(p + 4);
	h->payload_len = me_get_be16(p + 6);
	if (h->version != ME_WIRE_VERSION)
		return ME_EWIRE_VERSION;
	want = me_wire_hdr_len(h->type);
	if (!want)
		return ME_EWIRE_TYPE;
	if (h->hdr_len != want)
		return ME_EWIRE_FIELD;
	/* Ethernet may pad short frames: trailing bytes are allowed. */
	if (len < want || len - want < h->payload_len)
		return ME_EWIRE_SHORT;
	if (h->flags & ~ME_F_KNOWN)
		return ME_EWIRE_FIELD;
	/* Only an ack carries a packet, and the frame holds one after it. */
	if ((h->flags & ME_F_CARRY) &&
	    (h->type != ME_PT_ACK || len - want < ME_HDR_COMMON))
		return ME_EWIRE_FIELD;
	if ((h->flags & ME_F_FRESH) && h->type != ME_PT_CONNECT)
		return ME_EWIRE_FIELD;
	if ((h->flags & ME_F_ASK) && h->type != ME_PT_KEEPALIVE)
		return ME_EWIRE_FIELD;
	if ((h->flags & ME_F_FILL) && h->type != ME_PT_ACK && h->type != ME_PT_NACK)
		return ME_EWIRE_FIELD;
	if ((h->flags & ME_F_NOW) && (!(h->flags & ME_F_LAST) ||
				      (h->type != ME_PT_WRITE && h->type != ME_PT_NOTIFY &&
				       h->type != ME_PT_PACK)))
		return ME_EWIRE_FIELD;
	h->src_node = me_get_be32(p + 8);
	h->dst_node = me_get_be32(p + 12);
	h->src_inc = me_get_be32(p + 16);
	h->dst_inc = me_get_be32(p + 20);
	h->src_conn = me_get_be32(p + 24);
	h->dst_conn = me_get_be32(p + 28);
	h->cookie = me_get_be64(p + 32);
	h->payload = p + want;
	h->rx = NULL;
	h->batch = NULL;
	h->now = 0;
	if (!h->src_node || h->src_node == ME_NODE_BCAST || !h->src_inc ||
	    !h->dst_node)
		return ME_EWIRE_FIELD;

	switch (h->type) {
	case ME_PT_HELLO:
	case ME_PT_KEEPALIVE:
		h->h.link = me_get_be32(p + 40);
		h->h.heard_us = 0;
		h->h.echo = 0;
		h->h.down = 0;
		h->h.hold = 0;
		h->h.stamp = 0;
		if (h->cookie || h->src_conn || h->dst_conn)
			return ME_EWIRE_FIELD;
		if (h->type == ME_PT_HELLO)
			return me_get_be32(p + 44) || h->payload_len > ME_HELLO_NAME ||
			       h->flags ? ME_EWIRE_FIELD : 0;
		h->h.heard_us = me_get_be32(p + 44);
		h->h.echo = me_get_be64(p + 48);
		h->h.down = me_get_be32(p + 56);
		h->h.hold = me_get_be32(p + 60);
		h->h.stamp = me_get_be64(p + 64);
		/* A reply echoes its probe; a hold is an echo's. */
		if (h->payload_len || h->dst_node == ME_NODE_BCAST ||
		    (h->flags & ~(ME_F_REPLY | ME_F_ASK)) || !h->h.stamp ||
		    (h->flags & ME_F_REPLY && h->flags & ME_F_ASK) ||
		    (!h->h.echo && (h->h.hold || (h->flags & ME_F_REPLY))) ||
		    (h->h.down >> ME_WIRE_LINKS))
			return ME_EWIRE_FIELD;
		return 0;
	case ME_PT_CONNECT:
	case ME_PT_ACCEPT:
		h->c.isn = me_get_be32(p + 40);
		h->c.credit = me_get_be32(p + 44);
		h->c.window = me_get_be16(p + 48);
		h->c.mode = p[50];
		h->c.ops = me_get_be32(p + 52);
		h->c.cookie = me_get_be64(p + 56);
		h->c.port = me_get_be32(p + 64);
		if (p[51] || me_get_be32(p + 68) || h->payload_len || !h->src_conn ||
		    !h->c.cookie || h->c.port > ME_WIRE_PORT_MAX)
			return ME_EWIRE_FIELD;
		/* FRESH is a shared CONNECT's only flag; an ACCEPT has none. */
		if (h->flags & ~(h->type == ME_PT_CONNECT && h->c.mode == 2 ? ME_F_FRESH : 0))
			return ME_EWIRE_FIELD;
		/* A CONNECT cannot know the cookie yet; an ACCEPT must. */
		if ((h->type == ME_PT_CONNECT) != !h->cookie)
			return ME_EWIRE_FIELD;
		if (h->c.window == 0)	/* 0 encodes 65536, beyond our max */
			return ME_EWIRE_FIELD;
		if (!is_pow2(h->c.window) || h->c.window < ME_WIN_MIN ||
		    h->c.window > ME_WIN_MAX)
			return ME_EWIRE_FIELD;
		/* Modes: unordered, ordered, shared (to no port). */
		if (!h->c.credit || h->c.credit > h->c.window || h->c.mode > 2 ||
		    (h->c.mode == 2 && h->c.port))
			return ME_EWIRE_FIELD;
		if (!is_pow2(h->c.ops) || h->c.ops > ME_OPS_MAX)
			return ME_EWIRE_FIELD;
		if (h->type == ME_PT_ACCEPT && (!h->dst_conn || !h->dst_inc))
			return ME_EWIRE_FIELD;
		if (h->dst_node == ME_NODE_BCAST)
			return ME_EWIRE_FIELD;
		return 0;
	case ME_PT_ACK:
	case ME_PT_NACK:
		h->a.cum = me_get_be32(p + 40);
		h->a.right = me_get_be32(p + 44);
		memcpy(h->a.sack, p + 48, sizeof(h->a.sack));
		h->a.base = me_get_be32(p + 64);
		h->a.status = me_get_be32(p + 68);
		h->a.hold = me_get_be32(p + 72);
		h->a.echo = me_get_be32(p + 76);
		if (h->a.base > ME_WIN_MAX - ME_SACK_BITS || h->payload_len)
			return ME_EWIRE_FIELD;
		if (!me_seq_le(h->a.cum, h->a.right) ||
		    h->a.right - h->a.cum > ME_WIN_MAX)
			return ME_EWIRE_FIELD;
		break;
	case ME_PT_ABORT:
		h->x.status = me_get_be32(p + 40);
		if (me_get_be32(p + 44) || h->payload_len || !h->x.status ||
		    h->x.status > ME_MAX_ERRNO)
			return ME_EWIRE_FIELD;
		/* A refusal: of a connection that never was on this side. */
		if (!h->src_conn)
			return (h->x.status != ECONNREFUSED && h->x.status != ENOSPC &&
				h->x.status != EEXIST) ||
			       !h->dst_conn || !h->dst_inc || !h->cookie ||
			       h->dst_node == ME_NODE_BCAST ? ME_EWIRE_FIELD : 0;
		break;
	default:
		if (check_seq(h, p))
			return ME_EWIRE_FIELD;
		break;
	}
	/* Everything below belongs to a connection. */
	if (!h->src_conn || !h->dst_conn || !h->dst_inc || !h->cookie ||
	    h->dst_node == ME_NODE_BCAST)
		return ME_EWIRE_FIELD;
	return 0;
}

void me_wire_stamp(u8 *p, u32 stamp)
{
	me_put_be32(p + 68, stamp);
}

u32 me_wire_build(u8 *p, const struct me_hdr *h)
{
	u16 hl = me_wire_hdr_len(h->type);

	memset(p, 0, hl);
	p[0] = ME_WIRE_VERSION;
	p[1] = h->type;
	me_put_be16(p + 2, h->flags);
	me_put_be16(p + 4, hl);
	me_put_be16(p + 6, h->payload_len);
	me_put_be32(p + 8, h->src_node);
	me_put_be32(p + 12, h->dst_node);
	me_put_be32(p + 16, h->src_inc);
	me_put_be32(p + 20, h->dst_inc);
	me_put_be32(p + 24, h->src_conn);
	me_put_be32(p + 28, h->dst_conn);
	me_put_be64(p + 32, h->cookie);

	switch (h->type) {
	case ME_PT_HELLO:
	case ME_PT_KEEPALIVE:
		me_put_be32(p + 40, h->h.link);
		if (h->type == ME_PT_KEEPALIVE) {
			me_put_be32(p + 44, h->h.heard_us);
			me_put_be64(p + 48, h->h.echo);
			me_put_be32(p + 56, h->h.down);
			me_put_be32(p + 60, h->h.hold);
			me_put_be64(p + 64, h->h.stamp);
		}
		break;
	case ME_PT_CONNECT:
	case ME_PT_ACCEPT:
		me_put_be32(p + 40, h->c.isn);
		me_put_be32(p + 44, h->c.credit);
		me_put_be16(p + 48, (u16)h->c.window);
		p[50] = (u8)h->c.mode;
		me_put_be32(p + 52, h->c.ops);
		me_put_be64(p + 56, h->c.cookie);
		me_put_be32(p + 64, h->c.port);
		break;
	case ME_PT_ACK:
	case ME_PT_NACK:
		me_put_be32(p + 40, h->a.cum);
		me_put_be32(p + 44, h->a.right);
		memcpy(p + 48, h->a.sack, sizeof(h->a.sack));
		me_put_be32(p + 64, h->a.base);
		me_put_be32(p + 68, h->a.status);
		me_put_be32(p + 72, h->a.hold);
		me_put_be32(p + 76, h->a.echo);
		break;
	case ME_PT_ABORT:
		me_put_be32(p + 40, h->x.status);
		break;
	default:
		me_put_be32(p + 40, h->d.seq);
		me_put_be32(p + 44, h->d.msg_id);
		me_put_be32(p + 48, h->d.op_id);
		me_put_be32(p + 52, h->d.msg_len);
		me_put_be32(p + 56, h->d.msg_off);
		me_put_be32(p + 60, h->d.region);
		me_put_be32(p + 64, h->d.imm);
		me_put_be32(p + 68, h->d.stamp);
		me_put_be64(p + 72, h->d.key);
		me_put_be64(p + 80, h->d.addr);
		break;
	}
	return hl;
}
