// SPDX-License-Identifier: GPL-2.0
/*
 * lists.c - the engine's peer table, neighbours and counters, copied out
 * for ME_IOC_PEER_LIST, ME_IOC_NBR_LIST and ME_IOC_STATS.
 *
 * The engine of a namespace lives at least as long as a file open in it,
 * so the caller's file keeps it; its tables are read without locks (a
 * list is a snapshot that may be a little stale, never invalid).  The
 * kernel buffer holds at most as many entries as the caller has room for
 * and the table has, so a large table costs what the caller asks for.
 */
#include <linux/etherdevice.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "core/me_core.h"
#include "chardev.h"
#include "lists.h"
#include "netns.h"

/* Entries a list may hold at most, and the buffer for min(room, that). */
static void *list_buf(u32 room, u32 most, size_t size, u32 *cap)
{
	*cap = min(room, most);
	return *cap ? kvcalloc(*cap, size, GFP_KERNEL) : NULL;
}

long me_ioc_peer_list(struct me_file *f, void __user *uarg)
{
	struct me_node *core = me_net_core(me_net(f->net));
	struct me_peer_info *out = NULL;
	struct me_peer_info_core pi;
	struct me_peer_list req;
	u32 slot, slots, n = 0, cap = 0;
	long ret;

	ret = me_copy_arg_in(&req, sizeof(req), ME_PEER_LIST_SIZE_VER0, uarg);
	if (ret < 0)
		return ret;
	if (req.__reserved || req.info_size < ME_PEER_INFO_SIZE_VER0)
		return -EINVAL;
	if (req.info_size > PAGE_SIZE)
		return -E2BIG;
	slots = core ? me_node_npeers(core) : 0;
	out = list_buf(req.count, slots, sizeof(*out), &cap);
	if (cap && !out)
		return -ENOMEM;
	for (slot = 0; slot < slots; slot++) {
		if (!me_node_peer_at(core, slot, &pi))
			continue;
		if (n < cap) {
			struct me_peer_info *e = &out[n];

			e->node_id = pi.node;
			e->incarnation = pi.inc;
			e->links = pi.links;
			e->alive_links = pi.alive_links;
			e->flags = pi.alive_links ? ME_PEER_F_ALIVE : 0;
			BUILD_BUG_ON(sizeof(e->name) != sizeof(pi.name));
			memcpy(e->name, pi.name, sizeof(e->name));
			e->conns = pi.conns;
		}
		n++;
	}
	ret = me_copy_array_out(req.peers, req.info_size, out, sizeof(*out), min(cap, n));
	kvfree(out);
	if (ret)
		return ret;
	if (put_user(n, (u32 __user *)(uarg + offsetof(struct me_peer_list, count))))
		return -EFAULT;
	return 0;
}

long me_ioc_nbr_list(struct me_file *f, void __user *uarg)
{
	struct me_node *core = me_net_core(me_net(f->net));
	struct me_nbr_info *out = NULL;
	struct me_path_info_core pa;
	struct me_nbr_list req;
	u32 slot, slots, link, n = 0, cap = 0;
	long ret;

	ret = me_copy_arg_in(&req, sizeof(req), ME_NBR_LIST_SIZE_VER0, uarg);
	if (ret < 0)
		return ret;
	if (req.__reserved || req.info_size < ME_NBR_INFO_SIZE_VER0)
		return -EINVAL;
	if (req.info_size > PAGE_SIZE)
		return -E2BIG;
	slots = core ? me_node_npeers(core) : 0;
	out = list_buf(req.count, slots * ME_MAX_LINKS, sizeof(*out), &cap);
	if (cap && !out)
		return -ENOMEM;
	for (slot = 0; slot < slots; slot++) {
		for (link = 0; link < ME_MAX_LINKS; link++) {
			struct me_nbr_info *e;

			if (!me_node_path_at(core, slot, link, &pa))
				continue;
			if (n++ >= cap)
				continue;
			e = &out[n - 1];
			e->link = pa.link;
			e->node_id = pa.node;
			e->incarnation = pa.inc;
			e->flags = (pa.flags & ME_PATH_ALIVE ? ME_NBR_F_ALIVE : 0) |
				   (pa.flags & ME_PATH_RX ? ME_NBR_F_RX : 0) |
				   (pa.flags & ME_PATH_HEARD ? ME_NBR_F_HEARD : 0);
			u64_to_ether_addr(pa.addr, e->mac);
			e->rtt_us = pa.rtt_us;
			e->rate_mbps = pa.rate * 8;
			e->inflight = pa.inflight;
			e->rx_age_ms = (u32)min_t(u64, div_u64(pa.rx_age_ns, NSEC_PER_MSEC), U32_MAX);
			e->tx_pkts = pa.tx_pkts;
			e->rx_pkts = pa.rx_pkts;
			e->lost_pkts = pa.lost_pkts;
			e->tx_bytes = pa.tx_bytes;
			e->rx_bytes = pa.rx_bytes;
			e->cwnd = pa.cwnd;
			e->data_rtt_us = pa.data_rtt_us;
			e->data_delay_us = pa.data_delay_us;
			e->base_us = pa.base_us;
			e->target_us = pa.target_us;
			e->noise_us = pa.noise_us;
		}
	}
	ret = me_copy_array_out(req.nbrs, req.info_size, out, sizeof(*out), min(cap, n));
	kvfree(out);
	if (ret)
		return ret;
	if (put_user(n, (u32 __user *)(uarg + offsetof(struct me_nbr_list, count))))
		return -EFAULT;
	return 0;
}

long me_ioc_stats(struct me_file *f, void __user *uarg)
{
	struct me_node *core = me_net_core(me_net(f->net));
	u64 vals[ME_STAT_COUNT];
	struct me_stats req;
	unsigned int i;
	long ret;

	BUILD_BUG_ON((int)ME_STAT_COUNT != (int)ME_ST_MAX_);
	ret = me_copy_arg_in(&req, sizeof(req), ME_STATS_SIZE_VER0, uarg);
	if (ret < 0)
		return ret;
	for (i = 0; i < ME_STAT_COUNT; i++)
		vals[i] = core ? me_node_stat(core, i) : 0;
	if (copy_to_user(u64_to_user_ptr(req.values), vals,
			 min_t(u32, req.count, ME_STAT_COUNT) * sizeof(u64)))
		return -EFAULT;
	if (put_user(ME_STAT_COUNT, (u32 __user *)(uarg + offsetof(struct me_stats, count))))
		return -EFAULT;
	return 0;
}
