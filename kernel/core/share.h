/* SPDX-License-Identifier: GPL-2.0 */
/*
 * share.h - connections to one peer taking turns at its paths' windows,
 * see share.c.
 */
#ifndef ME_SHARE_H
#define ME_SHARE_H

struct me_conn;
struct me_node;
struct me_peer;

#include "me_types.h"

/* The connection's pump found no path with room: it waits for an ack. */
void me_share_wait(struct me_conn *conn);
/*
 * The connection waits no more: its pump runs (and marks it again if it
 * stops), or it is freed.
 */
void me_share_unwait(struct me_conn *conn);
/* Room opened on the peer's paths: pump the connections that wait, in turn. */
void me_share_wake(struct me_node *node, struct me_peer *peer);
/*
 * ... and every path with room was paced until at: me_core_pace() pumps
 * it (the host is asked for a call then).
 */
void me_share_pace_wait(struct me_conn *conn, u64 at);
/* What an ack released is sent by the host's pump_kick call. */
void me_share_handoff(struct me_conn *conn);

#endif /* ME_SHARE_H */
