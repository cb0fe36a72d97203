// SPDX-License-Identifier: GPL-2.0
/*
 * cc.c - congestion control: one window per (link, peer) path, driven by
 * delay, in the manner of Google's Swift.
 *
 * Every acknowledgement gives a round-trip sample per path it acks: the
 * smallest time from transmission to this ack among the packets it
 * covers that were sent once (Karn), which is the newest of them.  The
 * window follows the sample's delay: the round trip without the time the
 * packet and its ack waited in the two hosts (the receiver's hold, which
 * the ack carries, from the packet reaching its host to the ack leaving;
 * the ack's wait in our receive queue), as Swift separates fabric from
 * endpoint delay.  The hold is that of the newest packet the ack answers,
 * and the ack leaves on that packet's link: only the path it came on
 * gets a delay from it; the bytes it acks on other paths grow their
 * windows as their last delay says, and never shrink them (path.c).  A
 * host's queue is not the fabric's: it is bounded by the receiver's
 * credit and its receive ring (an overrun is a loss), and where the hosts
 * are the bottleneck (busy or emulated machines) a window held to a small
 * host delay starves the receiver of the batches that make it fast.  The
 * path's base is the
 * least delay of the last one or two periods of ME_CC_BASE_NS, data
 * and keepalive round trips alike (keepalives are exchanged while the
 * path is idle, so they see the fabric without our own queues).  The
 * target is cc_target_ns, one figure for every path of the fabric as in
 * Swift, so that flows meeting at one bottleneck aim at the same delay
 * and share it fairly whatever they measured before.  Only a path whose
 * own delay is long or noisy gets more: at least 3/2 of its base, and
 * at least the base plus ME_CC_NOISE_K times its noise, the mean excess
 * over the base of keepalive exchanges made while the path carried no
 * data either way (so no queue of ours was in them).  A window held to a
 * target inside the noise follows the noise, not a queue: on emulated or
 * busy hosts, whose threads wait for CPUs by milliseconds, the delay
 * of an idle path spreads over several bases (guests under TCG: a base
 * of 0.3-0.6 ms, a noise of 0.7-1.3 ms); if that spread were
 * exponential, three means above the base leave one idle sample in
 * twenty above the target.  On a fabric of real hosts the noise is a few
 * microseconds and cc_target_ns rules.  On a path whose target its noise
 * sets, the delay the window answers is the least of its own samples over
 * the current and the previous round trip (a period as long as the last
 * one): a queue delays every packet, a host that stalls only those it
 * held, and answering each sample cut the window a hundred times a second
 * between two guests on a clean link (0.84x TCP's rate; about 1.2x that
 * since).  The loss rules still read the last sample: a stall that
 * overflows a shallow queue shows there (reading the least, the
 * simulator's stalling port resent 8%).  Below the target the window
 * grows: by the bytes acked while under ssthresh or while the delay is
 * nearer the base than the target (unless a queue lost packets in two
 * loss rounds within ME_CC_CALM_RTTS round trips, the second within the
 * last ME_CC_CALM_RTTS: one too shallow for the target overflows below
 * it), else by one MTU per window of bytes acked.
 * A path whose target its noise sets cannot see a queue shallower than
 * the noise in its delay; it remembers the window its queues overflowed
 * at instead (the smallest since it was last forgotten, moving up by a
 * quarter of the way to a larger one; forgotten ME_CC_FULL_RTTS round
 * trips, at most ME_CC_BASE_NS, after the last loss that set it, which
 * the delay did not show to be a queue's: at 1% random loss a window of
 * 8-15 packets loses three in one round every few seconds, and a memory
 * of 10 s never lapsed), and from 3/4 of it the window grows by one MTU
 * per ME_CC_FULL_SLOW windows acked: a queue that overflows whenever the
 * receiving host stalls (an emulated guest's socket buffer) is then met
 * every few hundred round trips, not every few dozen.  A path whose
 * delay shows its queue remembers nothing: its losses near a queue's
 * delay may be random, and a window held below the least of them would
 * sink with each (simulator, Cc.lossy_quiet_path_behind_a_switch__*).
 * Above it, it shrinks at most once per round trip, in proportion to
 * how far above the target the delay is:
 *
 *	cwnd *= max(1 - beta * (delay - target) / delay, 1 - max_mdf)
 *
 * with beta = 0.8 and max_mdf = 0.5.  Packets found lost within a round
 * trip of the first form a loss round, which cuts the window once, from
 * what it was before the round: by half if a queue lost them, by a fifth
 * if a lossy link did (TCP Veno's random loss).  A queue overflows after
 * it filled: the delay was at least half way from the base to the target
 * and beyond the path's noise (loss_cause()), or it lost a burst, an
 * eighth of the window and three packets at least in the round, or the
 * round began at or above the window the path remembers its queue
 * overflowing at and lost a third packet.  A lossy link
 * loses a packet now and then, with the delay near the base.  Halving
 * for those kept a stream on a link losing 1% at random at 0.35 of what
 * it moved without congestion control, 0.29 where the replies jitter by
 * up to 1 ms (simulator, Cc.random_loss__costs_a_fifth_not_half).
 * The probe that opens a timeout episode (window.c) cuts nothing
 * (me_cc_probe()); the timeouts after it that the peer answered do.
 * A retransmission timeout on a path whose queue lost packets within the
 * last ME_CC_LOSS_RTTS round trips (congestion: a queue overflowed)
 * drops it to one MTU.  On a path that lost nothing, or only at random,
 * it halves it, and only the ME_CC_RTO_RESET-th timeout in a row without
 * an ack drops it to one MTU (Swift's RETX_RESET_THRESHOLD): a receiver
 * that pauses past the RTO (its receive thread waiting for a CPU on a
 * busy host) makes every packet in flight time out at once, and
 * collapsing the window for each such pause kept it far below the path's
 * capacity; a path that has really stopped still reaches one MTU within
 * three timeouts (the RTO doubles between them).  A timeout may be
 * spurious: the packet was not lost, its ack came late (a receiver not
 * scheduled for longer than the RTO).  The receiver then gets the packet
 * twice and says so in its next ack (ME_F_DUP, window.c); the sender
 * gives back the window the timeouts of that episode took (their first
 * one saved it), as TCP undoes a reduction that DSACK proves needless,
 * unless a queue lost packets since (real congestion).  The
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
#define ME_CC_LOSS_RTTS	64	/* a queue's loss this recent: a timeout is congestion */
#define ME_CC_CALM_RTTS	1024	/* no doubling this long after a queue's 2nd loss round */
#define ME_CC_FULL_GAIN	4	/* the overflow window rises 1/4 of the way per round */
#define ME_CC_FULL_SLOW	8	/* near it: 1 MTU per this many windows acked */
#define ME_CC_FULL_RTTS	1024	/* it is forgotten this long after the last overflow */
#define ME_CC_RANDOM_MDF 205	/* a loss without a queue: a fifth off (Veno) */
#define ME_CC_BURST	8	/* a round losing 1/8 of its window: a queue's */
#define ME_CC_NOISE_K	3	/* the target is at least base + K x noise */
#define ME_CC_NOISE_CLAMP 4	/* a noise sample counts at most this x the mean */
#define ME_CC_NOISE_N	64	/* noise: the mean of the first N samples, then gain 1/N */

static u32 cc_min(struct me_node *n)
{
	return n->cfg.mtu;
}

static u32 cc_max(struct me_node *n)
{
	return n->cfg.link_window;
}

/* A path's first window, and the least a pause restarts it to. */
static u32 cc_first(struct me_node *n)
{
	return me_max_u32(me_min_u32(n->cfg.cc_init, cc_max(n)), cc_min(n));
}

void me_cc_start(struct me_node *n, struct me_path *pa, u64 now)
{
	u32 init = cc_first(n);

	(void)now;
	me_atomic_set(&pa->cwnd, init);
	me_atomic_set(&pa->ssthresh, cc_max(n));
	me_atomic64_set(&pa->cc_dec_ns, 0);
	me_atomic64_set(&pa->cc_loss_ns, 0);
	me_atomic64_set(&pa->cc_qloss_ns, 0);
	me_atomic64_set(&pa->cc_calm_ns, 0);
	me_atomic64_set(&pa->cc_qfull_ns, 0);
	me_atomic_set(&pa->qfull_win, 0);
	me_atomic_set(&pa->round_lost, 0);
	me_atomic_set(&pa->round_cwnd, 0);
	me_atomic_set(&pa->rto_run, 0);
	me_atomic_set(&pa->undo_cwnd, 0);
}

static void winmin_reset(struct me_winmin *w, u64 now)
{
	me_atomic64_set(&w->prev, 0);
	me_atomic64_set(&w->cur, 0);
	me_atomic64_set(&w->t0, now);
}

void me_cc_forget(struct me_path *pa, u64 now)
{
	winmin_reset(&pa->base, now);
	winmin_reset(&pa->standing, now);
	me_atomic64_set(&pa->noise_ns, 0);
	me_atomic_set(&pa->noise_n, 0);
	me_atomic64_set(&pa->cc_rtt_ns, 0);
	me_atomic64_set(&pa->cc_delay_ns, 0);
}

u32 me_cc_window(struct me_node *n, struct me_path *pa)
{
	if (!n->cfg.cc)
		return cc_max(n);
	return me_max_u32(me_atomic_read(&pa->cwnd), cc_min(n));
}

static u64 winmin_read(struct me_winmin *w)
{
	u64 cur = me_atomic64_read(&w->cur);
	u64 prev = me_atomic64_read(&w->prev);

	return prev && (!cur || prev < cur) ? prev : cur;
}

u64 me_cc_base(struct me_path *pa)
{
	return winmin_read(&pa->base);
}

/* Adds a sample; returns the least of this period and the previous one. */
static u64 winmin_add(struct me_winmin *w, u64 sample, u64 period, u64 now)
{
	u64 t0 = me_atomic64_read(&w->t0);
	u64 cur = me_atomic64_read(&w->cur);

	if (me_elapsed(now, t0) >= period &&
	    me_atomic64_cmpxchg(&w->t0, t0, now) == t0) {
		/* A new period: the one that ended becomes the previous. */
		me_atomic64_set(&w->prev, cur ? cur : sample);
		me_atomic64_set(&w->cur, sample);
	} else if (!cur || sample < cur) {
		me_atomic64_set(&w->cur, sample);
	}
	return winmin_read(w);
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

/* cwnd *= max(1 - beta (d - target) / d, 1 - max_mdf); delay d > target. */
static void decrease(struct me_node *n, struct me_path *pa, u32 cwnd, u64 d,
		     u64 target)
{
	u64 f = me_div_u64((u64)ME_CC_BETA * (d - target),
			   (u32)me_min_u64(d, 0xffffffffull));
	u64 w = (u64)cwnd * (1024 - me_min_u64(f, ME_CC_MAX_MDF)) / 1024;

	set_window(n, pa, cwnd, w);
	me_atomic_set(&pa->ssthresh, (u32)me_max_u64(w, cc_min(n)));
	me_stat_inc(n, ME_ST_CC_CUT_DELAY);
}

/* Was a loss of the path taken for a queue's within rtts round trips? */
static bool lost_lately(struct me_path *pa, u32 rtts, u64 rtt, u64 now)
{
	u64 loss = me_atomic64_read(&pa->cc_qloss_ns);

	return loss && me_elapsed(now, loss) < rtts * rtt;
}

/* Did queue_overflowed() calm the path within ME_CC_CALM_RTTS round trips? */
static bool calm_lately(struct me_path *pa, u64 rtt, u64 now)
{
	u64 t = me_atomic64_read(&pa->cc_calm_ns);

	return t && me_elapsed(now, t) < ME_CC_CALM_RTTS * rtt;
}

/* The path's last round trip, or the minimum RTO before there is one. */
static u64 round_trip(struct me_node *n, struct me_path *pa)
{
	u64 r = me_atomic64_read(&pa->cc_rtt_ns);

	return r ? r : n->cfg.rto_min_ns;
}

/* The window the path's queues overflowed at; 0: none lately. */
static u32 remembered_full(struct me_node *n, struct me_path *pa, u64 now)
{
	u64 loss = me_atomic64_read(&pa->cc_qfull_ns);

	if (!loss || me_elapsed(now, loss) >= me_min_u64(ME_CC_BASE_NS,
			ME_CC_FULL_RTTS * round_trip(n, pa)))
		return 0;
	return me_atomic_read(&pa->qfull_win);
}

/* The target without the path's noise: the fabric's, or 3/2 of the base. */
static u64 quiet_target(struct me_node *n, u64 base)
{
	return me_max_u64(n->cfg.cc_target_ns, base + base / 2);
}

/* Does the path's noise set its target (over base `base`)? */
static bool noisy(struct me_node *n, struct me_path *pa, u64 base)
{
	return base && base + ME_CC_NOISE_K * me_atomic64_read(&pa->noise_ns) >
		       quiet_target(n, base);
}

/*
 * That window, on a path (of base `base`) whose target its noise sets:
 * its delay cannot show a queue shallower than the noise; 0: none, or
 * the delay shows the queue.
 */
static u32 overflow_window(struct me_node *n, struct me_path *pa, u64 base, u64 now)
{
	u32 full = remembered_full(n, pa, now);

	return full && noisy(n, pa, base) ? full : 0;
}

void me_cc_acked(struct me_node *n, struct me_path *pa, u32 bytes, u64 rtt,
		 u64 delay, u64 now)
{
	u32 cwnd = me_atomic_read(&pa->cwnd), full;
	bool own = delay;
	u64 base, target, standing;

	if (!n->cfg.cc)
		return;
	if (bytes && me_atomic_read(&pa->rto_run))
		me_atomic_set(&pa->rto_run, 0);
	if (!rtt || !cwnd)
		return;
	if (own) {
		/* The whole round trip paces decreases and loss rules. */
		me_atomic64_set(&pa->cc_rtt_ns, rtt);
		me_atomic64_set(&pa->cc_delay_ns, delay);
		base = winmin_add(&pa->base, delay, ME_CC_BASE_NS, now);
		standing = winmin_add(&pa->standing, delay, rtt, now);
	} else {
		/*
		 * No delay of the path's own in this ack: its packets
		 * waited in the peer for an ack that timed another path's
		 * (path.c).  The bytes grow the window as the path's last
		 * delay (or, before one, its base) says; only its own
		 * samples shrink it.
		 */
		base = me_cc_base(pa);
		delay = me_atomic64_read(&pa->cc_delay_ns);
		if (!delay)
			delay = base;
		if (!delay)
			return;
		rtt = me_atomic64_read(&pa->cc_rtt_ns);
		if (!rtt)
			rtt = n->cfg.rto_min_ns;
		standing = winmin_read(&pa->standing);
	}
	target = me_cc_target(n, pa, base);
	/*
	 * On a path whose target its noise sets, the delay that stood for
	 * a round trip: a queue delays every packet, a host that stalls
	 * (a thread waiting for a CPU) the few it held, and cutting for
	 * those held the window at a fraction of what the path carries
	 * (benchmarks.md, Throughput, 2026-12-05).
	 */
	if (noisy(n, pa, base) && standing)
		delay = standing;
	if (delay < target) {
		/*
		 * Near the window a queue overflowed at, creep: a queue
		 * too shallow for the target (an emulated link's, a shallow
		 * switch's) overflows below it, so the delay never says
		 * stop, and one MTU per window would refill it within a few
		 * dozen round trips of each cut.
		 */
		full = overflow_window(n, pa, base, now);
		if (full && cwnd >= full - full / 4) {
			set_window(n, pa, cwnd, cwnd +
				   me_max_u64(me_div_u64((u64)n->cfg.mtu * bytes, cwnd) /
					      ME_CC_FULL_SLOW, 1));
			return;
		}
		/*
		 * Slow start below ssthresh, and also while the delay is
		 * in the lower half between base and target: far from the
		 * target the window may double per round trip (a host whose
		 * round trip jitters by milliseconds shrinks its window
		 * often, and one MTU per round trip would take thousands of
		 * round trips to regrow) -- but not for ME_CC_CALM_RTTS
		 * after a queue's second loss round in as many: a buffer
		 * too shallow for the target (an emulated link's, a shallow
		 * switch's) overflows below it, and doubling there
		 * overflows it again at once.  After the first alone it
		 * may: a random loss while a burst queued in the sender's
		 * link took 2 seeds of 10 (1% lost, simulator) to 0.55x.
		 */
		if (cwnd < me_atomic_read(&pa->ssthresh) ||
		    (delay < base + (target - base) / 2 &&
		     !calm_lately(pa, rtt, now)))
			set_window(n, pa, cwnd, (u64)cwnd + bytes);
		else
			set_window(n, pa, cwnd, cwnd +
				   me_max_u64(me_div_u64((u64)n->cfg.mtu * bytes, cwnd), 1));
		return;
	}
	if (own && may_decrease(pa, rtt, now))
		decrease(n, pa, cwnd, delay, target);
}

u64 me_cc_target(struct me_node *n, struct me_path *pa, u64 base)
{
	return me_max_u64(quiet_target(n, base),
			  base + ME_CC_NOISE_K * me_atomic64_read(&pa->noise_ns));
}

void me_cc_probe_rtt(struct me_node *n, struct me_path *pa, u64 rtt,
		     bool quiet, u64 now)
{
	u64 base, noise, ex;
	u32 k;

	if (!n->cfg.cc || !rtt)
		return;
	base = winmin_add(&pa->base, rtt, ME_CC_BASE_NS, now);
	if (!quiet)
		return;
	/*
	 * The mean excess over the base: of every sample until there are
	 * ME_CC_NOISE_N, then with gain 1/ME_CC_NOISE_N.  The samples
	 * spread over several means (a reply waits for a thread that waits
	 * for a CPU), and with a gain of 1/8 paths sharing one bottleneck
	 * from identical hosts read noises from 0.2 to 0.7 ms: their targets
	 * differed by as much, and the path with the highest took up to 40%
	 * of a 4->1 incast (benchmarks.md).  One sample counts at most
	 * ME_CC_NOISE_CLAMP times the mean so far or one base (the first:
	 * one base): a reply that once waited for a descheduled thread says
	 * little of the next.
	 */
	noise = me_atomic64_read(&pa->noise_ns);
	ex = me_min_u64(rtt - base, me_max_u64(ME_CC_NOISE_CLAMP * noise, base));
	k = me_atomic_read(&pa->noise_n);
	if (k < ME_CC_NOISE_N)
		me_atomic_set(&pa->noise_n, ++k);
	if (k <= 1)
		me_atomic64_set(&pa->noise_ns, me_max_u64(ex, 1));
	else
		me_atomic64_set(&pa->noise_ns, noise - noise / k + ex / k);
}

/*
 * Did a queue lose this packet, or a lossy link?  A queue that overflows
 * has filled first: the delay was well above the base (half way to the
 * target, and beyond the path's own noise, which says nothing of a
 * queue), or it lost a burst (a 1/ME_CC_BURST share of the window within
 * one round trip, three packets at least: a lossy link loses a packet
 * now and then, and at 1% two in a round of a window of 8-10 packets
 * about every 250 rounds), or the round began at or above the window the
 * path's queue overflowed at (on a path whose delay cannot show it) and
 * lost a third packet: an overflow drops what comes while the queue is
 * full, and one loss alone taken for a queue's lowers that window to
 * where it struck (between two guests at 1% random loss 35% of the
 * losses were taken for a queue's, 7% once a second one was needed here;
 * a window of 8 packets loses a second in 8% of its loss rounds at 1%, a
 * third in 0.3%).  Without a delay measured yet, a queue.  Returns the
 * rule that said a queue's (ME_ST_CC_QUEUE_*; ME_ST_CC_LOSS_QUEUE: no
 * delay yet), or ME_ST_CC_LOSS_RANDOM.
 */
static enum me_stat loss_cause(struct me_node *n, struct me_path *pa, u32 lost,
			       u32 cwnd, u64 now)
{
	u64 delay = me_atomic64_read(&pa->cc_delay_ns), base = me_cc_base(pa);
	u32 full = overflow_window(n, pa, base, now);
	u64 above;

	if (!delay || !base)
		return ME_ST_CC_LOSS_QUEUE;
	if (full && cwnd >= full && lost >= 3)
		return ME_ST_CC_QUEUE_FULL;
	above = me_max_u64((me_cc_target(n, pa, base) - base) / 2,
			   ME_CC_NOISE_K * me_atomic64_read(&pa->noise_ns));
	if (delay >= base + above)
		return ME_ST_CC_QUEUE_DELAY;
	if (lost >= 3 && (u64)lost * n->cfg.mtu * ME_CC_BURST >= cwnd)
		return ME_ST_CC_QUEUE_BURST;
	return ME_ST_CC_LOSS_RANDOM;
}

/*
 * A queue lost a packet of the loss round that began at `round` from
 * window `from`.  The round's first such loss lowers the window
 * remembered to `from`, or raises it a quarter of the way (once
 * forgotten: `from`).  Slow start overshoots the queue by up to twice,
 * so the least is the nearest; a queue freed by other flows is found
 * again a quarter at a time.  A second such round within
 * ME_CC_CALM_RTTS round trips of the last proves a queue too shallow
 * for the target, and calms the path (me_cc_acked()); one alone may
 * have been a random loss that struck while a burst queued.  A loss
 * the delay showed to be a queue's (`shown`) sets no window: the delay
 * shows that queue again before it overflows.  Remembered, random
 * losses that came while a pause of the receiving host held the acks
 * (between two guests at 1% loss, a few a second) lowered the window
 * to where they struck and refreshed it, and the creep above held the
 * window at 8-17 KB: with a fifth off per loss, a window of W packets
 * that grows by 1/8 MTU per round trip loses one packet every 100/W
 * round trips at 1% and settles where 0.2 W = 100 / (8 W), W = 8.
 */
static void queue_overflowed(struct me_node *n, struct me_path *pa, u32 from,
			     u64 round, u64 rtt, bool shown, u64 now)
{
	u64 last = me_atomic64_read(&pa->cc_qloss_ns);
	u64 last_full = me_atomic64_read(&pa->cc_qfull_ns);
	u32 full = remembered_full(n, pa, now);

	if (!shown) {
		if (!last_full || last_full < round)
			me_atomic_set(&pa->qfull_win, full && from > full ?
				      full - full / ME_CC_FULL_GAIN +
				      from / ME_CC_FULL_GAIN : from);
		me_atomic64_set(&pa->cc_qfull_ns, now);
	}
	if (last && last < round && me_elapsed(now, last) < ME_CC_CALM_RTTS * rtt) {
		me_atomic64_set(&pa->cc_calm_ns, now);
		me_stat_inc(n, ME_ST_CC_CALM);
	}
	me_atomic64_set(&pa->cc_qloss_ns, now);
}

void me_cc_lost(struct me_node *n, struct me_path *pa, u64 now)
{
	u32 cwnd = me_atomic_read(&pa->cwnd), lost, from, w;
	u64 start = me_atomic64_read(&pa->cc_loss_ns);
	enum me_stat cause;
	bool queue;

	if (!n->cfg.cc)
		return;
	/*
	 * Losses found within a round trip of the first form one round,
	 * which cuts the window once, from what it was before the round:
	 * the packets lost in it were sent before the cut.
	 */
	if ((!start || me_elapsed(now, start) >= round_trip(n, pa)) &&
	    me_atomic64_cmpxchg(&pa->cc_loss_ns, start, now) == start) {
		me_atomic_set(&pa->round_cwnd, cwnd);
		me_atomic_set(&pa->round_lost, 0);
	}
	lost = me_atomic_add_return(&pa->round_lost, 1);
	from = me_max_u32(me_atomic_read(&pa->round_cwnd), cc_min(n));
	cause = loss_cause(n, pa, lost, from, now);
	queue = cause != ME_ST_CC_LOSS_RANDOM;
	me_stat_inc(n, queue ? ME_ST_CC_LOSS_QUEUE : ME_ST_CC_LOSS_RANDOM);
	if (cause != ME_ST_CC_LOSS_QUEUE && cause != ME_ST_CC_LOSS_RANDOM)
		me_stat_inc(n, cause);
	if (queue)
		queue_overflowed(n, pa, from, me_atomic64_read(&pa->cc_loss_ns),
				 round_trip(n, pa), cause == ME_ST_CC_QUEUE_DELAY, now);
	w = (u32)((u64)from * (1024 - (queue ? ME_CC_MAX_MDF : ME_CC_RANDOM_MDF)) / 1024);
	if (cwnd <= w)
		return;		/* cut this far already */
	me_atomic64_set(&pa->cc_dec_ns, now);
	set_window(n, pa, cwnd, w);
	me_atomic_set(&pa->ssthresh, me_max_u32(w, cc_min(n)));
	me_stat_inc(n, ME_ST_CC_CUT_LOSS);
}

/*
 * Before a timeout shrinks the window: the first of an episode (nothing
 * saved, or the path acked something since) saves what me_cc_spurious()
 * restores.
 */
static void undo_save(struct me_path *pa, u32 cwnd, u64 now)
{
	if (me_atomic_read(&pa->undo_cwnd) &&
	    me_atomic64_read(&pa->undo_ns) >= me_atomic64_read(&pa->acked_ns))
		return;
	me_atomic_set(&pa->undo_ssthresh, me_atomic_read(&pa->ssthresh));
	me_atomic64_set(&pa->undo_ns, now);
	me_atomic_set(&pa->undo_cwnd, cwnd);
}

void me_cc_timeout(struct me_node *n, struct me_path *pa, u64 now)
{
	u32 cwnd = me_atomic_read(&pa->cwnd);
	u64 rtt;

	if (!n->cfg.cc)
		return;
	rtt = round_trip(n, pa);
	if (lost_lately(pa, ME_CC_LOSS_RTTS, rtt, now)) {
		/* Congestion: one MTU; timeouts in a row keep the first ssthresh. */
		undo_save(pa, cwnd, now);
		me_atomic64_set(&pa->cc_dec_ns, now);
		if (cwnd > cc_min(n)) {
			me_atomic_set(&pa->ssthresh, me_max_u32(cwnd / 2, cc_min(n)));
			me_stat_inc(n, ME_ST_CC_RESET);
		}
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
	undo_save(pa, cwnd, now);
	if (me_atomic_add_return(&pa->rto_run, 1) < ME_CC_RTO_RESET) {
		set_window(n, pa, cwnd, (u64)cwnd * (1024 - ME_CC_MAX_MDF) / 1024);
		me_atomic_set(&pa->ssthresh, me_atomic_read(&pa->cwnd));
		me_stat_inc(n, ME_ST_CC_CUT_RTO);
		return;
	}
	/* An outage: the ssthresh the first timeouts set stays. */
	me_atomic_set(&pa->cwnd, cc_min(n));
	if (cwnd > cc_min(n))
		me_stat_inc(n, ME_ST_CC_RESET);
}

/*
 * The probe that opens a timeout episode (window.c) cuts nothing, as
 * TCP's tail loss probe: it asks whether anything was lost.  Its answer
 * decides: a DUP (the receiver had the packet: its ack was late, a
 * paused receiver) leaves nothing to undo; holes the acks then show are
 * losses (me_cc_lost()); a timeout after it that the peer answered
 * meanwhile is me_cc_timeout()'s.  Cutting at the probe and undoing at
 * the DUP failed where random losses taken for a queue's refuse the
 * undo: between two guests at 1% loss nine timeouts in ten were a
 * paused receiver's and each left the window at one packet
 * (benchmarks.md, Loss).  Probes to a peer that stays silent still
 * count: the ME_CC_RTO_RESET-th without an ack drops the window to one
 * MTU (an outage).
 */
void me_cc_probe(struct me_node *n, struct me_path *pa, u64 now)
{
	u32 cwnd = me_atomic_read(&pa->cwnd);

	if (!n->cfg.cc)
		return;
	/*
	 * The acks that a pause held back come with its delay: none of
	 * them shrinks the window for a round trip, and a DUP gives back
	 * what later ones took.
	 */
	undo_save(pa, cwnd, now);
	me_atomic64_set(&pa->cc_dec_ns, now);
	if (me_atomic_add_return(&pa->rto_run, 1) >= ME_CC_RTO_RESET) {
		me_atomic_set(&pa->cwnd, cc_min(n));
		if (cwnd > cc_min(n))
			me_stat_inc(n, ME_ST_CC_RESET);
	}
}

/*
 * A path that carried nothing for a while: what its window says of it is
 * stale (its rate or the traffic beside it may have changed since), and
 * a whole window sent at once would be a burst.  As TCP after idle (RFC
 * 5681 4.1, Linux's tcp_cwnd_restart()), the window is halved for each
 * retransmission timeout of the pause, here the path's: two round trips,
 * rto_min at least, and no lower than the first window; ssthresh keeps
 * three quarters of it, so that slow start finds it again within a few
 * round trips if the path is as it was.  The pause runs from the ack that
 * emptied the path (or its last packet, if later), not from the last
 * packet as TCP's: a wait for acks is no pause, and between two guests a
 * receiver's stall of a few ms made it look like one, halving the windows
 * of a 64 KiB stream (profile-pair, 0.77x).  A window of 1 MiB learned on an
 * unlimited veth, then sent at once after the link was held to 50 Mbit/s,
 * queued 170 ms: longer than link_dead_ns, for which the receiver, whose
 * proof that it is heard waited in that queue, took the path for dead
 * (guests, fault_test).
 */
void me_cc_idle(struct me_node *n, struct me_path *pa, u64 last, u64 now)
{
	u64 unit = me_max_u64(n->cfg.rto_min_ns, 2 * round_trip(n, pa));
	u32 init = cc_first(n);
	u32 cwnd = me_atomic_read(&pa->cwnd), w = cwnd;
	u64 idle;

	if (!n->cfg.cc || !last || now <= last || cwnd <= init)
		return;
	for (idle = now - last; idle >= unit && w > init; idle -= unit)
		w >>= 1;
	if (w == cwnd)
		return;
	if (me_atomic_cmpxchg(&pa->cwnd, cwnd, me_max_u32(w, init)) != cwnd)
		return;
	if (me_atomic_read(&pa->ssthresh) < cwnd / 4 * 3)
		me_atomic_set(&pa->ssthresh, cwnd / 4 * 3);
	me_stat_inc(n, ME_ST_CC_IDLE);
}

void me_cc_spurious(struct me_node *n, struct me_path *pa, u64 now)
{
	u32 was = me_atomic_read(&pa->undo_cwnd);
	u64 at = me_atomic64_read(&pa->undo_ns);

	if (!n->cfg.cc || !was || me_elapsed(now, at) >= ME_CC_LOSS_RTTS * round_trip(n, pa) ||
	    me_atomic_cmpxchg(&pa->undo_cwnd, was, 0) != was)
		return;
	/* A queue lost packets since: the timeouts may have been right. */
	if (me_atomic64_read(&pa->cc_qloss_ns) > at)
		return;
	me_atomic_set(&pa->rto_run, 0);
	me_atomic_set(&pa->ssthresh, me_max_u32(me_atomic_read(&pa->ssthresh),
						me_atomic_read(&pa->undo_ssthresh)));
	set_window(n, pa, me_atomic_read(&pa->cwnd),
		   me_max_u32(me_atomic_read(&pa->cwnd), was));
	me_stat_inc(n, ME_ST_CC_UNDO);
}
