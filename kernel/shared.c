// SPDX-License-Identifier: GPL-2.0
/*
 * shared.c - shared connections (ME_CONNECT_F_SHARED, ABI 18).
 *
 * A connection per pair of endpoints does not scale to a cluster: MPI's
 * ranks are each an endpoint (a file bound to a port), a node accepts
 * max_passive connections from another, and each has rings of its own.
 * A shared connection is the one connection between two nodes that every
 * file of both may post on; a send on it names the port of the file that
 * takes it (recvq.c).  It belongs to no file (owners[] stays NULL): files
 * *join* it, which is what its CONN_CLOSED/DEAD event goes to, and the one
 * this side opened closes when the last file that joined it leaves.
 *
 * A join is a struct me_share in two lists: its file's (under owner_lock)
 * and its connection slot's (under that slot's cd->lock, taken inside
 * owner_lock), so the event can go to every joined file from where
 * ops.c delivers it, holding only cd->lock.  share_mutex makes looking
 * for the connection and opening one a single step, so that the files of
 * one node do not open one each.
 */
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "core/me_core.h"
#include "chardev.h"
#include "conns.h"
#include "netns.h"
#include "shared.h"
#include "cq.h"
#include "wait.h"

struct me_share {
	struct list_head file_node;	/* in f->shares (owner_lock) */
	struct list_head conn_node;	/* in cd->sharers (cd->lock) */
	struct me_file *f;
	u32 id;
};

void me_shared_file_init(struct me_file *f)
{
	INIT_LIST_HEAD(&f->shares);
	f->nr_shares = 0;
}

static bool is_shared(struct me_conn *c)
{
	return me_conn_mode(c) == ME_MODE_SHARED;
}

/*
 * The shared connection to @peer that a file may join: being opened from
 * here, or up (from either side), and not given up.  conn_srcu held.
 */
static struct me_conn *find(struct me_net *mn, struct me_node *core, u32 peer)
{
	u32 slot, n = me_node_nconns(core);

	for (slot = 0; slot < n; slot++) {
		struct me_conn *c = me_node_conn_at(core, slot);
		struct me_conn_done *cd;
		int st;
		bool open;

		if (!c || !is_shared(c) || me_conn_peer(c) != peer)
			continue;
		st = me_conn_state(c);
		if (st != ME_CS_ESTABLISHED && !(st == ME_CS_CONNECTING && me_conn_active(c)))
			continue;
		cd = &mn->conn_done[slot];
		spin_lock_bh(&cd->lock);
		open = !cd->share_done && !cd->ended;
		spin_unlock_bh(&cd->lock);
		if (open)
			return c;
	}
	return NULL;
}

static struct me_share *joined_locked(struct me_file *f, u32 id)
{
	struct me_share *s;

	list_for_each_entry(s, &f->shares, file_node)
		if (s->id == id)
			return s;
	return NULL;
}

/* Joins @f to @c; takes @s unless @f had joined already.  0 or -errno. */
static int join(struct me_net *mn, struct me_file *f, struct me_conn *c,
		struct me_share **s)
{
	u32 id = me_conn_id(c);
	struct me_conn_done *cd = me_conns_done(mn, id);
	int ret = 0;

	spin_lock_bh(&mn->owner_lock);
	spin_lock(&cd->lock);
	if (joined_locked(f, id)) {
		ret = 0;
	} else if (cd->share_done || cd->ended) {
		ret = -ECONNRESET;	/* ended since find() saw it */
	} else if (f->nr_shares >= ME_CONN_MAX_PER_FILE) {
		ret = -ENOSPC;
	} else {
		(*s)->f = f;
		(*s)->id = id;
		list_add_tail(&(*s)->file_node, &f->shares);
		list_add_tail(&(*s)->conn_node, &cd->sharers);
		f->nr_shares++;
		*s = NULL;
	}
	spin_unlock(&cd->lock);
	spin_unlock_bh(&mn->owner_lock);
	return ret;
}

/*
 * Closes @c, given up by every file of this side, now or, when its
 * operation queue has no room for the CLOSE, from the timer once it has
 * (me_shared_timer()).  Never sleeps: CONN_UP comes in receive contexts.
 */
static void close_given_up(struct me_net *mn, struct me_conn *c)
{
	struct me_conn_done *cd = me_conns_done(mn, me_conn_id(c));

	if (me_conn_close(c) != -EAGAIN)
		return;
	spin_lock_bh(&cd->lock);
	if (!cd->share_retry) {
		cd->share_retry = true;
		atomic_inc(&mn->share_retries);
	}
	spin_unlock_bh(&cd->lock);
	me_core_kick(me_net_core(mn));	/* me_shared_timer() retries it */
}

/* Nobody here uses @c any more: closed now, or by me_shared_up(). */
static void give_up(struct me_net *mn, struct me_conn *c)
{
	close_given_up(mn, c);
	me_conns_drop(mn, me_conn_id(c));
}

bool me_shared_timer(struct me_net *mn)
{
	struct me_node *core = me_net_core(mn);
	u32 slot, n;
	int idx;

	if (!atomic_read(&mn->share_retries) || !core)
		return false;
	idx = srcu_read_lock(&mn->conn_srcu);
	n = me_node_nconns(core);
	for (slot = 0; slot < n; slot++) {
		struct me_conn_done *cd = &mn->conn_done[slot];
		struct me_conn *c;

		if (!READ_ONCE(cd->share_retry))
			continue;
		c = me_node_conn_at(core, slot);
		if (c && me_conn_close(c) == -EAGAIN)
			continue;
		spin_lock_bh(&cd->lock);
		if (cd->share_retry) {
			cd->share_retry = false;
			atomic_dec(&mn->share_retries);
		}
		spin_unlock_bh(&cd->lock);
	}
	srcu_read_unlock(&mn->conn_srcu, idx);
	return atomic_read(&mn->share_retries);
}

/* @f leaves connection @id (conn_srcu held).  -ENOENT: it had not joined. */
static int leave(struct me_net *mn, struct me_file *f, u32 id)
{
	struct me_conn_done *cd = me_conns_done(mn, id);
	struct me_conn *c = me_conn_get(me_net_core(mn), id);
	bool last = false;
	struct me_share *s;

	spin_lock_bh(&mn->owner_lock);
	s = joined_locked(f, id);
	if (!s) {
		spin_unlock_bh(&mn->owner_lock);
		return -ENOENT;
	}
	spin_lock(&cd->lock);
	list_del(&s->conn_node);
	list_del(&s->file_node);
	f->nr_shares--;
	/* The peer's connection stays for the peer's files to close. */
	if (c && me_conn_active(c) && list_empty(&cd->sharers) && !cd->share_done &&
	    !cd->ended) {
		cd->share_done = true;
		last = true;
	}
	spin_unlock(&cd->lock);
	spin_unlock_bh(&mn->owner_lock);
	kfree(s);
	if (last)
		give_up(mn, c);
	return 0;
}

int me_shared_leave(struct me_file *f, u32 id)
{
	struct me_net *mn = me_net(f->net);
	int idx, ret;

	if (!me_net_core(mn) || me_node_slot(me_net_core(mn), id) == ME_NO_SLOT)
		return -ENOENT;
	idx = srcu_read_lock(&mn->conn_srcu);
	ret = leave(mn, f, id);
	srcu_read_unlock(&mn->conn_srcu, idx);
	return ret;
}

void me_shared_release_file(struct me_file *f)
{
	struct me_net *mn = me_net(f->net);
	struct me_share *s;
	int idx;
	u32 id;

	idx = srcu_read_lock(&mn->conn_srcu);
	for (;;) {
		spin_lock_bh(&mn->owner_lock);
		s = list_first_entry_or_null(&f->shares, struct me_share, file_node);
		id = s ? s->id : 0;
		spin_unlock_bh(&mn->owner_lock);
		if (!s)
			break;
		/* Joined means not retired: the id's slot is valid. */
		leave(mn, f, id);
	}
	srcu_read_unlock(&mn->conn_srcu, idx);
}

/*
 * Joins the shared connection to @peer, opening it if there is none: 0
 * and *out, or -errno (nothing joined).  conn_srcu held.
 */
static int join_or_open(struct me_net *mn, struct me_file *f, u32 peer, struct me_conn **out)
{
	struct me_node *core = me_net_core(mn);
	bool opened = false;
	struct me_share *s;
	struct me_conn *c;
	int ret;

	s = kzalloc(sizeof(*s), GFP_KERNEL_ACCOUNT);
	if (!s)
		return -ENOMEM;
	mutex_lock(&mn->share_mutex);
	c = find(mn, core, peer);
	ret = 0;
	if (!c) {
		ret = me_conn_connect_port(core, peer, ME_MODE_SHARED, 0, &c);
		opened = !ret;
		/* The peer's CONNECT came meanwhile (rx_connect takes no mutex). */
		if (ret == -EEXIST) {
			c = find(mn, core, peer);
			ret = c ? 0 : -EEXIST;
		}
	}
	if (!ret)
		ret = join(mn, f, c, &s);
	if (ret && opened) {
		/* Opened for this file, which could not join: nobody's. */
		struct me_conn_done *cd = me_conns_done(mn, me_conn_id(c));

		spin_lock_bh(&cd->lock);
		cd->share_done = true;
		spin_unlock_bh(&cd->lock);
		if (me_conn_state(c) == ME_CS_ESTABLISHED)
			give_up(mn, c);
	}
	mutex_unlock(&mn->share_mutex);
	kfree(s);		/* joined already, or failed */
	if (!ret)
		*out = c;
	return ret;
}

/*
 * Until there is a shared connection to @peer to join or @end: the time
 * left (> 0), 0, or < 0 for a signal.  Connection events wake the
 * namespace's waiters (ops.c); find() takes locks, so it runs between
 * the waits, not as their condition.  conn_srcu held.
 */
static long wait_for_shared(struct me_net *mn, u32 peer, unsigned long end)
{
	long t;
	int seen;

	for (;;) {
		seen = atomic_read(&mn->events);
		t = time_before(jiffies, end) ? (long)(end - jiffies) : 0;
		if (find(mn, me_net_core(mn), peer))
			return max_t(long, t, 1);
		if (!t)
			return 0;
		t = me_wait_event_timeout(mn->waitq, atomic_read(&mn->events) != seen, t);
		if (t < 0)
			return t;
	}
}

long me_shared_connect(struct me_file *f, struct me_connect *req, void __user *uarg,
		       size_t usize)
{
	struct me_net *mn = me_net(f->net);
	u32 ms = req->timeout_ms ? req->timeout_ms : ME_CONNECT_TIMEOUT_MS;
	unsigned long end = jiffies + msecs_to_jiffies(ms);
	int ret, idx, st, why;
	struct me_conn *c;
	long t;
	u32 id;

	idx = srcu_read_lock(&mn->conn_srcu);
	for (;;) {
		ret = join_or_open(mn, f, req->peer, &c);
		if (ret == -EEXIST) {
			/* One that nobody here may join yet: wait for one. */
			t = wait_for_shared(mn, req->peer, end);
			if (t <= 0) {
				ret = t < 0 ? -EINTR : -ETIMEDOUT;
				break;
			}
			ms = max_t(u32, jiffies_to_msecs(t), 1);
			continue;
		}
		if (ret)
			break;
		id = me_conn_id(c);
		t = me_conns_wait_settled(mn, c, ms);
		st = me_conn_state(c);
		if (st == ME_CS_ESTABLISHED) {
			req->conn = id;
			ret = copy_to_user(uarg, req, min_t(size_t, usize, sizeof(*req))) ?
				      -EFAULT : 0;
			if (ret)
				leave(mn, f, id);
			break;
		}
		/* Not up: this file gives it up (the last one closes it when it is). */
		why = me_conn_end_status(c);
		leave(mn, f, id);
		ret = me_conns_connect_error(t, st, why);
		if (t <= 0 || why != -EEXIST)
			break;
		/*
		 * The peer opened one to this node at the same time and keeps
		 * it (core/conn.c, shared_opened_here()): join that one when
		 * its CONNECT is here, in the time left.
		 */
		t = wait_for_shared(mn, req->peer, end);
		if (t <= 0) {
			ret = t < 0 ? -EINTR : -ETIMEDOUT;
			break;
		}
		ms = max_t(u32, jiffies_to_msecs(t), 1);
	}
	srcu_read_unlock(&mn->conn_srcu, idx);
	return ret;
}

void me_shared_push_event(struct me_conn_done *cd, const struct me_completion *c)
{
	struct me_share *s;

	lockdep_assert_held(&cd->lock);
	/*
	 * One the peer refused for its own (EEXIST) never came up: the files
	 * that joined it, still in their connect, join the peer's instead.
	 */
	if (c->type == ME_CQ_CONN_DEAD && c->status == -EEXIST)
		return;
	list_for_each_entry(s, &cd->sharers, conn_node)
		me_cq_push_event(&s->f->cq, c);
}

void me_shared_up(struct me_net *mn, u32 id)
{
	struct me_conn *c = me_conn_get(me_net_core(mn), id);
	struct me_conn_done *cd;
	bool close;

	if (!c || !is_shared(c) || !me_conn_active(c))
		return;
	cd = me_conns_done(mn, id);
	spin_lock_bh(&cd->lock);
	/* Every file that joined left while it was connecting. */
	close = cd->share_done && !cd->ended;
	spin_unlock_bh(&cd->lock);
	if (close && me_conn_state(c) == ME_CS_ESTABLISHED)
		give_up(mn, c);
}

void me_shared_retired_locked(struct me_net *mn, struct me_conn_done *cd)
{
	struct me_share *s, *tmp;

	lockdep_assert_held(&mn->owner_lock);
	spin_lock(&cd->lock);
	list_for_each_entry_safe(s, tmp, &cd->sharers, conn_node) {
		list_del(&s->conn_node);
		list_del(&s->file_node);
		s->f->nr_shares--;
		kfree(s);
	}
	cd->share_done = false;
	if (cd->share_retry) {
		cd->share_retry = false;
		atomic_dec(&mn->share_retries);
	}
	spin_unlock(&cd->lock);
}
