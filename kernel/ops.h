/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_OPS_H
#define ME_OPS_H

#include <linux/types.h>

struct io_uring_cmd;
struct me_completion;
struct me_cqe;
struct me_file;
struct me_mr;
struct me_net;
struct me_post;

int me_ops_init(void);
void me_ops_uninit(void);
/* Per-namespace state for @nconns connection ids (engine start, stop). */
int me_ops_net_start(struct me_net *mn, unsigned int nconns);
/* A completion of the engine's as the user sees it. */
void me_ops_fill(struct me_completion *out, const struct me_cqe *cqe, u32 type);
void me_ops_net_stop(struct me_net *mn);
/* The engine's completions and events (any context but hard IRQ). */
void me_ops_complete(struct me_net *mn, const struct me_cqe *cqe);

/*
 * Posts @req (already copied in) on a connection of @f.  @ucmd: the
 * io_uring command it came through, which then gets the completion
 * (uring.c), or NULL for the file's completion queue.  @may_block: wait
 * while a queue is full (interruptibly) rather than fail with -EAGAIN.
 * 0 once the engine owns the operation: it completes exactly once, later
 * or already; a negative errno if nothing was posted.
 */
/* Closing @f: waits until its operations on shared connections finished. */
void me_ops_release_file(struct me_file *f);
int me_ops_post(struct me_file *f, const struct me_post *req,
		struct io_uring_cmd *ucmd, bool may_block);

/*
 * An atomic's operand, and the value ME_ATOMIC_CSWAP compares with, from
 * the local buffer of @req (host order), where the value found will land:
 * 0 or -ERANGE.
 */
int me_ops_atomic_operands(const struct me_post *req, const struct me_mr *mr, u64 *operand,
			   u64 *compare);

/*
 * Zero-copy transmit for the engine (core/me_plat.h): @cookie is an
 * operation posted here (its struct me_kop), referenced by the engine.
 */
void me_ops_zc_hold(u64 cookie);
void me_ops_zc_put(u64 cookie);
int me_ops_zc_tx(struct me_net *mn, u32 link, u64 dst, const void *hdr, u32 hlen, u64 off,
		 u32 len, u64 cookie);

#endif /* ME_OPS_H */
