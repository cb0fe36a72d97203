/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_CHARDEV_H
#define ME_CHARDEV_H

#include <linux/list.h>
#include <linux/mutex.h>

#include "cq.h"

#define ME_DEVICE_NAME	"multiedge"

struct net;

/* One open /dev/multiedge. */
struct me_file {
	struct net *net;	/* the opener's namespace, held until release */
	struct mutex lock;	/* protects mrs, nr_mrs */
	struct list_head mrs;	/* regions registered through this file */
	unsigned int nr_mrs;
	unsigned int nr_conns;	/* connections it opened and owns (under owner_lock) */
	unsigned int nr_adopted; /* passive ones it adopted (recvq.c, owner_lock) */
	struct list_head msgs;	/* its messages, oldest first (recvq.c, msg_lock) */
	unsigned int nr_msgs;
	u32 port;		/* bound to (ports.c, owner_lock), 0: none */
	struct list_head shares;	/* shared connections it joined (shared.c) */
	unsigned int nr_shares;
	atomic_t shared_kops;	/* its operations on shared connections (ops.c) */
	struct list_head bound_node;	/* in mn->bound while port is set */
	struct me_cq cq;	/* its completions */
};

int me_chardev_init(void);
void me_chardev_uninit(void);

/*
 * Copies in an extensible ioctl argument (uapi/multiedge.h): reads its size
 * field, refuses one below @min, copies with copy_struct_from_user().
 * Returns the caller's size or a negative errno.
 */
long me_copy_arg_in(void *karg, size_t ksize, size_t min, void __user *uarg);

/*
 * Writes @n entries of @ksize bytes from @src to the user array at @uptr,
 * @stride bytes apart (the caller's entry size): each gets what both sides
 * know, any tail the caller knows more of is zeroed.
 */
int me_copy_array_out(u64 uptr, u32 stride, const void *src, size_t ksize,
		      unsigned int n);

#endif /* ME_CHARDEV_H */
