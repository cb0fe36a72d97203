/* SPDX-License-Identifier: GPL-2.0 */
/*
 * wire.h - the on-wire packet format (see Documentation/protocol.md).
 *
 * A packet is what follows the Ethernet header: a 40-byte common header, a
 * fixed per-type extension, then payload.  All fields are big-endian.  Every
 * received packet goes through me_wire_parse() before any field is used;
 * the parsed struct me_hdr is host-order and range-checked.
 */
#ifndef ME_WIRE_H
#define ME_WIRE_H

#include "me_types.h"
#include "aop.h"

/*
 * 2: a 64-bit connection cookie in the common header, each side's cookie
 * in CONNECT/ACCEPT, 64-bit region keys.
 * 3: the neighbour model: HELLO may be unicast (the answer to a new
 * neighbour); KEEPALIVE says how long ago its sender last heard the
 * receiver on that link, carries a timestamp its reply echoes and names
 * the sender's links whose path to the receiver it took down.
 * 5: ports: CONNECT names the port it opens (ACCEPT echoes it); an ABORT
 * with no source connection refuses a CONNECT (no endpoint on its port, or
 * no room for another connection of its sender).
 * 6: ACK/NACK flag DUP: a packet arrived twice (the sender undoes what
 * the timeout that resent it did to its congestion window); ACK/NACK
 * carry the receiver's hold time, which congestion control takes out of
 * its round trips, and echo the stamp every transmission of a sequenced
 * packet carries (the former reserved word), so that round trips are
 * measured for retransmitted packets too (80-byte acks).
 * 8: PACK, several whole small writes in one packet.
 * 9: ACK flag CARRY: the ack is followed, in the same frame, by one
 * sequenced packet between the same two nodes (an answer carrying the
 * ack of the request it answers, on any of their connections).
 * 10: CONNECT mode 2, shared: the connection every endpoint of both nodes
 * uses; a send on it (a NOTIFY to the message region) carries its
 * destination port in bits 0-15 of its key and its sender's in 16-31.
 * 11: ATOMIC, a remote atomic operation on 4 or 8 bytes; a READ_RESP
 * answers it with the value found there.
 * 12: the lower node id's shared connection is kept when both open one.
 * 13: CONNECT flag FRESH (shared mode only): its sender holds no shared
 * connection of the receiver's, so the receiver's own, if quiet, is one
 * the sender lost and gives way.
 * 14: KEEPALIVE carries its sender's clock (stamp) and echoes the newest
 * stamp its sender has from the receiver with how long it held it, so
 * any keepalive answering one of ours gives a round trip; only one
 * flagged ASK (a probe) is answered at once.  The two ends of a quiet,
 * alive path send each other unanswered beacons, each echoing the
 * other's last: one frame each way per keepalive period, not a probe and
 * a reply each way (72-byte keepalives).
 * 15: CLOSE carries its sender's cut in imm: it took every request of the
 * receiver's below that sequence number and takes none from it on, so
 * the receiver completes its writes below the cut and fails those at or
 * beyond it as never taken (-ECANCELED).
 * 16: ACK/NACK flag FILL: the receiver copied whole pages of a packet its
 * sender had cut at the receiver's page boundaries, so cutting there buys
 * nothing: fill packets to the MTU.
 * 17: a host's message region may take messages of several packets (the
 * kernel's sends of up to 64 KiB; 16 refused those above 1024 bytes).
 * 18: flag NOW on a write's, notify's or pack's last packet: its sender
 * waits for the completion, so its ack is not held for a reply.
 */
#define ME_WIRE_VERSION		18

enum me_pkt_type {
	ME_PT_HELLO = 1,	/* discovery, every link, periodically */
	ME_PT_KEEPALIVE,	/* per-link liveness probe / reply */
	ME_PT_CONNECT,		/* open a connection */
	ME_PT_ACCEPT,		/* answer to CONNECT */
	ME_PT_ACK,		/* cumulative + selective ack, credit */
	ME_PT_NACK,		/* same layout as ACK, sent on a gap */
	ME_PT_WRITE,		/* sequenced: remote write data */
	ME_PT_NOTIFY,		/* sequenced: write data + notification */
	ME_PT_READ_REQ,		/* sequenced: remote read request */
	ME_PT_READ_RESP,	/* sequenced: read response data */
	ME_PT_STATUS,		/* sequenced: completion status of an op */
	ME_PT_CLOSE,		/* sequenced: orderly close */
	ME_PT_ABORT,		/* the sender gave the connection up */
	ME_PT_PACK,		/* sequenced: several whole small writes */
	ME_PT_ATOMIC,		/* sequenced: remote atomic operation */
	ME_PT_MAX_
};

/* Flags (common header). */
#define ME_F_ACKREQ	0x0001	/* sequenced: please ack now */
#define ME_F_LAST	0x0002	/* sequenced: last packet of its message */
#define ME_F_REPLY	0x0004	/* keepalive: this is the reply */
#define ME_F_RTX	0x0008	/* sequenced: retransmission */
#define ME_F_DUP	0x0010	/* ACK, NACK: a sequenced packet arrived
				 * twice since the last ack (a retransmission
				 * was not needed) */
#define ME_F_CARRY	0x0020	/* ACK: a sequenced packet between the
				 * same nodes follows it in the frame */
#define ME_F_FRESH	0x0040	/* CONNECT, shared: the sender holds no
				 * shared connection of the receiver's */
#define ME_F_ASK	0x0080	/* keepalive: answer at once (a probe;
				 * without it a beacon, not answered) */
#define ME_F_FILL	0x0100	/* ACK, NACK: whole pages are copied here,
				 * not flipped: fill packets, do not cut
				 * them at our page boundaries */
#define ME_F_NOW	0x0200	/* WRITE, NOTIFY, PACK, last packet: its
				 * sender waits for the completion: ack it
				 * at once, do not hold the ack for a
				 * reply (wire 18) */
#define ME_F_KNOWN	0x03ff

#define ME_HDR_COMMON	40
#define ME_HDR_SEQ	88	/* common + sequenced extension */
#define ME_HDR_ACK	80
#define ME_HDR_CONN	72
#define ME_HDR_HELLO	48
#define ME_HDR_KA	72
#define ME_HDR_ABORT	48
#define ME_HDR_MAX	88

#define ME_SACK_BITS	128
#define ME_WIRE_LINKS	16	/* bits of a KEEPALIVE's down mask */
#define ME_HELLO_NAME	32
#define ME_READ_REQ_PAY	16	/* local region u32, reserved u32, local off u64 */
/* READ_REQ's payload, then the operand and the compare value (u64 each). */
#define ME_ATOMIC_PAY	32
#define ME_MAX_MSG	0x7fffffffu
#define ME_MAX_ERRNO	4095
#define ME_NODE_BCAST	0xffffffffu
#define ME_WIRE_PORT_MAX	0xffffu		/* ports are 16 bits; 0 is "any" */

#define ME_WIN_MIN	8
#define ME_WIN_MAX	32768
#define ME_OPS_MAX	65536

struct me_hdr {
	u8 version;
	u8 type;
	u16 flags;
	u16 hdr_len;
	u16 payload_len;
	u32 src_node;
	u32 dst_node;
	u32 src_inc;
	u32 dst_inc;
	u32 src_conn;
	u32 dst_conn;
	/*
	 * Connection frames (ACK, NACK, sequenced, ACCEPT) carry the cookie
	 * their receiver chose for the connection; 0 in the others.
	 */
	u64 cookie;
	union {
		struct {		/* WRITE..CLOSE */
			u32 seq;
			u32 msg_id;
			u32 op_id;
			u32 msg_len;
			u32 msg_off;
			u32 region;
			u32 imm;
			u32 stamp;	/* the sender's clock at this
					 * transmission, us (low 32 bits, 0:
					 * none); acks echo it */
			u64 key;
			u64 addr;
		} d;
		struct {		/* ACK, NACK */
			u32 cum;
			u32 right;
			u32 base;	/* sack bit i: seq cum + 1 + base + i */
			u8 sack[ME_SACK_BITS / 8];
			u32 status;	/* STATUS frames its sender had queued
					 * on the connection when it read cum */
			u32 hold;	/* ns between the arrival of the newest
					 * packet it answers and its sending
					 * (the receiver's part of the RTT) */
			u32 echo;	/* the stamp of the first sequenced
					 * packet since its previous ack (0:
					 * none) */
		} a;
		struct {		/* CONNECT, ACCEPT */
			u32 isn;
			u32 credit;
			u32 window;
			u32 mode;
			u32 ops;
			u64 cookie;	/* the sender's, nonzero */
			u32 port;	/* the receiver's endpoint (0: any) */
		} c;
		struct {		/* HELLO, KEEPALIVE */
			u32 link;	/* the sender's link index */
			u32 heard_us;	/* KEEPALIVE: the sender last heard
					 * the receiver on this link this
					 * long ago (0xffffffff: never) */
			u64 echo;	/* KEEPALIVE: the stamp of the newest
					 * keepalive the sender has from the
					 * receiver (a reply: its probe's);
					 * 0: none */
			u32 down;	/* KEEPALIVE: bit i: the sender took its
					 * path to the receiver on its link i
					 * down (it was alive) */
			u32 hold;	/* KEEPALIVE: ns from that keepalive
					 * reaching the sender's host to this
					 * one leaving; 0 without echo */
			u64 stamp;	/* KEEPALIVE: the sender's clock,
					 * nonzero */
		} h;
		struct {		/* ABORT */
			/*
			 * Positive errno: why it ended.  With src_conn 0 it
			 * refuses the CONNECT of dst_conn (ECONNREFUSED: no
			 * endpoint on its port; ENOSPC: no room), and carries
			 * that CONNECT's my_cookie as its cookie.
			 */
			u32 status;
		} x;
	};
	const u8 *payload;	/* points into the parsed buffer */
	void *rx;		/* the host's frame (me_core_rx_frame), or NULL */
	struct me_rx_batch *batch; /* the receive batch it came in, or NULL */
	u64 now;		/* me_now() when the engine took the frame: one
				 * clock read serves all its work (under TCG
				 * each is an emulated HPET access) */
};

/* Parse results other than 0 (also used as statistics buckets). */
#define ME_EWIRE_SHORT		(-EMSGSIZE)	  /* truncated */
#define ME_EWIRE_VERSION	(-EPROTONOSUPPORT)
#define ME_EWIRE_TYPE		(-EPROTO)	  /* unknown type */
#define ME_EWIRE_FIELD		(-EBADMSG)	  /* field out of range */

static inline bool me_pt_sequenced(u32 type)
{
	return (type >= ME_PT_WRITE && type <= ME_PT_CLOSE) || type == ME_PT_PACK ||
	       type == ME_PT_ATOMIC;
}

/* A sequenced packet that asks the receiver to act (not an answer). */
static inline bool me_pt_request(u32 type)
{
	return type == ME_PT_WRITE || type == ME_PT_NOTIFY || type == ME_PT_PACK ||
	       type == ME_PT_READ_REQ || type == ME_PT_ATOMIC;
}

/*
 * ATOMIC (wire 11): msg_len is the operand's size (4 or 8 bytes), imm the
 * operation (ME_AOP_*, me_core.h), region/key/addr the target as for a
 * read; the payload names the initiator's destination as a READ_REQ's
 * does, then carries the operand and the compare value.  The target
 * answers with a READ_RESP of msg_len bytes, the value it found, big-endian
 * (or a STATUS).  An operand of a 4-byte operation fits in 32 bits; the
 * compare value is 0 but for ME_AOP_CSWAP, the operand 0 for ME_AOP_READ.
 */
struct me_atomic_req {
	u32 lregion;
	u64 laddr;
	u64 operand;
	u64 compare;
};

/* The ATOMIC payload at p (me_wire_parse() checked it). */
void me_wire_atomic_get(const u8 *p, struct me_atomic_req *a);
/* Writes an ATOMIC payload (ME_ATOMIC_PAY bytes) at p. */
void me_wire_atomic_put(u8 *p, const struct me_atomic_req *a);

/*
 * PACK (wire 8): whole WRITE/NOTIFY messages of one packet each, several
 * in one frame.  The sequenced header's msg_len is the number of entries;
 * its other message fields are 0.  The payload is the entries back to
 * back, each a header of ME_PACK_ENT bytes followed by its data.
 */
#define ME_PACK_ENT	32
#define ME_PACK_MAX	32	/* entries in one PACK */

struct me_pack_ent {
	u32 type;		/* ME_PT_WRITE or ME_PT_NOTIFY */
	u32 len;		/* data bytes */
	u32 op_id;
	u32 region;
	u32 imm;
	u64 key;
	u64 addr;		/* addr + len does not wrap */
	const u8 *data;		/* points into the parsed buffer */
};

/*
 * The entry at p, rem bytes of payload left: its length in the payload
 * (header and data), or ME_EWIRE_FIELD/ME_EWIRE_SHORT.  me_wire_parse()
 * checked every entry of a PACK it accepted.
 */
int me_wire_pack_next(const u8 *p, u32 rem, struct me_pack_ent *e);
/* Writes e's entry header at p (its data follow); returns ME_PACK_ENT. */
u32 me_wire_pack_put(u8 *p, const struct me_pack_ent *e);

u16 me_wire_hdr_len(u32 type);
int me_wire_parse(const void *buf, u32 len, struct me_hdr *h);
/* Write h's header into buf (ME_HDR_MAX bytes at least); returns its length. */
u32 me_wire_build(u8 *buf, const struct me_hdr *h);
/* Sets the stamp of the sequenced header me_wire_build() wrote in buf. */
void me_wire_stamp(u8 *buf, u32 stamp);
/* A clock in microseconds as stamps carry it: low 32 bits, never 0. */
static inline u32 me_wire_stamp_of(u64 now_ns)
{
	u32 us = (u32)me_div_u64(now_ns, 1000);

	return us ? us : 1;
}
bool me_sack_test(const u8 *sack, u32 bit);
void me_sack_set(u8 *sack, u32 bit);

#endif /* ME_WIRE_H */
