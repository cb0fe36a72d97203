/* SPDX-License-Identifier: GPL-2.0 */
/*
 * shared.h - shared connections (ME_CONNECT_F_SHARED, ABI 18): the one
 * connection between two nodes that every file of both uses (shared.c).
 */
#ifndef ME_SHARED_H
#define ME_SHARED_H

#include <linux/types.h>

struct me_conn_done;
struct me_file;
struct me_net;
struct me_completion;
struct me_connect;

void me_shared_file_init(struct me_file *f);
/* ME_IOC_CONNECT with ME_CONNECT_F_SHARED; @req checked by the caller. */
long me_shared_connect(struct me_file *f, struct me_connect *req, void __user *uarg,
		       size_t usize);
/* ME_IOC_DISCONNECT of connection @id: -ENOENT unless @f joined it. */
int me_shared_leave(struct me_file *f, u32 id);
/* Closing the file: it leaves every shared connection it joined. */
void me_shared_release_file(struct me_file *f);
/*
 * With cd->lock: the end event @c goes to every file that joined the
 * connection (under owner_lock too, or with the event held back until
 * its operations completed: ops.c).
 */
void me_shared_push_event(struct me_conn_done *cd, const struct me_completion *c);
/*
 * The timer: closes given-up connections whose queue was full.  True
 * while some are left to retry (the timer keeps its tick).
 */
bool me_shared_timer(struct me_net *mn);
/* ME_CQE_CONN_UP of a shared connection this side opened. */
void me_shared_up(struct me_net *mn, u32 id);
/* With owner_lock: the connection was retired; its joins are forgotten. */
void me_shared_retired_locked(struct me_net *mn, struct me_conn_done *cd);

#endif /* ME_SHARED_H */
