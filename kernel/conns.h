/* SPDX-License-Identifier: GPL-2.0 */
/*
 * conns.h - connections of open files (conns.c): who holds a connection,
 * the order its completions reach its file in, and when its table slot
 * goes back to the engine.
 */
#ifndef ME_CONNS_H
#define ME_CONNS_H

#include <linux/list.h>
#include <linux/spinlock.h>
#include <linux/types.h>

#include "uapi/multiedge.h"

struct me_cqe;
struct me_file;
struct me_net;

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
	/*
	 * The slot's way back (try_release()), under owner_lock and lock:
	 * the owner let go (DISCONNECT, close, an abandoned connect; from
	 * the start for a passive connection), the CLOSED/DEAD event came,
	 * the engine was told (me_conn_release).  Cleared when the engine
	 * retires the connection, before the slot is reused.
	 */
	bool dropped;
	bool ended;
	bool released;
	bool abandon_closed;		/* close_abandoned() did its one close */
	/*
	 * A shared connection (shared.c): the files that joined it (its
	 * event goes to them: ev_file NULL), whether this side gave it up
	 * (the last of them left: no file may join it any more), and
	 * whether the timer must still send its CLOSE.
	 */
	struct list_head sharers;
	bool share_done;
	bool share_retry;
};

#define ME_CONNECT_TIMEOUT_MS	5000

/* The slot state of connection @id (an id the engine holds). */
struct me_conn_done *me_conns_done(struct me_net *mn, u32 id);
/* ME_CQE_CONN_UP: a passive connection has no holder; an abandoned connect is closed. */
void me_conns_up(struct me_net *mn, u32 id);
/* ME_CQE_CONN_CLOSED / ME_CQE_CONN_DEAD: the holder's event, after its operations. */
void me_conns_event(struct me_net *mn, const struct me_cqe *cqe, u32 type);
/* The slot goes back once nothing here needs it; callers hold conn_srcu. */
void me_conns_try_release(struct me_net *mn, u32 id);
struct me_conn;
/*
 * ME_IOC_CONNECT's wait: until @c is no longer connecting, at most
 * @timeout_ms (0: ME_CONNECT_TIMEOUT_MS); negative when a signal came.
 */
long me_conns_wait_settled(struct me_net *mn, struct me_conn *c, u32 timeout_ms);
/*
 * What a connect that did not come up fails with: the wait's result @t,
 * the state it left @st in, the connection's end status @why.
 */
int me_conns_connect_error(long t, int st, int why);
/* The holder lets connection @id go (it stays its until try_release()). */
void me_conns_drop(struct me_net *mn, u32 id);
/* The engine retired connection @id: its slot's state is forgotten. */
void me_conns_retired(struct me_net *mn, u32 id);

#endif /* ME_CONNS_H */
