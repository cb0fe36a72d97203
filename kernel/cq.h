/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_CQ_H
#define ME_CQ_H

#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>

#include "uapi/multiedge.h"

/* Entries copied out per pass; the caller's array may be larger. */
#define ME_CQ_BATCH	32

/*
 * The completion queue of one open file: a ring of ME_CQ_ENTRIES.  "used"
 * counts queued entries plus operations posted and not yet completed, so
 * a posted operation always finds its slot; events nobody posted for take
 * a slot only if one is free, else they are counted in overflow.
 */
struct me_cq {
	spinlock_t lock;		/* ring, used, overflow */
	struct me_completion *ring;
	u32 head;			/* next to harvest */
	u32 count;			/* queued */
	u32 used;			/* queued + reserved by posts */
	u32 overflow;
	struct mutex harvest;		/* one harvester at a time, */
	struct me_completion *batch;	/* its ME_CQ_BATCH entries copied out */
	wait_queue_head_t readable;	/* entries queued */
	wait_queue_head_t room;		/* used dropped */
};

int me_cq_init(struct me_cq *cq);
void me_cq_destroy(struct me_cq *cq);

/* Takes a slot for an operation about to be posted; -EAGAIN/-EINTR. */
int me_cq_reserve(struct me_cq *cq, bool nonblock);
void me_cq_unreserve(struct me_cq *cq);
/* Queues the completion of a posted operation (its slot is reserved). */
void me_cq_push_reserved(struct me_cq *cq, const struct me_completion *c);
/* Queues an event if there is room; counts it in overflow if not. */
void me_cq_push_event(struct me_cq *cq, const struct me_completion *c);

__poll_t me_cq_poll(struct me_cq *cq, struct file *file, poll_table *wait);
long me_cq_ioc_poll(struct me_cq *cq, void __user *uarg);

#endif /* ME_CQ_H */
