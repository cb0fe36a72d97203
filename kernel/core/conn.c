// SPDX-License-Identifier: GPL-2.0
/*
 * conn.c - connection life: handshake, lookup, close, death.
 *
 * Handshake: CONNECT (our id, incarnation, first sequence number, window,
 * credit, mode) is resent every connect_rto until ACCEPT arrives; the
 * passive side creates its connection on the first CONNECT and answers
 * every copy with the same ACCEPT.  Control packets take ctl_lock with a
 * trylock: a receive thread that finds it busy drops the packet, which
 * the peer resends; no receive thread waits.
 *
 * Close: me_conn_close() queues a CLOSE behind the connection's ops; it is
 * sent once they have all completed and every request of the peer's below
 * the close cut was taken and answered (window.c), and is processed by the
 * peer after everything sent before it.  Both sides then deliver nothing
 * more; the peer's requests at or beyond the cut fail there -ECANCELED.
 */
#include "conn.h"
#include "node.h"
#include "path.h"
#include "share.h"

static u32 mix32(u32 x)
{
	x ^= x >> 16;
	x *= 0x7feb352d;
	x ^= x >> 15;
	x *= 0x846ca68b;
	x ^= x >> 16;
	return x;
}

static void event(struct me_conn *c, u32 type, s32 status)
{
	struct me_cqe q;

	memset(&q, 0, sizeof(q));
	q.type = type;
	q.status = status;
	q.conn = c->id;
	q.peer = c->peer;
	c->node->ops->complete(c->node->ctx, &q);
}

void me_conn_free(struct me_conn *c)
{
	me_msg_free(c);
	me_win_free(c);
	if (c->pe) {
		me_share_unwait(c);
		me_peer_put(c->node, c->pe);
	}
	c->node->ops->free(c->node->ctx, c);
}

void me_conn_tx(struct me_conn *c, u32 link, const void *buf, u32 len)
{
	me_node_tx(c->node, link, me_path_addr(c->pe, link), buf, len);
}

/*
 * Allocate a connection to a known peer (it holds the peer's slot).
 * Called without ctl_lock: the buffers are large, and a host may only be
 * able to provide them where it can sleep (the kernel module's receive
 * threads and ioctls can).  NULL with *err set: -EHOSTUNREACH (no HELLO
 * of that peer) or -ENOMEM.
 */
static struct me_conn *conn_alloc(struct me_node *n, u32 peer, u32 mode, int *err)
{
	struct me_conn *c;
	u32 i;

	*err = -ENOMEM;
	c = n->ops->alloc(n->ctx, sizeof(*c));
	if (!c)
		return NULL;
	memset(c, 0, sizeof(*c));
	c->node = n;
	c->peer = peer;
	c->pe = me_peer_hold(n, peer);
	if (!c->pe) {
		n->ops->free(n->ctx, c);
		*err = -EHOSTUNREACH;
		return NULL;
	}
	c->mode = mode;
	c->window = n->cfg.window;
	c->credit = n->cfg.credit;
	c->nops = n->cfg.ops;
	c->nresp = n->cfg.window;
	c->maxpay = n->cfg.mtu - ME_HDR_SEQ;
	me_atomic_set(&c->state, ME_CS_CONNECTING);
	for (i = 0; i < ME_CST_MAX_; i++)
		me_atomic64_set(&c->cst[i], 0);
	if (me_win_alloc(c) || me_msg_alloc(c)) {
		me_conn_free(c);
		return NULL;
	}
	return c;
}

/* Unpredictable where the host has randomness, never 0. */
static u32 conn_random(struct me_node *n, u32 salt)
{
	return n->ops->random_u32 ? n->ops->random_u32(n->ctx) :
	       mix32(n->cfg.incarnation * 2654435761u + salt);
}

/*
 * Give it an id, with ctl_lock held: the oldest retired slot's next one,
 * else a slot never used.  false: every slot is taken.
 */
static bool conn_number(struct me_node *n, struct me_conn *c)
{
	u32 id;

	if (n->free_len) {
		id = n->free_ids[n->free_head];
		n->free_head = (n->free_head + 1) % n->cfg.max_conns;
		n->free_len--;
	} else {
		id = me_atomic_read(&n->nconns) + 1;
		if (id > n->cfg.max_conns)
			return false;
	}
	c->id = id;
	/* Unpredictable, so a blind sender cannot aim into the window. */
	c->isn = conn_random(n, id);
	c->cookie = (u64)conn_random(n, ~id) << 32 | conn_random(n, id * 3);
	if (!c->cookie)
		c->cookie = 1;
	me_win_start_tx(c, c->isn, c->isn);
	return true;
}

static u32 slot_of(struct me_node *n, u32 id)
{
	return (id - 1) & n->slot_mask;
}

/* Make the connection visible to receive threads (release). */
static void conn_publish(struct me_node *n, struct me_conn *c)
{
	u32 slot = slot_of(n, c->id);

	me_ptr_store((void **)&n->conns[slot], c);
	if (slot >= me_atomic_read(&n->nconns))
		me_atomic_set(&n->nconns, slot + 1);
	me_atomic_add_return(&n->live, 1);
}

/*
 * A shared connection to @peer that is up, or being opened from here
 * (ctl_lock held): a node keeps one (rx_connect()).
 */
static bool shared_live(struct me_node *n, u32 peer)
{
	u32 i, cnt = me_atomic_read(&n->nconns);

	for (i = 0; i < cnt; i++) {
		struct me_conn *c = n->conns[i];
		u32 st;

		if (!c || c->mode != ME_MODE_SHARED || c->peer != peer)
			continue;
		st = me_atomic_read(&c->state);
		if (st == ME_CS_ESTABLISHED || (st == ME_CS_CONNECTING && c->active))
			return true;
	}
	return false;
}

static void send_conn_pkt(struct me_conn *c, u32 type, int link)
{
	struct me_node *n = c->node;
	u8 buf[ME_HDR_CONN];
	struct me_hdr h;

	if (link < 0)
		link = me_path_any(n, c->pe);
	if (link < 0)
		return;
	me_node_hdr(n, &h, type, c->peer);
	if (type == ME_PT_CONNECT && me_atomic_read(&c->refused))
		h.flags = ME_F_FRESH;
	h.src_conn = c->id;
	h.dst_conn = type == ME_PT_ACCEPT ? c->peer_conn : 0;
	h.dst_inc = type == ME_PT_ACCEPT ? c->peer_inc : me_atomic_read(&c->pe->inc);
	h.cookie = type == ME_PT_ACCEPT ? c->peer_cookie : 0;
	h.c.cookie = c->cookie;
	h.c.isn = c->isn;
	h.c.credit = c->credit;
	h.c.window = c->window;
	h.c.mode = c->mode;
	h.c.ops = c->nops;
	h.c.port = c->port;
	me_wire_build(buf, &h);
	me_conn_tx(c, (u32)link, buf, ME_HDR_CONN);
}

int me_conn_connect_port(struct me_node *n, u32 peer, u32 mode, u32 port,
			 struct me_conn **out)
{
	struct me_conn *c;
	int err;

	if (mode > ME_MODE_SHARED || (mode == ME_MODE_SHARED && port) || !peer ||
	    peer == ME_NODE_BCAST || peer == n->cfg.node_id || port > ME_WIRE_PORT_MAX)
		return -EINVAL;
	c = conn_alloc(n, peer, mode, &err);
	if (!c)
		return err;
	c->active = true;
	c->port = port;
	me_lock(&n->ctl_lock);
	/* The peer's CONNECT may have made one since the host looked. */
	if (mode == ME_MODE_SHARED && shared_live(n, peer)) {
		me_unlock(&n->ctl_lock);
		me_conn_free(c);
		return -EEXIST;
	}
	if (!conn_number(n, c)) {
		me_unlock(&n->ctl_lock);
		me_conn_free(c);
		return -ENOSPC;
	}
	c->connect_sent_ns = me_now(n);
	c->connect_start_ns = c->connect_sent_ns;
	conn_publish(n, c);
	me_unlock(&n->ctl_lock);
	send_conn_pkt(c, ME_PT_CONNECT, -1);
	*out = c;
	return 0;
}

int me_conn_connect(struct me_node *n, u32 peer, u32 mode, struct me_conn **out)
{
	return me_conn_connect_port(n, peer, mode, 0, out);
}

struct me_conn *me_conn_get(struct me_node *n, u32 id)
{
	struct me_conn *c;
	u32 slot;

	if (!id)
		return NULL;
	slot = slot_of(n, id);
	if (slot >= n->cfg.max_conns)
		return NULL;
	c = me_ptr_load((void **)&n->conns[slot]);
	return c && c->id == id ? c : NULL;
}

struct me_conn *me_node_conn_at(struct me_node *n, u32 slot)
{
	if (slot >= me_atomic_read(&n->nconns))
		return NULL;
	return me_ptr_load((void **)&n->conns[slot]);
}

u32 me_node_live_conns(struct me_node *n)
{
	return me_atomic_read(&n->live);
}

void me_conn_release(struct me_conn *c)
{
	me_atomic_set(&c->released, 1);
}

bool me_conn_reclaimable(struct me_conn *c, u64 now)
{
	u32 st = me_atomic_read(&c->state);
	u64 end = me_atomic64_read(&c->end_ns);

	return me_atomic_read(&c->released) && (st == ME_CS_CLOSED || st == ME_CS_DEAD) &&
	       end && me_elapsed(now, end) >= c->node->cfg.linger_ns;
}

void me_conn_retire(struct me_conn *c)
{
	struct me_node *n = c->node;
	u32 slot = slot_of(n, c->id), next;

	/*
	 * The slot's next id: one generation on, back to the first at the
	 * end, never ME_CONN_ID_NONE.
	 */
	next = c->id >= ME_CONN_ID_NONE - (n->slot_mask + 1) ? slot + 1 :
	       c->id + n->slot_mask + 1;
	me_lock(&n->ctl_lock);
	me_ptr_store((void **)&n->conns[slot], NULL);
	me_atomic_add_return(&n->live, -1);
	me_unlock(&n->ctl_lock);
	me_win_owed_drop(c);
	/* The host forgets the slot before a new connection can take it. */
	n->ops->retire(n->ctx, c);
	me_lock(&n->ctl_lock);
	n->free_ids[(n->free_head + n->free_len) % n->cfg.max_conns] = next;
	n->free_len++;
	me_unlock(&n->ctl_lock);
}

u32 me_node_slot(struct me_node *n, u32 id)
{
	u32 slot = slot_of(n, id);

	return id && slot < n->cfg.max_conns ? slot : ME_NO_SLOT;
}

void **me_conn_host_link(struct me_conn *c)
{
	return &c->host_link;
}

bool me_conn_active(struct me_conn *c)
{
	return c->active;
}

u32 me_conn_port(struct me_conn *c)
{
	return c->port;
}

s32 me_conn_end_status(struct me_conn *c)
{
	/* end_status is written before the state (conn_end). */
	return me_atomic_read(&c->state) == ME_CS_DEAD ? c->end_status : 0;
}

bool me_conn_live(struct me_conn *c)
{
	u32 st = me_atomic_read(&c->state);

	return st == ME_CS_ESTABLISHED || st == ME_CS_CLOSING;
}

struct me_conn *me_conn_lookup(struct me_node *n, const struct me_hdr *h)
{
	struct me_conn *c = me_conn_get(n, h->dst_conn);

	if (!c || h->src_node != c->peer)
		return NULL;
	/* peer_conn/peer_inc are valid once the state left CONNECTING. */
	if (me_atomic_read(&c->state) == ME_CS_CONNECTING)
		return NULL;
	if (h->src_conn != c->peer_conn || h->src_inc != c->peer_inc)
		return NULL;
	return c;
}

/*
 * The connection a CONNECT already created, with ctl_lock held; also
 * counts the peer's live passive connections into *live.
 */
static struct me_conn *find_passive(struct me_node *n, const struct me_hdr *h, u32 *live)
{
	u32 i, cnt = me_atomic_read(&n->nconns);

	*live = 0;
	for (i = 0; i < cnt; i++) {
		struct me_conn *c = n->conns[i];

		if (!c || c->peer != h->src_node || c->active)
			continue;
		if (c->peer_conn == h->src_conn && c->peer_inc == h->src_inc &&
		    me_atomic_read(&c->state) != ME_CS_CONNECTING)
			return c;
		if (me_conn_live(c))
			(*live)++;
	}
	return NULL;
}

/*
 * Two nodes that open their shared connection to each other at once would
 * keep two: the one the lower node id opened is kept.  True (with ctl_lock
 * held) for a SHARED CONNECT from a higher id while this side's own is
 * being opened or up: the CONNECT is refused (EEXIST), and the peer's
 * files join ours when it arrives there.
 */
static bool shared_opened_here(struct me_node *n, const struct me_hdr *h)
{
	u32 i, cnt = me_atomic_read(&n->nconns);

	if (h->c.mode != ME_MODE_SHARED || n->cfg.node_id > h->src_node)
		return false;
	for (i = 0; i < cnt; i++) {
		struct me_conn *c = n->conns[i];
		u32 st;

		if (!c || !c->active || c->mode != ME_MODE_SHARED || c->peer != h->src_node)
			continue;
		st = me_atomic_read(&c->state);
		/* Up with this incarnation of the peer, not one that restarted. */
		if (st == ME_CS_CONNECTING ||
		    (st == ME_CS_ESTABLISHED && c->peer_inc == h->src_inc))
			return true;
	}
	return false;
}

/* Up and shared with @peer, other than @except: the one to join. */
static bool shared_up_with(struct me_node *n, u32 peer, const struct me_conn *except)
{
	u32 i, cnt = me_atomic_read(&n->nconns);

	for (i = 0; i < cnt; i++) {
		struct me_conn *c = me_ptr_load((void **)&n->conns[i]);

		if (c && c != except && c->mode == ME_MODE_SHARED && c->peer == peer &&
		    me_atomic_read(&c->state) == ME_CS_ESTABLISHED)
			return true;
	}
	return false;
}

/*
 * A node opens a shared connection only while it holds none with the
 * peer (me_conn_connect_port), so a new shared CONNECT says the sender
 * lost any this side still has up with it (an ABORT lost three times).
 * Those end here, before the CONNECT is taken, so this side's endpoints
 * join the new one instead of one that reaches nobody (and nothing is
 * sent on an idle one that would find out).  Except this side's own
 * when the sender is the higher id: that CONNECT may have crossed ours
 * (shared_opened_here), unless it is flagged FRESH (its sender was
 * refused and holds none of ours, wire 13).  Only a connection quiet
 * for connect_rto_ns goes: one the peer still has would have been heard
 * from (its ACCEPT at least), and a busy one cannot be ended by a forged
 * CONNECT.
 */
static void end_lost_shared(struct me_node *n, const struct me_hdr *h)
{
	u32 i, cnt;

	if (h->c.mode != ME_MODE_SHARED)
		return;
	cnt = me_atomic_read(&n->nconns);
	for (i = 0; i < cnt; i++) {
		struct me_conn *c = me_ptr_load((void **)&n->conns[i]);

		if (!c || c->mode != ME_MODE_SHARED || c->peer != h->src_node ||
		    me_atomic_read(&c->state) != ME_CS_ESTABLISHED ||
		    c->peer_inc != h->src_inc || c->peer_conn == h->src_conn)
			continue;
		if (c->active && n->cfg.node_id < h->src_node && !(h->flags & ME_F_FRESH))
			continue;
		if (me_elapsed(h->now, me_atomic64_read(&c->heard_ns)) < n->cfg.connect_rto_ns)
			continue;
		me_stat_inc(n, ME_ST_SHARED_LOST);
		me_conn_terminate(c, ME_CS_DEAD, -ECONNRESET);
	}
}

/*
 * This side's shared CONNECTs the peer refused (EEXIST) give way once
 * the peer's own shared connection is up here: its endpoints join that.
 */
static void end_refused_shared(struct me_node *n, u32 peer)
{
	u32 i, cnt = me_atomic_read(&n->nconns);

	for (i = 0; i < cnt; i++) {
		struct me_conn *c = me_ptr_load((void **)&n->conns[i]);

		/* Connecting: no ABORT goes (conn_end). */
		if (c && c->peer == peer && me_atomic_read(&c->refused) &&
		    me_atomic_read(&c->state) == ME_CS_CONNECTING)
			me_conn_terminate(c, ME_CS_DEAD, -EEXIST);
	}
}

/*
 * No state for a sender we do not know: a CONNECT is taken only from a
 * peer and incarnation HELLO made known, from its address on the link it
 * came on, while that path is alive both ways.  (Anyone on the segment
 * can still claim that identity: see Documentation/security.md.)
 */
static bool connect_allowed(struct me_node *n, u32 link, u64 src,
			    const struct me_hdr *h)
{
	struct me_peer *p = me_peer_find(n, h->src_node);

	return p && me_atomic_read(&p->inc) == h->src_inc &&
	       me_path_usable(n, p, link) && me_path_addr(p, link) == src;
}

void me_conn_key_rejected(struct me_conn *c)
{
	struct me_node *n = c->node;

	me_stat_inc(n, ME_ST_KEY_REJECTED);
	if (me_atomic_add_return(&c->key_rejected, 1) == n->cfg.key_fail_max + 1) {
		me_stat_inc(n, ME_ST_CONN_ABORTED);
		me_conn_terminate(c, ME_CS_DEAD, -ECONNABORTED);
	}
}

/*
 * Tells a known peer that its CONNECT is refused (@why: ECONNREFUSED, no
 * endpoint here takes its port; ENOSPC, it holds max_passive connections
 * here already, or the table is full; EEXIST, a shared connection this
 * side opened to it is kept instead): an ABORT with no source connection,
 * carrying the cookie the CONNECT offered (so only who saw the CONNECT can
 * forge one).  No state is kept; a resent CONNECT is refused again.
 */
static void send_refusal(struct me_node *n, u32 link, u64 src, const struct me_hdr *h,
			 u32 why)
{
	u8 buf[ME_HDR_ABORT];
	struct me_hdr r;

	me_node_hdr(n, &r, ME_PT_ABORT, h->src_node);
	r.dst_conn = h->src_conn;
	r.dst_inc = h->src_inc;
	r.cookie = h->c.cookie;
	r.x.status = why;
	me_wire_build(buf, &r);
	me_node_tx(n, link, src, buf, ME_HDR_ABORT);
}

/* See struct me_conn; the window is parsed, 8..32768. */
static u32 pack_max(u32 peer_window)
{
	return me_min_u32(ME_PACK_MAX, peer_window / 4);
}

static void rx_connect(struct me_node *n, u32 link, u64 src, const struct me_hdr *h)
{
	struct me_conn *c, *fresh;
	bool mine;
	u32 live;

	if (h->dst_inc && h->dst_inc != n->cfg.incarnation) {
		me_stat_inc(n, ME_ST_RX_STALE);
		return;
	}
	if (!connect_allowed(n, link, src, h)) {
		me_stat_inc(n, ME_ST_CONN_REFUSED);
		return;
	}
	if (h->c.port && (!n->ops->port_open || !n->ops->port_open(n->ctx, h->c.port))) {
		me_stat_inc(n, ME_ST_CONN_REFUSED);
		send_refusal(n, link, src, h, ECONNREFUSED);
		return;
	}
	end_lost_shared(n, h);
	if (!me_trylock(&n->ctl_lock))
		return;		/* the peer resends CONNECT */
	c = find_passive(n, h, &live);
	mine = !c && shared_opened_here(n, h);
	me_unlock(&n->ctl_lock);
	if (mine) {
		me_stat_inc(n, ME_ST_CONN_REFUSED);
		send_refusal(n, link, src, h, EEXIST);
		return;
	}
	if (!c && live >= n->cfg.max_passive) {
		me_stat_inc(n, ME_ST_CONN_REFUSED);
		send_refusal(n, link, src, h, ENOSPC);
		return;
	}
	if (!c) {
		/* Allocate unlocked, then look again: a copy may have won. */
		int err;

		fresh = conn_alloc(n, h->src_node, h->c.mode, &err);
		if (!fresh)
			return;
		fresh->port = h->c.port;
		if (!me_trylock(&n->ctl_lock)) {
			me_conn_free(fresh);
			return;
		}
		c = find_passive(n, h, &live);
		mine = !c && shared_opened_here(n, h);
		if (c || mine || live >= n->cfg.max_passive) {
			me_unlock(&n->ctl_lock);
			me_conn_free(fresh);
			if (!c) {
				me_stat_inc(n, ME_ST_CONN_REFUSED);
				send_refusal(n, link, src, h, mine ? EEXIST : ENOSPC);
				return;
			}
		}
	} else {
		fresh = NULL;
	}
	if (c) {
		/* A resent CONNECT (our ACCEPT was lost), not a forged one. */
		if (me_conn_live(c) && c->peer_cookie == h->c.cookie) {
			me_atomic64_set(&c->heard_ns, h->now);
			send_conn_pkt(c, ME_PT_ACCEPT, (int)link);
		}
		return;
	}
	c = fresh;
	if (!conn_number(n, c)) {
		me_unlock(&n->ctl_lock);
		me_conn_free(c);
		me_stat_inc(n, ME_ST_CONN_REFUSED);
		send_refusal(n, link, src, h, ENOSPC);
		return;
	}
	c->peer_conn = h->src_conn;
	c->peer_inc = h->src_inc;
	c->peer_cookie = h->c.cookie;
	c->pack_max = pack_max(h->c.window);
	me_win_start_rx(c, h->c.isn);
	me_win_start_tx(c, c->isn, c->isn + h->c.credit);
	me_win_seed_rtt(c);
	me_atomic64_set(&c->last_rx_ns, me_now(n));
	me_atomic64_set(&c->heard_ns, me_atomic64_read(&c->last_rx_ns));
	me_atomic_set(&c->state, ME_CS_ESTABLISHED);
	conn_publish(n, c);
	me_unlock(&n->ctl_lock);
	send_conn_pkt(c, ME_PT_ACCEPT, (int)link);
	event(c, ME_CQE_CONN_UP, 0);
	if (c->mode == ME_MODE_SHARED)
		end_refused_shared(n, c->peer);
}

static void rx_accept(struct me_node *n, const struct me_hdr *h)
{
	struct me_conn *c = me_conn_get(n, h->dst_conn);

	if (!c || c->peer != h->src_node ||
	    h->dst_inc != n->cfg.incarnation) {
		me_stat_inc(n, ME_ST_RX_STALE);
		return;
	}
	/* Only who saw our CONNECT knows the cookie it offered. */
	if (h->cookie != c->cookie) {
		me_stat_inc(n, ME_ST_RX_COOKIE);
		return;
	}
	if (!me_trylock(&n->ctl_lock))
		return;
	if (me_atomic_read(&c->state) != ME_CS_CONNECTING ||
	    h->c.mode != c->mode || h->c.port != c->port) {
		me_unlock(&n->ctl_lock);
		return;		/* duplicate ACCEPT */
	}
	c->peer_conn = h->src_conn;
	c->peer_inc = h->src_inc;
	c->peer_cookie = h->c.cookie;
	c->pack_max = pack_max(h->c.window);
	me_win_start_rx(c, h->c.isn);
	me_atomic_set(&c->snd_right, c->isn + h->c.credit);
	me_win_seed_rtt(c);
	me_atomic64_set(&c->last_rx_ns, me_now(n));
	me_atomic64_set(&c->heard_ns, me_atomic64_read(&c->last_rx_ns));
	me_atomic_set(&c->state, ME_CS_ESTABLISHED);
	me_unlock(&n->ctl_lock);
	event(c, ME_CQE_CONN_UP, 0);
	me_msg_pump(c);
}

void me_conn_rx_ctl(struct me_node *n, u32 link, u64 src, const struct me_hdr *h)
{
	if (h->type == ME_PT_CONNECT)
		rx_connect(n, link, src, h);
	else
		rx_accept(n, h);
}

/* ABORTs sent for a connection given up here (ABORT is not acked). */
#define ME_ABORT_TRIES	3

static void send_abort(struct me_conn *c)
{
	struct me_node *n = c->node;
	int link = me_path_any(n, c->pe);
	u8 buf[ME_HDR_ABORT];
	struct me_hdr h;

	if (link < 0)
		return;
	me_node_hdr(n, &h, ME_PT_ABORT, c->peer);
	h.src_conn = c->id;
	h.dst_conn = c->peer_conn;
	h.dst_inc = c->peer_inc;
	h.cookie = c->peer_cookie;
	h.x.status = c->abort_status;
	me_wire_build(buf, &h);
	me_conn_tx(c, (u32)link, buf, ME_HDR_ABORT);
}

/*
 * Ends the connection once.  @tell: it dies by a decision of ours (no
 * answer, no ack, too many wrong keys...), so the peer is told with an
 * ABORT (from the timer) instead of keeping its side until it notices:
 * an idle peer never would, and its side would hold one of its slots and
 * of our max_passive for good.
 */
static void conn_end(struct me_conn *c, u32 state, s32 status, bool tell)
{
	u32 st = me_atomic_read(&c->state);

	for (;;) {
		u32 old;

		if (st == ME_CS_CLOSED || st == ME_CS_DEAD)
			return;
		/* Before the state: the timer reads them in the other order. */
		me_atomic64_set(&c->end_ns, me_now(c->node));
		c->end_status = state == ME_CS_DEAD ? status : 0;
		old = me_atomic_cmpxchg(&c->state, st, state);
		if (old == st)
			break;
		st = old;
	}
	if (tell && st != ME_CS_CONNECTING) {
		c->abort_status = (u32)(status < 0 ? -status : ECONNABORTED);
		me_atomic_set(&c->abort_left, ME_ABORT_TRIES);
	}
	me_node_busy(c->node);	/* the sweep of what it had in flight */
	me_msg_fail_all(c, status);
	/* Zero-copy references: entries' now, unsent ops' in the pump. */
	me_win_zc_release_all(c);
	me_win_release_inflight(c);
	me_msg_pump(c);
	event(c, state == ME_CS_DEAD ? ME_CQE_CONN_DEAD : ME_CQE_CONN_CLOSED,
	      state == ME_CS_DEAD ? status : 0);
}

void me_conn_terminate(struct me_conn *c, u32 state, s32 status)
{
	conn_end(c, state, status, state == ME_CS_DEAD);
}

void me_conn_rx_abort(struct me_conn *c)
{
	if (me_conn_live(c))
		me_stat_inc(c->node, ME_ST_PEER_ABORT);
	conn_end(c, ME_CS_DEAD, -ECONNRESET, false);
}

/* ECONNREFUSED, ENOSPC or EEXIST (the parser lets no other status through). */
void me_conn_rx_refusal(struct me_node *n, const struct me_hdr *h)
{
	struct me_conn *c = me_conn_get(n, h->dst_conn);

	/* Only who saw our CONNECT knows the cookie it offered. */
	if (!c || !c->active || c->peer != h->src_node ||
	    me_atomic_read(&c->state) != ME_CS_CONNECTING ||
	    me_atomic_read(&c->pe->inc) != h->src_inc || h->cookie != c->cookie) {
		me_stat_inc(n, ME_ST_RX_STALE);
		return;
	}
	/*
	 * Refused for the peer's own shared connection, which is not up
	 * here: it is still on its way (its CONNECT crossed ours), or the
	 * peer has one this side lost.  Keep asking, flagged FRESH (wire
	 * 13): the peer ends a lost one, and once the peer's is up here
	 * this one gives way (end_refused_shared, the timer).
	 */
	if (h->x.status == EEXIST && c->mode == ME_MODE_SHARED &&
	    !shared_up_with(n, c->peer, c)) {
		me_atomic_set(&c->refused, 1);
		return;
	}
	conn_end(c, ME_CS_DEAD, -(s32)h->x.status, false);
}

void me_conn_close_acked(struct me_conn *c)
{
	if (me_atomic_read(&c->state) == ME_CS_CLOSING)
		me_conn_terminate(c, ME_CS_CLOSED, -ECONNRESET);
}

void me_conn_peer_closed(struct me_conn *c, u32 cut)
{
	/* Read by me_msg_fail_all(), under the state change. */
	me_atomic_set(&c->peer_cut, cut);
	me_atomic_set(&c->peer_cut_run, 1);
	me_conn_terminate(c, ME_CS_CLOSED, -ECONNRESET);
	me_win_send_ack(c, false);
}

void me_conn_peer_restarted(struct me_node *n, u32 peer, u32 new_inc)
{
	u32 i, cnt = me_atomic_read(&n->nconns);

	for (i = 0; i < cnt; i++) {
		struct me_conn *c = me_ptr_load((void **)&n->conns[i]);

		if (c && c->peer == peer && me_conn_live(c) && c->peer_inc != new_inc)
			conn_end(c, ME_CS_DEAD, -ECONNRESET, false);	/* it is gone */
	}
}

void me_conn_timer(struct me_conn *c, u64 now)
{
	struct me_node *n = c->node;
	u32 st = me_atomic_read(&c->state);

	/*
	 * A packet committed while the connection ended (the pump's race):
	 * swept under the pump lock, so that no pump is between its look at
	 * the state and its commit; a pump later sees the end and sends
	 * nothing.  (Swept without it, a pump held up past the first tick
	 * committed after the sweep, and its bytes stayed in the path's
	 * budget for good: ioctl_fuzz_test's stalled connections.)
	 */
	if ((st == ME_CS_CLOSED || st == ME_CS_DEAD) && !c->inflight_swept &&
	    me_trylock(&c->pump_lock)) {
		c->inflight_swept = true;
		me_win_release_inflight(c);
		me_unlock(&c->pump_lock);
		/* Room no ack will open: connections parked for it (share.c). */
		me_share_wake(n, c->pe);
	}
	if (me_atomic_read(&c->abort_left) &&
	    me_elapsed(now, c->abort_sent_ns) >= n->cfg.connect_rto_ns) {
		c->abort_sent_ns = now;
		me_atomic_add_return(&c->abort_left, -1);
		send_abort(c);
	}
	if (st == ME_CS_CONNECTING) {
		if (me_atomic_read(&c->refused) && shared_up_with(n, c->peer, c)) {
			conn_end(c, ME_CS_DEAD, -EEXIST, false);
			return;
		}
		if (now - c->connect_sent_ns < n->cfg.connect_rto_ns)
			return;
		/*
		 * Keep trying for peer_dead_ns at least: a peer refuses the
		 * CONNECTs of a node that just restarted until it believes
		 * the restart (the old incarnation silent for link_dead_ns).
		 */
		if (++c->connect_tries > n->cfg.max_retries &&
		    me_elapsed(now, c->connect_start_ns) >= n->cfg.peer_dead_ns) {
			me_conn_terminate(c, ME_CS_DEAD, -ETIMEDOUT);
			return;
		}
		c->connect_sent_ns = now;
		send_conn_pkt(c, ME_PT_CONNECT, -1);
		return;
	}
	if (me_path_any(n, c->pe) >= 0)
		me_atomic64_set(&c->last_rx_ns, now);
	else if (me_conn_live(c) &&
		 me_elapsed(now, me_atomic64_read(&c->last_rx_ns)) > n->cfg.peer_dead_ns)
		me_conn_terminate(c, ME_CS_DEAD, -ETIMEDOUT);
	/*
	 * A peer that acknowledges our packets but never answers an
	 * operation would keep it, its memory and its owner waiting
	 * forever: past answer_ns the connection is given up.  Scanned a
	 * few times per answer_ns, not every tick.
	 */
	if (n->cfg.answer_ns && me_conn_live(c) &&
	    me_elapsed(now, c->answer_check_ns) >= n->cfg.answer_ns / 8) {
		c->answer_check_ns = now;
		if (me_msg_answer_overdue(c, now))
			me_conn_terminate(c, ME_CS_DEAD, -ETIMEDOUT);
	}
	me_win_timer(c, now);
	me_msg_pump(c);
}

u64 me_conn_due(struct me_conn *c, u64 now)
{
	u32 st = me_atomic_read(&c->state);

	if (st == ME_CS_CLOSED || st == ME_CS_DEAD)
		return c->inflight_swept || me_win_tx_idle(c) ? ME_NEVER : now;
	if (st == ME_CS_CLOSING || !me_msg_quiet(c))
		return now;
	return me_win_due(c, now);
}

int me_conn_write(struct me_conn *c, const struct me_rw *rw)
{
	return me_msg_submit(c, ME_PT_WRITE, rw);
}

int me_conn_notify(struct me_conn *c, const struct me_rw *rw)
{
	return me_msg_submit(c, ME_PT_NOTIFY, rw);
}

int me_conn_read(struct me_conn *c, const struct me_rw *rw)
{
	return me_msg_submit(c, ME_PT_READ_REQ, rw);
}

int me_conn_atomic(struct me_conn *c, const struct me_rw *rw)
{
	if (rw->imm < ME_AOP_ADD || rw->imm >= ME_AOP_MAX_)
		return -EOPNOTSUPP;
	if (rw->len != 4 && rw->len != 8)
		return -EINVAL;
	if (rw->len == 4 && (rw->operand >> 32 || rw->compare >> 32))
		return -EINVAL;
	if ((rw->imm != ME_AOP_CSWAP && rw->compare) || (rw->imm == ME_AOP_READ && rw->operand))
		return -EINVAL;
	return me_msg_submit(c, ME_PT_ATOMIC, rw);
}

int me_conn_close(struct me_conn *c)
{
	return me_msg_submit(c, ME_PT_CLOSE, NULL);
}

u32 me_node_nconns(struct me_node *n)
{
	return me_atomic_read(&n->nconns);
}

void me_conn_stats(struct me_conn *c, struct me_conn_info_core *out)
{
	u32 i;

	out->id = c->id;
	out->peer = c->peer;
	out->state = me_atomic_read(&c->state);
	out->mode = c->mode;
	out->active = c->active;
	for (i = 0; i < ME_CST_MAX_; i++)
		out->st[i] = me_atomic64_read(&c->cst[i]);
}

u32 me_conn_id(struct me_conn *c)
{
	return c->id;
}

u32 me_conn_peer(struct me_conn *c)
{
	return c->peer;
}

u32 me_conn_mode(struct me_conn *c)
{
	return c->mode;
}

int me_conn_state(struct me_conn *c)
{
	return (int)me_atomic_read(&c->state);
}
