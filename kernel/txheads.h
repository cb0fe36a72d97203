/* SPDX-License-Identifier: GPL-2.0 */
/* Heads of frames sent, carved from pages each CPU keeps and reuses. */
#ifndef ME_TXHEADS_H
#define ME_TXHEADS_H

#include <linux/types.h>

/*
 * A piece of @size bytes (SKB_DATA_ALIGN()ed, an skb's head with its
 * shared info) for build_skb(), freed with the skb (skb_free_frag());
 * NULL if none: allocate otherwise.  Bottom halves off.
 */
void *me_txheads_alloc(unsigned int size);
/*
 * Pages the rings carved again (their frames all gone) and pages they
 * took from the allocator, all CPUs, since load.
 */
void me_txheads_stats(u64 *reused, u64 *fresh);
/* At unload, once nothing transmits: gives the pages up to their frames. */
void me_txheads_exit(void);

#endif
