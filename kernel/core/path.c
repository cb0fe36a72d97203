// SPDX-License-Identifier: GPL-2.0
/*
 * path.c - the neighbour model: links reach many peers.
 *
 * A link is a local NIC on a switched Ethernet: it reaches any number of
 * peers, and state is kept per (link, peer) path (struct me_path).
 *
 * Discovery: every link broadcasts HELLO (node id, incarnation, name)
 * every hello_ns.  A HELLO that validated makes its sender a peer (a slot
 * in the peer table) and the (link, peer) path known, with the HELLO's
 * source address as where frames to the peer on that link go; no other
 * frame teaches an address.  A path seen for the first time is answered
 * at once with a unicast HELLO and a keepalive, so a node that joins is
 * known both ways within a round trip, not a HELLO period.
 *
 * Two-way liveness: a path is alive while we hear the peer on it
 * (last_rx_ns) and the peer hears us (heard_ns), each within link_dead_ns.
 * Frames from the peer on the link, from its known address, prove the
 * first; the second is proven by the peer: every KEEPALIVE carries how
 * long ago its sender last heard the receiver on that link, and an ack
 * of a packet we sent on the path proves it arrived.  A path quiet in
 * either direction for ka_ns gets a KEEPALIVE from each end every ka_ns
 * (ka_due()): an unanswered beacon while it is alive, else a probe,
 * answered at once.  A keepalive echoes the peer's newest one (the first
 * we send after it came), so each end measures a round trip from the
 * keepalive that answers its own.  So a NIC that still receives but no
 * longer transmits goes dead on both sides: its peers stop hearing it,
 * and it stops being told that it is heard.  A dead path keeps being
 * probed, and its connections' packets in flight on it go again on the
 * others (me_win_failover).
 *
 * Identity: nothing in a HELLO is authenticated.  So a HELLO naming a new
 * incarnation of a known peer (a restart, which fails every connection
 * to the old one) is believed only once the old incarnation has been
 * silent on every link for link_dead_ns, and a known path's address
 * changes only once the path is silent: a forged HELLO changes nothing
 * while the peer lives.  A peer silent everywhere for peer_dead_ns with
 * no connection is forgotten.  The table holds cfg.max_peers peers; when
 * it is full, a new HELLO takes the slot of the oldest peer that never
 * came alive and holds no connection (a flood of forged identities evicts
 * itself), or is dropped.
 *
 * Selection (me_path_pick): among the alive paths to the peer with free
 * window (link_cap(): link_window scaled by the path's share of the
 * fastest rate), the one that would finish the packet first: minimal
 * (inflight + len) / rate, compared by cross-multiplication (no
 * division).  rate is an estimate of delivered bytes per microsecond,
 * measured while the path is saturated and seeded from the NIC's speed.
 *
 * Pacing (cfg.pace_pct, off by default): a path's packets leave spread
 * over its round trip instead of as a burst of its window, at pace_pct
 * percent of window / base RTT (the least round trip measured, cc.c):
 * each packet moves the path's pace_ns on by its length at that rate,
 * from no earlier than pace_burst bytes' worth before now (an idle path
 * sends that much at once).  A pump finding every path with room paced
 * stops, and the host's pace_kick brings it back (me_core_pace()).
 * Until a base RTT is measured a path is not paced.
 *
 * Scale: HELLOs cost one frame per link per hello_ns; keepalives one
 * beacon each way per path per ka_ns when the path carries nothing; the
 * timer scans paths every few ms (scan_period()), not every tick, and an
 * idle node's timer sleeps to the paths' next deadline (paths_due()).
 */
#include "path.h"
#include "node.h"
#include "conn.h"
#include "window.h"
#include "cc.h"

/* Keepalive extension: the sender last heard the receiver this long ago. */
#define ME_KA_NEVER	0xffffffffu	/* ... never (or longer than 4295 s) */

void me_path_init(struct me_node *n)
{
	u32 i;

	for (i = 0; i < ME_MAX_LINKS; i++)
		memset(&n->links[i], 0, sizeof(n->links[i]));
	n->rate_due_ns = ME_NEVER;
}

int me_peers_alloc(struct me_node *n)
{
	size_t sz = sizeof(*n->peers) * n->cfg.max_peers;

	n->peers = n->ops->alloc(n->ctx, sz);
	n->pids = n->ops->alloc(n->ctx, sizeof(*n->pids) * n->cfg.max_peers);
	if (!n->peers || !n->pids) {
		me_peers_free(n);
		return -ENOMEM;
	}
	memset(n->peers, 0, sz);
	memset(n->pids, 0, sizeof(*n->pids) * n->cfg.max_peers);
	me_atomic_set(&n->npeers, 0);
	me_lock_init(&n->peer_lock);
	return 0;
}

void me_peers_free(struct me_node *n)
{
	if (n->peers)
		n->ops->free(n->ctx, n->peers);
	if (n->pids)
		n->ops->free(n->ctx, n->pids);
	n->peers = NULL;
	n->pids = NULL;
}

static u32 peer_slot(struct me_node *n, const struct me_peer *p)
{
	return (u32)(p - n->peers);
}

u32 me_peer_id(struct me_node *n, const struct me_peer *p)
{
	return me_atomic_read(&n->pids[peer_slot(n, p)]);
}

struct me_peer *me_peer_find(struct me_node *n, u32 id)
{
	u32 i, cnt = me_atomic_read(&n->npeers);

	if (!id)
		return NULL;
	for (i = 0; i < cnt; i++)
		if (me_atomic_read(&n->pids[i]) == id)
			return &n->peers[i];
	return NULL;
}

struct me_peer *me_peer_hold(struct me_node *n, u32 id)
{
	struct me_peer *p;

	me_lock(&n->peer_lock);
	p = me_peer_find(n, id);
	if (p)
		me_atomic_add_return(&p->conns, 1);
	me_unlock(&n->peer_lock);
	return p;
}

void me_peer_put(struct me_node *n, struct me_peer *p)
{
	(void)n;
	me_atomic_add_return(&p->conns, -1);
}

static bool fresh(struct me_node *n, me_atomic64_t *t, u64 now)
{
	u64 v = me_atomic64_read(t);

	return v && me_elapsed(now, v) <= n->cfg.link_dead_ns;
}

static bool link_up(struct me_node *n, u32 link)
{
	return n->links[link].present && me_atomic_read(&n->links[link].admin_up);
}

bool me_path_usable(struct me_node *n, struct me_peer *p, u32 link)
{
	return link < ME_MAX_LINKS && me_atomic_read(&p->path[link].alive) &&
	       link_up(n, link);
}

u64 me_path_probe_rtt(struct me_node *n, struct me_peer *p)
{
	u32 i, hi = me_atomic_read(&n->links_hi);
	u64 m = 0;

	for (i = 0; i < hi; i++)
		if (me_path_usable(n, p, i))
			m = me_max_u64(m, me_atomic_read(&p->path[i].rtt_us));
	return m * 1000;
}

u64 me_path_heard_from(struct me_node *n, struct me_peer *p)
{
	u32 i, hi = me_atomic_read(&n->links_hi);
	u64 m = 0;

	for (i = 0; i < hi; i++)
		if (me_path_usable(n, p, i))
			m = me_max_u64(m, me_atomic64_read(&p->path[i].last_rx_ns));
	return m;
}

/* The best delivery rate among the peer's usable paths (1: none). */
static u64 max_rate(struct me_node *n, struct me_peer *p)
{
	u32 i, hi = me_atomic_read(&n->links_hi);
	u64 m = 1;

	for (i = 0; i < hi; i++)
		if (me_path_usable(n, p, i))
			m = me_max_u64(m, me_atomic_read(&p->path[i].rate));
	return m;
}

/*
 * Both directions proven recently: the path comes alive.  Returns whether
 * it had been marked failed, so that the peer, told of that, hears of
 * its end again at once.
 */
static bool path_check_up(struct me_node *n, struct me_peer *p, u32 link, u64 now)
{
	struct me_path *pa = &p->path[link];
	bool was_failed = false;
	u64 seed;

	if (me_atomic_read(&pa->alive) || !link_up(n, link) ||
	    !fresh(n, &pa->last_rx_ns, now) || !fresh(n, &pa->heard_ns, now))
		return false;
	/*
	 * What it measured before it went down (or while dying) says
	 * nothing of it now: it starts at least at the best of its
	 * siblings' rates, or its NIC's speed if that is less, and samples
	 * taken while it is full bring it down if it is slower.
	 */
	seed = me_min_u64(max_rate(n, p), n->links[link].rate_init);
	if (me_atomic_cmpxchg(&pa->alive, 0, 1) == 0) {
		if (seed > me_atomic_read(&pa->rate))
			me_atomic_set(&pa->rate, (u32)seed);
		was_failed = me_atomic_xchg(&pa->failed, 0);
		/* Timers of packets on it run from now (window.c). */
		me_atomic64_set(&pa->acked_ns, now);
		me_cc_start(n, pa, now);
		me_atomic_set(&p->confirmed, 1);
		me_stat_inc(n, ME_ST_LINK_UP);
	}
	return was_failed;
}

/* A HELLO from link to addr, for node dst (ME_NODE_BCAST: everyone). */
static void send_hello(struct me_node *n, u32 link, u64 addr, u32 dst)
{
	u8 buf[ME_HDR_HELLO + ME_HELLO_NAME];
	struct me_hdr h;
	u32 len, name = 0;

	me_node_hdr(n, &h, ME_PT_HELLO, dst);
	h.h.link = link;
	while (name < ME_HELLO_NAME && n->cfg.name[name])
		name++;
	h.payload_len = (u16)name;
	len = me_wire_build(buf, &h);
	memcpy(buf + len, n->cfg.name, name);
	me_node_tx(n, link, addr, buf, len + name);
}

/* How long ago we last heard the peer on the path, for its keepalive. */
static u32 heard_age_us(struct me_path *pa, u64 now)
{
	u64 t = me_atomic64_read(&pa->last_rx_ns);
	u64 age;

	if (!t)
		return ME_KA_NEVER;
	age = me_div_u64(me_elapsed(now, t), 1000);
	return age >= ME_KA_NEVER ? ME_KA_NEVER : (u32)age;
}

#if ME_MAX_LINKS > ME_WIRE_LINKS
#error "a KEEPALIVE's down mask must name every link"
#endif

/* Our links whose path to the peer went down after it was alive. */
static u32 failed_links(struct me_peer *p)
{
	u32 l, mask = 0;

	for (l = 0; l < ME_MAX_LINKS; l++)
		if (me_atomic_read(&p->path[l].failed))
			mask |= 1u << l;
	return mask;
}

/*
 * The peer's last keepalive on the path: its stamp and when it reached
 * us, a pair written by receive threads and taken by whoever sends our
 * next keepalive.  The stamp is cleared while the pair changes and
 * taken by an exchange with its value read before the arrival, so a
 * taker never pairs one keepalive's stamp with another's arrival (two
 * written at once may mix arrivals microseconds apart).
 */
static void peer_stamp_set(struct me_path *pa, u64 stamp, u64 at)
{
	me_atomic64_set(&pa->peer_stamp, 0);
	me_atomic64_set(&pa->peer_stamp_ns, at);
	me_atomic64_set(&pa->peer_stamp, stamp);
}

/*
 * Each stamp is echoed once, by the first keepalive we send after it
 * came.  The peer takes the first answer to reach it as its sample: of
 * several answers crossing a jittery path the first to arrive is the
 * least delayed, and the path's noise (cc.c) read a tenth low.  The
 * first sent is any one of them.
 */
static u64 peer_stamp_take(struct me_path *pa, u64 *at)
{
	u64 s = me_atomic64_read(&pa->peer_stamp);

	*at = me_atomic64_read(&pa->peer_stamp_ns);
	return s && me_atomic64_cmpxchg(&pa->peer_stamp, s, 0) == s ? s : 0;
}

/*
 * Our keepalive stamped `now` leaves on the path: it takes the older of
 * the two slots (the tx count first, so a match never reads a stale one).
 */
static void ka_sent(struct me_path *pa, u64 now)
{
	u32 i = me_atomic_add_return(&pa->ka_seq, 1) % ME_KA_STAMPS;

	me_atomic64_set(&pa->ka_stamp[i], 0);
	me_atomic64_set(&pa->ka_tx[i], me_atomic_read(&pa->inflight) ? ~0ull :
			me_atomic64_read(&pa->tx_pkts));
	me_atomic64_set(&pa->ka_stamp[i], now);
}

/* Keepalives (wire.h flags): none; unanswered; answered at once; an answer. */
enum { KA_NONE, KA_BEACON, KA_PROBE, KA_REPLY };

/*
 * A keepalive of `kind`.  Each carries our clock, and echoes the peer's
 * newest keepalive, if no keepalive of ours echoed it yet, with how long
 * it waited here, so that the peer measures a round trip from it: a
 * reply answers the probe the peer just sent, and each end's beacon the
 * other's last.
 */
static void send_ka(struct me_node *n, struct me_peer *p, u32 link, u32 kind,
		    u64 now)
{
	struct me_path *pa = &p->path[link];
	u8 buf[ME_HDR_KA];
	struct me_hdr h;
	u64 echo, at;

	me_node_hdr(n, &h, ME_PT_KEEPALIVE, me_peer_id(n, p));
	h.dst_inc = me_atomic_read(&p->inc);
	h.h.link = link;
	h.h.heard_us = heard_age_us(pa, now);
	h.h.down = failed_links(p);
	h.h.stamp = now;
	echo = peer_stamp_take(pa, &at);
	if (echo && me_elapsed(now, at) <= 0xffffffffu) {
		h.h.echo = echo;
		h.h.hold = (u32)me_elapsed(now, at);
	}
	if (kind == KA_PROBE)
		h.flags = ME_F_ASK;
	else if (kind == KA_REPLY && h.h.echo)
		h.flags = ME_F_REPLY;
	ka_sent(pa, now);
	me_node_tx(n, link, me_atomic64_read(&pa->addr), buf, me_wire_build(buf, &h));
}

/*
 * Forget every path of a peer slot (new incarnation, slot reuse), and
 * how quickly we answered it (window.c).
 */
static void peer_reset_paths(struct me_node *n, struct me_peer *p)
{
	u32 l, i;

	me_atomic_set(&p->reply_mode, 0);
	if (me_atomic_xchg(&p->held_conn, 0))
		me_win_held_released(n);
	me_atomic64_set(&p->req_ns, 0);
	me_atomic64_set(&p->reply_ns, 0);

	for (l = 0; l < ME_MAX_LINKS; l++) {
		struct me_path *pa = &p->path[l];

		me_atomic_set(&pa->known, 0);
		me_atomic_set(&pa->alive, 0);
		me_atomic64_set(&pa->last_rx_ns, 0);
		me_atomic64_set(&pa->heard_ns, 0);
		me_atomic64_set(&pa->data_rx_ns, 0);
		for (i = 0; i < ME_KA_STAMPS; i++)
			me_atomic64_set(&pa->ka_stamp[i], 0);
		me_atomic64_set(&pa->peer_stamp, 0);
		me_atomic64_set(&pa->peer_stamp_ns, 0);
		me_atomic_set(&pa->rtt_us, 0);
		me_atomic_set(&pa->peer_link, ME_LINK_NONE);
		me_atomic_set(&pa->failed, 0);
		me_atomic_set(&pa->told, 0);
	}
}

/* Has the peer (its current incarnation) been silent on every link? */
static bool peer_silent(struct me_peer *p, u64 now, u64 quiet)
{
	u32 l;

	for (l = 0; l < ME_MAX_LINKS; l++) {
		u64 t = me_atomic64_read(&p->path[l].last_rx_ns);

		if (t && me_elapsed(now, t) <= quiet)
			return false;
	}
	return true;
}

/* Under peer_lock: a free slot, or the oldest never-confirmed idle peer. */
static struct me_peer *peer_take_slot(struct me_node *n, u32 id)
{
	u32 i, l, cnt = me_atomic_read(&n->npeers), victim = ME_NO_SLOT;
	struct me_peer *p;

	for (i = 0; i < cnt; i++)
		if (!me_atomic_read(&n->pids[i]))
			break;
	if (i == cnt && cnt < n->cfg.max_peers) {
		i = cnt;
	} else if (i == cnt) {
		for (i = 0; i < cnt; i++) {
			p = &n->peers[i];
			if (me_atomic_read(&p->confirmed) || me_atomic_read(&p->conns))
				continue;
			if (victim == ME_NO_SLOT ||
			    p->created_ns < n->peers[victim].created_ns)
				victim = i;
		}
		if (victim == ME_NO_SLOT)
			return NULL;
		i = victim;
		me_atomic_set(&n->pids[i], 0);
		me_stat_inc(n, ME_ST_PEER_EVICTED);
	}
	p = &n->peers[i];
	peer_reset_paths(n, p);
	for (l = 0; l < ME_MAX_LINKS; l++) {
		struct me_path *pa = &p->path[l];

		/* Nothing in flight: no connection held the slot. */
		me_atomic_set(&pa->inflight, 0);
		me_atomic64_set(&pa->acked_ns, 0);
		me_atomic64_set(&pa->tx_pkts, 0);
		me_atomic64_set(&pa->rx_pkts, 0);
		me_atomic64_set(&pa->tx_bytes, 0);
		me_atomic64_set(&pa->rx_bytes, 0);
		me_atomic64_set(&pa->lost_pkts, 0);
		me_atomic_set(&pa->rate, n->links[l].rate_init ? n->links[l].rate_init : 1250);
		me_atomic64_set(&pa->reo_ns, 0);
		me_atomic_set(&pa->reo_left, 0);
		me_cc_forget(pa, me_now(n));
	}
	me_atomic_set(&p->confirmed, 0);
	me_atomic_set(&p->conns, 0);
	/* The id last: lock-free readers find the slot only once it is set up. */
	me_atomic_set(&n->pids[i], id);
	if (i >= cnt)
		me_atomic_set(&n->npeers, i + 1);
	return p;
}

/*
 * A HELLO that validated.  Returns the peer and sets *fresh_path when the
 * (link, peer) path is new (so it is answered at once), or NULL when the
 * HELLO is not believed.
 */
static struct me_peer *hello_rx(struct me_node *n, u32 link, u64 addr,
				const struct me_hdr *h, bool *fresh_path,
				u32 *restarted)
{
	u64 now = h->now;
	struct me_peer *p;
	struct me_path *pa;
	u32 i;

	*fresh_path = false;
	*restarted = 0;
	me_lock(&n->peer_lock);
	p = me_peer_find(n, h->src_node);
	if (!p) {
		p = peer_take_slot(n, h->src_node);
		if (!p) {
			me_unlock(&n->peer_lock);
			me_stat_inc(n, ME_ST_PEER_TABLE_FULL);
			return NULL;
		}
		p->created_ns = now;
		me_atomic_set(&p->inc, h->src_inc);
	} else if (me_atomic_read(&p->inc) != h->src_inc) {
		if (!peer_silent(p, now, n->cfg.link_dead_ns)) {
			me_unlock(&n->peer_lock);
			me_stat_inc(n, ME_ST_RX_HELLO_HELD);
			return NULL;
		}
		/* A restart, believed: the old incarnation is gone. */
		peer_reset_paths(n, p);
		me_atomic_set(&p->inc, h->src_inc);
		*restarted = h->src_inc;
	}
	pa = &p->path[link];
	if (me_atomic_read(&pa->known) && me_atomic64_read(&pa->addr) != addr) {
		/* Another address for a path that still answers: not believed. */
		if (fresh(n, &pa->last_rx_ns, now)) {
			me_unlock(&n->peer_lock);
			me_stat_inc(n, ME_ST_RX_HELLO_HELD);
			return NULL;
		}
		me_atomic_set(&pa->alive, 0);
		me_atomic64_set(&pa->heard_ns, 0);
	}
	me_atomic64_set(&pa->addr, addr);
	if (!me_atomic_read(&pa->known)) {
		me_atomic_set(&pa->known, 1);
		*fresh_path = true;
	}
	for (i = 0; i < ME_HELLO_NAME; i++)
		p->name[i] = i < h->payload_len ? (char)h->payload[i] : '\0';
	me_unlock(&n->peer_lock);
	return p;
}

/*
 * Takes a path down; its packets in flight go again on the connections'
 * other paths.  With `tell` (we found it dead ourselves), the path is
 * marked failed and the peer hears of it at once on every path still
 * alive, so it stops sending here without waiting link_dead_ns for a
 * silence that, in a one-way failure, never comes (we still hear it).
 */
static void path_down(struct me_node *n, struct me_peer *p, u32 link, bool tell)
{
	u32 i, l, cnt = me_atomic_read(&n->nconns);
	u64 now;

	if (me_atomic_cmpxchg(&p->path[link].alive, 1, 0) != 1)
		return;
	me_stat_inc(n, ME_ST_LINK_DOWN);
	for (i = 0; i < cnt; i++) {
		struct me_conn *c = me_ptr_load((void **)&n->conns[i]);

		if (c && c->pe == p && me_conn_live(c))
			me_win_failover(c, link);
	}
	if (!tell)
		return;
	me_atomic_set(&p->path[link].failed, 1);
	now = me_max_u64(me_now(n), 1);
	for (l = 0; l < ME_MAX_LINKS; l++)
		if (me_path_usable(n, p, l))
			send_ka(n, p, l, KA_BEACON, now);
}

/*
 * The keepalive h answers ours on path pa (its echo is our stamp): its
 * delay, like a data packet's, is the round trip without the time ours
 * waited in the peer (its hold: a reply's is short, a probe's up to a
 * keepalive period or two) and h in our receive queue.  The exchange was
 * quiet when none of our data was in flight on the path when ours left
 * and none was sent until h came, and none of the peer's arrived
 * meanwhile: no queue of this traffic was in it, only the path's own
 * noise (cc.c).
 */
static void probe_rx(struct me_node *n, struct me_path *pa, const struct me_hdr *h,
		     u32 slot)
{
	u64 d = me_elapsed(me_hdr_arrival(h), h->h.echo);
	bool quiet = me_atomic64_read(&pa->ka_tx[slot]) == me_atomic64_read(&pa->tx_pkts) &&
		     me_atomic64_read(&pa->data_rx_ns) < h->h.echo;

	if (d <= h->h.hold)	/* a hold it cannot have had: no sample */
		return;
	me_atomic_set(&pa->rtt_us, (u32)me_max_u64(me_div_u64(d - h->h.hold, 1000), 1));
	me_cc_probe_rtt(n, pa, d - h->h.hold, quiet, h->now);
}

/*
 * A keepalive of the peer: it has its paths to us on the links of `down`
 * down (it stopped hearing us there, or cannot send there).  Our ends go
 * down too, without telling back: the peer knows.  A keepalive of the
 * peer on the path that says it hears us brings ours back.
 *
 * The peer says so in every keepalive until its end is alive again, and
 * the two ends of a revived path come alive a round trip or so apart:
 * the one that proves both directions first would be taken down again by
 * every keepalive the other sent before it did (and up again by the
 * next that says it hears us: a flap, its packets in flight sent again,
 * congestion control from the start; fault_test's revived link).  So a
 * failure is acted on once (told): the mark stays until the peer shows
 * its end usable, by a keepalive without the bit (it sends one as its
 * end comes back, me_path_rx()) or by its connections' frames on the
 * path, which it sends only on paths alive at its end.
 */
static void peer_down_mask(struct me_node *n, struct me_peer *p, u32 down)
{
	u32 l;

	for (l = 0; l < ME_MAX_LINKS; l++) {
		struct me_path *pa = &p->path[l];
		u32 pl = me_atomic_read(&pa->peer_link);

		if (pl >= ME_WIRE_LINKS)
			continue;
		if (!(down & (1u << pl))) {
			if (me_atomic_read(&pa->told))
				me_atomic_set(&pa->told, 0);
			continue;
		}
		if (me_atomic_xchg(&pa->told, 1) || !me_atomic_read(&pa->alive))
			continue;
		me_atomic64_set(&pa->heard_ns, 0);
		me_stat_inc(n, ME_ST_PATH_TOLD_DOWN);
		path_down(n, p, l, false);
	}
}

void me_path_rx(struct me_node *n, u32 link, u64 addr, const struct me_hdr *h,
		struct me_peer *p)
{
	bool fresh_path = false, untell;
	struct me_path *pa;
	u32 restarted = 0;
	u64 now;

	if (h->type == ME_PT_HELLO) {
		p = hello_rx(n, link, addr, h, &fresh_path, &restarted);
		if (!p)
			return;
		if (restarted) {
			me_stat_inc(n, ME_ST_PEER_RESTART);
			me_conn_peer_restarted(n, h->src_node, restarted);
		}
	} else if (!p) {
		p = me_peer_find(n, h->src_node);
	}
	if (!p || me_atomic_read(&p->inc) != h->src_inc)
		return;
	pa = &p->path[link];
	/* Liveness only from the address a HELLO taught. */
	if (!me_atomic_read(&pa->known) || me_atomic64_read(&pa->addr) != addr) {
		me_stat_inc(n, ME_ST_RX_ADDR);
		return;
	}
	now = me_max_u64(h->now, 1);	/* 0 means never */
	me_atomic64_set(&pa->last_rx_ns, now);
	me_atomic64_add_return(&pa->rx_pkts, 1);
	me_atomic64_add_return(&pa->rx_bytes, (u64)h->hdr_len + h->payload_len);
	if (me_pt_sequenced(h->type))
		me_atomic64_set(&pa->data_rx_ns, now);
	/* Sent only on paths alive at the peer's end (peer_down_mask()). */
	if ((me_pt_sequenced(h->type) || h->type == ME_PT_ACK || h->type == ME_PT_NACK) &&
	    me_atomic_read(&pa->told))
		me_atomic_set(&pa->told, 0);
	if ((h->type == ME_PT_HELLO || h->type == ME_PT_KEEPALIVE) &&
	    h->h.link < ME_WIRE_LINKS)
		me_atomic_set(&pa->peer_link, h->h.link);
	if (h->type == ME_PT_KEEPALIVE) {
		peer_down_mask(n, p, h->h.down);
		if (h->h.heard_us != ME_KA_NEVER &&
		    (u64)h->h.heard_us * 1000 <= n->cfg.link_dead_ns) {
			u64 t = me_max_u64(now - me_min_u64(now, (u64)h->h.heard_us * 1000), 1);

			if (t > me_atomic64_read(&pa->heard_ns))
				me_atomic64_set(&pa->heard_ns, t);
		}
		/*
		 * The echo is our own clock: only an answer to one of our
		 * last ME_KA_STAMPS keepalives, once each (a forged or
		 * repeated one would feed the round trip and the noise,
		 * cc.c).  A reply answers our probe, a beacon or probe one
		 * of our keepalives its sender had not answered yet.
		 */
		if (h->h.echo && h->h.echo <= now && now - h->h.echo < 10000000000ull) {
			u32 i;

			for (i = 0; i < ME_KA_STAMPS; i++) {
				if (me_atomic64_cmpxchg(&pa->ka_stamp[i], h->h.echo, 0) ==
				    h->h.echo) {
					probe_rx(n, pa, h, i);
					break;
				}
			}
		}
		peer_stamp_set(pa, h->h.stamp, me_hdr_arrival(h));
	}
	untell = path_check_up(n, p, link, now);
	/*
	 * Not on a link down at our end: an answer there would tell the
	 * peer we hear it, and bring its end alive, on a link we do not use.
	 */
	if (!link_up(n, link))
		return;
	/* Our keepalives told the peer it failed: this one says it is back. */
	if (h->type == ME_PT_KEEPALIVE && (h->flags & ME_F_ASK))
		send_ka(n, p, link, KA_REPLY, now);
	else if (untell)
		send_ka(n, p, link, KA_BEACON, now);
	if (fresh_path) {
		send_hello(n, link, addr, h->src_node);
		send_ka(n, p, link, KA_PROBE, now);
	}
}

/*
 * The bytes a path may have in flight: link_window for the fastest usable
 * path to the peer, proportionally less for slower ones, so that every
 * path's queue drains in about the same time.  Equal queueing delays keep
 * the reordering between links (and so the receiver's reorder span) and
 * the spread of round-trip times small; a slow link with a full
 * link_window would hold packets several times longer than a fast one.
 * The congestion window, when smaller, rules; at least one MTU, so that
 * every path can carry a packet.
 */
static u64 rate_share(struct me_node *n, u64 rate, u64 maxrate)
{
	return me_div_u64((u64)n->cfg.link_window * rate, (u32)maxrate);
}

static u64 link_cap(struct me_node *n, struct me_path *pa, u64 rate, u64 maxrate)
{
	u64 cap = me_min_u64(rate_share(n, rate, maxrate), me_cc_window(n, pa));

	return me_max_u64(cap, n->cfg.mtu);
}

/* Nanoseconds len bytes take at the path's pacing rate; 0: not paced. */
static u64 pace_gap(struct me_node *n, struct me_path *pa, u64 cap, u32 len)
{
	u64 base = me_cc_base(pa);

	if (!n->cfg.pace_pct || !base)
		return 0;
	/* len * base / (cap * pct / 100): len <= 2^22, base taken <= 2^34 ns. */
	return me_div64_u64((u64)len * me_min_u64(base, 1ull << 34) * 100,
			    cap * n->cfg.pace_pct);
}

int me_path_pick(struct me_node *n, struct me_peer *p, u32 len, bool force, u64 *paced)
{
	u64 best_infl = 0, best_rate = 1, maxrate = force ? 1 : max_rate(n, p);
	u64 now = !force && n->cfg.pace_pct ? me_now(n) : 0, soonest = 0;
	u32 i, hi = me_atomic_read(&n->links_hi);
	int best = -1;

	for (i = 0; i < hi; i++) {
		u64 infl, rate, at;

		if (!me_path_usable(n, p, i))
			continue;
		infl = me_atomic_read(&p->path[i].inflight);
		rate = me_atomic_read(&p->path[i].rate);
		if (!force && infl + len > link_cap(n, &p->path[i], rate, maxrate))
			continue;
		at = now ? me_atomic64_read(&p->path[i].pace_ns) : 0;
		if (now < at) {
			if (!soonest || at < soonest)
				soonest = at;
			continue;
		}
		/* (infl+len)/rate < (best_infl+len)/best_rate */
		if (best < 0 || (infl + len) * best_rate <
				(best_infl + len) * rate) {
			best = (int)i;
			best_infl = infl;
			best_rate = rate;
		}
	}
	if (paced)
		*paced = best < 0 ? soonest : 0;
	return best;
}

void me_path_sent(struct me_node *n, struct me_peer *p, u32 link, u32 len, bool idle,
		  u64 now)
{
	struct me_path *pa = &p->path[link];
	u64 cap, gap, burst, from, at, old;

	if (idle)
		me_cc_idle(n, pa, me_atomic64_read(&pa->quiet_ns), now);
	me_atomic64_set(&pa->quiet_ns, now);
	if (!n->cfg.pace_pct)
		return;
	cap = link_cap(n, pa, me_atomic_read(&pa->rate), max_rate(n, p));
	gap = pace_gap(n, pa, cap, len);
	if (!gap)
		return;
	/* An idle path's next pace_burst bytes may leave at once. */
	burst = pace_gap(n, pa, cap, n->cfg.pace_burst);
	from = now - me_min_u64(burst > gap ? burst - gap : 0, now);
	/* Pumps of several connections may send on the path at once. */
	old = me_atomic64_read(&pa->pace_ns);
	for (;;) {
		at = me_max_u64(old, from) + gap;
		at = me_atomic64_cmpxchg(&pa->pace_ns, old, at);
		if (at == old)
			break;
		old = at;
	}
}

bool me_path_edge(struct me_node *n, struct me_peer *p, u32 link, u32 len)
{
	struct me_path *pa = &p->path[link];
	u64 infl = me_atomic_read(&pa->inflight);
	u32 w = me_cc_window(n, pa);

	/* A window of ack_every packets or more is acked without asking. */
	if (w >= (u64)n->cfg.ack_every * n->cfg.mtu)
		return false;
	return infl + len + n->cfg.mtu > w;
}

int me_path_any(struct me_node *n, struct me_peer *p)
{
	return me_path_pick(n, p, 0, true, NULL);
}

u32 me_path_next_txno(struct me_peer *p, u32 link, u32 len)
{
	me_atomic64_add_return(&p->path[link].tx_pkts, 1);
	me_atomic64_add_return(&p->path[link].tx_bytes, len);
	return me_atomic_add_return(&p->path[link].txno, 1) & ME_TXNO_MASK;
}

static bool txno_lt(u32 a, u32 b)
{
	return ((b - a) & ME_TXNO_MASK) - 1 < (ME_TXNO_MASK >> 1);
}

void me_path_acked(struct me_peer *p, u32 link, u32 txno, u32 bytes,
		   bool fifo, u64 now)
{
	struct me_path *pa = &p->path[link];
	u32 cur = me_atomic_read(&pa->acked_txno);

	/* Emptied: idle from now to its next packet (cc.c me_cc_idle()). */
	if (!me_atomic_add_return(&pa->inflight, -bytes))
		me_atomic64_set(&pa->quiet_ns, now);
	me_atomic64_add_return(&pa->delivered, bytes);
	/*
	 * Only an ack that is known to be for this very transmission tells
	 * us that everything sent before it on this path has arrived or is
	 * lost (and that the peer hears us here).  For a retransmitted
	 * packet the ack may be for an earlier copy on another link while
	 * this copy still waits in this link's queue; taking its txno would
	 * declare that queue lost.
	 */
	if (!fifo)
		return;
	me_atomic64_set(&pa->heard_ns, now);
	while (txno_lt(cur, txno)) {
		u32 old = me_atomic_cmpxchg(&pa->acked_txno, cur, txno);

		if (old == cur) {
			me_atomic64_set(&pa->acked_ns, now);
			break;
		}
		cur = old;
	}
}

/*
 * An ack's hold is the time since the arrival of the newest packet it
 * answers, and it leaves on that packet's link (window.c).  Packets of
 * another path it acks arrived earlier and waited longer than the hold
 * says, for a trigger on that link: as a delay, that wait looked like a
 * queue in the fabric and shrank their path's window.  The path with the
 * fewest packets is the one whose packets wait so most often: a path
 * that came back after a cut stayed small (simulator, a receiving CPU
 * both paths share: 6% of the second 2 MiB after it came back; guests
 * over veth: a tenth of its sibling's share).  Such paths get no delay
 * sample from the ack (cc.c).
 */
void me_path_ack_done(struct me_node *n, struct me_peer *p, u32 link,
		      u32 bytes, u64 rtt_ns, u64 hosts_ns, bool timed, u64 now)
{
	/* 0, no sample, rather than a delay of nothing if they disagree. */
	u64 delay = timed && rtt_ns > hosts_ns ? rtt_ns - hosts_ns : 0;

	me_cc_acked(n, &p->path[link], bytes, rtt_ns, delay, now);
}

/*
 * A widened reordering window holds for this many loss rounds of its path
 * with no report of a needless resend (RFC 8985 keeps its raise for 16
 * recoveries).  Not for a time: a path that reorders all the time (a
 * veth, whose frames queue on the sending CPUs) reports nothing while the
 * window is wide enough, and a window that lapsed after a second cost it
 * a burst of needless resends and a cut every second.
 */
#define REO_PERSIST	16

u64 me_path_reorder(struct me_node *n, struct me_peer *p, u32 link, u64 srtt)
{
	struct me_path *pa = &p->path[link];
	u64 extra = me_atomic64_read(&pa->reo_ns);

	if (!extra)
		return n->cfg.reorder_ns;
	return me_max_u64(n->cfg.reorder_ns, srtt + extra);
}

/* The round trip the window's allowance and its rounds are measured in. */
static u64 reorder_rtt(struct me_path *pa, u64 srtt)
{
	return me_max_u64(me_atomic64_read(&pa->cc_rtt_ns), srtt);
}

/*
 * The peer got a packet twice: if loss detection resent it, a packet
 * can arrive later than the ones sent after it by more than the rule
 * waits.  The wait beyond a round trip starts at a quarter of it
 * (RACK's reo_wnd) and doubles with every further report, up to a round
 * trip (the path's last sample or the connection's srtt, the larger;
 * beyond that a loss would wait about as long as a timeout).  The report
 * names no packet, so every path to the peer takes it.
 */
static void reorder_widen(struct me_path *pa, u64 srtt, u64 now)
{
	u64 rtt = reorder_rtt(pa, srtt);
	u64 extra = me_atomic64_read(&pa->reo_ns);

	if (!rtt)
		return;
	extra = extra ? me_min_u64(2 * extra, rtt) : me_max_u64(rtt / 4, 1);
	/* The rounds first: a window seen wide has its rounds (spend). */
	me_atomic_set(&pa->reo_left, REO_PERSIST);
	me_atomic64_set(&pa->reo_ns, extra);
	me_atomic64_set(&pa->reo_at, now);
}

/*
 * A packet of the path was resent (loss detection, or the timer: while
 * the window is wide a round's losses often wait for it): one loss round
 * of the widened window's REO_PERSIST (at most one per round trip, the
 * one caller that moves reo_at counts it), the last of which brings the
 * configured rule back.  A report widening the window just as its last
 * round lapses may be lost with it; the next report widens it again.
 */
void me_path_reorder_spend(struct me_peer *p, u32 link, u64 srtt, u64 now)
{
	struct me_path *pa = &p->path[link];
	u64 at = me_atomic64_read(&pa->reo_at);
	u32 left;

	if (!me_atomic64_read(&pa->reo_ns) || me_elapsed(now, at) < reorder_rtt(pa, srtt) ||
	    me_atomic64_cmpxchg(&pa->reo_at, at, now) != at)
		return;
	left = me_atomic_read(&pa->reo_left);
	if (left <= 1)
		me_atomic64_set(&pa->reo_ns, 0);
	if (left)
		me_atomic_cmpxchg(&pa->reo_left, left, left - 1);
}

void me_path_spurious(struct me_node *n, struct me_peer *p, u64 srtt, u64 now)
{
	u32 l;

	for (l = 0; l < ME_MAX_LINKS; l++)
		if (me_atomic_read(&p->path[l].known)) {
			me_cc_spurious(n, &p->path[l], now);
			reorder_widen(&p->path[l], srtt, now);
		}
}

u64 me_path_acked_ns(struct me_peer *p, u32 link)
{
	return me_atomic64_read(&p->path[link].acked_ns);
}

/*
 * dupthresh later packets of the path acked, or as many as its window
 * holds when that is fewer (RFC 5827's early retransmit: a window of
 * two packets never sees sixteen acked behind a hole).  Callers also
 * require the packet to be reorder_ns old.
 */
bool me_path_lost(struct me_node *n, struct me_peer *p, u32 link, u32 txno)
{
	struct me_path *pa = &p->path[link];
	u32 acked = me_atomic_read(&pa->acked_txno);
	u32 thresh = me_min_u32(n->cfg.dupthresh, me_cc_window(n, pa) / n->cfg.mtu);

	return txno_lt(txno + me_max_u32(thresh, 1) - 1, acked);
}

void me_path_suspect(struct me_node *n, struct me_peer *p, u32 link, u64 since)
{
	struct me_path *pa = &p->path[link];
	u32 l;

	/*
	 * Only when another path to the peer delivered since this one last
	 * did: then this path fails, not the peer or the whole network being
	 * slow (an overloaded receiver, queues everywhere), which taking
	 * paths down would only make worse by sending their packets again.
	 */
	for (l = 0; l < ME_MAX_LINKS; l++)
		if (l != link && me_path_usable(n, p, l) &&
		    me_atomic64_read(&p->path[l].acked_ns) > since)
			break;
	if (l == ME_MAX_LINKS)
		return;

	me_atomic64_set(&pa->heard_ns, 0);
	pa->last_ka_ns = 0;	/* probe at the next scan */
	me_stat_inc(n, ME_ST_PATH_STALLED);
	path_down(n, p, link, true);
}

/*
 * The delivery rate of a path, sampled over rate_ns while it is kept
 * full.  Full by its share of link_window (rate_share), a sample is what
 * the path can carry, and the estimate follows it, if that share let it
 * carry its estimate for a round trip.  Full by its congestion window
 * (slow start after it came back, a congested path), or by a share
 * smaller than that, a sample is that window or share per round trip, a
 * lower bound: it may raise the estimate, never lower it.  Returns
 * whether the path is kept full now.  Taken as a
 * measure, a revived path's first round trips (two packets of window)
 * dragged its estimate to a tenth of its sibling's, and the share and
 * choice that follow the estimate kept it there (guests: 0.5-1 MB of 16
 * MiB on the revived link); and beside a sibling whose estimate times the
 * round trip exceeds link_window (one never measured, at its NIC's
 * speed) each sample of a path held by its share fell below the estimate
 * that share came from, down to nothing (guests: 8 Mbit/s beside 10
 * Gbit/s, benchmarks.md 2026-12-03, fortieth).
 */
static bool rate_update(struct me_node *n, struct me_path *pa, u64 now,
			u64 maxrate)
{
	u64 d = me_atomic64_read(&pa->delivered);
	u32 old = me_atomic_read(&pa->rate);
	u64 share = rate_share(n, old, maxrate);
	u64 cap = link_cap(n, pa, old, maxrate);
	bool busy = me_atomic_read(&pa->inflight) >= cap / 2;
	bool by_cwnd = me_cc_window(n, pa) < share;
	u64 dt = now - pa->rate_t0;

	if (dt < n->cfg.rate_ns)
		return busy;
	if (busy && pa->rate_busy && dt < 0xffffffffull) {
		u64 sample = me_div_u64((d - pa->rate_d0) * 1000, (u32)dt);
		u64 rtt = me_min_u64(me_atomic64_read(&pa->cc_rtt_ns), 1ull << 34);
		/* rate is bytes per microsecond: the estimate's bytes per round trip */
		bool shows = !rtt || share >= me_div_u64((u64)old * rtt, 1000);

		if (sample && (sample > old || (!by_cwnd && !pa->rate_cwnd && shows)))
			me_atomic_set(&pa->rate,
				      (u32)me_max_u64((3ull * old + sample) / 4, 1));
	}
	pa->rate_t0 = now;
	pa->rate_d0 = d;
	pa->rate_busy = busy;
	pa->rate_cwnd = by_cwnd;
	return busy;
}

/*
 * How often the timer visits every path: a fraction of the keepalive and
 * death times (their resolution), at most 1 ms, so that a table of
 * hundreds of peers is not walked every tick.
 */
static u64 scan_period(struct me_node *n)
{
	return me_min_u64(me_min_u64(n->cfg.ka_ns, n->cfg.link_dead_ns) / 4, 1000000);
}

/*
 * Which keepalive the path needs now, if any (KA_NONE).  A path quiet in
 * either direction for ka_ns gets one every ka_ns from each end: a beacon
 * while it is alive and both directions were proven within 2 ka_ns (the
 * peer's beacons do that), else a probe the peer answers at once (a path
 * down, or a peer that sends none because our traffic keeps its side
 * fresh).
 */
static u32 ka_due(struct me_node *n, struct me_path *pa, u64 now)
{
	u64 rx = me_elapsed(now, me_atomic64_read(&pa->last_rx_ns));
	u64 heard = me_elapsed(now, me_atomic64_read(&pa->heard_ns));
	u64 ka = n->cfg.ka_ns;

	if ((rx < ka && heard < ka) || me_elapsed(now, pa->last_ka_ns) < ka)
		return KA_NONE;
	return me_atomic_read(&pa->alive) && rx < 2 * ka && heard < 2 * ka ?
	       KA_BEACON : KA_PROBE;
}

/* Returns whether the path is kept full (rate_update()). */
static bool path_timer(struct me_node *n, struct me_peer *p, u32 link, u64 now,
		       u64 maxrate)
{
	struct me_path *pa = &p->path[link];
	u32 kind;

	if (!me_atomic_read(&pa->known))
		return false;
	if (!link_up(n, link)) {
		path_down(n, p, link, true);
		return false;
	}
	if (me_atomic_read(&pa->alive) &&
	    (!fresh(n, &pa->last_rx_ns, now) || !fresh(n, &pa->heard_ns, now)))
		path_down(n, p, link, true);
	kind = ka_due(n, pa, now);
	if (kind != KA_NONE) {
		pa->last_ka_ns = now;
		send_ka(n, p, link, kind, now);
	}
	return rate_update(n, pa, now, maxrate);
}

/*
 * When a known path next needs the timer: its keepalive (ka_due(): the
 * older of its two directions a ka_ns old, and ka_ns since its last)
 * or, alive, its death (path_timer(): that direction link_dead_ns old).
 */
static u64 path_due(struct me_node *n, struct me_path *pa)
{
	u64 quiet = me_min_u64(me_atomic64_read(&pa->last_rx_ns),
			       me_atomic64_read(&pa->heard_ns));
	u64 due = me_max_u64(quiet, pa->last_ka_ns) + n->cfg.ka_ns;

	if (me_atomic_read(&pa->alive))
		due = me_min_u64(due, quiet + n->cfg.link_dead_ns + 1);
	return due;
}

/* Under peer_lock: a peer nobody needs and nothing heard of for long. */
static void peer_maybe_forget(struct me_node *n, u32 slot, u64 now)
{
	struct me_peer *p = &n->peers[slot];

	me_lock(&n->peer_lock);
	if (me_atomic_read(&n->pids[slot]) && !me_atomic_read(&p->conns) &&
	    me_elapsed(now, p->created_ns) > n->cfg.peer_dead_ns &&
	    peer_silent(p, now, n->cfg.peer_dead_ns)) {
		me_atomic_set(&n->pids[slot], 0);
		me_stat_inc(n, ME_ST_PEER_FORGOTTEN);
	}
	me_unlock(&n->peer_lock);
}

/*
 * The next time the paths need the timer, from the last scan: their
 * deadlines, each served by the first pass at or after it, but no pass
 * sooner than a quarter of the keepalive and death times after the scan
 * (the resolution they always had), so that the deadlines of many paths
 * share passes.  An idle node with one neighbour passes once per
 * keepalive, not four times.  The least of them is recomputed at each
 * scan only: a path heard since moved its own later.  A path kept full
 * needs the scan when its delivery rate is next sampled (rate_update()),
 * every rate_ns: a scan between two samples only finds it full.
 */
static u64 paths_due(struct me_node *n, u64 hello)
{
	u64 due = me_min_u64(n->paths_due_ns, hello);
	u64 slack = me_min_u64(n->cfg.ka_ns, n->cfg.link_dead_ns) / 4;

	due = me_max_u64(due, n->last_scan_ns + slack);
	if (n->rate_due_ns != ME_NEVER)
		due = me_min_u64(due, me_max_u64(n->rate_due_ns,
						  n->last_scan_ns + scan_period(n)));
	return due;
}

u64 me_path_timer(struct me_node *n, u64 now)
{
	u64 hello = ME_NEVER, rate_next = ME_NEVER;
	bool full = false;
	u32 i, l, cnt;

	for (l = 0; l < ME_MAX_LINKS; l++) {
		struct me_link *k = &n->links[l];

		if (!k->present || !me_atomic_read(&k->admin_up))
			continue;
		if (now - k->last_hello_ns >= n->cfg.hello_ns) {
			k->last_hello_ns = now;
			send_hello(n, l, ME_ADDR_BCAST, ME_NODE_BCAST);
		}
		hello = me_min_u64(hello, k->last_hello_ns + n->cfg.hello_ns);
	}
	if (me_elapsed(now, n->last_scan_ns) < scan_period(n))
		return paths_due(n, hello);
	n->last_scan_ns = now;
	n->paths_due_ns = ME_NEVER;
	n->rate_due_ns = ME_NEVER;
	cnt = me_atomic_read(&n->npeers);
	for (i = 0; i < cnt; i++) {
		struct me_peer *p = &n->peers[i];
		u64 maxrate;

		if (!me_atomic_read(&n->pids[i]))
			continue;
		maxrate = max_rate(n, p);
		for (l = 0; l < ME_MAX_LINKS; l++) {
			if (!n->links[l].present)
				continue;
			if (path_timer(n, p, l, now, maxrate))
				full = true;
			if (me_atomic_read(&p->path[l].known) && link_up(n, l)) {
				n->paths_due_ns = me_min_u64(n->paths_due_ns,
							     path_due(n, &p->path[l]));
				rate_next = me_min_u64(rate_next, p->path[l].rate_t0 +
						       n->cfg.rate_ns);
			}
		}
		if (!me_atomic_read(&p->conns))
			peer_maybe_forget(n, i, now);
	}
	/*
	 * While one is kept full, every path's next sample: one that
	 * fills up meanwhile (a link come back) is sampled then.
	 */
	if (full)
		n->rate_due_ns = rate_next;
	return paths_due(n, hello);
}

/* ---- links ---- */

int me_link_add(struct me_node *n, u32 idx, u32 mtu, u32 rate_mbps)
{
	struct me_link *l;
	u32 i, cnt, rate;

	if (idx >= ME_MAX_LINKS || mtu < n->cfg.mtu)
		return -EINVAL;
	l = &n->links[idx];
	if (l->present && !me_atomic_read(&l->deleted))
		return -EEXIST;
	rate = rate_mbps ? me_max_u32(rate_mbps / 8, 1) : 1250;
	/* A slot taken again starts without neighbours; inflight stays balanced. */
	cnt = me_atomic_read(&n->npeers);
	for (i = 0; i < cnt; i++) {
		struct me_path *pa = &n->peers[i].path[idx];

		me_atomic_set(&pa->known, 0);
		me_atomic_set(&pa->alive, 0);
		me_atomic64_set(&pa->last_rx_ns, 0);
		me_atomic64_set(&pa->heard_ns, 0);
		me_atomic_set(&pa->peer_link, ME_LINK_NONE);
		me_atomic_set(&pa->failed, 0);
		me_atomic_set(&pa->told, 0);
		me_atomic_set(&pa->rate, rate);
	}
	l->rate_init = rate;
	me_atomic_set(&l->deleted, 0);
	l->mtu = mtu;
	me_atomic_set(&l->admin_up, 1);
	l->present = true;
	/* A scan that misses a slot still being added only skips it once. */
	if (idx >= me_atomic_read(&n->links_hi))
		me_atomic_set(&n->links_hi, idx + 1);
	me_node_busy(n);	/* its first HELLO: an idle timer sleeps long */
	return 0;
}

void me_link_set_admin(struct me_node *n, u32 idx, bool up)
{
	if (idx < ME_MAX_LINKS && n->links[idx].present &&
	    !me_atomic_read(&n->links[idx].deleted)) {
		me_atomic_set(&n->links[idx].admin_up, up);
		me_node_busy(n);	/* the timer takes its paths down or up */
	}
}

void me_link_del(struct me_node *n, u32 idx)
{
	if (idx >= ME_MAX_LINKS || !n->links[idx].present)
		return;
	me_atomic_set(&n->links[idx].deleted, 1);
	/* The timer takes its paths down and moves their packets elsewhere. */
	me_atomic_set(&n->links[idx].admin_up, 0);
	me_node_busy(n);
}

void me_link_counts(struct me_node *n, u32 idx, u32 *nbrs, u32 *alive, u32 *only)
{
	u32 i, id, cnt = me_atomic_read(&n->npeers);

	*nbrs = 0;
	*alive = 0;
	*only = 0;
	if (idx >= ME_MAX_LINKS || !n->links[idx].present)
		return;
	for (i = 0; i < cnt; i++) {
		id = me_atomic_read(&n->pids[i]);
		if (!id || !me_atomic_read(&n->peers[i].path[idx].known))
			continue;
		*only = ++(*nbrs) == 1 ? id : 0;
		if (me_path_usable(n, &n->peers[i], idx))
			(*alive)++;
	}
}

int me_link_alive(struct me_node *n, u32 idx)
{
	u32 nbrs, alive, only;

	me_link_counts(n, idx, &nbrs, &alive, &only);
	return alive > 0;
}

u32 me_link_rate(struct me_node *n, u32 idx)
{
	u32 i, r = 0, cnt = me_atomic_read(&n->npeers);

	if (idx >= ME_MAX_LINKS || !n->links[idx].present)
		return 0;
	for (i = 0; i < cnt; i++)
		if (me_atomic_read(&n->pids[i]) && me_path_usable(n, &n->peers[i], idx))
			r = me_max_u32(r, me_atomic_read(&n->peers[i].path[idx].rate));
	return r ? r : n->links[idx].rate_init;
}

/* ---- introspection ---- */

u32 me_node_npeers(struct me_node *n)
{
	return me_atomic_read(&n->npeers);
}

static void peer_info(struct me_node *n, struct me_peer *p, u32 id,
		      struct me_peer_info_core *out)
{
	u32 l;

	memset(out, 0, sizeof(*out));
	out->node = id;
	out->inc = me_atomic_read(&p->inc);
	out->conns = me_atomic_read(&p->conns);
	for (l = 0; l < ME_MAX_LINKS; l++) {
		if (!n->links[l].present || !me_atomic_read(&p->path[l].known))
			continue;
		out->links |= 1u << l;
		if (me_path_usable(n, p, l))
			out->alive_links |= 1u << l;
	}
	me_lock(&n->peer_lock);
	memcpy(out->name, p->name, sizeof(out->name));
	me_unlock(&n->peer_lock);
	out->name[sizeof(out->name) - 1] = '\0';
}

bool me_node_peer_at(struct me_node *n, u32 slot, struct me_peer_info_core *out)
{
	u32 id;

	if (slot >= me_atomic_read(&n->npeers))
		return false;
	id = me_atomic_read(&n->pids[slot]);
	if (!id)
		return false;
	peer_info(n, &n->peers[slot], id, out);
	return true;
}

bool me_node_peer(struct me_node *n, u32 id, struct me_peer_info_core *out)
{
	struct me_peer *p = me_peer_find(n, id);

	if (!p)
		return false;
	peer_info(n, p, id, out);
	return true;
}

u32 me_peer_alive_links(struct me_node *n, u32 id)
{
	struct me_peer_info_core pi;

	return me_node_peer(n, id, &pi) ? pi.alive_links : 0;
}

static u32 us_of(u64 ns)
{
	return (u32)me_min_u64(me_div_u64(ns, 1000), 0xffffffffu);
}

bool me_node_path_at(struct me_node *n, u32 slot, u32 link,
		     struct me_path_info_core *out)
{
	struct me_peer *p;
	struct me_path *pa;
	u64 now, rx, base;
	u32 id;

	if (slot >= me_atomic_read(&n->npeers) || link >= ME_MAX_LINKS ||
	    !n->links[link].present)
		return false;
	id = me_atomic_read(&n->pids[slot]);
	p = &n->peers[slot];
	pa = &p->path[link];
	if (!id || !me_atomic_read(&pa->known))
		return false;
	now = me_now(n);
	memset(out, 0, sizeof(*out));
	out->link = link;
	out->node = id;
	out->inc = me_atomic_read(&p->inc);
	out->addr = me_atomic64_read(&pa->addr);
	if (me_path_usable(n, p, link))
		out->flags |= ME_PATH_ALIVE;
	if (fresh(n, &pa->last_rx_ns, now))
		out->flags |= ME_PATH_RX;
	if (fresh(n, &pa->heard_ns, now))
		out->flags |= ME_PATH_HEARD;
	out->rtt_us = me_atomic_read(&pa->rtt_us);
	out->rate = me_atomic_read(&pa->rate);
	out->inflight = me_atomic_read(&pa->inflight);
	out->cwnd = me_cc_window(n, pa);
	out->data_rtt_us = us_of(me_atomic64_read(&pa->cc_rtt_ns));
	out->data_delay_us = us_of(me_atomic64_read(&pa->cc_delay_ns));
	base = me_cc_base(pa);
	out->base_us = us_of(base);
	out->target_us = n->cfg.cc ? us_of(me_cc_target(n, pa, base)) : 0;
	out->noise_us = us_of(me_atomic64_read(&pa->noise_ns));
	rx = me_atomic64_read(&pa->last_rx_ns);
	out->rx_age_ns = rx ? me_elapsed(now, rx) : ~0ull;
	out->tx_pkts = me_atomic64_read(&pa->tx_pkts);
	out->rx_pkts = me_atomic64_read(&pa->rx_pkts);
	out->tx_bytes = me_atomic64_read(&pa->tx_bytes);
	out->rx_bytes = me_atomic64_read(&pa->rx_bytes);
	out->lost_pkts = me_atomic64_read(&pa->lost_pkts);
	return true;
}
