/* SPDX-License-Identifier: GPL-2.0 */
/*
 * window.h - reliability: per-connection transmit and receive rings,
 * sliding window with receiver credit, cumulative + selective acks, nack on
 * a gap, loss detection, retransmit timeout with backoff.
 */
#ifndef ME_WINDOW_H
#define ME_WINDOW_H

#include "me_types.h"
#include "wire.h"

struct me_conn;
struct me_node;

/*
 * Transmit ring entry; entry i holds sequence numbers s with
 * s % window == i.  linfo packs seq:32 | txno:24 | rtx:1 | link:7.  A
 * packet is in flight while link != ME_LINK_NONE; whoever swaps linfo
 * from an in-flight value (cmpxchg) owns that transmission's accounting,
 * so acks, sacks and retransmissions racing on different threads account
 * each transmission exactly once.  The entry may be refilled with s +
 * window only after linfo reads (s, NONE).
 */
#define ME_ZC_OP	1
#define ME_ZC_RESP	2

struct me_txslot {
	me_lock_t lock;		/* Table 1 states 1 and 5a: held while the
				 * entry's buffer is filled or transmitted */
	me_atomic64_t linfo;
	me_atomic64_t sent_ns;	/* last transmission */
	me_atomic_t len;	/* frame bytes (header + payload) */
	u32 retries;		/* under lock */
	u64 first_ns;		/* first transmission, under lock */
	u8 *buf;
	/*
	 * Payload by reference: buf holds the header only, the payload is
	 * [zc_off, + len - header) of zc_region, and zc_held says the entry
	 * holds a reference on it: ME_ZC_OP, operation zc_cookie's payload
	 * (me_plat_ops.zc_tx, zc_put); ME_ZC_RESP, the region's memory a
	 * read answer carries (resp_tx, resp_put, handle zc_cookie).
	 * Written under lock; zc_held is dropped by whoever holds the lock
	 * once the entry is acknowledged or the connection has ended
	 * (zc_settle() in window.c).
	 */
	u8 zc;			/* 0: copied into buf, or ME_ZC_* */
	me_atomic_t zc_held;
	u32 zc_region;
	u64 zc_off;
	u64 zc_cookie;
};

/*
 * Receive ring entry (Table 1 state 7): state packs seq:32 | phase:8.  A
 * receive thread claims the entry for seq s with a cmpxchg from the
 * previous lap's value; a second copy of s finds seq == s and is a
 * duplicate, so no two threads ever process the same packet.
 */
#define ME_RXS_CLAIMED	1	/* a thread is processing it */
#define ME_RXS_READY	2	/* placed (unordered) / buffered (ordered) */
#define ME_RXS_DONE	3	/* ordered: consumed by the in-order scan */
#define ME_RXS_CLOSE	0x10	/* flag: this packet was a CLOSE */
#define ME_RXS_STATUS	0x20	/* flag: this packet was a STATUS */
#define ME_RXS_MORE	0x40	/* flag: a write's or notify's packet, not
				 * its message's last (the close cut) */

/* me_conn.rx_cut (wire 15, window.c) */
#define ME_CUT_PENDING	(1ull << 32)	/* being set */
#define ME_CUT_SET	(2ull << 32)	/* | seq: a message begun below is
					 * still taken to its end */
#define ME_CUT_FINAL	(4ull << 32)	/* | seq: nothing at or beyond it */

struct me_rxslot {
	me_atomic64_t state;
	me_atomic_t len;	/* ordered mode: bytes buffered in buf */
	u8 *buf;		/* ordered mode only */
};

int me_win_alloc(struct me_conn *c);
void me_win_free(struct me_conn *c);
void me_win_start_tx(struct me_conn *c, u32 isn, u32 right);
void me_win_start_rx(struct me_conn *c, u32 peer_isn);
/*
 * Before the connection's first packet of data, its RTO from the
 * keepalives' round trip to the peer (the longest of its usable paths',
 * 3 x it, so at most rto_init_ns's; none known: rto_init_ns), until the
 * first ack gives one of data.
 */
void me_win_seed_rtt(struct me_conn *c);

/* A validated sequenced packet for this connection. */
void me_win_rx_data(struct me_conn *c, u32 link, const struct me_hdr *h,
		    const u8 *pkt, u32 len);
void me_win_rx_ack(struct me_conn *c, u32 link, const struct me_hdr *h);
/* Ended: what is still in flight leaves its links' budgets. */
void me_win_release_inflight(struct me_conn *c);
/* The connection ended: drop every payload reference entries hold. */
void me_win_zc_release_all(struct me_conn *c);
/*
 * Send an ack now if nobody else is (trylock), on the link of the newest
 * packet it answers (ack_link).
 */
void me_win_send_ack(struct me_conn *c, bool nack);

/*
 * Transmit side, used by the packetizer under the pump lock:
 * reserve returns the entry for the next sequence number with its lock
 * held, or NULL if the window, the peer's credit or a busy entry stops us.
 */
struct me_txslot *me_win_tx_reserve(struct me_conn *c, u32 *seq);
/* now: me_now() for the transmission (the caller's one clock read). */
void me_win_tx_commit(struct me_conn *c, struct me_txslot *t, u32 seq,
		      u32 len, u32 link, u64 now);
void me_win_tx_abort(struct me_conn *c, struct me_txslot *t);
bool me_win_tx_idle(struct me_conn *c);
/*
 * A window's worth is in flight: its acks (or its timeouts) reopen it,
 * and each ack pumps the connection.
 */
bool me_win_tx_full(struct me_conn *c);
/*
 * When the window next needs the timer after its pass at @now (conn.h,
 * me_conn_due()): now for an ack owed without an ack timer, the earliest
 * retransmission timeout of what is in flight, ME_NEVER for neither (a
 * held or owed ack is the ack timer's, me_core_acks()).
 */
u64 me_win_due(struct me_conn *c, u64 now);
/* A peer's held ack was sent or dropped (me_core_acks()' count). */
void me_win_held_released(struct me_node *n);
/* The connection is retired: an ack it owed is no longer counted. */
void me_win_owed_drop(struct me_conn *c);

/*
 * Our CLOSE is next and every op before it completed (the pump): sets the
 * close cut once; true when every request below it was taken and no
 * message is open across it, *cut then being what the CLOSE carries.
 */
bool me_win_close_cut(struct me_conn *c, u32 *cut);

void me_win_timer(struct me_conn *c, u64 now);
/* Resend everything in flight on a dead link over the others. */
void me_win_failover(struct me_conn *c, u32 link);

#endif /* ME_WINDOW_H */
