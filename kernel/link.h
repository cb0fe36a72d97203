/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_LINK_H
#define ME_LINK_H

#include <linux/netdevice.h>
#include <linux/ptr_ring.h>
#include <linux/types.h>

#include "core/me_core.h"
#include "rxframe.h"

struct me_net;
struct me_stage;
struct me_link_info;

#define ME_RX_THREADS_MAX	8

/* Per-CPU counters of a link: the receive and transmit paths touch them. */
struct me_link_pcpu {
	u64 rx_frames;
	u64 rx_bytes;
	u64 rx_dropped;
	u64 rx_copied;
	u64 rx_direct;		/* handled in the softirq, not a thread (rx.c) */
	u64 rx_trains;		/* trains among the frames (train.c) */
	u64 tx_frames;
	u64 tx_bytes;
	u64 tx_errors;
	u64 tx_zc_frames;	/* payload sent from pinned pages */
	u64 tx_trains;		/* trains the frames left in (train.c) */
};

struct me_link;
struct me_mr;
struct ubuf_info;

/* A receive thread of a link. */
struct me_rx_thread {
	struct task_struct *task;
	struct me_link *link;
	bool sleeping;			/* about to sleep or asleep: wake it */
	u8 *bounce;			/* for frames not in one linear buffer */
	struct me_rx_frame frame;	/* the frame being handled (rxframe.h) */
	struct me_rx_batch batch;	/* the frames of one wakeup (rx.c) */
};

/*
 * An attached Ethernet device.  Lifetime: from attach to detach, both under
 * RTNL; detach unpublishes it, waits for a grace period (the receive handler
 * and transmitters look it up under RCU), then stops its threads.
 */
struct me_link {
	struct list_head node;		/* in me_net.links */
	struct me_net *mn;
	struct net_device *dev;		/* held until detach */
	netdevice_tracker dev_tracker;
	unsigned int idx;		/* engine slot */
	unsigned int mtu;		/* written under RTNL */
	bool up;			/* running with carrier; under RTNL */
	bool copies_refs;		/* the device copies tracked frames
					 * sent by reference (link.c): a veth,
					 * which hands them to its peer's
					 * stack on the sending CPU (rx.c) */
	struct me_link_pcpu __percpu *stats;
	/* Frames from the handler to the receive threads (Table 1 state 6). */
	struct ptr_ring ring;
	unsigned int nthreads;
	unsigned int next_wake;		/* racy round robin, harmless */
	atomic_t direct_left;		/* bytes by reference the softirq may take (rx.c) */
	u64 idle_ns;			/* when the threads last went idle (rx.c) */
	struct me_rx_thread threads[ME_RX_THREADS_MAX];
};

struct me_link_stats {
	u64 rx_frames;
	u64 rx_dropped;
};

int me_link_init(void);
void me_link_uninit(void);
u16 me_link_ethertype(void);
void me_link_get_stats(struct me_link_stats *stats);

/* Writers hold RTNL. */
int me_link_attach(struct net *net, const char *ifname);
int me_link_detach(struct net *net, const char *ifname);
void me_link_detach_all(struct me_net *mn);
/* Fills up to @room entries; returns the number of links attached. */
unsigned int me_link_list(struct net *net, struct me_link_info *out, unsigned int room);
/* Is engine slot @idx taken by an attached link?  Under RTNL. */
bool me_link_slot_used(struct me_net *mn, unsigned int idx);

/*
 * Transmit one packet (bytes after the Ethernet header) to MAC @dst (a
 * u64; ME_ADDR_BCAST: broadcast); any context.
 */
int me_link_xmit(struct me_net *mn, u32 idx, u64 dst, const void *buf, u32 len);
/*
 * Sends @hdr followed by [off, off + plen) of @mr's pinned pages as skb
 * fragments, without copying: the skb takes a reference on @uarg
 * (refcnt) and its release calls @uarg's completion callback (set with
 * me_ubuf_set_complete(), compat.h).  Any context but hard IRQ.
 */
int me_link_xmit_zc(struct me_net *mn, u32 idx, u64 dst, const void *hdr, u32 hlen,
		    const struct me_mr *mr, u64 off, u32 plen, struct ubuf_info *uarg);
/*
 * The same from the copies staged at post in @st (stage.c), or copied now
 * where a staged page went with an earlier frame: nothing tracks the skb.
 * Softirq or process context.
 */
int me_link_xmit_staged(struct me_net *mn, u32 idx, u64 dst, const void *hdr, u32 hlen,
			const struct me_mr *mr, struct me_stage *st, u64 off, u32 plen);
/*
 * A read's answer: @hdr followed by [off, off + plen) of @mr, which the
 * caller holds.  Over a veth, a page or more of payload by reference,
 * untracked (the skb's page references keep the pages, nothing waits for
 * its release), unless staging is on (page flips over veth); otherwise
 * copied into the skb once, a page or more into pool pages a receive
 * area may flip.  Any context but hard IRQ.
 */
int me_link_xmit_answer(struct me_net *mn, u32 idx, u64 dst, const void *hdr, u32 hlen,
			const struct me_mr *mr, u64 off, u32 plen);
/* Frames counted as sent were refused by the stack after all. */
void me_link_tx_failed(struct me_link *link, u32 frames, u32 bytes);
/* An skb for a frame head of @size bytes (a page fragment if it fits). */
struct sk_buff *me_link_alloc_skb(unsigned int size);
/* Frames sent by reference not released yet; the release's bookkeeping. */
u64 me_link_zc_skbs(void);
void me_link_zc_released(void);

/* Receive threads (rx.c). */
/* The softirq's per-CPU frame buffers (rx_direct), module-wide. */
int me_rx_init(void);
void me_rx_exit(void);
int me_rx_start(struct me_link *link, unsigned int packet_size);
void me_rx_stop(struct me_link *link);
/*
 * Softirq, under rcu_read_lock (the link cannot be stopped meanwhile).
 * A frame from @src (0: no valid address) to the link's threads, stamped
 * @now (ktime_get_ns(), the engine's clock): true if it went to the ring
 * and a thread is to be woken (me_rx_wake(), once for any number of
 * frames), false if the softirq took it itself (rx_direct) or dropped it.
 */
bool me_rx_enqueue(struct me_link *link, struct sk_buff *skb, u64 src, u64 now);
/* Wakes one of the link's threads that may be asleep, if any. */
void me_rx_wake(struct me_link *link);
/* Frames chained by ->next (a train's): one clock read, one wakeup. */
void me_rx_queue_list(struct me_link *link, struct sk_buff *list, u64 src);
u64 me_rx_frame_src(const struct sk_buff *skb);
u64 me_rx_queued(void);

#endif /* ME_LINK_H */
