// SPDX-License-Identifier: GPL-2.0
/*
 * Operations: connections of open files, posting remote writes, reads,
 * notifies and sends, their completions, and the node's receive queue for
 * sends.  The engine (core/) does the protocol; this file binds it to open
 * files: who owns a connection, which completion queue an operation's
 * completion goes to, which region it reads from or writes into locally.
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
#include "engine.h"
#include "link.h"
#include "mr.h"
#include "netns.h"
#include "ops.h"
#include "uring.h"
#include "wait.h"

#define ME_CONNECT_TIMEOUT_MS	5000

/*
 * The owner of a connection whose ME_IOC_CONNECT gave up while it was
 * still connecting: nobody can close it, so if the peer accepts it after
 * all it is closed at once (close_abandoned()), not left established.
 */
#define ME_OWNER_ABANDONED	((struct me_file *)-1L)

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
	bool finished;			/* last reference gone (under cd->lock) */
	struct me_file *file;
	struct me_mr *mr;		/* local region, referenced */
	struct io_uring_cmd *ucmd;	/* posted through io_uring, or NULL */
	u64 cookie;			/* the user's (ioctl door) */
	u32 opcode;			/* ME_OP_* */
	struct me_completion done;	/* set by op_done, delivered at the last put */
};

/*
 * The order a connection's completions reach the user in.  An operation
 * completes to its user when its last reference goes, and zero-copy
 * frames are released in any order; so on an ordered connection a
 * finished operation waits for those posted before it, and on any
 * connection the CLOSED/DEAD event waits for all of them (uapi: it
 * follows them).
 */
struct me_conn_done {
	spinlock_t lock;
	struct list_head kops;		/* posted, not yet delivered, oldest first */
	bool ordered;
	bool ev_pending;		/* ev held back until kops is empty */
	struct me_completion ev;
	struct me_file *ev_file;
};

/* A message sent to this node (ME_OP_SEND), waiting for ME_IOC_RECV. */
struct me_kmsg {
	struct list_head node;
	u32 peer;
	u32 conn;
	u32 len;
	u8 data[];
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
	}
	return 0;
}

/* Every file of the namespace is gone: so are their operations. */
void me_ops_net_stop(struct me_net *mn)
{
	kvfree(mn->conn_done);
	mn->conn_done = NULL;
}

static struct me_node *core_of(struct me_net *mn)
{
	return smp_load_acquire(&mn->core);	/* see me_engine_start() */
}

/* ---- completions ---- */

static void fill(struct me_completion *out, const struct me_cqe *cqe, u32 type)
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

static struct me_conn_done *conn_done_of(struct me_file *f, u32 conn)
{
	return &me_net(f->net)->conn_done[conn - 1];
}

static void deliver(struct me_kop *kop)
{
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
		me_cq_push_event(&cd->ev_file->cq, &cd->ev);
		cd->ev_pending = false;
	}
}

/* Frees delivered operations, outside cd->lock; their regions last. */
static void release_delivered(struct list_head *done)
{
	struct me_kop *k, *tmp;

	list_for_each_entry_safe(k, tmp, done, node) {
		struct me_mr *mr = k->mr;

		kmem_cache_free(kop_cache, k);
		atomic64_dec(&ops_inflight);
		me_mr_put(mr);
	}
}

static void kop_finish(struct me_kop *kop)
{
	struct me_conn_done *cd = conn_done_of(kop->file, kop->conn);
	LIST_HEAD(done);

	spin_lock_bh(&cd->lock);
	kop->finished = true;
	deliver_ready(cd, kop, &done);
	spin_unlock_bh(&cd->lock);
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

int me_ops_zc_tx(struct me_net *mn, u32 link, const void *hdr, u32 hlen, u64 off,
		 u32 len, u64 cookie)
{
	struct me_kop *kop = (struct me_kop *)(uintptr_t)cookie;

	/* The engine holds a reference: kop and its region are alive. */
	return me_link_xmit_zc(mn, link, hdr, hlen, kop->mr, off, len, &kop->ubuf);
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
	default:
		type = ME_CQ_WRITE;
		break;
	}
	fill(&kop->done, cqe, type);
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
	fill(&c, cqe, ME_CQ_NOTIFY);
	me_cq_push_event(&me_mr_owner(mr)->cq, &c);
	me_mr_put(mr);
}

static void conn_event(struct me_net *mn, const struct me_cqe *cqe, u32 type)
{
	struct me_completion c;
	struct me_file *f;

	if (!cqe->conn || cqe->conn > me_node_nconns(core_of(mn)))
		return;
	fill(&c, cqe, type);
	/* Under owner_lock: release clears the owner before the queue dies. */
	spin_lock_bh(&mn->owner_lock);
	f = mn->owners[cqe->conn - 1];
	if (f && f != ME_OWNER_ABANDONED) {
		struct me_conn_done *cd = &mn->conn_done[cqe->conn - 1];

		/* After the connection's operations (uapi). */
		spin_lock_bh(&cd->lock);
		if (list_empty(&cd->kops)) {
			me_cq_push_event(&f->cq, &c);
		} else {
			cd->ev = c;
			cd->ev_file = f;
			cd->ev_pending = true;
		}
		spin_unlock_bh(&cd->lock);
	}
	spin_unlock_bh(&mn->owner_lock);
}

/* Closes connection @id if its connect was abandoned; once only. */
static void close_abandoned(struct me_net *mn, u32 id)
{
	struct me_node *core = core_of(mn);
	bool mine = false;

	if (!core || !id || id > me_node_nconns(core))
		return;
	spin_lock_bh(&mn->owner_lock);
	if (mn->owners[id - 1] == ME_OWNER_ABANDONED) {
		mn->owners[id - 1] = NULL;
		mine = true;
	}
	spin_unlock_bh(&mn->owner_lock);
	if (mine)
		me_conn_close(me_conn_get(core, id));
}

void me_ops_complete(struct me_net *mn, const struct me_cqe *cqe)
{
	switch (cqe->type) {
	case ME_CQE_CONN_UP:
		close_abandoned(mn, cqe->conn);
		break;
	case ME_CQE_WRITE:
	case ME_CQE_READ:
		op_done(mn, cqe);
		break;
	case ME_CQE_NOTIFY:
		notify_landed(mn, cqe);
		break;
	case ME_CQE_CONN_CLOSED:
		conn_event(mn, cqe, ME_CQ_CONN_CLOSED);
		break;
	case ME_CQE_CONN_DEAD:
		if (cqe->status == -ECONNABORTED)
			pr_warn_ratelimited("connection %u from node %08x aborted: too many accesses with a wrong key\n",
					    cqe->conn, cqe->peer);
		conn_event(mn, cqe, ME_CQ_CONN_DEAD);
		break;
	default:
		break;
	}
	/* Connect and post waiters re-check their condition. */
	atomic_inc(&mn->events);
	wake_up(&mn->waitq);
}

/* ---- the receive queue of sends ---- */

int me_ops_msg_arrived(struct me_net *mn, u32 conn, const void *data, u32 len)
{
	struct me_conn *c = me_conn_get(core_of(mn), conn);
	struct me_kmsg *m;

	if (!c || len > ME_SEND_MAX)
		return -EINVAL;
	if (READ_ONCE(mn->nr_msgs) >= ME_RECV_QUEUE)
		return -ENOBUFS;
	/* Engine locks may be held here: no sleeping allocation. */
	m = kmalloc(struct_size(m, data, len), GFP_ATOMIC | __GFP_NOWARN);
	if (!m)
		return -ENOBUFS;
	m->peer = me_conn_peer(c);
	m->conn = conn;
	m->len = len;
	memcpy(m->data, data, len);
	spin_lock_bh(&mn->msg_lock);
	if (mn->nr_msgs >= ME_RECV_QUEUE) {
		spin_unlock_bh(&mn->msg_lock);
		kfree(m);
		return -ENOBUFS;
	}
	list_add_tail(&m->node, &mn->msgs);
	mn->nr_msgs++;
	spin_unlock_bh(&mn->msg_lock);
	wake_up(&mn->msg_wait);
	return 0;
}

void me_ops_drop_msgs(struct me_net *mn)
{
	struct me_kmsg *m, *tmp;

	list_for_each_entry_safe(m, tmp, &mn->msgs, node)
		kfree(m);
	INIT_LIST_HEAD(&mn->msgs);
	mn->nr_msgs = 0;
}

/* The oldest message (from @peer unless 0), taken off the queue. */
static struct me_kmsg *take_msg(struct me_net *mn, u32 peer)
{
	struct me_kmsg *m, *found = NULL;

	spin_lock_bh(&mn->msg_lock);
	list_for_each_entry(m, &mn->msgs, node) {
		if (!peer || m->peer == peer) {
			found = m;
			list_del(&m->node);
			mn->nr_msgs--;
			break;
		}
	}
	spin_unlock_bh(&mn->msg_lock);
	return found;
}

static void put_back_msg(struct me_net *mn, struct me_kmsg *m)
{
	spin_lock_bh(&mn->msg_lock);
	list_add(&m->node, &mn->msgs);
	mn->nr_msgs++;
	spin_unlock_bh(&mn->msg_lock);
	wake_up(&mn->msg_wait);
}

long me_engine_ioc_recv(struct me_file *f, void __user *uarg)
{
	struct me_net *mn = me_net(f->net);
	struct me_kmsg *m = NULL;
	struct me_recv req;
	long usize, ret = 0;

	usize = me_copy_arg_in(&req, sizeof(req), ME_RECV_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;
	if (req.flags & ~ME_RECV_F_WAIT)
		return -EOPNOTSUPP;

	if (req.flags & ME_RECV_F_WAIT) {
		long t = req.timeout_ms ? msecs_to_jiffies(req.timeout_ms) :
					  MAX_SCHEDULE_TIMEOUT;

		t = me_wait_event_timeout(mn->msg_wait,
					  (m = take_msg(mn, req.peer)) != NULL, t);
		if (t < 0)
			return -ERESTARTSYS;	/* nothing taken: restart is safe */
		if (!m)
			return -ETIMEDOUT;
	} else {
		m = take_msg(mn, req.peer);
		if (!m)
			return -EAGAIN;
	}

	if (m->len > req.len) {
		ret = -EMSGSIZE;
	} else if (copy_to_user(u64_to_user_ptr(req.buf), m->data, m->len)) {
		put_back_msg(mn, m);
		return -EFAULT;
	}
	req.len = m->len;
	req.peer = m->peer;
	req.conn = m->conn;
	if (ret)
		put_back_msg(mn, m);	/* too long: it stays for a bigger buffer */
	else
		kfree(m);
	if (copy_to_user(uarg, &req, min_t(size_t, usize, sizeof(req))))
		return -EFAULT;
	return ret;
}

/* ---- connections of files ---- */

struct me_conn *me_engine_conn_of(struct me_file *f, u32 id)
{
	struct me_net *mn = me_net(f->net);
	struct me_node *core = core_of(mn);
	bool mine;

	if (!core || !id || id > me_node_nconns(core))
		return NULL;
	spin_lock_bh(&mn->owner_lock);
	mine = mn->owners[id - 1] == f;
	spin_unlock_bh(&mn->owner_lock);
	return mine ? me_conn_get(core, id) : NULL;
}

static void disown(struct me_net *mn, struct me_file *f, u32 id)
{
	spin_lock_bh(&mn->owner_lock);
	if (mn->owners[id - 1] == f) {
		mn->owners[id - 1] = NULL;
		f->nr_conns--;
	}
	spin_unlock_bh(&mn->owner_lock);
}

void me_engine_release_file(struct me_file *f)
{
	struct me_net *mn = me_net(f->net);
	struct me_node *core = core_of(mn);
	u32 id, n;

	if (!core)
		return;
	n = me_node_nconns(core);
	for (id = 1; id <= n && f->nr_conns; id++) {
		struct me_conn *c = me_engine_conn_of(f, id);

		if (!c)
			continue;
		disown(mn, f, id);
		/* Posted operations still complete; then the peer is told. */
		me_conn_close(c);
	}
}

static bool peer_reachable(struct me_node *core, u32 peer)
{
	unsigned int i;

	for (i = 0; i < ME_MAX_LINKS; i++)
		if (me_link_peer(core, i) == peer && me_link_alive(core, i))
			return true;
	return false;
}

static bool connect_settled(struct me_conn *c)
{
	return me_conn_state(c) != ME_CS_CONNECTING;
}

long me_engine_ioc_connect(struct me_file *f, void __user *uarg)
{
	struct me_net *mn = me_net(f->net);
	struct me_node *core = core_of(mn);
	struct me_connect req;
	struct me_conn *c;
	long usize, t;
	int ret, st;

	usize = me_copy_arg_in(&req, sizeof(req), ME_CONNECT_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;
	if (req.flags & ~ME_CONNECT_F_ORDERED)
		return -EOPNOTSUPP;
	if (req.__reserved || req.conn)
		return -EINVAL;
	/* U32_MAX is the broadcast node. */
	if (!req.peer || req.peer == U32_MAX || req.peer == mn->node_id)
		return -EINVAL;
	if (!core || !READ_ONCE(mn->nr_links))
		return -ENETDOWN;
	if (!peer_reachable(core, req.peer))
		return -EHOSTUNREACH;

	spin_lock_bh(&mn->owner_lock);
	if (f->nr_conns >= ME_CONN_MAX_PER_FILE) {
		spin_unlock_bh(&mn->owner_lock);
		return -ENOSPC;
	}
	f->nr_conns++;		/* reserved; undone on failure */
	spin_unlock_bh(&mn->owner_lock);

	ret = me_conn_connect(core, req.peer,
			      req.flags & ME_CONNECT_F_ORDERED ? ME_MODE_ORDERED :
								 ME_MODE_UNORDERED, &c);
	if (ret) {
		spin_lock_bh(&mn->owner_lock);
		f->nr_conns--;
		spin_unlock_bh(&mn->owner_lock);
		return ret;
	}
	spin_lock_bh(&mn->owner_lock);
	mn->owners[me_conn_id(c) - 1] = f;
	spin_unlock_bh(&mn->owner_lock);

	t = msecs_to_jiffies(req.timeout_ms ? req.timeout_ms : ME_CONNECT_TIMEOUT_MS);
	t = me_wait_event_timeout(mn->waitq, connect_settled(c), t);
	st = me_conn_state(c);
	if (st == ME_CS_ESTABLISHED) {
		req.conn = me_conn_id(c);
		if (copy_to_user(uarg, &req, min_t(size_t, usize, sizeof(req)))) {
			disown(mn, f, me_conn_id(c));
			me_conn_close(c);
			return -EFAULT;
		}
		return 0;
	}
	/*
	 * Abandoned: nobody owns it.  The engine finishes one that fails on
	 * its own; one the peer accepts after all is closed, here if that
	 * happened already, else by its ME_CQE_CONN_UP.  Under owner_lock
	 * either that event saw this owner and the state read below sees
	 * ESTABLISHED, or the event sees ME_OWNER_ABANDONED.
	 */
	spin_lock_bh(&mn->owner_lock);
	if (mn->owners[me_conn_id(c) - 1] == f) {
		mn->owners[me_conn_id(c) - 1] = ME_OWNER_ABANDONED;
		f->nr_conns--;
	}
	spin_unlock_bh(&mn->owner_lock);
	if (me_conn_state(c) == ME_CS_ESTABLISHED)
		close_abandoned(mn, me_conn_id(c));
	if (t < 0)
		return -EINTR;
	if (st == ME_CS_CONNECTING)
		return -ETIMEDOUT;
	return -ECONNRESET;
}

long me_engine_ioc_disconnect(struct me_file *f, void __user *uarg)
{
	struct me_disconnect req;
	struct me_conn *c;
	long usize;

	usize = me_copy_arg_in(&req, sizeof(req), ME_DISCONNECT_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;
	c = me_engine_conn_of(f, req.conn);
	if (!c)
		return -ENOENT;
	return me_conn_close(c);
}

/* ---- posting ---- */

static int submit(struct me_conn *c, u32 opcode, const struct me_rw *rw)
{
	switch (opcode) {
	case ME_OP_WRITE:
		return me_conn_write(c, rw);
	case ME_OP_READ:
		return me_conn_read(c, rw);
	default:		/* NOTIFY, SEND */
		return me_conn_notify(c, rw);
	}
}

static int check_post(const struct me_post *req)
{
	if (req->opcode < ME_OP_WRITE || req->opcode > ME_OP_SEND ||
	    (req->flags & ~ME_POST_F_NONBLOCK))
		return -EOPNOTSUPP;
	if (req->__reserved || !req->len)
		return -EINVAL;
	if (req->opcode == ME_OP_SEND) {
		if (req->remote_region || req->remote_key || req->remote_off || req->imm)
			return -EINVAL;
		if (req->len > ME_SEND_MAX)
			return -EMSGSIZE;
	} else if (req->len > ME_OP_MAX_LEN) {
		return -EMSGSIZE;
	}
	if (req->opcode != ME_OP_NOTIFY && req->opcode != ME_OP_SEND && req->imm)
		return -EINVAL;
	return 0;
}

int me_ops_post(struct me_file *f, const struct me_post *req,
		struct io_uring_cmd *ucmd, bool may_block)
{
	struct me_net *mn = me_net(f->net);
	struct me_conn_done *cd;
	struct me_kop *kop;
	LIST_HEAD(done);
	struct me_conn *c;
	struct me_rw rw;
	int ret, seen;
	long t;

	ret = check_post(req);
	if (ret)
		return ret;
	c = me_engine_conn_of(f, req->conn);
	if (!c)
		return -ENOENT;

	kop = kmem_cache_alloc(kop_cache, GFP_KERNEL);
	if (!kop)
		return -ENOMEM;
	refcount_set(&kop->ubuf.refcnt, 1);
	kop->ubuf.callback = kop_skb_released;
	kop->ubuf.flags = SKBFL_ZEROCOPY_FRAG;
	kop->conn = req->conn;
	kop->finished = false;
	kop->file = f;
	kop->ucmd = ucmd;
	kop->cookie = req->cookie;
	kop->opcode = req->opcode;
	kop->mr = me_mr_get_owned(f, req->local_region);
	if (!kop->mr) {
		ret = -ENOENT;
		goto err_kop;
	}
	if (req->local_off > kop->mr->length || req->len > kop->mr->length - req->local_off) {
		ret = -ERANGE;
		goto err_mr;
	}
	/* An io_uring post completes into its ring: no slot in the file's queue. */
	if (!ucmd) {
		ret = me_cq_reserve(&f->cq, !may_block);
		if (ret)
			goto err_mr;
	}

	memset(&rw, 0, sizeof(rw));
	rw.cookie = (uintptr_t)kop;
	rw.local_region = req->local_region;
	rw.local_off = req->local_off;
	rw.remote_region = req->opcode == ME_OP_SEND ? ME_REGION_MSG : req->remote_region;
	rw.remote_key = req->remote_key;
	rw.remote_off = req->remote_off;
	rw.len = req->len;
	rw.imm = req->imm;

	/* In its connection's delivery order before the engine may complete it. */
	cd = conn_done_of(f, req->conn);
	spin_lock_bh(&cd->lock);
	cd->ordered = me_conn_mode(c) == ME_MODE_ORDERED;
	list_add_tail(&kop->node, &cd->kops);
	spin_unlock_bh(&cd->lock);

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
		goto err_mr;
	}
	/*
	 * kop now belongs to the engine until it completes, which may have
	 * happened already: touch neither it nor @ucmd any more.
	 */
	return 0;

err_mr:
	me_mr_put(kop->mr);
err_kop:
	kmem_cache_free(kop_cache, kop);
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

/* ---- lists and counters ---- */

long me_engine_ioc_peer_list(struct me_file *f, void __user *uarg)
{
	struct me_net *mn = me_net(f->net);
	struct me_node *core = core_of(mn);
	struct me_peer_info peers[ME_MAX_LINKS];
	struct me_peer_list req;
	unsigned int n = 0, i, j;
	long ret;

	ret = me_copy_arg_in(&req, sizeof(req), ME_PEER_LIST_SIZE_VER0, uarg);
	if (ret < 0)
		return ret;
	if (req.__reserved || req.info_size < ME_PEER_INFO_SIZE_VER0)
		return -EINVAL;
	if (req.info_size > PAGE_SIZE)
		return -E2BIG;

	memset(peers, 0, sizeof(peers));
	rtnl_lock();
	for (i = 0; core && i < ME_MAX_LINKS; i++) {
		u32 node;

		if (!me_link_slot_used(mn, i))
			continue;
		node = me_link_peer(core, i);
		if (!node)
			continue;
		for (j = 0; j < n && peers[j].node_id != node; j++)
			;
		if (j == n) {
			peers[n].node_id = node;
			peers[n].incarnation = me_link_peer_inc(core, i);
			n++;
		}
		peers[j].links |= 1U << i;
		if (me_link_alive(core, i)) {
			peers[j].alive_links |= 1U << i;
			peers[j].flags |= ME_PEER_F_ALIVE;
		}
	}
	rtnl_unlock();

	ret = me_copy_array_out(req.peers, req.info_size, peers, sizeof(peers[0]),
				min(req.count, n));
	if (ret)
		return ret;
	if (put_user(n, (u32 __user *)(uarg + offsetof(struct me_peer_list, count))))
		return -EFAULT;
	return 0;
}

static u32 conn_state_uapi(u32 st)
{
	switch (st) {
	case ME_CS_CONNECTING:
		return ME_CONN_S_CONNECTING;
	case ME_CS_ESTABLISHED:
		return ME_CONN_S_ESTABLISHED;
	case ME_CS_CLOSING:
		return ME_CONN_S_CLOSING;
	case ME_CS_CLOSED:
		return ME_CONN_S_CLOSED;
	default:
		return ME_CONN_S_DEAD;
	}
}

long me_engine_ioc_conn_list(struct me_file *f, void __user *uarg)
{
	struct me_net *mn = me_net(f->net);
	struct me_node *core = core_of(mn);
	struct me_conn_list req;
	struct me_conn_info info;
	struct me_conn_info_core ci;
	u32 n, id;
	long ret;

	ret = me_copy_arg_in(&req, sizeof(req), ME_CONN_LIST_SIZE_VER0, uarg);
	if (ret < 0)
		return ret;
	if (req.__reserved || req.info_size < ME_CONN_INFO_SIZE_VER0)
		return -EINVAL;
	if (req.info_size > PAGE_SIZE)
		return -E2BIG;

	n = core ? me_node_nconns(core) : 0;
	for (id = 1; id <= n && id <= req.count; id++) {
		me_conn_stats(me_conn_get(core, id), &ci);
		memset(&info, 0, sizeof(info));
		info.conn = ci.id;
		info.peer = ci.peer;
		info.state = conn_state_uapi(ci.state);
		info.flags = (ci.mode == ME_MODE_ORDERED ? ME_CONN_I_ORDERED : 0) |
			     (ci.active ? ME_CONN_I_ACTIVE : 0);
		info.tx_packets = ci.st[ME_CST_TX_PKTS];
		info.tx_bytes = ci.st[ME_CST_TX_BYTES];
		info.retransmits = ci.st[ME_CST_RTX];
		info.rx_packets = ci.st[ME_CST_RX_PKTS];
		info.rx_bytes = ci.st[ME_CST_RX_BYTES];
		info.rx_dropped = ci.st[ME_CST_RX_DROP];
		info.errors = ci.st[ME_CST_ERRORS];
		info.copies = atomic64_read(&mn->conn_copies[id - 1]);
		ret = me_copy_array_out(req.conns + (u64)(id - 1) * req.info_size,
					req.info_size, &info, sizeof(info), 1);
		if (ret)
			return ret;
	}
	if (put_user(n, (u32 __user *)(uarg + offsetof(struct me_conn_list, count))))
		return -EFAULT;
	return 0;
}

long me_engine_ioc_stats(struct me_file *f, void __user *uarg)
{
	struct me_node *core = core_of(me_net(f->net));
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
