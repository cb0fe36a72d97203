// SPDX-License-Identifier: GPL-2.0
/*
 * Transmit bursts: the frames the packetizer sends in one pass reach the
 * driver together, all but the last marked xmit_more, so the NIC is told
 * once (virtio-net: one doorbell, a VM exit, instead of one per frame).
 *
 * dev_queue_xmit() cannot say "more follows", so a burst goes straight to
 * the driver under its queue's lock, as the stack itself does for an
 * empty qdisc that may be bypassed (noqueue, pfifo_fast) and as pktgen
 * does; fq_codel, the usual default, is bypassed when empty too.  Anything
 * else (tbf, netem, htb: shaping the user asked for), a queue that holds
 * packets, egress filters (tc clsact, BPF, netfilter), a packet tap
 * (tcpdump) or a stopped driver queue sends the frames through
 * dev_queue_xmit() one by one, as without bursts.
 *
 * Frames are held per CPU and per link slot (a connection striped over
 * several links still sends bursts on each).  The engine opens a burst
 * holding a spinlock with bottom halves off (me_plat.h, tx_burst), so
 * nothing else runs on this CPU's burst until it closes, and the devices
 * of held frames cannot go (bottom halves off is an RCU read side; a link
 * is freed only after a grace period).
 */
#include <linux/bitops.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/percpu.h>
#include <linux/skbuff.h>
#include <net/sch_generic.h>

#include "core/me_core.h"
#include "link.h"
#include "train.h"
#include "txbatch.h"

static unsigned int tx_burst = 16;
module_param(tx_burst, uint, 0444);
MODULE_PARM_DESC(tx_burst,
		 "Frames handed to a driver together in one burst (0: one by one through the qdisc)");

/* The frames held for one link. */
struct me_txb_link {
	struct me_link *link;
	unsigned int count;
	unsigned int bytes;
	struct sk_buff *head;
	struct sk_buff **tail;
};

/* A CPU's burst: frames per link slot, so striping does not split it. */
struct me_txb {
	unsigned int depth;	/* nested opens */
	unsigned long held;	/* slots holding frames */
	struct me_txb_link q[ME_MAX_LINKS];
};

static DEFINE_PER_CPU(struct me_txb, txb);

/*
 * Egress hooks a frame passes in dev_queue_xmit() (tc clsact or BPF
 * filters, netfilter egress): a qdisc bypass must not skip them.
 * [6.6] tcx_egress (CONFIG_NET_XGRESS) replaced miniq_egress.
 */
static bool egress_hooked(const struct net_device *dev)
{
#if defined(CONFIG_NET_XGRESS)
	if (rcu_access_pointer(dev->tcx_egress))
		return true;
#elif defined(CONFIG_NET_CLS_ACT)
	if (rcu_access_pointer(dev->miniq_egress))
		return true;
#endif
#ifdef CONFIG_NETFILTER_EGRESS
	if (rcu_access_pointer(dev->nf_hooks_egress))
		return true;
#endif
	return false;
}

/* May frames skip this queue's qdisc without changing what it does? */
static bool qdisc_bypass_ok(struct netdev_queue *txq)
{
	struct Qdisc *q = rcu_dereference_bh(txq->qdisc);

	if (!q->enqueue)
		return true;	/* noqueue */
	if (!(q->flags & TCQ_F_CAN_BYPASS) && strcmp(q->ops->id, "fq_codel"))
		return false;
	if (q->flags & TCQ_F_NOLOCK)
		return nolock_qdisc_is_empty(q);
	return !qdisc_qlen(q);
}

/*
 * Hands the list at @skb to @link's driver, runs to one neighbour as
 * trains where it takes them (train.c); returns what it did not take
 * (the queue stopped, or the driver was busy).
 */
static struct sk_buff *direct_xmit(struct me_link *link, struct sk_buff *skb)
{
	struct net_device *dev = link->dev;
	unsigned int nq = dev->real_num_tx_queues;
	u16 qi = nq > 1 ? smp_processor_id() % nq : 0;
	struct netdev_queue *txq = netdev_get_tx_queue(dev, qi);
	int cpu = smp_processor_id();

	if (dev_nit_active(dev) || egress_hooked(dev) || !qdisc_bypass_ok(txq))
		return skb;
	skb = me_train_make(dev, skb);
	HARD_TX_LOCK(dev, txq, cpu);
	while (skb && !netif_xmit_frozen_or_drv_stopped(txq)) {
		struct sk_buff *next = skb->next;
		bool train = skb_is_gso(skb);
		netdev_tx_t rc;

		skb_mark_not_on_list(skb);
		skb_set_queue_mapping(skb, qi);
		rc = netdev_start_xmit(skb, dev, txq, next != NULL);
		if (!dev_xmit_complete(rc)) {
			skb->next = next;	/* not taken */
			break;
		}
		if (train)
			this_cpu_inc(link->stats->tx_trains);
		skb = next;
	}
	HARD_TX_UNLOCK(dev, txq);
	return skb;
}

static void flush(struct me_txb_link *l)
{
	struct sk_buff *skb = l->head;
	struct me_link *link = l->link;

	l->head = NULL;
	l->tail = &l->head;
	l->count = 0;
	l->bytes = 0;
	if (!skb)
		return;
	if (skb->next)
		skb = direct_xmit(link, skb);
	while (skb) {
		struct sk_buff *next = skb->next;
		unsigned int frames = me_train_frames(skb);
		/* A train's frames shared the head's Ethernet header. */
		u32 bytes = skb->len - skb_network_offset(skb);

		skb_mark_not_on_list(skb);
		if (dev_queue_xmit(skb) != NET_XMIT_SUCCESS)
			me_link_tx_failed(link, frames, bytes);
		else if (frames > 1)
			this_cpu_inc(link->stats->tx_trains);
		skb = next;
	}
}

void me_txb_open(void)
{
	struct me_txb *b = this_cpu_ptr(&txb);

	lockdep_assert_in_softirq();
	b->depth++;
}

void me_txb_close(void)
{
	struct me_txb *b = this_cpu_ptr(&txb);
	unsigned int i;

	if (WARN_ON_ONCE(!b->depth) || --b->depth)
		return;
	for_each_set_bit(i, &b->held, ME_MAX_LINKS)
		flush(&b->q[i]);
	b->held = 0;
}

bool me_txb_add(struct me_link *link, struct sk_buff *skb)
{
	struct me_txb_link *l;
	struct me_txb *b;

	if (!tx_burst || !in_softirq())
		return false;
	b = this_cpu_ptr(&txb);
	if (!b->depth || WARN_ON_ONCE(skb->next || link->idx >= ME_MAX_LINKS))
		return false;
	l = &b->q[link->idx];
	if (!(b->held & BIT(link->idx))) {
		l->tail = &l->head;
		b->held |= BIT(link->idx);
	} else if (l->link != link) {
		flush(l);	/* the slot's link of another namespace */
	}
	l->link = link;
	*l->tail = skb;
	l->tail = &skb->next;
	l->bytes += skb->len;
	/*
	 * Where the frames leave as trains, a burst holds what one train
	 * takes (at MTU 1500 some 40 frames): the stack's path is then run
	 * once for them all.
	 */
	if (++l->count >= tx_burst &&
	    (!me_train_dev(skb->dev) || l->bytes + link->mtu + ETH_HLEN >= me_train_max_len(skb->dev)))
		flush(l);
	return true;
}
