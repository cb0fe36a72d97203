/* SPDX-License-Identifier: GPL-2.0 */
/* Transmit bursts: frames held per CPU, handed to the driver together. */
#ifndef ME_TXBATCH_H
#define ME_TXBATCH_H

#include <linux/skbuff.h>

struct me_link;

/* Open and close a burst (nested: the outermost close sends); BH off. */
void me_txb_open(void);
void me_txb_close(void);
/*
 * Holds @skb (built for @link's device, its Ethernet header pushed) for
 * the open burst: true if taken; false when no burst is open (send it).
 */
bool me_txb_add(struct me_link *link, struct sk_buff *skb);

#endif
