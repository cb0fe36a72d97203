/* SPDX-License-Identifier: GPL-2.0 */
/*
 * conn.h - connections: handshake, incarnations, close, peer death.
 *
 * A connection is identified on the wire by (node, incarnation, conn id) at
 * each end.  A retired connection's slot takes the next generation's id,
 * and a node's incarnation changes at every start, so a packet from an
 * earlier life of either the connection or the peer does not match a live
 * connection (and, should ids ever wrap, fails its cookie).
 * Each side also picks a random 64-bit cookie, exchanged in CONNECT and
 * ACCEPT, that every frame to it must carry: a sender that does not see
 * the handshake cannot inject into the connection.
 */
#ifndef ME_CONN_H
#define ME_CONN_H

#include "me_core.h"
#include "window.h"
#include "msg.h"

struct me_node;

struct me_conn {
	struct me_node *node;
	u32 id;			/* local id; its slot is reused, the id not
				 * until the generations wrap */
	u32 peer;		/* peer node id */
	struct me_peer *pe;	/* its slot, held (path.h) */
	u32 mode;		/* ME_MODE_* */
	u32 port;		/* the passive side's endpoint (0: any) */
	bool active;		/* opened by me_conn_connect() */
	me_atomic64_t cst[ME_CST_MAX_];	/* enum me_cstat */
	me_atomic_t state;	/* enum me_conn_state_e */
	/* Set by the handshake before state becomes ESTABLISHED. */
	u32 peer_conn;
	u32 peer_inc;
	u64 peer_cookie;	/* goes on every frame to the peer */
	u64 cookie;		/* every frame from the peer must carry it */
	u32 isn;		/* our first sequence number */
	u32 maxpay;		/* payload bytes per packet */
	u32 window;		/* ring sizes, power of two */
	u32 pack_max;		/* entries in one PACK we send: a quarter
				 * of the peer's response ring (its window)
				 * at most, so it always has the credits */
	u32 credit;		/* credit we advertise */
	u64 connect_sent_ns;	/* (timer) */
	u64 connect_start_ns;	/* first CONNECT */
	u32 connect_tries;	/* (timer) */
	me_atomic64_t last_rx_ns;	/* any valid packet from the peer */
	me_atomic64_t heard_ns;	/* the peer's last frame of this connection
				 * (ACCEPT, a resent CONNECT, any frame
				 * with its cookie): a quiet shared one may
				 * be one the peer no longer has */
	me_atomic_t refused;	/* shared, connecting: refused (EEXIST)
				 * while this side held no shared connection
				 * of the peer's; CONNECT again flagged
				 * ME_F_FRESH (wire 13) */
	me_atomic64_t end_ns;	/* when it became CLOSED or DEAD, 0 before */
	s32 end_status;		/* why it died (negative errno), set before
				 * the state (conn_end) */
	me_atomic_t released;	/* the host let go (me_conn_release) */
	void *host_link;	/* the host's, once retired */
	me_atomic_t abort_left;	/* ABORTs still to send (conn_end) */
	u32 abort_status;	/* positive errno they carry */
	u64 abort_sent_ns;	/* (timer) */
	bool inflight_swept;	/* (timer) once more after the end */

	/* ---- transmit side (window.c) ---- */
	struct me_txslot *tx;
	u8 *txbuf;
	me_atomic_t snd_una;	/* oldest unacked sequence number */
	me_atomic_t snd_max;	/* one past the highest ever sent */
	me_atomic_t snd_right;	/* peer's credit edge: send seq < this */
	me_atomic_t close_seq;	/* seq of our CLOSE + 1, 0 if none */
	me_atomic64_t srtt_ns;	/* smoothed rtt, 0 = no sample yet */
	me_atomic64_t rttvar_ns;
	me_atomic_t rtt_seeded;	/* srtt is the keepalives' (me_win_seed_rtt) */
	me_atomic_t backoff;	/* RTO doubling count, reset on progress */
	u64 rto_probe_ns;	/* (timer) last timeout that resent only the
				 * oldest packet (window.c) */
	u64 rto_first_ns;	/* (timer) first timeout since backoff was 0 */
	u64 rto_due_ns;		/* (timer) the earliest timeout of what the
				 * last pass found in flight (window.c) */
	me_atomic_t tx_fill;	/* the peer's acks say ME_F_FILL: packets
				 * are filled, not cut at its pages (msg.c) */

	/* ---- receive side (window.c) ---- */
	struct me_rxslot *rx;
	u8 *rxbuf;
	me_atomic_t rcv_cum;	/* next sequence number not yet received */
	me_lock_t order_lock;	/* Table 1 state 2a: in-order scan */
	me_lock_t ack_lock;	/* Table 1 state 2b: ack/nack sending */
	me_atomic_t unacked;	/* packets received since the last ack */
	me_atomic_t unacked_bytes;	/* ... and their bytes */
	me_atomic_t ack_link;	/* the newest packet's link: acks leave there */
	me_atomic_t nack_cum;	/* rcv_cum when we last nacked */
	me_atomic_t rcv_high;	/* one past the highest seq received */
	me_atomic64_t rx_cut;	/* the close cut (wire 15, window.c): 0
				 * none, else ME_CUT_* (window.h) */
	me_atomic_t peer_cut;	/* the cut the peer's CLOSE carried */
	me_atomic_t peer_cut_run;	/* we processed that CLOSE: the ops it
					 * fails are classed by the cut (msg.c) */
	me_atomic_t rx_dup;	/* a packet came twice since the last ack
				 * (its ME_F_DUP tells the sender) */
	me_atomic_t rx_copies;	/* whole pages of the newest packet cut at
				 * our pages were copied (its ME_F_FILL
				 * tells the sender; msg.c) */
	me_atomic64_t rx_arrival_ns; /* when the newest packet reached the host */
	me_atomic_t rx_stamp;	/* the stamp of the first packet since the
				 * last ack (0: none), which the next echoes */
	u32 ack_no;		/* (ack_lock) acks sent, picks the sack base */
	me_atomic_t ack_held;	/* an ack is owed and waits for a reply to
				 * the peer to carry it (window.c) */
	me_atomic64_t held_ns;	/* when it began to wait */
	me_atomic64_t owed_ns;	/* when the first packet left for the ack
				 * timer since the last ack came (0: none;
				 * window.c, ack_owe) */

	/* ---- messages (msg.c) ---- */
	struct me_op *ops;
	u32 nops;
	me_lock_t sub_lock;	/* submitters (caller context, may spin) */
	me_atomic_t op_head;	/* next op id to submit */
	u32 op_tail;		/* (sub_lock) oldest op not reclaimed */
	me_atomic_t op_packed;	/* ops before this were sent in full (last_seq
				 * set) or had completed before they were */
	me_atomic_t answers_due;	/* ops with due == 1 (msg.c) */
	me_atomic64_t progress_ns;	/* last ack of new data or answer */
	me_atomic_t key_rejected;	/* remote accesses with a wrong key */
	me_atomic_t status_queued;	/* STATUS frames we queued (target) */
	/* completion by acks (msg.c, me_msg_acked) */
	me_atomic_t ack_status;	/* largest STATUS count acks carried */
	me_atomic_t status_seen;	/* peer's STATUS frames below rcv_cum */
	me_lock_t done_lock;	/* one completion pass at a time (trylock) */
	me_atomic_t done_again;	/* a pass is wanted */
	u32 ack_op;		/* (done_lock) next op to complete by an ack */
	u64 answer_check_ns;	/* (timer) last scan for overdue answers */
	struct me_resp *resp;
	u32 nresp;
	me_atomic_t resp_head;	/* next ring index to reserve */
	me_atomic_t resp_credits;
	struct me_rmsg *rmsg;
	me_lock_t pump_lock;	/* one packetizer at a time (trylock) */
	me_atomic_t pump_again;	/* work arrived while the pump was busy */
	me_atomic_t path_wait;	/* the pump stopped for want of path window:
				 * any ack from the peer wakes it (share.c) */
	me_atomic_t pace_wait;	/* ... or a path with window was paced, or
				 * an ack was handed off: me_core_pace()
				 * pumps it (share.c) */
	/*
	 * (pump_lock) the pump stopped where something other than the timer
	 * restarts it: an ack, or the pacing call (msg.c, pump_parked)
	 */
	bool parked;
	/* (pump_lock) packetizer cursor */
	u32 op_pack;
	u32 resp_tail;
	u32 cur_kind;		/* 0 idle, 1 op at op_pack, 2 resp at tail */
	u32 cur_msg;
	u32 cur_off;
	u32 msg_nxt;
};

static inline void me_cstat_add(struct me_conn *c, enum me_cstat st, u64 v)
{
	me_atomic64_add_return(&c->cst[st], v);
}

struct me_conn *me_conn_lookup(struct me_node *n, const struct me_hdr *h);
void me_conn_rx_ctl(struct me_node *n, u32 link, u64 src, const struct me_hdr *h);
/* An ABORT without source connection: the peer refused our CONNECT. */
void me_conn_rx_refusal(struct me_node *n, const struct me_hdr *h);
/* Send a packet of the connection on link, to the peer's address there. */
void me_conn_tx(struct me_conn *c, u32 link, const void *buf, u32 len);
/* Move to a terminal state once; fails queued ops with status. */
void me_conn_terminate(struct me_conn *c, u32 state, s32 status);
/* The peer processed our CLOSE (it was acked). */
void me_conn_close_acked(struct me_conn *c);
/* We processed the peer's CLOSE, which carried cut (wire 15). */
void me_conn_peer_closed(struct me_conn *c, u32 cut);
/*
 * The peer tried one of our regions with a wrong key: past
 * cfg.key_fail_max the connection is aborted, so that keys cannot be
 * guessed through it.  (Accesses to regions that do not exist are not
 * counted: a write still arriving after its region was deregistered is
 * no attack, and a guess at a missing region wins nothing.)
 */
void me_conn_key_rejected(struct me_conn *c);
/* The peer gave the connection up (ABORT): it is dead, -ECONNRESET. */
void me_conn_rx_abort(struct me_conn *c);
/* A peer restarted with a new incarnation: its old connections are dead. */
void me_conn_peer_restarted(struct me_node *n, u32 peer, u32 new_inc);
void me_conn_timer(struct me_conn *c, u64 now);
/*
 * When it next needs the timer, after a pass at @now: @now for work the
 * next tick does (an op not sent, an ack owed, a close under way), the
 * earliest retransmission timeout while only packets are in flight,
 * ME_NEVER when nothing needs it before an idle timer's next pass
 * (node.c idle_period()): its remaining timeouts (connect, abort,
 * answer, linger) are that coarse.
 */
u64 me_conn_due(struct me_conn *c, u64 now);
/* Released, ended and lingered: may leave the table (timer only). */
bool me_conn_reclaimable(struct me_conn *c, u64 now);
/* Take it out of the table, free its slot, hand it to ops->retire. */
void me_conn_retire(struct me_conn *c);
bool me_conn_live(struct me_conn *c);

#endif /* ME_CONN_H */
