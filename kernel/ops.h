/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_OPS_H
#define ME_OPS_H

#include <linux/types.h>

struct me_net;
struct me_cqe;

int me_ops_init(void);
void me_ops_uninit(void);
/* The engine's completions and events (any context but hard IRQ). */
void me_ops_complete(struct me_net *mn, const struct me_cqe *cqe);
/* A send landed: queue it for ME_IOC_RECV; -ENOBUFS when full. */
int me_ops_msg_arrived(struct me_net *mn, u32 conn, const void *data, u32 len);
void me_ops_drop_msgs(struct me_net *mn);

#endif /* ME_OPS_H */
