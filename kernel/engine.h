/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_ENGINE_H
#define ME_ENGINE_H

#include <linux/types.h>

struct me_net;
struct me_rx_batch;
struct me_rx_frame;
struct me_file;
struct me_conn;

/* Region id a send (ME_OP_SEND) targets: the node's receive queue. */
#define ME_REGION_MSG	0xffffffffu
/*
 * Smallest packet size: a send of up to ME_SEND_MAX_VER0 bytes fits one
 * packet (and so may share one with other small ones: PACK).
 */
#define ME_MIN_PACKET	1280
/* Packets above this are not worth their per-connection buffers. */
#define ME_MAX_PACKET	9000

int me_engine_init(void);		/* module parameters */
/* Payload bytes per packet from which writes go by reference (0: never). */
unsigned int me_engine_zc_min(void);
int me_engine_net_init(struct me_net *mn);
void me_engine_net_uninit(struct me_net *mn);
/* Starts the namespace's engine for packets of @packet_size; under RTNL. */
int me_engine_start(struct me_net *mn, unsigned int packet_size);
/* Stops it (namespace exit): no link attached, no file open any more. */
void me_engine_stop(struct me_net *mn);
/* Link slot events, under RTNL. */
int me_engine_link_add(struct me_net *mn, unsigned int idx, unsigned int mtu,
		       unsigned int speed_mbps);
void me_engine_link_del(struct me_net *mn, unsigned int idx);
void me_engine_link_admin(struct me_net *mn, unsigned int idx, bool up);
/*
 * A receive thread hands the frames of one wakeup over as a batch (@b,
 * core/me_core.h): begin, then each frame, then end.  From begin to end
 * no connection is freed (conn_srcu); the acks the frames asked for leave
 * at the end, one per connection.
 */
int me_engine_rx_begin(struct me_net *mn, struct me_rx_batch *b);
void me_engine_rx_end(struct me_net *mn, struct me_rx_batch *b, int srcu_idx);
/*
 * A received packet (after the Ethernet header) from source MAC @src (as
 * a u64, 0 if none).
 */
void me_engine_rx(struct me_net *mn, struct me_rx_batch *b, unsigned int idx, u64 src,
		  const void *buf, u32 len);
/* A frame with payload left in its pages (rxframe.h): placement reads or flips them. */
void me_engine_rx_frame(struct me_net *mn, struct me_rx_batch *b, unsigned int idx, u64 src,
			struct me_rx_frame *fr);

/* The file's connection @id, or NULL if it is not the file's. */
struct me_conn *me_engine_conn_of(struct me_file *f, u32 id);
/* The same, or a shared connection (any file may post on one). */
struct me_conn *me_engine_conn_to_post(struct me_file *f, u32 id);
/* File release: closes its connections and forgets them. */
void me_engine_release_file(struct me_file *f);

/* ioctls */
long me_engine_ioc_connect(struct me_file *f, void __user *uarg);
long me_engine_ioc_disconnect(struct me_file *f, void __user *uarg);
long me_engine_ioc_post(struct me_file *f, void __user *uarg);
long me_engine_ioc_conn_list(struct me_file *f, void __user *uarg);

/* Module-wide accounting (ME_IOC_QUERY, unload check). */
u64 me_engine_conns(void);
u64 me_engine_ops_inflight(void);
void me_engine_check_unload(void);

#endif /* ME_ENGINE_H */
