// SPDX-License-Identifier: GPL-2.0
/*
 * share.c - connections to one peer take turns at its paths' windows.
 *
 * A connection's pump stops when no path to the peer has room
 * (me_path_pick); acks reopen room.  A connection with packets in flight
 * is pumped by its own acks and would take all the room each of them
 * opens, while one that found the windows full and has nothing in flight
 * waited for the timer and found them full again: between two guests
 * under load, the connections opened second saw operations take 5-10 s
 * where the others took 1-2 s.  So a pump that stops for want of room
 * marks its connection (path_wait, counted in the peer's waiters), and
 * every ack from the peer pumps the waiting connections before its own,
 * starting one slot further each time (round robin).
 *
 * The marks are atomics: pumps, acks and the timer run on any thread.
 * A wake-up scans the node's connection slots, but only while the peer
 * has waiters and only until one of them stops again (the room is gone).
 *
 * A pump that stops because every path with room is paced (path.c) marks
 * its connection pace_wait as well and asks the host for a call at the
 * soonest departure (pace_kick); me_core_pace() then pumps the marked
 * connections, scanning the slots only while some are marked.  An ack
 * taken in a receive batch marked handoff marks its connection the same
 * way instead of pumping, and asks the host for the call from another
 * thread at once (pump_kick): the host's CPU is busy with the receive.
 */
#include "conn.h"
#include "msg.h"
#include "node.h"
#include "path.h"
#include "share.h"

void me_share_wait(struct me_conn *c)
{
	if (me_atomic_cmpxchg(&c->path_wait, 0, 1) == 0)
		me_atomic_add_return(&c->pe->waiters, 1);
}

void me_share_unwait(struct me_conn *c)
{
	if (me_atomic_read(&c->path_wait) &&
	    me_atomic_cmpxchg(&c->path_wait, 1, 0) == 1)
		me_atomic_add_return(&c->pe->waiters, -1);
	if (me_atomic_read(&c->pace_wait) &&
	    me_atomic_cmpxchg(&c->pace_wait, 1, 0) == 1)
		me_atomic_add_return(&c->node->pace_waiters, -1);
}

void me_share_wake(struct me_node *n, struct me_peer *p)
{
	u32 i, slot, start, cnt = me_atomic_read(&n->nconns);
	bool first = true;

	if (!me_atomic_read(&p->waiters) || !cnt)
		return;
	start = me_atomic_read(&p->wake_next) % cnt;
	for (i = 0; i < cnt && me_atomic_read(&p->waiters); i++) {
		struct me_conn *c;

		slot = start + i < cnt ? start + i : start + i - cnt;
		c = me_ptr_load((void **)&n->conns[slot]);
		if (!c || c->pe != p || !me_atomic_read(&c->path_wait))
			continue;
		if (first) {
			me_atomic_set(&p->wake_next, slot + 1);
			first = false;
		}
		me_msg_pump(c);
		if (me_atomic_read(&c->path_wait))
			break;		/* the room is taken again */
	}
}

/* Marks @c for me_core_pace(), counted once in the node's waiters. */
static void pace_mark(struct me_conn *c)
{
	if (me_atomic_cmpxchg(&c->pace_wait, 0, 1) == 0)
		me_atomic_add_return(&c->node->pace_waiters, 1);
}

void me_share_pace_wait(struct me_conn *c, u64 at)
{
	pace_mark(c);
	c->node->ops->pace_kick(c->node->ctx, at);
}

void me_share_handoff(struct me_conn *c)
{
	pace_mark(c);
	c->node->ops->pump_kick(c->node->ctx);
}

void me_core_pace(struct me_node *n)
{
	u32 i, cnt = me_atomic_read(&n->nconns);

	/*
	 * The pump's first pass unmarks it (me_share_unwait()).  A mark
	 * handed off by an ack also stands for the connections waiting
	 * for the room it opened (me_win_rx_ack).
	 */
	for (i = 0; i < cnt && me_atomic_read(&n->pace_waiters); i++) {
		struct me_conn *c = me_ptr_load((void **)&n->conns[i]);

		if (c && me_atomic_read(&c->pace_wait)) {
			me_share_wake(n, c->pe);
			me_msg_pump(c);
		}
	}
}
