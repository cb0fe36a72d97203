/* SPDX-License-Identifier: GPL-2.0 */
/* Trains: a burst's frames to one neighbour as one skb (train.c). */
#ifndef ME_TRAIN_H
#define ME_TRAIN_H

#include <linux/skbuff.h>

struct me_link;

/* Registers the segmentation of trains for the module's ethertype. */
void me_train_init(u16 ethertype);
void me_train_uninit(void);
/* Trains the stack segmented (a device or qdisc that takes frames only). */
u64 me_train_segmented(void);

/* Does @dev pass trains whole (and are trains on)? */
bool me_train_dev(const struct net_device *dev);
/* The bytes of one train on @dev at most, headers included. */
unsigned int me_train_max_len(const struct net_device *dev);

/*
 * The frames at @list (one device's, Ethernet headers pushed, chained by
 * ->next), with runs to one destination made trains where the device
 * passes trains whole; returns the new list.  Bottom halves off.
 */
struct sk_buff *me_train_make(struct net_device *dev, struct sk_buff *list);

/* Frames @skb stands for: a train's, or 1. */
unsigned int me_train_frames(const struct sk_buff *skb);

/*
 * A frame that arrived on @link is a train: its frames go to the link
 * (me_rx_queue) one by one, from @src; @skb is consumed.  Softirq.
 */
bool me_train_is(const struct sk_buff *skb);
void me_train_rcv(struct me_link *link, struct sk_buff *skb, u64 src);

#endif
