/* SPDX-License-Identifier: GPL-2.0 */
/*
 * me_core.h - public API of the portable MultiEdge protocol engine.
 *
 * One struct me_node per local node (per network namespace in the module).
 * The host (kernel module or simulator) drives it like this:
 *
 *   node = me_node_create(&cfg, &ops, ctx);      allocation happens here
 *   me_link_add(node, idx, mtu, rate_mbps);      once per attached NIC
 *   me_core_rx(node, idx, src, buf, len);        every received packet (the
 *                                                bytes after the Ethernet
 *                                                header, src its source
 *                                                address), from any number
 *                                                of threads concurrently
 *   next = me_core_timer(node);                  again within `next` ns
 *                                                (cfg.tick_ns, longer while
 *                                                idle; ops->timer_kick asks
 *                                                sooner), may overlap
 *                                                me_core_rx
 *   me_conn_connect(node, peer, mode, &conn);    active open; the passive
 *                                                side learns of new
 *                                                connections through
 *                                                ME_CQE_CONN_UP
 *   me_conn_write/notify/read(conn, &rw);        non-blocking submission,
 *                                                -EAGAIN when the op queue
 *                                                is full
 *   me_conn_close(conn);                         orderly close
 *   me_node_destroy(node);                       the host guarantees that no
 *                                                rx/timer/submit call runs
 *
 * Completions and connection events arrive through ops->complete (me_plat.h)
 * from whichever thread finished the operation, exactly once each.
 *
 * Lifetime: a closed or dead connection keeps answering duplicates but
 * delivers nothing.  With ops->retire, a connection the host released
 * (me_conn_release) leaves linger_ns after it ended and its slot is
 * reused under a new id (id - 1 = generation * slots + slot, slots the
 * power of two >= max_conns: first ids are 1..max_conns); without, it
 * lives until me_node_destroy() and ids are never reused.
 */
#ifndef ME_CORE_H
#define ME_CORE_H

#include "me_types.h"
#include "me_plat.h"
#include "aop.h"

struct me_node;
struct me_conn;

#define ME_MAX_LINKS	16
#define ME_MAX_CONNS	(1u << 20)	/* cfg.max_conns at most */
#define ME_MAX_PEERS	65536		/* cfg.max_peers at most */
#define ME_ADDR_BCAST	0xffffffffffffull	/* link-layer broadcast */
/* No connection ever has this id (0 neither): a host may give it a meaning. */
#define ME_CONN_ID_NONE	0xffffffffu

/* Delivery mode of a connection (both directions). */
#define ME_MODE_UNORDERED	0	/* place each packet on arrival (RDMA) */
#define ME_MODE_ORDERED		1	/* place and complete in sequence */
/*
 * Unordered, and the one connection between two nodes that every endpoint
 * of both uses (the host's ME_CONNECT_F_SHARED): opened to no port, its
 * sends' keys name their ports, which the host reads (mr_write's key).
 */
#define ME_MODE_SHARED		2

/* Connection states (me_conn_state()). */
enum me_conn_state_e {
	ME_CS_CONNECTING = 1,
	ME_CS_ESTABLISHED,
	ME_CS_CLOSING,		/* close requested, CLOSE not yet acked */
	ME_CS_CLOSED,
	ME_CS_DEAD,
};

struct me_node_cfg {
	u32 node_id;		/* nonzero, unique in the cluster */
	u32 incarnation;	/* nonzero, new value at every start */
	u32 mtu;		/* max packet after the Ethernet header */
	u32 window;		/* packets in flight per connection, pow2 */
	u32 credit;		/* receive credit advertised, <= window */
	u32 ops;		/* op queue entries per connection, pow2 */
	u32 max_conns;		/* connections at once (slots) */
	u32 max_peers;		/* peer table slots (path.c) */
	u32 ack_every;		/* ack after this many packets (coalescing) */
	u64 ack_hold_ns;	/* a request's ack waits this long for the
				 * reply to carry it (0: never waits); at most
				 * rto_min_ns / 2 and ka_ns / 4 (me_node_create) */
	u32 link_window;	/* data bytes in flight per link */
	u32 max_retries;	/* per packet, then the peer is declared dead */
	u32 dupthresh;		/* later packets acked on a link => loss */
	u64 reorder_ns;		/* ... and sent at least this long ago */
	u64 tick_ns;		/* how often the host calls me_core_timer */
	u64 rto_init_ns;
	u64 rto_min_ns;
	u64 rto_max_ns;		/* backoff cap */
	u64 connect_rto_ns;
	u64 hello_ns;		/* HELLO period on every link */
	u64 ka_ns;		/* keepalive probe after this much silence */
	u64 link_dead_ns;	/* link declared dead after this much silence */
	u64 peer_dead_ns;	/* peer declared dead after this much silence */
	u64 answer_ns;		/* an operation sent in full and unanswered
				 * this long kills its connection (0: never) */
	u32 max_passive;	/* live connections a peer may open to us */
	u32 key_fail_max;	/* remote accesses with a wrong key per
				 * connection before it is aborted */
	u64 rate_ns;		/* link rate estimation period */
	u32 cc;			/* congestion control per path (cc.c), 0: off
				 * (every path may hold link_window) */
	u32 cc_init;		/* a path's first window, bytes */
	u64 cc_target_ns;	/* round trip aimed at (at least 3/2 of the
				 * path's base RTT) */
	u32 pace_pct;		/* pacing (path.c): a path's packets leave at
				 * this percentage of window / base RTT, 0:
				 * off (a window leaves as a burst) */
	u32 pace_burst;		/* bytes a paced path may send back to back */
	u32 zc_min;		/* payload bytes per packet sent by reference
				 * (me_plat_ops.zc_tx), 0: always copied */
	u64 linger_ns;		/* an ended connection answers duplicates
				 * this long before its slot may be reused */
	char name[32];		/* carried in HELLO */
};

/* Counters (me_node_stat()). */
enum me_stat {
	ME_ST_RX_PKTS,
	ME_ST_RX_SHORT,		/* malformed: truncated */
	ME_ST_RX_VERSION,	/* malformed: wrong version */
	ME_ST_RX_TYPE,		/* malformed: unknown type */
	ME_ST_RX_FIELD,		/* malformed: field out of range */
	ME_ST_RX_NOTME,		/* addressed to another node */
	ME_ST_RX_STALE,		/* wrong incarnation / unknown connection */
	ME_ST_RX_DUP,		/* duplicate sequenced packet */
	ME_ST_RX_WINDOW,	/* beyond the receive window */
	ME_ST_RX_CLOSED,	/* for a closed or dead connection */
	ME_ST_RX_NORES,		/* no response slot: dropped, will be resent */
	ME_ST_RX_BADACK,	/* ack for data never sent */
	ME_ST_RX_BADOP,		/* response for an unknown operation */
	ME_ST_TX_DATA,
	ME_ST_TX_RTX_LOSS,	/* retransmit: loss detected from sacks */
	ME_ST_TX_RTX_RTO,	/* retransmit: timeout */
	ME_ST_TX_RTX_FAIL,	/* retransmit: link failover */
	ME_ST_TX_ACK,
	ME_ST_TX_NACK,
	ME_ST_TX_FAIL,		/* platform tx returned an error */
	ME_ST_RTO_FIRED,
	ME_ST_LINK_DOWN,
	ME_ST_LINK_UP,
	ME_ST_CREDIT_STALL,	/* pump stopped by receiver credit */
	ME_ST_CONN_REFUSED,	/* CONNECT from a node not alive by HELLO, or
				 * past max_passive */
	ME_ST_KEY_REJECTED,	/* remote accesses with a wrong key */
	ME_ST_CONN_ABORTED,	/* connections aborted past key_fail_max */
	ME_ST_RX_HELLO_HELD,	/* HELLO of another identity while the link's
				 * peer answers: ignored (path.c) */
	ME_ST_PEER_RESTART,	/* a new incarnation of a peer believed */
	ME_ST_RX_COOKIE,	/* connection frame with the wrong cookie */
	ME_ST_PEER_ABORT,	/* connections the peer gave up (ABORT) */
	ME_ST_PEER_TABLE_FULL,	/* HELLO of a new peer dropped: table full */
	ME_ST_PEER_EVICTED,	/* never-confirmed peers evicted for a new one */
	ME_ST_PEER_FORGOTTEN,	/* silent peers without connections forgotten */
	ME_ST_RX_ADDR,		/* frame of a peer from another address than
				 * its HELLO's on that link: no liveness */
	ME_ST_PATH_STALLED,	/* paths taken down: nothing delivered for a
				 * keepalive period with data in flight */
	ME_ST_PATH_TOLD_DOWN,	/* paths taken down: the peer's keepalive
				 * said it took its end down */
	ME_ST_RTX_SPURIOUS,	/* acks saying a packet arrived twice: a
				 * retransmission was not needed (cc.c) */
	ME_ST_TX_PACKS,		/* PACK packets built (msg.c) */
	ME_ST_TX_PACKED,	/* writes and notifies sent in them */
	ME_ST_ACK_HELD,		/* acks held for a reply to carry */
	ME_ST_TX_ACK_CARRIED,	/* acks a packet carried (ME_F_CARRY) */
	ME_ST_ACK_HOLD_EXPIRED,	/* held acks the timer sent: no reply came */
	ME_ST_CC_LOSS_QUEUE,	/* packets found lost, taken for a queue's */
	ME_ST_CC_LOSS_RANDOM,	/* ... for a lossy link's (cc.c) */
	ME_ST_SHARED_LOST,	/* shared connections the peer had lost,
				 * ended for its new CONNECT (conn.c) */
	ME_ST_TIMER_LATE,	/* timer passes that came late and judged
				 * nothing: the host stalled (node.c) */
	/* Congestion control's decisions (cc.c). */
	ME_ST_CC_QUEUE_DELAY,	/* of CC_LOSS_QUEUE: the delay showed a queue */
	ME_ST_CC_QUEUE_BURST,	/* ... the round lost a burst */
	ME_ST_CC_QUEUE_FULL,	/* ... at the window a queue overflowed at */
	ME_ST_CC_CUT_LOSS,	/* windows cut by a loss round */
	ME_ST_CC_CUT_DELAY,	/* windows cut by a delay above the target */
	ME_ST_CC_CUT_RTO,	/* windows halved by a timeout */
	ME_ST_CC_RESET,		/* windows dropped to one MTU by timeouts */
	ME_ST_CC_UNDO,		/* windows given back after needless timeouts */
	ME_ST_CC_CALM,		/* paths calmed (no doubling) */
	ME_ST_ACK_NOW,		/* requests flagged NOW acked at once */
	ME_ST_CC_IDLE,		/* windows cut after a pause (cc.c me_cc_idle) */
	ME_ST_MAX_
};

void me_node_cfg_default(struct me_node_cfg *cfg);
struct me_node *me_node_create(const struct me_node_cfg *cfg,
			       const struct me_plat_ops *ops, void *ctx);
void me_node_destroy(struct me_node *node);
u64 me_node_stat(struct me_node *node, enum me_stat st);

int me_link_add(struct me_node *node, u32 link, u32 mtu, u32 rate_mbps);
/*
 * The host stopped using the link (its NIC was detached): it is down for
 * good and forgets its neighbours; me_link_add() may take the slot again.
 */
void me_link_del(struct me_node *node, u32 link);
/* Administrative state from the NIC (carrier/up/down). */
void me_link_set_admin(struct me_node *node, u32 link, bool up);
/* 1 if the link is up and some peer is alive on it both ways. */
int me_link_alive(struct me_node *node, u32 link);
/*
 * Neighbours known on the link, how many of them are alive, and the
 * neighbour's node id when there is exactly one (else 0).
 */
void me_link_counts(struct me_node *node, u32 link, u32 *nbrs, u32 *alive, u32 *only);
/* The highest rate estimate of its alive paths (else the NIC's), bytes/us. */
u32 me_link_rate(struct me_node *node, u32 link);

/* A peer (me_node_peer_at, me_node_peer). */
struct me_peer_info_core {
	u32 node;
	u32 inc;
	u32 links;		/* bit l: a HELLO of it validated on link l */
	u32 alive_links;	/* bit l: alive both ways there */
	u32 conns;		/* connections holding it */
	char name[32];		/* from its HELLO */
};

/* A (link, peer) path (me_node_path_at). */
struct me_path_info_core {
	u32 link;
	u32 node;
	u32 inc;
	u32 flags;		/* ME_PATH_* */
	u64 addr;		/* the peer's link-layer address there */
	u32 rtt_us;		/* last keepalive round trip, 0: none */
	u32 rate;		/* bytes per microsecond */
	u32 inflight;		/* data bytes not yet acked */
	u32 cwnd;		/* congestion window, bytes (cc.c) */
	u32 data_rtt_us;	/* last round trip of data, 0: none */
	u32 data_delay_us;	/* ... without the hosts' queues (cc.c) */
	u32 base_us;		/* the least delay lately, 0: none */
	u32 target_us;		/* the delay the window aims at, 0: cc off */
	u32 noise_us;		/* mean excess of quiet probes over base */
	u64 rx_age_ns;		/* since its last frame there (~0: never) */
	u64 tx_pkts, rx_pkts, lost_pkts;
	u64 tx_bytes;		/* data packets' bytes sent there */
	u64 rx_bytes;		/* valid frames' bytes received there */
};

#define ME_PATH_ALIVE	0x1	/* both ways, link up */
#define ME_PATH_RX	0x2	/* we hear the peer there */
#define ME_PATH_HEARD	0x4	/* the peer hears us there */

/* Peer table slots used so far: iterate 0..this. */
u32 me_node_npeers(struct me_node *node);
/* The peer in a slot; false if the slot is free. */
bool me_node_peer_at(struct me_node *node, u32 slot, struct me_peer_info_core *out);
/* The peer with node id `id`; false if unknown. */
bool me_node_peer(struct me_node *node, u32 id, struct me_peer_info_core *out);
/* The path to the peer in `slot` on `link`; false if there is none. */
bool me_node_path_at(struct me_node *node, u32 slot, u32 link,
		     struct me_path_info_core *out);
/* Bit l set: peer `id` is alive both ways on link l. */
u32 me_peer_alive_links(struct me_node *node, u32 id);

/*
 * Returns a negative errno if the packet was refused, else 0.  src is
 * the frame's link-layer source address (48 bits): the core learns where
 * a peer is from the source of a HELLO that validated only, and counts a
 * peer's other frames as signs of life only from that address.
 */
int me_core_rx(struct me_node *node, u32 link, u64 src, const void *buf, u32 len);
/* The same, passing the host's frame on to mr_write/rx_fill (me_plat.h). */
int me_core_rx_frame(struct me_node *node, u32 link, u64 src, const void *buf,
		     u32 len, void *rx);

/*
 * A receive batch: a host thread that takes several frames per wakeup
 * hands them in between begin and end.  The acknowledgements the frames
 * ask for (other than nacks) are sent at the end, one per connection,
 * instead of one per trigger: a batch of 64 small writes is answered by
 * one ack.  The host keeps every connection alive from begin to end (the
 * module holds conn_srcu across the batch).  A batch is one thread's.
 */
#define ME_RX_BATCH_ACKS	16
struct me_rx_batch {
	u64 rx_ns;		/* the host sets it before each frame: when
				 * the frame reached it (me_now's clock; 0:
				 * now), for round trips without our queues */
	bool handoff;		/* the host asks that what acks release
				 * be sent by its pump_kick call, not
				 * here (me_plat.h) */
	u32 nacks;
	struct me_conn *conn[ME_RX_BATCH_ACKS];
};
void me_core_rx_batch_begin(struct me_rx_batch *b);
int me_core_rx_batch(struct me_node *node, struct me_rx_batch *b, u32 link, u64 src,
		     const void *buf, u32 len, void *rx);
void me_core_rx_batch_end(struct me_rx_batch *b);

/*
 * The protocol's timers.  Returns the ns within which the host calls it
 * again: cfg.tick_ns while a connection has work the next tick does (an
 * ack owed, an op or answer not yet sent, a close under way); longer
 * while none has: until the earliest retransmission timeout of the
 * packets in flight, the next keepalive, death of a path or HELLO
 * (served within a quarter of ka_ns and link_dead_ns), at most a quarter
 * of connect_rto_ns, which leaves a node's host asleep.  Work due sooner
 * after such a pass calls ops->timer_kick once; a host sleeping on the
 * long period must then call again within cfg.tick_ns.
 * me_core_timer_idle() says, after the host prepared to sleep, whether
 * the long period still holds (no kick has come since the pass).
 */
u64 me_core_timer(struct me_node *node);
bool me_core_timer_idle(struct me_node *node);
/* Something outside the core needs the tick (the host's own timed work). */
void me_core_kick(struct me_node *node);
/*
 * The ack timer (ops->ack_kick): sends the acks held for a reply whose
 * hold is over and those owed for a tick, and asks for another call
 * when the next one is due.  Any context but hard IRQ; the host holds
 * what keeps connections found in the table from being freed, as for a
 * receive.
 */
void me_core_acks(struct me_node *node);
/*
 * Acks held for a reply, or owed with the ack timer asked for them:
 * ops->ack_kick(0) may not drop the pending call.
 */
bool me_core_acks_pending(struct me_node *node);
/*
 * Pacing (cfg.pace_pct): the time ops->pace_kick asked for came; pumps
 * the connections pacing stopped.  Also the host's answer to
 * ops->pump_kick: pumps the connections whose acks a handoff batch took
 * (and those waiting for the room they opened).  Any context but hard
 * IRQ; the host holds what keeps connections found in the table from
 * being freed, as for a receive.
 */
void me_core_pace(struct me_node *node);

/* A one-sided operation. */
struct me_rw {
	u64 cookie;		/* returned in the completion */
	u32 local_region;	/* write: source; read: destination */
	u64 local_off;
	u32 remote_region;
	u64 remote_key;
	u64 remote_off;
	u32 len;		/* <= ME_MAX_MSG */
	u32 imm;		/* notify: value delivered at the target */
	u32 flags;		/* ME_RW_* */
	u64 operand;		/* atomic: the operand, and the value */
	u64 compare;		/* ME_AOP_CSWAP compares with (else 0) */
};

/*
 * More operations of the connection follow at once: queue this one
 * without sending (the next submission without the flag sends what is
 * queued, small writes packed together; the timer does within a tick).
 */
#define ME_RW_MORE	0x1
/*
 * The poster waits for this operation's completion before it goes on (a
 * blocking send): the target acks its last packet at once instead of
 * holding the ack for a reply to carry (wire 18, ME_F_NOW), since the
 * reply may itself wait for what the poster does next.
 */
#define ME_RW_ACK_NOW	0x2

int me_conn_connect(struct me_node *node, u32 peer, u32 mode,
		    struct me_conn **out);
/*
 * The same, to the endpoint on @port of the peer (1..ME_WIRE_PORT_MAX; 0 is
 * me_conn_connect()'s "any"): the peer accepts only if its host says the
 * port is open (me_plat_ops.port_open), else the connection dies with
 * -ECONNREFUSED.  ME_MODE_SHARED (port 0): -EEXIST when a shared
 * connection to the peer is up, from either side, or being opened from
 * here (join that one); a shared one that the peer refuses for its own
 * (a lower node id's, opened at the same time) dies with -EEXIST.
 */
int me_conn_connect_port(struct me_node *node, u32 peer, u32 mode, u32 port,
			 struct me_conn **out);
int me_conn_write(struct me_conn *conn, const struct me_rw *rw);
int me_conn_notify(struct me_conn *conn, const struct me_rw *rw);
int me_conn_read(struct me_conn *conn, const struct me_rw *rw);
/*
 * Atomic operation rw->imm (ME_AOP_*, aop.h) on rw->len (4 or 8) bytes at
 * remote_off of the remote region, with rw->operand and rw->compare; the
 * value found there lands in [local_off, +len) of the local region, in
 * host order, before ME_CQE_ATOMIC.  -EOPNOTSUPP: unknown operation;
 * -EINVAL: another size, or an operand (or compare) the operation does
 * not take or wider than the size.  The target refuses with -EINVAL a
 * location not aligned to the size.
 */
int me_conn_atomic(struct me_conn *conn, const struct me_rw *rw);
int me_conn_close(struct me_conn *conn);
u32 me_conn_id(struct me_conn *conn);
u32 me_conn_peer(struct me_conn *conn);
u32 me_conn_mode(struct me_conn *conn);	/* ME_MODE_* */
int me_conn_state(struct me_conn *conn);
/* The connection with this id, or NULL (none, or its slot was reused). */
struct me_conn *me_conn_get(struct me_node *node, u32 id);
/*
 * The host holds no reference to the connection beyond the current call
 * and wants none: once it is closed or dead (close it first, or it stays
 * until the peer ends it) and has lingered, it may be retired
 * (me_plat_ops.retire).  Once per connection; nothing of it may be used
 * after this call returns except from contexts the retire grace covers.
 */
void me_conn_release(struct me_conn *conn);
/* Frees a connection handed to me_plat_ops.retire (and nothing else). */
void me_conn_free(struct me_conn *conn);
/* Connection table slots used so far: iterate 0..this with me_node_conn_at. */
u32 me_node_nconns(struct me_node *node);
/* The connection in a slot, or NULL (never used, or retired). */
struct me_conn *me_node_conn_at(struct me_node *node, u32 slot);
/* Connections in the table now (not yet retired). */
u32 me_node_live_conns(struct me_node *node);
/* The slot an id names (for per-slot host state), or ME_NO_SLOT. */
u32 me_node_slot(struct me_node *node, u32 id);
#define ME_NO_SLOT	0xffffffffu
/* A pointer's room in a retired connection the core never touches. */
void **me_conn_host_link(struct me_conn *conn);
/* Opened by me_conn_connect() (else accepted from a peer). */
bool me_conn_active(struct me_conn *conn);
/* The port it was opened to (0: any), on either side. */
u32 me_conn_port(struct me_conn *conn);
/* Why a DEAD connection died (a negative errno); 0 while it lives or closed. */
s32 me_conn_end_status(struct me_conn *conn);

/* Per-connection counters (me_conn_stats()). */
enum me_cstat {
	ME_CST_TX_PKTS,		/* data packets sent, first copies */
	ME_CST_TX_BYTES,	/* their payload bytes */
	ME_CST_RTX,		/* packets sent again */
	ME_CST_RX_PKTS,		/* sequenced packets accepted */
	ME_CST_RX_BYTES,	/* their payload bytes */
	ME_CST_RX_DROP,		/* duplicate, beyond the window, no room */
	ME_CST_ERRORS,		/* operations completed with an error */
	ME_CST_MAX_
};

struct me_conn_info_core {
	u32 id;
	u32 peer;
	u32 state;		/* enum me_conn_state_e */
	u32 mode;
	bool active;		/* opened by me_conn_connect() */
	u64 st[ME_CST_MAX_];
};

void me_conn_stats(struct me_conn *conn, struct me_conn_info_core *out);

#endif /* ME_CORE_H */
