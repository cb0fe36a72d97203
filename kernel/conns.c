// SPDX-License-Identifier: GPL-2.0
/*
 * conns.c - connections of open files.
 *
 * A connection opened by ME_IOC_CONNECT belongs to its file (a peer's
 * connection, to the file that adopts it by receiving from it: recvq.c);
 * its completions and its CLOSED/DEAD event go to that file, the event
 * after all of its operations (struct me_conn_done).  A connection's
 * table slot goes back to the engine (me_conn_release) once nothing here
 * needs it: its file gave it up (DISCONNECT, closing the file, or a
 * connect that gave up; a passive one from the start), it ended, and its
 * event was delivered after its operations.  The engine retires it after
 * linger_ns; the slot's state here is forgotten then (me_conns_retired),
 * before the slot takes another connection.
 *
 * Connections are looked up without references: the paths that use one
 * hold the namespace's conn_srcu, and a retired connection is freed only
 * after a grace period (engine.c).
 */
#include <linux/sched/signal.h>
#include <linux/uaccess.h>

#include "core/me_core.h"
#include "chardev.h"
#include "conns.h"
#include "engine.h"
#include "netns.h"
#include "ops.h"
#include "recvq.h"
#include "shared.h"
#include "wait.h"

/*
 * The owner of a connection whose ME_IOC_CONNECT gave up while it was
 * still connecting: nobody can close it, so if the peer accepts it after
 * all it is closed at once (close_abandoned()), not left established.
 */
#define ME_OWNER_ABANDONED	((struct me_file *)-1L)

/*
 * Per-slot state of connection @id (valid ids only: those of connections
 * the engine has handed out and not yet retired).
 */
static u32 slot_of(struct me_net *mn, u32 id)
{
	return me_node_slot(me_net_core(mn), id);
}

struct me_conn_done *me_conns_done(struct me_net *mn, u32 id)
{
	return &mn->conn_done[slot_of(mn, id)];
}

/*
 * With owner_lock and cd->lock: if nothing here needs the connection any
 * more (its owner let go, its CLOSED/DEAD event came and was delivered
 * after all of its operations), the slot gets no owner and true says to
 * tell the engine (engine_release()).
 */
static bool release_locked(struct me_net *mn, u32 id, u32 slot, struct me_conn_done *cd)
{
	struct me_file *f;

	if (!cd->dropped || !cd->ended || cd->released || !list_empty(&cd->kops) ||
	    cd->ev_pending)
		return false;
	cd->released = true;
	f = mn->owners[slot];
	mn->owners[slot] = NULL;
	if (f && f != ME_OWNER_ABANDONED) {
		if (me_recvq_adopted_locked(mn, id))
			f->nr_adopted--;
		else
			f->nr_conns--;
	}
	return true;
}

/*
 * The engine may retire connection @id after linger_ns; its id then names
 * nothing (-ENOENT).  Callers hold conn_srcu.
 */
static void engine_release(struct me_net *mn, u32 id)
{
	struct me_conn *c = me_conn_get(me_net_core(mn), id);

	if (c)
		me_conn_release(c);
}

void me_conns_event(struct me_net *mn, const struct me_cqe *cqe, u32 type)
{
	u32 slot = slot_of(mn, cqe->conn);
	struct me_conn *conn = me_conn_get(me_net_core(mn), cqe->conn);
	bool to_port = conn && me_conn_port(conn);
	struct me_conn_done *cd;
	struct me_completion c;
	struct me_file *f;
	bool release;

	if (slot == ME_NO_SLOT)
		return;
	cd = &mn->conn_done[slot];
	me_ops_fill(&c, cqe, type);
	/*
	 * Under owner_lock: release clears the owner before the queue dies.
	 * A connection a file adopted by receiving from it (recvq.c) tells
	 * its end only to the peer that opened it, unless it was opened to
	 * the file's port: that one is the file's own (ABI 11).
	 */
	spin_lock_bh(&mn->owner_lock);
	f = mn->owners[slot];
	spin_lock_bh(&cd->lock);
	cd->ended = true;
	if (conn && me_conn_mode(conn) == ME_MODE_SHARED) {
		/* Every file that joined it, after every operation on it. */
		cd->dropped = true;
		if (list_empty(&cd->kops)) {
			me_shared_push_event(cd, &c);
		} else {
			cd->ev = c;
			cd->ev_file = NULL;
			cd->ev_pending = true;
		}
	} else if (f && f != ME_OWNER_ABANDONED &&
		   (to_port || !me_recvq_adopted_locked(mn, cqe->conn))) {
		/* After the connection's operations (uapi). */
		if (list_empty(&cd->kops)) {
			me_cq_push_event(&f->cq, &c);
		} else {
			cd->ev = c;
			cd->ev_file = f;
			cd->ev_pending = true;
		}
	}
	/* In the same section: whoever sees the event sees the id gone. */
	release = release_locked(mn, cqe->conn, slot, cd);
	spin_unlock_bh(&cd->lock);
	spin_unlock_bh(&mn->owner_lock);
	if (release)
		engine_release(mn, cqe->conn);
}

/* Gives connection @id back once nothing here needs it (release_locked). */
void me_conns_try_release(struct me_net *mn, u32 id)
{
	u32 slot = slot_of(mn, id);
	struct me_conn_done *cd;
	bool go;

	if (slot == ME_NO_SLOT)
		return;
	cd = &mn->conn_done[slot];
	spin_lock_bh(&mn->owner_lock);
	spin_lock_bh(&cd->lock);
	go = release_locked(mn, id, slot, cd);
	spin_unlock_bh(&cd->lock);
	spin_unlock_bh(&mn->owner_lock);
	if (go)
		engine_release(mn, id);
}

/* The owner lets connection @id go (it stays its until try_release()). */
void me_conns_drop(struct me_net *mn, u32 id)
{
	struct me_conn_done *cd = &mn->conn_done[slot_of(mn, id)];

	spin_lock_bh(&cd->lock);
	cd->dropped = true;
	spin_unlock_bh(&cd->lock);
	me_conns_try_release(mn, id);
}

/*
 * A passive connection: nobody here holds it (a file may adopt it), but
 * one opened to a port is the bound file's from now on; if that file let
 * the port go since the CONNECT, nobody may have it and it is closed.
 */
static void passive_up(struct me_net *mn, u32 id)
{
	struct me_conn *c = me_conn_get(me_net_core(mn), id);

	if (!c || me_conn_active(c))
		return;
	if (me_conn_port(c) && !me_recvq_port_adopt(mn, id, me_conn_port(c)))
		me_conn_close(c);
	me_conns_drop(mn, id);
}

/*
 * The engine retired connection @id (plat_retire): forget its slot before
 * a new connection takes it.
 */
void me_conns_retired(struct me_net *mn, u32 id)
{
	struct me_conn_done *cd = &mn->conn_done[slot_of(mn, id)];

	spin_lock_bh(&mn->owner_lock);
	me_shared_retired_locked(mn, cd);
	spin_unlock_bh(&mn->owner_lock);
	spin_lock_bh(&cd->lock);
	WARN_ON_ONCE(!list_empty(&cd->kops) || cd->ev_pending || !cd->released);
	cd->dropped = false;
	cd->ended = false;
	cd->released = false;
	cd->abandon_closed = false;
	cd->ordered = false;
	spin_unlock_bh(&cd->lock);
	me_recvq_conn_retired(mn, id);
}

/*
 * Closes connection @id if its connect was abandoned; once only.  The
 * slot keeps ME_OWNER_ABANDONED (nobody to tell) until try_release().
 */
static void close_abandoned(struct me_net *mn, u32 id)
{
	u32 slot = slot_of(mn, id);
	struct me_conn_done *cd;
	struct me_conn *c;
	bool mine = false;

	if (slot == ME_NO_SLOT)
		return;
	cd = &mn->conn_done[slot];
	spin_lock_bh(&mn->owner_lock);
	spin_lock_bh(&cd->lock);
	if (mn->owners[slot] == ME_OWNER_ABANDONED && !cd->released && !cd->ended &&
	    !cd->abandon_closed) {
		cd->abandon_closed = true;
		mine = true;
	}
	spin_unlock_bh(&cd->lock);
	spin_unlock_bh(&mn->owner_lock);
	c = mine ? me_conn_get(me_net_core(mn), id) : NULL;
	if (c)
		me_conn_close(c);
}


void me_conns_up(struct me_net *mn, u32 id)
{
	passive_up(mn, id);
	close_abandoned(mn, id);
	me_shared_up(mn, id);
}

/* Callers hold conn_srcu for as long as they use the connection. */
struct me_conn *me_engine_conn_of(struct me_file *f, u32 id)
{
	struct me_net *mn = me_net(f->net);
	struct me_node *core = me_net_core(mn);
	u32 slot;
	bool mine;

	if (!core)
		return NULL;
	slot = me_node_slot(core, id);
	if (slot == ME_NO_SLOT)
		return NULL;
	spin_lock_bh(&mn->owner_lock);
	mine = mn->owners[slot] == f;
	spin_unlock_bh(&mn->owner_lock);
	return mine ? me_conn_get(core, id) : NULL;
}

/* Callers hold conn_srcu for as long as they use the connection. */
struct me_conn *me_engine_conn_to_post(struct me_file *f, u32 id)
{
	struct me_conn *c = me_engine_conn_of(f, id);
	struct me_node *core;

	if (c)
		return c;
	/* Any file of the namespace posts on a shared connection. */
	core = me_net_core(me_net(f->net));
	c = core ? me_conn_get(core, id) : NULL;
	return c && me_conn_mode(c) == ME_MODE_SHARED ? c : NULL;
}

/*
 * The file is going: its connections have nobody to tell any more.
 * Returns whether @f had adopted it (recvq.c) rather than opened it.
 */
static bool disown(struct me_net *mn, struct me_file *f, u32 id)
{
	u32 slot = slot_of(mn, id);
	bool adopted = false;

	spin_lock_bh(&mn->owner_lock);
	if (mn->owners[slot] == f) {
		mn->owners[slot] = NULL;
		adopted = me_recvq_adopted_locked(mn, id);
		if (adopted)
			f->nr_adopted--;
		else
			f->nr_conns--;
	}
	spin_unlock_bh(&mn->owner_lock);
	return adopted;
}

void me_engine_release_file(struct me_file *f)
{
	struct me_net *mn = me_net(f->net);
	struct me_node *core = me_net_core(mn);
	u32 slot, n;
	int idx;

	if (!core)
		return;
	idx = srcu_read_lock(&mn->conn_srcu);
	n = me_node_nconns(core);
	for (slot = 0; slot < n && (f->nr_conns || f->nr_adopted); slot++) {
		struct me_conn *c = me_node_conn_at(core, slot);
		u32 id;

		if (!c)
			continue;
		id = me_conn_id(c);
		if (me_engine_conn_of(f, id) != c)
			continue;
		/*
		 * Posted operations still complete; then the peer is told.
		 * An adopted connection stays open for the peer that opened
		 * it (nobody takes its messages any more), unless it was
		 * opened to this file's port: that endpoint is gone.
		 */
		if (!disown(mn, f, id) || me_conn_port(c))
			me_conn_close(c);
		me_conns_drop(mn, id);
	}
	srcu_read_unlock(&mn->conn_srcu, idx);
}

/* Alive both ways on some link (the engine refuses unknown peers too). */
static bool peer_reachable(struct me_node *core, u32 peer)
{
	return me_peer_alive_links(core, peer) != 0;
}

static bool connect_settled(struct me_conn *c)
{
	return me_conn_state(c) != ME_CS_CONNECTING;
}

long me_conns_wait_settled(struct me_net *mn, struct me_conn *c, u32 timeout_ms)
{
	long t = msecs_to_jiffies(timeout_ms ? timeout_ms : ME_CONNECT_TIMEOUT_MS);

	return me_wait_event_timeout(mn->waitq, connect_settled(c), t);
}

int me_conns_connect_error(long t, int st, int why)
{
	if (t < 0)
		return -EINTR;
	if (st == ME_CS_CONNECTING)
		return -ETIMEDOUT;
	/* Refused (no endpoint on the port, no room), or the peer restarted. */
	return why == -ECONNREFUSED || why == -ENOSPC ? why : -ECONNRESET;
}

long me_engine_ioc_connect(struct me_file *f, void __user *uarg)
{
	struct me_net *mn = me_net(f->net);
	struct me_node *core = me_net_core(mn);
	struct me_connect req;
	struct me_conn *c;
	int ret, st, idx, why;
	long usize, t;
	u32 id;

	usize = me_copy_arg_in(&req, sizeof(req), ME_CONNECT_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;
	if (req.flags & ~(ME_CONNECT_F_ORDERED | ME_CONNECT_F_SHARED))
		return -EOPNOTSUPP;
	if (req.conn || req.port > ME_PORT_MAX)
		return -EINVAL;
	/* The shared connection serves every port and places on arrival. */
	if ((req.flags & ME_CONNECT_F_SHARED) &&
	    (req.port || (req.flags & ME_CONNECT_F_ORDERED)))
		return -EINVAL;
	/* U32_MAX is the broadcast node. */
	if (!req.peer || req.peer == U32_MAX || req.peer == mn->node_id)
		return -EINVAL;
	if (!core || !READ_ONCE(mn->nr_links))
		return -ENETDOWN;
	if (!peer_reachable(core, req.peer))
		return -EHOSTUNREACH;
	if (req.flags & ME_CONNECT_F_SHARED)
		return me_shared_connect(f, &req, uarg, usize);

	spin_lock_bh(&mn->owner_lock);
	if (f->nr_conns >= ME_CONN_MAX_PER_FILE) {
		spin_unlock_bh(&mn->owner_lock);
		return -ENOSPC;
	}
	f->nr_conns++;		/* reserved; undone on failure */
	spin_unlock_bh(&mn->owner_lock);

	ret = me_conn_connect_port(core, req.peer,
				   req.flags & ME_CONNECT_F_ORDERED ? ME_MODE_ORDERED :
								      ME_MODE_UNORDERED,
				   req.port, &c);
	if (ret) {
		spin_lock_bh(&mn->owner_lock);
		f->nr_conns--;
		spin_unlock_bh(&mn->owner_lock);
		return ret;
	}
	/* Ours until dropped, so never retired under us; conn_srcu anyway. */
	idx = srcu_read_lock(&mn->conn_srcu);
	id = me_conn_id(c);
	spin_lock_bh(&mn->owner_lock);
	mn->owners[slot_of(mn, id)] = f;
	me_recvq_claim_locked(mn, id);
	spin_unlock_bh(&mn->owner_lock);

	t = me_conns_wait_settled(mn, c, req.timeout_ms);
	st = me_conn_state(c);
	if (st == ME_CS_ESTABLISHED) {
		req.conn = id;
		ret = 0;
		if (copy_to_user(uarg, &req, min_t(size_t, usize, sizeof(req)))) {
			disown(mn, f, id);
			me_conn_close(c);
			me_conns_drop(mn, id);
			ret = -EFAULT;
		}
		srcu_read_unlock(&mn->conn_srcu, idx);
		return ret;
	}
	/*
	 * Abandoned: nobody owns it.  The engine finishes one that fails on
	 * its own; one the peer accepts after all is closed, here if that
	 * happened already, else by its ME_CQE_CONN_UP.  Under owner_lock
	 * either that event saw this owner and the state read below sees
	 * ESTABLISHED, or the event sees ME_OWNER_ABANDONED.
	 */
	spin_lock_bh(&mn->owner_lock);
	if (mn->owners[slot_of(mn, id)] == f) {
		mn->owners[slot_of(mn, id)] = ME_OWNER_ABANDONED;
		f->nr_conns--;
	}
	spin_unlock_bh(&mn->owner_lock);
	if (me_conn_state(c) == ME_CS_ESTABLISHED)
		close_abandoned(mn, id);
	why = me_conn_end_status(c);
	me_conns_drop(mn, id);
	srcu_read_unlock(&mn->conn_srcu, idx);
	return me_conns_connect_error(t, st, why);
}

long me_engine_ioc_disconnect(struct me_file *f, void __user *uarg)
{
	struct me_disconnect req;
	struct me_conn *c;
	long usize;
	int ret, idx;

	usize = me_copy_arg_in(&req, sizeof(req), ME_DISCONNECT_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;
	idx = srcu_read_lock(&me_net(f->net)->conn_srcu);
	c = me_engine_conn_to_post(f, req.conn);
	if (c && me_conn_mode(c) == ME_MODE_SHARED) {
		ret = me_shared_leave(f, req.conn);
	} else if (c) {
		ret = me_conn_close(c);
		/* Given up either way: the file's no longer once it ended. */
		me_conns_drop(me_net(f->net), req.conn);
	} else {
		ret = -ENOENT;
	}
	srcu_read_unlock(&me_net(f->net)->conn_srcu, idx);
	return ret;
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
	struct me_node *core = me_net_core(mn);
	struct me_conn_list req;
	struct me_conn_info info;
	struct me_conn_info_core ci;
	u32 n, slot, k = 0;
	int idx;
	long ret;

	ret = me_copy_arg_in(&req, sizeof(req), ME_CONN_LIST_SIZE_VER0, uarg);
	if (ret < 0)
		return ret;
	if (req.__reserved || req.info_size < ME_CONN_INFO_SIZE_VER0)
		return -EINVAL;
	if (req.info_size > PAGE_SIZE)
		return -E2BIG;

	/* The connections in the table, in slot order: k of them. */
	idx = srcu_read_lock(&mn->conn_srcu);
	n = core ? me_node_nconns(core) : 0;
	for (slot = 0; slot < n; slot++) {
		struct me_conn *c = me_node_conn_at(core, slot);

		if (!c)
			continue;
		if (k++ >= req.count)
			continue;
		me_conn_stats(c, &ci);
		memset(&info, 0, sizeof(info));
		info.conn = ci.id;
		info.peer = ci.peer;
		info.state = conn_state_uapi(ci.state);
		info.flags = (ci.mode == ME_MODE_ORDERED ? ME_CONN_I_ORDERED : 0) |
			     (ci.mode == ME_MODE_SHARED ? ME_CONN_I_SHARED : 0) |
			     (ci.active ? ME_CONN_I_ACTIVE : 0);
		info.tx_packets = ci.st[ME_CST_TX_PKTS];
		info.tx_bytes = ci.st[ME_CST_TX_BYTES];
		info.retransmits = ci.st[ME_CST_RTX];
		info.rx_packets = ci.st[ME_CST_RX_PKTS];
		info.rx_bytes = ci.st[ME_CST_RX_BYTES];
		info.rx_dropped = ci.st[ME_CST_RX_DROP];
		info.errors = ci.st[ME_CST_ERRORS];
		info.copies = atomic64_read(&mn->conn_copies[slot]);
		info.port = me_conn_port(c);
		ret = me_copy_array_out(req.conns + (u64)(k - 1) * req.info_size,
					req.info_size, &info, sizeof(info), 1);
		if (ret) {
			srcu_read_unlock(&mn->conn_srcu, idx);
			return ret;
		}
	}
	srcu_read_unlock(&mn->conn_srcu, idx);
	if (put_user(k, (u32 __user *)(uarg + offsetof(struct me_conn_list, count))))
		return -EFAULT;
	return 0;
}
