/* SPDX-License-Identifier: GPL-2.0 */
/*
 * me_plat.h - the narrow interface between the portable core and its host.
 *
 * The kernel module implements these operations with skbs, pinned pages and
 * ktime; the userspace simulator with a discrete-event network and byte
 * arrays.  The core never calls anything else outside itself (locks and
 * atomics come from me_types.h), so the core links standalone.
 *
 * Context rules: every operation may be called from any receive thread, from
 * me_core_timer() and from the submitting caller, concurrently; none but
 * alloc may sleep and none may call back into the core.
 */
#ifndef ME_PLAT_H
#define ME_PLAT_H

#include "me_types.h"

struct me_conn;

/* Access rights checked by mr_check (bit mask). */
#define ME_ACC_WRITE	0x1	/* remote peers may write the region */
#define ME_ACC_READ	0x2	/* remote peers may read the region */

/* Completion / event kinds delivered through ops->complete. */
enum me_cqe_type {
	ME_CQE_WRITE = 1,	/* initiator: a write (or notify) finished */
	ME_CQE_READ,		/* initiator: a read finished, data in place */
	ME_CQE_NOTIFY,		/* target: a notify-write landed, imm valid */
	ME_CQE_CONN_UP,		/* connection established (either side) */
	ME_CQE_CONN_CLOSED,	/* orderly close finished */
	ME_CQE_CONN_DEAD,	/* peer died/restarted or retries exhausted */
	ME_CQE_ATOMIC,		/* initiator: an atomic finished, the value it
				 * found in place */
};

/*
 * A completion.  status is 0 or a negative errno:
 *   -EACCES     bad key or permission at the target
 *   -ERANGE     offset/length outside the target region
 *   -ENOENT     no such region at the target
 *   -ECONNRESET the connection closed or the peer restarted
 *   -ETIMEDOUT  the peer or every link to it died
 * It is delivered exactly once per operation, after the data are in place
 * (for a write: at the target; for a read: in the initiator's memory).
 */
struct me_cqe {
	u32 type;		/* enum me_cqe_type */
	s32 status;
	u64 cookie;		/* the submitter's cookie (0 for target events) */
	u32 conn;		/* local connection id */
	u32 peer;		/* peer node id */
	u32 len;		/* bytes moved */
	u32 imm;		/* notification value (ME_CQE_NOTIFY/WRITE) */
	u32 region;		/* ME_CQE_NOTIFY: local region written */
	u64 off;		/* ME_CQE_NOTIFY: offset written */
};

/* mr_write: whole pages placed by copy (wire 16). */
#define ME_PLACE_COPIED	1

struct me_plat_ops {
	/* Monotonic time in nanoseconds. */
	u64 (*now_ns)(void *ctx);
	/*
	 * Transmit one packet (the bytes after the Ethernet header) on a link
	 * to link-layer address dst (48 bits; ME_ADDR_BCAST, me_core.h, for
	 * everyone on the link).  The platform must be done with buf when it
	 * returns (copy it or take its own reference); a failure is treated
	 * like a loss.
	 */
	int (*tx)(void *ctx, u32 link, u64 dst, const void *buf, u32 len);
	/*
	 * May a remote peer access [off, off + len) of local region `region`
	 * with `key` for `access` (ME_ACC_*)?  0, -ENOENT (no such region),
	 * -EKEYREJECTED (wrong key), -EACCES (access not granted) or, for the
	 * right key only, -ERANGE.  The peer is told EACCES for the first
	 * three alike; wrong keys count towards cfg.key_fail_max.
	 */
	int (*mr_check)(void *ctx, u32 region, u64 key, u64 off, u64 len,
			u32 access);
	/*
	 * Deliver payload into local region memory (already checked).  conn
	 * identifies the connection for the platform's bookkeeping; key is
	 * the packet's (0 for a read's data): on a shared connection a
	 * send's ports (ME_MODE_SHARED), which the host routes it by.  The
	 * per-page synchronization of Table 1 state 9 lives here (see
	 * Documentation/protocol.md).  rx is what the host passed to
	 * me_core_rx_frame() with the packet (NULL when the core delivers
	 * from its own copy): a host may place whole pages from its frame
	 * by page flip instead of copying src.  0, ME_PLACE_COPIED (a whole
	 * page of the region in [off, off + len) was copied, not flipped:
	 * the sender is asked to fill its packets rather than cut them at
	 * this host's page boundaries, wire 16) or a negative errno (->
	 * message error).  Called from receive contexts only; with a
	 * non-NULL rx outside every core lock, so then it may sleep if the
	 * host's receive contexts may (with NULL rx it may hold an ordered
	 * connection's in-order lock: no sleeping).
	 */
	int (*mr_write)(void *ctx, u32 conn, u32 region, u64 key, u64 off,
			const void *src, u32 len, void *rx);
	/*
	 * May the local user access [off, off + len) of its own region for
	 * `access` (ME_ACC_READ: source of a write; ME_ACC_WRITE: destination
	 * of a read)?  Checked at submission.  0 or a negative errno.
	 */
	int (*mr_local)(void *ctx, u32 region, u64 off, u64 len, u32 access);
	/* Copy from a local region (the source of a write or read response). */
	int (*mr_read)(void *ctx, u32 region, u64 off, void *dst, u32 len);
	/* A completion or connection event; may not call into the core. */
	void (*complete)(void *ctx, const struct me_cqe *cqe);
	/*
	 * Allocation: only at node/connection setup, never per packet, and
	 * never with a core lock held, so a host may sleep here (the kernel
	 * module does: its callers are receive threads and ioctls).
	 */
	void *(*alloc)(void *ctx, size_t size);
	void (*free)(void *ctx, void *p);

	/*
	 * Zero-copy transmit (optional: NULL zc_tx, or cfg.zc_min 0, and the
	 * payload of every packet is copied into the window with mr_read and
	 * sent with tx).  A packet of a write or notify (or send) carrying at
	 * least cfg.zc_min payload bytes keeps only its header in the window;
	 * zc_tx sends the header followed by [off, off + len) of the local
	 * region, taking whatever references the platform needs on that
	 * memory until the frame is gone (it may return before).  cookie is
	 * the operation's (me_rw.cookie).
	 *
	 * The core holds references on an operation's payload through zc_hold
	 * and zc_put, so a platform can complete the operation to its user
	 * only when nothing may read the payload any more (Table 1 state 1):
	 *   - one from its submission until it has been packetized, or
	 *     dropped unsent (the "pack" reference);
	 *   - one per window entry carrying its payload, from packetizing
	 *     until the entry is acknowledged or its connection ends.
	 * zc_tx is only called while such a reference is held.  Each
	 * zc_hold is matched by exactly one zc_put, at the latest when the
	 * node is destroyed.  Any context the core runs in; none may sleep.
	 */
	int (*zc_tx)(void *ctx, u32 link, u64 dst, const void *hdr, u32 hdr_len,
		     u32 region, u64 off, u32 len, u64 cookie);
	void (*zc_hold)(void *ctx, u64 cookie);
	void (*zc_put)(void *ctx, u64 cookie);

	/*
	 * Receive placement (both optional).  rx_fill: the core is about to
	 * copy the packet it got with rx whole (an ordered connection keeps
	 * it until its turn); the host must make every byte at buf valid
	 * (a host may leave whole pages it intends to flip out of buf).
	 * mr_done: every byte of a message for [off, off + len) of local
	 * region `region` has been through mr_write (successfully or not);
	 * called once per message, before its completion or status is
	 * produced, so a host can finish batched work (page table updates)
	 * that must be visible before the data are announced.  Only for
	 * unordered connections, whose placement runs outside every core
	 * lock (in the context that may sleep in mr_write); an ordered
	 * connection places from its ring under its in-order lock, never
	 * with a frame, so it has no such work.
	 */
	void (*rx_fill)(void *ctx, void *rx);
	void (*mr_done)(void *ctx, u32 region, u64 off, u64 len);

	/*
	 * Bits nobody can predict, for initial sequence numbers (optional:
	 * without it they follow from the incarnation and the connection id,
	 * which a blind sender can compute from a HELLO).
	 */
	u32 (*random_u32)(void *ctx);

	/*
	 * Connection reuse (optional; without it a connection lives until
	 * me_node_destroy() and max_conns bounds a node's life).  A
	 * connection the host released (me_conn_release) that has been
	 * closed or dead for cfg.linger_ns leaves the connection table and
	 * its slot takes a new id; then the core calls retire(), from its
	 * timer, and never touches the connection again.  The host must call
	 * me_conn_free() once no thread can still be using a pointer to it
	 * that it looked up before (a receive or an ioctl in flight): at once
	 * if nothing runs concurrently, after a grace period otherwise.
	 */
	void (*retire)(void *ctx, struct me_conn *conn);

	/*
	 * Is an endpoint listening on @port (1..ME_WIRE_PORT_MAX)?  Asked for a
	 * CONNECT from a known peer that names a port; no: it is refused
	 * (optional: without it every such CONNECT is refused).
	 */
	bool (*port_open)(void *ctx, u32 port);

	/*
	 * Transmit bursts (optional).  The packetizer brackets its loop with
	 * tx_burst(ctx, true) and tx_burst(ctx, false), holding its
	 * connection's pump lock (so, in the kernel, on one CPU with bottom
	 * halves off): the platform may hold the packets tx and zc_tx hand it
	 * in between and pass them to the NIC together when the burst ends
	 * (one doorbell for many).  Bursts may nest; a platform flushes at the
	 * outermost end.  A packet that then fails counts as a loss, as with tx.
	 */
	void (*tx_burst)(void *ctx, bool open);

	/*
	 * Apply atomic operation aop (ME_AOP_*, aop.h) to the `size` (4 or
	 * 8) bytes at [off, off + size) of local region `region` (mr_check
	 * passed for ME_AOP_ACCESS(aop)), atomically with respect to every
	 * other mr_atomic, and store the value found there in *old (host
	 * order, in the low bits for size 4).  -EINVAL if that memory is
	 * not aligned to size; another negative errno if it could not be
	 * reached.  Optional: without it the target refuses atomics with
	 * -EOPNOTSUPP.  Called from receive contexts; must not sleep.
	 */
	int (*mr_atomic)(void *ctx, u32 region, u64 off, u32 size, u32 aop,
			 u64 operand, u64 compare, u64 *old);

	/*
	 * The timer is needed sooner than the period me_core_timer() last
	 * returned (optional: a host that calls it every cfg.tick_ns anyway
	 * needs none).  Called at most once per idle pass, from any context
	 * (receive, submission, the timer itself); must not sleep.
	 */
	void (*timer_kick)(void *ctx);

	/*
	 * Pacing (cfg.pace_pct): call me_core_pace() at at_ns (now_ns()'s
	 * clock) or soon after, unless a call is already due sooner.
	 * Required with pacing on.  Called from pumps in any context but
	 * hard IRQ; must not sleep.
	 */
	void (*pace_kick)(void *ctx, u64 at_ns);

	/*
	 * Call me_core_pace() soon, from another thread than this one
	 * (optional): a receive batch marked handoff asks the packets its
	 * acks release to be sent there.  Called in any context but hard
	 * IRQ; must not sleep.
	 */
	void (*pump_kick)(void *ctx);

	/*
	 * Answers to reads by reference (optional: without resp_hold, or
	 * with cfg.zc_min 0, a READ_RESP's payload is copied into the
	 * window with mr_read).  A READ_RESP packet carrying at least
	 * cfg.zc_min payload bytes keeps only its header in the window:
	 * resp_hold takes a reference on [off, off + len) of local region
	 * `region` (whose mr_check passed when the request came) for the
	 * entry and returns a non-zero handle, or 0 if the region is gone or
	 * no longer covers the range; resp_tx sends the header followed by
	 * those bytes, taking whatever references the platform needs on that
	 * memory until the frame is gone (it may return before); resp_put
	 * drops the entry's reference, exactly once, when the entry is
	 * acknowledged or its connection has ended (at the latest when the
	 * node is destroyed).  resp_tx is only called
	 * while the reference is held.  Any context the core runs in; none
	 * may sleep.
	 */
	u64 (*resp_hold)(void *ctx, u32 region, u64 off, u32 len);
	int (*resp_tx)(void *ctx, u32 link, u64 dst, const void *hdr, u32 hdr_len,
		       u64 handle, u64 off, u32 len);
	void (*resp_put)(void *ctx, u64 handle);

	/*
	 * The ack timer: call me_core_acks() at at_ns (now_ns()'s clock) or
	 * soon after, unless a call is already due sooner; at_ns 0: no ack
	 * is held any more, a pending call may be dropped if
	 * me_core_acks_pending() still says none (checked under the lock
	 * that orders it against the requests).  Optional: without it the
	 * timer passes by each held ack's end and ticks while an ack is
	 * owed (me_core_timer() then sleeps no longer).  Called from
	 * receive and send paths in any context but hard IRQ, with core
	 * locks held; must not sleep.
	 */
	void (*ack_kick)(void *ctx, u64 at_ns);

	/*
	 * A peer's write or notify packet, checked and placed with one look
	 * at the region (optional: without it the core calls mr_check and
	 * then mr_write, a data packet's two lookups of its region): as
	 * mr_check(region, key, addr, len, ME_ACC_WRITE) of the packet's
	 * whole message [addr, addr + len), then, if that passed and n is
	 * not 0, as mr_write(conn, region, key, off, src, n, rx) of the
	 * packet's own bytes (off within the message).  Returns mr_check's
	 * error, or what mr_write returns; called where mr_write is.
	 * msg_id names the packet's message on conn (for msg_end).
	 */
	int (*mr_place)(void *ctx, u32 conn, u32 msg_id, u32 region, u64 key, u64 addr,
			u64 len, u64 off, const void *src, u32 n, void *rx);
	/*
	 * A write or notify message of more than one packet ended (optional;
	 * with mr_place): each of its packets went through mr_place, the
	 * last one just now.  err: that packet's error, else -EIO if an
	 * earlier one failed, else 0.  Returns what the sender is told, 0 or
	 * a negative errno.  For a host that gathers the packets of a
	 * message to one of its own regions (the kernel's sends, which go
	 * to a receive queue whole); called where mr_place is, once per
	 * such message, before its completion or status.
	 */
	int (*msg_end)(void *ctx, u32 conn, u32 msg_id, u32 region, u64 key, u64 len, int err);
};

#endif /* ME_PLAT_H */
