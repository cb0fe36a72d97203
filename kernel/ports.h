/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_PORTS_H
#define ME_PORTS_H

#include <linux/types.h>

struct me_file;
struct me_net;

void me_ports_net_init(struct me_net *mn);
long me_ports_ioc_bind(struct me_file *f, void __user *uarg);
/* The file is closing: its port takes no new connection from now on. */
void me_ports_release(struct me_file *f);
/* Whether a file is bound to @port now (unlocked: a hint for CONNECT). */
bool me_ports_open(struct me_net *mn, u32 port);
/* The file bound to @port, or NULL; with mn->owner_lock held. */
struct me_file *me_ports_file_locked(struct me_net *mn, u32 port);

#endif /* ME_PORTS_H */
