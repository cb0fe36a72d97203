// SPDX-License-Identifier: GPL-2.0
/*
 * Loopback: operations between regions of one node (ABI 20).
 *
 * The engine connects nodes, never a node to itself.  A post on
 * ME_CONN_LOOPBACK is done at once by the poster instead, against the
 * regions of its own node (its network namespace), with every check a
 * peer's module makes: the target's key, access and range, an atomic's
 * alignment.  A refusal is the completion's status, as from a peer, and
 * tells no more than a peer is told (EACCES for no region, a wrong key and
 * no access alike).  Nothing crosses a link, so nothing is lost, resent or
 * reordered: the completion is queued before the post returns, and a
 * notify's event reaches the target region's owner first.
 *
 * Sends are not offered here: a node's files exchange messages through
 * their own means (the libfabric provider's sockets), and a receive queue
 * belongs to a connection.
 */
#include <linux/build_bug.h>
#include <linux/errno.h>

#include "core/me_core.h"
#include "chardev.h"
#include "cq.h"
#include "engine.h"
#include "loopback.h"
#include "mr.h"
#include "netns.h"
#include "ops.h"
#include "uring.h"

/* What a peer would be told (core/msg.c does the same for the wire). */
static int refusal(int err)
{
	return err == -EKEYREJECTED || err == -ENOENT ? -EACCES : err;
}

/* The engine's access bits (an atomic's, core/aop.h) as a region's. */
static u32 region_access(u32 acc)
{
	return (acc & ME_ACC_WRITE ? ME_ACCESS_REMOTE_WRITE : 0) |
	       (acc & ME_ACC_READ ? ME_ACCESS_REMOTE_READ : 0);
}

static int loop_write(struct me_net *mn, const struct me_post *req, struct me_mr *local, u64 key)
{
	struct me_cqe ev = {};
	struct me_mr *target;
	int err;

	target = me_mr_get_remote(mn, req->remote_region, key, req->remote_off, req->len,
				  ME_ACCESS_REMOTE_WRITE, &err);
	if (!target)
		return refusal(err);
	err = me_mr_transfer(target, req->remote_off, local, req->local_off, req->len);
	me_mr_put(target);
	if (err)
		return err;
	/* Lazy flips of a receive area finish before anyone is told. */
	me_mr_done(mn, req->remote_region, req->remote_off, req->len);
	if (req->opcode == ME_OP_NOTIFY) {
		ev.type = ME_CQE_NOTIFY;
		ev.conn = ME_CONN_LOOPBACK;
		ev.peer = mn->node_id;
		ev.len = req->len;
		ev.imm = req->imm;
		ev.region = req->remote_region;
		ev.off = req->remote_off;
		me_ops_complete(mn, &ev);
	}
	return 0;
}

static int loop_read(struct me_net *mn, const struct me_post *req, struct me_mr *local, u64 key)
{
	struct me_mr *target;
	int err;

	target = me_mr_get_remote(mn, req->remote_region, key, req->remote_off, req->len,
				  ME_ACCESS_REMOTE_READ, &err);
	if (!target)
		return refusal(err);
	err = me_mr_transfer(local, req->local_off, target, req->remote_off, req->len);
	me_mr_put(target);
	return err;
}

static int loop_atomic(struct me_net *mn, const struct me_post *req, struct me_mr *local,
		       u64 key, u64 operand, u64 compare)
{
	struct me_mr *target;
	u64 old;
	int err;

	target = me_mr_get_remote(mn, req->remote_region, key, req->remote_off, req->len,
				  region_access(ME_AOP_ACCESS(req->imm)), &err);
	if (!target)
		return refusal(err);
	err = me_mr_atomic_on(target, req->remote_off, req->len, req->imm, operand, compare,
			      &old);
	me_mr_put(target);
	if (err)
		return err;	/* -EINVAL: not aligned */
	if (req->len == 4) {
		u32 v = old;

		return me_mr_write(local, req->local_off, &v, sizeof(v));
	}
	return me_mr_write(local, req->local_off, &old, sizeof(old));
}

static u32 completion_type(u32 opcode)
{
	switch (opcode) {
	case ME_OP_READ:
		return ME_CQ_READ;
	case ME_OP_ATOMIC:
		return ME_CQ_ATOMIC;
	default:
		return ME_CQ_WRITE;
	}
}

int me_loop_post(struct me_file *f, const struct me_post *req, struct io_uring_cmd *ucmd,
		 bool may_block)
{
	struct me_net *mn = me_net(f->net);
	u64 key = (u64)req->remote_key_hi << 32 | req->remote_key;
	struct me_completion done = {};
	u64 operand = 0, compare = 0;
	struct me_mr *local;
	int status, ret;

	/* The engine never gives a connection this id. */
	BUILD_BUG_ON(ME_CONN_LOOPBACK != ME_CONN_ID_NONE);
	if (req->opcode == ME_OP_SEND)
		return -EOPNOTSUPP;
	if (req->remote_off + req->len < req->remote_off)
		return -ERANGE;
	local = me_mr_get_owned(f, req->local_region);
	if (!local)
		return -ENOENT;
	ret = -ERANGE;
	if (req->local_off > local->length || req->len > local->length - req->local_off)
		goto out;
	if (req->opcode == ME_OP_ATOMIC) {
		ret = me_ops_atomic_operands(req, local, &operand, &compare);
		if (ret)
			goto out;
	}
	/* Its completion always has a place: as for a post to a peer. */
	if (!ucmd) {
		ret = me_cq_reserve(&f->cq, !may_block);
		if (ret)
			goto out;
	}
	switch (req->opcode) {
	case ME_OP_READ:
		status = loop_read(mn, req, local, key);
		break;
	case ME_OP_ATOMIC:
		status = loop_atomic(mn, req, local, key, operand, compare);
		break;
	default:		/* WRITE, NOTIFY */
		status = loop_write(mn, req, local, key);
		break;
	}
	if (ucmd) {
		me_uring_complete(ucmd, status, status ? 0 : req->len);
	} else {
		done.cookie = req->cookie;
		done.type = completion_type(req->opcode);
		done.status = status;
		done.conn = ME_CONN_LOOPBACK;
		done.peer = mn->node_id;
		done.len = status ? 0 : req->len;
		done.imm = req->opcode == ME_OP_NOTIFY ? req->imm : 0;
		me_cq_push_reserved(&f->cq, &done);
	}
	ret = 0;
out:
	me_mr_put(local);
	return ret;
}
