// SPDX-License-Identifier: GPL-2.0
/*
 * path.c - links to peers.
 *
 * Discovery: every link sends HELLO (node id, incarnation, name) every
 * hello_ns; the receiver records the peer node and incarnation of the link,
 * and the links reporting the same peer form that peer's channel.  A HELLO
 * naming another identity replaces the link's peer only once that peer has
 * stopped answering (hello_adopt()): HELLOs are not authenticated.
 *
 * Liveness: any valid packet received on a link refreshes it; after ka_ns
 * of silence the timer sends a KEEPALIVE probe (answered at once), after
 * link_dead_ns of silence the link is declared dead and the in-flight
 * packets of every connection that used it are resent on the others.  A
 * dead link keeps being probed; the first packet from the peer on it makes
 * it alive again, and the packetizer uses it at once.
 *
 * Selection (me_path_pick): among the alive links to the peer with free
 * window (link_cap(): link_window scaled by the link's share of the
 * fastest rate), the one that would finish the
 * packet first: minimal (inflight + len) / rate, compared by
 * cross-multiplication (no division).  rate is an estimate of delivered
 * bytes per microsecond, measured while the link is saturated and seeded
 * from the NIC's nominal speed.
 */
#include "path.h"
#include "node.h"
#include "conn.h"
#include "window.h"

void me_path_init(struct me_node *n)
{
	u32 i;

	for (i = 0; i < ME_MAX_LINKS; i++)
		memset(&n->links[i], 0, sizeof(n->links[i]));
}

int me_link_add(struct me_node *n, u32 idx, u32 mtu, u32 rate_mbps)
{
	struct me_link *l;

	if (idx >= ME_MAX_LINKS || mtu < n->cfg.mtu)
		return -EINVAL;
	l = &n->links[idx];
	if (l->present && !me_atomic_read(&l->deleted))
		return -EEXIST;
	/* A slot taken again starts without a peer; inflight stays balanced. */
	me_atomic_set(&l->alive, 0);
	me_atomic_set(&l->peer_node, 0);
	me_atomic_set(&l->peer_inc, 0);
	me_atomic_set(&l->deleted, 0);
	l->mtu = mtu;
	me_atomic_set(&l->rate, rate_mbps ? me_max_u32(rate_mbps / 8, 1) : 1250);
	me_atomic_set(&l->admin_up, 1);
	l->present = true;
	return 0;
}

void me_link_set_admin(struct me_node *n, u32 idx, bool up)
{
	if (idx < ME_MAX_LINKS && n->links[idx].present &&
	    !me_atomic_read(&n->links[idx].deleted))
		me_atomic_set(&n->links[idx].admin_up, up);
}

void me_link_del(struct me_node *n, u32 idx)
{
	if (idx >= ME_MAX_LINKS || !n->links[idx].present)
		return;
	me_atomic_set(&n->links[idx].deleted, 1);
	/* The timer takes it down and moves its packets to other links. */
	me_atomic_set(&n->links[idx].admin_up, 0);
}

u32 me_link_peer_inc(struct me_node *n, u32 idx)
{
	if (idx >= ME_MAX_LINKS || !n->links[idx].present)
		return 0;
	return me_atomic_read(&n->links[idx].peer_inc);
}

int me_link_alive(struct me_node *n, u32 idx)
{
	if (idx >= ME_MAX_LINKS || !n->links[idx].present)
		return 0;
	return me_atomic_read(&n->links[idx].alive) &&
	       me_atomic_read(&n->links[idx].admin_up);
}

u32 me_link_peer(struct me_node *n, u32 idx)
{
	if (idx >= ME_MAX_LINKS || !n->links[idx].present)
		return 0;
	return me_atomic_read(&n->links[idx].peer_node);
}

u32 me_link_rate(struct me_node *n, u32 idx)
{
	if (idx >= ME_MAX_LINKS || !n->links[idx].present)
		return 0;
	return me_atomic_read(&n->links[idx].rate);
}

static void send_small(struct me_node *n, u32 idx, u32 type, u32 dst,
		       u32 dst_inc, u16 flags)
{
	u8 buf[ME_HDR_HELLO + ME_HELLO_NAME];
	struct me_hdr h;
	u32 len, name = 0;

	me_node_hdr(n, &h, type, dst);
	h.flags = flags;
	h.dst_inc = dst_inc;
	h.h.link = idx;
	if (type == ME_PT_HELLO)
		while (name < ME_HELLO_NAME && n->cfg.name[name])
			name++;
	h.payload_len = (u16)name;
	len = me_wire_build(buf, &h);
	memcpy(buf + len, n->cfg.name, name);
	me_node_tx(n, idx, buf, len + name);
}

/* Has the link's peer (node, inc) been silent on link i for link_dead_ns? */
static bool silent_on(struct me_node *n, u32 i, u32 node, u32 inc, u64 now)
{
	struct me_link *l = &n->links[i];

	if (!l->present || me_atomic_read(&l->peer_node) != node ||
	    me_atomic_read(&l->peer_inc) != inc)
		return true;
	return me_elapsed(now, me_atomic64_read(&l->last_rx_ns)) > n->cfg.link_dead_ns;
}

/*
 * A HELLO that validated but names another identity than the link's peer.
 * Nothing in it is authenticated, so it replaces the peer only when the
 * peer has stopped answering: another node takes the link once the peer
 * has been silent on it for link_dead_ns, a new incarnation of the peer
 * (a restart, which fails every connection to the old one) once the old
 * incarnation has been silent that long on every link.  A live peer is
 * never silent that long: it answers keepalive probes after ka_ns.  So
 * a forged HELLO changes nothing while the peer lives, and a real restart
 * is believed within link_dead_ns + hello_ns.  Returns true if the
 * sender is now the link's peer.
 */
static bool hello_adopt(struct me_node *n, u32 idx, const struct me_hdr *h,
			u32 old_peer, u32 old_inc)
{
	struct me_link *l = &n->links[idx];
	u64 now = me_now(n);
	u32 i;

	if (old_peer) {
		for (i = 0; i < ME_MAX_LINKS; i++) {
			if ((i == idx || old_peer == h->src_node) &&
			    !silent_on(n, i, old_peer, old_inc, now)) {
				me_stat_inc(n, ME_ST_RX_HELLO_HELD);
				return false;
			}
		}
	}
	/* Concurrent HELLOs on the link: one of them takes it. */
	if (me_atomic_cmpxchg(&l->peer_inc, old_inc, h->src_inc) != old_inc)
		return false;
	me_atomic_set(&l->peer_node, h->src_node);
	if (old_peer == h->src_node && old_inc) {
		me_stat_inc(n, ME_ST_PEER_RESTART);
		me_conn_peer_restarted(n, h->src_node, h->src_inc);
	}
	return true;
}

int me_path_rx(struct me_node *n, u32 idx, const struct me_hdr *h)
{
	struct me_link *l = &n->links[idx];
	u32 old_peer = me_atomic_read(&l->peer_node);
	u32 old_inc = me_atomic_read(&l->peer_inc);

	if (old_peer != h->src_node || old_inc != h->src_inc) {
		/* Liveness only from the known peer, a new one only by HELLO. */
		if (h->type != ME_PT_HELLO || !hello_adopt(n, idx, h, old_peer, old_inc))
			return 0;
	}
	me_atomic64_set(&l->last_rx_ns, me_now(n));
	if (!me_atomic_read(&l->alive) && me_atomic_read(&l->admin_up)) {
		me_atomic_set(&l->alive, 1);
		me_stat_inc(n, ME_ST_LINK_UP);
	}
	if (h->type == ME_PT_HELLO)
		return ME_RX_PEER_HELLO;
	if (h->type == ME_PT_KEEPALIVE && !(h->flags & ME_F_REPLY))
		send_small(n, idx, ME_PT_KEEPALIVE, h->src_node, h->src_inc,
			   ME_F_REPLY);
	return 0;
}

static bool usable(struct me_node *n, u32 i, u32 peer)
{
	struct me_link *l = &n->links[i];

	return l->present && me_atomic_read(&l->alive) &&
	       me_atomic_read(&l->admin_up) &&
	       me_atomic_read(&l->peer_node) == peer;
}

/*
 * The bytes a link may have in flight: link_window for the fastest usable
 * link to the peer, proportionally less for slower ones, so that every
 * link's queue drains in about the same time.  Equal queueing delays keep
 * the reordering between links (and so the receiver's reorder span) and
 * the spread of round-trip times small; a slow link with a full
 * link_window would hold packets several times longer than a fast one.
 * At least one MTU, so that every link can carry a packet.
 */
static u64 link_cap(struct me_node *n, u64 rate, u64 maxrate)
{
	u64 cap = me_div_u64((u64)n->cfg.link_window * rate, (u32)maxrate);

	return me_max_u64(cap, n->cfg.mtu);
}

static u64 max_rate(struct me_node *n, u32 peer)
{
	u64 m = 1;
	u32 i;

	for (i = 0; i < ME_MAX_LINKS; i++)
		if (usable(n, i, peer))
			m = me_max_u64(m, me_atomic_read(&n->links[i].rate));
	return m;
}

int me_path_pick(struct me_node *n, u32 peer, u32 len, bool force)
{
	u64 best_infl = 0, best_rate = 1, maxrate = force ? 1 : max_rate(n, peer);
	int best = -1;
	u32 i;

	for (i = 0; i < ME_MAX_LINKS; i++) {
		u64 infl, rate;

		if (!usable(n, i, peer))
			continue;
		infl = me_atomic_read(&n->links[i].inflight);
		rate = me_atomic_read(&n->links[i].rate);
		if (!force && infl + len > link_cap(n, rate, maxrate))
			continue;
		/* (infl+len)/rate < (best_infl+len)/best_rate */
		if (best < 0 || (infl + len) * best_rate <
				(best_infl + len) * rate) {
			best = (int)i;
			best_infl = infl;
			best_rate = rate;
		}
	}
	return best;
}

int me_path_any(struct me_node *n, u32 peer)
{
	return me_path_pick(n, peer, 0, true);
}

u32 me_path_next_txno(struct me_node *n, u32 idx)
{
	return me_atomic_add_return(&n->links[idx].txno, 1) & ME_TXNO_MASK;
}

static bool txno_lt(u32 a, u32 b)
{
	return ((b - a) & ME_TXNO_MASK) - 1 < (ME_TXNO_MASK >> 1);
}

void me_path_acked(struct me_node *n, u32 idx, u32 txno, u32 bytes, bool fifo)
{
	struct me_link *l = &n->links[idx];
	u32 cur = me_atomic_read(&l->acked_txno);

	me_atomic_add_return(&l->inflight, -bytes);
	me_atomic64_add_return(&l->delivered, bytes);
	/*
	 * Only an ack that is known to be for this very transmission tells
	 * us that everything sent before it on this link has arrived or is
	 * lost.  For a retransmitted packet the ack may be for an earlier
	 * copy on another link while this copy still waits in this link's
	 * queue; taking its txno would declare that queue lost.
	 */
	if (!fifo)
		return;
	while (txno_lt(cur, txno)) {
		u32 old = me_atomic_cmpxchg(&l->acked_txno, cur, txno);

		if (old == cur) {
			me_atomic64_set(&l->acked_ns, me_now(n));
			break;
		}
		cur = old;
	}
}

u64 me_path_acked_ns(struct me_node *n, u32 idx)
{
	return me_atomic64_read(&n->links[idx].acked_ns);
}

bool me_path_lost(struct me_node *n, u32 idx, u32 txno)
{
	u32 acked = me_atomic_read(&n->links[idx].acked_txno);

	return txno_lt(txno + n->cfg.dupthresh, acked);
}

static void link_down(struct me_node *n, u32 idx)
{
	u32 i, cnt = me_atomic_read(&n->nconns);
	u32 peer = me_atomic_read(&n->links[idx].peer_node);

	me_atomic_set(&n->links[idx].alive, 0);
	me_stat_inc(n, ME_ST_LINK_DOWN);
	for (i = 0; i < cnt; i++) {
		struct me_conn *c = me_ptr_load((void **)&n->conns[i]);

		if (c && c->peer == peer && me_conn_live(c))
			me_win_failover(c, idx);
	}
}

static void rate_update(struct me_node *n, struct me_link *l, u64 now,
			u64 maxrate)
{
	u64 d = me_atomic64_read(&l->delivered);
	u64 cap = link_cap(n, me_atomic_read(&l->rate), maxrate);
	bool busy = me_atomic_read(&l->inflight) >= cap / 2;
	u64 dt = now - l->rate_t0;

	if (dt < n->cfg.rate_ns)
		return;
	if (busy && l->rate_busy && dt < 0xffffffffull) {
		u64 sample = me_div_u64((d - l->rate_d0) * 1000, (u32)dt);
		u32 old = me_atomic_read(&l->rate);

		if (sample)
			me_atomic_set(&l->rate,
				      (u32)me_max_u64((3ull * old + sample) / 4, 1));
	}
	l->rate_t0 = now;
	l->rate_d0 = d;
	l->rate_busy = busy;
}

void me_path_timer(struct me_node *n, u64 now)
{
	u32 i;

	for (i = 0; i < ME_MAX_LINKS; i++) {
		struct me_link *l = &n->links[i];
		u32 peer;

		if (!l->present)
			continue;
		if (!me_atomic_read(&l->admin_up)) {
			if (me_atomic_read(&l->alive))
				link_down(n, i);
			continue;
		}
		if (now - l->last_hello_ns >= n->cfg.hello_ns) {
			l->last_hello_ns = now;
			send_small(n, i, ME_PT_HELLO, ME_NODE_BCAST, 0, 0);
		}
		peer = me_atomic_read(&l->peer_node);
		if (!peer)
			continue;
		if (me_elapsed(now, me_atomic64_read(&l->last_rx_ns)) >= n->cfg.ka_ns &&
		    now - l->last_ka_ns >= n->cfg.ka_ns) {
			l->last_ka_ns = now;
			send_small(n, i, ME_PT_KEEPALIVE, peer,
				   me_atomic_read(&l->peer_inc), 0);
		}
		if (me_atomic_read(&l->alive) &&
		    me_elapsed(now, me_atomic64_read(&l->last_rx_ns)) > n->cfg.link_dead_ns)
			link_down(n, i);
		rate_update(n, l, now, max_rate(n, peer));
	}
}
