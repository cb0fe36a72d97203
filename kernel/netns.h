/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_NETNS_H
#define ME_NETNS_H

#include <linux/list.h>
#include <linux/xarray.h>
#include <net/net_namespace.h>

/*
 * Per network namespace state: each namespace is one multiedge node, so one
 * kernel can host several (the guest tests build clusters this way).
 */
struct me_net {
	/* Attached links: RCU for the receive path, RTNL for writers. */
	struct list_head links;
	unsigned int nr_links;
	/* Registered memory regions by id (struct me_mr, see mr.h). */
	struct xarray mrs;
	u32 mr_next;		/* next id to try; under the xarray's lock */
};

int me_netns_init(void);
void me_netns_uninit(void);
struct me_net *me_net(const struct net *net);

#endif /* ME_NETNS_H */
