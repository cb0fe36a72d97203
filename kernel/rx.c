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
 * A frame's fragments that are whole pages owned by nobody but the skb are
 * not copied into the thread's buffer: they stay "holes" the engine's
 * placement reads from the page, or flips into a receive area (rxframe.h).
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

/* Frames in rings, all links: per CPU, since the handler and threads differ. */
static DEFINE_PER_CPU(long, rx_queued);

/* Frames a thread hands the engine as one batch, at most; then it offers the CPU. */
#define RX_BATCH	64

u64 me_rx_queued(void)
{
	long sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += per_cpu(rx_queued, cpu);
	return sum > 0 ? sum : 0;
}

struct page *me_frame_hole_at(const struct me_rx_frame *fr, u32 off)
{
	unsigned int i;

	for (i = 0; i < fr->nholes && fr->holes[i].off <= off; i++)
		if (fr->holes[i].off == off)
			return fr->holes[i].page;
	return NULL;
}

u32 me_frame_segment(const struct me_rx_frame *fr, u32 off, u32 len, struct page **page,
		     u32 *poff)
{
	unsigned int i;

	*page = NULL;
	for (i = 0; i < fr->nholes; i++) {
		u32 h = fr->holes[i].off;

		if (off >= h && off < h + PAGE_SIZE) {
			*page = fr->holes[i].page;
			*poff = off - h;
			return min_t(u32, len, h + PAGE_SIZE - off);
		}
		if (h > off)
			return min_t(u32, len, h - off);
	}
	return len;
}

void me_frame_fill(struct me_rx_frame *fr)
{
	unsigned int i;

	for (i = 0; i < fr->nholes; i++)
		memcpy_from_page(fr->buf + fr->holes[i].off, fr->holes[i].page, 0, PAGE_SIZE);
	fr->nholes = 0;
}

/*
 * May fragment @f (frame offset @off, the frame @len long) stay a hole?
 * Only a whole order-0 page nobody else references: then the flip that
 * takes it leaves nothing the stack or a driver still uses.  And only past
 * the header: the engine parses [0, ME_HDR_MAX) from the bounce buffer, so
 * every header byte must be copied there from this frame (a hole would
 * leave the previous frame's bytes in its place).
 */
static bool frag_is_hole(const skb_frag_t *f, u32 off, u32 len)
{
	struct page *page = skb_frag_page(f);

	return off >= ME_HDR_MAX && skb_frag_off(f) == 0 && skb_frag_size(f) == PAGE_SIZE &&
	       off + PAGE_SIZE <= len && !PageCompound(page) && !PageSlab(page) &&
	       !PageAnon(page) && !page_mapped(page) && page_ref_count(page) == 1;
}

/*
 * Linearizes a non-linear frame into the bounce buffer, leaving whole
 * exclusively owned pages of data frames out as holes.  Returns the number
 * of holes, or -1 if it did not look at the frame (nothing copied).
 */
static int frame_build(struct me_rx_thread *t, struct sk_buff *skb, u32 len)
{
	struct me_rx_frame *fr = &t->frame;
	struct skb_shared_info *sh = skb_shinfo(skb);
	u32 head = skb_headlen(skb), off = head;
	unsigned int i;
	u8 type;

	fr->buf = t->bounce;
	fr->len = len;
	fr->nholes = 0;
	if (skb_cloned(skb) || skb->pp_recycle || skb_zcopy(skb) || skb_has_frag_list(skb) ||
	    head < 2 || head >= len)
		return -1;
	type = skb->data[1];
	if (type != ME_PT_WRITE && type != ME_PT_NOTIFY && type != ME_PT_READ_RESP)
		return -1;
	memcpy(fr->buf, skb->data, head);
	/* Other fragments by skb_copy_bits: one may span a compound page's pages. */
	for (i = 0; i < sh->nr_frags && off < len; i++) {
		const skb_frag_t *f = &sh->frags[i];
		u32 n = min_t(u32, skb_frag_size(f), len - off);

		if (fr->nholes < ME_RX_HOLES && frag_is_hole(f, off, len)) {
			fr->holes[fr->nholes].off = off;
			fr->holes[fr->nholes].page = skb_frag_page(f);
			fr->nholes++;
		} else if (skb_copy_bits(skb, off, fr->buf + off, n)) {
			fr->nholes = 0;		/* rx_one copies it whole */
			return -1;
		}
		off += n;
	}
	if (off < len)		/* cannot be: skb->len covers the frags */
		fr->len = off;
	return fr->nholes;
}

/*
 * The frame's source address, for the engine: it learns a neighbour's
 * address from a HELLO that validated only, and takes a neighbour's other
 * frames as signs of life only from that address.  0 (no neighbour has
 * it) when there is no valid one.
 */
static u64 frame_src(struct sk_buff *skb)
{
	const u8 *src;

	if (!skb_mac_header_was_set(skb))
		return 0;
	src = eth_hdr(skb)->h_source;
	return is_valid_ether_addr(src) ? ether_addr_to_u64(src) : 0;
}

static void rx_one(struct me_rx_thread *t, struct sk_buff *skb, unsigned int bounce_len)
{
	struct me_link *link = t->link;
	const void *buf = skb->data;
	u64 src = frame_src(skb);
	u32 len = skb->len;
	int holes;

	if (skb_headlen(skb) < len) {
		/* Only the engine's own bytes matter; the rest is padding. */
		len = min(len, bounce_len);
		holes = me_mr_flip_enabled() ? frame_build(t, skb, len) : -1;
		this_cpu_inc(link->stats->rx_copied);
		if (holes > 0) {
			me_engine_rx_frame(link->mn, &t->batch, link->idx, src, &t->frame);
			goto out;
		}
		if (holes < 0 && skb_copy_bits(skb, 0, t->bounce, len))
			goto out;
		if (!holes)	/* frame_build copied it all */
			len = t->frame.len;
		buf = t->bounce;
	}
	me_engine_rx(link->mn, &t->batch, link->idx, src, buf, len);
out:
	consume_skb(skb);
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

	idx = me_engine_rx_begin(link->mn, &t->batch);
	do {
		rx_one(t, skb, bounce_len);
	} while (++n < RX_BATCH && (skb = ptr_ring_consume(&link->ring)) != NULL);
	me_engine_rx_end(link->mn, &t->batch, idx);
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
	return 0;
}

/* Softirq, under rcu_read_lock: the link cannot be stopped meanwhile. */
void me_rx_queue(struct me_link *link, struct sk_buff *skb)
{
	unsigned int i;

	if (ptr_ring_produce(&link->ring, skb)) {
		this_cpu_inc(link->stats->rx_dropped);
		kfree_skb(skb);
		return;
	}
	this_cpu_inc(rx_queued);
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

	if (rx_threads < 1 || rx_threads > ME_RX_THREADS_MAX || rx_ring < 64 || rx_ring > 65536) {
		pr_err("bad parameter: rx_threads=%u (1..%u) rx_ring=%u (64..65536)\n",
		       rx_threads, ME_RX_THREADS_MAX, rx_ring);
		return -EINVAL;
	}
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
