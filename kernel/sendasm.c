// SPDX-License-Identifier: GPL-2.0
/*
 * Sends of several packets, gathered (ABI 26, wire 17).
 *
 * A send of up to ME_SEND_MAX bytes that does not fit one packet arrives
 * as the packets of one message, in any order and on any link (several
 * receive threads at once).  The first of them to arrive finds no entry
 * for (connection, message id) here and makes one, with the message's
 * memory (recvq.c, counted against recv_kb); every packet copies its bytes
 * in; the engine's msg_end, called once the last byte was counted, takes
 * the entry out and queues the message whole (or frees it and tells the
 * sender why).
 *
 * A peer cannot make state here for a connection the engine does not
 * hold: an entry is made only while the connection is in its table,
 * checked under the lock its retirement takes (me_sendasm_conn_retired()
 * runs after the engine emptied the slot), so nothing is left behind for a
 * connection that ended.  A peer that leaves messages unfinished on a live
 * connection holds at most one receive window of them, and recv_kb bounds
 * the namespace in all.  Each packet's copy is done under the lock: these
 * are sends, not the write stream, and the lock keeps an entry from going
 * while a packet fills it.
 */
#include <linux/hashtable.h>
#include <linux/slab.h>

#include "core/me_core.h"
#include "netns.h"
#include "recvq.h"
#include "sendasm.h"

/* A send being gathered. */
struct me_sendasm {
	struct hlist_node node;
	u32 conn;
	u32 msg_id;
	u32 len;
	u64 key;
	int err;		/* the first packet's failure, kept for the end */
	struct me_kmsg *msg;	/* NULL once err */
};

void me_sendasm_net_init(struct me_net *mn)
{
	spin_lock_init(&mn->asm_lock);
	hash_init(mn->asm_hash);
	atomic_long_set(&mn->msg_bytes, 0);
}

static u32 hash_of(u32 conn, u32 msg_id)
{
	return conn * 0x9e3779b1u ^ msg_id;
}

static struct me_sendasm *find_locked(struct me_net *mn, u32 conn, u32 msg_id)
{
	struct me_sendasm *a;

	hash_for_each_possible(mn->asm_hash, a, node, hash_of(conn, msg_id))
		if (a->conn == conn && a->msg_id == msg_id)
			return a;
	return NULL;
}

/* A new entry for a message of a connection the engine holds, or NULL. */
static struct me_sendasm *start_locked(struct me_net *mn, u32 conn, u32 msg_id, u64 key,
				       u32 len, int *err)
{
	struct me_sendasm *a;

	*err = me_recvq_key_check(mn, conn, key);
	if (*err)
		return NULL;
	a = kzalloc(sizeof(*a), GFP_ATOMIC | __GFP_NOWARN);
	if (!a) {
		*err = -ENOBUFS;
		return NULL;
	}
	a->conn = conn;
	a->msg_id = msg_id;
	a->len = len;
	a->key = key;
	a->msg = me_recvq_msg_new(mn, len);
	if (!a->msg)
		a->err = -ENOBUFS;
	hash_add(mn->asm_hash, &a->node, hash_of(conn, msg_id));
	return a;
}

int me_sendasm_part(struct me_net *mn, u32 conn, u32 msg_id, u64 key, u32 len, u32 off,
		    const void *src, u32 n)
{
	struct me_sendasm *a;
	int err = 0;

	spin_lock_bh(&mn->asm_lock);
	a = find_locked(mn, conn, msg_id);
	if (!a)
		a = start_locked(mn, conn, msg_id, key, len, &err);
	if (!a)
		goto out;
	/* Every packet of a message must say the same of it. */
	if (!a->err && (a->len != len || a->key != key))
		a->err = -EINVAL;
	if (!a->err)
		a->err = me_recvq_msg_fill(a->msg, off, src, n);
	if (a->err && a->msg) {
		me_recvq_msg_free(mn, a->msg);
		a->msg = NULL;
	}
	err = a->err;
out:
	spin_unlock_bh(&mn->asm_lock);
	return err;
}

int me_sendasm_end(struct me_net *mn, u32 conn, u32 msg_id, u64 key, u32 len, int err)
{
	struct me_sendasm *a;
	struct me_kmsg *m;

	spin_lock_bh(&mn->asm_lock);
	a = find_locked(mn, conn, msg_id);
	if (a)
		hash_del(&a->node);
	spin_unlock_bh(&mn->asm_lock);
	/*
	 * No entry: every packet failed before it could make one, this one
	 * with err; an earlier one's failure (-EIO from the engine) can only
	 * have been its memory's.
	 */
	if (!a)
		return err == -EIO || !err ? -ENOBUFS : err;
	m = a->msg;
	if (!err && (a->err || a->len != len || a->key != key))
		err = a->err ?: -EINVAL;
	else if (a->err)
		err = a->err;	/* the cause, rather than the engine's -EIO */
	kfree(a);
	if (err) {
		me_recvq_msg_free(mn, m);
		return err;
	}
	return me_recvq_deliver(mn, conn, key, m);
}

/* Frees the entries @all, or those of connection @id. */
static void drop(struct me_net *mn, bool all, u32 id)
{
	struct me_sendasm *a;
	struct hlist_node *tmp;
	HLIST_HEAD(gone);
	unsigned int b;

	spin_lock_bh(&mn->asm_lock);
	hash_for_each_safe(mn->asm_hash, b, tmp, a, node) {
		if (all || a->conn == id) {
			hash_del(&a->node);
			hlist_add_head(&a->node, &gone);
		}
	}
	spin_unlock_bh(&mn->asm_lock);
	hlist_for_each_entry_safe(a, tmp, &gone, node) {
		me_recvq_msg_free(mn, a->msg);
		kfree(a);
	}
}

void me_sendasm_conn_retired(struct me_net *mn, u32 id)
{
	drop(mn, false, id);
}

void me_sendasm_drop(struct me_net *mn)
{
	drop(mn, true, 0);
}
