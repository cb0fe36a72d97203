// SPDX-License-Identifier: GPL-2.0
/*
 * Operations: posting remote writes, reads, notifies, sends and atomics, and their
 * completions (sends that arrive: recvq.c; who holds a connection and its
 * slot's life: conns.c).  The engine (core/) does the protocol; this file
 * binds its operations to open files: which completion queue an
 * operation's completion goes to, which region it reads from or writes
 * into locally.
 *
 * An operation holds a reference on its local region from posting to
 * completion, so deregistering the region (or closing the file) waits for
 * it; its completion queue slot is reserved at posting, so its completion
 * is never dropped.  An operation posted through io_uring (uring.c)
 * completes into its ring's CQE instead, and reserves no slot.  The engine
 * calls back (me_ops_complete) from receive threads, the timer thread or
 * the poster, exactly once per operation.
 */
#include <linux/rtnetlink.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "core/me_core.h"
#include "chardev.h"
#include "compat.h"
#include "conns.h"
#include "engine.h"
#include "link.h"
#include "loopback.h"
#include "mr.h"
#include "netns.h"
#include "ops.h"
#include "recvq.h"
#include "shared.h"
#include "stage.h"
#include "uring.h"
#include "wait.h"

/*
 * A posted operation, from ME_IOC_POST to its completion.
 *
 * ubuf.refcnt counts the references on it: one from posting until the
 * engine completes it (op_done), the engine's on its payload (zc_hold,
 * core/me_plat.h), and one per skb carrying its pages (ubuf's callback
 * when the skb's data are released).  The completion reaches the user
 * only at the last put (Table 1 state 1): until then something may still
 * read the local region.
 */
struct me_kop {
	struct ubuf_info ubuf;		/* zero-copy skbs point here */
	struct list_head node;		/* in its connection's me_conn_done */
	u32 conn;
	bool shared;			/* on a shared connection: counted in
					 * its file's shared_kops */
	bool finished;			/* last reference gone (under cd->lock) */
	struct me_file *file;
	struct me_mr *mr;		/* local region, referenced */
	struct me_stage stage;		/* its payload copied at post, or empty */
	struct io_uring_cmd *ucmd;	/* posted through io_uring, or NULL */
	u64 cookie;			/* the user's (ioctl door) */
	u32 opcode;			/* ME_OP_* */
	struct me_completion done;	/* set by op_done, delivered at the last put */
};

static struct kmem_cache *kop_cache;
static atomic64_t ops_inflight = ATOMIC64_INIT(0);

int me_ops_init(void)
{
	kop_cache = KMEM_CACHE(me_kop, 0);
	return kop_cache ? 0 : -ENOMEM;
}

void me_ops_uninit(void)
{
	kmem_cache_destroy(kop_cache);
}

u64 me_engine_ops_inflight(void)
{
	return atomic64_read(&ops_inflight);
}

int me_ops_net_start(struct me_net *mn, unsigned int nconns)
{
	unsigned int i;

	mn->conn_done = kvcalloc(nconns, sizeof(*mn->conn_done), GFP_KERNEL);
	if (!mn->conn_done)
		return -ENOMEM;
	for (i = 0; i < nconns; i++) {
		spin_lock_init(&mn->conn_done[i].lock);
		INIT_LIST_HEAD(&mn->conn_done[i].kops);
		INIT_LIST_HEAD(&mn->conn_done[i].sharers);
	}
	if (me_recvq_net_start(mn, nconns)) {
		me_ops_net_stop(mn);
		return -ENOMEM;
	}
	return 0;
}

/* Every file of the namespace is gone: so are their operations. */
void me_ops_net_stop(struct me_net *mn)
{
	me_recvq_net_stop(mn);
	kvfree(mn->conn_done);
	mn->conn_done = NULL;
}


/* ---- completions ---- */

void me_ops_fill(struct me_completion *out, const struct me_cqe *cqe, u32 type)
{
	memset(out, 0, sizeof(*out));
	out->type = type;
	out->status = cqe->status;
	out->conn = cqe->conn;
	out->peer = cqe->peer;
	out->len = cqe->len;
	out->imm = cqe->imm;
	out->region = cqe->region;
	out->off = cqe->off;
}

static void deliver(struct me_kop *kop)
{
	/* Out of the accounting before its end can be seen. */
	atomic64_dec(&ops_inflight);
	if (kop->ucmd) {
		/* Its ring's CQE; io_uring holds the file meanwhile. */
		me_uring_complete(kop->ucmd, kop->done.status,
				  kop->done.status ? 0 : kop->done.len);
	} else {
		me_cq_push_reserved(&kop->file->cq, &kop->done);
	}
}

/*
 * The last reference is gone: the user learns the operation's end, in
 * its connection's order (me_conn_done), delivered under that lock so
 * that two finishing at once cannot pass each other.  Regions go last:
 * a region's reference keeps the file (and its queue) alive, and once it
 * is dropped the file may be released and the module unloaded.
 */
/*
 * With cd->lock held: delivers what may go now (an ordered connection's
 * finished operations at the head of its queue; @kop on an unordered
 * one), moving them to @done, then the held-back event once none is left.
 */
static void deliver_ready(struct me_conn_done *cd, struct me_kop *kop,
			  struct list_head *done)
{
	struct me_kop *k, *tmp;

	if (cd->ordered) {
		list_for_each_entry_safe(k, tmp, &cd->kops, node) {
			if (!k->finished)
				break;
			list_move_tail(&k->node, done);
		}
	} else if (kop) {
		list_move_tail(&kop->node, done);
	}
	list_for_each_entry(k, done, node)
		deliver(k);
	if (cd->ev_pending && list_empty(&cd->kops)) {
		if (cd->ev_file)
			me_cq_push_event(&cd->ev_file->cq, &cd->ev);
		else
			me_shared_push_event(cd, &cd->ev);
		cd->ev_pending = false;
	}
}

/* Frees delivered operations, outside cd->lock; their regions last. */
static void release_delivered(struct list_head *done)
{
	struct me_kop *k, *tmp;

	list_for_each_entry_safe(k, tmp, done, node) {
		struct me_file *f = k->shared ? k->file : NULL;
		struct me_mr *mr = k->mr;

		me_stage_release(me_net(k->file->net), &k->stage);
		kmem_cache_free(kop_cache, k);
		/* Before its region's reference: that keeps the file alive. */
		if (f && atomic_dec_and_test(&f->shared_kops))
			wake_up(&me_net(f->net)->waitq);
		me_mr_put(mr);
	}
}

static void kop_finish(struct me_kop *kop)
{
	struct me_conn_done *cd = me_conns_done(me_net(kop->file->net), kop->conn);
	struct me_net *mn = me_net(kop->file->net);
	bool drained, last;
	u32 id = kop->conn;
	LIST_HEAD(done);

	/*
	 * The engine is done with it and its frames hold their own page
	 * references: its copies go before its completion can be seen, not
	 * after (release_delivered runs once the waiter may have woken).
	 */
	me_stage_release(mn, &kop->stage);
	spin_lock_bh(&cd->lock);
	kop->finished = true;
	deliver_ready(cd, kop, &done);
	drained = list_empty(&cd->kops) && !cd->ev_pending;
	last = drained && cd->dropped && cd->ended;
	spin_unlock_bh(&cd->lock);
	/* Before the regions go: the last put may let the file go. */
	if (last) {
		int idx = srcu_read_lock(&mn->conn_srcu);

		me_conns_try_release(mn, id);
		srcu_read_unlock(&mn->conn_srcu, idx);
	}
	release_delivered(&done);
}

static void kop_put(struct me_kop *kop)
{
	if (refcount_dec_and_test(&kop->ubuf.refcnt))
		kop_finish(kop);
}

/* ubuf_info callback: an skb carrying the kop's pages released its data. */
static void kop_skb_released(struct sk_buff *skb, struct ubuf_info *uarg, bool zerocopy)
{
	me_link_zc_released();
	kop_put(container_of(uarg, struct me_kop, ubuf));
}

void me_ops_zc_hold(u64 cookie)
{
	struct me_kop *kop = (struct me_kop *)(uintptr_t)cookie;

	refcount_inc(&kop->ubuf.refcnt);
}

void me_ops_zc_put(u64 cookie)
{
	kop_put((struct me_kop *)(uintptr_t)cookie);
}

int me_ops_zc_tx(struct me_net *mn, u32 link, u64 dst, const void *hdr, u32 hlen,
		 u64 off, u32 len, u64 cookie)
{
	struct me_kop *kop = (struct me_kop *)(uintptr_t)cookie;

	/* The engine holds a reference: kop and its region are alive. */
	if (kop->stage.pages)
		return me_link_xmit_staged(mn, link, dst, hdr, hlen, kop->mr, &kop->stage, off,
					   len);
	return me_link_xmit_zc(mn, link, dst, hdr, hlen, kop->mr, off, len, &kop->ubuf);
}

static void op_done(struct me_net *mn, const struct me_cqe *cqe)
{
	struct me_kop *kop = (struct me_kop *)(uintptr_t)cqe->cookie;
	u32 type;

	switch (kop->opcode) {
	case ME_OP_READ:
		type = ME_CQ_READ;
		break;
	case ME_OP_SEND:
		type = ME_CQ_SEND;
		break;
	case ME_OP_ATOMIC:
		type = ME_CQ_ATOMIC;
		break;
	default:
		type = ME_CQ_WRITE;
		break;
	}
	me_ops_fill(&kop->done, cqe, type);
	kop->done.cookie = kop->cookie;
	if (kop->opcode != ME_OP_NOTIFY)
		kop->done.imm = 0;
	kop_put(kop);
}

static void notify_landed(struct me_net *mn, const struct me_cqe *cqe)
{
	struct me_completion c;
	struct me_mr *mr;

	if (cqe->region == ME_REGION_MSG)
		return;		/* a send: queued for ME_IOC_RECV on arrival */
	if (cqe->status)
		return;		/* refused: the target's owner hears nothing */
	mr = me_mr_get_any(mn, cqe->region);
	if (!mr)
		return;		/* deregistered since: nobody to tell */
	me_ops_fill(&c, cqe, ME_CQ_NOTIFY);
	me_cq_push_event(&me_mr_owner(mr)->cq, &c);
	me_mr_put(mr);
}

void me_ops_complete(struct me_net *mn, const struct me_cqe *cqe)
{
	switch (cqe->type) {
	case ME_CQE_CONN_UP:
		me_conns_up(mn, cqe->conn);
		break;
	case ME_CQE_WRITE:
	case ME_CQE_READ:
	case ME_CQE_ATOMIC:
		op_done(mn, cqe);
		break;
	case ME_CQE_NOTIFY:
		notify_landed(mn, cqe);
		break;
	case ME_CQE_CONN_CLOSED:
		me_conns_event(mn, cqe, ME_CQ_CONN_CLOSED);
		break;
	case ME_CQE_CONN_DEAD:
		if (cqe->status == -ECONNABORTED)
			pr_warn_ratelimited("connection %u from node %08x aborted: too many accesses with a wrong key\n",
					    cqe->conn, cqe->peer);
		me_conns_event(mn, cqe, ME_CQ_CONN_DEAD);
		break;
	default:
		break;
	}
	/*
	 * Connect and post waiters re-check their condition; usually there
	 * are none (the barrier pairs with prepare_to_wait_event()'s).
	 */
	atomic_inc(&mn->events);
	if (wq_has_sleeper(&mn->waitq))
		wake_up(&mn->waitq);
}

/* ---- posting ---- */

static int submit(struct me_conn *c, u32 opcode, const struct me_rw *rw)
{
	switch (opcode) {
	case ME_OP_WRITE:
		return me_conn_write(c, rw);
	case ME_OP_READ:
		return me_conn_read(c, rw);
	case ME_OP_ATOMIC:
		return me_conn_atomic(c, rw);
	default:		/* NOTIFY, SEND */
		return me_conn_notify(c, rw);
	}
}

static int check_post(const struct me_post *req)
{
	if (req->opcode < ME_OP_WRITE || req->opcode > ME_OP_ATOMIC ||
	    (req->flags & ~(ME_POST_F_NONBLOCK | ME_POST_F_MORE | ME_POST_F_ACK_NOW)))
		return -EOPNOTSUPP;
	/* The ABI's operations are the engine's. */
	BUILD_BUG_ON(ME_ATOMIC_ADD != ME_AOP_ADD || ME_ATOMIC_CSWAP != ME_AOP_CSWAP ||
		     ME_ATOMIC_UMAX != ME_AOP_UMAX || ME_ATOMIC_READ != ME_AOP_READ ||
		     ME_ATOMIC_READ + 1 != ME_AOP_MAX_);
	if (req->opcode == ME_OP_ATOMIC) {
		if (req->imm < ME_ATOMIC_ADD || req->imm > ME_ATOMIC_READ)
			return -EOPNOTSUPP;
		if (req->len != 4 && req->len != 8)
			return -EINVAL;
	}
	if (!req->len || req->__reserved || req->port > ME_PORT_MAX ||
	    (req->port && req->opcode != ME_OP_SEND))
		return -EINVAL;
	if (req->opcode == ME_OP_SEND) {
		if (req->remote_region || req->remote_key || req->remote_key_hi ||
		    req->remote_off || req->imm)
			return -EINVAL;
		if (req->len > ME_SEND_MAX)
			return -EMSGSIZE;
	} else if (req->len > ME_OP_MAX_LEN) {
		return -EMSGSIZE;
	}
	if (req->opcode != ME_OP_NOTIFY && req->opcode != ME_OP_ATOMIC && req->imm)
		return -EINVAL;
	return 0;
}

int me_ops_atomic_operands(const struct me_post *req, const struct me_mr *mr, u64 *operand,
			   u64 *compare)
{
	u32 len = req->imm == ME_ATOMIC_CSWAP ? 2 * req->len : req->len;
	int err;

	*operand = 0;
	*compare = 0;
	if (req->local_off > mr->length || len > mr->length - req->local_off)
		return -ERANGE;
	if (req->imm == ME_ATOMIC_READ)
		return 0;
	if (req->len == 4) {
		u32 v[2] = {};

		err = me_mr_read(mr, req->local_off, v, len);
		*operand = v[0];
		*compare = v[1];
	} else {
		u64 v[2] = {};

		err = me_mr_read(mr, req->local_off, v, len);
		*operand = v[0];
		*compare = v[1];
	}
	return err;
}

static int post(struct me_file *f, const struct me_post *req,
		       struct io_uring_cmd *ucmd, bool may_block)
{
	struct me_net *mn = me_net(f->net);
	struct me_conn_done *cd;
	struct me_kop *kop;
	LIST_HEAD(done);
	struct me_conn *c;
	struct me_rw rw;
	int ret, seen;
	bool shared;
	long t;

	ret = check_post(req);
	if (ret)
		return ret;
	if (req->conn == ME_CONN_LOOPBACK)
		return me_loop_post(f, req, ucmd, may_block);
	c = me_engine_conn_to_post(f, req->conn);
	if (!c)
		return -ENOENT;
	/* A send on a shared connection names its taker's port, and only there. */
	shared = me_conn_mode(c) == ME_MODE_SHARED;
	if (req->opcode == ME_OP_SEND && shared && !req->port)
		return -EDESTADDRREQ;
	if (req->port && !shared)
		return -EINVAL;

	kop = kmem_cache_alloc(kop_cache, GFP_KERNEL);
	if (!kop)
		return -ENOMEM;
	refcount_set(&kop->ubuf.refcnt, 1);
	me_ubuf_set_complete(&kop->ubuf, kop_skb_released);
	kop->ubuf.flags = SKBFL_ZEROCOPY_FRAG;
	kop->conn = req->conn;
	kop->finished = false;
	kop->file = f;
	kop->ucmd = ucmd;
	kop->cookie = req->cookie;
	kop->opcode = req->opcode;
	kop->stage.pages = NULL;
	kop->stage.npages = 0;
	kop->mr = me_mr_get_owned(f, req->local_region);
	if (!kop->mr) {
		ret = -ENOENT;
		goto err_kop;
	}
	if (req->local_off > kop->mr->length || req->len > kop->mr->length - req->local_off) {
		ret = -ERANGE;
		goto err_mr;
	}
	memset(&rw, 0, sizeof(rw));
	if (req->opcode == ME_OP_ATOMIC) {
		ret = me_ops_atomic_operands(req, kop->mr, &rw.operand, &rw.compare);
		if (ret)
			goto err_mr;
	}
	/* An io_uring post completes into its ring: no slot in the file's queue. */
	if (!ucmd) {
		ret = me_cq_reserve(&f->cq, !may_block);
		if (ret)
			goto err_mr;
	}

	rw.cookie = (uintptr_t)kop;
	rw.local_region = req->local_region;
	rw.local_off = req->local_off;
	rw.remote_region = req->opcode == ME_OP_SEND ? ME_REGION_MSG : req->remote_region;
	rw.remote_key = (u64)req->remote_key_hi << 32 | req->remote_key;
	/* The sender's port is the module's to fill, not the caller's. */
	if (req->port)
		rw.remote_key = me_recvq_ports(READ_ONCE(f->port), req->port);
	rw.remote_off = req->remote_off;
	rw.len = req->len;
	rw.imm = req->imm;
	rw.flags = (req->flags & ME_POST_F_MORE ? ME_RW_MORE : 0) |
		   (req->flags & ME_POST_F_ACK_NOW ? ME_RW_ACK_NOW : 0);
	if (req->opcode == ME_OP_WRITE || req->opcode == ME_OP_NOTIFY ||
	    req->opcode == ME_OP_SEND)
		me_stage_fill(mn, &kop->stage, kop->mr, req->local_off, req->len);

	/* In its connection's delivery order before the engine may complete it. */
	cd = me_conns_done(mn, req->conn);
	spin_lock_bh(&cd->lock);
	cd->ordered = me_conn_mode(c) == ME_MODE_ORDERED;
	list_add_tail(&kop->node, &cd->kops);
	spin_unlock_bh(&cd->lock);
	kop->shared = shared;
	if (shared)
		atomic_inc(&f->shared_kops);

	atomic64_inc(&ops_inflight);
	for (;;) {
		ret = submit(c, req->opcode, &rw);
		if (ret != -EAGAIN || !may_block)
			break;
		/*
		 * The connection's queue is full: completions free entries.
		 * An io_uring worker is woken like this to be cancelled (ring
		 * teardown), so it takes any wake-up as one; anyone else
		 * sleeps through io_uring's task work (wait.h).
		 */
		seen = atomic_read(&mn->events);
		if (current->flags & PF_IO_WORKER)
			t = wait_event_interruptible_timeout(mn->waitq,
							     atomic_read(&mn->events) != seen,
							     HZ / 10);
		else
			t = me_wait_event_timeout(mn->waitq, atomic_read(&mn->events) != seen,
						  HZ / 10);
		if (t < 0) {
			ret = -ERESTARTSYS;	/* nothing posted: restart is safe */
			break;
		}
	}
	if (ret) {
		atomic64_dec(&ops_inflight);
		/*
		 * Not posted: out of the queue, and what finished behind it
		 * goes now (nothing else may come to deliver it).
		 */
		spin_lock_bh(&cd->lock);
		list_del(&kop->node);
		deliver_ready(cd, NULL, &done);
		spin_unlock_bh(&cd->lock);
		release_delivered(&done);
		if (!ucmd)
			me_cq_unreserve(&f->cq);
		if (shared)
			atomic_dec(&f->shared_kops);	/* nobody waits: the file is open */
		goto err_mr;
	}
	/*
	 * kop now belongs to the engine until it completes, which may have
	 * happened already: touch neither it nor @ucmd any more.
	 */
	return 0;

err_mr:
	me_stage_release(mn, &kop->stage);
	me_mr_put(kop->mr);
err_kop:
	kmem_cache_free(kop_cache, kop);
	return ret;
}

/*
 * The file is closing: its operations on shared connections finish before
 * its regions go (mr.c takes a region out of reach before it waits for
 * its users, and an operation whose source is out of reach ends its
 * connection: a shared one is every file's).  Bounded: an operation
 * completes, or its connection dies.
 */
void me_ops_release_file(struct me_file *f)
{
	wait_event(me_net(f->net)->waitq, !atomic_read(&f->shared_kops));
}

/* The connection stays valid while posting (conn_srcu). */
int me_ops_post(struct me_file *f, const struct me_post *req,
		struct io_uring_cmd *ucmd, bool may_block)
{
	struct me_net *mn = me_net(f->net);
	int idx, ret;

	idx = srcu_read_lock(&mn->conn_srcu);
	ret = post(f, req, ucmd, may_block);
	srcu_read_unlock(&mn->conn_srcu, idx);
	return ret;
}

long me_engine_ioc_post(struct me_file *f, void __user *uarg)
{
	struct me_post req;
	long usize;

	usize = me_copy_arg_in(&req, sizeof(req), ME_POST_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;
	return me_ops_post(f, &req, NULL, !(req.flags & ME_POST_F_NONBLOCK));
}
