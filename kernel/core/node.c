// SPDX-License-Identifier: GPL-2.0
/*
 * node.c - node setup, the receive entry point and the timer.
 *
 * me_core_rx() validates the header completely (wire.c), then checks the
 * destination node and incarnation, then dispatches by type.  It takes no
 * lock of its own; see Documentation/protocol.md, "Synchronization
 * points", for what each handler uses.
 */
#include "node.h"
#include "conn.h"
#include "path.h"
#include "window.h"
#include "msg.h"

void me_node_cfg_default(struct me_node_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->node_id = 1;
	cfg->incarnation = 1;
	cfg->mtu = 1500;
	cfg->window = 256;
	cfg->credit = 256;
	cfg->ops = 64;
	cfg->max_conns = 64;
	cfg->max_peers = 64;
	cfg->ack_every = 16;
	cfg->ack_hold_ns = 100000;	/* 100 us, half of rto_min */
	cfg->link_window = 64 * 1024;
	cfg->max_retries = 12;
	cfg->dupthresh = 3;
	cfg->tick_ns = 20000;		/* 20 us */
	cfg->rto_init_ns = 2000000;	/* 2 ms */
	cfg->rto_min_ns = 200000;	/* 200 us */
	cfg->rto_max_ns = 64000000;	/* 64 ms */
	cfg->connect_rto_ns = 2000000;
	cfg->hello_ns = 1000000;
	cfg->ka_ns = 500000;
	cfg->link_dead_ns = 3000000;
	cfg->peer_dead_ns = 50000000;
	cfg->answer_ns = 2000000000;	/* 2 s */
	cfg->max_passive = 64;
	cfg->key_fail_max = 16;
	cfg->rate_ns = 1000000;
	cfg->cc = 1;
	cfg->cc_init = 8 * 1500;
	cfg->cc_target_ns = 100000;	/* 100 us */
	cfg->linger_ns = 1000000000;	/* 1 s: > the peer's CLOSE retries */
}

static bool is_pow2(u32 v)
{
	return v && !(v & (v - 1));
}

struct me_node *me_node_create(const struct me_node_cfg *cfg,
			       const struct me_plat_ops *ops, void *ctx)
{
	struct me_node *n;

	if (!cfg->node_id || cfg->node_id == ME_NODE_BCAST ||
	    !cfg->incarnation || cfg->mtu < ME_HDR_SEQ + 64 ||
	    cfg->mtu > ME_HDR_SEQ + 0xffff || !is_pow2(cfg->window) ||
	    cfg->window < ME_WIN_MIN || cfg->window > ME_WIN_MAX ||
	    !cfg->credit || cfg->credit > cfg->window || !is_pow2(cfg->ops) ||
	    cfg->ops > ME_OPS_MAX || !cfg->max_conns || cfg->max_conns > ME_MAX_CONNS ||
	    !cfg->max_peers || cfg->max_peers > ME_MAX_PEERS ||
	    !cfg->ack_every || !cfg->tick_ns ||
	    cfg->link_window < cfg->mtu || !cfg->rto_min_ns ||
	    cfg->rto_max_ns < cfg->rto_min_ns || !cfg->max_passive || !cfg->key_fail_max ||
	    (ops->zc_tx && (!ops->zc_hold || !ops->zc_put)) ||
	    (ops->resp_hold && (!ops->resp_tx || !ops->resp_put)) ||
	    (cfg->pace_pct && (!ops->pace_kick || cfg->pace_pct < 100 || cfg->pace_pct > 1000 ||
				cfg->pace_burst > (4u << 20))))
		return NULL;
	n = ops->alloc(ctx, sizeof(*n));
	if (!n)
		return NULL;
	memset(n, 0, sizeof(*n));
	n->cfg = *cfg;
	/*
	 * A held ack must reach the sender well before its timer fires, and
	 * before its path looks stalled (nothing acked for ka_ns).
	 */
	n->cfg.ack_hold_ns = me_min_u64(cfg->ack_hold_ns,
					me_min_u64(cfg->rto_min_ns / 2, cfg->ka_ns / 4));
	n->ops = ops;
	n->ctx = ctx;
	n->conns = ops->alloc(ctx, sizeof(*n->conns) * cfg->max_conns);
	n->free_ids = ops->alloc(ctx, sizeof(*n->free_ids) * cfg->max_conns);
	if (!n->conns || !n->free_ids || me_peers_alloc(n)) {
		if (n->conns)
			ops->free(ctx, n->conns);
		if (n->free_ids)
			ops->free(ctx, n->free_ids);
		ops->free(ctx, n);
		return NULL;
	}
	memset(n->conns, 0, sizeof(*n->conns) * cfg->max_conns);
	n->slot_mask = 1;
	while (n->slot_mask < cfg->max_conns)
		n->slot_mask <<= 1;
	n->slot_mask--;
	me_lock_init(&n->ctl_lock);
	me_lock_init(&n->timer_lock);
	me_path_init(n);
	return n;
}

void me_node_destroy(struct me_node *n)
{
	u32 i, cnt = me_atomic_read(&n->nconns);

	for (i = 0; i < cnt; i++)
		if (n->conns[i])
			me_conn_free(n->conns[i]);
	me_peers_free(n);
	n->ops->free(n->ctx, n->free_ids);
	n->ops->free(n->ctx, n->conns);
	n->ops->free(n->ctx, n);
}

u64 me_node_stat(struct me_node *n, enum me_stat st)
{
	u64 sum = 0;
	u32 i;

	if (st >= ME_ST_MAX_)
		return 0;
	for (i = 0; i < ME_STAT_SHARDS; i++)
		sum += me_atomic64_read(&n->stats[i][st]);
	return sum;
}

void me_node_tx(struct me_node *n, u32 link, u64 addr, const void *buf, u32 len)
{
	if (n->ops->tx(n->ctx, link, addr, buf, len))
		me_stat_inc(n, ME_ST_TX_FAIL);
}

void me_node_hdr(struct me_node *n, struct me_hdr *h, u32 type, u32 dst)
{
	memset(h, 0, sizeof(*h));
	h->version = ME_WIRE_VERSION;
	h->type = (u8)type;
	h->src_node = n->cfg.node_id;
	h->src_inc = n->cfg.incarnation;
	h->dst_node = dst;
}

static const enum me_stat parse_stat[] = {
	ME_ST_RX_SHORT, ME_ST_RX_VERSION, ME_ST_RX_TYPE, ME_ST_RX_FIELD,
};

static int parse_counted(struct me_node *n, const void *buf, u32 len, struct me_hdr *h)
{
	int ret = me_wire_parse(buf, len, h);

	if (ret)
		me_stat_inc(n, parse_stat[ret == ME_EWIRE_SHORT ? 0 :
					   ret == ME_EWIRE_VERSION ? 1 :
					   ret == ME_EWIRE_TYPE ? 2 : 3]);
	return ret;
}

/*
 * The connection of a connection packet (ACK, NACK, ABORT, sequenced)
 * whose header passed the node checks: a live one, with its cookie, or
 * NULL and the packet dropped before anything in it is used, its arrival
 * included (it does not keep a link alive).
 */
static struct me_conn *rx_conn(struct me_node *n, u32 link, u64 src, const struct me_hdr *h)
{
	struct me_conn *c = me_conn_lookup(n, h);

	if (!c) {
		me_stat_inc(n, ME_ST_RX_STALE);
		return NULL;
	}
	if (h->cookie != c->cookie) {
		me_stat_inc(n, ME_ST_RX_COOKIE);
		return NULL;
	}
	me_path_rx(n, link, src, h, c->pe);
	me_atomic64_set(&c->heard_ns, h->now);
	return c;
}

static void rx_dispatch(struct me_conn *c, u32 link, const struct me_hdr *h, const u8 *pkt)
{
	if (h->type == ME_PT_ABORT)
		me_conn_rx_abort(c);
	else if (h->type == ME_PT_ACK || h->type == ME_PT_NACK)
		me_win_rx_ack(c, link, h);
	else
		me_win_rx_data(c, link, h, pkt, (u32)h->hdr_len + h->payload_len);
}

/*
 * The sequenced packet an ack carried (ME_F_CARRY, wire 9): parsed like
 * any packet, between the same two nodes (their incarnations included)
 * and fitting the MTU together with the ack; of the ack's connection or
 * another one between them, checked as its own.  Taken before the ack:
 * it is the answer someone waits for, the ack only completes what was
 * sent (and separate frames could have come in either order).
 */
static void rx_carried(struct me_node *n, u32 link, u64 src, const struct me_hdr *ack,
		       const u8 *frame, u32 len)
{
	struct me_conn *c;
	struct me_hdr h;

	if (parse_counted(n, frame + ME_HDR_ACK, len - ME_HDR_ACK, &h))
		return;
	if (!me_pt_sequenced(h.type) || h.src_node != ack->src_node ||
	    h.dst_node != ack->dst_node || h.src_inc != ack->src_inc ||
	    h.dst_inc != ack->dst_inc ||
	    ME_HDR_ACK + (u32)h.hdr_len + h.payload_len > n->cfg.mtu) {
		me_stat_inc(n, ME_ST_RX_FIELD);
		return;
	}
	h.rx = ack->rx;
	h.batch = ack->batch;
	h.now = ack->now;
	c = rx_conn(n, link, src, &h);
	if (c)
		rx_dispatch(c, link, &h, frame + ME_HDR_ACK);
}

int me_core_rx(struct me_node *n, u32 link, u64 src, const void *buf, u32 len)
{
	return me_core_rx_batch(n, NULL, link, src, buf, len, NULL);
}

int me_core_rx_frame(struct me_node *n, u32 link, u64 src, const void *buf,
		     u32 len, void *rx)
{
	return me_core_rx_batch(n, NULL, link, src, buf, len, rx);
}

void me_core_rx_batch_begin(struct me_rx_batch *b)
{
	b->nacks = 0;
	b->rx_ns = 0;
	b->handoff = false;
}

u64 me_hdr_arrival(const struct me_hdr *h)
{
	if (h->batch && h->batch->rx_ns && h->batch->rx_ns <= h->now)
		return h->batch->rx_ns;
	return h->now;
}

void me_core_rx_batch_end(struct me_rx_batch *b)
{
	u32 i;

	for (i = 0; i < b->nacks; i++)
		me_win_send_ack(b->conn[i], false);
	b->nacks = 0;
}

int me_core_rx_batch(struct me_node *n, struct me_rx_batch *b, u32 link, u64 src,
		     const void *buf, u32 len, void *rx)
{
	struct me_conn *c;
	struct me_hdr h;
	int ret;

	if (link >= ME_MAX_LINKS || !n->links[link].present)
		return -EINVAL;
	me_stat_inc(n, ME_ST_RX_PKTS);
	ret = parse_counted(n, buf, len, &h);
	if (ret)
		return ret;
	h.rx = rx;
	h.batch = b;
	h.now = me_now(n);
	if ((u32)h.hdr_len + h.payload_len > n->cfg.mtu) {
		me_stat_inc(n, ME_ST_RX_FIELD);
		return ME_EWIRE_FIELD;
	}
	if (h.dst_node != n->cfg.node_id && h.dst_node != ME_NODE_BCAST) {
		me_stat_inc(n, ME_ST_RX_NOTME);
		return -EINVAL;
	}
	if (h.dst_inc && h.dst_inc != n->cfg.incarnation) {
		me_stat_inc(n, ME_ST_RX_STALE);
		return -ESTALE;
	}
	if (h.src_node == n->cfg.node_id) {
		me_stat_inc(n, ME_ST_RX_NOTME);
		return -EINVAL;
	}
	switch (h.type) {
	case ME_PT_HELLO:
	case ME_PT_KEEPALIVE:
		me_path_rx(n, link, src, &h, NULL);
		return 0;
	case ME_PT_CONNECT:
	case ME_PT_ACCEPT:
		me_path_rx(n, link, src, &h, NULL);
		me_conn_rx_ctl(n, link, src, &h);
		return 0;
	case ME_PT_ABORT:
		if (!h.src_conn) {
			me_conn_rx_refusal(n, &h);
			return 0;
		}
		break;
	default:
		break;
	}
	/* Two packets in one frame (wire 9) are each taken or dropped alone. */
	c = rx_conn(n, link, src, &h);
	if (h.flags & ME_F_CARRY)
		rx_carried(n, link, src, &h, buf, len);
	if (!c)
		return -ESTALE;
	rx_dispatch(c, link, &h, buf);
	return 0;
}

/*
 * The sleeping timer.  A pass that finds nothing due within a tick
 * returns the time to the earliest deadline it found (a retransmission
 * timeout, a path's keepalive or death, a HELLO), at most the idle
 * period (idle_period()); the first work created after it that is due
 * sooner (me_node_busy(): an ack owed, an op queued, a connection
 * ending, a link added or changed; me_node_due(): a packet whose timeout
 * comes before the wake) kicks the host's timer awake.  A handshake of
 * two flags, each side storing its own before reading the other's (full
 * barriers), so that either the pass sees the work or the work sees the
 * sleeping timer and kicks it:
 *   work:  busy = 1;  if (xchg(idle, 0)) kick
 *   timer: wake = 0; busy = 0;  scan;  wake = W; idle = 1;
 *          if (busy) idle = 0 (tick)
 * Work due at or after W stored its state before it read W (a barrier),
 * so the pass at W sees it.
 */
void me_node_kick_slow(struct me_node *n)
{
	me_atomic_xchg(&n->timer_busy, 1);
	if (me_atomic_xchg(&n->timer_idle, 0) && n->ops->timer_kick)
		n->ops->timer_kick(n->ctx);
}

void me_core_kick(struct me_node *n)
{
	me_node_busy(n);
}

bool me_core_acks_pending(struct me_node *n)
{
	return me_atomic_read(&n->acks_held) || me_atomic_read(&n->owed_armed);
}

bool me_core_timer_idle(struct me_node *n)
{
	return me_atomic_read(&n->timer_idle);
}

/*
 * How long an idle node's timer sleeps at most: a quarter of the CONNECT
 * retry time (a connection being set up has no deadline of its own
 * here), never below the tick.  The paths' keepalives and deaths and the
 * HELLOs set their own deadlines (me_path_timer()); closed connections
 * are retired at the next pass after their linger.
 */
static u64 idle_period(struct me_node *n)
{
	return me_max_u64(n->cfg.connect_rto_ns / 4, n->cfg.tick_ns);
}

/* After a pass that found nothing due within a tick: may it sleep to @wake? */
static bool timer_go_idle(struct me_node *n, u64 wake)
{
	me_atomic64_set(&n->timer_wake_ns, wake);
	me_atomic_xchg(&n->timer_idle, 1);
	if (!me_atomic_read(&n->timer_busy))
		return true;
	me_atomic_set(&n->timer_idle, 0);	/* work came during the pass */
	return false;
}

/*
 * A pass later than it was due by more than the shortest silence the
 * timer judges (an RTO, at least rto_min; two ticks) finds the host
 * stalled: an emulated guest's vCPU stops for 200 ms while its host's
 * cores run the other guest.  The frames that came meanwhile may still
 * wait for the receive threads, and the acks and keepalives among them
 * would look missing: timeouts would fire and paths go down for silence
 * that was ours.  Such a pass judges nothing and the next, a tick later,
 * does; never two in a row, so a host whose timer is always that late
 * still finds dead paths and lost packets.
 */
static bool timer_late(struct me_node *n, u64 now)
{
	u64 grace = me_max_u64(n->cfg.rto_min_ns, 2 * n->cfg.tick_ns);
	bool late = !n->timer_skipped && n->timer_due_ns &&
		    me_elapsed(now, n->timer_due_ns) > grace;

	n->timer_skipped = late;
	return late;
}

u64 me_core_timer(struct me_node *n)
{
	u32 i, cnt;
	u64 now, due, next;

	if (!me_trylock(&n->timer_lock))
		return n->cfg.tick_ns;
	/* Kicks are for a sleeping timer; work from now on marks this pass. */
	me_atomic_set(&n->timer_idle, 0);
	me_atomic64_set(&n->timer_wake_ns, 0);
	me_atomic_xchg(&n->timer_busy, 0);
	now = me_now(n);
	if (timer_late(n, now)) {
		me_stat_inc(n, ME_ST_TIMER_LATE);
		n->timer_due_ns = now + n->cfg.tick_ns;
		me_unlock(&n->timer_lock);
		return n->cfg.tick_ns;
	}
	due = me_min_u64(now + idle_period(n), me_path_timer(n, now));
	cnt = me_atomic_read(&n->nconns);
	for (i = 0; i < cnt; i++) {
		struct me_conn *c = me_ptr_load((void **)&n->conns[i]);

		if (!c)
			continue;
		me_conn_timer(c, now);
		if (n->ops->retire && me_conn_reclaimable(c, now)) {
			me_conn_retire(c);	/* c is gone */
			continue;
		}
		if (due > now + n->cfg.tick_ns)
			due = me_min_u64(due, me_conn_due(c, now));
	}
	now = me_now(n);
	next = due > now + n->cfg.tick_ns ? due - now : n->cfg.tick_ns;
	if (next > n->cfg.tick_ns && !timer_go_idle(n, now + next))
		next = n->cfg.tick_ns;
	n->timer_due_ns = now + next;
	me_unlock(&n->timer_lock);
	return next;
}
