// SPDX-License-Identifier: GPL-2.0
/*
 * The protocol engine (core/) inside the kernel: one engine node per
 * network namespace, its platform operations, its timer thread.
 *
 * The engine runs in three kinds of context, all able to sleep outside the
 * engine's own locks: the links' receive threads (me_engine_rx), this
 * file's timer thread, and ioctl callers posting operations.  Platform
 * operations map onto the module: tx onto the link's device (link.c),
 * region access onto pinned pages (mr.c), completions onto the owners'
 * completion queues (ops.c).
 */
#include <linux/delay.h>
#include <linux/hrtimer.h>
#include <linux/kthread.h>
#include <linux/log2.h>
#include <linux/module.h>
#include <linux/nsproxy.h>
#include <linux/rtnetlink.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>
#include <linux/utsname.h>

#include "core/me_core.h"
#include "chardev.h"
#include "conns.h"
#include "engine.h"
#include "link.h"
#include "mr.h"
#include "netns.h"
#include "ops.h"
#include "ports.h"
#include "recvq.h"
#include "rxframe.h"
#include "sendasm.h"
#include "shared.h"
#include "txbatch.h"

static unsigned int tick_us = 1000;
module_param(tick_us, uint, 0444);
MODULE_PARM_DESC(tick_us, "Protocol timer tick in microseconds, while the next tick has work; else it sleeps to its earliest deadline (100..100000, default 1000)");

static unsigned int window_kb = 2048;
module_param(window_kb, uint, 0444);
MODULE_PARM_DESC(window_kb,
		 "Data in flight per connection, KiB (64..65536, default 2048): the window is the power of two of packets that fits, 8..4096");

static unsigned int max_conns = 1024;
module_param(max_conns, uint, 0444);
MODULE_PARM_DESC(max_conns,
		 "Connection slots per namespace (1..65536, default 1024); a slot is reused, under a new id, once its connection ended and lingered");

static unsigned int max_peers = 256;
module_param(max_peers, uint, 0444);
MODULE_PARM_DESC(max_peers,
		 "Peers a namespace keeps (2..65536, default 256): nodes heard by HELLO on any link");

static unsigned int ka_ms = 20;
module_param(ka_ms, uint, 0444);
MODULE_PARM_DESC(ka_ms,
		 "A neighbour (link, peer) quiet this long either way is probed, ms (1..10000, default 20)");

static unsigned int link_dead_ms = 150;
module_param(link_dead_ms, uint, 0444);
MODULE_PARM_DESC(link_dead_ms,
		 "A neighbour not heard, or not hearing us, this long is dead and its traffic moves to the node's other links, ms (3 x ka_ms..60000, default 150)");

static unsigned int tx_zc_min = 1024;
module_param(tx_zc_min, uint, 0444);
MODULE_PARM_DESC(tx_zc_min,
		 "Payload bytes per packet from which writes, and over a veth answers to reads of a page or more, are sent straight from the pinned pages (zero-copy transmit; default 1024, 0: always copy)");

unsigned int me_engine_zc_min(void)
{
	return tx_zc_min;
}

static unsigned int link_window_kb = 1024;
module_param(link_window_kb, uint, 0444);
MODULE_PARM_DESC(link_window_kb,
		 "Data in flight per neighbour and link at most (the largest congestion window), KiB (16..65536, default 1024)");

static bool cc = true;
module_param(cc, bool, 0444);
MODULE_PARM_DESC(cc, "Congestion control per neighbour and link (delay-based windows; default on, off: every path may hold link_window_kb)");

static unsigned int cc_target_us = 1000;
module_param(cc_target_us, uint, 0444);
MODULE_PARM_DESC(cc_target_us,
		 "Round trip congestion control aims at, us; a path whose own base round trip reaches it aims at 3/2 of that instead (10..1000000, default 1000)");

static unsigned int cc_init_pkts = 2;
module_param(cc_init_pkts, uint, 0444);
MODULE_PARM_DESC(cc_init_pkts, "A path's first congestion window, packets (1..1024, default 2)");

static unsigned int pace_pct;
module_param(pace_pct, uint, 0444);
MODULE_PARM_DESC(pace_pct,
		 "Pacing: a path's packets leave at this percentage of its window per base round trip, spread instead of as a burst (0: off, the default; or 100..1000)");

static unsigned int pace_burst_kb = 16;
module_param(pace_burst_kb, uint, 0444);
MODULE_PARM_DESC(pace_burst_kb,
		 "Pacing: what an idle path may send back to back, KiB (1..4096, default 16)");

static unsigned int answer_ms = 30000;
module_param(answer_ms, uint, 0444);
MODULE_PARM_DESC(answer_ms,
		 "An operation sent in full whose peer neither answers nor acknowledges anything of the connection for this long fails it, ms (500..3600000, default 30000)");

static unsigned int ack_hold_us = 1000;
module_param(ack_hold_us, uint, 0444);
MODULE_PARM_DESC(ack_hold_us,
		 "On a connection whose requests are answered quickly, a request's ack waits this long for the answer to carry it, us (0..4000, default 1000; 0: acks never wait)");

/* Engines alive, for the module-wide accounting. */
static LIST_HEAD(me_engines);
static DEFINE_MUTEX(me_engines_lock);

int me_engine_init(void)
{
	if (tick_us < 100 || tick_us > 100000 || window_kb < 64 || window_kb > 65536 ||
	    !max_conns || max_conns > 65536 || link_window_kb < 16 || link_window_kb > 65536 ||
	    answer_ms < 500 || answer_ms > 3600000 || max_peers < 2 || max_peers > 65536 ||
	    !ka_ms || ka_ms > 10000 || link_dead_ms < 3 * ka_ms || link_dead_ms > 60000 ||
	    cc_target_us < 10 || cc_target_us > 1000000 || !cc_init_pkts || cc_init_pkts > 1024 ||
	    ack_hold_us > 4000 || (pace_pct && (pace_pct < 100 || pace_pct > 1000)) ||
	    !pace_burst_kb || pace_burst_kb > 4096) {
		pr_err("bad parameter: tick_us=%u window_kb=%u max_conns=%u link_window_kb=%u answer_ms=%u max_peers=%u ka_ms=%u link_dead_ms=%u cc_target_us=%u cc_init_pkts=%u ack_hold_us=%u pace_pct=%u pace_burst_kb=%u\n",
		       tick_us, window_kb, max_conns, link_window_kb, answer_ms, max_peers,
		       ka_ms, link_dead_ms, cc_target_us, cc_init_pkts, ack_hold_us, pace_pct,
		       pace_burst_kb);
		return -EINVAL;
	}
	return me_recvq_param_ok() ? 0 : -EINVAL;
}

/* Frees retired connections once no reader can hold one (conn_srcu). */
static void retire_work_fn(struct work_struct *work)
{
	struct me_net *mn = container_of(work, struct me_net, retire_work);
	struct me_conn *c, *next;

	spin_lock_bh(&mn->retire_lock);
	c = mn->retired;
	mn->retired = NULL;
	spin_unlock_bh(&mn->retire_lock);
	if (!c)
		return;
	synchronize_srcu(&mn->conn_srcu);
	for (; c; c = next) {
		next = *me_conn_host_link(c);
		me_conn_free(c);
	}
}

/* Pumps the marked connections, as a receive thread would, under conn_srcu. */
static void pace_run(struct me_net *mn)
{
	int idx = srcu_read_lock(&mn->conn_srcu);

	me_core_pace(mn->core);
	srcu_read_unlock(&mn->conn_srcu, idx);
}

/* The pacing timer (softirq): the connections pacing stopped. */
static enum hrtimer_restart pace_fire(struct hrtimer *t)
{
	pace_run(container_of(t, struct me_net, pace_timer));
	return HRTIMER_NORESTART;
}

/* The ack timer (softirq): acks held for a reply that did not come. */
static enum hrtimer_restart ack_fire(struct hrtimer *t)
{
	struct me_net *mn = container_of(t, struct me_net, ack_timer);
	int idx = srcu_read_lock(&mn->conn_srcu);

	me_core_acks(mn->core);
	srcu_read_unlock(&mn->conn_srcu, idx);
	return HRTIMER_NORESTART;
}

/* What receive batches handed off (plat_pump_kick), in a worker. */
static void pump_work_fn(struct work_struct *w)
{
	pace_run(container_of(w, struct me_net, pump_work));
}

/* Ends a sleep of the timer thread (timer_sleep). */
static enum hrtimer_restart timer_wake_fire(struct hrtimer *t)
{
	struct me_net *mn = container_of(t, struct me_net, timer_wake);
	struct task_struct *task = READ_ONCE(mn->timer);

	if (task)
		wake_up_process(task);
	return HRTIMER_NORESTART;
}

int me_engine_net_init(struct me_net *mn)
{
	int i, ret;

	ret = init_srcu_struct(&mn->conn_srcu);
	if (ret)
		return ret;
	spin_lock_init(&mn->retire_lock);
	mn->retired = NULL;
	INIT_WORK(&mn->retire_work, retire_work_fn);
	hrtimer_init(&mn->pace_timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_SOFT);
	mn->pace_timer.function = pace_fire;
	hrtimer_init(&mn->ack_timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_SOFT);
	mn->ack_timer.function = ack_fire;
	hrtimer_init(&mn->timer_wake, CLOCK_MONOTONIC, HRTIMER_MODE_ABS);
	mn->timer_wake.function = timer_wake_fire;
	INIT_WORK(&mn->pump_work, pump_work_fn);
	spin_lock_init(&mn->pace_lock);
	mn->pace_off = true;

	for (i = 0; i < ME_MAX_LINKS; i++)
		RCU_INIT_POINTER(mn->slots[i], NULL);
	mn->core = NULL;
	mn->packet_size = 0;
	mn->timer = NULL;
	INIT_LIST_HEAD(&mn->node);
	spin_lock_init(&mn->owner_lock);
	mn->owners = NULL;
	mn->conn_copies = NULL;
	mn->conn_done = NULL;
	init_waitqueue_head(&mn->waitq);
	atomic_set(&mn->events, 0);
	spin_lock_init(&mn->msg_lock);
	INIT_LIST_HEAD(&mn->msgs);
	mn->nr_msgs = 0;
	mn->msg_seq = 0;
	mn->conn_claimed = NULL;
	mn->conn_adopted = NULL;
	init_waitqueue_head(&mn->msg_wait);
	me_sendasm_net_init(mn);
	return 0;
}

/* After me_engine_stop(): nothing retires or reads connections any more. */
void me_engine_net_uninit(struct me_net *mn)
{
	cleanup_srcu_struct(&mn->conn_srcu);
	/* Every file is closed and the engine stopped: no message is held. */
	WARN_ON_ONCE(atomic_long_read(&mn->msg_bytes));
}

/* ---- platform operations (core/me_plat.h) ---- */

static u64 plat_now_ns(void *ctx)
{
	return ktime_get_ns();
}

static int plat_tx(void *ctx, u32 link, u64 dst, const void *buf, u32 len)
{
	return me_link_xmit(ctx, link, dst, buf, len);
}

static void plat_tx_burst(void *ctx, bool open)
{
	if (open)
		me_txb_open();
	else
		me_txb_close();
}

/* Engine access bits (ME_ACC_*) to region access bits (ME_ACCESS_*). */
static u32 to_access(u32 acc)
{
	return (acc & ME_ACC_WRITE ? ME_ACCESS_REMOTE_WRITE : 0) |
	       (acc & ME_ACC_READ ? ME_ACCESS_REMOTE_READ : 0);
}

static int plat_mr_check(void *ctx, u32 region, u64 key, u64 off, u64 len, u32 access)
{
	if (region == ME_REGION_MSG) {
		if (access != ME_ACC_WRITE)
			return -EACCES;
		return off || len > ME_SEND_MAX ? -ERANGE : 0;
	}
	return me_mr_check_remote(ctx, region, key, off, len, to_access(access));
}

/* A placement's result, counted for its connection (mectl's copies). */
static int copies_counted(struct me_net *mn, u32 conn, int ret)
{
	if (ret >= 0 && conn) {
		u32 slot = me_node_slot(mn->core, conn);

		if (slot != ME_NO_SLOT)
			atomic64_inc(&mn->conn_copies[slot]);
	}
	return ret;
}

static int plat_mr_write(void *ctx, u32 conn, u32 region, u64 key, u64 off, const void *src,
			 u32 len, void *rx)
{
	struct me_net *mn = ctx;
	int ret;

	if (region == ME_REGION_MSG) {
		if (rx)
			me_frame_fill(rx);
		ret = me_recvq_arrived(mn, conn, key, src, len);
		/* A send is copied into its receive buffer, pages and all. */
		return !ret && len >= PAGE_SIZE ? ME_PLACE_COPIED : ret;
	}
	return copies_counted(mn, conn, me_mr_place(mn, region, off, src, len, rx));
}

/* A peer's write packet: one reference on its region, checked and placed. */
static int plat_mr_place(void *ctx, u32 conn, u32 msg_id, u32 region, u64 key, u64 addr,
			 u64 len, u64 off, const void *src, u32 n, void *rx)
{
	struct me_net *mn = ctx;
	struct me_mr *mr;
	int err;

	if (region == ME_REGION_MSG) {
		err = plat_mr_check(ctx, region, key, addr, len, ME_ACC_WRITE);
		if (err || !n)
			return err;
		/* A send of one packet is queued at once, else gathered. */
		if (n == len)
			return plat_mr_write(ctx, conn, region, key, off, src, n, rx);
		if (rx)
			me_frame_fill(rx);
		err = me_sendasm_part(mn, conn, msg_id, key, len, off, src, n);
		return !err && n >= PAGE_SIZE ? ME_PLACE_COPIED : err;
	}
	mr = me_mr_get_remote(mn, region, key, addr, len, ME_ACCESS_REMOTE_WRITE, &err);
	if (!mr)
		return err;
	if (n)
		err = copies_counted(mn, conn, me_mr_place_on(mr, off, src, n, rx));
	me_mr_put(mr);
	return err;
}

static int plat_mr_local(void *ctx, u32 region, u64 off, u64 len, u32 access)
{
	return me_mr_check_local(ctx, region, off, len);
}

static int plat_mr_read(void *ctx, u32 region, u64 off, void *dst, u32 len)
{
	return me_mr_copy_from(ctx, region, off, dst, len);
}

static int plat_mr_atomic(void *ctx, u32 region, u64 off, u32 size, u32 aop, u64 operand,
			  u64 compare, u64 *old)
{
	if (region == ME_REGION_MSG)
		return -EACCES;		/* mr_check refused it already */
	return me_mr_atomic(ctx, region, off, size, aop, operand, compare, old);
}

static void plat_rx_fill(void *ctx, void *rx)
{
	me_frame_fill(rx);
}

/*
 * The engine let go of a connection (timer thread): its slot's state here
 * is forgotten now, its memory freed after a grace period.
 */
static void plat_retire(void *ctx, struct me_conn *c)
{
	struct me_net *mn = ctx;
	u32 id = me_conn_id(c);

	me_conns_retired(mn, id);
	atomic64_set(&mn->conn_copies[me_node_slot(mn->core, id)], 0);
	spin_lock_bh(&mn->retire_lock);
	*me_conn_host_link(c) = mn->retired;
	mn->retired = c;
	spin_unlock_bh(&mn->retire_lock);
	queue_work(system_wq, &mn->retire_work);
}

static void plat_mr_done(void *ctx, u32 region, u64 off, u64 len)
{
	if (region != ME_REGION_MSG)
		me_mr_done(ctx, region, off, len);
}

/* A send of several packets all arrived: queued now (sendasm.c). */
static int plat_msg_end(void *ctx, u32 conn, u32 msg_id, u32 region, u64 key, u64 len,
			int err)
{
	if (region != ME_REGION_MSG)
		return err;
	return me_sendasm_end(ctx, conn, msg_id, key, len, err);
}

static void plat_complete(void *ctx, const struct me_cqe *cqe)
{
	me_ops_complete(ctx, cqe);
}

/*
 * The node's tables (at the first attach) and each connection's rings: an
 * active connection's in the connecting task's memory cgroup, a passive
 * one's in none (receive threads are kernel threads).
 */
static void *plat_alloc(void *ctx, size_t size)
{
	return kvmalloc(size, GFP_KERNEL_ACCOUNT);
}

static void plat_free(void *ctx, void *p)
{
	kvfree(p);
}

/*
 * A read's answer by reference (me_plat.h): the handle is the region,
 * held by the window entry until it is acknowledged, so deregistering it
 * waits for that (a retransmission sends the same memory).
 */
static u64 plat_resp_hold(void *ctx, u32 region, u64 off, u32 len)
{
	int err;

	return (uintptr_t)me_mr_get_range(ctx, region, off, len, &err);
}

static int plat_resp_tx(void *ctx, u32 link, u64 dst, const void *hdr, u32 hdr_len,
			u64 handle, u64 off, u32 len)
{
	const struct me_mr *mr = (const struct me_mr *)(uintptr_t)handle;

	return me_link_xmit_answer(ctx, link, dst, hdr, hdr_len, mr, off, len);
}

static void plat_resp_put(void *ctx, u64 handle)
{
	me_mr_put((struct me_mr *)(uintptr_t)handle);
}

static int plat_zc_tx(void *ctx, u32 link, u64 dst, const void *hdr, u32 hdr_len,
		      u32 region, u64 off, u32 len, u64 cookie)
{
	return me_ops_zc_tx(ctx, link, dst, hdr, hdr_len, off, len, cookie);
}

static void plat_zc_hold(void *ctx, u64 cookie)
{
	me_ops_zc_hold(cookie);
}

static void plat_zc_put(void *ctx, u64 cookie)
{
	me_ops_zc_put(cookie);
}

static u32 plat_random_u32(void *ctx)
{
	return get_random_u32();
}

static bool plat_port_open(void *ctx, u32 port)
{
	return me_ports_open(ctx, port);
}

/*
 * The core's work needs the timer (me_core.h): its idle sleep ends a
 * tick from now, when it would have ticked anyway (timer_thread), unless
 * it ends sooner.  Only the end moves: a wakeup now would be followed
 * by a tick's sleep, two context switches for each kick.
 */
static void plat_timer_kick(void *ctx)
{
	struct me_net *mn = ctx;
	u64 tick = (u64)tick_us * NSEC_PER_USEC;
	ktime_t at = ktime_add_ns(ktime_get(), tick);

	/* A stale look costs at most a tick's lateness or one early wake. */
	if (!hrtimer_is_queued(&mn->timer_wake) ||
	    ktime_before(at, hrtimer_get_expires(&mn->timer_wake)))
		hrtimer_start_range_ns(&mn->timer_wake, at, tick / 4, HRTIMER_MODE_ABS);
}

/*
 * me_core_pace() at @at_ns (ktime_get_ns()'s clock), unless the timer is
 * due sooner.  The callback may run on another CPU meanwhile: then the
 * timer is not queued and is started again, so no request is lost.
 */
static void plat_pace_kick(void *ctx, u64 at_ns)
{
	struct me_net *mn = ctx;
	ktime_t at = ns_to_ktime(at_ns);
	unsigned long flags;

	spin_lock_irqsave(&mn->pace_lock, flags);
	if (!mn->pace_off && (!hrtimer_is_queued(&mn->pace_timer) ||
			      ktime_before(at, hrtimer_get_expires(&mn->pace_timer))))
		hrtimer_start_range_ns(&mn->pace_timer, at, 2 * NSEC_PER_USEC,
				       HRTIMER_MODE_ABS_SOFT);
	spin_unlock_irqrestore(&mn->pace_lock, flags);
}

/*
 * me_core_acks() at @at_ns, unless the ack timer is due sooner; @at_ns 0:
 * no ack is held any more.  Checked under the lock that orders the
 * requests, so a hold that raced with the release keeps its timer.
 */
static void plat_ack_kick(void *ctx, u64 at_ns)
{
	struct me_net *mn = ctx;
	struct me_node *core = READ_ONCE(mn->core);
	ktime_t at = ns_to_ktime(at_ns);
	unsigned long flags;

	spin_lock_irqsave(&mn->pace_lock, flags);
	if (mn->pace_off || !core) {
		/* Not started, or stopping: the engine's stop cancels it. */
	} else if (at_ns) {
		if (!hrtimer_is_queued(&mn->ack_timer) ||
		    ktime_before(at, hrtimer_get_expires(&mn->ack_timer)))
			hrtimer_start_range_ns(&mn->ack_timer, at, 10 * NSEC_PER_USEC,
					       HRTIMER_MODE_ABS_SOFT);
	} else if (!me_core_acks_pending(core)) {
		/* If it is running, it finds nothing pending and stops. */
		hrtimer_try_to_cancel(&mn->ack_timer);
	}
	spin_unlock_irqrestore(&mn->pace_lock, flags);
}

/*
 * me_core_pace() from an unbound worker, which the scheduler runs on a
 * CPU other than a busy one: the receive thread that handed the work off
 * fills its own (rx.c, rx_running).
 */
static void plat_pump_kick(void *ctx)
{
	struct me_net *mn = ctx;
	unsigned long flags;

	spin_lock_irqsave(&mn->pace_lock, flags);
	if (!mn->pace_off)
		queue_work(system_unbound_wq, &mn->pump_work);
	spin_unlock_irqrestore(&mn->pace_lock, flags);
}

static const struct me_plat_ops me_plat = {
	.now_ns = plat_now_ns,
	.tx = plat_tx,
	.tx_burst = plat_tx_burst,
	.mr_check = plat_mr_check,
	.mr_write = plat_mr_write,
	.mr_local = plat_mr_local,
	.mr_read = plat_mr_read,
	.complete = plat_complete,
	.alloc = plat_alloc,
	.free = plat_free,
	.zc_tx = plat_zc_tx,
	.zc_hold = plat_zc_hold,
	.zc_put = plat_zc_put,
	.rx_fill = plat_rx_fill,
	.mr_done = plat_mr_done,
	.random_u32 = plat_random_u32,
	.port_open = plat_port_open,
	.retire = plat_retire,
	.mr_atomic = plat_mr_atomic,
	.timer_kick = plat_timer_kick,
	.pace_kick = plat_pace_kick,
	.pump_kick = plat_pump_kick,
	.resp_hold = plat_resp_hold,
	.resp_tx = plat_resp_tx,
	.resp_put = plat_resp_put,
	.ack_kick = plat_ack_kick,
	.mr_place = plat_mr_place,
	.msg_end = plat_msg_end,
};

/* ---- lifecycle ---- */

/*
 * Sleeps @ns; when @idle, a kick (plat_timer_kick) ends it a tick after
 * the kick instead.  The timer is armed before the idle flag is read,
 * and a kick clears the flag before it looks at the timer (both with
 * full barriers between): either the kick finds the long sleep armed
 * and shortens it, or this finds the flag cleared and sleeps a tick.
 */
static void timer_sleep(struct me_net *mn, u64 ns, bool idle)
{
	u64 tick = (u64)tick_us * NSEC_PER_USEC;

	set_current_state(TASK_INTERRUPTIBLE);
	/* Late by a tick at most: the wake may be a retransmission timeout. */
	hrtimer_start_range_ns(&mn->timer_wake, ns_to_ktime(ns), min(ns / 4, tick),
			       HRTIMER_MODE_REL);
	smp_mb();
	if (idle && !me_core_timer_idle(mn->core))
		hrtimer_start_range_ns(&mn->timer_wake, ns_to_ktime(tick), tick / 4,
				       HRTIMER_MODE_REL);
	if (!kthread_should_stop())
		schedule();
	__set_current_state(TASK_RUNNING);
}

/*
 * Every tick_us while the next tick has work (an ack owed, an op not
 * sent); else until the core's next deadline (a retransmission timeout,
 * a path's keepalive, at most the idle period), so an idle node wakes
 * some 60 times a second and one whose packets are acked before they
 * time out a few hundred, not thousands.  A kick ends the long sleep,
 * and the next pass comes a tick later, as if the timer had ticked all
 * along.  Held acks have their own timer (plat_ack_kick).
 */
static int timer_thread(void *arg)
{
	struct me_net *mn = arg;
	u64 tick = (u64)tick_us * NSEC_PER_USEC;

	while (!kthread_should_stop()) {
		u64 next = me_core_timer(mn->core);

		if (me_shared_timer(mn))
			next = tick;
		timer_sleep(mn, next, next > tick);
	}
	return 0;
}

/*
 * The name HELLO carries: the host name of the task attaching the first
 * link, if it lives in the node's network namespace, so a container's node
 * names itself by its own UTS namespace and never by the host's; else
 * (the file was opened in another namespace) none.  The task's nsproxy is
 * its own to change; a sethostname() racing with this read can only mix
 * two names, each NUL-terminated within the array.
 */
static void node_name(struct me_net *mn, char *name, size_t size)
{
	struct nsproxy *nsp = current->nsproxy;

	name[0] = '\0';
	if (nsp && nsp->net_ns == mn->net)
		strscpy(name, nsp->uts_ns->name.nodename, size);
}

/*
 * Timeouts scaled for hosts where a thread may wait milliseconds for a CPU
 * (an emulated guest): the engine's defaults suit a dedicated core.
 */
static void fill_cfg(struct me_net *mn, struct me_node_cfg *cfg, unsigned int packet_size)
{
	me_node_cfg_default(cfg);
	cfg->node_id = mn->node_id;
	cfg->incarnation = mn->incarnation;
	cfg->mtu = packet_size;
	/* Each connection holds two rings of this many packets. */
	cfg->window = clamp_t(u32, rounddown_pow_of_two(window_kb * 1024 / packet_size), 8, 4096);
	cfg->credit = cfg->window;
	cfg->ops = 256;
	cfg->max_conns = max_conns;
	cfg->ack_every = 16;
	cfg->ack_hold_ns = (u64)ack_hold_us * NSEC_PER_USEC;
	cfg->link_window = max(link_window_kb * 1024, packet_size);
	cfg->max_retries = 12;
	/* Packets sent from different CPUs can pass each other on the way. */
	cfg->dupthresh = 16;
	cfg->reorder_ns = 2 * NSEC_PER_MSEC;
	cfg->tick_ns = (u64)tick_us * NSEC_PER_USEC;
	cfg->rto_init_ns = 20 * NSEC_PER_MSEC;
	cfg->rto_min_ns = 5 * NSEC_PER_MSEC;
	cfg->rto_max_ns = 1000 * NSEC_PER_MSEC;
	cfg->connect_rto_ns = 100 * NSEC_PER_MSEC;
	cfg->hello_ns = 100 * NSEC_PER_MSEC;
	cfg->ka_ns = (u64)ka_ms * NSEC_PER_MSEC;
	cfg->link_dead_ns = (u64)link_dead_ms * NSEC_PER_MSEC;
	cfg->max_peers = max_peers;
	cfg->peer_dead_ns = 3000 * NSEC_PER_MSEC;
	/* A peer's CLOSE retries (RTO from 20 ms, doubling) span ~3 s. */
	cfg->linger_ns = cfg->peer_dead_ns;
	cfg->answer_ns = (u64)answer_ms * NSEC_PER_MSEC;
	cfg->rate_ns = 10 * NSEC_PER_MSEC;
	cfg->cc = cc;
	cfg->cc_init = cc_init_pkts * packet_size;
	cfg->cc_target_ns = (u64)cc_target_us * NSEC_PER_USEC;
	cfg->pace_pct = pace_pct;
	cfg->pace_burst = pace_burst_kb * 1024;
	cfg->zc_min = tx_zc_min;
	node_name(mn, cfg->name, sizeof(cfg->name));
}

int me_engine_start(struct me_net *mn, unsigned int packet_size)
{
	struct me_node_cfg cfg;
	struct task_struct *t;
	struct me_node *core;
	unsigned int i;

	ASSERT_RTNL();
	if (mn->core)
		return 0;
	mn->owners = kvcalloc(max_conns, sizeof(*mn->owners), GFP_KERNEL);
	mn->conn_copies = kvcalloc(max_conns, sizeof(*mn->conn_copies), GFP_KERNEL);
	if (!mn->owners || !mn->conn_copies || me_ops_net_start(mn, max_conns))
		goto err_mem;
	for (i = 0; i < max_conns; i++)
		atomic64_set(&mn->conn_copies[i], 0);
	fill_cfg(mn, &cfg, packet_size);
	core = me_node_create(&cfg, &me_plat, mn);
	if (!core)
		goto err_mem;
	t = kthread_create(timer_thread, mn, "me-timer/%08x", mn->node_id);
	if (IS_ERR(t)) {
		me_node_destroy(core);
		me_ops_net_stop(mn);
		kvfree(mn->owners);
		kvfree(mn->conn_copies);
		mn->owners = NULL;
		mn->conn_copies = NULL;
		return PTR_ERR(t);
	}
	mn->packet_size = packet_size;
	/* Until the core is gone: plat_timer_kick() may wake it. */
	get_task_struct(t);
	mn->timer = t;
	spin_lock_irq(&mn->pace_lock);
	mn->pace_off = false;
	spin_unlock_irq(&mn->pace_lock);
	/* ioctls find the engine without RTNL: publish it complete. */
	smp_store_release(&mn->core, core);
	mutex_lock(&me_engines_lock);
	list_add(&mn->node, &me_engines);
	mutex_unlock(&me_engines_lock);
	wake_up_process(t);
	pr_debug("node %08x: engine started, packets of %u bytes\n", mn->node_id, packet_size);
	return 0;

err_mem:
	me_ops_net_stop(mn);
	kvfree(mn->owners);
	kvfree(mn->conn_copies);
	mn->owners = NULL;
	mn->conn_copies = NULL;
	return -ENOMEM;
}

void me_engine_stop(struct me_net *mn)
{
	struct me_node *core = mn->core;

	if (!core) {
		me_recvq_drop(mn);
		return;
	}
	kthread_stop(mn->timer);
	/* Pumps start the pacing timer no more; it may be pending or running. */
	spin_lock_irq(&mn->pace_lock);
	mn->pace_off = true;
	spin_unlock_irq(&mn->pace_lock);
	hrtimer_cancel(&mn->pace_timer);
	hrtimer_cancel(&mn->ack_timer);
	cancel_work_sync(&mn->pump_work);
	/* Nothing retires any more: free what waits for its grace period. */
	flush_work(&mn->retire_work);
	mutex_lock(&me_engines_lock);
	list_del(&mn->node);
	mutex_unlock(&me_engines_lock);
	me_node_destroy(core);
	/* No kick arms it any more; the thread's own sleep may have. */
	hrtimer_cancel(&mn->timer_wake);
	put_task_struct(mn->timer);
	mn->timer = NULL;
	WRITE_ONCE(mn->core, NULL);
	/*
	 * Only now: until the timer stopped it could retire a connection,
	 * which frees that connection's messages from this queue (under its
	 * lock, which the drop does not take: a double free before).
	 */
	me_recvq_drop(mn);
	me_ops_net_stop(mn);
	kvfree(mn->owners);
	kvfree(mn->conn_copies);
	mn->owners = NULL;
	mn->conn_copies = NULL;
}

int me_engine_link_add(struct me_net *mn, unsigned int idx, unsigned int mtu,
		       unsigned int speed_mbps)
{
	ASSERT_RTNL();
	return me_link_add(mn->core, idx, mtu, speed_mbps);
}

void me_engine_link_del(struct me_net *mn, unsigned int idx)
{
	ASSERT_RTNL();
	me_link_del(mn->core, idx);
}

void me_engine_link_admin(struct me_net *mn, unsigned int idx, bool up)
{
	me_link_set_admin(mn->core, idx, up);
}

int me_engine_rx_begin(struct me_net *mn, struct me_rx_batch *b)
{
	me_core_rx_batch_begin(b);
	return srcu_read_lock(&mn->conn_srcu);
}

void me_engine_rx_end(struct me_net *mn, struct me_rx_batch *b, int srcu_idx)
{
	me_core_rx_batch_end(b);
	srcu_read_unlock(&mn->conn_srcu, srcu_idx);
}

void me_engine_rx(struct me_net *mn, struct me_rx_batch *b, unsigned int idx, u64 src,
		  const void *buf, u32 len)
{
	me_core_rx_batch(mn->core, b, idx, src, buf, len, NULL);
}

void me_engine_rx_frame(struct me_net *mn, struct me_rx_batch *b, unsigned int idx, u64 src,
			struct me_rx_frame *fr)
{
	me_core_rx_batch(mn->core, b, idx, src, fr->buf, fr->len, fr);
}

u64 me_engine_conns(void)
{
	struct me_net *mn;
	u64 n = 0;

	mutex_lock(&me_engines_lock);
	list_for_each_entry(mn, &me_engines, node)
		n += me_node_live_conns(mn->core);
	mutex_unlock(&me_engines_lock);
	return n;
}

void me_engine_check_unload(void)
{
	u64 conns = me_engine_conns(), ops = me_engine_ops_inflight();

	if (conns || ops)
		pr_err("leak at unload: %llu connections, %llu operations still accounted\n",
		       conns, ops);
}
