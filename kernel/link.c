// SPDX-License-Identifier: GPL-2.0
/*
 * The module's ethertype handler.
 *
 * One packet_type serves every network namespace and every device.  Until
 * links can be attached, no device carries multiedge traffic for us, so each
 * frame is counted and dropped; the counters make the registration
 * observable from user space (ME_IOC_QUERY).
 */
#include <linux/atomic.h>
#include <linux/if_ether.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>

#include "link.h"
#include "uapi/multiedge.h"

static ushort ethertype = ME_DEFAULT_ETHERTYPE;
module_param(ethertype, ushort, 0444);
MODULE_PARM_DESC(ethertype,
		 "Ethernet type of multiedge frames (default 0x88B5, must be >= 0x0600)");

static atomic64_t rx_frames = ATOMIC64_INIT(0);
static atomic64_t rx_dropped = ATOMIC64_INIT(0);

/* Softirq (or a threaded NAPI context with BH off): must not sleep. */
static int me_link_rcv(struct sk_buff *skb, struct net_device *dev,
		       struct packet_type *pt, struct net_device *orig_dev)
{
	atomic64_inc(&rx_frames);
	atomic64_inc(&rx_dropped);
	kfree_skb(skb);
	return NET_RX_DROP;
}

static struct packet_type me_packet_type __read_mostly = {
	.func = me_link_rcv,
	.ignore_outgoing = true,
};

int me_link_init(void)
{
	/* Values below 0x0600 are 802.3 lengths, not ethertypes. */
	if (ethertype < ETH_P_802_3_MIN) {
		pr_err("ethertype 0x%04x is an 802.3 length, not an ethertype (need >= 0x%04x)\n",
		       ethertype, ETH_P_802_3_MIN);
		return -EINVAL;
	}
	me_packet_type.type = htons(ethertype);
	dev_add_pack(&me_packet_type);
	return 0;
}

/* Sleeps: dev_remove_pack() waits for handlers running on other CPUs. */
void me_link_uninit(void)
{
	dev_remove_pack(&me_packet_type);
}

u16 me_link_ethertype(void)
{
	return ethertype;
}

void me_link_get_stats(struct me_link_stats *stats)
{
	stats->rx_frames = atomic64_read(&rx_frames);
	stats->rx_dropped = atomic64_read(&rx_dropped);
}
