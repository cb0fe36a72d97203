// SPDX-License-Identifier: GPL-2.0
/*
 * Receive threads.  The ethertype handler (link.c) runs in softirq context
 * and only queues the skb on its link's ring and wakes one of the link's
 * threads; the threads run the protocol end to end (me_engine_rx) and copy
 * payload into registered pages from their own context, whatever process
 * owns the destination.  There are no per-connection threads.
 *
 * The threads of a link are created on the NIC's NUMA node and may only run
 * on its CPUs, so payload is copied by a CPU near the NIC.
 *
 * A data frame's page fragments are not copied into the thread's buffer:
 * they stay "segments" the engine's placement reads in place, or, when a
 * fragment is a whole page owned by nobody but the skb, may flip into a
 * receive area (rxframe.h).  Only the header and the skb's linear part
 * are copied.
 */
#include <linux/etherdevice.h>
#include <linux/highmem.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/sched.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/topology.h>

#include "area.h"
#include "core/me_core.h"
#include "core/wire.h"
#include "engine.h"
#include "link.h"
#include "mr.h"
#include "netns.h"

static unsigned int rx_threads = 1;
module_param(rx_threads, uint, 0444);
MODULE_PARM_DESC(rx_threads, "Receive threads per link (1..8, default 1)");

static unsigned int rx_ring = 4096;
module_param(rx_ring, uint, 0444);
MODULE_PARM_DESC(rx_ring, "Frames queued per link before the handler drops (64..65536, default 4096)");

/* Measured against the threads in benchmarks.md (8 B ping-pong, 1 MiB). */
static bool rx_direct = true;
module_param(rx_direct, bool, 0444);
MODULE_PARM_DESC(rx_direct,
		 "Handle small frames in the NIC's softirq while the link's ring is empty (default 1; 0: always the threads)");

/*
 * Over a veth the softirq runs on the sending CPU: taking every frame by
 * reference there would serialize a stream's sending and receiving on
 * one CPU, which the threads spread over two (benchmarks.md, 2026-12-03).
 * So it takes frames by reference only on a link whose threads have been
 * idle for RX_DIRECT_IDLE_NS (a quiet link, not a stream's pause between
 * bursts), this much each time they went idle, then wakes them.
 */
static unsigned int rx_direct_kb = 128;
module_param(rx_direct_kb, uint, 0444);
MODULE_PARM_DESC(rx_direct_kb,
		 "Frames by reference (a veth's) the softirq handles itself each time the link's receive threads went idle, KiB (0..4096, default 128; 0: the threads take them)");

#define RX_DIRECT_IDLE_NS	(100 * NSEC_PER_USEC)

/* Frames in rings, all links: per CPU, since the handler and threads differ. */
static DEFINE_PER_CPU(long, rx_queued);

/*
 * The receive thread running a batch on each CPU, if any.  A frame that
 * reaches the handler over a veth while that thread re-enables bottom
 * halves was sent by the thread itself: its ack to the other namespace's
 * sender.  Taken there whole, the sender's turn (building and sending the
 * packets the ack releases) would run on the receiving thread's CPU, the
 * one the stream already fills; so such a frame is handled there, but
 * what it releases is sent by a worker the scheduler can put on another
 * CPU (the batch's handoff, engine.c plat_pump_kick; benchmarks.md,
 * 2026-11-29).  Set and cleared by the thread on the CPU it is on: a
 * stale entry left by a migration names that same thread, and it clears
 * its entries when it exits.
 */
static DEFINE_PER_CPU(struct task_struct *, rx_running);

/*
 * What the softirq builds a frame with page fragments on when it handles
 * it itself (rx_direct_ok), as a thread does on its own: one per CPU,
 * used with bottom halves off only, which do not nest on a CPU.
 */
struct me_rx_direct {
	struct me_rx_frame frame;
	u8 bounce[ME_MAX_PACKET];
};

static struct me_rx_direct __percpu *rx_direct_bufs;

/* At module load: the parameters, and the softirq's frame buffers. */
int me_rx_init(void)
{
	if (rx_threads < 1 || rx_threads > ME_RX_THREADS_MAX || rx_ring < 64 || rx_ring > 65536 ||
	    rx_direct_kb > 4096) {
		pr_err("bad parameter: rx_threads=%u (1..%u) rx_ring=%u (64..65536) rx_direct_kb=%u (0..4096)\n",
		       rx_threads, ME_RX_THREADS_MAX, rx_ring, rx_direct_kb);
		return -EINVAL;
	}
	/* Only the softirq's frames by reference use them (rx_direct_ok). */
	if (!rx_direct || !rx_direct_kb)
		return 0;
	rx_direct_bufs = alloc_percpu(struct me_rx_direct);
	return rx_direct_bufs ? 0 : -ENOMEM;
}

/* After the handler is gone (dev_remove_pack waited for it). */
void me_rx_exit(void)
{
	free_percpu(rx_direct_bufs);
	rx_direct_bufs = NULL;
}

/* Frames a thread hands the engine as one batch, at most; then it offers the CPU. */
#define RX_BATCH	64

/*
 * When a frame was queued (the engine's clock), in the skb's control
 * block, ours from the ethertype handler on: the engine takes the time a
 * frame waited for a thread out of its round trips (cc.c).
 */
struct me_rx_cb {
	u64 queued_ns;
	u64 src;	/* the sender's address (me_rx_frame_src), 0: none valid */
};

static struct me_rx_cb *rx_cb(struct sk_buff *skb)
{
	BUILD_BUG_ON(sizeof(struct me_rx_cb) > sizeof(skb->cb));
	return (struct me_rx_cb *)skb->cb;
}

u64 me_rx_queued(void)
{
	long sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += per_cpu(rx_queued, cpu);
	return sum > 0 ? sum : 0;
}

struct page *me_frame_flip_page_at(const struct me_rx_frame *fr, u32 off)
{
	unsigned int i;

	for (i = 0; i < fr->nsegs && fr->segs[i].off <= off; i++)
		if (fr->segs[i].off == off && fr->segs[i].flip)
			return fr->segs[i].page;
	return NULL;
}

u32 me_frame_segment(const struct me_rx_frame *fr, u32 off, u32 len, struct page **page,
		     u32 *poff)
{
	unsigned int i;

	*page = NULL;
	for (i = 0; i < fr->nsegs; i++) {
		u32 s = fr->segs[i].off, e = s + fr->segs[i].len;

		if (off >= s && off < e) {
			u32 p = fr->segs[i].poff + (off - s);

			*page = nth_page(fr->segs[i].page, p >> PAGE_SHIFT);
			*poff = p & ~PAGE_MASK;
			return min3(len, e - off, (u32)PAGE_SIZE - *poff);
		}
		if (s > off)
			return min_t(u32, len, s - off);
	}
	return len;
}

void me_frame_fill(struct me_rx_frame *fr)
{
	unsigned int i;

	for (i = 0; i < fr->nsegs; i++) {
		u32 off = fr->segs[i].off, end = off + fr->segs[i].len;

		while (off < end) {
			struct page *page;
			u32 poff, n = me_frame_segment(fr, off, end - off, &page, &poff);

			memcpy_from_page(fr->buf + off, page, poff, n);
			off += n;
		}
	}
	fr->nsegs = 0;
}

/*
 * Is fragment @f (frame offset @off, the frame @len long) a whole order-0
 * page nobody else references?  Then a flip that takes it leaves nothing
 * the stack or a driver still uses, and once the frame is consumed the
 * page pool may keep it.  Not user or page cache memory (mapped, with a
 * mapping, or on an LRU list, whose links the pool's list would reuse).
 */
static bool frag_is_whole(const skb_frag_t *f, u32 off, u32 len)
{
	struct page *page = skb_frag_page(f);

	return skb_frag_off(f) == 0 && skb_frag_size(f) == PAGE_SIZE && off + PAGE_SIZE <= len &&
	       !PageCompound(page) && !PageSlab(page) && !PageAnon(page) && !PageLRU(page) &&
	       !READ_ONCE(page->mapping) && !page_mapped(page) && page_ref_count(page) == 1;
}

/*
 * Prepares a non-linear data frame for the engine without copying its
 * payload: the linear part goes to the bounce buffer, and at least the
 * first ME_HDR_MAX bytes (the engine parses the header from there, so
 * every header byte is copied from this frame), and each page fragment
 * past that becomes a segment that placement reads in place.  The linear
 * part may be empty: virtio-net's mergeable buffers leave only the
 * Ethernet header there (pulled before we see the frame) and everything
 * of ours in a fragment.  Returns the number of segments, or -1 if the
 * frame must be copied whole (not a data frame, a frag list, too many
 * fragments).
 */
static int frame_build(struct me_rx_frame *fr, u8 *bounce, struct sk_buff *skb, u32 len)
{
	struct skb_shared_info *sh = skb_shinfo(skb);
	u32 head = skb_headlen(skb), off = head, lin;
	bool owned, flip;
	unsigned int i;
	u8 type;

	fr->buf = bounce;
	fr->len = len;
	fr->nsegs = 0;
	if (skb_has_frag_list(skb) || head >= len)
		return -1;
	lin = max(head, min_t(u32, len, ME_HDR_MAX));
	if (lin < 2 || skb_copy_bits(skb, 0, fr->buf, lin))
		return -1;
	/* Other frames are copied whole by the caller. */
	type = fr->buf[1];
	if (type != ME_PT_WRITE && type != ME_PT_NOTIFY && type != ME_PT_READ_RESP)
		return -1;
	/*
	 * Pages of a clone, a page pool or a sender's memory (tracked, or
	 * untracked over a veth: shared, link.c) are only read.
	 */
	owned = !skb_cloned(skb) && !skb->pp_recycle && !skb_zcopy(skb) &&
		!skb_has_shared_frag(skb);
	flip = owned && me_mr_flip_enabled();
	for (i = 0; i < sh->nr_frags && off < len; i++) {
		const skb_frag_t *f = &sh->frags[i];
		u32 n = min_t(u32, skb_frag_size(f), len - off);
		u32 skip = off < lin ? min(lin - off, n) : 0;

		if (skip < n) {
			if (fr->nsegs == ME_RX_SEGS) {
				fr->nsegs = 0;
				return -1;
			}
			fr->segs[fr->nsegs].off = off + skip;
			fr->segs[fr->nsegs].len = n - skip;
			fr->segs[fr->nsegs].poff = skb_frag_off(f) + skip;
			fr->segs[fr->nsegs].page = skb_frag_page(f);
			fr->segs[fr->nsegs].whole = owned && !skip && frag_is_whole(f, off, len);
			fr->segs[fr->nsegs].flip = flip && fr->segs[fr->nsegs].whole;
			fr->nsegs++;
		}
		off += n;
	}
	if (off < len)		/* cannot be: skb->len covers the frags */
		fr->len = off;
	return fr->nsegs;
}

/*
 * The frame's source address, for the engine: it learns a neighbour's
 * address from a HELLO that validated only, and takes a neighbour's other
 * frames as signs of life only from that address.  0 (no neighbour has
 * it) when there is no valid one.
 */
u64 me_rx_frame_src(const struct sk_buff *skb)
{
	const u8 *src;

	if (!skb_mac_header_was_set(skb))
		return 0;
	src = eth_hdr(skb)->h_source;
	return is_valid_ether_addr(src) ? ether_addr_to_u64(src) : 0;
}

/*
 * Frees a frame the engine is done with into this CPU's NAPI cache of skb
 * heads, which the driver's next receive takes its skb from, instead of
 * the slab (a receive thread freed each head through the slab's slow
 * path while the driver refilled the cache from it in bulk).  The cache
 * is the softirq's: bottom halves off around it.
 */
static void rx_consume(struct sk_buff *skb)
{
	local_bh_disable();
	napi_consume_skb(skb, 1);
	local_bh_enable();
}

/*
 * Frees @skb, keeping the whole pages only it held (frame_build) for the
 * page pool: the frames and staged writes this host builds next take
 * them instead of fresh ones, which the page allocator zeroes (Debian's
 * kernels set init_on_alloc).  Over veth these are the pages a staged
 * write of this host sent: they come back.  A page a flip took, or that
 * anyone else still holds, is not kept (me_pool_put).
 */
static void consume_keep_pages(const struct me_rx_frame *fr, struct sk_buff *skb)
{
	struct page *keep[ME_RX_SEGS];
	unsigned int i, n = 0;

	for (i = 0; i < fr->nsegs; i++) {
		if (fr->segs[i].whole) {
			keep[n] = fr->segs[i].page;
			get_page(keep[n++]);
		}
	}
	rx_consume(skb);
	for (i = 0; i < n; i++)
		me_pool_put(keep[i]);
}

/*
 * Hands @skb from @src to the engine in batch @b and consumes it; a frame
 * with page fragments is built on @fr, its linear part (or all of it, if
 * it must be copied) in @bounce, @bounce_len (the packet size) long.
 */
static void rx_deliver(struct me_link *link, struct me_rx_batch *b, struct sk_buff *skb,
		       u64 src, struct me_rx_frame *fr, u8 *bounce, unsigned int bounce_len)
{
	const void *buf = skb->data;
	u32 len = skb->len;
	int segs;

	if (skb_headlen(skb) < len) {
		/* Only the engine's own bytes matter; the rest is padding. */
		len = min(len, bounce_len);
		segs = frame_build(fr, bounce, skb, len);
		if (segs > 0) {
			me_engine_rx_frame(link->mn, b, link->idx, src, fr);
			consume_keep_pages(fr, skb);
			return;
		}
		if (segs < 0) {
			this_cpu_inc(link->stats->rx_copied);
			if (skb_copy_bits(skb, 0, bounce, len))
				goto out;
		} else {	/* frame_build copied it all */
			len = fr->len;
		}
		buf = bounce;
	}
	me_engine_rx(link->mn, b, link->idx, src, buf, len);
out:
	rx_consume(skb);
}

static void rx_one(struct me_rx_thread *t, struct sk_buff *skb, unsigned int bounce_len)
{
	t->batch.rx_ns = rx_cb(skb)->queued_ns;
	rx_deliver(t->link, &t->batch, skb, rx_cb(skb)->src, &t->frame, t->bounce, bounce_len);
	this_cpu_dec(rx_queued);
}

/*
 * One wakeup's work: @skb and what else the ring holds, up to RX_BATCH
 * frames, as one batch for the engine (one conn_srcu section, the acks
 * the frames ask for sent once per connection at the end).  The batch
 * ends when the ring is empty, so an ack waits only for frames that had
 * already arrived.
 */
static void rx_batch(struct me_rx_thread *t, struct sk_buff *skb, unsigned int bounce_len)
{
	struct me_link *link = t->link;
	unsigned int n = 0;
	int idx;

	this_cpu_write(rx_running, current);
	idx = me_engine_rx_begin(link->mn, &t->batch);
	do {
		rx_one(t, skb, bounce_len);
	} while (++n < RX_BATCH && (skb = ptr_ring_consume(&link->ring)) != NULL);
	me_engine_rx_end(link->mn, &t->batch, idx);
	this_cpu_write(rx_running, NULL);
}

static void rx_running_forget(void)
{
	int cpu;

	for_each_possible_cpu(cpu)
		cmpxchg(per_cpu_ptr(&rx_running, cpu), current, NULL);
}

static int rx_thread(void *arg)
{
	struct me_rx_thread *t = arg;
	struct me_link *link = t->link;
	unsigned int bounce_len = link->mn->packet_size;

	while (!kthread_should_stop()) {
		struct sk_buff *skb;

		skb = ptr_ring_consume(&link->ring);
		if (!skb) {
			/*
			 * Announce the sleep, then look again: a producer
			 * stores its frame before it reads "sleeping" (both
			 * sides have a full barrier in between), so one of
			 * us sees the other.
			 */
			set_current_state(TASK_INTERRUPTIBLE);
			WRITE_ONCE(t->sleeping, true);
			smp_mb();
			skb = ptr_ring_consume(&link->ring);
			if (!skb) {
				/* Idle: the softirq may take frames by reference again. */
				WRITE_ONCE(link->idle_ns, ktime_get_ns());
				atomic_set(&link->direct_left, rx_direct_kb * 1024);
				if (!kthread_should_stop())
					schedule();
				WRITE_ONCE(t->sleeping, false);
				continue;
			}
			WRITE_ONCE(t->sleeping, false);
			__set_current_state(TASK_RUNNING);
		}
		rx_batch(t, skb, bounce_len);
		cond_resched();
	}
	__set_current_state(TASK_RUNNING);
	rx_running_forget();
	return 0;
}

/*
 * May the handler run the engine on @skb itself (DESIGN: softirq-direct
 * against the threads, keep what wins)?  What saves the thread's wakeup,
 * and a context switch, per frame on a quiet link (a ping-pong's hop),
 * when nothing in it can sleep:
 *   - a frame in one linear buffer (small ones), or one whose page
 *     fragments are a sender's memory (a veth's frame by reference:
 *     shared, so no page to flip, which needs the thread's context),
 *     built on this CPU's buffer (rx_direct_bufs);
 *   - of a connection already open, acks or sequenced traffic (an
 *     atomic's compare-and-exchange does not sleep either): never a
 *     HELLO, CONNECT or ACCEPT, which may create a peer or allocate a
 *     connection, nor a CLOSE or ABORT, which end one;
 *   - while the link's ring is empty (a lockless look: a hint), so it
 *     does not overtake frames still queued, and the threads keep the
 *     load when there is any.  It may still be handled before frames a
 *     thread has taken and not finished: one connection's frames are then
 *     handled out of arrival order, as with several threads per link.
 * Placement, completions and the acks and packets a frame releases are
 * bottom-half safe already: the engine's locks are _bh (me_types.h), and
 * areas' page locks and page table updates know softirq (area.c).
 */
static bool rx_direct_ok(struct me_link *link, const struct sk_buff *skb, u64 now)
{
	u32 head = skb_headlen(skb);
	u8 type;

	if (!rx_direct || head < 2 || !__ptr_ring_empty(&link->ring))
		return false;
	if (skb_is_nonlinear(skb) &&
	    (!skb_has_shared_frag(skb) || skb_has_frag_list(skb) || !in_softirq()))
		return false;
	type = skb->data[1];
	/* An ack carrying a packet (wire 9): that packet decides. */
	if (type == ME_PT_ACK && head >= 4 && (skb->data[3] & ME_F_CARRY)) {
		if (head < ME_HDR_ACK + 2)
			return false;
		type = skb->data[ME_HDR_ACK + 1];
	}
	if (type != ME_PT_ACK && type != ME_PT_NACK &&
	    (type < ME_PT_WRITE || type > ME_PT_STATUS) && type != ME_PT_ATOMIC)
		return false;
	/*
	 * By reference: within what is left of the budget (rx_direct_kb).
	 * @now may be older than the threads' last idle stamp (read before
	 * a list's frames): signed, that is "not idle long enough".
	 */
	return !skb_is_nonlinear(skb) ||
	       (rx_direct_kb && (s64)(now - READ_ONCE(link->idle_ns)) >= RX_DIRECT_IDLE_NS &&
		atomic_read(&link->direct_left) > 0 &&
		atomic_sub_return((int)skb->len, &link->direct_left) >= 0);
}

static void rx_direct_one(struct me_link *link, struct sk_buff *skb, u64 src)
{
	struct me_rx_batch b;
	int idx;

	idx = me_engine_rx_begin(link->mn, &b);
	/* A receive thread's own ack over a veth (rx_running). */
	b.handoff = link->copies_refs && num_online_cpus() > 1 &&
		    this_cpu_read(rx_running) == current;
	if (skb_is_nonlinear(skb)) {
		/* Bottom halves are off (rx_direct_ok): this CPU's buffer is ours. */
		struct me_rx_direct *d = this_cpu_ptr(rx_direct_bufs);

		rx_deliver(link, &b, skb, src, &d->frame, d->bounce, link->mn->packet_size);
		skb = NULL;
	} else {
		me_engine_rx(link->mn, &b, link->idx, src, skb->data, skb->len);
	}
	me_engine_rx_end(link->mn, &b, idx);
	this_cpu_inc(link->stats->rx_direct);
	if (skb)
		rx_consume(skb);
}

bool me_rx_enqueue(struct me_link *link, struct sk_buff *skb, u64 src, u64 now)
{
	if (rx_direct_ok(link, skb, now)) {
		rx_direct_one(link, skb, src);
		return false;
	}
	rx_cb(skb)->queued_ns = now;
	rx_cb(skb)->src = src;
	if (ptr_ring_produce(&link->ring, skb)) {
		this_cpu_inc(link->stats->rx_dropped);
		kfree_skb(skb);
		return false;
	}
	this_cpu_inc(rx_queued);
	return true;
}

void me_rx_wake(struct me_link *link)
{
	unsigned int i;

	/* Pairs with rx_thread(): wake a thread only if it may be asleep. */
	smp_mb();
	for (i = 0; i < link->nthreads; i++) {
		struct me_rx_thread *t = &link->threads[(link->next_wake + i) % link->nthreads];

		if (READ_ONCE(t->sleeping)) {
			link->next_wake += i + 1;
			wake_up_process(t->task);
			return;
		}
	}
}

void me_rx_queue_list(struct me_link *link, struct sk_buff *list, u64 src)
{
	u64 now = ktime_get_ns();
	bool queued = false;

	while (list) {
		struct sk_buff *skb = list;

		list = list->next;
		skb_mark_not_on_list(skb);
		queued |= me_rx_enqueue(link, skb, src, now);
	}
	if (queued)
		me_rx_wake(link);
}

static void drain(struct me_link *link)
{
	struct sk_buff *skb;

	while ((skb = ptr_ring_consume(&link->ring)) != NULL) {
		kfree_skb(skb);
		this_cpu_dec(rx_queued);
	}
}

/* Under RTNL, before the link is published. */
int me_rx_start(struct me_link *link, unsigned int packet_size)
{
	struct device *parent = link->dev->dev.parent;
	int node = parent ? dev_to_node(parent) : NUMA_NO_NODE;
	unsigned int i;
	int ret;

	atomic_set(&link->direct_left, rx_direct_kb * 1024);
	ret = ptr_ring_init(&link->ring, rx_ring, GFP_KERNEL);
	if (ret)
		return ret;
	link->nthreads = 0;
	for (i = 0; i < rx_threads; i++) {
		struct me_rx_thread *t = &link->threads[i];
		struct task_struct *task;

		t->link = link;
		t->bounce = kmalloc_node(packet_size, GFP_KERNEL, node);
		if (!t->bounce) {
			ret = -ENOMEM;
			goto err;
		}
		task = kthread_create_on_node(rx_thread, t, node, "me-rx/%s/%u",
					      link->dev->name, i);
		if (IS_ERR(task)) {
			kfree(t->bounce);
			ret = PTR_ERR(task);
			goto err;
		}
		if (node != NUMA_NO_NODE)
			set_cpus_allowed_ptr(task, cpumask_of_node(node));
		t->task = task;
		link->nthreads++;
		wake_up_process(task);
	}
	return 0;

err:
	me_rx_stop(link);
	return ret;
}

/* After the link is unpublished and a grace period passed: no producer. */
void me_rx_stop(struct me_link *link)
{
	unsigned int i;

	for (i = 0; i < link->nthreads; i++) {
		kthread_stop(link->threads[i].task);
		kfree(link->threads[i].bounce);
	}
	link->nthreads = 0;
	drain(link);
	ptr_ring_cleanup(&link->ring, NULL);
}
