/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_LOOPBACK_H
#define ME_LOOPBACK_H

#include <linux/types.h>

struct io_uring_cmd;
struct me_file;
struct me_post;

/*
 * Does @req (checked by me_ops_post, conn ME_CONN_LOOPBACK) against the
 * regions of @f's own node, and queues its completion to @ucmd's ring or
 * @f's queue before it returns: 0, or a negative errno if nothing was
 * done (as me_ops_post).
 */
int me_loop_post(struct me_file *f, const struct me_post *req, struct io_uring_cmd *ucmd,
		 bool may_block);

#endif /* ME_LOOPBACK_H */
