/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_WAIT_H
#define ME_WAIT_H

#include <linux/jiffies.h>
#include <linux/sched/signal.h>
#include <linux/wait.h>

/*
 * wait_event_interruptible_timeout() that io_uring does not cut short.
 *
 * A ring's completions reach its task as task work, announced like a
 * signal (TIF_NOTIFY_SIGNAL), which ends interruptible sleeps although no
 * signal is pending; the work itself runs only when the task returns to
 * user space.  Such a wake-up must not fail a blocking command with EINTR
 * (a thread may well wait in an ioctl while its own ring completes), nor
 * restart it with its timeout counted again.  So the wait goes on in
 * killable slices of ME_WAIT_SLICE, looking for a real signal between
 * them: a signal then interrupts it within a slice.
 *
 * Returns as wait_event_interruptible_timeout() does, by sign: > 0 once
 * @cond holds, 0 on timeout, -ERESTARTSYS for a real signal (restarted,
 * or EINTR, as the signal's SA_RESTART says) or a fatal one.  @timeout
 * may be MAX_SCHEDULE_TIMEOUT.
 */
#define ME_WAIT_SLICE	(HZ / 50)

#define me_wait_event_timeout(wq, cond, timeout)				\
({										\
	long __to = (timeout);							\
	unsigned long __end = jiffies + __to;					\
	long __t = wait_event_interruptible_timeout(wq, cond, __to);		\
										\
	while (__t == -ERESTARTSYS && !task_sigpending(current)) {		\
		long __left = __to == MAX_SCHEDULE_TIMEOUT ? __to :		\
			      max_t(long, (long)(__end - jiffies), 0);		\
		long __slice = min_t(long, __left, ME_WAIT_SLICE);		\
										\
		__t = wait_event_killable_timeout(wq, cond, __slice);		\
		if (__t != 0)							\
			break;	/* > 0: done; -ERESTARTSYS: a fatal signal */	\
		if (__left <= __slice)						\
			break;	/* 0: timed out */				\
		__t = -ERESTARTSYS;	/* time left: another slice, unless	\
					 * a real signal came meanwhile */	\
	}									\
	__t;									\
})

#endif /* ME_WAIT_H */
