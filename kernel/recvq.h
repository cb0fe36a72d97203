/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_RECVQ_H
#define ME_RECVQ_H

#include <linux/poll.h>
#include <linux/types.h>

struct me_file;
struct me_net;

/*
 * Receive queues of sends (ME_OP_SEND, ME_IOC_RECV): one per open file,
 * plus the namespace's queue of messages on passive connections no file
 * has adopted yet.  See recvq.c for who gets which message.
 */

/* Per-namespace state for @nconns connection ids (engine start, stop). */
int me_recvq_net_start(struct me_net *mn, unsigned int nconns);
void me_recvq_net_stop(struct me_net *mn);
/*
 * Frees the namespace queue's messages, unlocked: at engine stop, once no
 * file is left and nothing receives or retires any more.
 */
void me_recvq_drop(struct me_net *mn);

void me_recvq_file_init(struct me_file *f);
/* After every connection of @f was disowned: frees its queue. */
void me_recvq_file_release(struct me_file *f);

/* @f opened connection @id: its messages are @f's (owner_lock held). */
void me_recvq_claim_locked(struct me_net *mn, u32 id);
/* Whether @f has connection @id by adoption, not by opening it (owner_lock). */
bool me_recvq_adopted_locked(struct me_net *mn, u32 id);
/*
 * Passive connection @id was opened to @port: the file bound to it adopts
 * it (if nothing did yet).  False: no file holds the port, and nobody may
 * take the connection's messages.
 */
bool me_recvq_port_adopt(struct me_net *mn, u32 id, u32 port);
/* The engine retired connection @id (before its slot is reused). */
void me_recvq_conn_retired(struct me_net *mn, u32 id);

/*
 * A send landed on connection @conn: queue it; -ENOBUFS when full.  On a
 * shared connection @key names its ports (me_recvq_ports()) and the file
 * bound to the destination takes it (-ECONNREFUSED: none is); elsewhere
 * it must be 0 (-EINVAL).
 */
int me_recvq_arrived(struct me_net *mn, u32 conn, u64 key, const void *data, u32 len);

/*
 * A message of its own, for a send gathered from several packets
 * (sendasm.c): me_recvq_msg_new() counts @len bytes against the
 * namespace's recv_kb (NULL: above it, no memory, or @len above
 * ME_SEND_MAX), zeroed; filled in place; then me_recvq_deliver() queues
 * it as me_recvq_arrived() would, or frees it and returns the error.
 * Any context; no sleeping.
 */
struct me_kmsg;
struct me_kmsg *me_recvq_msg_new(struct me_net *mn, u32 len);
/* -EINVAL if [off, off + n) is not within the message. */
int me_recvq_msg_fill(struct me_kmsg *m, u32 off, const void *src, u32 n);
void me_recvq_msg_free(struct me_net *mn, struct me_kmsg *m);
/* Whether @key is right for a send on @conn (as me_recvq_deliver() checks). */
int me_recvq_key_check(struct me_net *mn, u32 conn, u64 key);
/* @m is the queue's, or freed (-EINVAL: no such connection, or a bad @key). */
int me_recvq_deliver(struct me_net *mn, u32 conn, u64 key, struct me_kmsg *m);
/* At load: whether recv_kb is in its range (logged if not). */
bool me_recvq_param_ok(void);
/* The key a send on a shared connection carries: its two ports. */
static inline u64 me_recvq_ports(u32 src_port, u32 dst_port)
{
	return (u64)src_port << 16 | dst_port;
}

long me_recvq_ioc_recv(struct me_file *f, void __user *uarg);
/* EPOLLRDBAND while a message waits for @f (poll(2) of its file). */
__poll_t me_recvq_poll(struct me_file *f, struct file *file, poll_table *wait);

#endif /* ME_RECVQ_H */
