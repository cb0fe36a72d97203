/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_LINK_H
#define ME_LINK_H

#include <linux/netdevice.h>
#include <linux/types.h>

struct me_net;
struct me_link_info;

struct me_link_stats {
	u64 rx_frames;
	u64 rx_dropped;
};

int me_link_init(void);
void me_link_uninit(void);
u16 me_link_ethertype(void);
void me_link_get_stats(struct me_link_stats *stats);

/* Writers hold RTNL. */
int me_link_attach(struct net *net, const char *ifname);
int me_link_detach(struct net *net, const char *ifname);
void me_link_detach_all(struct me_net *mn);
/* Fills up to @room entries; returns the number of links attached. */
unsigned int me_link_list(struct net *net, struct me_link_info *out, unsigned int room);

#endif /* ME_LINK_H */
