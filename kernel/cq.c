// SPDX-License-Identifier: GPL-2.0
/*
 * Completion queues: one per open /dev/multiedge.  Producers are receive
 * threads, the timer thread and posters (any context but hard IRQ), so
 * the ring is under a BH-safe spinlock; entries are copied out to user
 * space only after they are taken off under the lock.
 */
#include <linux/fs.h>
#include <linux/jiffies.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "chardev.h"
#include "cq.h"
#include "wait.h"

/*
 * Wakes @wq's sleepers, if any: most completions and harvests have none
 * to wake, and an idle wake_up() still takes the queue's lock with
 * interrupts off.  Called after the condition changed (under cq->lock or
 * atomically); wq_has_sleeper()'s barrier pairs with the one in the
 * waiter's prepare_to_wait_event() before it tests the condition.
 */
static void wake_sleepers(struct wait_queue_head *wq)
{
	if (wq_has_sleeper(wq))
		wake_up(wq);
}

int me_cq_init(struct me_cq *cq)
{
	cq->ring = kvcalloc(ME_CQ_ENTRIES, sizeof(*cq->ring), GFP_KERNEL);
	if (!cq->ring)
		return -ENOMEM;
	cq->batch = kmalloc_array(ME_CQ_BATCH, sizeof(*cq->batch), GFP_KERNEL);
	if (!cq->batch) {
		kvfree(cq->ring);
		return -ENOMEM;
	}
	spin_lock_init(&cq->lock);
	cq->head = 0;
	cq->count = 0;
	cq->used = 0;
	cq->overflow = 0;
	mutex_init(&cq->harvest);
	init_waitqueue_head(&cq->readable);
	init_waitqueue_head(&cq->room);
	return 0;
}

void me_cq_destroy(struct me_cq *cq)
{
	WARN_ON_ONCE(cq->used != cq->count);
	mutex_destroy(&cq->harvest);
	kfree(cq->batch);
	kvfree(cq->ring);
}

static bool try_reserve(struct me_cq *cq)
{
	bool ok;

	spin_lock_bh(&cq->lock);
	ok = cq->used < ME_CQ_ENTRIES;
	if (ok)
		cq->used++;
	spin_unlock_bh(&cq->lock);
	return ok;
}

int me_cq_reserve(struct me_cq *cq, bool nonblock)
{
	if (try_reserve(cq))
		return 0;
	if (nonblock)
		return -EAGAIN;
	if (me_wait_event_timeout(cq->room, try_reserve(cq), MAX_SCHEDULE_TIMEOUT) < 0)
		return -ERESTARTSYS;
	return 0;
}

void me_cq_unreserve(struct me_cq *cq)
{
	spin_lock_bh(&cq->lock);
	cq->used--;
	spin_unlock_bh(&cq->lock);
	wake_sleepers(&cq->room);
}

static void push_locked(struct me_cq *cq, const struct me_completion *c)
{
	cq->ring[(cq->head + cq->count) % ME_CQ_ENTRIES] = *c;
	cq->count++;
}

void me_cq_push_reserved(struct me_cq *cq, const struct me_completion *c)
{
	spin_lock_bh(&cq->lock);
	push_locked(cq, c);
	spin_unlock_bh(&cq->lock);
	wake_sleepers(&cq->readable);
}

void me_cq_push_event(struct me_cq *cq, const struct me_completion *c)
{
	bool queued = false;

	spin_lock_bh(&cq->lock);
	if (cq->used < ME_CQ_ENTRIES) {
		cq->used++;
		push_locked(cq, c);
		queued = true;
	} else {
		cq->overflow++;
	}
	spin_unlock_bh(&cq->lock);
	if (queued)
		wake_sleepers(&cq->readable);
}

static bool cq_nonempty(struct me_cq *cq)
{
	return READ_ONCE(cq->count) != 0;
}

__poll_t me_cq_poll(struct me_cq *cq, struct file *file, poll_table *wait)
{
	poll_wait(file, &cq->readable, wait);
	return cq_nonempty(cq) ? EPOLLIN | EPOLLRDNORM : 0;
}

/* Copies up to @n of the oldest entries without taking them off. */
static unsigned int peek(struct me_cq *cq, struct me_completion *out, unsigned int n)
{
	unsigned int i;

	spin_lock_bh(&cq->lock);
	n = min(n, cq->count);
	for (i = 0; i < n; i++)
		out[i] = cq->ring[(cq->head + i) % ME_CQ_ENTRIES];
	spin_unlock_bh(&cq->lock);
	return n;
}

static void consume(struct me_cq *cq, unsigned int n)
{
	spin_lock_bh(&cq->lock);
	cq->head = (cq->head + n) % ME_CQ_ENTRIES;
	cq->count -= n;
	cq->used -= n;
	spin_unlock_bh(&cq->lock);
	wake_sleepers(&cq->room);
}

long me_cq_ioc_poll(struct me_cq *cq, void __user *uarg)
{
	struct me_poll_cq req;
	unsigned int done = 0;
	long ret;

	ret = me_copy_arg_in(&req, sizeof(req), ME_POLL_CQ_SIZE_VER0, uarg);
	if (ret < 0)
		return ret;
	if (req.flags & ~ME_POLL_F_WAIT)
		return -EOPNOTSUPP;
	if (req.entry_size > PAGE_SIZE)
		return -E2BIG;
	if (!req.count || req.entry_size < ME_COMPLETION_SIZE_VER0)
		return -EINVAL;
	ret = 0;

	if (req.flags & ME_POLL_F_WAIT) {
		long t = req.timeout_ms ? msecs_to_jiffies(req.timeout_ms) :
					  MAX_SCHEDULE_TIMEOUT;

		t = me_wait_event_timeout(cq->readable, cq_nonempty(cq), t);
		if (t < 0)
			return -ERESTARTSYS;
	}

	mutex_lock(&cq->harvest);
	while (done < req.count) {
		unsigned int n = peek(cq, cq->batch, min_t(u32, ME_CQ_BATCH, req.count - done));

		if (!n)
			break;
		ret = me_copy_array_out(req.entries + (u64)done * req.entry_size,
					req.entry_size, cq->batch, sizeof(*cq->batch), n);
		if (ret)
			break;
		consume(cq, n);
		done += n;
	}
	mutex_unlock(&cq->harvest);
	/* Entries that reached user space are gone even if a later pass faulted. */
	if (ret && !done)
		return ret;

	if (put_user(done, (u32 __user *)(uarg + offsetof(struct me_poll_cq, count))) ||
	    put_user(READ_ONCE(cq->overflow),
		     (u32 __user *)(uarg + offsetof(struct me_poll_cq, overflow))))
		return -EFAULT;
	return 0;
}
