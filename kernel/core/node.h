/* SPDX-License-Identifier: GPL-2.0 */
/*
 * node.h - the per-node object: configuration, platform, links,
 * connection table, statistics; receive dispatch and the timer.
 */
#ifndef ME_NODE_H
#define ME_NODE_H

#include "me_core.h"
#include "path.h"

/* A deadline that never comes (me_conn_due()). */
#define ME_NEVER	(~(u64)0)

#define ME_STAT_SHARDS	8	/* a power of two */
/* Counters per shard: ME_ST_MAX_ in whole lines of 8, and one line more. */
#define ME_STAT_STRIDE	(((ME_ST_MAX_ + 7) & ~7) + 8)

struct me_node {
	struct me_node_cfg cfg;
	const struct me_plat_ops *ops;
	void *ctx;
	struct me_link links[ME_MAX_LINKS];
	/* One past the highest link slot ever added: per-packet scans stop there. */
	me_atomic_t links_hi;
	/*
	 * Peer table (path.c): cfg.max_peers slots; pids[i] is slot i's
	 * node id (0: free), kept apart so lookups scan a dense array.
	 */
	struct me_peer *peers;
	me_atomic_t *pids;
	me_atomic_t npeers;	/* slots used so far */
	me_lock_t peer_lock;	/* taking/freeing slots, HELLO, names */
	u64 last_scan_ns;	/* (timer) last walk over every path */
	u64 paths_due_ns;	/* (timer) ... the paths' next deadline then */
	u64 rate_due_ns;	/* (timer) ... the next rate sample of a path
				 * it found kept full (ME_NEVER: none) */
	/*
	 * Connection table: slot (id - 1) & slot_mask.  Pointers are
	 * published with a release store after the connection is fully set
	 * up, so receive threads look them up without a lock; a slot is
	 * cleared only by the timer when it retires a connection, whose
	 * memory the host frees after a grace period (me_plat_ops.retire).
	 */
	struct me_conn **conns;
	me_atomic_t nconns;	/* slots used so far */
	me_atomic_t live;	/* connections in the table */
	u32 slot_mask;
	/* Retired slots, oldest first, as the next id for each (ctl_lock). */
	u32 *free_ids;
	u32 free_head, free_len;
	me_lock_t ctl_lock;	/* control path: connect/accept/death */
	me_lock_t timer_lock;	/* me_core_timer is never re-entered */
	/*
	 * The sleeping timer's handshake (node.c): timer_busy, work for the
	 * timer created since its pass began; timer_idle, the pass found
	 * nothing due within a tick and the host may sleep until
	 * timer_wake_ns (0 during a pass and while it ticks).
	 */
	me_atomic_t timer_busy;
	me_atomic_t timer_idle;
	me_atomic64_t timer_wake_ns;
	/* Peers whose ack waits for a reply (me_peer.held_conn set). */
	me_atomic_t acks_held;
	/*
	 * Connections owing an ack that no packet asked for now (me_conn
	 * owed_ns set), and whether the ack timer was asked for them
	 * since its last call (window.c, ack_owe).
	 */
	me_atomic_t acks_owed;
	me_atomic_t owed_armed;
	/* (timer_lock) when the next pass is due; the last one judged nothing */
	u64 timer_due_ns;
	bool timer_skipped;
	me_atomic_t pace_waiters;	/* connections with pace_wait set */
	/*
	 * Counters, in shards by CPU (me_node_stat() adds them up): every
	 * data frame counts at both ends, and one set of shared words would
	 * bounce between the CPUs of several links' receive threads and
	 * senders.  A shard's stride leaves at least a cache line between
	 * its counters and the next shard's, whatever the allocation's
	 * alignment; the counts stay atomic (a thread may move, and CPUs
	 * beyond ME_STAT_SHARDS share).
	 */
	me_atomic64_t stats[ME_STAT_SHARDS][ME_STAT_STRIDE];
};

static inline me_atomic64_t *me_stat_slot(struct me_node *n, enum me_stat st)
{
	return &n->stats[me_cpu_hint() & (ME_STAT_SHARDS - 1)][st];
}

static inline void me_stat_inc(struct me_node *n, enum me_stat st)
{
	me_atomic64_add_return(me_stat_slot(n, st), 1);
}

static inline void me_stat_add(struct me_node *n, enum me_stat st, u64 v)
{
	me_atomic64_add_return(me_stat_slot(n, st), v);
}

static inline u64 me_now(struct me_node *n)
{
	return n->ops->now_ns(n->ctx);
}

/* Whether payload may go by reference (me_plat_ops.zc_tx). */
static inline bool me_zc_on(const struct me_node *n)
{
	return n->ops->zc_tx && n->cfg.zc_min;
}

/* Read answers go by reference too (me_plat.h: resp_hold). */
static inline bool me_zc_resp_on(const struct me_node *n)
{
	return n->ops->resp_hold && n->cfg.zc_min;
}

/* Operations whose payload the core holds references on (me_plat.h). */
static inline bool me_zc_type(u32 type)
{
	return type == ME_PT_WRITE || type == ME_PT_NOTIFY;
}

/*
 * Work that needs the timer's tick was just created (an ack owed, an op
 * the pump could not send, a connection ending): after the state that
 * needs it is stored.  Cheap while the timer ticks anyway: one read.
 */
void me_node_kick_slow(struct me_node *n);

static inline void me_node_busy(struct me_node *n)
{
	if (!me_atomic_read(&n->timer_busy))
		me_node_kick_slow(n);
}

/*
 * Work the timer must look at by @at (a packet's retransmission timeout),
 * after the state that needs it is stored: a timer asleep until @at or
 * sooner is left asleep; else as me_node_busy().
 */
static inline void me_node_due(struct me_node *n, u64 at)
{
	u64 wake;

	me_smp_mb();	/* the work's state before the look (node.c) */
	wake = me_atomic64_read(&n->timer_wake_ns);
	if (wake && wake <= at)
		return;
	me_node_busy(n);
}

/*
 * Transmit a packet on a link to a link-layer address (a path's, or
 * ME_ADDR_BCAST); a platform failure counts as a loss.
 */
void me_node_tx(struct me_node *n, u32 link, u64 addr, const void *buf, u32 len);
/* Fill the common header of a packet from this node. */
void me_node_hdr(struct me_node *n, struct me_hdr *h, u32 type, u32 dst);
/*
 * When the received frame h reached the host (its receive batch's rx_ns),
 * or now: the time it waited for a receive thread is ours, not the path's.
 */
u64 me_hdr_arrival(const struct me_hdr *h);

#endif /* ME_NODE_H */
