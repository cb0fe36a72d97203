// SPDX-License-Identifier: GPL-2.0
/*
 * window.c - reliability for one connection.
 *
 * Transmit: the packetizer (msg.c) fills ring entries in sequence order
 * under the pump lock; acks, sacks, loss detection, the RTO scan and link
 * failover run from any thread and synchronize per entry (linfo cmpxchg
 * for accounting, the entry trylock for retransmission).
 *
 * Receive: a packet is claimed in its ring entry by cmpxchg (duplicates
 * lose), processed, marked READY; the cumulative point rcv_cum is advanced
 * by cmpxchg by whichever thread finds the next entry READY (unordered
 * mode) or by the single in-order scanner holding order_lock (ordered).
 *
 * Store-then-load pattern: a thread marks its entry READY and then reads
 * rcv_cum; the advancing thread moves rcv_cum and then reads the entry.
 * Both sides use fully ordered atomics, so at least one of them sees the
 * other's store and no READY entry is left behind rcv_cum.
 */
#include "window.h"
#include "conn.h"
#include "node.h"
#include "msg.h"
#include "path.h"
#include "cc.h"
#include "share.h"

#define LI(seq, txno, rtx, link) (((u64)(seq) << 32) | \
	((u64)((txno) & ME_TXNO_MASK) << 8) | ((rtx) ? 0x80 : 0) | ((link) & 0x7f))

static u32 li_seq(u64 v) { return (u32)(v >> 32); }
static u32 li_txno(u64 v) { return (u32)(v >> 8) & ME_TXNO_MASK; }
static bool li_rtx(u64 v) { return v & 0x80; }
static u32 li_link(u64 v) { return (u32)v & 0x7f; }

#define RXS(seq, ph) (((u64)(seq) << 8) | (ph))
static u32 rx_seq(u64 v) { return (u32)(v >> 8); }
static u32 rx_phase(u64 v) { return (u32)v & 0x0f; }

/* The sequence number congruent to slot i in [base - w, base). */
static u32 lap_tag(u32 base, u32 i, u32 w)
{
	return base - w + ((i - base) & (w - 1));
}

int me_win_alloc(struct me_conn *c)
{
	struct me_node *n = c->node;
	u32 w = c->window, i;

	c->tx = n->ops->alloc(n->ctx, sizeof(*c->tx) * w);
	/* Each entry with room in front for an ack to ride along (slot_tx). */
	c->txbuf = n->ops->alloc(n->ctx, (size_t)w * (ME_HDR_ACK + n->cfg.mtu));
	c->rx = n->ops->alloc(n->ctx, sizeof(*c->rx) * w);
	if (!c->tx || !c->txbuf || !c->rx)
		return -ENOMEM;
	if (c->mode == ME_MODE_ORDERED) {
		c->rxbuf = n->ops->alloc(n->ctx, (size_t)w * n->cfg.mtu);
		if (!c->rxbuf)
			return -ENOMEM;
	}
	memset(c->tx, 0, sizeof(*c->tx) * w);
	memset(c->rx, 0, sizeof(*c->rx) * w);
	for (i = 0; i < w; i++) {
		me_lock_init(&c->tx[i].lock);
		c->tx[i].buf = c->txbuf + (size_t)i * (ME_HDR_ACK + n->cfg.mtu) + ME_HDR_ACK;
		if (c->rxbuf)
			c->rx[i].buf = c->rxbuf + (size_t)i * n->cfg.mtu;
	}
	me_lock_init(&c->order_lock);
	me_lock_init(&c->ack_lock);
	return 0;
}

/* Drops the reference entry t holds on its payload (me_txslot.zc). */
static void zc_put(struct me_node *n, struct me_txslot *t)
{
	me_atomic_set(&t->zc_held, 0);
	if (t->zc == ME_ZC_RESP)
		n->ops->resp_put(n->ctx, t->zc_cookie);
	else
		n->ops->zc_put(n->ctx, t->zc_cookie);
}

void me_win_free(struct me_conn *c)
{
	struct me_node *n = c->node;
	u32 i;

	/* Nothing runs any more: drop what the entries still hold. */
	for (i = 0; c->tx && i < c->window; i++) {
		if (me_atomic_read(&c->tx[i].zc_held))
			zc_put(n, &c->tx[i]);
	}
	if (c->tx)
		n->ops->free(n->ctx, c->tx);
	if (c->txbuf)
		n->ops->free(n->ctx, c->txbuf);
	if (c->rx)
		n->ops->free(n->ctx, c->rx);
	if (c->rxbuf)
		n->ops->free(n->ctx, c->rxbuf);
}

/* Called before the connection is published as ESTABLISHED. */
void me_win_start_tx(struct me_conn *c, u32 isn, u32 right)
{
	u32 i;

	me_atomic_set(&c->snd_una, isn);
	me_atomic_set(&c->snd_max, isn);
	me_atomic_set(&c->snd_right, right);
	for (i = 0; i < c->window; i++)
		me_atomic64_set(&c->tx[i].linfo,
				LI(lap_tag(isn, i, c->window), 0, 0, ME_LINK_NONE));
}

void me_win_start_rx(struct me_conn *c, u32 peer_isn)
{
	u32 i;

	me_atomic_set(&c->rcv_cum, peer_isn);
	me_atomic_set(&c->rcv_high, peer_isn);
	me_atomic_set(&c->nack_cum, peer_isn - 1);
	for (i = 0; i < c->window; i++)
		me_atomic64_set(&c->rx[i].state,
				RXS(lap_tag(peer_isn, i, c->window), ME_RXS_DONE));
}

/* ------------------------------------------------------------------ */
/* Receive side                                                        */

/*
 * The close cut (wire 15).  Once our CLOSE is next to leave (every op of
 * ours before it completed), the peer's requests are taken only below a
 * cut: one past every sequence number a receive thread had claimed when
 * it was set, and past the end of every message begun below it.  The
 * CLOSE leaves once everything below the cut was taken and answered, and
 * carries it; the peer completes its writes below it and fails the rest
 * as never taken.  A receive thread claims its entry (a full barrier)
 * before it reads rx_cut, the pump sets rx_cut (another) before it reads
 * the entries: either the pump sees the claim and the cut lies beyond it,
 * or the thread sees the cut (or that one is being set, and gives the
 * packet back for the peer to resend).
 */
static bool cut_admits(struct me_conn *c, const struct me_hdr *h, u32 s, u32 cum)
{
	u64 v = me_atomic64_read(&c->rx_cut);

	if (!v)
		return true;
	/* The entry of rcv_cum - 1 keeps its MORE for me_win_close_cut(). */
	if (s - cum >= c->window - 1 || v == ME_CUT_PENDING)
		return false;
	if (me_seq_lt(s, (u32)v) || !me_pt_request(h->type))
		return true;
	/* A message begun below the cut (a packet of it taken) goes on. */
	return (v & ME_CUT_SET) && (h->type == ME_PT_WRITE || h->type == ME_PT_NOTIFY) &&
	       h->d.msg_off && me_msg_begun(c, h->d.msg_id);
}

/* The flags an entry keeps once its packet was taken. */
static u64 taken_flags(const struct me_hdr *h)
{
	if (h->type == ME_PT_STATUS)
		return ME_RXS_STATUS;
	if ((h->type == ME_PT_WRITE || h->type == ME_PT_NOTIFY) && !(h->flags & ME_F_LAST))
		return ME_RXS_MORE;
	return 0;
}

bool me_win_close_cut(struct me_conn *c, u32 *cut)
{
	u32 w = c->window, cum, i;
	u64 v = me_atomic64_read(&c->rx_cut), last;

	if (!v) {
		me_atomic64_set(&c->rx_cut, ME_CUT_PENDING);
		cum = me_atomic_read(&c->rcv_cum);
		*cut = cum;
		for (i = 0; i < w; i++)
			if (rx_seq(me_atomic64_read(&c->rx[(cum + i) & (w - 1)].state)) == cum + i)
				*cut = cum + i + 1;
		v = ME_CUT_SET | *cut;
		me_atomic64_set(&c->rx_cut, v);
	}
	*cut = (u32)v;
	if (v & ME_CUT_FINAL)
		return true;
	cum = me_atomic_read(&c->rcv_cum);
	if (!me_seq_le(*cut, cum))
		return false;
	/*
	 * Taken up to cum: the packet below it ends its message (or it is
	 * not of a write), so no message is open across cum, and from now
	 * on nothing at or beyond it is taken.
	 */
	last = me_atomic64_read(&c->rx[(cum - 1) & (w - 1)].state);
	if (rx_seq(last) != cum - 1 || (last & ME_RXS_MORE))
		return false;
	*cut = cum;
	me_atomic64_set(&c->rx_cut, ME_CUT_FINAL | cum);
	return true;
}

/* rcv_cum moved: a CLOSE of ours may wait for it to reach the cut. */
static void cum_moved(struct me_conn *c)
{
	if (me_atomic64_read(&c->rx_cut))
		me_msg_pump(c);
}

/* Unordered mode: move rcv_cum over READY entries (lock-free). */
static void advance_cum(struct me_conn *c)
{
	u32 mask = c->window - 1;
	bool moved = false;

	for (;;) {
		u32 cum = me_atomic_read(&c->rcv_cum);
		u64 v = me_atomic64_read(&c->rx[cum & mask].state);

		if (rx_seq(v) != cum || rx_phase(v) != ME_RXS_READY)
			break;
		if (me_atomic_cmpxchg(&c->rcv_cum, cum, cum + 1) != cum)
			continue;
		moved = true;
		/* We alone moved past cum: a CLOSE there is ours to run. */
		if (v & ME_RXS_CLOSE)
			me_conn_peer_closed(c, me_atomic_read(&c->peer_cut));
		if (v & ME_RXS_STATUS)
			me_msg_status_passed(c);
	}
	if (moved)
		cum_moved(c);
}

/*
 * Ordered mode (Table 1 state 2a): one thread at a time consumes buffered
 * packets in sequence; the others leave theirs READY and go on.  After
 * unlocking, re-check so a packet made READY while we held the lock is
 * not stranded — unless the scan stopped at a READY packet it cannot
 * take (no resources, the connection no longer established, a copy that
 * does not parse): looking again would find the same packet and spin.
 */
static void inorder_scan(struct me_conn *c)
{
	u32 mask = c->window - 1;
	struct me_hdr h;
	bool stuck, closed, moved = false;
	u32 cut = 0;

again:
	if (!me_trylock(&c->order_lock))
		return;
	stuck = false;
	closed = false;
	for (;;) {
		u32 cum = me_atomic_read(&c->rcv_cum);
		struct me_rxslot *r = &c->rx[cum & mask];
		u64 v = me_atomic64_read(&r->state);
		u32 st = me_atomic_read(&c->state);

		if (rx_seq(v) != cum || rx_phase(v) != ME_RXS_READY)
			break;
		/* Closed or aborted after the packet was claimed. */
		if (st != ME_CS_ESTABLISHED && st != ME_CS_CLOSING) {
			stuck = true;
			break;
		}
		/* Validated on arrival; parse again from our own copy. */
		if (me_wire_parse(r->buf, me_atomic_read(&r->len), &h)) {
			stuck = true;
			break;
		}
		h.now = me_now(c->node);
		if (h.type == ME_PT_CLOSE) {
			me_atomic64_set(&r->state, RXS(cum, ME_RXS_DONE));
			me_atomic_set(&c->rcv_cum, cum + 1);
			cut = h.d.imm;
			closed = true;
			break;
		}
		if (me_msg_rx(c, &h) == -EAGAIN) {
			me_stat_inc(c->node, ME_ST_RX_NORES);
			stuck = true;
			break;
		}
		me_atomic64_set(&r->state, RXS(cum, ME_RXS_DONE) | taken_flags(&h));
		me_atomic_set(&c->rcv_cum, cum + 1);
		moved = true;
		if (h.type == ME_PT_STATUS)
			me_msg_status_passed(c);
	}
	me_unlock(&c->order_lock);
	if (closed) {
		me_conn_peer_closed(c, cut);
		return;
	}
	if (moved)
		cum_moved(c);
	if (!stuck) {
		u32 cum = me_atomic_read(&c->rcv_cum);
		u64 v = me_atomic64_read(&c->rx[cum & mask].state);

		if (rx_seq(v) == cum && rx_phase(v) == ME_RXS_READY)
			goto again;
	}
}

/*
 * An ack the frame asked for: at once, or at the end of the receive batch
 * it came in (me_core_rx_batch_end), once per connection and batch.
 * Nacks never wait.  Nor does one for a quarter of a path's window
 * (@bytes received since the last ack): a batch can hold most of what a
 * sender may have in flight (64 frames of 9000 bytes, 576 KB, against
 * the module's 1 MiB), and an ack at its end would come after the sender
 * had stopped for want of one.
 */
static void ack_or_defer(struct me_conn *c, const struct me_hdr *h, u32 bytes)
{
	struct me_rx_batch *b = h->batch;
	u32 i;

	if (b && bytes < c->node->cfg.link_window / 4) {
		for (i = 0; i < b->nacks; i++)
			if (b->conn[i] == c)
				return;
		if (b->nacks < ME_RX_BATCH_ACKS) {
			b->conn[b->nacks++] = c;
			return;
		}
	}
	me_win_send_ack(c, false);
}

/*
 * May the ack this packet asks for wait for a reply to carry it (wire 9)?
 * The last packet of a write, notify or PACK not flagged NOW (its sender
 * waits for the completion, wire 18), or a READ_REQ or ATOMIC
 * (always answered, so always carried), fewer than ack_every since the
 * last ack, from a peer whose requests we have answered quickly
 * (me_win_tx_commit): it is held until the next packet we send that
 * peer, on any connection, takes it along (slot_tx), or for
 * cfg.ack_hold_ns (the ack timer, me_core_acks()).  A request and its
 * reply then cost a frame each way instead of two, also when they
 * travel on two connections (one each way, as the libfabric provider
 * and me_bench open them).  One ack per peer waits at a time; another
 * is sent at once.
 */
static bool ack_hold(struct me_conn *c, const struct me_hdr *h, u32 unacked)
{
	struct me_node *n = c->node;
	struct me_peer *pe = c->pe;
	u32 held;

	if (!n->cfg.ack_hold_ns || !(h->flags & ME_F_LAST) || (h->flags & ME_F_NOW) ||
	    (h->type != ME_PT_WRITE && h->type != ME_PT_NOTIFY && h->type != ME_PT_PACK &&
	     h->type != ME_PT_ATOMIC && h->type != ME_PT_READ_REQ))
		return false;
	if (!me_atomic_read(&pe->reply_mode)) {
		/* Whether it is answered quickly: me_win_tx_commit() sees. */
		me_atomic64_set(&pe->req_ns, h->now);
		return false;
	}
	if (unacked >= n->cfg.ack_every)
		return false;
	/*
	 * Under the ack's lock, so that an ack being built (which clears
	 * flag and slot) is never left with one set and the other not; an
	 * ack being built now takes this packet's along.
	 */
	if (!me_trylock(&c->ack_lock))
		return false;
	held = me_atomic_read(&pe->held_conn);
	if (held != c->id) {
		if (held || me_atomic_cmpxchg(&pe->held_conn, 0, c->id) != 0) {
			me_unlock(&c->ack_lock);
			return false;	/* another connection's waits */
		}
		me_atomic_add_return(&n->acks_held, 1);
	}
	me_atomic64_set(&c->held_ns, h->now);
	me_atomic_set(&c->ack_held, 1);
	me_unlock(&c->ack_lock);
	me_stat_inc(n, ME_ST_ACK_HELD);
	if (n->ops->ack_kick)
		n->ops->ack_kick(n->ctx, h->now + n->cfg.ack_hold_ns);
	return true;
}

void me_win_held_released(struct me_node *n)
{
	if (me_atomic_add_return(&n->acks_held, -1) == 0 && n->ops->ack_kick)
		n->ops->ack_kick(n->ctx, 0);
}

/*
 * When an ack owed since @at goes if no other takes it along: at the
 * next multiple of the tick, as when the timer's pass, every tick, sent
 * it.  So it waits half a tick on average, and a stream gets one such
 * ack per tick at most.  Waiting a whole tick, a stream into a shallow
 * queue that stalls lost twice as many packets, the acks that clock out
 * its small window being fewer
 * (Cc.shallow_queue__window_creeps_below_where_it_overflowed); waiting
 * half a tick from @at, a stream of packets half a tick apart had each
 * acked alone (Cc.random_loss__costs_a_fifth_not_half, 20 us tick).
 */
static u64 owed_due(struct me_node *n, u64 at)
{
	u32 tick = (u32)me_min_u64(n->cfg.tick_ns, 0xffffffffu);

	return (me_div_u64(at, tick) + 1) * tick;
}

/*
 * Packets that asked for no ack now (not the last of a message, not at
 * a window's edge, fewer than ack_every since the last ack): an ack is
 * owed, and goes with the next one due, or at the tick after the first
 * of them (owed_due()) from the ack timer (owed_acks()): a timer's call
 * in softirq, where the timer thread's pass every tick woke a thread
 * (the wake-ups were a seventh of an emulated receiver's CPU,
 * benchmarks.md).  The ack timer is asked once per tick, not per packet:
 * owed_armed says it was asked since its last call began, which clears
 * it before looking at the marks (each side stores before it reads the
 * other's: full barriers).  Without an ack timer, the timer's pass sends
 * it.
 */
static void ack_owe(struct me_conn *c, u64 now)
{
	struct me_node *n = c->node;

	if (!n->ops->ack_kick) {
		me_node_busy(n);
		return;
	}
	now = me_max_u64(now, 1);	/* 0: no mark */
	if (me_atomic64_read(&c->owed_ns) || me_atomic64_cmpxchg(&c->owed_ns, 0, now))
		return;		/* marked already: the timer was asked then */
	me_atomic_add_return(&n->acks_owed, 1);
	if (!me_atomic_read(&n->owed_armed) && !me_atomic_xchg(&n->owed_armed, 1))
		n->ops->ack_kick(n->ctx, owed_due(n, now));
}

/* An ack is being built (it answers what the mark stood for), or c retired. */
void me_win_owed_drop(struct me_conn *c)
{
	u64 owed = me_atomic64_read(&c->owed_ns);

	if (owed && me_atomic64_cmpxchg(&c->owed_ns, owed, 0) == owed)
		me_atomic_add_return(&c->node->acks_owed, -1);
}

/*
 * The ack timer's look at the owed acks: those due (owed_due()) are sent,
 * and the time the next one is due returned (ME_NEVER: none owed).  It
 * stops after as many marks as were counted when it began.  If a mark
 * made since was among them, one counted may be left; but that maker
 * counted its mark after owed_armed was cleared here, so a call was
 * asked for since, and it finds the one left a tick late at most.
 */
static u64 owed_acks(struct me_node *n, u64 now)
{
	u32 i, found = 0, owed, cnt = me_atomic_read(&n->nconns);
	u64 next = ME_NEVER;

	if (!me_atomic_read(&n->owed_armed))
		return ME_NEVER;
	me_atomic_xchg(&n->owed_armed, 0);
	owed = me_atomic_read(&n->acks_owed);
	for (i = 0; i < cnt && found < owed; i++) {
		struct me_conn *c = me_ptr_load((void **)&n->conns[i]);
		u64 at;

		if (!c)
			continue;
		at = me_atomic64_read(&c->owed_ns);
		if (!at)
			continue;
		found++;
		/* Held for a reply: it goes with the reply or at the hold's end. */
		if (me_atomic_read(&c->ack_held))
			continue;
		if (now >= owed_due(n, at))
			me_win_send_ack(c, false);
		else
			next = me_min_u64(next, owed_due(n, at));
	}
	if (next != ME_NEVER)
		me_atomic_xchg(&n->owed_armed, 1);
	return next;
}

/*
 * The ack of c held for a reply, if any: sent when its hold is over, and
 * ME_NEVER returned; else when the hold ends.
 */
static u64 held_ack_due(struct me_conn *c, u64 now)
{
	struct me_node *n = c->node;
	u64 held;

	if (!me_atomic_read(&c->ack_held))
		return ME_NEVER;
	held = me_atomic64_read(&c->held_ns);
	if (me_elapsed(now, held) < n->cfg.ack_hold_ns)
		return held + n->cfg.ack_hold_ns;
	/*
	 * No reply took it along in time.  Unless a packet left for the
	 * peer meanwhile without it (too large, or racing with it), acks
	 * stop waiting for replies until one comes quickly again.
	 */
	if (me_atomic64_read(&c->pe->reply_ns) < held)
		me_atomic_set(&c->pe->reply_mode, 0);
	me_stat_inc(n, ME_ST_ACK_HOLD_EXPIRED);
	me_win_send_ack(c, false);
	return ME_NEVER;
}

void me_core_acks(struct me_node *n)
{
	u32 i, cnt = me_atomic_read(&n->npeers);
	u64 now = me_now(n), next = owed_acks(n, now);

	for (i = 0; i < cnt && me_atomic_read(&n->acks_held); i++) {
		struct me_peer *pe = &n->peers[i];
		u32 id = me_atomic_read(&pe->held_conn);
		struct me_conn *c;

		if (!id)
			continue;
		c = me_conn_get(n, id);
		if (!c || c->pe != pe) {
			/* Its connection is gone: nothing waits there. */
			if (me_atomic_cmpxchg(&pe->held_conn, id, 0) == id)
				me_win_held_released(n);
			continue;
		}
		next = me_min_u64(next, held_ack_due(c, now));
	}
	if (next != ME_NEVER && n->ops->ack_kick)
		n->ops->ack_kick(n->ctx, next);
}

/*
 * A copy of a packet we have: a retransmission the sender need not have
 * made.  The next ack says so (ME_F_DUP), so a sender whose timeout fired
 * early undoes what it did to its window (cc.c).
 */
static void rx_dup(struct me_conn *c, const struct me_hdr *h, bool ack)
{
	me_stat_inc(c->node, ME_ST_RX_DUP);
	me_cstat_add(c, ME_CST_RX_DROP, 1);
	me_atomic_set(&c->rx_dup, 1);
	if (ack)
		ack_or_defer(c, h, 0);
}

void me_win_rx_data(struct me_conn *c, u32 link, const struct me_hdr *h,
		    const u8 *pkt, u32 len)
{
	struct me_node *n = c->node;
	u32 s = h->d.seq, w = c->window, st, cum, unacked;
	struct me_rxslot *r;
	bool nack = false;
	u64 v;

	me_atomic_set(&c->ack_link, link);
	me_atomic64_set(&c->rx_arrival_ns, me_hdr_arrival(h));
	/* The earliest since the last ack (RFC 7323): its wait counts too. */
	if (!me_atomic_read(&c->rx_stamp))
		me_atomic_cmpxchg(&c->rx_stamp, 0, h->d.stamp);
	cum = me_atomic_read(&c->rcv_cum);
	st = me_atomic_read(&c->state);
	if (st != ME_CS_ESTABLISHED && st != ME_CS_CLOSING) {
		/* Closed: answer duplicates (a lost ack for CLOSE), nothing more. */
		me_stat_inc(n, ME_ST_RX_CLOSED);
		if (me_seq_lt(s, cum))
			me_win_send_ack(c, false);
		return;
	}
	if (me_seq_lt(s, cum)) {
		rx_dup(c, h, true);
		return;
	}
	if (s - cum >= w) {
		me_stat_inc(n, ME_ST_RX_WINDOW);
		me_cstat_add(c, ME_CST_RX_DROP, 1);
		return;
	}
	r = &c->rx[s & (w - 1)];
	v = me_atomic64_read(&r->state);
	if (rx_seq(v) == s) {
		rx_dup(c, h, true);
		return;
	}
	/* Not the previous lap: only possible if rcv_cum moved meanwhile. */
	if (rx_seq(v) != s - w) {
		rx_dup(c, h, false);
		return;
	}
	/* Table 1 state 7: claim the entry; a racing copy of s loses. */
	if (me_atomic64_cmpxchg(&r->state, v, RXS(s, ME_RXS_CLAIMED)) != v) {
		rx_dup(c, h, false);
		return;
	}
	/* Beyond our close cut: not taken, not acked; the peer's CLOSE says so. */
	if (!cut_admits(c, h, s, cum)) {
		me_atomic64_set(&r->state, v);
		me_stat_inc(n, ME_ST_RX_CLOSED);
		me_cstat_add(c, ME_CST_RX_DROP, 1);
		return;
	}
	me_atomic_seq_max(&c->rcv_high, s + 1);
	me_cstat_add(c, ME_CST_RX_PKTS, 1);
	me_cstat_add(c, ME_CST_RX_BYTES, h->payload_len);

	if (c->mode == ME_MODE_ORDERED) {
		if (h->rx && n->ops->rx_fill)
			n->ops->rx_fill(n->ctx, h->rx);
		memcpy(r->buf, pkt, len);
		me_atomic_set(&r->len, len);
		me_atomic64_set(&r->state, RXS(s, ME_RXS_READY));
		inorder_scan(c);
	} else if (h->type == ME_PT_CLOSE) {
		/* Every copy carries the same cut; run once cum passes it. */
		me_atomic_set(&c->peer_cut, h->d.imm);
		me_atomic64_set(&r->state, RXS(s, ME_RXS_READY | ME_RXS_CLOSE));
		advance_cum(c);
	} else {
		if (me_msg_rx(c, h) == -EAGAIN) {
			/* No side effects happened: give the entry back. */
			me_atomic64_set(&r->state, v);
			me_stat_inc(n, ME_ST_RX_NORES);
			me_cstat_add(c, ME_CST_RX_DROP, 1);
			return;
		}
		me_atomic64_set(&r->state, RXS(s, ME_RXS_READY) | taken_flags(h));
		advance_cum(c);
	}

	/* Ack coalescing (EMP's "collection of frames"), nack on a gap. */
	unacked = me_atomic_add_return(&c->unacked, 1);
	me_atomic_add_return(&c->unacked_bytes, len);
	cum = me_atomic_read(&c->rcv_cum);
	if (me_seq_lt(cum, s) && me_atomic_read(&c->nack_cum) != cum)
		nack = true;
	if (h->flags & ME_F_NOW)
		me_stat_inc(n, ME_ST_ACK_NOW);	/* never held (ack_hold) */
	if (nack)
		me_win_send_ack(c, true);
	else if ((h->flags & ME_F_ACKREQ) && ack_hold(c, h, unacked))
		return;		/* the ack timer sends it if no reply does */
	else if ((h->flags & ME_F_ACKREQ) || unacked >= n->cfg.ack_every)
		ack_or_defer(c, h, me_atomic_read(&c->unacked_bytes));
	else
		ack_owe(c, h->now);
}

/*
 * Builds the connection's ack (or nack) at buf, with ack_lock held (Table
 * 1 state 2b: one ack/nack in preparation per connection).  A thread
 * that fails the trylock leaves `unacked` non-zero; the holder resets it
 * before reading the state, so a packet counted before the reset is in
 * the holder's ack and one counted after is acked later (next trigger or
 * the timer).  Whatever arrived so far is in it: it answers a held ack
 * too.  Returns whether it carries ME_F_DUP.
 */
static bool ack_build(struct me_conn *c, bool nack, u16 flags, u8 *buf, u64 now)
{
	struct me_node *n = c->node;
	u32 mask = c->window - 1, cum, high, i, lim;
	struct me_hdr h;
	u64 arrival;
	bool dup;

	/* Before the count: a packet counted after it marks again. */
	me_win_owed_drop(c);
	me_atomic_set(&c->unacked, 0);
	me_atomic_set(&c->unacked_bytes, 0);
	if (me_atomic_read(&c->ack_held)) {
		me_atomic_set(&c->ack_held, 0);
		if (me_atomic_cmpxchg(&c->pe->held_conn, c->id, 0) == c->id)
			me_win_held_released(n);
	}
	me_node_hdr(n, &h, nack ? ME_PT_NACK : ME_PT_ACK, c->peer);
	h.flags = flags;
	h.src_conn = c->id;
	h.dst_conn = c->peer_conn;
	h.dst_inc = c->peer_inc;
	h.cookie = c->peer_cookie;
	dup = me_atomic_read(&c->rx_dup) && me_atomic_cmpxchg(&c->rx_dup, 1, 0) == 1;
	if (dup)
		h.flags |= ME_F_DUP;
	if (me_atomic_read(&c->rx_copies))
		h.flags |= ME_F_FILL;
	cum = me_atomic_read(&c->rcv_cum);
	h.a.cum = cum;
	h.a.right = cum + c->credit;
	/* After cum: covers every STATUS of the messages below it (msg.c). */
	h.a.status = me_msg_status_queued(c);
	/*
	 * The bitmap covers 128 sequence numbers, the window up to 32768.
	 * When packets beyond its reach have arrived (striping over several
	 * links keeps many in flight beyond a hole), every other ack reports
	 * the newest 128 instead of the oldest: the sender learns that they
	 * arrived, frees their links' in-flight budget and, from their
	 * per-link order, which packets below them are lost.
	 */
	high = me_atomic_read(&c->rcv_high);
	h.a.base = 0;
	if (me_seq_lt(cum + 1 + ME_SACK_BITS, high) && (c->ack_no++ & 1))
		h.a.base = me_min_u32(high - cum - 1 - ME_SACK_BITS,
				      c->window - 1 - ME_SACK_BITS);
	memset(h.a.sack, 0, sizeof(h.a.sack));
	/*
	 * Nothing at or beyond high has arrived (it moves before a packet is
	 * taken): with no hole below it, as mostly, there is nothing to scan.
	 * One that arrives meanwhile is in the next ack.
	 */
	lim = me_seq_lt(cum + 1 + h.a.base, high) ? high - (cum + 1 + h.a.base) : 0;
	lim = me_min_u32(lim, ME_SACK_BITS);
	for (i = 0; i < lim && h.a.base + i + 1 < c->window; i++) {
		u32 s = cum + 1 + h.a.base + i;
		u64 v = me_atomic64_read(&c->rx[s & mask].state);

		if (rx_seq(v) == s && rx_phase(v) >= ME_RXS_READY)
			me_sack_set(h.a.sack, i);
	}
	if (nack)
		me_atomic_set(&c->nack_cum, cum);
	/*
	 * After cum and the bitmap: a packet they cover stored its arrival
	 * before it moved them, so this is its or a later one's, and the
	 * hold never exceeds the round trip of a packet the ack covers.
	 */
	arrival = me_atomic64_read(&c->rx_arrival_ns);
	if (arrival)
		h.a.hold = (u32)me_min_u64(me_elapsed(now, arrival), 0xffffffffu);
	h.a.echo = me_atomic_read(&c->rx_stamp);
	if (h.a.echo && me_atomic_cmpxchg(&c->rx_stamp, h.a.echo, 0) != h.a.echo)
		h.a.echo = 0;	/* taken meanwhile: no sample this time */
	me_wire_build(buf, &h);
	return dup;
}

void me_win_send_ack(struct me_conn *c, bool nack)
{
	struct me_node *n = c->node;
	u8 buf[ME_HDR_ACK];
	int link;
	bool dup;

	if (!me_trylock(&c->ack_lock)) {
		/* Its holder may have looked before our packet. */
		ack_owe(c, me_now(n));
		return;
	}
	dup = ack_build(c, nack, 0, buf, me_now(n));
	/* On the newest packet's link: the hold is its (path.c). */
	link = (int)me_atomic_read(&c->ack_link);
	if (!me_path_usable(n, c->pe, (u32)link))
		link = me_path_any(n, c->pe);
	if (link >= 0) {
		me_conn_tx(c, (u32)link, buf, ME_HDR_ACK);
		me_stat_inc(n, nack ? ME_ST_TX_NACK : ME_ST_TX_ACK);
	} else if (dup) {
		me_atomic_set(&c->rx_dup, 1);	/* for the next ack */
	}
	me_unlock(&c->ack_lock);
}

/* ------------------------------------------------------------------ */
/* Transmit side                                                       */

static void rtt_sample(struct me_conn *c, u64 r)
{
	u64 srtt = me_atomic64_read(&c->srtt_ns);
	u64 var = me_atomic64_read(&c->rttvar_ns);
	u64 err;

	if (!srtt || me_atomic_read(&c->rtt_seeded)) {
		/* The first sample of data replaces the keepalives' estimate. */
		me_atomic64_set(&c->srtt_ns, r ? r : 1);
		me_atomic64_set(&c->rttvar_ns, r / 2);
		me_atomic_set(&c->rtt_seeded, 0);
		return;
	}
	/* Jacobson/Karels with shifts; racing samples may be lost, harmless. */
	err = r > srtt ? r - srtt : srtt - r;
	srtt = r > srtt ? srtt + (err >> 3) : srtt - (err >> 3);
	var = err > var ? var + ((err - var) >> 2) : var - ((var - err) >> 2);
	me_atomic64_set(&c->srtt_ns, srtt ? srtt : 1);
	me_atomic64_set(&c->rttvar_ns, var);
}

void me_win_seed_rtt(struct me_conn *c)
{
	u64 r = me_path_probe_rtt(c->node, c->pe);

	/* Never an RTO above rto_init's (srtt + 4 x rttvar = 3 x r). */
	if (!r || 3 * r >= c->node->cfg.rto_init_ns)
		return;
	me_atomic64_set(&c->srtt_ns, r);
	me_atomic64_set(&c->rttvar_ns, r / 2);
	me_atomic_set(&c->rtt_seeded, 1);
}

/*
 * The RTO's round trips come from the stamps acks echo, not from the
 * packets they ack: those retransmitted give none by Karn's rule, and
 * when a receiver pauses past the RTO every packet it delays is
 * retransmitted, so the estimator would never see such a pause and the
 * next one would fire the timer needlessly again.  The echo names the
 * transmission of the first packet the receiver got since its last ack
 * (TCP's timestamps, RFC 7323), so the sample spans the pause and the
 * ack's own delay, retransmissions and delayed packets alike.
 */
static void echo_sample(struct me_conn *c, u32 echo, u64 now)
{
	u32 us = me_wire_stamp_of(now) - echo;

	/* Not ours (0, or from the future after a restart): none. */
	if (echo && us < 0x80000000u)
		rtt_sample(c, (u64)(us ? us : 1) * 1000);
}

/* Doublings of the RTO while the peer answers (peer_answers()). */
#define ME_RTO_ANSWERED_BACKOFF	1

/*
 * Is the peer answering while this connection's packets time out?  It
 * sent us a frame (a keepalive, an ack of another connection) on a
 * usable path since the first of these timeouts, and the connection has
 * at most two packets in flight: its timeouts are a queue's losses, one
 * packet at a time, not an outage.  Many senders into one switch port
 * (incast) keep its queue full with windows of one packet; whoever backs
 * off further only resends more rarely into it, and starves for hundreds
 * of milliseconds while the others take the port (test_incast.cpp).
 */
static bool peer_answers(struct me_conn *c)
{
	u32 infl = me_atomic_read(&c->snd_max) - me_atomic_read(&c->snd_una);

	return infl <= 2 && c->rto_first_ns &&
	       me_path_heard_from(c->node, c->pe) > c->rto_first_ns;
}

/* The RTO after b doublings (at most rto_max). */
static u64 rto_backed_off(struct me_conn *c, u32 b)
{
	const struct me_node_cfg *cfg = &c->node->cfg;
	u64 srtt = me_atomic64_read(&c->srtt_ns);
	u64 rto = srtt ? srtt + 4 * me_atomic64_read(&c->rttvar_ns)
		       : cfg->rto_init_ns;

	rto = me_max_u64(rto, cfg->rto_min_ns);
	while (b-- && rto < cfg->rto_max_ns)
		rto <<= 1;
	return me_min_u64(rto, cfg->rto_max_ns);
}

/* Doubled per consecutive timeout; at most once while the peer answers. */
static u64 rto_ns(struct me_conn *c)
{
	u32 b = me_atomic_read(&c->backoff);

	if (b > ME_RTO_ANSWERED_BACKOFF && peer_answers(c))
		b = ME_RTO_ANSWERED_BACKOFF;
	return rto_backed_off(c, b);
}

/*
 * How long a packet may go unacknowledged, its retries spent, before the
 * connection is given up: as long as max_retries timeouts doubling each
 * time take, also when the peer answered and they did not double
 * (rto_ns()).
 */
static u64 give_up_ns(struct me_conn *c)
{
	u64 sum = 0;
	u32 k;

	for (k = 0; k < c->node->cfg.max_retries; k++)
		sum += rto_backed_off(c, k);
	return sum;
}

/*
 * Zero-copy references of transmit entries (Table 1 state 1).  An entry
 * carrying payload by reference holds a reference on its operation's
 * payload until it is acknowledged (account() marks it) or the connection
 * has ended.  Only the holder of the entry's lock may drop it, because a
 * retransmission under the lock may be passing it to zc_tx; so whoever
 * makes it droppable tries the lock, and every holder checks again after
 * unlocking (the store-buffer pattern: each side writes, then a full
 * barrier, then reads what the other wrote).
 */
static bool zc_droppable(struct me_conn *c, struct me_txslot *t)
{
	u32 st;

	if (!me_atomic_read(&t->zc_held))
		return false;
	st = me_atomic_read(&c->state);
	return li_link(me_atomic64_read(&t->linfo)) == ME_LINK_NONE ||
	       st == ME_CS_CLOSED || st == ME_CS_DEAD;
}

/* With t->lock held. */
static void zc_drop_locked(struct me_conn *c, struct me_txslot *t)
{
	struct me_node *n = c->node;

	if (zc_droppable(c, t))
		zc_put(n, t);
}

/* Releases t->lock, dropping the entry's reference if it is droppable. */
static void slot_unlock(struct me_conn *c, struct me_txslot *t)
{
	for (;;) {
		zc_drop_locked(c, t);
		me_unlock(&t->lock);
		me_smp_mb();
		if (!zc_droppable(c, t) || !me_trylock(&t->lock))
			return;
	}
}

/* The entry may have become droppable: drop now unless a holder will. */
static void zc_settle(struct me_conn *c, struct me_txslot *t)
{
	me_smp_mb();
	if (zc_droppable(c, t) && me_trylock(&t->lock))
		slot_unlock(c, t);
}

/*
 * The connection ended: packets still in flight will never be acked, so
 * their bytes leave their links' in-flight budget here (else every
 * connection that dies with data in flight shrinks its links for good,
 * until nothing may be sent on them).  Whoever swaps an entry's linfo to
 * NONE accounts for it, as in account().
 */
void me_win_release_inflight(struct me_conn *c)
{
	u32 i;

	for (i = 0; i < c->window; i++) {
		struct me_txslot *t = &c->tx[i];
		u64 li;

		for (;;) {
			li = me_atomic64_read(&t->linfo);
			if (li_link(li) == ME_LINK_NONE)
				break;
			if (me_atomic64_cmpxchg(&t->linfo, li,
						LI(li_seq(li), 0, 0, ME_LINK_NONE)) == li) {
				me_atomic_add_return(&me_pth(c->pe, li_link(li))->inflight,
						     0u - me_atomic_read(&t->len));
				break;
			}
		}
	}
}

void me_win_zc_release_all(struct me_conn *c)
{
	u32 i;

	for (i = 0; i < c->window; i++)
		zc_settle(c, &c->tx[i]);
}

/*
 * The ack held for a reply to the peer of c (ack_hold), of c or of
 * another connection to that peer, rides in front of the packet entry t
 * of c sends now, in the entry's headroom (ME_F_CARRY, wire 9): returns
 * the bytes put there, 0 if none.  A reply too large to take it along
 * in any of its packets is leaving all the same: the ack goes alone with
 * its last packet.  The other connection is looked up by id in the
 * table, as a receive does: whoever transmits holds what keeps a
 * connection it finds there from being freed (the kernel's conn_srcu, or
 * being the timer).
 */
static u32 carry_ack(struct me_conn *c, struct me_txslot *t, u32 len, u64 now)
{
	struct me_node *n = c->node;
	u32 id = me_atomic_read(&c->pe->held_conn);
	struct me_conn *h;

	if (!id)
		return 0;
	h = id == c->id ? c : me_conn_get(n, id);
	if (!h || h->pe != c->pe)
		return 0;
	if (len + ME_HDR_ACK > n->cfg.mtu) {
		/* A message's last packet is usually short: wait for it. */
		if (me_get_be16(t->buf + 2) & ME_F_LAST)
			me_win_send_ack(h, false);
		return 0;
	}
	if (!me_trylock(&h->ack_lock))
		return 0;	/* being sent as we look: it covers the held one */
	if (!me_atomic_read(&h->ack_held)) {
		me_unlock(&h->ack_lock);
		return 0;
	}
	ack_build(h, false, ME_F_CARRY, t->buf - ME_HDR_ACK, now);
	me_unlock(&h->ack_lock);
	me_stat_inc(n, ME_ST_TX_ACK_CARRIED);
	return ME_HDR_ACK;
}

/* Sends entry t (under its lock) on link; the payload by reference or not. */
static void slot_tx(struct me_conn *c, struct me_txslot *t, u32 link, u32 len, u64 now)
{
	struct me_node *n = c->node;
	u32 pre;
	int err;

	/* Each transmission its own stamp: an ack names the copy it answers. */
	me_wire_stamp(t->buf, me_wire_stamp_of(me_atomic64_read(&t->sent_ns)));
	pre = carry_ack(c, t, len, now);
	if (!t->zc) {
		me_conn_tx(c, link, t->buf - pre, pre + len);
		return;
	}
	/* (Without its reference the payload may not be read.) */
	if (!me_atomic_read(&t->zc_held))
		err = -EINVAL;
	else if (t->zc == ME_ZC_RESP)
		err = n->ops->resp_tx(n->ctx, link, me_path_addr(c->pe, link), t->buf - pre,
				      pre + ME_HDR_SEQ, t->zc_cookie, t->zc_off,
				      len - ME_HDR_SEQ);
	else
		err = n->ops->zc_tx(n->ctx, link, me_path_addr(c->pe, link), t->buf - pre,
				    pre + ME_HDR_SEQ, t->zc_region, t->zc_off, len - ME_HDR_SEQ,
				    t->zc_cookie);
	if (err)
		me_stat_inc(n, ME_ST_TX_FAIL);
}

/* What one ack acked per path, for congestion control (cc.c). */
struct ack_sum {
	u64 now;			/* the ack's me_now() */
	u32 links;			/* mask of the paths below */
	u32 bytes[ME_MAX_LINKS];
	u64 rtt[ME_MAX_LINKS];		/* smallest, of packets sent once */
};

/*
 * Account the acknowledgement of sequence number s once: the thread that
 * swaps linfo from in-flight to NONE owns it.  Only after that swap may
 * the packetizer refill the entry, so len/sent_ns read before the swap
 * belong to s.
 */
static void account(struct me_conn *c, u32 s, struct ack_sum *sum)
{
	struct me_txslot *t = &c->tx[s & (c->window - 1)];
	u64 li, sent;
	u32 len, l;

	for (;;) {
		li = me_atomic64_read(&t->linfo);
		if (li_seq(li) != s || li_link(li) == ME_LINK_NONE)
			return;
		sent = me_atomic64_read(&t->sent_ns);
		len = me_atomic_read(&t->len);
		if (me_atomic64_cmpxchg(&t->linfo, li,
					LI(s, 0, 0, ME_LINK_NONE)) == li)
			break;
	}
	l = li_link(li);
	me_path_acked(c->pe, l, li_txno(li), len, !li_rtx(li), sum->now);
	if (!(sum->links & (1u << l))) {
		sum->links |= 1u << l;
		sum->bytes[l] = 0;
		sum->rtt[l] = 0;
	}
	sum->bytes[l] += len;
	/* Karn: no samples from retransmissions */
	if (!li_rtx(li) && sum->now > sent &&
	    (!sum->rtt[l] || sum->now - sent < sum->rtt[l]))
		sum->rtt[l] = sum->now - sent;
	zc_settle(c, t);
}

/*
 * Table 1 state 5a: retransmit sequence number s unless another thread is
 * already doing it (entry trylock) or it was acked meanwhile.  `probe`:
 * the timeout that opens an episode (me_win_timer()).
 */
static bool retransmit(struct me_conn *c, u32 s, enum me_stat why, bool probe)
{
	struct me_node *n = c->node;
	struct me_txslot *t = &c->tx[s & (c->window - 1)];
	u32 len, nl, txno;
	bool dead = false;
	u64 li, now;
	int pick;

	if (!me_trylock(&t->lock))
		return false;
	li = me_atomic64_read(&t->linfo);
	if (li_seq(li) != s || li_link(li) == ME_LINK_NONE)
		goto out;
	now = me_now(n);
	if (t->retries >= n->cfg.max_retries &&
	    me_elapsed(now, t->first_ns) >= give_up_ns(c)) {
		/* The last retransmission timed out too: give up. */
		dead = true;
		goto out;
	}
	len = me_atomic_read(&t->len);
	pick = me_path_pick(n, c->pe, len, true, NULL);
	if (pick < 0)
		goto out;
	nl = (u32)pick;
	txno = me_path_next_txno(c->pe, nl, len);
	me_atomic_add_return(&me_pth(c->pe, nl)->inflight, len);
	if (me_atomic64_cmpxchg(&t->linfo, li, LI(s, txno, 1, nl)) != li) {
		me_atomic_add_return(&me_pth(c->pe, nl)->inflight, -len);
		goto out;
	}
	me_atomic_add_return(&me_pth(c->pe, li_link(li))->inflight, -len);
	me_atomic64_add_return(&me_pth(c->pe, li_link(li))->lost_pkts, 1);
	if (why == ME_ST_TX_RTX_LOSS)
		me_cc_lost(n, me_pth(c->pe, li_link(li)), now);
	else if (why == ME_ST_TX_RTX_RTO && probe)
		me_cc_probe(n, me_pth(c->pe, li_link(li)), now);
	else if (why == ME_ST_TX_RTX_RTO)
		me_cc_timeout(n, me_pth(c->pe, li_link(li)), now);
	me_path_reorder_spend(c->pe, li_link(li), me_atomic64_read(&c->srtt_ns), now);
	me_atomic64_set(&t->sent_ns, now);
	t->buf[3] |= ME_F_RTX | ME_F_ACKREQ;
	slot_tx(c, t, nl, len, now);
	me_stat_inc(n, why);
	me_cstat_add(c, ME_CST_RTX, 1);
	if (t->retries < n->cfg.max_retries)
		t->retries++;
	slot_unlock(c, t);
	return true;
out:
	slot_unlock(c, t);
	if (dead)
		me_conn_terminate(c, ME_CS_DEAD, -ETIMEDOUT);
	return false;
}

void me_win_rx_ack(struct me_conn *c, u32 link, const struct me_hdr *h)
{
	struct me_node *n = c->node;
	u32 cum = h->a.cum, max = me_atomic_read(&c->snd_max);
	u32 u, s, i, highest, cs;
	bool progress = false, sacked = false;
	struct ack_sum sum;
	u64 hosts = 0;

	sum.links = 0;
	sum.now = h->now;
	if (me_seq_lt(max, cum)) {
		me_stat_inc(n, ME_ST_RX_BADACK);
		return;
	}
	me_atomic_seq_max(&c->snd_right, h->a.right);
	/* Written only when it changes: every ack would dirty the line. */
	if (me_atomic_read(&c->tx_fill) != !!(h->flags & ME_F_FILL))
		me_atomic_set(&c->tx_fill, !!(h->flags & ME_F_FILL));
	if (h->flags & ME_F_DUP) {
		me_stat_inc(n, ME_ST_RTX_SPURIOUS);
		me_path_spurious(n, c->pe, me_atomic64_read(&c->srtt_ns), h->now);
	}
	/* Before snd_una moves (me_msg_acked()). */
	me_msg_ack_status(c, h->a.status);

	for (;;) {
		u = me_atomic_read(&c->snd_una);
		if (!me_seq_lt(u, cum))
			break;
		if (me_atomic_cmpxchg(&c->snd_una, u, cum) == u) {
			/* [u, cum) is ours alone to walk. */
			for (s = u; s != cum; s++)
				account(c, s, &sum);
			progress = true;
			break;
		}
	}
	highest = cum;
	for (i = 0; i < ME_SACK_BITS; i++) {
		/* Mostly the bitmap is empty: a byte at a time. */
		if (!(i & 7) && !h->a.sack[i >> 3]) {
			i += 7;
			continue;
		}
		if (!me_sack_test(h->a.sack, i))
			continue;
		s = cum + 1 + h->a.base + i;
		if (!me_seq_lt(s, max))
			break;
		account(c, s, &sum);
		highest = s;
		sacked = true;
	}
	/*
	 * Loss detection: a hole below the highest sacked packet is lost when
	 * packets sent after it on the same link (links are FIFO) were acked,
	 * and it was sent at least reorder_ns ago (a link that is FIFO only
	 * roughly, like packets sent from several CPUs, reorders a little;
	 * longer on a path whose peer reported needless resends: path.c).
	 * A nack only makes the receiver send this information at once.
	 */
	if (sacked || h->type == ME_PT_NACK) {
		u64 srtt = me_atomic64_read(&c->srtt_ns);

		u = me_atomic_read(&c->snd_una);
		for (s = me_seq_lt(cum, u) ? u : cum; me_seq_lt(s, highest); s++) {
			struct me_txslot *t = &c->tx[s & (c->window - 1)];
			u64 li;

			/*
			 * An ack with a base says nothing about the packets
			 * between cum and its bitmap: they may have arrived.
			 */
			if (h->a.base && me_seq_lt(cum, s) &&
			    me_seq_lt(s, cum + 1 + h->a.base)) {
				s = cum + h->a.base;
				continue;
			}
			li = me_atomic64_read(&t->linfo);

			if (li_seq(li) == s && li_link(li) != ME_LINK_NONE &&
			    me_path_lost(n, c->pe, li_link(li), li_txno(li)) &&
			    me_elapsed(h->now, me_atomic64_read(&t->sent_ns)) >=
			    me_path_reorder(n, c->pe, li_link(li), srtt))
				retransmit(c, s, ME_ST_TX_RTX_LOSS, false);
		}
	}
	if (sum.links) {
		hosts = h->a.hold + me_elapsed(h->now, me_hdr_arrival(h));
		echo_sample(c, h->a.echo, h->now);
	}
	while (sum.links) {
		u32 l = __builtin_ctz(sum.links);

		sum.links &= sum.links - 1;
		me_path_ack_done(n, c->pe, l, sum.bytes[l], sum.rtt[l], hosts,
				 l == link, h->now);
	}
	if (progress) {
		me_atomic_set(&c->backoff, 0);
		/* The peer is working on our operations (msg.c, answer_ns). */
		me_atomic64_set(&c->progress_ns, h->now);
	}
	me_msg_acked(c);
	cs = me_atomic_read(&c->close_seq);
	if (cs && me_seq_le(cs, me_atomic_read(&c->snd_una)))
		me_conn_close_acked(c);
	/* The host's other thread sends what this ack released. */
	if (h->batch && h->batch->handoff && n->ops->pump_kick) {
		me_share_handoff(c);
		return;
	}
	/* The room this ack opened: connections that wait go first. */
	me_share_wake(n, c->pe);
	me_msg_pump(c);
}

struct me_txslot *me_win_tx_reserve(struct me_conn *c, u32 *seq)
{
	u32 s = me_atomic_read(&c->snd_max);
	u32 una = me_atomic_read(&c->snd_una);
	struct me_txslot *t;
	u64 li;

	if (s - una >= c->window)
		return NULL;
	if (!me_seq_lt(s, me_atomic_read(&c->snd_right))) {
		me_stat_inc(c->node, ME_ST_CREDIT_STALL);
		return NULL;
	}
	t = &c->tx[s & (c->window - 1)];
	if (!me_trylock(&t->lock))
		return NULL;
	li = me_atomic64_read(&t->linfo);
	/*
	 * The previous lap must be fully accounted (see account()), its
	 * payload reference dropped.
	 */
	zc_drop_locked(c, t);
	if (li_seq(li) != s - c->window || li_link(li) != ME_LINK_NONE ||
	    me_atomic_read(&t->zc_held)) {
		slot_unlock(c, t);
		return NULL;
	}
	*seq = s;
	return t;
}

void me_win_tx_abort(struct me_conn *c, struct me_txslot *t)
{
	slot_unlock(c, t);
}

/* Table 1 state 1: the entry lock is held until the platform is done. */
void me_win_tx_commit(struct me_conn *c, struct me_txslot *t, u32 seq,
		      u32 len, u32 link, u64 now)
{
	struct me_node *n = c->node;
	u32 txno = me_path_next_txno(c->pe, link, len);
	struct me_peer *pe = c->pe;
	bool idle;
	u64 req;

	/*
	 * A packet soon after a request from the peer arrived: we answer its
	 * requests, so their acks may wait for the answers (ack_hold).  The
	 * peer's shared words are written only while that is being found
	 * out or an ack waits, not for every packet of a stream.
	 */
	if (n->cfg.ack_hold_ns && (!me_atomic_read(&pe->reply_mode) ||
				   me_atomic_read(&pe->held_conn))) {
		me_atomic64_set(&pe->reply_ns, now);
		req = me_atomic64_read(&pe->req_ns);
		if (req && me_elapsed(now, req) < n->cfg.ack_hold_ns &&
		    !me_atomic_read(&pe->reply_mode))
			me_atomic_set(&pe->reply_mode, 1);
	}
	t->retries = 0;
	t->first_ns = now;
	me_atomic_set(&t->len, len);
	me_atomic64_set(&t->sent_ns, now);
	idle = me_atomic_add_return(&me_pth(c->pe, link)->inflight, len) == len;
	me_path_sent(n, pe, link, len, idle, now);
	me_atomic64_set(&t->linfo, LI(seq, txno, 0, link));
	me_atomic_set(&c->snd_max, seq + 1);
	me_node_due(n, now + rto_ns(c));	/* its retransmission timeout */
	slot_tx(c, t, link, len, now);
	me_stat_inc(n, ME_ST_TX_DATA);
	me_cstat_add(c, ME_CST_TX_PKTS, 1);
	me_cstat_add(c, ME_CST_TX_BYTES, len - ME_HDR_SEQ);
	slot_unlock(c, t);
}

bool me_win_tx_idle(struct me_conn *c)
{
	return me_atomic_read(&c->snd_una) == me_atomic_read(&c->snd_max);
}

bool me_win_tx_full(struct me_conn *c)
{
	return me_atomic_read(&c->snd_max) - me_atomic_read(&c->snd_una) >= c->window;
}

u64 me_win_due(struct me_conn *c, u64 now)
{
	u64 due = ME_NEVER;

	if (me_atomic_read(&c->ack_held)) {
		/* The ack timer sends it; without one, the pass then. */
		if (!c->node->ops->ack_kick)
			due = me_atomic64_read(&c->held_ns) + c->node->cfg.ack_hold_ns;
	} else if (me_atomic_read(&c->unacked) && !c->node->ops->ack_kick) {
		return now;	/* the pass sends it (ack_owe) */
	}
	/*
	 * Packets sent since the pass looked at the window (rto_due_ns)
	 * made it tick (me_node_due() during a pass).
	 */
	if (!me_win_tx_idle(c))
		due = me_min_u64(due, c->rto_due_ns);
	return due;
}

void me_win_failover(struct me_conn *c, u32 link)
{
	u32 una = me_atomic_read(&c->snd_una);
	u32 max = me_atomic_read(&c->snd_max), s;

	for (s = una; me_seq_lt(s, max); s++) {
		u64 li = me_atomic64_read(&c->tx[s & (c->window - 1)].linfo);

		if (li_seq(li) == s && li_link(li) == link)
			retransmit(c, s, ME_ST_TX_RTX_FAIL, false);
	}
}

void me_win_timer(struct me_conn *c, u64 now)
{
	struct me_node *n = c->node;
	u32 una, max, s, st = me_atomic_read(&c->state);
	bool fired = false, oldest_done = false, probe;
	u64 rto, due = ME_NEVER;

	if (me_atomic_read(&c->ack_held))
		held_ack_due(c, now);
	else if (me_atomic_read(&c->unacked))
		me_win_send_ack(c, false);
	if (st != ME_CS_ESTABLISHED && st != ME_CS_CLOSING)
		return;
	if (c->mode == ME_MODE_ORDERED)
		inorder_scan(c);

	una = me_atomic_read(&c->snd_una);
	max = me_atomic_read(&c->snd_max);
	rto = rto_ns(c);
	/*
	 * The first timeout of an episode resends only the oldest packet
	 * that timed out, as a probe (RFC 5682's F-RTO): a receiver that
	 * paused past the RTO then acks the originals, and only one packet
	 * went twice, not the window.  The probe leaves the congestion
	 * window as it is (cc.c me_cc_probe()): what it finds decides.  A
	 * timeout within four RTOs of the
	 * probe resends them all: the loss is real (a lost tail costs one
	 * RTO more than without the probe).  Unless the peer has sent us
	 * nothing since the probe, on any path: then it is paused (an
	 * emulated guest's vCPU stops for 200 ms) or gone, and the window
	 * resent would only fill the queues in front of it; it gets another
	 * probe, the timer backing off, until it answers.
	 */
	probe = !c->rto_probe_ns || me_elapsed(now, c->rto_probe_ns) >= 4 * rto ||
		me_path_heard_from(n, c->pe) < c->rto_probe_ns;
	/*
	 * Each packet's own timeout, or the next pass's if it is due and
	 * could not go (no path, its entry busy), feeds the earliest, which
	 * is when a timer with nothing else to do passes next (node.c).
	 * A retransmission's is an RTO from now at least.
	 */
	for (s = una; me_seq_lt(s, max); s++) {
		struct me_txslot *t = &c->tx[s & (c->window - 1)];
		u64 li = me_atomic64_read(&t->linfo);
		u64 sent = me_atomic64_read(&t->sent_ns), last;
		u32 l = li_link(li);

		if (li_seq(li) != s || l == ME_LINK_NONE)
			continue;
		/*
		 * Lost by link order: packets sent after it on its link (by
		 * any connection) were acked.  The sack scan in
		 * me_win_rx_ack() finds this only when an ack of this
		 * connection arrives; a connection whose packets in flight
		 * were all lost gets none.  It is not waiting in a queue,
		 * so it times out from its own transmission, and every such
		 * packet goes again at once.  The full RTO, not reorder_ns:
		 * the receiver may merely not have acked it yet (acks are
		 * coalesced per connection, other connections' are not
		 * held back by ours); longer while the path's reordering
		 * window is widened (path.c), or the late packets it waits
		 * for would time out instead.
		 */
		if (me_path_lost(n, c->pe, l, li_txno(li))) {
			u64 wait = me_max_u64(rto, me_path_reorder(n, c->pe, l,
					      me_atomic64_read(&c->srtt_ns)));

			if (me_elapsed(now, sent) < wait) {
				due = me_min_u64(due, sent + wait);
			} else if (retransmit(c, s, ME_ST_TX_RTX_RTO, false)) {
				fired = true;
				due = me_min_u64(due, now + rto);
			} else {
				due = now;
			}
			continue;
		}
		/*
		 * Time from the later of the packet's transmission and the
		 * last progress on its link (like TCP restarting its timer
		 * on every new ack): while the link keeps delivering what
		 * was queued ahead of the packet, the packet is waiting,
		 * not lost.  Only while it is not known lost: once the link
		 * delivered what was sent after it, the progress of other
		 * connections on the link must not hold its timer back
		 * (issue 14: an ordered connection starved for seconds).
		 */
		last = me_max_u64(sent, me_path_acked_ns(c->pe, l));
		if (now < last || now - last < rto) {
			/*
			 * Its own timeout first, while ahead: the link's
			 * later packets may be acked before the progress
			 * one, and then it is lost (above).
			 */
			due = me_min_u64(due, sent + rto > now ? sent + rto : last + rto);
			continue;
		}
		sent = last;
		/*
		 * After the probe, every timed-out packet goes again, not
		 * only the oldest as TCP does: the acks of retransmissions
		 * never prove link order (their first copy may be what
		 * arrived), so a lost tail would otherwise take one timer
		 * pass per packet.
		 */
		if (retransmit(c, s, ME_ST_TX_RTX_RTO, probe && !fired)) {
			fired = true;
			due = me_min_u64(due, now + rto);
		} else {
			due = now;
		}
		if (fired && probe)
			c->rto_probe_ns = now;
		if (oldest_done) {
			if (fired && probe) {
				due = now;
				break;
			}
			continue;
		}
		oldest_done = true;
		/*
		 * Its path delivered nothing for a keepalive period (and an
		 * RTO) with this packet in flight: the peer may no longer
		 * hear us there (a NIC that receives but no longer
		 * transmits).  Take the path out now, as a missed keepalive
		 * would later (what it carries goes again on the others);
		 * it comes back when a probe is answered.  Only if another
		 * path to the peer delivered meanwhile (path.c).  After the
		 * retransmission: with no other path, the packet still
		 * goes, on this one.
		 */
		if (now - sent >= n->cfg.ka_ns)
			me_path_suspect(n, c->pe, l, sent);
		if (fired && probe) {
			due = now;	/* those after it: the next pass */
			break;
		}
	}
	c->rto_due_ns = due;
	if (fired) {
		me_stat_inc(n, ME_ST_RTO_FIRED);
		if (me_atomic_read(&c->backoff) < 16 &&
		    me_atomic_add_return(&c->backoff, 1) == 1)
			c->rto_first_ns = now;
	}
}
