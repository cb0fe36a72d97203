// SPDX-License-Identifier: GPL-2.0
/*
 * Receive queues of sends (ME_OP_SEND), taken with ME_IOC_RECV.
 *
 * A message belongs to the file that holds the connection it arrived on:
 *
 *   - a connection a file opened (ME_IOC_CONNECT) is that file's: the
 *     peer answers on the connection it accepted, and only the opener
 *     receives the answer;
 *   - a passive connection (a peer opened it) belongs to nobody until a
 *     file takes one of its messages: that file adopts it.  Until then its
 *     messages wait in the namespace's queue, where any file of the
 *     namespace may take them (as any process holding a listening socket
 *     may accept); once adopted, the rest of them move to the adopter's
 *     queue and every later one goes there, and the adopter may post on
 *     the connection (an answer reaches only the file that opened it);
 *   - a passive connection opened to a port (ABI 11, ports.c) is the
 *     bound file's from the start, as if adopted; a file bound to a port
 *     takes nothing from the namespace's queue;
 *   - a connection whose file is gone (closed, or an abandoned connect)
 *     takes no more messages;
 *   - a shared connection (ABI 18, conns.c) is nobody's: each of its
 *     messages names the port of the file that takes it, and the sender's
 *     port, which its module filled in (ops.c).
 *
 * Each queue holds at most ME_RECV_QUEUE messages; a message for a full
 * one is refused (the sender's send completes with -ENOBUFS), so a peer
 * that fills one file's queue, or the namespace's, leaves every other
 * file's alone.  A file takes its oldest message first, from its own
 * queue or the namespace's (an arrival number orders them).
 *
 * Messages are held in memory allocated as they arrive (no sleeping: a
 * receive thread or the softirq), so the namespace's total is bounded:
 * recv_kb, counted from allocation (sendasm.c gathers a send of several
 * packets into its message before it is queued) to ME_IOC_RECV.  A send
 * of up to ME_SEND_MAX_VER0 bytes lies in its message; a larger one in
 * pages, so that no large block has to be found in atomic context.
 *
 * Locking: the owner of a connection (mn->owners, nr_conns, nr_adopted and
 * the claimed/adopted bits) changes under owner_lock; queues under
 * msg_lock, taken inside owner_lock.  An arrival reads the owner and
 * queues under both, so once a file has disowned a connection nothing is
 * queued to it any more, and its queue can be freed at release.
 */
#include <linux/bitmap.h>
#include <linux/list.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include "core/me_core.h"
#include "chardev.h"
#include "netns.h"
#include "ports.h"
#include "recvq.h"
#include "sendasm.h"
#include "uapi/multiedge.h"
#include "wait.h"

static unsigned int recv_kb = 16384;
module_param(recv_kb, uint, 0444);
MODULE_PARM_DESC(recv_kb,
		 "Sends a namespace holds, queued for ME_IOC_RECV or still arriving, KiB (default 16384; 64..1048576)");

/* A message sent to this node (ME_OP_SEND), waiting for ME_IOC_RECV. */
struct me_kmsg {
	struct list_head node;
	u64 seq;		/* arrival order in the namespace */
	u32 peer;
	u32 conn;
	u32 port;		/* the sender's, on a shared connection */
	u32 len;
	u32 npages;		/* 0: the bytes are in data[] */
	union {
		DECLARE_FLEX_ARRAY(u8, data);
		DECLARE_FLEX_ARRAY(struct page *, pages);
	};
};

bool me_recvq_param_ok(void)
{
	if (recv_kb >= ME_SEND_MAX / 1024 && recv_kb <= 1048576)
		return true;
	pr_err("bad parameter: recv_kb=%u\n", recv_kb);
	return false;
}

/* What a message of @len bytes counts against recv_kb: what it holds. */
static unsigned long charge_of(u32 len)
{
	return len > ME_SEND_MAX_VER0 ? PAGE_ALIGN(len) : len;
}

struct me_kmsg *me_recvq_msg_new(struct me_net *mn, u32 len)
{
	u32 npages = len > ME_SEND_MAX_VER0 ? DIV_ROUND_UP(len, PAGE_SIZE) : 0;
	unsigned long charge = charge_of(len);
	struct me_kmsg *m;
	u32 i;

	if (len > ME_SEND_MAX)
		return NULL;
	if (atomic_long_add_return(charge, &mn->msg_bytes) > (long)recv_kb * 1024)
		goto uncharge;
	/* Engine locks may be held here: no sleeping allocation. */
	m = kmalloc(npages ? struct_size(m, pages, npages) : struct_size(m, data, len),
		    GFP_ATOMIC | __GFP_NOWARN);
	if (!m)
		goto uncharge;
	m->len = len;
	m->npages = npages;
	for (i = 0; i < npages; i++) {
		/*
		 * Zeroed: a peer's packets need not cover every byte.  No
		 * sleeping, but no reserves either: those are for the stack.
		 */
		m->pages[i] = alloc_page(GFP_NOWAIT | __GFP_NOWARN | __GFP_ZERO);
		if (!m->pages[i]) {
			m->npages = i;
			me_recvq_msg_free(mn, m);
			return NULL;
		}
	}
	return m;

uncharge:
	atomic_long_sub(charge, &mn->msg_bytes);
	return NULL;
}

void me_recvq_msg_free(struct me_net *mn, struct me_kmsg *m)
{
	unsigned long charge;
	u32 i;

	if (!m)
		return;
	/* Charged in full, also when allocating its pages failed midway. */
	charge = charge_of(m->len);
	for (i = 0; i < m->npages; i++)
		__free_page(m->pages[i]);
	kfree(m);
	atomic_long_sub(charge, &mn->msg_bytes);
}

int me_recvq_msg_fill(struct me_kmsg *m, u32 off, const void *src, u32 n)
{
	if (off > m->len || n > m->len - off)
		return -EINVAL;
	if (!m->npages) {
		memcpy(m->data + off, src, n);
		return 0;
	}
	while (n) {
		u32 in = offset_in_page(off), k = min_t(u32, n, PAGE_SIZE - in);

		memcpy(page_address(m->pages[off >> PAGE_SHIFT]) + in, src, k);
		src += k;
		off += k;
		n -= k;
	}
	return 0;
}

/* The message's bytes to user memory at @buf: 0 or -EFAULT. */
static int msg_to_user(const struct me_kmsg *m, void __user *buf)
{
	u32 off, k;

	if (!m->npages)
		return copy_to_user(buf, m->data, m->len) ? -EFAULT : 0;
	for (off = 0; off < m->len; off += k) {
		k = min_t(u32, m->len - off, PAGE_SIZE);
		if (copy_to_user(buf + off, page_address(m->pages[off >> PAGE_SHIFT]), k))
			return -EFAULT;
	}
	return 0;
}

int me_recvq_net_start(struct me_net *mn, unsigned int nconns)
{
	mn->conn_claimed = bitmap_zalloc(nconns, GFP_KERNEL);
	mn->conn_adopted = bitmap_zalloc(nconns, GFP_KERNEL);
	if (!mn->conn_claimed || !mn->conn_adopted) {
		me_recvq_net_stop(mn);
		return -ENOMEM;
	}
	return 0;
}

void me_recvq_net_stop(struct me_net *mn)
{
	bitmap_free(mn->conn_claimed);
	bitmap_free(mn->conn_adopted);
	mn->conn_claimed = NULL;
	mn->conn_adopted = NULL;
}

static void free_list(struct me_net *mn, struct list_head *list)
{
	struct me_kmsg *m, *tmp;

	list_for_each_entry_safe(m, tmp, list, node)
		me_recvq_msg_free(mn, m);
	INIT_LIST_HEAD(list);
}

void me_recvq_drop(struct me_net *mn)
{
	me_sendasm_drop(mn);
	free_list(mn, &mn->msgs);
	mn->nr_msgs = 0;
}

void me_recvq_file_init(struct me_file *f)
{
	INIT_LIST_HEAD(&f->msgs);
	f->nr_msgs = 0;
}

void me_recvq_file_release(struct me_file *f)
{
	struct me_net *mn = me_net(f->net);
	LIST_HEAD(list);

	spin_lock_bh(&mn->msg_lock);
	list_splice_init(&f->msgs, &list);
	f->nr_msgs = 0;
	spin_unlock_bh(&mn->msg_lock);
	free_list(mn, &list);
}

/* The table slot of connection @id (a connection the engine holds). */
static u32 slot_of(struct me_net *mn, u32 id)
{
	return me_node_slot(smp_load_acquire(&mn->core), id);
}

void me_recvq_claim_locked(struct me_net *mn, u32 id)
{
	lockdep_assert_held(&mn->owner_lock);
	set_bit(slot_of(mn, id), mn->conn_claimed);
}

bool me_recvq_adopted_locked(struct me_net *mn, u32 id)
{
	lockdep_assert_held(&mn->owner_lock);
	return test_bit(slot_of(mn, id), mn->conn_adopted);
}

/*
 * The engine retired connection @id: before its slot takes another, a file
 * that adopted it after it ended lets it go, and its messages nobody took
 * from the namespace's queue go (they name a connection that is gone).
 */
void me_recvq_conn_retired(struct me_net *mn, u32 id)
{
	u32 slot = slot_of(mn, id);
	struct me_kmsg *m, *tmp;
	struct me_file *f;
	LIST_HEAD(gone);

	spin_lock_bh(&mn->owner_lock);
	f = mn->owners[slot];
	if (f && test_bit(slot, mn->conn_adopted)) {
		f->nr_adopted--;
		mn->owners[slot] = NULL;
	}
	WARN_ON_ONCE(mn->owners[slot]);
	clear_bit(slot, mn->conn_claimed);
	clear_bit(slot, mn->conn_adopted);
	spin_lock(&mn->msg_lock);
	list_for_each_entry_safe(m, tmp, &mn->msgs, node) {
		if (m->conn == id) {
			list_move(&m->node, &gone);
			mn->nr_msgs--;
		}
	}
	spin_unlock(&mn->msg_lock);
	spin_unlock_bh(&mn->owner_lock);
	free_list(mn, &gone);
	me_sendasm_conn_retired(mn, id);
}

/*
 * @f adopts passive connection @conn: owner, and the messages of it still
 * in the namespace queue, in arrival order, into @f's queue (which may
 * then hold more than ME_RECV_QUEUE: at most twice).  Both locks held.
 */
static void adopt(struct me_net *mn, struct me_file *f, u32 conn)
{
	struct me_kmsg *m, *tmp, *at;

	u32 slot = slot_of(mn, conn);

	mn->owners[slot] = f;
	set_bit(slot, mn->conn_claimed);
	set_bit(slot, mn->conn_adopted);
	f->nr_adopted++;
	list_for_each_entry_safe(m, tmp, &mn->msgs, node) {
		if (m->conn != conn)
			continue;
		list_del(&m->node);
		mn->nr_msgs--;
		/* After the last of f's that arrived before it (or first). */
		list_for_each_entry_reverse(at, &f->msgs, node)
			if (at->seq < m->seq)
				break;
		list_add(&m->node, &at->node);
		f->nr_msgs++;
	}
}

/* With both locks: see me_recvq_port_adopt(); returns the owner or NULL. */
static struct me_file *port_adopt_locked(struct me_net *mn, u32 conn, u32 port)
{
	u32 slot = slot_of(mn, conn);
	struct me_file *f = mn->owners[slot];

	if (f || test_bit(slot, mn->conn_claimed))
		return f;
	f = me_ports_file_locked(mn, port);
	if (f)
		adopt(mn, f, conn);
	else
		set_bit(slot, mn->conn_claimed);	/* nobody's, for good */
	return f;
}

bool me_recvq_port_adopt(struct me_net *mn, u32 id, u32 port)
{
	struct me_file *f;

	spin_lock_bh(&mn->owner_lock);
	spin_lock(&mn->msg_lock);
	f = port_adopt_locked(mn, id, port);
	spin_unlock(&mn->msg_lock);
	spin_unlock_bh(&mn->owner_lock);
	if (f)
		wake_up(&mn->msg_wait);
	return f;
}

int me_recvq_arrived(struct me_net *mn, u32 conn, u64 key, const void *data, u32 len)
{
	struct me_kmsg *m;

	m = me_recvq_msg_new(mn, len);
	if (!m)
		return len > ME_SEND_MAX ? -EINVAL : -ENOBUFS;
	me_recvq_msg_fill(m, 0, data, len);
	return me_recvq_deliver(mn, conn, key, m);
}

/* Ports only on a shared connection, and there a destination. */
static bool key_ok(struct me_conn *c, u64 key)
{
	return me_conn_mode(c) == ME_MODE_SHARED ? (key & ME_PORT_MAX) && !(key >> 32) : !key;
}

int me_recvq_key_check(struct me_net *mn, u32 conn, u64 key)
{
	struct me_conn *c = me_conn_get(smp_load_acquire(&mn->core), conn);

	return c && key_ok(c, key) ? 0 : -EINVAL;
}

int me_recvq_deliver(struct me_net *mn, u32 conn, u64 key, struct me_kmsg *m)
{
	struct me_conn *c = me_conn_get(smp_load_acquire(&mn->core), conn);
	bool shared = c && me_conn_mode(c) == ME_MODE_SHARED;
	u32 dst = key & ME_PORT_MAX;
	struct me_file *f;
	int ret = 0;
	u32 slot;

	if (!c || !key_ok(c, key)) {
		me_recvq_msg_free(mn, m);
		return -EINVAL;
	}
	m->peer = me_conn_peer(c);
	m->conn = conn;
	m->port = shared ? (key >> 16) & ME_PORT_MAX : 0;

	slot = slot_of(mn, conn);
	spin_lock_bh(&mn->owner_lock);
	f = shared ? me_ports_file_locked(mn, dst) : mn->owners[slot];
	spin_lock(&mn->msg_lock);
	if (shared && !f) {
		ret = -ECONNREFUSED;	/* nobody is bound to the port */
		goto unlock;
	}
	/* Before its CONN_UP got here (passive_up). */
	if (!f && !test_bit(slot, mn->conn_claimed) && me_conn_port(c))
		f = port_adopt_locked(mn, conn, me_conn_port(c));
	if (f) {
		if (f->nr_msgs < ME_RECV_QUEUE) {
			m->seq = mn->msg_seq++;
			list_add_tail(&m->node, &f->msgs);
			f->nr_msgs++;
			m = NULL;
		}
	} else if (!test_bit(slot, mn->conn_claimed)) {
		if (mn->nr_msgs < ME_RECV_QUEUE) {
			m->seq = mn->msg_seq++;
			list_add_tail(&m->node, &mn->msgs);
			mn->nr_msgs++;
			m = NULL;
		}
	}
	/* else: its file is gone, nobody may take it. */
	if (m)
		ret = -ENOBUFS;
unlock:
	spin_unlock(&mn->msg_lock);
	spin_unlock_bh(&mn->owner_lock);
	if (m)
		me_recvq_msg_free(mn, m);
	else
		wake_up(&mn->msg_wait);
	return ret;
}

static struct me_kmsg *first_from(struct list_head *list, u32 peer)
{
	struct me_kmsg *m;

	list_for_each_entry(m, list, node)
		if (!peer || m->peer == peer)
			return m;
	return NULL;
}

/* The oldest message of @f (from @peer unless 0), taken off its queue. */
static struct me_kmsg *take_msg(struct me_file *f, u32 peer)
{
	struct me_net *mn = me_net(f->net);
	struct me_kmsg *own, *ns;

	spin_lock_bh(&mn->owner_lock);
	spin_lock(&mn->msg_lock);
	own = first_from(&f->msgs, peer);
	/* A file bound to a port answers to its port only. */
	ns = f->port ? NULL : first_from(&mn->msgs, peer);
	if (ns && (!own || ns->seq < own->seq)) {
		/* Only messages of connections nobody holds wait there. */
		adopt(mn, f, ns->conn);
		own = ns;
	}
	if (own) {
		list_del(&own->node);
		f->nr_msgs--;
	}
	spin_unlock(&mn->msg_lock);
	spin_unlock_bh(&mn->owner_lock);
	return own;
}

/* Back at the head of @f's queue (it was the oldest): too long, or -EFAULT. */
static void put_back_msg(struct me_file *f, struct me_kmsg *m)
{
	struct me_net *mn = me_net(f->net);

	spin_lock_bh(&mn->msg_lock);
	list_add(&m->node, &f->msgs);
	f->nr_msgs++;
	spin_unlock_bh(&mn->msg_lock);
	wake_up(&mn->msg_wait);
}

long me_recvq_ioc_recv(struct me_file *f, void __user *uarg)
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
	if (req.__reserved)
		return -EINVAL;

	if (req.flags & ME_RECV_F_WAIT) {
		long t = req.timeout_ms ? msecs_to_jiffies(req.timeout_ms) :
					  MAX_SCHEDULE_TIMEOUT;

		t = me_wait_event_timeout(mn->msg_wait,
					  (m = take_msg(f, req.peer)) != NULL, t);
		if (t < 0)
			return -ERESTARTSYS;	/* nothing taken: restart is safe */
		if (!m)
			return -ETIMEDOUT;
	} else {
		m = take_msg(f, req.peer);
		if (!m)
			return -EAGAIN;
	}

	if (m->len > req.len) {
		ret = -EMSGSIZE;
	} else if (msg_to_user(m, u64_to_user_ptr(req.buf))) {
		put_back_msg(f, m);
		return -EFAULT;
	}
	req.len = m->len;
	req.peer = m->peer;
	req.conn = m->conn;
	req.port = m->port;
	if (ret)
		put_back_msg(f, m);	/* too long: it stays for a bigger buffer */
	else
		me_recvq_msg_free(mn, m);
	if (copy_to_user(uarg, &req, min_t(size_t, usize, sizeof(req))))
		return -EFAULT;
	return ret;
}

__poll_t me_recvq_poll(struct me_file *f, struct file *file, poll_table *wait)
{
	struct me_net *mn = me_net(f->net);

	poll_wait(file, &mn->msg_wait, wait);
	/*
	 * Unlocked: a stale "yes" costs the caller one -EAGAIN, and every
	 * arrival wakes msg_wait after its count changed.  Messages of
	 * connections nobody adopted yet wait for any file.
	 */
	return READ_ONCE(f->nr_msgs) || (!READ_ONCE(f->port) && READ_ONCE(mn->nr_msgs)) ?
	       EPOLLRDBAND : 0;
}
