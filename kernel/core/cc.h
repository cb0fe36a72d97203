/* SPDX-License-Identifier: GPL-2.0 */
/*
 * cc.h - congestion control per (link, peer) path: a delay-based window
 * (Swift-style AIMD toward a target round-trip time), see cc.c.
 */
#ifndef ME_CC_H
#define ME_CC_H

#include "me_core.h"

struct me_node;
struct me_path;

/* A new peer in the path's slot: no round trip measured yet. */
void me_cc_forget(struct me_path *pa, u64 now);
/* The path came alive (again): start from the initial window. */
void me_cc_start(struct me_node *node, struct me_path *pa, u64 now);
/* The path's base delay now (0: none measured). */
u64 me_cc_base(struct me_path *pa);
/* Bytes the path may have in flight now (at least one MTU). */
u32 me_cc_window(struct me_node *node, struct me_path *pa);
/*
 * One acknowledgement acked `bytes` sent on the path; rtt_ns is the
 * smallest round trip among them that was sent once only (0: none),
 * delay_ns the same without the time spent waiting in the two hosts (0:
 * not known for this path; the bytes grow the window by its last delay).
 */
void me_cc_acked(struct me_node *node, struct me_path *pa, u32 bytes,
		 u64 rtt_ns, u64 delay_ns, u64 now);
/*
 * A keepalive exchange on the path took rtt_ns; quiet: none of our data
 * was in flight on the path or sent during it and none of the peer's
 * arrived, so no queue of this traffic's making was in the sample.
 */
void me_cc_probe_rtt(struct me_node *node, struct me_path *pa, u64 rtt_ns,
		     bool quiet, u64 now);
/* The delay the path's window aims at now (see cc.c). */
u64 me_cc_target(struct me_node *node, struct me_path *pa, u64 base);
/* A packet sent on the path was lost (found by later packets' acks). */
void me_cc_lost(struct me_node *node, struct me_path *pa, u64 now);
/* A packet sent on the path timed out. */
void me_cc_timeout(struct me_node *node, struct me_path *pa, u64 now);
/* The first timeout of an episode, resent as a probe, was on the path. */
void me_cc_probe(struct me_node *node, struct me_path *pa, u64 now);
/* A data packet leaves on the path, which had none in flight since `last`. */
void me_cc_idle(struct me_node *node, struct me_path *pa, u64 last, u64 now);
/*
 * The peer received a packet twice: a retransmission was not needed.
 * Gives the path back the window its last timeouts took, unless a queue
 * lost packets since (cc.c).
 */
void me_cc_spurious(struct me_node *node, struct me_path *pa, u64 now);

#endif /* ME_CC_H */
