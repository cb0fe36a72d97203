// SPDX-License-Identifier: GPL-2.0
/*
 * io_uring's door to the post command: IORING_OP_URING_CMD with cmd_op
 * ME_IOC_POST carries the same struct me_post as the ioctl (inline in a
 * 128-byte SQE, or by address in a 64-byte one; uapi/multiedge.h) and
 * posts through the same code (me_ops_post); the operation's completion
 * becomes the command's CQE.
 *
 * Completion context: the engine completes operations from receive
 * threads, the timer thread or a poster, with engine locks possibly held;
 * io_uring_cmd_done() must not run there, so the result is parked in the
 * command's pdu and io_uring_cmd_complete_in_task() posts the CQE from the
 * submitter's task work (or io_uring's fallback work once it has exited).
 *
 * A full connection queue: the command is parked, never handed back to
 * io_uring with -EAGAIN.  io_uring would issue it again from a worker,
 * and some kernels (6.10 to 6.13.3) then let the command read an SQE slot
 * the application has meanwhile filled with another one.  The struct
 * me_post is read once, at the first issue, and a parked command keeps
 * its copy: a work item on our own workqueue posts it, waiting for room.
 *
 * Lifetime: an in-flight command holds a reference on the file (io_uring's
 * own), so me_release() cannot run until every one has completed, and the
 * engine completes every operation it accepted.  6.1 cannot cancel a
 * uring_cmd; none of ours needs cancelling, as none waits for an event
 * that might never come (a parked one waits for room, which the engine's
 * completions or the connection's end make).
 */
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>

#include "chardev.h"
#include "compat.h"
#include "ops.h"
#include "uring.h"
#include "uapi/multiedge.h"

/* What the task work needs, parked in io_uring_cmd.pdu. */
struct me_uring_pdu {
	s32 status;
	u32 len;
};

static struct me_uring_pdu *pdu_of(struct io_uring_cmd *ucmd)
{
	BUILD_BUG_ON(sizeof(struct me_uring_pdu) > sizeof(ucmd->pdu));
	return (struct me_uring_pdu *)ucmd->pdu;
}

static void complete_task_work(struct io_uring_cmd *ucmd, unsigned int issue_flags)
{
	struct me_uring_pdu *pdu = pdu_of(ucmd);

	io_uring_cmd_done(ucmd, pdu->status, pdu->len, issue_flags);
}

void me_uring_complete(struct io_uring_cmd *ucmd, int status, u32 len)
{
	struct me_uring_pdu *pdu = pdu_of(ucmd);

	pdu->status = status;
	pdu->len = len;
	io_uring_cmd_complete_in_task(ucmd, complete_task_work);
}

u32 me_uring_features(void)
{
	return IS_ENABLED(CONFIG_IO_URING) ? ME_FEATURE_URING_CMD : 0;
}

/*
 * The struct me_post of a 128-byte SQE: the same rules as for an ioctl
 * argument (uapi/multiedge.h), applied to the 80 bytes io_uring copied.
 */
static int post_from_sqe128(const void *cmd, struct me_post *req)
{
	u32 usize;

	memcpy(&usize, cmd, sizeof(usize));
	if (usize < ME_POST_SIZE_VER0)
		return -EINVAL;
	if (usize > ME_URING_CMD_SIZE_SQE128)
		return -E2BIG;
	memset(req, 0, sizeof(*req));
	memcpy(req, cmd, min_t(size_t, usize, sizeof(*req)));
	if (usize > sizeof(*req) &&
	    memchr_inv((const u8 *)cmd + sizeof(*req), 0, usize - sizeof(*req)))
		return -E2BIG;
	return 0;
}

/* The struct me_post a 64-byte SQE points at, in the submitter's memory. */
static int post_from_ptr(const void *cmd, struct me_post *req)
{
	struct me_uring_ptr ptr;
	long ret;

	memcpy(&ptr, cmd, sizeof(ptr));
	if (ptr.__reserved)
		return -EINVAL;
	ret = me_copy_arg_in(req, sizeof(*req), ME_POST_SIZE_VER0, u64_to_user_ptr(ptr.arg));
	return ret < 0 ? ret : 0;
}

/* A command whose connection queue was full, with its parsed post. */
struct me_uring_park {
	struct work_struct work;
	struct io_uring_cmd *ucmd;
	struct me_file *f;	/* kept by io_uring's reference on the file */
	struct me_post req;
};

static struct workqueue_struct *park_wq;

static void park_post(struct work_struct *work)
{
	struct me_uring_park *pk = container_of(work, struct me_uring_park, work);
	int ret;

	ret = me_ops_post(pk->f, &pk->req, pk->ucmd, true);
	if (ret)
		me_uring_complete(pk->ucmd, ret == -ERESTARTSYS ? -EINTR : ret, 0);
	kfree(pk);
}

int me_uring_init(void)
{
	/* Unbound: a parked post may wait long for room; many may wait. */
	park_wq = alloc_workqueue("multiedge_uring", WQ_UNBOUND, 0);
	return park_wq ? 0 : -ENOMEM;
}

void me_uring_exit(void)
{
	destroy_workqueue(park_wq);
}

int me_uring_cmd(struct io_uring_cmd *ucmd, unsigned int issue_flags)
{
	struct me_file *f = ucmd->file->private_data;
	bool nonblock_issue = issue_flags & IO_URING_F_NONBLOCK;
	struct me_post req;
	int ret;

	BUILD_BUG_ON(sizeof(struct me_uring_ptr) != ME_URING_CMD_SIZE);
	BUILD_BUG_ON(sizeof(struct me_post) > ME_URING_CMD_SIZE_SQE128);

	if (ucmd->cmd_op != ME_IOC_POST)
		return -ENOTTY;
	if (issue_flags & IO_URING_F_IOPOLL)
		return -EOPNOTSUPP;	/* nothing to poll: completions come from the network */
	if (issue_flags & IO_URING_F_SQE128)
		ret = post_from_sqe128(me_uring_cmd_bytes(ucmd), &req);
	else
		ret = post_from_ptr(me_uring_cmd_bytes(ucmd), &req);
	if (ret)
		return ret;

	/*
	 * The first issue runs in the submitter's io_uring_enter() and must
	 * not block: a full queue there parks the command (above).  An
	 * io_uring worker (IOSQE_ASYNC) may wait in me_ops_post().
	 */
	ret = me_ops_post(f, &req, ucmd,
			  !nonblock_issue && !(req.flags & ME_POST_F_NONBLOCK));
	/* A worker cancelled while it waited: no restart through io_uring. */
	if (ret == -ERESTARTSYS)
		ret = -EINTR;
	if (ret == -EAGAIN && (req.flags & ME_POST_F_NONBLOCK)) {
		/* The caller asked for -EAGAIN, not a worker: a CQE says so. */
		me_uring_complete(ucmd, -EAGAIN, 0);
		return -EIOCBQUEUED;
	}
	if (ret == -EAGAIN) {
		struct me_uring_park *pk = kmalloc(sizeof(*pk), GFP_KERNEL_ACCOUNT);

		if (!pk)
			return -ENOMEM;
		INIT_WORK(&pk->work, park_post);
		pk->ucmd = ucmd;
		pk->f = f;
		pk->req = req;
		/* Posted out of its batch's order: nothing may follow it. */
		pk->req.flags &= ~ME_POST_F_MORE;
		queue_work(park_wq, &pk->work);
		return -EIOCBQUEUED;
	}
	return ret ? ret : -EIOCBQUEUED;
}
