/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lists.h - what the engine knows, for user space: peers, neighbours
 * (link, peer) and counters (ME_IOC_PEER_LIST, ME_IOC_NBR_LIST,
 * ME_IOC_STATS).
 */
#ifndef ME_LISTS_H
#define ME_LISTS_H

#include <linux/compiler.h>

struct me_file;

long me_ioc_peer_list(struct me_file *f, void __user *uarg);
long me_ioc_nbr_list(struct me_file *f, void __user *uarg);
long me_ioc_stats(struct me_file *f, void __user *uarg);

#endif /* ME_LISTS_H */
