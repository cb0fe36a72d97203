/* SPDX-License-Identifier: GPL-2.0 */
/*
 * path.h - the neighbour model: links (local NICs), peers (nodes heard by
 * HELLO) and paths, one per (link, peer) pair: discovery, two-way
 * liveness, rate estimation, and the choice of a path for each packet.
 */
#ifndef ME_PATH_H
#define ME_PATH_H

#include "me_core.h"
#include "wire.h"

struct me_node;

/* Our keepalives on a path an echo may answer (path.c ka_sent()). */
#define ME_KA_STAMPS	8

/* Per local link.  (timer): touched only by me_core_timer(). */
struct me_link {
	bool present;		/* set once by me_link_add() */
	u32 mtu;
	me_atomic_t admin_up;	/* NIC carrier, from the host */
	me_atomic_t deleted;	/* me_link_del(): slot free for me_link_add() */
	u32 rate_init;		/* bytes per microsecond, from the NIC speed */
	u64 last_hello_ns;	/* (timer) */
};

/*
 * A windowed minimum (cc.c): the least sample of the current period and
 * of the one before it, so always at least one whole period's.
 */
struct me_winmin {
	me_atomic64_t prev;	/* the previous period's least, 0: none */
	me_atomic64_t cur;	/* the current one's, 0: none yet */
	me_atomic64_t t0;	/* the current period's start */
};

/*
 * Per (link, peer) path.  Fields marked (timer) are touched only by
 * me_core_timer(); all others are atomics, updated from any receive
 * thread.  A path exists (known) once a HELLO of the peer validated on
 * the link; addr is that HELLO's source address, where every frame to
 * the peer on this link goes.
 */
struct me_path {
	me_atomic_t known;
	me_atomic_t alive;	/* both directions work (path.c) */
	me_atomic64_t addr;	/* the peer's link-layer address here */
	me_atomic64_t last_rx_ns;	/* a valid frame from the peer here */
	me_atomic64_t heard_ns;	/* the peer last heard us here */
	me_atomic_t inflight;	/* data bytes sent here and not acked */
	me_atomic_t txno;	/* transmit counter (24 bits used) */
	me_atomic_t acked_txno;	/* highest txno acked (24-bit seq order) */
	me_atomic64_t acked_ns;	/* when acked_txno last advanced */
	me_atomic64_t delivered; /* data bytes acked */
	me_atomic_t rate;	/* estimate, bytes per microsecond */
	me_atomic_t rtt_us;	/* last keepalive round trip, 0: none */
	me_atomic64_t tx_pkts;	/* data packets sent here */
	me_atomic64_t rx_pkts;	/* valid frames from the peer here */
	me_atomic64_t lost_pkts; /* packets sent here that went again */
	me_atomic64_t tx_bytes;	/* bytes of the data packets sent here */
	me_atomic64_t rx_bytes;	/* bytes of the valid frames from the peer here */
	me_atomic_t peer_link;	/* the peer's link index at the other end
				 * (its HELLO/KEEPALIVE), ME_LINK_NONE: unknown */
	me_atomic_t failed;	/* went down after being alive: our
				 * keepalives tell the peer (wire.h down) */
	me_atomic_t told;	/* the peer's keepalives say its end failed;
				 * acted on once, until it shows its end
				 * usable again (path.c peer_down_mask()) */
	/* Congestion control (cc.c). */
	me_atomic_t cwnd;	/* bytes that may be in flight */
	me_atomic64_t pace_ns;	/* pacing: the next packet's earliest departure */
	me_atomic_t ssthresh;	/* grow by bytes acked below this */
	struct me_winmin base;	/* least delay over ME_CC_BASE_NS */
	me_atomic64_t noise_ns;	/* mean excess of quiet probes' delay over
				 * base (cc.c: the target's floor) */
	me_atomic_t noise_n;	/* samples in it, up to ME_CC_NOISE_N */
	me_atomic64_t data_rx_ns; /* last sequenced packet from the peer here */
	/*
	 * Our last ME_KA_STAMPS keepalives here (path.c ka_sent()): their
	 * stamps, the only echoes a round trip is taken with, each once
	 * (0: none or taken), and tx_pkts when each left with nothing in
	 * flight (~0: it left behind data).  Several: the peer's keepalive
	 * may answer one of ours after we sent more (the two ends' cross,
	 * and answers may be held up longer than a period); with two,
	 * every answer slower than two of our periods was dropped, and the
	 * path's noise read half of what it was (cc.c, Cc.noise__*).
	 */
	me_atomic_t ka_seq;
	me_atomic64_t ka_stamp[ME_KA_STAMPS];
	me_atomic64_t ka_tx[ME_KA_STAMPS];
	me_atomic64_t peer_stamp; /* the peer's last keepalive's stamp, 0:
				   * none: what ours echo */
	me_atomic64_t peer_stamp_ns; /* ... when it reached our host */
	me_atomic64_t cc_dec_ns; /* last decrease of cwnd */
	me_atomic64_t cc_rtt_ns; /* last round-trip sample of data */
	me_atomic64_t cc_delay_ns; /* ... without the hosts' queues */
	struct me_winmin standing; /* least delay of the last 1-2 round trips */
	me_atomic_t rto_run;	/* timeouts since the last ack on the path */
	me_atomic64_t cc_loss_ns; /* first loss of the last loss round, 0: none */
	me_atomic_t round_lost;	/* packets found lost in that round */
	me_atomic_t round_cwnd;	/* cwnd before the round's first loss */
	me_atomic64_t cc_qloss_ns; /* last loss taken for a queue's, 0: none */
	me_atomic64_t cc_calm_ns; /* a queue's loss round within ME_CC_CALM_RTTS
				   * of another (no doubling after), 0: none */
	me_atomic_t qfull_win;	/* window a queue overflowed at (cc.c) */
	me_atomic64_t cc_qfull_ns; /* last loss that set or kept it, 0: none */
	me_atomic_t undo_cwnd;	/* before the timeouts of the last episode
				 * shrank it, 0: nothing to undo */
	me_atomic_t undo_ssthresh;
	me_atomic64_t undo_ns;	/* that episode's first timeout */
	me_atomic64_t quiet_ns;	/* the last data sent, or acks emptying the
				 * path, since: a pause (cc.c me_cc_idle()) */
	/*
	 * Reordering the path showed (me_path_reorder()): how much longer
	 * than a round trip a packet may take before acks of later ones make
	 * it lost (0: the configured rule), widened by the peer's reports of
	 * needless resends; when it last changed (widened, or a loss round
	 * spent), and the loss rounds it still holds for.
	 */
	me_atomic64_t reo_ns;
	me_atomic64_t reo_at;
	me_atomic_t reo_left;
	u64 last_ka_ns;		/* (timer) */
	u64 rate_t0;		/* (timer) */
	u64 rate_d0;		/* (timer) */
	bool rate_busy;		/* (timer) path saturated at rate_t0 */
	bool rate_cwnd;		/* (timer) ... by its congestion window */
};

/*
 * A peer: a node some HELLO named.  Slots live in node->peers; a slot is
 * taken and freed under node->peer_lock (HELLO, the timer) and read
 * without it.  A peer held by a connection (conns > 0) keeps its slot.
 */
struct me_peer {
	me_atomic_t inc;	/* incarnation believed */
	me_atomic_t conns;	/* connections referring to it */
	me_atomic_t confirmed;	/* alive both ways on a link once */
	me_atomic_t waiters;	/* its connections with path_wait set */
	me_atomic_t wake_next;	/* conn slot the next wake-up starts at */
	/* acks waiting for a reply to carry them (window.c, ack_hold) */
	me_atomic_t reply_mode;	/* its requests are answered quickly */
	me_atomic_t held_conn;	/* the connection whose ack waits, 0: none */
	me_atomic64_t req_ns;	/* its last request's arrival (outside reply_mode) */
	me_atomic64_t reply_ns;	/* the last new packet we sent it */
	u64 created_ns;		/* (peer_lock) */
	char name[ME_HELLO_NAME]; /* (peer_lock) NUL-padded */
	struct me_path path[ME_MAX_LINKS];
};

#define ME_LINK_NONE	0x7f	/* "no link" in a tx slot's linfo */
#define ME_TXNO_MASK	0xffffff

void me_path_init(struct me_node *node);
/* Allocate/free the peer table (me_node_create/destroy). */
int me_peers_alloc(struct me_node *node);
void me_peers_free(struct me_node *node);

/* The slot of peer `id`, or NULL (lock-free; the slot may be reused). */
struct me_peer *me_peer_find(struct me_node *node, u32 id);
/* The peer's node id (0: the slot is free). */
u32 me_peer_id(struct me_node *node, const struct me_peer *p);
/* Hold a known peer for a connection (NULL: unknown), and let it go. */
struct me_peer *me_peer_hold(struct me_node *node, u32 id);
void me_peer_put(struct me_node *node, struct me_peer *p);

/*
 * A frame from h->src_node that validated arrived on `link` from addr
 * (liveness, discovery, keepalive).  p: the sender's peer slot if the
 * caller knows it (a connection frame), else NULL.
 */
void me_path_rx(struct me_node *node, u32 link, u64 addr,
		const struct me_hdr *h, struct me_peer *p);
/* Is the path alive both ways (and its link up)? */
bool me_path_usable(struct me_node *node, struct me_peer *p, u32 link);
/* When a valid frame from the peer last came on a usable path; 0: none. */
u64 me_path_heard_from(struct me_node *node, struct me_peer *p);
/* The longest last keepalive round trip of the peer's usable paths, ns; 0: none. */
u64 me_path_probe_rtt(struct me_node *node, struct me_peer *p);
/*
 * Pick the link for `len` bytes to peer; -1 if none usable now.  Unless
 * force, only a path with window room whose pacing lets a packet leave
 * now; *paced (may be NULL): when -1 is returned, the earliest time a
 * path with room may send, 0 if none has room.
 */
int me_path_pick(struct me_node *node, struct me_peer *p, u32 len, bool force, u64 *paced);
/*
 * A sequenced packet of len bytes left on the path at now (pacing); idle:
 * the path had nothing in flight (congestion control's restart, cc.c).
 */
void me_path_sent(struct me_node *node, struct me_peer *p, u32 link, u32 len, bool idle,
		  u64 now);
/*
 * After `len` more bytes on the path, no full packet fits in its window:
 * the packet should ask for an ack at once (the window's edge).
 */
bool me_path_edge(struct me_node *node, struct me_peer *p, u32 link, u32 len);
/* Any alive link to the peer (for control packets), -1 if none. */
int me_path_any(struct me_node *node, struct me_peer *p);
/* The transmit number of a data packet of len bytes sent on the path. */
u32 me_path_next_txno(struct me_peer *p, u32 link, u32 len);
/*
 * bytes of a transmission on link were acked; fifo: it was the only copy
 * ever sent (not a retransmission), so its txno proves that everything
 * sent earlier on the path has arrived or is lost.  now: the ack's me_now.
 */
void me_path_acked(struct me_peer *p, u32 link, u32 txno, u32 bytes,
		   bool fifo, u64 now);
/*
 * One ack acked `bytes` sent on the path; rtt_ns: the smallest round trip
 * among them sent only once (0: none), hosts_ns the part of it the ack and
 * its packet spent waiting in the two hosts (the peer's hold, our receive
 * queue).  timed: the peer's hold is that of this path's packet (the ack
 * came on the path, see path.c).  Congestion control (cc.c).
 */
void me_path_ack_done(struct me_node *node, struct me_peer *p, u32 link,
		      u32 bytes, u64 rtt_ns, u64 hosts_ns, bool timed, u64 now);
/*
 * The peer got a packet twice (an ack's ME_F_DUP): a timeout or loss
 * detection resent it needlessly; every path to the peer gets back what
 * its timeouts took (cc.c) and a wider reordering window until 16 loss
 * rounds of the path spent it (me_path_reorder(), at most srtt beyond
 * the round trip of the connection the ack is for).  The ack does not
 * say which packet, so not which path.
 */
void me_path_spurious(struct me_node *node, struct me_peer *p, u64 srtt, u64 now);
bool me_path_lost(struct me_node *node, struct me_peer *p, u32 link, u32 txno);
/*
 * How long ago a packet sent on the path must have left before acks of
 * later packets make it lost: cfg.reorder_ns, or once the peer reported
 * needless resends srtt and a reordering window beyond it (RACK, RFC 8985
 * 6.2, with the peer's DUP flag as its DSACK), until loss rounds spent it
 * (me_path_reorder_spend()).
 */
u64 me_path_reorder(struct me_node *node, struct me_peer *p, u32 link, u64 srtt);
/* A packet of the path was resent: a loss round (at most one per srtt). */
void me_path_reorder_spend(struct me_peer *p, u32 link, u64 srtt, u64 now);
/*
 * The path delivered nothing since `since` with data in flight: if
 * another path to the peer delivered since then, this one is down (its
 * packets go again on other paths) until a keepalive exchange shows that
 * the peer hears us there.
 */
void me_path_suspect(struct me_node *node, struct me_peer *p, u32 link, u64 since);
/* When the path last showed progress (an ack advanced acked_txno). */
u64 me_path_acked_ns(struct me_peer *p, u32 link);
/*
 * Hellos, and every scan period the walk over every path (keepalives,
 * deaths, delivery rates).  Returns when it next needs the timer: the
 * next walk while a path is kept full (its rate is sampled then), else
 * the next HELLO or the paths' next keepalive or death, no sooner than
 * a quarter of ka_ns and link_dead_ns after the walk (path.c).
 */
u64 me_path_timer(struct me_node *node, u64 now);

static inline struct me_path *me_pth(struct me_peer *p, u32 link)
{
	return &p->path[link];
}

static inline u64 me_path_addr(struct me_peer *p, u32 link)
{
	return me_atomic64_read(&p->path[link].addr);
}

#endif /* ME_PATH_H */
