// SPDX-License-Identifier: GPL-2.0
/*
 * Links: the Ethernet devices multiedge uses, its ethertype handler and its
 * transmit path.
 *
 * One packet_type serves every namespace and device; a frame counts for a
 * link only if it arrives on a device attached in that device's namespace.
 * The handler queues it to the link's receive threads (rx.c).  Each link
 * takes an engine slot (0..ME_MAX_LINKS-1); the engine names links by slot.
 *
 * Lifetime: a link holds a tracked reference on its net_device from attach
 * to detach.  Writers (attach, detach, the netdevice notifier, namespace
 * exit) hold RTNL; the receive handler and transmitters find links under
 * RCU, so detach unpublishes, waits for a grace period, then stops the
 * link's threads and frees it.
 */
#include <linux/etherdevice.h>
#include <linux/ethtool.h>
#include <linux/if_arp.h>
#include <linux/if_ether.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/percpu.h>
#include <linux/rculist.h>
#include <linux/rtnetlink.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <net/rtnetlink.h>

#include "area.h"
#include "compat.h"
#include "core/me_core.h"
#include "core/wire.h"
#include "engine.h"
#include "link.h"
#include "mr.h"
#include "netns.h"
#include "stage.h"
#include "train.h"
#include "txbatch.h"
#include "txheads.h"
#include "uapi/multiedge.h"

static ushort ethertype = ME_DEFAULT_ETHERTYPE;
module_param(ethertype, ushort, 0444);
MODULE_PARM_DESC(ethertype,
		 "Ethernet type of multiedge frames (default 0x88B5, must be >= 0x0600)");

static char *links;
module_param(links, charp, 0444);
MODULE_PARM_DESC(links,
		 "Comma-separated devices of the initial namespace to attach at load");

static bool tx_veth_track;
module_param(tx_veth_track, bool, 0444);
MODULE_PARM_DESC(tx_veth_track,
		 "Track frames sent by reference over a veth as over a NIC: the write completes once the stack released them, and the veth copies their pages (default 0: untracked, passed on as they are)");

/* Module-wide receive counters, per CPU (the handler runs on every CPU). */
struct me_rx_pcpu {
	u64 frames;
	u64 dropped;
};
static DEFINE_PER_CPU(struct me_rx_pcpu, rx_stats);

static struct me_link *find_link_rcu(struct me_net *mn, const struct net_device *dev)
{
	struct me_link *link;

	list_for_each_entry_rcu(link, &mn->links, node, lockdep_rtnl_is_held())
		if (link->dev == dev)
			return link;
	return NULL;
}

static bool link_is_up(const struct net_device *dev)
{
	return netif_running(dev) && netif_oper_up(dev);
}

/*
 * Softirq (or a threaded NAPI context with BH off), under rcu_read_lock:
 * @skb, which arrived on @dev, to its link, stamped @now.  *@wake is set
 * to the link whose ring took it (a thread to wake), else left alone.
 */
static int link_rcv_one(struct sk_buff *skb, struct net_device *dev, u64 now,
			struct me_link **wake)
{
	/* A train counts as the frames it carries (train.c). */
	unsigned int frames = me_train_frames(skb);
	struct me_link *link;

	this_cpu_add(rx_stats.frames, frames);
	link = find_link_rcu(me_net(dev_net(dev)), dev);
	if (!link || skb->pkt_type == PACKET_OTHERHOST)
		goto drop;
	/* Another tap may share it; the threads need their own. */
	skb = skb_share_check(skb, GFP_ATOMIC);
	if (!skb) {
		this_cpu_add(rx_stats.dropped, frames);
		return NET_RX_DROP;
	}
	if (me_train_is(skb)) {
		me_train_rcv(link, skb, me_rx_frame_src(skb));
		return NET_RX_SUCCESS;
	}
	this_cpu_inc(link->stats->rx_frames);
	this_cpu_add(link->stats->rx_bytes, skb->len);
	if (me_rx_enqueue(link, skb, me_rx_frame_src(skb), now))
		*wake = link;
	return NET_RX_SUCCESS;

drop:
	this_cpu_add(rx_stats.dropped, frames);
	kfree_skb(skb);
	return NET_RX_DROP;
}

/* One frame (a backlog's, a veth's, a driver without receive lists). */
static int me_link_rcv(struct sk_buff *skb, struct net_device *dev,
		       struct packet_type *pt, struct net_device *orig_dev)
{
	struct me_link *wake = NULL;
	int ret = link_rcv_one(skb, dev, ktime_get_ns(), &wake);

	if (wake)
		me_rx_wake(wake);
	return ret;
}

/*
 * A NAPI poll's frames for us, as a list (netif_receive_skb_list(), GRO's
 * flush: up to gro_normal_batch at a time): one clock read for all of
 * them, which arrived before the poll began, and one wakeup per link
 * instead of one per frame.  A list holds frames of one original device;
 * each frame's own device (a VLAN's) finds its link.
 */
static void me_link_rcv_list(struct list_head *head, struct packet_type *pt,
			     struct net_device *orig_dev)
{
	struct me_link *wake = NULL, *link;
	struct sk_buff *skb, *next;
	u64 now = ktime_get_ns();

	list_for_each_entry_safe(skb, next, head, list) {
		skb_list_del_init(skb);
		link = NULL;
		link_rcv_one(skb, skb->dev, now, &link);
		if (link && link != wake) {
			if (wake)
				me_rx_wake(wake);
			wake = link;
		}
	}
	if (wake)
		me_rx_wake(wake);
}

static struct packet_type me_packet_type __read_mostly = {
	.func = me_link_rcv,
	.list_func = me_link_rcv_list,
	.ignore_outgoing = true,
};

/* Frames sent by reference whose data the stack has not released yet. */
static atomic64_t zc_skbs = ATOMIC64_INIT(0);

/*
 * A copy of @n bytes of @mr at @off into a new page at @poff: the piece of
 * a staged write whose staged page went with an earlier frame (this is
 * its retransmission).
 */
static struct page *copy_piece(const struct me_mr *mr, u64 off, u32 poff, u32 n)
{
	struct page *page = me_pool_get(GFP_ATOMIC);
	void *va;
	int err;

	if (!page)
		return NULL;
	va = kmap_local_page(page);
	err = me_mr_read(mr, off, va + poff, n);
	kunmap_local(va);
	if (err) {
		put_page(page);
		return NULL;
	}
	return page;
}

/*
 * Adds [off, off + len) of @mr's pinned pages (or, with @st, their copies:
 * staged, or made now) to @skb as fragments, each page with a reference
 * of its own (dropped when the skb's data go).
 */
static int add_page_frags(struct sk_buff *skb, const struct me_mr *mr, struct me_stage *st,
			  u64 off, u32 len)
{
	u64 pos = (mr->addr & ~PAGE_MASK) + off;
	int i = skb_shinfo(skb)->nr_frags;

	if (off > mr->length || len > mr->length - off)
		return -ERANGE;
	while (len) {
		unsigned long pg = pos >> PAGE_SHIFT;
		u32 poff = pos & ~PAGE_MASK;
		u32 n = min_t(u32, len, PAGE_SIZE - poff);
		struct page *page;

		if (pg >= mr->npages || i >= MAX_SKB_FRAGS)
			return -ERANGE;
		if (st) {
			page = me_stage_take(st, pos, n) ?: copy_piece(mr, off, poff, n);
			if (!page)
				return -ENOMEM;
		} else {
			page = me_mr_page_get(mr, pg);
		}
		skb_fill_page_desc(skb, i++, page, poff, n);
		skb->len += n;
		skb->data_len += n;
		skb->truesize += n;
		pos += n;
		off += n;
		len -= n;
	}
	return 0;
}

/*
 * Bytes of a copied frame to keep in the skb's linear part: a data
 * packet carrying a page or more keeps only its header there and its
 * payload goes into page fragments, so a receiver that gets the skb itself
 * (veth) finds whole payload pages it can flip (paper Fig. 4: header and
 * payload apart, the payload page-aligned).
 */
static u32 linear_len(const u8 *buf, u32 len)
{
	u32 hl;

	if (len < ME_HDR_COMMON || (buf[1] != ME_PT_WRITE && buf[1] != ME_PT_NOTIFY &&
				    buf[1] != ME_PT_READ_RESP))
		return len;
	hl = get_unaligned_be16(buf + 4);
	return hl < len && len - hl >= PAGE_SIZE ? hl : len;
}

/* Copies @len bytes into page fragments (pool pages), PAGE_SIZE each. */
static int add_copied_frags(struct sk_buff *skb, const u8 *src, u32 len)
{
	int i = 0;

	while (len) {
		u32 n = min_t(u32, len, PAGE_SIZE);
		struct page *page;

		if (i >= MAX_SKB_FRAGS)
			return -EMSGSIZE;
		page = me_pool_get(GFP_ATOMIC);
		if (!page)
			return -ENOMEM;
		memcpy_to_page(page, 0, src, n);
		skb_fill_page_desc(skb, i++, page, 0, n);
		skb->len += n;
		skb->data_len += n;
		skb->truesize += PAGE_SIZE;
		src += n;
		len -= n;
	}
	return 0;
}

/*
 * Copies [off, off + len) of @mr into the skb: behind its header if the
 * payload is less than a page, else into page fragments (pool pages) as
 * linear_len() keeps a copied frame's payload apart.
 */
static int add_mr_copy(struct sk_buff *skb, const struct me_mr *mr, u64 off, u32 len)
{
	int i = skb_shinfo(skb)->nr_frags;

	if (len < PAGE_SIZE)
		return me_mr_read(mr, off, skb_put(skb, len), len);
	while (len) {
		u32 n = min_t(u32, len, PAGE_SIZE);
		struct page *page;

		if (i >= MAX_SKB_FRAGS)
			return -EMSGSIZE;
		page = copy_piece(mr, off, 0, n);
		if (!page)
			return -ENOMEM;
		skb_fill_page_desc(skb, i++, page, 0, n);
		skb->len += n;
		skb->data_len += n;
		skb->truesize += PAGE_SIZE;
		off += n;
		len -= n;
	}
	return 0;
}

/*
 * An skb whose head (@size bytes: headroom, our header, tailroom) is a
 * piece of a page: one per frame sent, and at MTU 1500 over veth the
 * kmalloc() of a head (zeroed, as Debian's kernels set init_on_alloc)
 * and its slab's slow path on the freeing CPU were 6% of the busy time
 * of a stream.  With bottom halves off (a pump's transmit burst) the
 * piece comes from the CPU's own ring of pages, reused once their frames
 * are gone (txheads.c), and the sk_buff from the per-CPU NAPI cache,
 * which the slab fills sixteen at a time; else from the stack's page
 * fragment cache, or, larger than a page (a linear frame for a device
 * without scatter-gather), kmalloc()ed.
 */
struct sk_buff *me_link_alloc_skb(unsigned int size)
{
	unsigned int truesize = SKB_DATA_ALIGN(size) +
				SKB_DATA_ALIGN(sizeof(struct skb_shared_info));
	bool bh_off = in_softirq() && !in_hardirq();
	struct sk_buff *skb;
	void *data;

	data = bh_off ? me_txheads_alloc(truesize) : NULL;
	if (!data && truesize > PAGE_SIZE)
		return alloc_skb(size, GFP_ATOMIC);
	if (!data)
		data = bh_off ? napi_alloc_frag(truesize) : netdev_alloc_frag(truesize);
	if (!data)
		return NULL;
	skb = bh_off ? napi_build_skb(data, truesize) : build_skb(data, truesize);
	if (!skb)
		skb_free_frag(data);
	return skb;
}

/*
 * May a frame go by reference over @link without being tracked?  Over a
 * veth a tracked frame's pages are copied before the peer sees them
 * (skb_orphan_frags_rx), in whatever context transmits: the copy the
 * reference was to save, and one TCP's splice does not make.  Untracked,
 * the pages reach the receiver's placement as they are, one copy in all;
 * its write still completes only once the peer acknowledged every packet
 * of it, that is placed it, so a frame that reads the pages after that is
 * a duplicate, which the receiver drops (zerocopy_test shows it with the
 * buffer reused under frames held in a queue).  The pages themselves stay
 * alive by the frame's references.  A NIC reads the pages by DMA after
 * dev_queue_xmit() returns: there, and with tx_veth_track, the write waits
 * for the stack to release its frames (Table 1 state 1).
 */
static bool untracked(const struct me_link *link)
{
	return link->copies_refs && !tx_veth_track;
}

/*
 * Sends @hdr (and, with @mr, [off, off + plen) of its pages by reference,
 * tracked by @uarg, whose callback runs once the skb's data are released,
 * or untracked over a veth (untracked()); or of their copies in @st, which
 * nothing tracks; copied instead for a device without scatter-gather, and
 * for a read's answer, without @uarg or @st, except where it goes by
 * reference: see the rule at `copy` below) on link @idx.
 * Without @mr, @hdr is the whole packet; a page or more of payload goes
 * into page fragments behind the header (linear_len).  Inside a transmit
 * burst the frame is held and sent when the burst ends (txbatch.c).
 */
static int link_xmit(struct me_net *mn, u32 idx, u64 to, const void *hdr, u32 hlen,
		     const struct me_mr *mr, struct me_stage *st, u64 off, u32 plen,
		     struct ubuf_info *uarg)
{
	u8 dst[ETH_ALEN];
	struct net_device *dev;
	struct me_link *link;
	struct sk_buff *skb;
	int ret = -ENETDOWN;
	bool sg, copy;
	u32 lin;

	if (idx >= ME_MAX_LINKS || hlen < 16)
		return -EINVAL;
	rcu_read_lock();
	link = rcu_dereference(mn->slots[idx]);
	if (!link)
		goto out;
	dev = link->dev;
	if (!READ_ONCE(link->up))
		goto err;
	/*
	 * A device without scatter-gather gets linear frames: the stack would
	 * linearize fragments before the driver anyway, and for a frame sent
	 * by reference first copy the pinned pages into new ones
	 * (skb_copy_ubufs) — two copies and three allocations for one.
	 */
	sg = READ_ONCE(dev->features) & NETIF_F_SG;
	/*
	 * A read's answer: by reference only over a veth, and only where
	 * its payload would go into page fragments anyway: a frame in one
	 * linear buffer is taken by the receiving softirq at once
	 * (rx_direct), which at one read in flight is faster than the pages
	 * saved (benchmarks.md).  Not with staging on either: a receive
	 * area flips pool pages, never the answering process's (rx.c).
	 */
	copy = mr && sg && !st && !uarg &&
	       (!untracked(link) || plen < PAGE_SIZE || me_stage_on());
	ret = -ENOMEM;
	lin = mr || !sg ? hlen : linear_len(hdr, hlen);
	skb = me_link_alloc_skb(LL_RESERVED_SPACE(dev) + lin +
				(mr && (!sg || (copy && plen < PAGE_SIZE)) ? plen : 0) +
				dev->needed_tailroom);
	if (!skb)
		goto err;
	skb_reserve(skb, LL_RESERVED_SPACE(dev));
	skb_reset_network_header(skb);
	skb_put_data(skb, hdr, lin);
	if (lin < hlen) {
		ret = add_copied_frags(skb, (const u8 *)hdr + lin, hlen - lin);
		if (ret) {
			kfree_skb(skb);
			goto err;
		}
	}
	if (mr && !sg) {
		ret = me_mr_read(mr, off, skb_put(skb, plen), plen);
		if (ret) {
			kfree_skb(skb);
			goto err;
		}
	} else if (copy) {
		ret = add_mr_copy(skb, mr, off, plen);
		if (ret) {
			kfree_skb(skb);
			goto err;
		}
	} else if (mr) {
		ret = add_page_frags(skb, mr, st, off, plen);
		if (ret) {
			kfree_skb(skb);
			goto err;
		}
		if (!st && (!uarg || untracked(link))) {
			/* Writers of its data copy shared fragments first. */
			skb_shinfo(skb)->flags |= SKBFL_SHARED_FRAG;
			this_cpu_inc(link->stats->tx_zc_frames);
		} else if (!st) {
			/* From here the skb's release drops the reference it takes. */
			refcount_inc(&uarg->refcnt);
			atomic64_inc(&zc_skbs);
			skb_zcopy_init(skb, uarg);
			this_cpu_inc(link->stats->tx_zc_frames);
		}
	}
	skb->dev = dev;
	skb->protocol = htons(ethertype);
	/* The neighbour's address, learned by the engine from its HELLO. */
	if (to == ME_ADDR_BCAST)
		eth_broadcast_addr(dst);
	else
		u64_to_ether_addr(to, dst);
	if (dev_hard_header(skb, dev, ethertype, dst, dev->dev_addr, skb->len) < 0) {
		kfree_skb(skb);
		ret = -EINVAL;
		goto err;
	}
	this_cpu_inc(link->stats->tx_frames);
	this_cpu_add(link->stats->tx_bytes, hlen + plen);
	if (!me_txb_add(link, skb) && dev_queue_xmit(skb) != NET_XMIT_SUCCESS) {
		me_link_tx_failed(link, 1, hlen + plen);
		ret = -ENOBUFS;
		goto out;
	}
	rcu_read_unlock();
	return 0;
err:
	this_cpu_inc(link->stats->tx_errors);
out:
	rcu_read_unlock();
	return ret;
}

void me_link_tx_failed(struct me_link *link, u32 frames, u32 bytes)
{
	this_cpu_sub(link->stats->tx_frames, frames);
	this_cpu_sub(link->stats->tx_bytes, bytes);
	this_cpu_inc(link->stats->tx_errors);
}

u64 me_link_zc_skbs(void)
{
	return atomic64_read(&zc_skbs);
}

void me_link_zc_released(void)
{
	atomic64_dec(&zc_skbs);
}

int me_link_xmit(struct me_net *mn, u32 idx, u64 dst, const void *buf, u32 len)
{
	return link_xmit(mn, idx, dst, buf, len, NULL, NULL, 0, 0, NULL);
}

int me_link_xmit_zc(struct me_net *mn, u32 idx, u64 dst, const void *hdr, u32 hlen,
		    const struct me_mr *mr, u64 off, u32 plen, struct ubuf_info *uarg)
{
	return link_xmit(mn, idx, dst, hdr, hlen, mr, NULL, off, plen, uarg);
}

int me_link_xmit_staged(struct me_net *mn, u32 idx, u64 dst, const void *hdr, u32 hlen,
			const struct me_mr *mr, struct me_stage *st, u64 off, u32 plen)
{
	return link_xmit(mn, idx, dst, hdr, hlen, mr, st, off, plen, NULL);
}

int me_link_xmit_answer(struct me_net *mn, u32 idx, u64 dst, const void *hdr, u32 hlen,
			const struct me_mr *mr, u64 off, u32 plen)
{
	return link_xmit(mn, idx, dst, hdr, hlen, mr, NULL, off, plen, NULL);
}

/*
 * Does @dev copy the pages of a tracked frame sent by reference before
 * anyone sees it?  A veth hands its frames to the peer's stack, which
 * copies them (skb_orphan_frags_rx) in the transmitting context
 * (untracked()).
 */
static bool dev_copies_refs(const struct net_device *dev)
{
	return dev->rtnl_link_ops && !strcmp(dev->rtnl_link_ops->kind, "veth");
}

static unsigned int link_speed(struct net_device *dev)
{
	struct ethtool_link_ksettings ks;

	if (__ethtool_get_link_ksettings(dev, &ks) || ks.base.speed == (u32)SPEED_UNKNOWN ||
	    !ks.base.speed)
		return 10000;	/* unknown (virtual devices): assume 10G */
	return ks.base.speed;
}

/* The engine uses a link only while it is up and carries whole packets. */
static void update_admin(struct me_net *mn, struct me_link *link)
{
	me_engine_link_admin(mn, link->idx, link->up && link->mtu >= mn->packet_size);
}

static int free_slot(struct me_net *mn)
{
	int i;

	for (i = 0; i < ME_MAX_LINKS; i++)
		if (!rtnl_dereference(mn->slots[i]))
			return i;
	return -ENOSPC;
}

bool me_link_slot_used(struct me_net *mn, unsigned int idx)
{
	return idx < ME_MAX_LINKS && rtnl_dereference(mn->slots[idx]);
}

int me_link_attach(struct net *net, const char *ifname)
{
	struct me_net *mn = me_net(net);
	struct net_device *dev;
	struct me_link *link;
	int idx, ret;

	ASSERT_RTNL();
	dev = __dev_get_by_name(net, ifname);
	if (!dev)
		return -ENODEV;
	if (dev->type != ARPHRD_ETHER || dev->addr_len != ETH_ALEN)
		return -EINVAL;
	if (find_link_rcu(mn, dev))
		return -EEXIST;
	idx = free_slot(mn);
	if (idx < 0)
		return idx;
	if (dev->mtu < ME_MIN_PACKET || (mn->core && dev->mtu < mn->packet_size))
		return -EMSGSIZE;
	if (!mn->core) {
		ret = me_engine_start(mn, min_t(unsigned int, dev->mtu, ME_MAX_PACKET));
		if (ret)
			return ret;
	}

	link = kzalloc(sizeof(*link), GFP_KERNEL);
	if (!link)
		return -ENOMEM;
	link->stats = alloc_percpu(struct me_link_pcpu);
	if (!link->stats) {
		ret = -ENOMEM;
		goto err_free;
	}
	link->mn = mn;
	link->dev = dev;
	link->idx = idx;
	link->mtu = dev->mtu;
	link->up = link_is_up(dev);
	link->copies_refs = dev_copies_refs(dev);
	ret = me_engine_link_add(mn, idx, dev->mtu, link_speed(dev));
	if (ret)
		goto err_stats;
	ret = me_rx_start(link, mn->packet_size);
	if (ret)
		goto err_engine;
	netdev_hold(dev, &link->dev_tracker, GFP_KERNEL);
	update_admin(mn, link);
	rcu_assign_pointer(mn->slots[idx], link);
	list_add_tail_rcu(&link->node, &mn->links);
	WRITE_ONCE(mn->nr_links, mn->nr_links + 1);
	if (link->copies_refs)
		WRITE_ONCE(mn->nr_links_copy, mn->nr_links_copy + 1);
	pr_debug("link %s attached as %d (mtu %u, %s)\n", dev->name, idx, link->mtu,
		 link->up ? "up" : "down");
	return 0;

err_engine:
	me_engine_link_del(mn, idx);
err_stats:
	free_percpu(link->stats);
err_free:
	kfree(link);
	return ret;
}

static void detach(struct me_net *mn, struct me_link *link)
{
	ASSERT_RTNL();
	/* The engine stops choosing it and moves its packets elsewhere. */
	me_engine_link_del(mn, link->idx);
	RCU_INIT_POINTER(mn->slots[link->idx], NULL);
	list_del_rcu(&link->node);
	WRITE_ONCE(mn->nr_links, mn->nr_links - 1);
	if (link->copies_refs)
		WRITE_ONCE(mn->nr_links_copy, mn->nr_links_copy - 1);
	/* No handler or transmitter can see it after this. */
	synchronize_net();
	me_rx_stop(link);
	pr_debug("link %s detached\n", link->dev->name);
	netdev_put(link->dev, &link->dev_tracker);
	free_percpu(link->stats);
	kfree(link);
}

int me_link_detach(struct net *net, const char *ifname)
{
	struct me_net *mn = me_net(net);
	struct net_device *dev;
	struct me_link *link;

	ASSERT_RTNL();
	dev = __dev_get_by_name(net, ifname);
	link = dev ? find_link_rcu(mn, dev) : NULL;
	if (!link)
		return -ENOENT;
	detach(mn, link);
	return 0;
}

void me_link_detach_all(struct me_net *mn)
{
	struct me_link *link, *tmp;

	list_for_each_entry_safe(link, tmp, &mn->links, node)
		detach(mn, link);
}

static void sum_stats(struct me_link *link, struct me_link_pcpu *sum)
{
	int cpu;

	memset(sum, 0, sizeof(*sum));
	for_each_possible_cpu(cpu) {
		const struct me_link_pcpu *p = per_cpu_ptr(link->stats, cpu);

		sum->rx_frames += p->rx_frames;
		sum->rx_bytes += p->rx_bytes;
		sum->rx_dropped += p->rx_dropped;
		sum->rx_copied += p->rx_copied;
		sum->rx_direct += p->rx_direct;
		sum->rx_trains += p->rx_trains;
		sum->tx_frames += p->tx_frames;
		sum->tx_bytes += p->tx_bytes;
		sum->tx_errors += p->tx_errors;
		sum->tx_zc_frames += p->tx_zc_frames;
		sum->tx_trains += p->tx_trains;
	}
}

unsigned int me_link_list(struct net *net, struct me_link_info *out, unsigned int room)
{
	struct me_net *mn = me_net(net);
	struct me_link *link;
	unsigned int n = 0;

	ASSERT_RTNL();
	list_for_each_entry(link, &mn->links, node) {
		if (n < room) {
			struct me_link_info *li = &out[n];
			struct me_link_pcpu s;
			u32 nbrs, alive, only;

			sum_stats(link, &s);
			memset(li, 0, sizeof(*li));
			strscpy(li->ifname, link->dev->name, sizeof(li->ifname));
			li->ifindex = link->dev->ifindex;
			li->mtu = link->mtu;
			me_link_counts(mn->core, link->idx, &nbrs, &alive, &only);
			li->flags = (link->up ? ME_LINK_F_UP : 0) |
				    (alive ? ME_LINK_F_ALIVE : 0);
			li->nbrs = nbrs;
			li->nbrs_alive = alive;
			li->index = link->idx;
			li->rx_frames = s.rx_frames;
			li->rx_bytes = s.rx_bytes;
			li->peer_node = only;
			li->rate_mbps = me_link_rate(mn->core, link->idx) * 8;
			li->tx_frames = s.tx_frames;
			li->tx_bytes = s.tx_bytes;
			li->rx_dropped = s.rx_dropped;
			li->tx_errors = s.tx_errors;
			li->rx_copied = s.rx_copied;
			li->tx_zc_frames = s.tx_zc_frames;
			li->rx_direct = s.rx_direct;
			li->tx_trains = s.tx_trains;
			li->rx_trains = s.rx_trains;
		}
		n++;
	}
	return n;
}

/* Device events, under RTNL. */
static int me_netdev_event(struct notifier_block *nb, unsigned long event, void *ptr)
{
	struct net_device *dev = netdev_notifier_info_to_dev(ptr);
	struct me_net *mn = me_net(dev_net(dev));
	struct me_link *link = find_link_rcu(mn, dev);

	if (!link)
		return NOTIFY_DONE;

	switch (event) {
	case NETDEV_UP:
	case NETDEV_DOWN:
	case NETDEV_CHANGE:
		WRITE_ONCE(link->up, link_is_up(dev));
		update_admin(mn, link);
		pr_debug("link %s %s\n", dev->name, link->up ? "up" : "down");
		break;
	case NETDEV_CHANGEMTU:
		link->mtu = dev->mtu;
		update_admin(mn, link);
		if (link->mtu < mn->packet_size)
			pr_info("link %s: mtu %u below the packet size %u: not used until raised\n",
				dev->name, link->mtu, mn->packet_size);
		break;
	case NETDEV_UNREGISTER:
		/* Also sent when the device moves to another namespace. */
		detach(mn, link);
		break;
	}
	return NOTIFY_DONE;
}

static struct notifier_block me_netdev_notifier = {
	.notifier_call = me_netdev_event,
};

/* Attaches the devices named by the links= parameter in the initial namespace. */
static int attach_param_links(void)
{
	char *list, *cur, *name;
	int ret = 0;

	if (!links || !*links)
		return 0;
	list = kstrdup(links, GFP_KERNEL);
	if (!list)
		return -ENOMEM;
	cur = list;
	rtnl_lock();
	while ((name = strsep(&cur, ",")) != NULL) {
		if (!*name)
			continue;
		ret = me_link_attach(&init_net, name);
		if (ret) {
			pr_err("links=: cannot attach %s: %d\n", name, ret);
			me_link_detach_all(me_net(&init_net));
			break;
		}
	}
	rtnl_unlock();
	kfree(list);
	return ret;
}

int me_link_init(void)
{
	int ret;

	/* Values below 0x0600 are 802.3 lengths, not ethertypes. */
	if (ethertype < ETH_P_802_3_MIN) {
		pr_err("ethertype 0x%04x is an 802.3 length, not an ethertype (need >= 0x%04x)\n",
		       ethertype, ETH_P_802_3_MIN);
		return -EINVAL;
	}

	ret = me_rx_init();
	if (ret)
		return ret;
	ret = me_netns_init();
	if (ret)
		goto err_rx;
	ret = register_netdevice_notifier(&me_netdev_notifier);
	if (ret)
		goto err_netns;
	me_train_init(ethertype);
	me_packet_type.type = htons(ethertype);
	dev_add_pack(&me_packet_type);
	ret = attach_param_links();
	if (ret)
		goto err_pack;
	return 0;

err_pack:
	dev_remove_pack(&me_packet_type);
	me_train_uninit();
	unregister_netdevice_notifier(&me_netdev_notifier);
err_netns:
	me_netns_uninit();
err_rx:
	me_rx_exit();
	return ret;
}

/*
 * Sleeps: dev_remove_pack() waits for handlers running on other CPUs.  The
 * notifier goes before the per-namespace state it reads; unregistering it
 * replays NETDEV_UNREGISTER for every device, which detaches every link.
 * Namespace exit then stops the engines.
 */
void me_link_uninit(void)
{
	dev_remove_pack(&me_packet_type);
	unregister_netdevice_notifier(&me_netdev_notifier);
	me_netns_uninit();
	/*
	 * A train still queued elsewhere (a shaper on a bridge port) is
	 * dropped from here on instead of segmented: nothing in it points
	 * into the module.
	 */
	me_train_uninit();
	me_rx_exit();
}

u16 me_link_ethertype(void)
{
	return ethertype;
}

void me_link_get_stats(struct me_link_stats *stats)
{
	int cpu;

	memset(stats, 0, sizeof(*stats));
	for_each_possible_cpu(cpu) {
		stats->rx_frames += per_cpu(rx_stats, cpu).frames;
		stats->rx_dropped += per_cpu(rx_stats, cpu).dropped;
	}
}
