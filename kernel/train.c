// SPDX-License-Identifier: GPL-2.0
/*
 * Trains: the frames a transmit burst holds for one neighbour leave as one
 * skb, which the stack passes as one packet until a device that cannot
 * take it whole segments it again.
 *
 * A train is a GSO skb of the kind the stack calls fraglist
 * (SKB_GSO_FRAGLIST): a head holding only the Ethernet header its frames
 * share, and on its frag_list each frame without that header.  A device
 * announcing NETIF_F_GSO_FRAGLIST and NETIF_F_FRAGLIST (a veth, a bridge)
 * passes it whole: over a veth a train crosses into the peer's namespace
 * through one transmit, one netif_rx(), one backlog pass and one call of
 * our handler, a path that otherwise runs once per frame and that is most
 * of what a frame costs at MTU 1500 (benchmarks.md); TCP avoids it with
 * GSO and GRO, 64 KiB at a time.  Anywhere else (a bridge port towards a
 * NIC, a tbf qdisc) the stack segments the train before the driver with
 * the callback registered here for our ethertype: each frame gets the
 * shared header back and leaves alone, as it would have without trains.
 * Trains do not leave the kernel that built them: no device that carries
 * GSO metadata to another host (virtio-net, tun) announces fraglist GSO,
 * so the stack segments them first.
 *
 * Made only where a burst goes straight to the driver (txbatch.c): a
 * qdisc or a tap on the sending device sees frames, as without trains.
 * Not of frames sent by reference, whose completion is tracked per skb.
 *
 * With rx_gro, a NAPI device's GRO (a NIC's, virtio-net's) chains a
 * neighbour's consecutive frames on the first one's frag_list: a train
 * whose head is its first frame.  The handler and the segmentation take
 * both kinds apart.
 */
#include <linux/etherdevice.h>
#include <linux/if_arp.h>
#include <linux/if_vlan.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <net/gro.h>

#include "link.h"
#include "train.h"

static bool trains = true;
module_param(trains, bool, 0444);
MODULE_PARM_DESC(trains,
		 "Send a burst's frames to one neighbour as one skb where the device passes it whole (veth, bridge; default 1)");

/* Off by default: between two guests it did not lower the receiver's CPU (benchmarks.md). */
static bool rx_gro;
module_param(rx_gro, bool, 0444);
MODULE_PARM_DESC(rx_gro,
		 "Chain a neighbour's consecutive frames into trains in the NIC's GRO (virtio-net, NICs; default 0)");

#define TRAIN_FEATURES	(NETIF_F_GSO_FRAGLIST | NETIF_F_FRAGLIST)
/* A train's bytes, headers included, as the stack's GSO limit counts them. */
#define TRAIN_MAX_LEN	GSO_LEGACY_MAX_SIZE

/* Trains the stack cut back into frames (not knowing the link, per module). */
static atomic64_t segmented = ATOMIC64_INIT(0);

u64 me_train_segmented(void)
{
	return atomic64_read(&segmented);
}

bool me_train_is(const struct sk_buff *skb)
{
	return skb_is_gso(skb) && (skb_shinfo(skb)->gso_type & SKB_GSO_FRAGLIST) &&
	       skb_has_frag_list(skb);
}

unsigned int me_train_frames(const struct sk_buff *skb)
{
	return skb_is_gso(skb) ? skb_shinfo(skb)->gso_segs : 1;
}

/* May @skb ride in @first's train: same header, a frame of its own? */
static bool may_ride(const struct sk_buff *first, struct sk_buff *skb)
{
	return !skb_zcopy(skb) && !skb_is_gso(skb) && !skb_has_frag_list(skb) &&
	       !skb_vlan_tag_present(skb) && skb_headlen(skb) > ETH_HLEN &&
	       !memcmp(skb->data, first->data, ETH_HLEN);
}

/*
 * A train of the @n frames from @first on (chained by ->next, each with
 * its Ethernet header at data), or NULL without memory (the frames are
 * untouched).  Their headers are pulled; the head carries the first's.
 */
static struct sk_buff *train_build(struct net_device *dev, struct sk_buff *first,
				   unsigned int n)
{
	unsigned int room = LL_RESERVED_SPACE(dev), i, seg = 0;
	struct sk_buff *head, *skb;

	head = me_link_alloc_skb(room + ETH_HLEN);
	if (!head)
		return NULL;
	skb_reserve(head, room + ETH_HLEN);
	skb_reset_network_header(head);
	/*
	 * The transport header at the network header: the stack then counts
	 * a queued train's wire bytes as its frames' (qdisc_pkt_len_init adds
	 * the shared header once per frame after the first) and checks each
	 * frame against a shaper's packet limit (skb_gso_validate_mac_len).
	 */
	skb_reset_transport_header(head);
	memcpy(__skb_push(head, ETH_HLEN), first->data, ETH_HLEN);
	skb_reset_mac_header(head);
	head->mac_len = ETH_HLEN;
	head->dev = dev;
	head->protocol = first->protocol;
	head->priority = first->priority;
	/* Nothing to checksum: the stack takes it as done, no offload to fix. */
	head->ip_summed = CHECKSUM_UNNECESSARY;
	skb_shinfo(head)->frag_list = first;
	for (i = 0, skb = first; i < n; i++, skb = skb->next) {
		__skb_pull(skb, ETH_HLEN);
		skb_reset_network_header(skb);
		seg = max(seg, skb->len);
		head->len += skb->len;
		head->data_len += skb->len;
		head->truesize += skb->truesize;
		if (i == n - 1)
			skb->next = NULL;
	}
	skb_shinfo(head)->gso_type = SKB_GSO_FRAGLIST;
	skb_shinfo(head)->gso_size = seg;
	skb_shinfo(head)->gso_segs = n;
	return head;
}

bool me_train_dev(const struct net_device *dev)
{
	return READ_ONCE(trains) && dev->type == ARPHRD_ETHER && dev->hard_header_len == ETH_HLEN &&
	       (READ_ONCE(dev->features) & TRAIN_FEATURES) == TRAIN_FEATURES;
}

unsigned int me_train_max_len(const struct net_device *dev)
{
	return min_t(unsigned int, READ_ONCE(dev->gso_max_size), TRAIN_MAX_LEN);
}

struct sk_buff *me_train_make(struct net_device *dev, struct sk_buff *list)
{
	struct sk_buff *out = NULL, **tail = &out;
	unsigned int max_len, max_segs;

	if (!list || !list->next || !me_train_dev(dev))
		return list;
	max_len = me_train_max_len(dev);
	max_segs = min_t(unsigned int, READ_ONCE(dev->gso_max_segs), U16_MAX);
	while (list) {
		struct sk_buff *first = list, *skb = list->next, *last = list, *train = NULL;
		unsigned int n = 1, len = first->len;
		bool rides = may_ride(first, first);

		while (rides && skb && n < max_segs && len + skb->len - ETH_HLEN < max_len &&
		       may_ride(first, skb)) {
			len += skb->len - ETH_HLEN;
			last = skb;
			skb = skb->next;
			n++;
		}
		list = skb;	/* what follows the run */
		if (n > 1)
			train = train_build(dev, first, n);
		if (train) {
			*tail = train;
			tail = &train->next;
		} else {
			*tail = first;
			tail = &last->next;
		}
		*tail = NULL;
	}
	return out;
}

/*
 * Takes the frames off train @skb: returns them (chained by ->next), and
 * @skb is what it carries itself (nothing for a train we built; the
 * first frame for one GRO built), no GSO skb any more.  A clone (a tap
 * holds the same train) gets its own shared info first; NULL without
 * memory, @skb untouched.
 */
static struct sk_buff *train_detach(struct sk_buff *skb)
{
	struct sk_buff *list, *m;

	if (skb_unclone(skb, GFP_ATOMIC))
		return NULL;
	list = skb_shinfo(skb)->frag_list;
	skb_shinfo(skb)->frag_list = NULL;
	for (m = list; m; m = m->next) {
		skb->len -= m->len;
		skb->data_len -= m->len;
		/* The train counted each frame's memory once: not twice now. */
		if (skb->truesize > m->truesize)
			skb->truesize -= m->truesize;
	}
	skb_gso_reset(skb);
	return list;
}

/* A frame taken off a train, ours alone (skb_unclone() shared the list). */
static struct sk_buff *own_frame(struct sk_buff *m)
{
	skb_mark_not_on_list(m);
	if (skb_shared(m)) {
		struct sk_buff *c = skb_clone(m, GFP_ATOMIC);

		consume_skb(m);
		return c;
	}
	return m;
}

/*
 * The stack's segmentation (a device that takes no train whole; a qdisc
 * that meters frames): the frames, each with the head's Ethernet header
 * (and any VLAN tag the stack pushed into it since) in front again; a
 * GRO-built train's head is its first frame (the stack pushes its header
 * back itself).  Data at the network header; the caller frees the head.
 */
static struct sk_buff *train_segment(struct sk_buff *skb, netdev_features_t features)
{
	unsigned int hlen = skb->data - skb_mac_header(skb);
	struct sk_buff *list, *segs = NULL, *last = NULL, *m;

	if (!me_train_is(skb) || hlen < ETH_HLEN || hlen > ETH_HLEN + 2 * VLAN_HLEN)
		return ERR_PTR(-EINVAL);
	list = train_detach(skb);
	if (!list)
		return ERR_PTR(-ENOMEM);
	if (skb->len) {
		/* The caller frees the train's skb: keep it as the first frame. */
		segs = skb_get(skb);
		last = skb;
	}
	while (list) {
		m = list;
		list = list->next;
		m = own_frame(m);
		if (!m || skb_cow_head(m, hlen)) {
			kfree_skb(m);
			goto err;
		}
		memcpy(__skb_push(m, hlen), skb_mac_header(skb), hlen);
		skb_reset_mac_header(m);
		skb_set_network_header(m, hlen);
		m->mac_len = hlen;
		m->dev = skb->dev;
		m->protocol = skb->protocol;
		m->priority = skb->priority;
		m->mark = skb->mark;
		skb_copy_queue_mapping(m, skb);
		m->ip_summed = CHECKSUM_NONE;
		if (last)
			last->next = m;
		else
			segs = m;
		last = m;
	}
	segs->prev = last;	/* the stack appends what follows there */
	atomic64_inc(&segmented);
	return segs;

err:
	kfree_skb_list(list);
	if (segs == skb) {
		/* Only the frames: the caller frees the train's skb itself. */
		segs = skb->next;
		skb->next = NULL;
		consume_skb(skb);
	}
	kfree_skb_list(segs);
	return ERR_PTR(-ENOMEM);
}

void me_train_rcv(struct me_link *link, struct sk_buff *skb, u64 src)
{
	struct sk_buff *list, *m, *frames = NULL, **tail = &frames;

	this_cpu_inc(link->stats->rx_trains);
	list = train_detach(skb);
	if (!list) {
		this_cpu_add(link->stats->rx_dropped, me_train_frames(skb));
		kfree_skb(skb);
		return;
	}
	if (skb->len) {		/* GRO's: the skb is the first frame */
		this_cpu_inc(link->stats->rx_frames);
		this_cpu_add(link->stats->rx_bytes, skb->len);
		*tail = skb;
		tail = &skb->next;
	}
	while (list) {
		m = list;
		list = list->next;
		m = own_frame(m);
		if (!m) {
			this_cpu_inc(link->stats->rx_dropped);
			continue;
		}
		/* As if it had arrived alone: the train's device and addressing. */
		m->dev = skb->dev;
		m->protocol = skb->protocol;
		m->pkt_type = skb->pkt_type;
		m->skb_iif = skb->skb_iif;
		skb_reset_network_header(m);
		this_cpu_inc(link->stats->rx_frames);
		this_cpu_add(link->stats->rx_bytes, m->len);
		*tail = m;
		tail = &m->next;
	}
	if (frames != skb)
		consume_skb(skb);
	me_rx_queue_list(link, frames, src);
}

/*
 * GRO (a NIC's or virtio-net's NAPI poll): consecutive frames of one
 * neighbour, on one device (the stack's same_flow: same device, same
 * Ethernet header), are chained on the first one's frag_list and reach
 * the handler as one train when the poll ends, when 64 KiB are held, or
 * before a frame of theirs that may not join (it then follows them).
 */
static struct sk_buff *train_gro_receive(struct list_head *head, struct sk_buff *skb)
{
	struct sk_buff *p;

	list_for_each_entry(p, head, list) {
		if (!NAPI_GRO_CB(p)->same_flow)
			continue;
		if (NAPI_GRO_CB(skb)->flush ||
		    p->len + skb->len >= TRAIN_MAX_LEN || NAPI_GRO_CB(p)->count >= U16_MAX)
			return p;	/* the train goes up first */
		if (NAPI_GRO_CB(p)->last == p)
			skb_shinfo(p)->frag_list = skb;
		else
			NAPI_GRO_CB(p)->last->next = skb;
		NAPI_GRO_CB(p)->last = skb;
		NAPI_GRO_CB(p)->count++;
		p->data_len += skb->len;
		p->truesize += skb->truesize;
		p->len += skb->len;
		NAPI_GRO_CB(skb)->same_flow = 1;
		return NULL;
	}
	return NULL;
}

/* A train of several frames goes up (one frame goes as it came). */
static int train_gro_complete(struct sk_buff *skb, int nhoff)
{
	skb_shinfo(skb)->gso_type |= SKB_GSO_FRAGLIST;
	skb_shinfo(skb)->gso_segs = NAPI_GRO_CB(skb)->count;
	return 0;
}

static struct packet_offload train_offload __read_mostly = {
	.callbacks = {
		.gso_segment = train_segment,
	},
};

void me_train_init(u16 ethertype)
{
	train_offload.type = htons(ethertype);
	if (rx_gro) {	/* fixed at load (0444) */
		train_offload.callbacks.gro_receive = train_gro_receive;
		train_offload.callbacks.gro_complete = train_gro_complete;
	}
	dev_add_offload(&train_offload);
}

/* Sleeps: waits for segmentations running on other CPUs. */
void me_train_uninit(void)
{
	dev_remove_offload(&train_offload);
}
