/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_URING_H
#define ME_URING_H

#include <linux/types.h>

struct io_uring_cmd;

/* file_operations.uring_cmd of /dev/multiedge (uapi: ME_FEATURE_URING_CMD). */
int me_uring_cmd(struct io_uring_cmd *ucmd, unsigned int issue_flags);

/*
 * Completes @ucmd with @status (0 or -errno) and @len bytes moved.  Any
 * context but hard IRQ: the CQE is posted from the submitter's task work.
 */
void me_uring_complete(struct io_uring_cmd *ucmd, int status, u32 len);

/* The workqueue of parked commands (full connection queues). */
int me_uring_init(void);
void me_uring_exit(void);

/* ME_FEATURE_URING_CMD when the kernel has io_uring, else 0. */
u32 me_uring_features(void);

#endif /* ME_URING_H */
