/* SPDX-License-Identifier: GPL-2.0 */
/*
 * msg.h - messages: the operation queue, packetization (the "pump"),
 * placement of received packets, read responses, completions.
 */
#ifndef ME_MSG_H
#define ME_MSG_H

#include "me_types.h"
#include "wire.h"

struct me_conn;
struct me_rw;

#define ME_OP_FREE	0
#define ME_OP_QUEUED	1	/* submitted, not yet completed */
#define ME_OP_DONE	2	/* completed (cqe delivered) */

/*
 * Operation queue entry.  Filled under the submit lock while FREE, then
 * published by setting state QUEUED; immutable until DONE; reclaimed by
 * the submitter only after the packetizer has moved past it (op_packed).
 */
struct me_op {
	me_atomic_t state;
	me_atomic_t id;
	me_atomic_t done_bytes;	/* read: bytes placed */
	me_atomic_t err;	/* read: first placement error (positive) */
	me_atomic_t sent;	/* a packet of it may have left (pump) */
	me_atomic_t due;	/* 0, 1: sent in full and awaiting its answer
				 * (since due_ns), 2: completed */
	me_atomic64_t due_ns;
	me_atomic_t last_seq;	/* write/notify: its last packet's sequence
				 * number, set before op_packed passes it */
	me_atomic_t first_seq;	/* its first packet's, set before `sent` */
	me_atomic_t type;	/* ME_PT_WRITE/NOTIFY/READ_REQ/ATOMIC/CLOSE; atomic:
				 * the ack pass reads it of ops a STATUS may
				 * complete and a submit reuse meanwhile */
	u64 cookie;
	u32 lregion;
	u64 loff;
	u32 rregion;
	u64 rkey;
	u64 roff;
	u32 len;
	u32 imm;		/* notify: its value; atomic: ME_AOP_* */
	u32 flags;		/* ME_RW_ACK_NOW */
	u64 operand;		/* atomic */
	u64 compare;
};

/*
 * Response job (target side: a read response to send, or a status).  The
 * ring is multi-producer (receive threads), single-consumer (the pump);
 * producers first take a credit (resp_credits) so a push never finds the
 * ring full, then publish the entry by setting ready = index + 1.
 */
struct me_resp {
	me_atomic_t ready;
	u32 type;		/* ME_PT_READ_RESP or ME_PT_STATUS */
	u32 op_id;
	u32 status;		/* positive errno for STATUS */
	u32 region;		/* READ_RESP: target source */
	u64 addr;
	u32 lregion;		/* READ_RESP: initiator destination */
	u64 laddr;
	u32 len;
	u32 aop;		/* READ_RESP answering an ATOMIC: its ME_AOP_*, */
	u64 val;		/* and the value it found (else 0, 0) */
};

/* Inbound write-message accounting: msg_id:32 | err:1 | bytes:31. */
struct me_rmsg {
	me_atomic64_t st;
};

int me_msg_alloc(struct me_conn *c);
void me_msg_free(struct me_conn *c);
void me_msg_start(struct me_conn *c);

int me_msg_submit(struct me_conn *c, u32 type, const struct me_rw *rw);
/* Packetize as much as window and links allow; never waits (trylock). */
void me_msg_pump(struct me_conn *c);
/*
 * Nothing for the pump to send, or what is left waits for the acks or
 * the pacing call that restart the pump.  Timer only: it pumps what a
 * submission racing with the check left.
 */
bool me_msg_quiet(struct me_conn *c);
/*
 * Process one in-sequence-or-unordered packet's payload.  0 when done,
 * -EAGAIN when no response slot was free (nothing changed, retry later).
 */
int me_msg_rx(struct me_conn *c, const struct me_hdr *h);
/*
 * An ack says that the peer had queued `nstatus` STATUS frames on the
 * connection when it read its cum: recorded before the ack moves snd_una.
 */
void me_msg_ack_status(struct me_conn *c, u32 nstatus);
/*
 * After an ack moved snd_una: writes and notifies acked in full that no
 * STATUS failed are complete (once every STATUS the acks count arrived).
 * Sends nothing: the caller pumps the connection after (a CLOSE may wait
 * for what completed), or has another thread pump it (a handoff).
 */
void me_msg_acked(struct me_conn *c);
/*
 * The receive side's cumulative point passed a STATUS of the peer (it
 * was processed, and so was every STATUS before it in sequence order).
 */
void me_msg_status_passed(struct me_conn *c);
/* STATUS frames queued so far (the count acks carry). */
u32 me_msg_status_queued(struct me_conn *c);
/*
 * An operation sent in full has waited longer than cfg.answer_ns for its
 * answer (a STATUS or the read's data), and in that time the peer neither
 * acknowledged new data of the connection nor answered any operation
 * (the last packets of a write may still be on their way, and answers
 * come in the order of the requests: a long read delays those behind it).
 */
bool me_msg_answer_overdue(struct me_conn *c, u64 now);
/*
 * Fail every queued operation with status (connection closed/dead), or
 * with -ECANCELED those of which no packet ever left: the target never
 * saw them.  After the peer's CLOSE, by its cut (wire 15): writes it took
 * succeed, ops it took nothing of are -ECANCELED.  Called after the state
 * left ESTABLISHED/CLOSING.
 */
void me_msg_fail_all(struct me_conn *c, s32 status);
/* A packet of message msg_id was taken (placed) here. */
bool me_msg_begun(struct me_conn *c, u32 msg_id);

#endif /* ME_MSG_H */
