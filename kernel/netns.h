/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_NETNS_H
#define ME_NETNS_H

#include <linux/hashtable.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/srcu.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <net/net_namespace.h>

#include "uapi/multiedge.h"

struct me_link;
struct me_conn_done;
struct me_node;
struct me_file;
struct task_struct;

/*
 * Per network namespace state: each namespace is one multiedge node, so one
 * kernel can host several (the guest tests build clusters this way).
 */
struct me_net {
	struct net *net;
	/* Attached links: RCU for the receive path, RTNL for writers. */
	struct list_head links;
	unsigned int nr_links;
	unsigned int nr_links_copy;	/* those that copy frames sent by
					 * reference (link.c, stage.c) */
	atomic64_t staged;		/* payload bytes staged (stage.c) */
	/* The same links by engine slot, for transmit (RCU; RTNL writers). */
	struct me_link __rcu *slots[ME_MAX_LINKS];
	/* Registered memory regions by id (struct me_mr, see mr.h). */
	struct xarray mrs;
	u32 mr_next;		/* next id to try; under the xarray's lock */

	/* ---- the protocol engine (engine.c) ---- */
	u32 node_id;		/* random, nonzero; fixed for the namespace's life */
	u32 incarnation;
	/*
	 * Created with the first link attached (whose MTU fixes the packet
	 * size) and destroyed when the namespace dies.  Published under RTNL
	 * with a release store once complete; ioctls read it with an acquire
	 * load.
	 */
	struct me_node *core;
	u32 packet_size;
	struct task_struct *timer;	/* drives me_core_timer() */
	/*
	 * Ends the timer thread's sleeps; a kick brings an idle sleep's end
	 * forward (plat_timer_kick) instead of waking the thread.
	 */
	struct hrtimer timer_wake;
	/*
	 * Pacing (pace_pct): calls me_core_pace() when the core asks
	 * (plat_pace_kick); pace_off, under pace_lock, keeps it and the
	 * ack timer from being started again once the engine stops.
	 */
	struct hrtimer pace_timer;
	/* Calls me_core_acks() when a held ack's hold ends (plat_ack_kick). */
	struct hrtimer ack_timer;
	spinlock_t pace_lock;
	bool pace_off;
	/* The same call from another thread (plat_pump_kick), same lock. */
	struct work_struct pump_work;
	struct list_head node;		/* in the module's list of engines */
	/*
	 * Per connection slot (me_node_slot()): the owner (NULL: passive and
	 * not adopted, or given up; ME_OWNER_ABANDONED, ops.c), copies,
	 * completion order.  Claimed: it had an owner once, adopted: the
	 * owner took it by receiving from it (recvq.c).
	 */
	spinlock_t owner_lock;
	struct me_file **owners;
	atomic64_t *conn_copies;	/* payload copies into regions */
	struct me_conn_done *conn_done;	/* completion order (ops.c) */
	/*
	 * Connections are looked up without references (receive threads,
	 * ioctls): those paths hold conn_srcu, and a connection the engine
	 * retires is freed by retire_work after a grace period.
	 */
	struct srcu_struct conn_srcu;
	spinlock_t retire_lock;
	void *retired;			/* chained through me_conn_host_link() */
	struct work_struct retire_work;
	/* Woken by every completion (events counts them): connect and post. */
	wait_queue_head_t waitq;
	atomic_t events;
	unsigned long *conn_claimed;	/* bitmaps by slot, under owner_lock */
	unsigned long *conn_adopted;
	/*
	 * Messages sent to this node (ME_OP_SEND) on passive connections no
	 * file has adopted, oldest first; msg_lock also covers every file's
	 * queue (recvq.c).
	 */
	spinlock_t msg_lock;
	struct list_head msgs;
	unsigned int nr_msgs;
	u64 msg_seq;			/* arrival number of the next message */
	wait_queue_head_t msg_wait;
	/* Bytes of messages held, queued or arriving (recvq.c, recv_kb). */
	atomic_long_t msg_bytes;
	/* Sends of several packets being gathered (sendasm.c). */
	spinlock_t asm_lock;
	DECLARE_HASHTABLE(asm_hash, 6);
	/*
	 * Shared connections (shared.c): looking one up and opening one is
	 * a single step; closes the timer still has to send.
	 */
	struct mutex share_mutex;
	atomic_t share_retries;
	/* Files bound to a port and the ports taken (ports.c, owner_lock). */
	struct list_head bound;
	DECLARE_BITMAP(ports_used, ME_PORT_MAX + 1);
	u32 port_next;			/* where the next ephemeral search starts */
};

/* The namespace's engine, or NULL before its first link (see engine.c). */
static inline struct me_node *me_net_core(struct me_net *mn)
{
	return smp_load_acquire(&mn->core);
}

int me_netns_init(void);
void me_netns_uninit(void);
struct me_net *me_net(const struct net *net);

#endif /* ME_NETNS_H */
