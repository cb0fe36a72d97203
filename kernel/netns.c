// SPDX-License-Identifier: GPL-2.0
/*
 * Per network namespace state.  A namespace's links are detached when it
 * dies (its devices leave first, which detaches them through the netdevice
 * notifier; anything left is detached here), then its engine stops; the
 * same happens to every namespace at module unload.
 */
#include <linux/random.h>
#include <linux/rtnetlink.h>
#include <net/netns/generic.h>

#include "engine.h"
#include "link.h"
#include "mr.h"
#include "netns.h"
#include "ports.h"

static unsigned int me_net_id __read_mostly;

struct me_net *me_net(const struct net *net)
{
	return net_generic(net, me_net_id);
}

static u32 random_nonzero(void)
{
	u32 v;

	do {
		v = get_random_u32();
	} while (!v || v == U32_MAX);	/* U32_MAX is the broadcast node */
	return v;
}

static int __net_init me_net_init(struct net *net)
{
	struct me_net *mn = me_net(net);

	mn->net = net;
	INIT_LIST_HEAD(&mn->links);
	mn->nr_links = 0;
	mn->nr_links_copy = 0;
	atomic64_set(&mn->staged, 0);
	me_mr_net_init(mn);
	me_ports_net_init(mn);
	mutex_init(&mn->share_mutex);
	atomic_set(&mn->share_retries, 0);
	mn->node_id = random_nonzero();
	mn->incarnation = random_nonzero();
	return me_engine_net_init(mn);
}

static void __net_exit me_net_exit(struct net *net)
{
	struct me_net *mn = me_net(net);

	rtnl_lock();
	me_link_detach_all(mn);
	rtnl_unlock();
	me_engine_stop(mn);
	me_engine_net_uninit(mn);
	me_mr_net_uninit(mn);
}

static struct pernet_operations me_net_ops = {
	.init = me_net_init,
	.exit = me_net_exit,
	.id = &me_net_id,
	.size = sizeof(struct me_net),
};

int me_netns_init(void)
{
	return register_pernet_subsys(&me_net_ops);
}

void me_netns_uninit(void)
{
	unregister_pernet_subsys(&me_net_ops);
}
