// SPDX-License-Identifier: GPL-2.0
/*
 * Links: the Ethernet devices multiedge uses, and its ethertype handler.
 *
 * One packet_type serves every namespace and device; a frame counts for a
 * link only if it arrives on a device attached in that device's namespace.
 * Until the protocol engine is wired in, frames are counted and dropped.
 *
 * Lifetime: a link holds a tracked reference on its net_device from attach
 * to detach.  Writers (attach, detach, the netdevice notifier, namespace
 * exit) hold RTNL; the receive path walks the list under RCU, so a link is
 * freed only after a grace period (kfree_rcu).
 */
#include <linux/atomic.h>
#include <linux/if_arp.h>
#include <linux/if_ether.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/rculist.h>
#include <linux/rtnetlink.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "link.h"
#include "netns.h"
#include "uapi/multiedge.h"

static ushort ethertype = ME_DEFAULT_ETHERTYPE;
module_param(ethertype, ushort, 0444);
MODULE_PARM_DESC(ethertype,
		 "Ethernet type of multiedge frames (default 0x88B5, must be >= 0x0600)");

static char *links;
module_param(links, charp, 0444);
MODULE_PARM_DESC(links,
		 "Comma-separated devices of the initial namespace to attach at load");

struct me_link {
	struct list_head node;		/* in me_net.links */
	struct net_device *dev;		/* held until detach */
	netdevice_tracker dev_tracker;
	unsigned int mtu;		/* written under RTNL */
	bool up;			/* running with carrier; written under RTNL */
	atomic64_t rx_frames;
	atomic64_t rx_bytes;
	struct rcu_head rcu;
};

static atomic64_t rx_frames = ATOMIC64_INIT(0);
static atomic64_t rx_dropped = ATOMIC64_INIT(0);

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

/* Softirq (or a threaded NAPI context with BH off), under rcu_read_lock. */
static int me_link_rcv(struct sk_buff *skb, struct net_device *dev,
		       struct packet_type *pt, struct net_device *orig_dev)
{
	struct me_link *link;

	atomic64_inc(&rx_frames);
	link = find_link_rcu(me_net(dev_net(dev)), dev);
	if (link) {
		atomic64_inc(&link->rx_frames);
		atomic64_add(skb->len, &link->rx_bytes);
	}
	/* No protocol engine consumes frames yet: every one is dropped. */
	atomic64_inc(&rx_dropped);
	kfree_skb(skb);
	return NET_RX_DROP;
}

static struct packet_type me_packet_type __read_mostly = {
	.func = me_link_rcv,
	.ignore_outgoing = true,
};

int me_link_attach(struct net *net, const char *ifname)
{
	struct me_net *mn = me_net(net);
	struct net_device *dev;
	struct me_link *link;

	ASSERT_RTNL();
	dev = __dev_get_by_name(net, ifname);
	if (!dev)
		return -ENODEV;
	if (dev->type != ARPHRD_ETHER || dev->addr_len != ETH_ALEN)
		return -EINVAL;
	if (find_link_rcu(mn, dev))
		return -EEXIST;
	if (mn->nr_links >= ME_MAX_LINKS)
		return -ENOSPC;

	link = kzalloc(sizeof(*link), GFP_KERNEL);
	if (!link)
		return -ENOMEM;
	netdev_hold(dev, &link->dev_tracker, GFP_KERNEL);
	link->dev = dev;
	link->mtu = dev->mtu;
	link->up = link_is_up(dev);
	atomic64_set(&link->rx_frames, 0);
	atomic64_set(&link->rx_bytes, 0);
	list_add_tail_rcu(&link->node, &mn->links);
	mn->nr_links++;
	pr_debug("link %s attached (mtu %u, %s)\n", dev->name, link->mtu,
		 link->up ? "up" : "down");
	return 0;
}

static void detach(struct me_net *mn, struct me_link *link)
{
	ASSERT_RTNL();
	list_del_rcu(&link->node);
	mn->nr_links--;
	pr_debug("link %s detached\n", link->dev->name);
	netdev_put(link->dev, &link->dev_tracker);
	/* The receive path may still look at it until a grace period ends. */
	kfree_rcu(link, rcu);
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

unsigned int me_link_list(struct net *net, struct me_link_info *out, unsigned int room)
{
	struct me_net *mn = me_net(net);
	struct me_link *link;
	unsigned int n = 0;

	ASSERT_RTNL();
	list_for_each_entry(link, &mn->links, node) {
		if (n < room) {
			struct me_link_info *li = &out[n];

			memset(li, 0, sizeof(*li));
			strscpy(li->ifname, link->dev->name, sizeof(li->ifname));
			li->ifindex = link->dev->ifindex;
			li->mtu = link->mtu;
			li->flags = link->up ? ME_LINK_F_UP : 0;
			li->rx_frames = atomic64_read(&link->rx_frames);
			li->rx_bytes = atomic64_read(&link->rx_bytes);
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
		link->up = link_is_up(dev);
		pr_debug("link %s %s\n", dev->name, link->up ? "up" : "down");
		break;
	case NETDEV_CHANGEMTU:
		link->mtu = dev->mtu;
		pr_debug("link %s mtu %u\n", dev->name, link->mtu);
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

	ret = me_netns_init();
	if (ret)
		return ret;
	ret = register_netdevice_notifier(&me_netdev_notifier);
	if (ret)
		goto err_netns;
	me_packet_type.type = htons(ethertype);
	dev_add_pack(&me_packet_type);
	ret = attach_param_links();
	if (ret)
		goto err_pack;
	return 0;

err_pack:
	dev_remove_pack(&me_packet_type);
	unregister_netdevice_notifier(&me_netdev_notifier);
err_netns:
	me_netns_uninit();
	return ret;
}

/*
 * Sleeps: dev_remove_pack() waits for handlers running on other CPUs.  The
 * notifier goes before the per-namespace state it reads; unregistering it
 * replays NETDEV_UNREGISTER for every device, which detaches every link.
 * Namespace exit then finds nothing left.
 */
void me_link_uninit(void)
{
	dev_remove_pack(&me_packet_type);
	unregister_netdevice_notifier(&me_netdev_notifier);
	me_netns_uninit();
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
