/* SPDX-License-Identifier: GPL-2.0 */
/*
 * path.h - links: discovery (HELLO), per-link keepalive and liveness,
 * rate estimation, and the choice of a link for each packet.
 */
#ifndef ME_PATH_H
#define ME_PATH_H

#include "me_types.h"
#include "wire.h"

struct me_node;

/*
 * Per-link state.  Fields marked (timer) are touched only by
 * me_core_timer(), which never runs concurrently with itself; all others
 * are atomics, updated from any receive thread.
 */
struct me_link {
	bool present;		/* set once by me_link_add() */
	u32 mtu;
	me_atomic_t admin_up;	/* NIC carrier, from the host */
	me_atomic_t deleted;	/* me_link_del(): slot free for me_link_add() */
	me_atomic_t alive;	/* the peer answered recently */
	me_atomic_t peer_node;	/* learned by HELLO (0: unknown) */
	me_atomic_t peer_inc;
	me_atomic64_t last_rx_ns;
	me_atomic_t inflight;	/* data bytes sent on it and not acked */
	me_atomic_t txno;	/* transmit counter (24 bits used) */
	me_atomic_t acked_txno;	/* highest txno acked (24-bit seq order) */
	me_atomic64_t acked_ns;	/* when acked_txno last advanced */
	me_atomic64_t delivered; /* data bytes acked */
	me_atomic_t rate;	/* estimate, bytes per microsecond */
	u64 last_hello_ns;	/* (timer) */
	u64 last_ka_ns;		/* (timer) */
	u64 rate_t0;		/* (timer) */
	u64 rate_d0;		/* (timer) */
	bool rate_busy;		/* (timer) link saturated at rate_t0 */
};

#define ME_LINK_NONE	0x7f	/* "no link" in a tx slot's linfo */
#define ME_TXNO_MASK	0xffffff

void me_path_init(struct me_node *node);
/*
 * A valid packet arrived on the link from node src (liveness, recovery,
 * discovery).  Returns ME_RX_PEER_HELLO (me_core.h) for a HELLO of the
 * link's peer, else 0.
 */
int me_path_rx(struct me_node *node, u32 link, const struct me_hdr *h);
/* Pick the link for `len` bytes to peer; -1 if none usable now. */
int me_path_pick(struct me_node *node, u32 peer, u32 len, bool force);
/* Any alive link to the peer (for control packets), -1 if none. */
int me_path_any(struct me_node *node, u32 peer);
u32 me_path_next_txno(struct me_node *node, u32 link);
/*
 * bytes of a transmission on link were acked; fifo: it was the only copy
 * ever sent (not a retransmission), so its txno proves that everything
 * sent earlier on the link has arrived or is lost.
 */
void me_path_acked(struct me_node *node, u32 link, u32 txno, u32 bytes,
		   bool fifo);
bool me_path_lost(struct me_node *node, u32 link, u32 txno);
/* When the link last showed progress (an ack advanced acked_txno). */
u64 me_path_acked_ns(struct me_node *node, u32 link);
void me_path_timer(struct me_node *node, u64 now);

#endif /* ME_PATH_H */
