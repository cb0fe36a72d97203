// SPDX-License-Identifier: GPL-2.0
/*
 * Ports (ME_IOC_BIND): an open file becomes the endpoint on a 16-bit port
 * of its node, and connections peers open to that port are its own from
 * their start (recvq.c), so several programs on one node, MPI ranks say,
 * each receive their own peers' messages.
 *
 * Which ports are taken is a bitmap (a free one is found without walking
 * the files); which file holds a port, a list of the bound files, walked
 * only when a peer's connection comes up.  Both change under the
 * namespace's owner_lock, the lock that also decides a connection's
 * owner, so a file that let its port go is never made an owner after.
 */
#include <linux/bitmap.h>
#include <linux/list.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>

#include "chardev.h"
#include "netns.h"
#include "ports.h"

void me_ports_net_init(struct me_net *mn)
{
	INIT_LIST_HEAD(&mn->bound);
	bitmap_zero(mn->ports_used, ME_PORT_MAX + 1);
	mn->port_next = ME_PORT_EPHEMERAL;
}

struct me_file *me_ports_file_locked(struct me_net *mn, u32 port)
{
	struct me_file *f;

	lockdep_assert_held(&mn->owner_lock);
	if (!port || port > ME_PORT_MAX || !test_bit(port, mn->ports_used))
		return NULL;
	list_for_each_entry(f, &mn->bound, bound_node)
		if (f->port == port)
			return f;
	return NULL;
}

bool me_ports_open(struct me_net *mn, u32 port)
{
	return port && port <= ME_PORT_MAX && test_bit(port, mn->ports_used);
}

/* A free ephemeral port, the search starting after the last one given. */
static u32 pick_locked(struct me_net *mn)
{
	unsigned long p;

	p = find_next_zero_bit(mn->ports_used, ME_PORT_MAX + 1, mn->port_next);
	if (p > ME_PORT_MAX)
		p = find_next_zero_bit(mn->ports_used, ME_PORT_MAX + 1, ME_PORT_EPHEMERAL);
	if (p > ME_PORT_MAX)
		return 0;
	mn->port_next = p + 1 > ME_PORT_MAX ? ME_PORT_EPHEMERAL : p + 1;
	return p;
}

static void unbind_locked(struct me_net *mn, struct me_file *f)
{
	if (!f->port)
		return;
	clear_bit(f->port, mn->ports_used);
	list_del_init(&f->bound_node);
	WRITE_ONCE(f->port, 0);
}

long me_ports_ioc_bind(struct me_file *f, void __user *uarg)
{
	struct me_net *mn = me_net(f->net);
	struct me_bind req;
	long usize;
	int ret = 0;

	usize = me_copy_arg_in(&req, sizeof(req), ME_BIND_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;
	if (req.flags)
		return -EOPNOTSUPP;
	if (req.__reserved || req.port > ME_PORT_MAX)
		return -EINVAL;

	spin_lock_bh(&mn->owner_lock);
	if (f->port)
		ret = -EISCONN;
	else if (req.port && test_bit(req.port, mn->ports_used))
		ret = -EADDRINUSE;
	else if (!req.port && !(req.port = pick_locked(mn)))
		ret = -EADDRNOTAVAIL;
	if (!ret) {
		set_bit(req.port, mn->ports_used);
		list_add_tail(&f->bound_node, &mn->bound);
		WRITE_ONCE(f->port, req.port);
	}
	spin_unlock_bh(&mn->owner_lock);
	if (ret)
		return ret;
	if (copy_to_user(uarg, &req, min_t(size_t, usize, sizeof(req)))) {
		/* The caller cannot know its port: it gets none. */
		spin_lock_bh(&mn->owner_lock);
		unbind_locked(mn, f);
		spin_unlock_bh(&mn->owner_lock);
		return -EFAULT;
	}
	return 0;
}

void me_ports_release(struct me_file *f)
{
	struct me_net *mn = me_net(f->net);

	spin_lock_bh(&mn->owner_lock);
	unbind_locked(mn, f);
	spin_unlock_bh(&mn->owner_lock);
}
