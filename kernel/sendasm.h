/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_SENDASM_H
#define ME_SENDASM_H

#include <linux/types.h>

struct me_net;

/*
 * Sends of several packets (ABI 26, wire 17): each packet's bytes go into
 * the message it belongs to, which is queued for ME_IOC_RECV once the
 * engine says all of it arrived (its msg_end).  See sendasm.c.
 */

void me_sendasm_net_init(struct me_net *mn);
/*
 * Packet bytes [off, off + n) of message @msg_id of connection @conn, a
 * send of @len bytes with @key (which placed packets checked).  0, or the
 * errno this packet failed with (its message will fail with it).
 */
int me_sendasm_part(struct me_net *mn, u32 conn, u32 msg_id, u64 key, u32 len, u32 off,
		    const void *src, u32 n);
/*
 * Every packet of the message went through me_sendasm_part() (@err: the
 * engine's verdict so far).  Queues it, or frees it; returns what its
 * sender is told.
 */
int me_sendasm_end(struct me_net *mn, u32 conn, u32 msg_id, u64 key, u32 len, int err);
/* Connection @id is retired: what it left unfinished goes. */
void me_sendasm_conn_retired(struct me_net *mn, u32 id);
/* Engine stop: everything left goes. */
void me_sendasm_drop(struct me_net *mn);

#endif /* ME_SENDASM_H */
