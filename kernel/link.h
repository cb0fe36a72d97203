/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_LINK_H
#define ME_LINK_H

#include <linux/types.h>

struct me_link_stats {
	u64 rx_frames;
	u64 rx_dropped;
};

int me_link_init(void);
void me_link_uninit(void);
u16 me_link_ethertype(void);
void me_link_get_stats(struct me_link_stats *stats);

#endif /* ME_LINK_H */
