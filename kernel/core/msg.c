// SPDX-License-Identifier: GPL-2.0
/*
 * msg.c - operations and messages.
 *
 * Initiator: me_msg_submit() queues an operation; the pump turns queued
 * operations and pending responses into sequenced packets (one message at a
 * time, so every message is a contiguous run of sequence numbers).  A write
 * or notify completes when the ack of its last packet arrives (the target
 * processes a packet, the last byte of its message in place, before its
 * cumulative point passes it), or on the target's STATUS, which it sends
 * only for a failure (me_msg_acked()); a read completes when its last
 * response byte is in place in local memory (or on an error STATUS).
 *
 * Target: me_msg_rx() places write payload at (region, addr + msg_off)
 * after checking the *whole* message range, so a bad key/range/permission
 * changes nothing; message completion is detected with one 64-bit atomic
 * per message (rmsg), so exactly one thread sees the last byte land.
 */
#include "msg.h"
#include "conn.h"
#include "node.h"
#include "window.h"
#include "path.h"
#include "share.h"

#define PAGE_SZ	4096u

/*
 * An op's state word carries its id (30 bits) with the phase, so a
 * completion racing with reclaim-and-reuse of the entry cannot complete
 * the entry's next op (no ABA).
 */
#define OPST(id, ph)	(((u32)(id) << 2) | (ph))
#define OP_PH(v)	((v) & 3)

int me_msg_alloc(struct me_conn *c)
{
	struct me_node *n = c->node;
	u32 i;

	c->ops = n->ops->alloc(n->ctx, sizeof(*c->ops) * c->nops);
	c->resp = n->ops->alloc(n->ctx, sizeof(*c->resp) * c->nresp);
	c->rmsg = n->ops->alloc(n->ctx, sizeof(*c->rmsg) * c->window);
	if (!c->ops || !c->resp || !c->rmsg)
		return -ENOMEM;
	memset(c->ops, 0, sizeof(*c->ops) * c->nops);
	memset(c->resp, 0, sizeof(*c->resp) * c->nresp);
	for (i = 0; i < c->window; i++)
		me_atomic64_set(&c->rmsg[i].st, (u64)(i - c->window) << 32);
	me_atomic_set(&c->resp_credits, c->nresp);
	me_lock_init(&c->sub_lock);
	me_lock_init(&c->pump_lock);
	me_lock_init(&c->done_lock);
	return 0;
}

static void pack_put(struct me_conn *c, u32 id);

void me_msg_free(struct me_conn *c)
{
	struct me_node *n = c->node;

	if (c->ops) {
		/* Nothing runs any more: drop what the queue still holds. */
		while (c->op_pack != me_atomic_read(&c->op_head)) {
			pack_put(c, c->op_pack);
			c->op_pack++;
		}
		n->ops->free(n->ctx, c->ops);
	}
	if (c->resp)
		n->ops->free(n->ctx, c->resp);
	if (c->rmsg)
		n->ops->free(n->ctx, c->rmsg);
}

/* ------------------------------------------------------------------ */
/* Operation queue                                                     */

/* Called with sub_lock held. */
static void reclaim(struct me_conn *c)
{
	u32 packed = me_atomic_read(&c->op_packed);

	while (c->op_tail != packed) {
		struct me_op *op = &c->ops[c->op_tail & (c->nops - 1)];

		if (OP_PH(me_atomic_read(&op->state)) != ME_OP_DONE)
			break;
		me_atomic_set(&op->state, ME_OP_FREE);
		c->op_tail++;
	}
}

/*
 * Completes @op (if it is still queued with @id) and tells the host;
 * sends nothing: what the completion lets go (a CLOSE waiting for it) is
 * the caller's to pump.  true if this call completed it.
 */
static bool complete_unpumped(struct me_conn *c, struct me_op *op, u32 id, s32 status)
{
	struct me_node *n = c->node;
	struct me_cqe q;

	/*
	 * The fields are immutable while the op is QUEUED with this id; read
	 * them before the cmpxchg, after which the submitter may reuse it.
	 */
	memset(&q, 0, sizeof(q));
	switch (me_atomic_read(&op->type)) {
	case ME_PT_READ_REQ:
		q.type = ME_CQE_READ;
		break;
	case ME_PT_ATOMIC:
		q.type = ME_CQE_ATOMIC;
		break;
	default:
		q.type = ME_CQE_WRITE;
		break;
	}
	q.status = status;
	q.cookie = op->cookie;
	q.conn = c->id;
	q.peer = c->peer;
	q.len = status ? 0 : op->len;
	q.imm = op->imm;
	if (me_atomic_read(&op->type) == ME_PT_CLOSE)
		q.type = 0;	/* reported as ME_CQE_CONN_CLOSED */
	if (me_atomic_cmpxchg(&op->state, OPST(id, ME_OP_QUEUED),
			      OPST(id, ME_OP_DONE)) != OPST(id, ME_OP_QUEUED))
		return false;
	/* No longer awaiting an answer (see mark_due()). */
	if (me_atomic_xchg(&op->due, 2) == 1)
		me_atomic_add_return(&c->answers_due, -1);
	if (status && me_atomic_read(&op->type) != ME_PT_CLOSE)
		me_cstat_add(c, ME_CST_ERRORS, 1);
	if (q.type)
		n->ops->complete(n->ctx, &q);
	return true;
}

static void complete_op(struct me_conn *c, struct me_op *op, u32 id, s32 status)
{
	complete_unpumped(c, op, id, status);
	/* A CLOSE may be waiting for this op to finish. */
	me_msg_pump(c);
}

int me_msg_submit(struct me_conn *c, u32 type, const struct me_rw *rw)
{
	struct me_node *n = c->node;
	u32 st = me_atomic_read(&c->state), head;
	struct me_op *op;
	int ret;

	if (type == ME_PT_CLOSE) {
		if (st != ME_CS_ESTABLISHED)
			return -ENOTCONN;
	} else {
		if (st != ME_CS_CONNECTING && st != ME_CS_ESTABLISHED)
			return -ENOTCONN;
		if (rw->len > ME_MAX_MSG)
			return -EMSGSIZE;
		if (rw->remote_off + rw->len < rw->remote_off)
			return -ERANGE;
		/* A read's or an atomic's answer lands in local memory. */
		ret = n->ops->mr_local(n->ctx, rw->local_region, rw->local_off,
				       rw->len, type == ME_PT_READ_REQ || type == ME_PT_ATOMIC ?
				       ME_ACC_WRITE : ME_ACC_READ);
		if (ret)
			return ret;
	}

	me_lock(&c->sub_lock);
	/*
	 * Again under the lock: me_conn_terminate() sets the state before
	 * me_msg_fail_all() takes it, so an op queued here is failed there,
	 * and none is queued after.
	 */
	st = me_atomic_read(&c->state);
	if (type != ME_PT_CLOSE && st != ME_CS_CONNECTING && st != ME_CS_ESTABLISHED) {
		me_unlock(&c->sub_lock);
		return -ENOTCONN;
	}
	reclaim(c);
	head = me_atomic_read(&c->op_head);
	if (head - c->op_tail >= c->nops) {
		me_unlock(&c->sub_lock);
		/* Ops queued with ME_RW_MORE must not wait for the timer. */
		me_msg_pump(c);
		return -EAGAIN;
	}
	if (type == ME_PT_CLOSE &&
	    me_atomic_cmpxchg(&c->state, ME_CS_ESTABLISHED, ME_CS_CLOSING) !=
	    ME_CS_ESTABLISHED) {
		me_unlock(&c->sub_lock);
		return -ENOTCONN;
	}
	op = &c->ops[head & (c->nops - 1)];
	me_atomic_set(&op->type, type);
	if (rw) {
		op->cookie = rw->cookie;
		op->lregion = rw->local_region;
		op->loff = rw->local_off;
		op->rregion = rw->remote_region;
		op->rkey = rw->remote_key;
		op->roff = rw->remote_off;
		op->len = rw->len;
		op->imm = rw->imm;
		op->flags = rw->flags & ME_RW_ACK_NOW;
		op->operand = rw->operand;
		op->compare = rw->compare;
	} else {
		op->cookie = 0;
		op->len = 0;
		op->imm = 0;
		op->flags = 0;
		op->operand = 0;
		op->compare = 0;
	}
	me_atomic_set(&op->done_bytes, 0);
	me_atomic_set(&op->err, 0);
	me_atomic_set(&op->sent, 0);
	me_atomic_set(&op->due, 0);
	me_atomic_set(&op->id, head);
	/* The pack reference (me_plat.h), dropped by pack_put(). */
	if (me_zc_on(n) && me_zc_type(type))
		n->ops->zc_hold(n->ctx, op->cookie);
	me_atomic_set(&op->state, OPST(head, ME_OP_QUEUED));	/* publish */
	me_atomic_set(&c->op_head, head + 1);
	me_unlock(&c->sub_lock);
	if (!rw || !(rw->flags & ME_RW_MORE))
		me_msg_pump(c);
	else
		me_node_busy(n);	/* the timer pumps it if no submit does */
	return 0;
}

/*
 * How the peer's CLOSE (wire 15) ends op i, which left at least a packet:
 * the peer sent it after every answer to what it took below its cut, and
 * those answers were processed here first.  So a write or notify below
 * the cut still open succeeded (a failure would have come as a STATUS);
 * one whose first packet is at or beyond the cut was never taken:
 * -ECANCELED, as one never sent.  One the cut goes through keeps status
 * (-ECONNRESET: a part of it may be in place).
 */
static s32 peer_cut_status(struct me_op *op, u32 i, u32 cut, u32 packed, s32 status)
{
	u32 type = me_atomic_read(&op->type);

	if (type == ME_PT_CLOSE)
		return status;
	if (!me_seq_lt(me_atomic_read(&op->first_seq), cut))
		return -ECANCELED;
	if ((type == ME_PT_WRITE || type == ME_PT_NOTIFY) && me_seq_lt(i, packed) &&
	    me_seq_lt(me_atomic_read(&op->last_seq), cut))
		return 0;
	return status;
}

void me_msg_fail_all(struct me_conn *c, s32 status)
{
	bool by_cut = me_atomic_read(&c->peer_cut_run);
	u32 cut = me_atomic_read(&c->peer_cut);
	u32 max = me_atomic_read(&c->snd_max);
	u32 i, head, packed;

	/* It cannot have taken what we never sent. */
	if (me_seq_lt(max, cut))
		cut = max;
	me_lock(&c->sub_lock);
	head = me_atomic_read(&c->op_head);
	packed = me_atomic_read(&c->op_packed);
	for (i = c->op_tail; i != head; i++) {
		struct me_op *op = &c->ops[i & (c->nops - 1)];

		if (me_atomic_read(&op->state) != OPST(i, ME_OP_QUEUED))
			continue;
		/*
		 * Store-buffer pattern with pump_one(): the state left
		 * ESTABLISHED before this read, and the pump marks an op
		 * sent (its first_seq before) before it reads the state
		 * again and transmits; so either we see the mark or no
		 * packet of the op leaves.
		 */
		if (!me_atomic_read(&op->sent))
			complete_op(c, op, i, -ECANCELED);
		else if (by_cut)
			complete_op(c, op, i, peer_cut_status(op, i, cut, packed, status));
		else
			complete_op(c, op, i, status);
	}
	me_unlock(&c->sub_lock);
}

static struct me_op *op_find(struct me_conn *c, u32 op_id)
{
	struct me_op *op = &c->ops[op_id & (c->nops - 1)];

	if (me_atomic_read(&op->state) != OPST(op_id, ME_OP_QUEUED))
		return NULL;
	/* Only ops whose request was fully sent can be answered. */
	if (!me_seq_lt(op_id, me_atomic_read(&c->op_packed)))
		return NULL;
	return op;
}

/* ------------------------------------------------------------------ */
/* Response ring (target side)                                         */

/* n credits of the response ring, all or none. */
static bool resp_reserve(struct me_conn *c, u32 n)
{
	u32 v = me_atomic_read(&c->resp_credits);

	while (v >= n) {
		u32 old = me_atomic_cmpxchg(&c->resp_credits, v, v - n);

		if (old == v)
			return true;
		v = old;
	}
	return false;
}

static void resp_unreserve(struct me_conn *c)
{
	me_atomic_add_return(&c->resp_credits, 1);
}

/* Uses a credit taken by resp_reserve(). */
static void resp_push(struct me_conn *c, const struct me_resp *src)
{
	u32 idx = me_atomic_add_return(&c->resp_head, 1) - 1;
	struct me_resp *e = &c->resp[idx & (c->nresp - 1)];

	e->type = src->type;
	e->op_id = src->op_id;
	e->status = src->status;
	e->region = src->region;
	e->addr = src->addr;
	e->lregion = src->lregion;
	e->laddr = src->laddr;
	e->len = src->len;
	e->aop = src->aop;
	e->val = src->val;
	me_atomic_set(&e->ready, idx + 1);	/* publish */
}

/* Counted before the request's packet is marked processed (me_msg_acked). */
static void push_status(struct me_conn *c, u32 op_id, s32 status)
{
	struct me_resp r;

	memset(&r, 0, sizeof(r));
	r.type = ME_PT_STATUS;
	r.op_id = op_id;
	r.status = (u32)-status;
	me_atomic_add_return(&c->status_queued, 1);
	resp_push(c, &r);
}

u32 me_msg_status_queued(struct me_conn *c)
{
	return me_atomic_read(&c->status_queued);
}

/*
 * Count pay bytes of message msg_id; true when this call saw the last
 * byte.  The entry is (re)initialised by the first packet of a message: the
 * previous message in it is complete, because open messages always lie
 * within one window of message ids (messages are contiguous sequence
 * runs and the receiver accepts only one window of sequence numbers).
 */
static bool rmsg_account(struct me_conn *c, const struct me_hdr *h, u32 pay,
			 bool err, bool *any_err)
{
	struct me_rmsg *e = &c->rmsg[h->d.msg_id & (c->window - 1)];
	u64 v, nv;
	u32 lo;

	for (;;) {
		v = me_atomic64_read(&e->st);
		lo = (u32)(v >> 32) == h->d.msg_id ? (u32)v : 0;
		lo = (lo & 0x80000000u) | (err ? 0x80000000u : 0) |
		     ((lo & 0x7fffffffu) + pay);
		nv = (u64)h->d.msg_id << 32 | lo;
		if (me_atomic64_cmpxchg(&e->st, v, nv) == v)
			break;
	}
	*any_err = lo & 0x80000000u;
	return (lo & 0x7fffffffu) == h->d.msg_len;
}

bool me_msg_begun(struct me_conn *c, u32 msg_id)
{
	return (u32)(me_atomic64_read(&c->rmsg[msg_id & (c->window - 1)].st) >> 32) == msg_id;
}

/*
 * What the peer is told of a refused access (me_plat.h, mr_check): a wrong
 * key and no such region are EACCES, as no permission is, so that a peer
 * without the key learns nothing about the region.
 */
static int wire_status(int err)
{
	return err == -EKEYREJECTED || err == -ENOENT ? -EACCES : err;
}

/*
 * A wrong key counts against the connection; *err becomes what the peer
 * is told.  false: the connection was aborted for it, answer nothing.
 */
static bool key_checked(struct me_conn *c, int *err)
{
	if (*err == -EKEYREJECTED) {
		me_conn_key_rejected(c);
		if (!me_conn_live(c))
			return false;
	}
	*err = wire_status(*err);
	return true;
}

/*
 * ret: what placing a data packet's payload at [off, off + pay) of a
 * region returned (mr_write, mr_place).  cut: the sender cut the packet
 * out of its message (chunk_len), not a PACK entry.  Such a packet that
 * starts at a page of ours with a whole page of payload was cut at our
 * page boundaries so its pages could be flipped; whether they were, or
 * were copied after all (from our own copy of the frame, or as the host
 * chose), tells the sender through our acks whether to go on cutting
 * there (ME_F_FILL, wire 16).  0 or a negative errno.
 */
static int placed(struct me_conn *c, const struct me_hdr *h, u64 off, bool cut, int ret)
{
	u32 pay = h->payload_len;
	bool copied;

	if (ret < 0)
		return ret;
	if (cut && !(off & (PAGE_SZ - 1)) && pay >= PAGE_SZ) {
		copied = !h->rx || ret == ME_PLACE_COPIED;
		if (me_atomic_read(&c->rx_copies) != copied)
			me_atomic_set(&c->rx_copies, copied);
	}
	return 0;
}

/* Delivers a data packet's payload to [off, off + pay) of region (mr_write). */
static int place_payload(struct me_conn *c, const struct me_hdr *h, u32 region, u64 key,
			 u64 off, bool cut)
{
	struct me_node *n = c->node;

	return placed(c, h, off, cut, n->ops->mr_write(n->ctx, c->id, region, key, off,
						       h->payload, h->payload_len, h->rx));
}

/* A write/notify packet's access check and placement: 0 or an errno. */
static int check_place(struct me_conn *c, const struct me_hdr *h, bool whole)
{
	struct me_node *n = c->node;
	u64 off = h->d.addr + h->d.msg_off;
	int err;

	if (n->ops->mr_place)
		return placed(c, h, off, !whole,
			      n->ops->mr_place(n->ctx, c->id, h->d.msg_id, h->d.region, h->d.key,
					       h->d.addr, h->d.msg_len, off, h->payload,
					       h->payload_len, h->rx));
	err = n->ops->mr_check(n->ctx, h->d.region, h->d.key, h->d.addr,
			       h->d.msg_len, ME_ACC_WRITE);
	if (!err && h->payload_len)
		err = place_payload(c, h, h->d.region, h->d.key, off, !whole);
	return err;
}

/*
 * Places one write/notify packet; its STATUS credit is reserved.  whole:
 * the packet is its whole message (a PACK entry), so no byte count.
 * Returns whether it queued a STATUS (a failure) for the pump to send.
 */
static bool place(struct me_conn *c, const struct me_hdr *h, bool whole)
{
	struct me_node *n = c->node;
	u32 pay = h->payload_len;
	bool any_err = false;
	int err;

	err = check_place(c, h, whole);
	if (!whole && !rmsg_account(c, h, pay, err != 0, &any_err)) {
		resp_unreserve(c);
		return false;
	}
	/* Once per message: every packet of it saw the same check. */
	if (!key_checked(c, &err)) {
		resp_unreserve(c);
		return false;
	}
	if (n->ops->mr_done && c->mode != ME_MODE_ORDERED)
		n->ops->mr_done(n->ctx, h->d.region, h->d.addr, h->d.msg_len);
	if (!err && any_err)
		err = -EIO;
	if (n->ops->msg_end && h->d.msg_len != pay)
		err = n->ops->msg_end(n->ctx, c->id, h->d.msg_id, h->d.region, h->d.key,
				      h->d.msg_len, err);
	if (h->type == ME_PT_NOTIFY) {
		struct me_cqe q;

		memset(&q, 0, sizeof(q));
		q.type = ME_CQE_NOTIFY;
		q.status = err;
		q.conn = c->id;
		q.peer = c->peer;
		q.len = err ? 0 : h->d.msg_len;
		q.imm = h->d.imm;
		q.region = h->d.region;
		q.off = h->d.addr;
		n->ops->complete(n->ctx, &q);
	}
	/* Success is told by the ack of the message's last packet. */
	if (!err) {
		resp_unreserve(c);
		return false;
	}
	push_status(c, h->d.op_id, err);
	return true;
}

static int rx_write(struct me_conn *c, const struct me_hdr *h)
{
	if (!resp_reserve(c, 1))
		return -EAGAIN;
	/*
	 * Only a STATUS is this packet's to send: a write placed is told by
	 * the ack, which the batch sends (a pump per packet of a stream found
	 * nothing to send, 4% of a receive thread).
	 */
	if (place(c, h, false))
		me_msg_pump(c);
	return 0;
}

/*
 * A PACK: each entry as the one-packet message it is.  Every entry may
 * fail, so the packet takes a STATUS credit for each before it places
 * anything; without them it is refused whole, as a single write would
 * be, and nothing of it happened (me_wire_parse() checked the entries).
 */
static int rx_pack(struct me_conn *c, const struct me_hdr *h)
{
	const u8 *p = h->payload;
	u32 rem = h->payload_len, i;
	struct me_pack_ent e;
	bool status = false;
	struct me_hdr m;

	if (!resp_reserve(c, h->d.msg_len))
		return -EAGAIN;
	m = *h;
	for (i = 0; i < h->d.msg_len; i++) {
		int len = me_wire_pack_next(p, rem, &e);

		p += len;
		rem -= (u32)len;
		/* A wrong key may have aborted the connection. */
		if (!me_conn_live(c)) {
			resp_unreserve(c);
			continue;
		}
		m.type = e.type;
		m.payload = e.data;
		m.payload_len = (u16)e.len;
		m.d.op_id = e.op_id;
		m.d.msg_len = e.len;
		m.d.region = e.region;
		m.d.imm = e.imm;
		m.d.key = e.key;
		m.d.addr = e.addr;
		status |= place(c, &m, true);
	}
	if (status)
		me_msg_pump(c);
	return 0;
}

/*
 * Answers request h (a READ_REQ, or an ATOMIC: aop, with the value found)
 * with its data for the initiator's [lregion, laddr); its credit is reserved.
 */
static void push_read_resp(struct me_conn *c, const struct me_hdr *h, u32 lregion, u64 laddr,
			   u32 aop, u64 val)
{
	struct me_resp r;

	memset(&r, 0, sizeof(r));
	r.type = ME_PT_READ_RESP;
	r.op_id = h->d.op_id;
	r.region = h->d.region;
	r.addr = h->d.addr;
	r.lregion = lregion;
	r.laddr = laddr;
	r.len = h->d.msg_len;
	r.aop = aop;
	r.val = val;
	resp_push(c, &r);
}

static int rx_read_req(struct me_conn *c, const struct me_hdr *h)
{
	struct me_node *n = c->node;
	int err;

	if (!resp_reserve(c, 1))
		return -EAGAIN;
	err = n->ops->mr_check(n->ctx, h->d.region, h->d.key, h->d.addr,
			       h->d.msg_len, ME_ACC_READ);
	if (me_get_be32(h->payload + 4))
		err = -EINVAL;
	if (!key_checked(c, &err)) {
		resp_unreserve(c);
		return 0;
	}
	if (err || !h->d.msg_len)
		push_status(c, h->d.op_id, err);
	else
		push_read_resp(c, h, me_get_be32(h->payload), me_get_be64(h->payload + 8), 0, 0);
	me_msg_pump(c);
	return 0;
}

/*
 * An atomic operation: applied once (the window hands a sequenced packet
 * over once), after its answer's slot is reserved, and answered with the
 * value found, which a READ_RESP carries big-endian.
 */
static int rx_atomic(struct me_conn *c, const struct me_hdr *h)
{
	struct me_node *n = c->node;
	struct me_atomic_req a;
	u64 old = 0;
	int err;

	if (!resp_reserve(c, 1))
		return -EAGAIN;
	me_wire_atomic_get(h->payload, &a);
	err = n->ops->mr_check(n->ctx, h->d.region, h->d.key, h->d.addr,
			       h->d.msg_len, ME_AOP_ACCESS(h->d.imm));
	if (!key_checked(c, &err)) {
		resp_unreserve(c);
		return 0;
	}
	if (!err)
		err = n->ops->mr_atomic ?
		      n->ops->mr_atomic(n->ctx, h->d.region, h->d.addr, h->d.msg_len,
					h->d.imm, a.operand, a.compare, &old) :
		      -EOPNOTSUPP;
	if (err)
		push_status(c, h->d.op_id, wire_status(err));
	else
		push_read_resp(c, h, a.lregion, a.laddr, h->d.imm, old);
	me_msg_pump(c);
	return 0;
}

/* The answer to an atomic: the value found, into the local destination. */
static void rx_atomic_resp(struct me_conn *c, struct me_op *op, const struct me_hdr *h)
{
	struct me_node *n = c->node;
	u32 len = op->len, lregion = op->lregion, v32;
	u64 loff = op->loff, v64;
	int err;

	if (h->d.region != lregion || h->d.addr != loff || h->d.msg_len != len ||
	    h->payload_len != len) {
		me_stat_inc(n, ME_ST_RX_BADOP);
		return;
	}
	me_atomic64_set(&c->progress_ns, h->now);
	/* A READ_RESP's payload may be in its frame only (me_plat.h). */
	if (h->rx && n->ops->rx_fill)
		n->ops->rx_fill(n->ctx, h->rx);
	if (len == 4) {
		v32 = me_get_be32(h->payload);
		err = n->ops->mr_write(n->ctx, c->id, lregion, 0, loff, &v32, 4, NULL);
	} else {
		v64 = me_get_be64(h->payload);
		err = n->ops->mr_write(n->ctx, c->id, lregion, 0, loff, &v64, 8, NULL);
	}
	/* As for a read's data: the host's work on the range is done first. */
	if (n->ops->mr_done && c->mode != ME_MODE_ORDERED)
		n->ops->mr_done(n->ctx, lregion, loff, len);
	complete_op(c, op, h->d.op_id, err);
}

static void rx_read_resp(struct me_conn *c, const struct me_hdr *h)
{
	struct me_node *n = c->node;
	struct me_op *op = op_find(c, h->d.op_id);
	u32 pay = h->payload_len, done, len, lregion;
	u64 loff;
	int err;

	if (op && me_atomic_read(&op->type) == ME_PT_ATOMIC) {
		rx_atomic_resp(c, op, h);
		return;
	}
	if (!op || me_atomic_read(&op->type) != ME_PT_READ_REQ) {
		me_stat_inc(n, ME_ST_RX_BADOP);
		return;
	}
	/*
	 * Copy what we need now: the op cannot complete (and be reused)
	 * before our bytes are counted below, except by a connection
	 * failure, and then only our local copies are used.
	 */
	len = op->len;
	lregion = op->lregion;
	loff = op->loff;
	if (h->d.region != lregion || h->d.addr != loff || h->d.msg_len != len) {
		me_stat_inc(n, ME_ST_RX_BADOP);
		return;
	}
	me_atomic64_set(&c->progress_ns, h->now);
	err = place_payload(c, h, lregion, 0, loff + h->d.msg_off, true);
	if (err)
		me_atomic_cmpxchg(&op->err, 0, (u32)-err);
	done = me_atomic_add_return(&op->done_bytes, pay);
	if (done != len)
		return;
	if (n->ops->mr_done && c->mode != ME_MODE_ORDERED)
		n->ops->mr_done(n->ctx, lregion, loff, len);
	complete_op(c, op, h->d.op_id, -(s32)me_atomic_read(&op->err));
}

/*
 * Completion by acks (wire 4).  With done_lock held: ops from ack_op on
 * whose message was sent in full, in op order (so in order of their last
 * packets); writes and notifies whose last packet is below cum complete
 * with success unless a STATUS completed them first; reads and CLOSE
 * complete otherwise and are passed over.
 */
static bool acked_pass(struct me_conn *c, u32 cum)
{
	u32 packed = me_atomic_read(&c->op_packed), id;
	bool any = false;

	for (id = c->ack_op; me_seq_lt(id, packed); id++) {
		struct me_op *op = &c->ops[id & (c->nops - 1)];
		u32 type = me_atomic_read(&op->type);

		if (me_atomic_read(&op->state) != OPST(id, ME_OP_QUEUED) ||
		    (type != ME_PT_WRITE && type != ME_PT_NOTIFY))
			continue;
		if (!me_seq_lt(me_atomic_read(&op->last_seq), cum))
			break;
		any |= complete_unpumped(c, op, id, 0);
	}
	c->ack_op = id;
	return any;
}

/*
 * Every packet below cum was processed at the target before cum passed
 * it, and a failed message queues its STATUS while its last packet is
 * processed, so an ack's `status` counts every failure among the
 * messages below its cum.  A STATUS is counted before it takes its place
 * in the response ring, which is sent in order, so every STATUS ahead of
 * such a failure's was counted too: they are among the first `status`
 * STATUS frames in sequence order.  Once those were processed here (each
 * completed its op with the failure first), the writes and notifies
 * below cum still open succeeded.  They are counted as this side's
 * cumulative point passes them (me_msg_status_passed), not as they
 * arrive: a later STATUS handled before an earlier one that was lost, or
 * was still being handled on another link or CPU, must not stand in for
 * it.
 *
 * snd_una is the newest cum, ack_status the largest count; an ack stores
 * its count before it moves snd_una, and the pass reads snd_una first, so
 * the count it compares with is at least that of the ack that moved
 * snd_una there (a larger one only waits for more STATUS frames, which
 * are sequenced and come).  One pass at a time (trylock): whoever wants
 * one sets done_again first; the holder loops while it is set and
 * re-checks after unlocking, so no receive thread waits for another.
 */
static bool done_run(struct me_conn *c)
{
	bool any = false;

again:
	me_atomic_set(&c->done_again, 1);
	if (!me_trylock(&c->done_lock))
		return any;
	while (me_atomic_xchg(&c->done_again, 0)) {
		u32 cum = me_atomic_read(&c->snd_una);
		u32 want = me_atomic_read(&c->ack_status);

		if ((s32)(me_atomic_read(&c->status_seen) - want) >= 0)
			any |= acked_pass(c, cum);
	}
	me_unlock(&c->done_lock);
	if (me_atomic_read(&c->done_again))
		goto again;
	return any;
}

void me_msg_ack_status(struct me_conn *c, u32 nstatus)
{
	me_atomic_seq_max(&c->ack_status, nstatus);
}

void me_msg_acked(struct me_conn *c)
{
	done_run(c);
}

static void rx_status(struct me_conn *c, const struct me_hdr *h)
{
	struct me_op *op = op_find(c, h->d.op_id);
	u32 type = op ? me_atomic_read(&op->type) : 0;

	/* Only a failure is told by STATUS, but for an empty read. */
	if (!op || type == ME_PT_CLOSE ||
	    (type == ME_PT_READ_REQ && !h->d.imm && op->len) ||
	    (type == ME_PT_ATOMIC && !h->d.imm)) {
		me_stat_inc(c->node, ME_ST_RX_BADOP);
	} else {
		me_atomic64_set(&c->progress_ns, h->now);
		complete_op(c, op, h->d.op_id, -(s32)h->d.imm);
	}
	/* Counted once the cumulative point passes it (window.c). */
}

void me_msg_status_passed(struct me_conn *c)
{
	me_atomic_add_return(&c->status_seen, 1);
	/* A CLOSE may be waiting for what completed. */
	if (done_run(c))
		me_msg_pump(c);
}

int me_msg_rx(struct me_conn *c, const struct me_hdr *h)
{
	switch (h->type) {
	case ME_PT_WRITE:
	case ME_PT_NOTIFY:
		return rx_write(c, h);
	case ME_PT_PACK:
		return rx_pack(c, h);
	case ME_PT_READ_REQ:
		return rx_read_req(c, h);
	case ME_PT_ATOMIC:
		return rx_atomic(c, h);
	case ME_PT_READ_RESP:
		rx_read_resp(c, h);
		return 0;
	case ME_PT_STATUS:
		rx_status(c, h);
		return 0;
	default:
		return 0;
	}
}

/* ------------------------------------------------------------------ */
/* Packetizer                                                          */

/* True when every op before the CLOSE at op_pack has completed. */
static bool all_prior_done(struct me_conn *c)
{
	u32 i;

	for (i = c->op_tail; i != c->op_pack; i++)
		if (OP_PH(me_atomic_read(&c->ops[i & (c->nops - 1)].state)) ==
		    ME_OP_QUEUED)
			return false;
	return true;
}

struct job {
	u32 type;
	u32 op_id;
	u64 cookie;		/* an op's (zero-copy references) */
	u32 len;
	u32 region;		/* header region/key/addr */
	u64 key;
	u64 addr;
	u32 imm;
	bool ack_now;		/* an op's ME_RW_ACK_NOW */
	u32 src_region;		/* where the payload comes from */
	u64 src_off;
	u32 lregion;		/* READ_REQ and ATOMIC payload */
	u64 laddr;
	u64 operand;		/* ATOMIC */
	u64 compare;
	u32 aop;		/* READ_RESP answering an ATOMIC, */
	u64 val;		/* with the value found */
};

static void job_from_op(struct job *j, struct me_op *op, u32 id)
{
	memset(j, 0, sizeof(*j));
	j->type = me_atomic_read(&op->type);
	j->op_id = id;
	if (j->type == ME_PT_CLOSE)
		return;
	j->cookie = op->cookie;
	j->len = op->len;
	j->region = op->rregion;
	j->key = op->rkey;
	j->addr = op->roff;
	j->imm = op->imm;
	j->ack_now = op->flags & ME_RW_ACK_NOW;
	j->src_region = op->lregion;
	j->src_off = op->loff;
	j->lregion = op->lregion;
	j->laddr = op->loff;
	j->operand = op->operand;
	j->compare = op->compare;
}

static void job_from_resp(struct job *j, const struct me_resp *r)
{
	memset(j, 0, sizeof(*j));
	j->type = r->type;
	j->op_id = r->op_id;
	if (r->type == ME_PT_STATUS) {
		j->imm = r->status;
		return;
	}
	j->len = r->len;
	j->region = r->lregion;
	j->addr = r->laddr;
	j->src_region = r->region;
	j->src_off = r->addr;
	j->aop = r->aop;
	j->val = r->val;
}

/* Drops the pack reference of op @id (me_plat.h), with pump_lock held. */
static void pack_put(struct me_conn *c, u32 id)
{
	struct me_node *n = c->node;
	struct me_op *op = &c->ops[id & (c->nops - 1)];

	if (me_zc_on(n) && me_zc_type(me_atomic_read(&op->type)))
		n->ops->zc_put(n->ctx, op->cookie);
}

/* Choose the next job; false if there is none ready. */
static bool next_job(struct me_conn *c, struct job *j)
{
	if (c->cur_kind == 2 || (c->cur_kind == 0 &&
	    me_atomic_read(&c->resp[c->resp_tail & (c->nresp - 1)].ready) ==
	    c->resp_tail + 1)) {
		c->cur_kind = 2;
		job_from_resp(j, &c->resp[c->resp_tail & (c->nresp - 1)]);
		return true;
	}
	while (c->op_pack != me_atomic_read(&c->op_head)) {
		struct me_op *op = &c->ops[c->op_pack & (c->nops - 1)];

		if (c->cur_kind == 0 &&
		    me_atomic_read(&op->state) != OPST(c->op_pack, ME_OP_QUEUED)) {
			/* Failed before it was sent: skip it. */
			pack_put(c, c->op_pack);
			c->op_pack++;
			me_atomic_set(&c->op_packed, c->op_pack);
			continue;
		}
		if (me_atomic_read(&op->type) == ME_PT_CLOSE) {
			u32 cut;

			/*
			 * After every op before it, and after every answer
			 * to the peer's requests below the close cut: the
			 * peer completes its writes below it as taken.
			 */
			if (!all_prior_done(c) || !me_win_close_cut(c, &cut) ||
			    me_atomic_read(&c->resp_head) != c->resp_tail)
				return false;
			c->cur_kind = 1;
			job_from_op(j, op, c->op_pack);
			j->imm = cut;
			return true;
		}
		c->cur_kind = 1;
		job_from_op(j, op, c->op_pack);
		return true;
	}
	return false;
}

/*
 * The op's last packet is going out: from now on only the peer's answer
 * completes it.  A completion may race with this (a failing
 * connection): whichever of the two moves `due` first decides, so
 * answers_due counts each op at most once and never goes below zero.
 */
static void mark_due(struct me_conn *c, struct me_op *op, u64 now)
{
	me_atomic64_set(&op->due_ns, now);
	if (me_atomic_cmpxchg(&op->due, 0, 1) == 0)
		me_atomic_add_return(&c->answers_due, 1);
}

bool me_msg_answer_overdue(struct me_conn *c, u64 now)
{
	u32 i;

	if (!me_atomic_read(&c->answers_due) ||
	    me_elapsed(now, me_atomic64_read(&c->progress_ns)) <= c->node->cfg.answer_ns)
		return false;
	/* Called a few times per answer_ns; the queue is short (ME_OPS_MAX). */
	for (i = 0; i < c->nops; i++) {
		struct me_op *op = &c->ops[i];

		if (me_atomic_read(&op->due) == 1 &&
		    me_elapsed(now, me_atomic64_read(&op->due_ns)) > c->node->cfg.answer_ns)
			return true;
	}
	return false;
}

/* now: me_now() of the packet (one clock read for a PACK's ops). */
static void job_done(struct me_conn *c, u32 seq, u64 now)
{
	if (c->cur_kind == 2) {
		c->resp_tail++;
		resp_unreserve(c);
	} else {
		struct me_op *op = &c->ops[c->op_pack & (c->nops - 1)];

		me_atomic_set(&op->last_seq, seq);
		if (me_atomic_read(&op->type) != ME_PT_CLOSE)
			mark_due(c, op, now);
		pack_put(c, c->op_pack);
		c->op_pack++;
		me_atomic_set(&c->op_packed, c->op_pack);
	}
	c->cur_kind = 0;
	c->cur_off = 0;
}

static u32 chunk_len(struct me_conn *c, const struct job *j)
{
	u32 rem = j->len - c->cur_off;
	u32 chunk = me_min_u32(rem, c->maxpay);
	u32 mis = (u32)((j->addr + c->cur_off) & (PAGE_SZ - 1));

	/*
	 * Paper §3.3: a transfer holding a whole page of the receiver is cut
	 * at the receiver's page boundaries, so whole pages land
	 * page-aligned (flippable): first up to the first boundary, then
	 * whole pages, then the rest.  Unless the receiver's acks say it
	 * copies them anyway (ME_F_FILL): then every packet is filled.
	 */
	if (c->maxpay >= PAGE_SZ && !me_atomic_read(&c->tx_fill)) {
		if (mis && rem >= 2 * PAGE_SZ - mis)
			chunk = me_min_u32(chunk, PAGE_SZ - mis);
		else if (!mis && rem > chunk)
			chunk &= ~(PAGE_SZ - 1);
	}
	return chunk;
}

/* The header every sequenced packet of c starts from. */
static void seq_hdr(struct me_conn *c, struct me_hdr *h, u32 type, u32 plen, u32 seq)
{
	me_node_hdr(c->node, h, type, c->peer);
	h->src_conn = c->id;
	h->dst_conn = c->peer_conn;
	h->dst_inc = c->peer_inc;
	h->cookie = c->peer_cookie;
	h->payload_len = (u16)plen;
	h->d.seq = seq;
}

/* Could the op be an entry of a PACK with room bytes left? */
static bool packable(struct me_conn *c, u32 id, u32 room)
{
	struct me_op *op = &c->ops[id & (c->nops - 1)];
	u32 type = me_atomic_read(&op->type);

	return me_atomic_read(&op->state) == OPST(id, ME_OP_QUEUED) &&
	       (type == ME_PT_WRITE || type == ME_PT_NOTIFY) &&
	       room >= ME_PACK_ENT && op->len <= room - ME_PACK_ENT;
}

/*
 * No path had room for @len bytes (me_path_pick() < 0; @paced: when a
 * paced path with room may send, or 0).  The pump waits for the acks
 * that open room, in turn with the peer's other connections (share.c),
 * or for the pacing call: either restarts it without the timer's pass
 * (parked).  A usable path without room has bytes in flight (its room
 * is an MTU at least), whose acks or timeouts come; with none usable,
 * only the timer's pass helps.  An ack that opened room and looked for
 * waiters before this one was counted woke none: the second look, after
 * the mark (full barriers on both sides), finds its room, and the pump
 * goes on (pump_again).
 */
static void pump_wait_room(struct me_conn *c, u32 len, u64 paced)
{
	struct me_node *n = c->node;

	me_share_wait(c);
	if (!paced) {
		me_smp_mb();	/* the mark before the look */
		if (me_path_pick(n, c->pe, len, false, &paced) >= 0) {
			me_atomic_set(&c->pump_again, 1);
			return;
		}
	}
	if (paced)
		me_share_pace_wait(c, paced);
	c->parked = paced || me_path_any(n, c->pe) >= 0;
}

/*
 * The queued writes and notifies from op_pack on, two or more that fit
 * in one packet, as one PACK (wire 8): one frame, one sequence number
 * and one ack for all of them instead of one each.  They complete as
 * one-packet messages do, by the ack of the packet.  Returns 1 if it
 * sent one, 0 if blocked, -1 if the queue does not start with two.
 */
static int pump_pack(struct me_conn *c)
{
	struct me_node *n = c->node;
	u32 head = me_atomic_read(&c->op_head), first = c->op_pack;
	u32 cnt = 0, plen = 0, seq, st, i;
	struct me_pack_ent e;
	u64 now, paced;
	struct me_txslot *t;
	struct me_hdr h;
	int link;
	u8 *p;

	while (first + cnt != head && cnt < c->pack_max &&
	       packable(c, first + cnt, c->maxpay - plen)) {
		plen += ME_PACK_ENT + c->ops[(first + cnt) & (c->nops - 1)].len;
		cnt++;
	}
	if (cnt < 2)
		return -1;
	link = me_path_pick(n, c->pe, ME_HDR_SEQ + plen, false, &paced);
	if (link < 0) {
		pump_wait_room(c, ME_HDR_SEQ + plen, paced);
		return 0;
	}
	t = me_win_tx_reserve(c, &seq);
	if (!t) {
		c->parked = me_win_tx_full(c);
		return 0;
	}
	t->zc = 0;
	/* See me_msg_fail_all(): mark, then check the state again. */
	for (i = 0; i < cnt; i++) {
		struct me_op *op = &c->ops[(first + i) & (c->nops - 1)];

		me_atomic_set(&op->first_seq, seq);
		me_atomic_set(&op->sent, 1);
	}
	st = me_atomic_read(&c->state);
	if (st != ME_CS_ESTABLISHED && st != ME_CS_CLOSING) {
		me_win_tx_abort(c, t);
		return 0;
	}
	seq_hdr(c, &h, ME_PT_PACK, plen, seq);
	h.d.msg_len = cnt;
	h.flags |= ME_F_LAST | ME_F_ACKREQ;
	/* One op waited for makes the whole pack's ack prompt. */
	for (i = 0; i < cnt; i++)
		if (c->ops[(first + i) & (c->nops - 1)].flags & ME_RW_ACK_NOW)
			h.flags |= ME_F_NOW;
	me_wire_build(t->buf, &h);
	p = t->buf + ME_HDR_SEQ;
	for (i = 0; i < cnt; i++) {
		struct me_op *op = &c->ops[(first + i) & (c->nops - 1)];
		int err = 0;

		e.type = me_atomic_read(&op->type);
		e.len = op->len;
		e.op_id = first + i;
		e.region = op->rregion;
		e.imm = op->imm;
		e.key = op->rkey;
		e.addr = op->roff;
		p += me_wire_pack_put(p, &e);
		if (e.len)
			err = n->ops->mr_read(n->ctx, op->lregion, op->loff, p, e.len);
		if (err) {
			/* As in pump_one(): the registration vanished. */
			me_win_tx_abort(c, t);
			me_conn_terminate(c, ME_CS_DEAD, err);
			return 0;
		}
		p += e.len;
	}
	/* Done before the packet leaves: see pump_one(). */
	now = me_now(n);
	for (i = 0; i < cnt; i++) {
		c->cur_kind = 1;
		job_done(c, seq, now);
	}
	me_stat_inc(n, ME_ST_TX_PACKS);
	me_stat_add(n, ME_ST_TX_PACKED, cnt);
	me_win_tx_commit(c, t, seq, ME_HDR_SEQ + plen, (u32)link, now);
	return 1;
}

/* Build and send one packet of the current job; false if blocked. */
static bool pump_one(struct me_conn *c)
{
	struct me_node *n = c->node;
	u32 st = me_atomic_read(&c->state), seq, chunk = 0, plen;
	struct me_txslot *t;
	struct me_hdr h;
	struct job j;
	bool data, last;
	int link;
	u64 now, paced;

	if (st != ME_CS_ESTABLISHED && st != ME_CS_CLOSING)
		return false;
	if (!next_job(c, &j))
		return false;
	if (c->cur_kind == 1 && c->cur_off == 0 &&
	    (j.type == ME_PT_WRITE || j.type == ME_PT_NOTIFY)) {
		int sent = pump_pack(c);

		if (sent >= 0)
			return sent;
	}
	/* Data messages may span packets; requests and controls are one. */
	data = j.type == ME_PT_WRITE || j.type == ME_PT_NOTIFY ||
	       j.type == ME_PT_READ_RESP;
	if (data)
		chunk = chunk_len(c, &j);
	last = !data || c->cur_off + chunk == j.len;
	if (j.type == ME_PT_READ_REQ)
		plen = ME_READ_REQ_PAY;
	else if (j.type == ME_PT_ATOMIC)
		plen = ME_ATOMIC_PAY;
	else
		plen = chunk;
	link = me_path_pick(n, c->pe, ME_HDR_SEQ + plen, false, &paced);
	if (link < 0) {
		pump_wait_room(c, ME_HDR_SEQ + plen, paced);
		return false;
	}
	t = me_win_tx_reserve(c, &seq);
	if (!t) {
		c->parked = me_win_tx_full(c);
		return false;
	}
	t->zc = 0;
	if (c->cur_kind == 1 && c->cur_off == 0) {
		struct me_op *op = &c->ops[j.op_id & (c->nops - 1)];

		/* See me_msg_fail_all(): mark, then check the state again. */
		me_atomic_set(&op->first_seq, seq);
		me_atomic_set(&op->sent, 1);
		st = me_atomic_read(&c->state);
		if (st != ME_CS_ESTABLISHED && st != ME_CS_CLOSING) {
			me_win_tx_abort(c, t);
			return false;
		}
	}

	if (c->cur_off == 0)
		c->cur_msg = c->msg_nxt++;
	seq_hdr(c, &h, j.type, plen, seq);
	h.d.msg_id = c->cur_msg;
	h.d.op_id = j.op_id;
	h.d.msg_len = j.len;
	h.d.msg_off = c->cur_off;
	h.d.region = j.region;
	h.d.key = j.key;
	h.d.addr = j.addr;
	h.d.imm = j.imm;
	if (last)
		h.flags |= ME_F_LAST | ME_F_ACKREQ;
	if (last && j.ack_now && (j.type == ME_PT_WRITE || j.type == ME_PT_NOTIFY))
		h.flags |= ME_F_NOW;
	/* The window's edge: an ack at once clocks out the next packets. */
	if (me_path_edge(n, c->pe, (u32)link, ME_HDR_SEQ + plen))
		h.flags |= ME_F_ACKREQ;
	me_wire_build(t->buf, &h);
	if (j.type == ME_PT_READ_REQ) {
		u8 *p = t->buf + ME_HDR_SEQ;

		me_put_be32(p, j.lregion);
		me_put_be32(p + 4, 0);
		me_put_be64(p + 8, j.laddr);
	} else if (j.type == ME_PT_ATOMIC) {
		struct me_atomic_req a = {
			.lregion = j.lregion,
			.laddr = j.laddr,
			.operand = j.operand,
			.compare = j.compare,
		};

		me_wire_atomic_put(t->buf + ME_HDR_SEQ, &a);
	} else if (j.aop) {
		/* An atomic's answer (one packet): the value it found. */
		if (chunk == 4)
			me_put_be32(t->buf + ME_HDR_SEQ, (u32)j.val);
		else
			me_put_be64(t->buf + ME_HDR_SEQ, j.val);
	} else if (chunk && c->cur_kind == 1 && me_zc_on(n) && me_zc_type(j.type) &&
		   chunk >= n->cfg.zc_min) {
		/* By reference: the entry holds the op's payload (me_plat.h). */
		n->ops->zc_hold(n->ctx, j.cookie);
		t->zc = ME_ZC_OP;
		t->zc_cookie = j.cookie;
		t->zc_region = j.src_region;
		t->zc_off = j.src_off + c->cur_off;
		me_atomic_set(&t->zc_held, 1);
	} else if (chunk && c->cur_kind == 2 && me_zc_resp_on(n) && chunk >= n->cfg.zc_min) {
		/*
		 * A read's answer by reference to the region it reads: the
		 * entry holds the region (me_plat.h), retransmissions send
		 * from it again.
		 */
		u64 hd = n->ops->resp_hold(n->ctx, j.src_region, j.src_off + c->cur_off, chunk);

		if (!hd) {
			/* As below: the registration vanished. */
			me_win_tx_abort(c, t);
			me_conn_terminate(c, ME_CS_DEAD, -ENOENT);
			return false;
		}
		t->zc = ME_ZC_RESP;
		t->zc_cookie = hd;
		t->zc_region = j.src_region;
		t->zc_off = j.src_off + c->cur_off;
		me_atomic_set(&t->zc_held, 1);
	} else if (chunk) {
		int err = n->ops->mr_read(n->ctx, j.src_region,
					  j.src_off + c->cur_off,
					  t->buf + ME_HDR_SEQ, chunk);

		if (err) {
			/*
			 * The registration vanished under a message being
			 * sent: the message can never complete, so neither
			 * can the connection.
			 */
			me_win_tx_abort(c, t);
			me_conn_terminate(c, ME_CS_DEAD, err);
			return false;
		}
	}
	if (j.type == ME_PT_CLOSE)
		me_atomic_set(&c->close_seq, seq + 1);
	/*
	 * Finish the job before the last packet leaves: its answer may be
	 * processed on another thread before commit returns, and op_find()
	 * accepts only ops below op_packed.
	 */
	c->cur_off += chunk;
	/* One clock read per packet (an emulated clock is slow to read). */
	now = me_now(n);
	if (last)
		job_done(c, seq, now);
	me_win_tx_commit(c, t, seq, ME_HDR_SEQ + plen, (u32)link, now);
	return true;
}

/*
 * A closed or dead connection packetizes nothing more: drop the pack
 * references of the ops it will never send (they are failed, or are
 * being failed: me_msg_fail_all() runs the pump at each completion).
 * op_packed stays: it says "sent in full, last_seq set", and an ack
 * handled meanwhile on another thread completes what is below it with
 * success (acked_pass()) — ops never sent among them, by their last
 * lap's last_seq, whose bytes never left.  With pump_lock held.
 */
static void drain_packs(struct me_conn *c)
{
	u32 st = me_atomic_read(&c->state);
	u32 head = me_atomic_read(&c->op_head);

	if (st != ME_CS_CLOSED && st != ME_CS_DEAD)
		return;
	while (c->op_pack != head) {
		pack_put(c, c->op_pack);
		c->op_pack++;
	}
	if (c->cur_kind == 1) {
		c->cur_kind = 0;
		c->cur_off = 0;
	}
}

/* With pump_lock held: nothing is left to send (ops, answers). */
static bool pump_done(struct me_conn *c)
{
	return c->cur_kind == 0 && c->op_pack == me_atomic_read(&c->op_head) &&
	       me_atomic_read(&c->resp[c->resp_tail & (c->nresp - 1)].ready) !=
	       c->resp_tail + 1;
}

/*
 * One packetizer at a time (trylock).  Whoever wants packets sent sets
 * pump_again first; the holder loops while it is set and re-checks after
 * unlocking, so a request racing with the unlock is never lost.
 */
void me_msg_pump(struct me_conn *c)
{
	struct me_node *n = c->node;

again:
	me_atomic_set(&c->pump_again, 1);
	if (!me_trylock(&c->pump_lock))
		return;
	if (n->ops->tx_burst)
		n->ops->tx_burst(n->ctx, true);
	while (me_atomic_xchg(&c->pump_again, 0)) {
		me_share_unwait(c);
		c->parked = false;
		while (pump_one(c))
			;
	}
	drain_packs(c);
	if (n->ops->tx_burst)
		n->ops->tx_burst(n->ctx, false);
	/* Stopped where no ack or pacing call restarts it: the timer does. */
	if (!pump_done(c) && !c->parked)
		me_node_busy(n);
	me_unlock(&c->pump_lock);
	if (me_atomic_read(&c->pump_again))
		goto again;
}

bool me_msg_quiet(struct me_conn *c)
{
	bool quiet;

	/* A pump under way is not quiet; the lock makes its fields ours. */
	if (!me_trylock(&c->pump_lock))
		return false;
	quiet = pump_done(c) || c->parked;
	me_unlock(&c->pump_lock);
	if (me_atomic_read(&c->pump_again)) {
		/* A pump lost the lock to us and left its work: do it now. */
		me_msg_pump(c);
		return false;
	}
	return quiet;
}
