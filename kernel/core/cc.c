// SPDX-License-Identifier: GPL-2.0
/*
 * cc.c - congestion control: one window per (link, peer) path, driven by
 * delay, in the manner of Google's Swift.
 *
 * Every acknowledgement gives a round-trip sample per path it acks: the
 * smallest time from transmission to this ack among the packets it
 * covers that were sent once (Karn), which is the newest of them, so the
 * receiver's ack coalescing adds little.  The path's base RTT is the
 * smallest sample of the last one or two periods of ME_CC_BASE_NS, data
 * and keepalive round trips alike (keepalives are exchanged while the
 * path is idle, so they see the fabric without our own queues).  The
 * target is cc_target_ns, one figure for every path of the fabric as in
 * Swift, so that flows meeting at one bottleneck aim at the same delay
 * and share it fairly whatever they measured before; only where the base
 * itself reaches it (an emulated or distant link, a target set too low)
 * the target is 3/2 of the base instead.  Below the target the window
 * grows: by the bytes acked while under ssthresh or while the sample is
 * nearer the base than the target, else by one MTU per window of bytes
 * acked.  Above it, it shrinks at most once per round trip, in
 * proportion to how far above the target the sample is:
 *
 *	cwnd *= max(1 - beta * (rtt - target) / rtt, 1 - max_mdf)
 *
 * with beta = 0.8 and max_mdf = 0.5.  A packet found lost halves the
 * window (once per round trip).  A retransmission timeout on a path that
 * lost packets within the last ME_CC_LOSS_RTTS round trips (congestion:
 * a queue overflowed) drops it to one MTU.  On a path that lost nothing
 * it halves it, and only the ME_CC_RTO_RESET-th timeout in a row without
 * an ack drops it to one MTU (Swift's RETX_RESET_THRESHOLD): a receiver
 * that pauses past the RTO (its receive thread waiting for a CPU on a
 * busy host) makes every packet in flight time out at once, and
 * collapsing the window for each such pause kept it far below the path's
 * capacity; a path that has really stopped still reaches one MTU within
 * three timeouts (the RTO doubles between them).  The
 * window stays within [MTU, link_window]; path selection (path.c) sends
 * on a path only while its bytes in flight fit in the window.
 *
 * The updates race between receive threads: each is a single
 * compare-and-exchange from the value it read, and one that loses the
 * race is dropped (another update of the same window just happened).
 */
#include "cc.h"
#include "node.h"
#include "path.h"

#define ME_CC_BASE_NS	(10ull * 1000 * 1000 * 1000)	/* base RTT period */
#define ME_CC_BETA	819	/* 0.8 in 1/1024 */
#define ME_CC_MAX_MDF	512	/* at most halve per round trip, 1/1024 */
#define ME_CC_RTO_RESET	3	/* timeouts in a row that reset the window */
#define ME_CC_LOSS_RTTS	64	/* a loss this recent makes a timeout congestion */

static u32 cc_min(struct me_node *n)
{
	return n->cfg.mtu;
}

static u32 cc_max(struct me_node *n)
{
	return n->cfg.link_window;
}

void me_cc_start(struct me_node *n, struct me_path *pa, u64 now)
{
	u32 init = me_max_u32(me_min_u32(n->cfg.cc_init, cc_max(n)), cc_min(n));

	(void)now;
	me_atomic_set(&pa->cwnd, init);
	me_atomic_set(&pa->ssthresh, cc_max(n));
	me_atomic64_set(&pa->cc_dec_ns, 0);
	me_atomic64_set(&pa->cc_loss_ns, 0);
	me_atomic_set(&pa->rto_run, 0);
}

void me_cc_forget(struct me_path *pa, u64 now)
{
	me_atomic64_set(&pa->base_ns, 0);
	me_atomic64_set(&pa->base_next_ns, 0);
	me_atomic64_set(&pa->base_t0, now);
	me_atomic64_set(&pa->cc_rtt_ns, 0);
}

u32 me_cc_window(struct me_node *n, struct me_path *pa)
{
	if (!n->cfg.cc)
		return cc_max(n);
	return me_max_u32(me_atomic_read(&pa->cwnd), cc_min(n));
}

/* The windowed minimum: this period's and the previous one's. */
static u64 base_rtt(struct me_path *pa, u64 rtt, u64 now)
{
	u64 t0 = me_atomic64_read(&pa->base_t0);
	u64 cur = me_atomic64_read(&pa->base_next_ns);
	u64 prev = me_atomic64_read(&pa->base_ns);

	if (me_elapsed(now, t0) >= ME_CC_BASE_NS &&
	    me_atomic64_cmpxchg(&pa->base_t0, t0, now) == t0) {
		/* A new period: the one that ended becomes the previous. */
		me_atomic64_set(&pa->base_ns, cur ? cur : rtt);
		me_atomic64_set(&pa->base_next_ns, rtt);
		prev = cur ? cur : rtt;
		cur = rtt;
	} else if (!cur || rtt < cur) {
		me_atomic64_set(&pa->base_next_ns, rtt);
		cur = rtt;
	}
	return prev && prev < cur ? prev : cur;
}

static bool may_decrease(struct me_path *pa, u64 rtt, u64 now)
{
	u64 last = me_atomic64_read(&pa->cc_dec_ns);

	if (last && me_elapsed(now, last) < rtt)
		return false;
	return me_atomic64_cmpxchg(&pa->cc_dec_ns, last, now) == last;
}

static void set_window(struct me_node *n, struct me_path *pa, u32 old, u64 w)
{
	w = me_max_u64(me_min_u64(w, cc_max(n)), cc_min(n));
	me_atomic_cmpxchg(&pa->cwnd, old, (u32)w);
}

/* cwnd *= max(1 - beta (rtt - target) / rtt, 1 - max_mdf); rtt > target. */
static void decrease(struct me_node *n, struct me_path *pa, u32 cwnd, u64 rtt,
		     u64 target)
{
	u64 f = me_div_u64((u64)ME_CC_BETA * (rtt - target),
			   (u32)me_min_u64(rtt, 0xffffffffull));
	u64 w = (u64)cwnd * (1024 - me_min_u64(f, ME_CC_MAX_MDF)) / 1024;

	set_window(n, pa, cwnd, w);
	me_atomic_set(&pa->ssthresh, (u32)me_max_u64(w, cc_min(n)));
}

void me_cc_acked(struct me_node *n, struct me_path *pa, u32 bytes, u64 rtt,
		 u64 now)
{
	u32 cwnd = me_atomic_read(&pa->cwnd);
	u64 base, target;

	if (!n->cfg.cc)
		return;
	if (bytes && me_atomic_read(&pa->rto_run))
		me_atomic_set(&pa->rto_run, 0);
	if (!rtt || !cwnd)
		return;
	me_atomic64_set(&pa->cc_rtt_ns, rtt);
	base = base_rtt(pa, rtt, now);
	target = base < n->cfg.cc_target_ns ? n->cfg.cc_target_ns : base + base / 2;
	if (rtt < target) {
		/*
		 * Slow start below ssthresh, and also while the sample is
		 * in the lower half between base and target: far from the
		 * target the window may double per round trip (a host whose
		 * round trip jitters by milliseconds shrinks its window
		 * often, and one MTU per round trip would take thousands of
		 * round trips to regrow).
		 */
		if (cwnd < me_atomic_read(&pa->ssthresh) || rtt < base + (target - base) / 2)
			set_window(n, pa, cwnd, (u64)cwnd + bytes);
		else
			set_window(n, pa, cwnd, cwnd +
				   me_max_u64(me_div_u64((u64)n->cfg.mtu * bytes, cwnd), 1));
		return;
	}
	if (may_decrease(pa, rtt, now))
		decrease(n, pa, cwnd, rtt, target);
}

void me_cc_probe_rtt(struct me_node *n, struct me_path *pa, u64 rtt, u64 now)
{
	if (n->cfg.cc && rtt)
		base_rtt(pa, rtt, now);
}

/* The path's last round trip, or the minimum RTO before there is one. */
static u64 round_trip(struct me_node *n, struct me_path *pa)
{
	u64 r = me_atomic64_read(&pa->cc_rtt_ns);

	return r ? r : n->cfg.rto_min_ns;
}

void me_cc_lost(struct me_node *n, struct me_path *pa, u64 now)
{
	u32 cwnd = me_atomic_read(&pa->cwnd);

	if (!n->cfg.cc)
		return;
	me_atomic64_set(&pa->cc_loss_ns, now);
	if (!may_decrease(pa, round_trip(n, pa), now))
		return;
	set_window(n, pa, cwnd, (u64)cwnd * (1024 - ME_CC_MAX_MDF) / 1024);
	me_atomic_set(&pa->ssthresh, me_atomic_read(&pa->cwnd));
}

void me_cc_timeout(struct me_node *n, struct me_path *pa, u64 now)
{
	u32 cwnd = me_atomic_read(&pa->cwnd);
	u64 rtt, loss;

	if (!n->cfg.cc)
		return;
	rtt = round_trip(n, pa);
	loss = me_atomic64_read(&pa->cc_loss_ns);
	if (loss && me_elapsed(now, loss) < ME_CC_LOSS_RTTS * rtt) {
		/* Congestion: one MTU; timeouts in a row keep the first ssthresh. */
		me_atomic64_set(&pa->cc_dec_ns, now);
		if (cwnd > cc_min(n))
			me_atomic_set(&pa->ssthresh, me_max_u32(cwnd / 2, cc_min(n)));
		me_atomic_set(&pa->cwnd, cc_min(n));
		return;
	}
	/*
	 * A pause or an outage.  One timer pass resends every packet that
	 * timed out: one event per round trip (the RTO is longer than one),
	 * not one per packet.
	 */
	if (!may_decrease(pa, rtt, now))
		return;
	if (me_atomic_add_return(&pa->rto_run, 1) < ME_CC_RTO_RESET) {
		set_window(n, pa, cwnd, (u64)cwnd * (1024 - ME_CC_MAX_MDF) / 1024);
		me_atomic_set(&pa->ssthresh, me_atomic_read(&pa->cwnd));
		return;
	}
	/* An outage: the ssthresh the first timeouts set stays. */
	me_atomic_set(&pa->cwnd, cc_min(n));
}
