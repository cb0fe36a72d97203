/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR MIT) */
/*
 * multiedge: the ABI between multiedge.ko and user space.
 *
 * The device is /dev/multiedge.  Every command takes a pointer to a struct
 * that starts with "__u32 size": the caller sets it to sizeof() the struct
 * as it knows it.  The kernel accepts a smaller (older) struct, and a larger
 * (newer) one only if every byte it does not know is zero (else -E2BIG).
 * Output is written back up to min(size, kernel's size); "size" itself is
 * left as the caller set it, so a struct can be reused.  Every "__reserved"
 * field must be zero (else -EINVAL); unknown flag bits are rejected with
 * -EOPNOTSUPP.  A changed meaning gets a new command number, never a new
 * reading of an old one.
 *
 * Errors common to every command:
 *   -EFAULT   the argument pointer is not readable/writable
 *   -EINVAL   size smaller than the first version of the struct, or a
 *             reserved field is not zero
 *   -E2BIG    size larger than the kernel knows and the extra bytes not zero,
 *             or larger than a page
 *   -ENOTTY   unknown command
 *
 * State is per network namespace: a command acts in the namespace of the
 * process that opened the device.
 *
 * Blocking commands are interrupted only by signals: a signal whose
 * handler has SA_RESTART restarts them (with their timeout counted anew),
 * any other fails them with -EINTR, except where noted.  The completions
 * of the caller's own io_uring (task work) do not interrupt them.
 */
#ifndef _UAPI_LINUX_MULTIEDGE_H
#define _UAPI_LINUX_MULTIEDGE_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define ME_DEVICE_PATH		"/dev/multiedge"

/*
 * Bumped when a command is added or a completion status changes meaning;
 * old commands keep working.  7: an operation the connection never sent
 * completes with -ECANCELED; a remote access to no such region completes
 * with -EACCES, as one with a wrong key (it was -ENOENT); list and poll
 * strides (info_size, entry_size) above a page are -E2BIG (each entry's
 * tail is cleared: a stride of gigabytes cleared that much user memory).
 * 8: region keys are 64 bits (me_mr_reg.key_hi, me_post.remote_key_hi);
 * connection slots are reused: a disconnected connection's id is -ENOENT
 * once its CONN_CLOSED/CONN_DEAD completion is queued; ME_IOC_CONN_LIST
 * lists the connections in the table, packed; a connection the peer gives
 * up (ABORT) dies with -ECONNRESET at once; ME_IOC_RECV serves a queue
 * per open file (a message goes to the file that holds its connection).
 * 9: a link reaches any number of peers (the neighbour model):
 * ME_IOC_NBR_LIST lists every (link, peer) neighbour; ME_IOC_PEER_LIST
 * lists every peer (not at most 16) with its name; me_link_info counts a
 * link's neighbours, and peer_node is the neighbour only when it has
 * exactly one.
 * 10: poll(2) of the file reports EPOLLRDBAND while a message waits that
 * ME_IOC_RECV would take (ME_FEATURE_RECV_POLL); EPOLLIN still means
 * completions only.
 * 11: ports (ME_FEATURE_PORTS): a file binds a port of its node
 * (ME_IOC_BIND) and takes the connections opened to that port;
 * ME_IOC_CONNECT names the peer's port (me_connect.port, was reserved)
 * and fails with -ECONNREFUSED when nobody there is bound to it.
 * 12: ME_STAT_RTX_SPURIOUS (retransmissions the peer got twice);
 * me_nbr_info (VER2) adds the delay congestion control follows and its
 * base.
 * 13: me_nbr_info (VER3) adds the delay the path's window aims at and the
 * path's noise it was raised by.
 * 14: me_link_info (VER4) adds rx_direct, the frames handled in the NIC's
 * softirq instead of a receive thread.
 * 15: ME_POST_F_MORE (queue without sending: more posts follow);
 * ME_STAT_TX_PACKS and ME_STAT_TX_PACKED (small writes sent several to a
 * frame, wire 8).
 * 16: ME_STAT_ACK_HELD, ME_STAT_TX_ACK_CARRIED and ME_STAT_ACK_HOLD_EXPIRED
 * (a request's ack carried by its reply, wire 9).
 * 17: ME_STAT_CC_LOSS_QUEUE and ME_STAT_CC_LOSS_RANDOM (packets found lost
 * that congestion control took for a queue's or a lossy link's).
 * 18: shared connections (ME_FEATURE_SHARED): ME_CONNECT_F_SHARED gives
 * the one connection between this node and the peer that every file of
 * both may use; a send on it names its destination port
 * (me_post.port, the struct grows to 72 bytes) and ME_IOC_RECV says the
 * sending file's port (me_recv.port, 40 bytes); ME_CONN_I_SHARED.
 * 19: remote atomic operations (ME_FEATURE_ATOMIC): ME_OP_ATOMIC,
 * ME_ATOMIC_*, ME_CQ_ATOMIC.
 * 20: loopback (ME_FEATURE_LOOPBACK): writes, notifies, reads and atomics
 * posted on ME_CONN_LOOPBACK reach the regions of the poster's own node.
 * 21: ME_STAT_SHARED_LOST (shared connections ended because the peer
 * opened a new one: it had lost its side, wire 13).
 * 22: me_query.staged_pages (was __reserved3): write payload copied at
 * post for links that copy frames sent by reference anyway (veth).
 * 23: me_link_info (VER5) adds tx_trains and rx_trains: skbs that carried
 * several frames through the stack as one (trains, over a veth or
 * bridge); me_query (VER5) trains_segmented.
 * 24: ME_STAT_TIMER_LATE (timer passes that came late after a stall of
 * the host and judged no timeout).
 * 25: ME_STAT_CC_QUEUE_DELAY ... ME_STAT_CC_CALM: which rule of congestion
 * control took a loss for a queue's, and what cut or restored a window.
 * 26: sends of up to ME_SEND_MAX (64 KiB; ME_FEATURE_SEND_LARGE), was
 * ME_SEND_MAX_VER0 (1024 bytes): a send of several packets reaches the
 * peer's receive queue whole.  ME_SEND_MAX is the new size: code built
 * against it that must run on an older module checks the feature.
 * 27: ME_POST_F_ACK_NOW (ME_FEATURE_ACK_NOW): the poster waits for the
 * completion, so the target does not hold the ack for a reply;
 * ME_STAT_ACK_NOW counts the requests so flagged that came in.
 * 28: me_query (VER6) heads_reused and heads_fresh: the pages frame heads
 * are carved from, carved again or taken from the allocator.
 * 29: ME_STAT_CC_IDLE: windows cut when a path sends again after a pause.
 */
#define ME_ABI_VERSION		29

/* Default ethertype: IEEE 802.1 Local Experimental 1. */
#define ME_DEFAULT_ETHERTYPE	0x88B5

#define ME_IOC_MAGIC		0xB5

/*
 * ME_IOC_QUERY: what the loaded module is and what it has seen.
 *
 * in:  size
 * out: everything else
 *
 * rx_frames counts frames of the module's ethertype handed to the module in
 * every network namespace; rx_dropped counts those it dropped (malformed, or
 * arriving on a device that is not an attached link).  pinned_pages and
 * regions are the module's own accounting of registered memory, all
 * namespaces (ABI 3; a caller passing the 32-byte struct does not get them).
 *
 * ABI 4 adds the opener's node (node_id, incarnation: random, nonzero,
 * chosen when the namespace is first seen; packet_size: the largest packet
 * after the Ethernet header, fixed by the first link attached, 0 before)
 * and the module-wide accounting of what the data path holds: skbs queued
 * to receive threads, connections alive in the engines, operations posted
 * and not yet completed.  All three are zero once every namespace is idle.
 * ABI 5 adds zc_skbs: frames whose payload was sent straight from pinned
 * pages (zero-copy transmit), tracked, and that the network stack still
 * holds; an operation completes only after every such frame of it is
 * released (over veth frames go untracked unless tx_veth_track is set,
 * and are not counted).  ABI 22 adds staged_pages: payload of writes
 * posted while every link is a veth, copied at post (tx_stage_kb, for
 * page flips into receive areas); zero once those writes completed.
 */
struct me_query {
	__u32 size;
	__u32 abi_version;	/* ME_ABI_VERSION of the module */
	__u32 features;		/* ME_FEATURE_* bits */
	__u16 ethertype;	/* host byte order */
	__u16 __reserved;	/* out: zero */
	__aligned_u64 rx_frames;
	__aligned_u64 rx_dropped;
	__aligned_u64 pinned_pages;	/* user pages pinned by registrations */
	__aligned_u64 regions;		/* registered memory regions */
	/* ABI 4 */
	__u32 node_id;
	__u32 incarnation;
	__u32 packet_size;
	__u32 __reserved2;		/* out: zero */
	__aligned_u64 rx_queued;	/* skbs queued to receive threads */
	__aligned_u64 conns;		/* engine connections, all namespaces */
	__aligned_u64 ops_inflight;	/* operations posted, not completed */
	/* ABI 5 */
	__aligned_u64 zc_skbs;		/* tracked frames sent by reference,
					 * not yet released by the stack */
	/* ABI 22 (zero before) */
	__aligned_u64 staged_pages;	/* pages of write payload copied at
					 * post and not yet freed, all
					 * namespaces */
	/* ABI 6 */
	__aligned_u64 area_pages;	/* pages backing receive areas */
	__aligned_u64 pool_pages;	/* free pages kept for frames */
	__aligned_u64 rx_flipped;	/* payload pages placed by page flip */
	__aligned_u64 rx_flip_copied;	/* whole aligned area pages copied
					 * (the frame had no page to give,
					 * or the owner's mmap_lock was busy) */
	__aligned_u64 tlb_flushes;	/* page table invalidations by flips */
	/* ABI 23 */
	__aligned_u64 trains_segmented;	/* trains (me_link_info.tx_trains)
					 * the stack cut back into frames on
					 * the way: a device or shaper that
					 * takes frames only */
	/* ABI 28 */
	__aligned_u64 heads_reused;	/* pages of frame heads carved
					 * again once their frames were gone */
	__aligned_u64 heads_fresh;	/* pages of frame heads taken from
					 * the page allocator */
};

/* ABI 5: posts through io_uring (IORING_OP_URING_CMD, see the end). */
#define ME_FEATURE_URING_CMD	(1U << 0)
/* ABI 6: receive areas (mmap) with page flipping, see struct me_mr_reg. */
#define ME_FEATURE_RX_AREA	(1U << 1)
/* ABI 10: poll(2) reports EPOLLRDBAND while a message waits (ME_IOC_RECV). */
#define ME_FEATURE_RECV_POLL	(1U << 2)
/* ABI 11: ME_IOC_BIND, me_connect.port. */
#define ME_FEATURE_PORTS	(1U << 3)
/* ABI 15: ME_POST_F_MORE. */
#define ME_FEATURE_POST_MORE	(1U << 4)
/* ABI 18: ME_CONNECT_F_SHARED, me_post.port, me_recv.port. */
#define ME_FEATURE_SHARED	(1U << 5)
/* ABI 19: ME_OP_ATOMIC. */
#define ME_FEATURE_ATOMIC	(1U << 6)
/* ABI 20: ME_CONN_LOOPBACK. */
#define ME_FEATURE_LOOPBACK	(1U << 7)
/* ABI 26: ME_OP_SEND of up to ME_SEND_MAX bytes (before: ME_SEND_MAX_VER0). */
#define ME_FEATURE_SEND_LARGE	(1U << 8)
/* ABI 27: ME_POST_F_ACK_NOW. */
#define ME_FEATURE_ACK_NOW	(1U << 9)

#define ME_QUERY_SIZE_VER0	32	/* first published size */
#define ME_QUERY_SIZE_VER1	48	/* + pinned_pages, regions */
#define ME_QUERY_SIZE_VER2	88	/* + node, data path accounting */
#define ME_QUERY_SIZE_VER3	104	/* + zc_skbs */
#define ME_QUERY_SIZE_VER4	144	/* + receive areas, flips */
#define ME_QUERY_SIZE_VER5	152	/* + trains_segmented */
#define ME_QUERY_SIZE_VER6	168	/* + heads_reused, heads_fresh */

#define ME_IOC_QUERY		_IO(ME_IOC_MAGIC, 0x40)

#define ME_IFNAMSIZ		16	/* = IFNAMSIZ */
#define ME_MAX_LINKS		16	/* links per namespace */

/*
 * ME_IOC_LINK_ATTACH, ME_IOC_LINK_DETACH: start or stop using an Ethernet
 * device of the opener's namespace as a multiedge link.  Needs CAP_NET_ADMIN
 * in that namespace.  A device that goes away (unregistered, or moved to
 * another namespace) is detached by the module; one that goes down stays
 * attached and is used again when it comes back up.
 *
 * in:  size, flags (must be 0), ifname (NUL-terminated)
 *
 * Errors:
 *   -EPERM       no CAP_NET_ADMIN
 *   -EOPNOTSUPP  unknown flag
 *   -EINVAL      ifname empty or not terminated; attach: not an Ethernet device
 *   -ENODEV      attach: no such device in the namespace
 *   -EEXIST      attach: already attached
 *   -ENOSPC      attach: ME_MAX_LINKS links already attached
 *   -EMSGSIZE    attach: the device's MTU is below 1280, or below the
 *                namespace's packet size (set by the first link attached,
 *                ME_IOC_QUERY packet_size)
 *   -ENOENT      detach: not attached
 */
struct me_link_req {
	__u32 size;
	__u32 flags;
	char ifname[ME_IFNAMSIZ];
};

#define ME_LINK_REQ_SIZE_VER0	24

#define ME_IOC_LINK_ATTACH	_IO(ME_IOC_MAGIC, 0x41)
#define ME_IOC_LINK_DETACH	_IO(ME_IOC_MAGIC, 0x42)

/* One attached link, as ME_IOC_LINK_LIST reports it. */
struct me_link_info {
	char ifname[ME_IFNAMSIZ];
	__u32 ifindex;
	__u32 mtu;
	__u32 flags;		/* ME_LINK_F_* */
	__u32 index;		/* ABI 4: the link's slot, 0..ME_MAX_LINKS-1 */
	__aligned_u64 rx_frames;	/* multiedge frames received on it */
	__aligned_u64 rx_bytes;
	/* ABI 4 */
	__u32 peer_node;	/* node learned by HELLO on it, 0 if none */
	__u32 rate_mbps;	/* current rate estimate */
	__aligned_u64 tx_frames;	/* frames sent on it */
	__aligned_u64 tx_bytes;
	__aligned_u64 rx_dropped;	/* receive ring full, or link detaching */
	__aligned_u64 tx_errors;	/* not sent: device down, no memory, queue full */
	__aligned_u64 rx_copied;	/* non-linear frames copied whole to process
					 * (data frames' fragments are read in place) */
	/* ABI 5 */
	__aligned_u64 tx_zc_frames;	/* frames whose payload went by reference */
	/* ABI 9 */
	__u32 nbrs;		/* peers known on it (ME_IOC_NBR_LIST) */
	__u32 nbrs_alive;	/* ... alive both ways */
	/* ABI 14 */
	__aligned_u64 rx_direct;	/* handled in the softirq, not a receive thread */
	/* ABI 23 */
	__aligned_u64 tx_trains;	/* skbs that carried several of tx_frames */
	__aligned_u64 rx_trains;	/* skbs that carried several of rx_frames */
};

#define ME_LINK_F_UP		(1U << 0)	/* device up with carrier */
#define ME_LINK_F_ALIVE		(1U << 1)	/* ABI 4: a peer answers on it */

#define ME_LINK_INFO_SIZE_VER0	48
#define ME_LINK_INFO_SIZE_VER1	96
#define ME_LINK_INFO_SIZE_VER2	104	/* + tx_zc_frames */
#define ME_LINK_INFO_SIZE_VER3	112	/* + nbrs, nbrs_alive */
#define ME_LINK_INFO_SIZE_VER4	120	/* + rx_direct */
#define ME_LINK_INFO_SIZE_VER5	136	/* + tx_trains, rx_trains */

/*
 * ME_IOC_LINK_LIST: the links attached in the opener's namespace, in the
 * order they were attached.
 *
 * in:  size; count = room in the array at links; links = user pointer to an
 *      array of entries, each info_size bytes apart (sizeof(struct
 *      me_link_info) as the caller knows it, at least
 *      ME_LINK_INFO_SIZE_VER0)
 * out: count = number of links attached (may exceed the room given: then
 *      only the first entries were written; call again with more room)
 *
 * Errors: -EINVAL info_size too small or __reserved not zero; -E2BIG
 * info_size above a page (ABI 7); -EFAULT the
 * array is not writable.
 */
struct me_link_list {
	__u32 size;
	__u32 count;
	__aligned_u64 links;
	__u32 info_size;
	__u32 __reserved;
};

#define ME_LINK_LIST_SIZE_VER0	24

#define ME_IOC_LINK_LIST	_IO(ME_IOC_MAGIC, 0x43)

/*
 * ME_IOC_MR_REG: register [addr, addr + length) of the caller's memory so
 * peers can reach it by (region, key, offset) with the access granted.  The
 * pages are pinned (long-term) until deregistration and charged to the
 * caller's RLIMIT_MEMLOCK (as VmPin) unless it has CAP_IPC_LOCK.  Any
 * alignment.  Region ids are unique per namespace; keys are random, 64
 * bits: key is the low half, key_hi (ABI 8) the high half.  A caller whose
 * struct ends before key_hi gets a key whose high half is 0 (it could not
 * name the rest), 32 bits of protection only.  Peers pass both halves in
 * me_post.  The region belongs to the open file: closing it (or exiting)
 * deregisters.
 *
 * in:  size, access (ME_ACCESS_*), addr, length; ABI 6: flags (ME_MR_*)
 * out: region, key; ABI 6: info (ME_MR_INFO_*); ABI 8: key_hi
 *
 * Errors:
 *   -EOPNOTSUPP  unknown access or flag bit
 *   -EINVAL      length 0 or above ME_MR_MAX_LENGTH, or addr + length wraps;
 *                both ME_MR_TLB_EAGER and ME_MR_TLB_LAZY; a range only
 *                partly inside a receive area, across a hole in one, or in
 *                one mapped through another open file
 *   -EFAULT      part of the range is not mapped, or not writable
 *   -ENOMEM      RLIMIT_MEMLOCK would be exceeded, or no memory
 *   -ENOSPC      ME_MR_MAX_PER_FILE regions already registered on this file
 */
struct me_mr_reg {
	__u32 size;
	__u32 access;
	__aligned_u64 addr;
	__aligned_u64 length;
	__u32 region;
	__u32 key;
	/* ABI 6 */
	__u32 flags;		/* in: ME_MR_* */
	__u32 info;		/* out: ME_MR_INFO_* */
	/* ABI 8 */
	__u32 key_hi;		/* out: the key's high 32 bits */
	__u32 __reserved;
};

/*
 * ABI 6 (ME_FEATURE_RX_AREA): a range inside memory mapped from
 * /dev/multiedge (mmap, MAP_SHARED, offset 0: a "receive area") registers
 * the area's own pages, nothing is pinned; whole pages of payload for it
 * are placed by page flip where the frame allows, the rest by copy.  The
 * flags choose per region; they mean nothing for other memory.
 *
 * mmap(2) of /dev/multiedge: len bytes (rounded up to pages, at most
 * ME_MR_MAX_LENGTH) of zeroed memory, charged to RLIMIT_MEMLOCK like a
 * registration.  -EINVAL for MAP_PRIVATE, a nonzero offset or a length
 * above the maximum; -ENOMEM over the limit.  Not inherited by fork();
 * mremap() cannot move or grow it.
 */
#define ME_MR_RX_COPY		(1U << 0)	/* never flip: always copy */
#define ME_MR_TLB_EAGER		(1U << 1)	/* invalidate per flipped page */
#define ME_MR_TLB_LAZY		(1U << 2)	/* invalidate once per message */
#define ME_MR_FLAGS_ALL		(ME_MR_RX_COPY | ME_MR_TLB_EAGER | ME_MR_TLB_LAZY)
#define ME_MR_INFO_AREA		(1U << 0)	/* the region is a receive area */

#define ME_ACCESS_REMOTE_READ	(1U << 0)	/* peers may read it */
#define ME_ACCESS_REMOTE_WRITE	(1U << 1)	/* peers may write it */
#define ME_ACCESS_ALL		(ME_ACCESS_REMOTE_READ | ME_ACCESS_REMOTE_WRITE)

#define ME_MR_MAX_LENGTH	(1ULL << 30)
#define ME_MR_MAX_PER_FILE	4096
#define ME_MR_REG_SIZE_VER0	32
#define ME_MR_REG_SIZE_VER1	40	/* + flags, info */
#define ME_MR_REG_SIZE_VER2	48	/* + key_hi: 64-bit keys */

#define ME_IOC_MR_REG		_IO(ME_IOC_MAGIC, 0x50)

/*
 * ME_IOC_MR_DEREG: deregister a region registered on this open file.  Waits
 * until no operation uses it any more, then unpins its pages.
 *
 * in:  size, region
 *
 * Errors: -ENOENT no such region on this file.
 */
struct me_mr_dereg {
	__u32 size;
	__u32 region;
};

#define ME_MR_DEREG_SIZE_VER0	8

#define ME_IOC_MR_DEREG		_IO(ME_IOC_MAGIC, 0x51)

/*
 * ME_IOC_PEER_LIST: the nodes discovered by HELLO on the opener's links,
 * in the order of the node's peer table.  The links on which a peer is
 * alive both ways form its channel.  A peer silent on every link for
 * peer_dead_ms (3 s) with no connection is forgotten.
 *
 * in/out as ME_IOC_LINK_LIST, with entries of struct me_peer_info.
 */
struct me_peer_info {
	__u32 node_id;
	__u32 incarnation;
	__u32 links;		/* bit i: a HELLO of it came on link slot i */
	__u32 alive_links;	/* bit i: ... and it is alive there both ways */
	__u32 flags;		/* ME_PEER_F_* */
	__u32 __reserved;	/* zero */
	/* ABI 9 */
	char name[32];		/* its HELLO's name, NUL-terminated */
	__u32 conns;		/* connections to it in the table */
	__u32 __reserved2;	/* zero */
};

#define ME_PEER_F_ALIVE		(1U << 0)	/* at least one alive link */
#define ME_PEER_INFO_SIZE_VER0	24
#define ME_PEER_INFO_SIZE_VER1	64	/* + name, conns */

struct me_peer_list {
	__u32 size;
	__u32 count;
	__aligned_u64 peers;
	__u32 info_size;
	__u32 __reserved;
};

#define ME_PEER_LIST_SIZE_VER0	24

#define ME_IOC_PEER_LIST	_IO(ME_IOC_MAGIC, 0x44)

/*
 * ME_IOC_NBR_LIST (ABI 9): every neighbour, a (link, peer) pair, in peer
 * table order and by link slot within a peer.  A neighbour exists once a
 * HELLO of the peer validated on the link; its MAC is the source of such
 * a HELLO, and the node's frames to that peer on that link go to it.
 *
 * in/out as ME_IOC_LINK_LIST, with entries of struct me_nbr_info.
 */
struct me_nbr_info {
	__u32 link;		/* link slot */
	__u32 node_id;
	__u32 incarnation;
	__u32 flags;		/* ME_NBR_F_* */
	__u8 mac[8];		/* 6 used: the peer's address on this link */
	__u32 rtt_us;		/* last keepalive round trip, 0: none yet */
	__u32 rate_mbps;	/* delivery rate estimate */
	__u32 inflight;		/* data bytes sent to it here, not acked */
	__u32 rx_age_ms;	/* since its last frame here (capped at 2^32-1) */
	__aligned_u64 tx_pkts;	/* data packets sent to it here */
	__aligned_u64 rx_pkts;	/* valid frames from it here */
	__aligned_u64 lost_pkts; /* packets sent here that went again */
	__aligned_u64 tx_bytes;	/* bytes of those data packets (with headers) */
	__aligned_u64 rx_bytes;	/* bytes of the valid frames from it here */
	/* Since size VER1 (older callers get the first VER0 bytes): */
	__u32 cwnd;		/* congestion window, bytes in flight allowed */
	__u32 data_rtt_us;	/* last round trip of data here, 0: none yet */
	/* Since size VER2 (ABI 12): */
	__u32 data_delay_us;	/* that round trip without the hosts' queues */
	__u32 base_us;		/* the least such delay lately (0: none) */
	/* Since size VER3 (ABI 13): */
	__u32 target_us;	/* the delay its window aims at (0: cc off) */
	__u32 noise_us;		/* mean excess of idle exchanges over base */
};

#define ME_NBR_F_ALIVE		(1U << 0)	/* both directions work */
#define ME_NBR_F_RX		(1U << 1)	/* we hear it (recently) */
#define ME_NBR_F_HEARD		(1U << 2)	/* it hears us (recently) */
#define ME_NBR_INFO_SIZE_VER0	80
#define ME_NBR_INFO_SIZE_VER1	88
#define ME_NBR_INFO_SIZE_VER2	96
#define ME_NBR_INFO_SIZE_VER3	104

struct me_nbr_list {
	__u32 size;
	__u32 count;
	__aligned_u64 nbrs;
	__u32 info_size;
	__u32 __reserved;
};

#define ME_NBR_LIST_SIZE_VER0	24

#define ME_IOC_NBR_LIST		_IO(ME_IOC_MAGIC, 0x47)

/*
 * ME_IOC_BIND (ABI 11, ME_FEATURE_PORTS): this open file becomes the
 * endpoint on a port of its node, so several programs (MPI ranks) on one
 * node each take their own peers' connections.  A connection a peer opens
 * to the port (me_connect.port) belongs to this file from its start: its
 * messages go to this file's ME_IOC_RECV queue only, the file may post
 * on it, and its ME_CQ_CONN_CLOSED / ME_CQ_CONN_DEAD completion comes to
 * this file; closing the file closes it.  A bound file takes no messages of connections opened to port 0
 * (those wait for the files bound to no port).  The port is the file's
 * until it is closed; one port per file.
 *
 * in:  size, flags (0), port (1..ME_PORT_MAX; 0: the module picks a free
 *      one from ME_PORT_EPHEMERAL up)
 * out: port
 *
 * Errors:
 *   -EOPNOTSUPP    unknown flag
 *   -EINVAL        port above ME_PORT_MAX, reserved field not 0
 *   -EISCONN       this file is bound already
 *   -EADDRINUSE    another file of the namespace is bound to port
 *   -EADDRNOTAVAIL port 0 and every ephemeral port is taken
 */
struct me_bind {
	__u32 size;
	__u32 flags;
	__u32 port;
	__u32 __reserved;
};

#define ME_BIND_SIZE_VER0	16
#define ME_PORT_EPHEMERAL	32768U

#define ME_IOC_BIND		_IO(ME_IOC_MAGIC, 0x48)

/*
 * ME_IOC_CONNECT: open a connection to a peer node; the connection belongs
 * to this open file (closing the file closes it).  Blocks until the peer
 * accepted, or timeout_ms passed (0: 5000 ms), or a signal.
 *
 * in:  size, flags (ME_CONNECT_F_*), peer, timeout_ms, port (ABI 11: the
 *      file bound to that port of the peer takes the connection; 0: any
 *      file of the peer's that is bound to no port, as before ABI 11)
 * out: conn (the connection id, unique in the namespace)
 *
 * Errors:
 *   -EOPNOTSUPP   unknown flag
 *   -EINVAL       peer 0, broadcast or this node; port above ME_PORT_MAX
 *   -ECONNREFUSED (ABI 11) no file of the peer is bound to port
 *   -ENETDOWN     no link attached in the namespace
 *   -EHOSTUNREACH no link reaches the peer (no HELLO from it yet)
 *   -ETIMEDOUT    no answer in time (the connection is abandoned)
 *   -ECONNRESET   the peer restarted while connecting
 *   -ENOSPC       ME_CONN_MAX_PER_FILE connections on this file, or every
 *                 one of the namespace's max_conns connection slots (module
 *                 parameter) is taken.  ABI 8: a slot comes back once its
 *                 connection was given up (ME_IOC_DISCONNECT, or closing
 *                 the file), has ended and lingered (peer_dead_ms, 3 s),
 *                 and a passive one once it ended and lingered.  ABI 11:
 *                 also when the peer refused it for room (it takes at most
 *                 64 live connections from one node, and max_conns in all)
 *   -EINTR        a signal arrived (the connection is abandoned; never
 *                 restarted, whatever SA_RESTART says)
 *
 * ABI 18 (ME_FEATURE_SHARED), ME_CONNECT_F_SHARED: the shared connection
 * between this node and the peer, which carries the operations of every
 * file of both nodes (MPI's ranks, say, each an endpoint on a port): one
 * connection per pair of nodes instead of one per pair of endpoints.  If
 * one is up or being opened, from either side, the file joins it and gets
 * its id; else it is opened.  Any file of the namespace may post on it
 * (regions are reached by their keys, as on any connection); a send on it
 * names the port of the file that takes it (me_post.port), and the
 * receiver learns the sender's port (me_recv.port).  Its CONN_CLOSED or
 * CONN_DEAD completion goes to every file that joined it, after every
 * operation on it; the one this side opened closes when the last file
 * that joined it leaves (ME_IOC_DISCONNECT of its id, or closing the
 * file).  port must be 0 and ME_CONNECT_F_ORDERED not set (-EINVAL): it
 * places on arrival.  Joining again is harmless; a file joins at most
 * ME_CONN_MAX_PER_FILE shared connections (-ENOSPC).
 */
struct me_connect {
	__u32 size;
	__u32 flags;
	__u32 peer;
	__u32 timeout_ms;
	__u32 conn;
	__u32 port;		/* ABI 11; was reserved (0) */
};

#define ME_CONNECT_F_ORDERED	(1U << 0)	/* place and complete in order */
#define ME_CONNECT_F_SHARED	(1U << 1)	/* ABI 18: the node pair's connection */
#define ME_PORT_MAX		0xffffU
#define ME_CONNECT_SIZE_VER0	24
#define ME_CONN_MAX_PER_FILE	256

#define ME_IOC_CONNECT		_IO(ME_IOC_MAGIC, 0x60)

/*
 * ME_IOC_DISCONNECT: orderly close of a connection of this file, and the
 * file gives it up.  Operations already posted still complete; the
 * connection's ME_CQ_CONN_CLOSED (or ME_CQ_CONN_DEAD) completion follows
 * them, and from the moment it is queued (ABI 8) the id is no longer this
 * file's (-ENOENT): its slot is reused after a linger, under a new id.  A
 * connection that died or that the peer closed stays the file's (posts:
 * -ENOTCONN) until it is disconnected too, or the file is closed.
 * Returns at once.
 *
 * in: size, conn
 * Errors: -ENOENT not a connection of this file; -ENOTCONN already closing,
 * closed or dead (it is given up all the same).
 */
struct me_disconnect {
	__u32 size;
	__u32 conn;
};

#define ME_DISCONNECT_SIZE_VER0	8

#define ME_IOC_DISCONNECT	_IO(ME_IOC_MAGIC, 0x61)

/*
 * ME_IOC_POST: post one operation on a connection of this file (one it
 * opened, or accepted by taking its first message: ME_IOC_RECV).  It
 * completes later with one completion (struct me_completion) in this
 * file's queue, carrying the cookie, after the data are in place: a write
 * at the target, a read in local memory.  The local side is always a
 * region registered on this file.
 *
 *   ME_OP_WRITE   local [local_off, +len) -> remote region at remote_off
 *   ME_OP_NOTIFY  the same, then the target's region owner gets an
 *                 ME_CQ_NOTIFY completion carrying imm
 *   ME_OP_READ    remote region [remote_off, +len) -> local region
 *   ME_OP_SEND    local [local_off, +len), len <= ME_SEND_MAX, to the
 *                 peer's receive queue (ME_IOC_RECV); remote_* must be 0
 *   ME_OP_ATOMIC  (ABI 19) atomic operation imm (ME_ATOMIC_*) on the len
 *                 (4 or 8) bytes at remote_off of the remote region, which
 *                 must be aligned to len there.  The operand is read from
 *                 local [local_off, +len) when posting, and for
 *                 ME_ATOMIC_CSWAP the value compared with from the len
 *                 bytes after it (host order); the value found at the
 *                 target lands in [local_off, +len) before the
 *                 ME_CQ_ATOMIC completion.  Applied exactly once, as one
 *                 step against every other atomic on that memory and the
 *                 owner's own atomic instructions.  The target region
 *                 must grant ME_ACCESS_REMOTE_READ and _WRITE
 *                 (ME_ATOMIC_READ: _READ)
 *
 * ABI 20 (ME_FEATURE_LOOPBACK): conn ME_CONN_LOOPBACK, which no connection
 * has, is this node itself: a write, notify, read or atomic on it reaches
 * the regions of the poster's own node (its network namespace: another
 * file's, or this file's), by their ids and keys as a peer's would, with
 * the same checks and the same errors in the completion.  It is done
 * before the post returns, its completion queued (conn ME_CONN_LOOPBACK,
 * peer this node); a notify's ME_CQ_NOTIFY goes to the target region's
 * owner first, with the same conn and peer.  It needs no link and no
 * connection.  ME_OP_SEND on it: -EOPNOTSUPP.
 *
 * Posting blocks while the connection's operation queue or this file's
 * completion queue is full, unless ME_POST_F_NONBLOCK (then -EAGAIN).
 *
 * in: everything
 *
 * Errors at posting (nothing was sent):
 *   -EOPNOTSUPP   unknown opcode, flag or atomic operation; ME_OP_SEND
 *                 on ME_CONN_LOOPBACK
 *   -EINVAL       len 0, or remote_* set for ME_OP_SEND; ME_OP_ATOMIC
 *                 with len other than 4 or 8; imm set for anything but
 *                 ME_OP_NOTIFY and ME_OP_ATOMIC; port set on
 *                 anything but a send on a shared connection, or above
 *                 ME_PORT_MAX
 *   -EDESTADDRREQ ME_OP_SEND on a shared connection without a port
 *   -EMSGSIZE     len above ME_OP_MAX_LEN (ME_SEND_MAX for ME_OP_SEND)
 *   -ENOENT       conn or local_region is not this file's
 *   -ERANGE       [local_off, +len) outside the local region (+2 * len
 *                 for ME_ATOMIC_CSWAP), or remote_off + len wraps around
 *   -ENOTCONN     the connection is closing, closed or dead
 *   -EAGAIN       queue full and ME_POST_F_NONBLOCK
 *   -EINTR        a signal arrived while blocked
 * Errors in the completion's status.  The target refused it (nothing of it
 * took effect there; a write whose target region is deregistered while
 * it arrives may have placed a part):
 *   -EACCES       wrong key, access not granted, or no such region (not
 *                 told apart, so that ids cannot be probed)
 *   -ERANGE       outside the target region
 *   -EINVAL       ME_OP_ATOMIC: the target memory is not aligned to len
 *   -ENOBUFS      ME_OP_SEND: the peer's receive queue is full, or
 *                 (ABI 26) its namespace holds as many bytes of sends,
 *                 queued or arriving, as its module allows (recv_kb)
 *   -ECONNREFUSED ME_OP_SEND on a shared connection: no file of the peer
 *                 is bound to port
 * The connection ended first (Documentation/api.md, "When a connection
 * dies"):
 *   -ECANCELED    before any packet of it was sent, or (wire 15) the peer
 *                 closed it and took no packet of it: the target never saw
 *                 it (a peer's orderly close ends each operation taken or
 *                 not at all)
 *   -ECONNRESET   closed, the peer restarted or gave the connection up
 *                 (ABI 8), after it was sent: it may or may not have taken
 *                 effect at the target
 *   -ETIMEDOUT    the peer or every link to it died, after it was sent: it
 *                 may or may not have taken effect at the target
 *   -ECONNABORTED this side gave the connection up because the peer made
 *                 too many accesses with a wrong key through it (the
 *                 peer's operations fail with -ECONNRESET): as -ETIMEDOUT
 *                 for what took effect
 *   -ENOENT       the local region an operation of the connection was
 *                 being sent from was deregistered meanwhile, which ended
 *                 the connection: as -ETIMEDOUT for what took effect
 */
struct me_post {
	__u32 size;
	__u32 opcode;		/* ME_OP_* */
	__u32 flags;		/* ME_POST_F_* */
	__u32 conn;
	__aligned_u64 cookie;	/* returned in the completion */
	__u32 local_region;
	__u32 len;
	__aligned_u64 local_off;
	__u32 remote_region;
	__u32 remote_key;
	__aligned_u64 remote_off;
	__u32 imm;		/* ME_OP_NOTIFY; ME_OP_ATOMIC: ME_ATOMIC_* */
	__u32 remote_key_hi;	/* ABI 8: the key's high 32 bits (0 before) */
	__u32 port;		/* ABI 18: ME_OP_SEND on a shared connection:
				 * the port of the peer's file that takes it */
	__u32 __reserved;
};

#define ME_OP_WRITE		1
#define ME_OP_READ		2
#define ME_OP_NOTIFY		3
#define ME_OP_SEND		4
#define ME_OP_ATOMIC		5	/* ABI 19 */

/* ME_OP_ATOMIC's operations (imm): the value each leaves where it found old. */
#define ME_ATOMIC_ADD		1	/* old + operand (wraps) */
#define ME_ATOMIC_AND		2	/* old & operand */
#define ME_ATOMIC_OR		3	/* old | operand */
#define ME_ATOMIC_XOR		4	/* old ^ operand */
#define ME_ATOMIC_SWAP		5	/* operand */
#define ME_ATOMIC_CSWAP		6	/* operand if old == compare, else old */
#define ME_ATOMIC_SMIN		7	/* the smaller, as signed integers */
#define ME_ATOMIC_SMAX		8	/* the larger, as signed integers */
#define ME_ATOMIC_UMIN		9	/* the smaller, as unsigned integers */
#define ME_ATOMIC_UMAX		10	/* the larger, as unsigned integers */
#define ME_ATOMIC_READ		11	/* old: nothing changes */

#define ME_POST_F_NONBLOCK	(1U << 0)
/*
 * ABI 15 (ME_FEATURE_POST_MORE; an older module refuses the flag with
 * -EOPNOTSUPP): more posts on the same connection follow at once, as
 * MSG_MORE: this one is queued, not sent yet.  The next post without the
 * flag sends everything queued, small operations several to a frame; if
 * none comes, the module's timer sends them within a tick.
 */
#define ME_POST_F_MORE		(1U << 1)
/*
 * ABI 27 (ME_FEATURE_ACK_NOW; an older module refuses the flag with
 * -EOPNOTSUPP): the poster waits for this write's, notify's or send's
 * completion before it goes on (a blocking send).  A target that answers
 * requests quickly holds their acks for a reply to carry (one frame each
 * way instead of two), and the poster's completion waits with them: for
 * a reply that may itself wait for what the poster does after the
 * completion.  With this flag the target acks at once.  Reads and atomics
 * are answered by the module itself and ignore it.
 */
#define ME_POST_F_ACK_NOW	(1U << 2)

/* ABI 20: the connection id that is this node itself (no connection has it). */
#define ME_CONN_LOOPBACK	0xffffffffU

#define ME_OP_MAX_LEN		(1U << 30)
#define ME_SEND_MAX		65536	/* ABI 26 (ME_FEATURE_SEND_LARGE) */
#define ME_SEND_MAX_VER0	1024	/* before ABI 26 */
#define ME_POST_SIZE_VER0	64
#define ME_POST_SIZE_VER1	72	/* ABI 18: port */

#define ME_IOC_POST		_IO(ME_IOC_MAGIC, 0x62)

/* One completion, as ME_IOC_POLL_CQ returns it. */
struct me_completion {
	__aligned_u64 cookie;	/* the poster's; 0 for events */
	__u32 type;		/* ME_CQ_* */
	__s32 status;		/* 0 or a negative errno (see ME_IOC_POST) */
	__u32 conn;
	__u32 peer;
	__u32 len;		/* bytes moved (0 on error) */
	__u32 imm;		/* ME_CQ_NOTIFY */
	__u32 region;		/* ME_CQ_NOTIFY: the local region written */
	__u32 __reserved;
	__aligned_u64 off;	/* ME_CQ_NOTIFY: where the write began */
};

#define ME_CQ_WRITE		1	/* a write or notify of this file done */
#define ME_CQ_READ		2	/* a read of this file done */
#define ME_CQ_NOTIFY		3	/* a peer's notify landed in a region of this file */
#define ME_CQ_SEND		4	/* a send of this file done */
#define ME_CQ_CONN_CLOSED	5	/* a connection of this file closed */
#define ME_CQ_CONN_DEAD		6	/* a connection of this file died (status) */
#define ME_CQ_ATOMIC		7	/* ABI 19: an atomic of this file done */

#define ME_COMPLETION_SIZE_VER0	48

/*
 * ME_IOC_POLL_CQ: harvest completions of this file.  Each posted operation
 * completes exactly once; the queue holds ME_CQ_ENTRIES, and posting waits
 * for room, so those are never lost.  Events nobody posted for
 * (ME_CQ_NOTIFY, connection events) are dropped when the queue is full and
 * counted in "overflow".  The file is readable (poll/epoll/select: POLLIN)
 * while the queue is not empty.
 *
 * in:  size, flags (ME_POLL_F_WAIT), count = room in the array at entries,
 *      entry_size (>= ME_COMPLETION_SIZE_VER0), timeout_ms (with WAIT;
 *      0 = forever)
 * out: count = entries written; overflow = events dropped so far
 *
 * With ME_POLL_F_WAIT it blocks until at least one completion is there, the
 * timeout passes (count 0, returns 0) or a signal arrives (-EINTR).
 *
 * Errors: -EOPNOTSUPP unknown flag; -EINVAL count 0 or entry_size too small;
 * -E2BIG entry_size above a page (ABI 7);
 * -EFAULT entries not writable (the completions stay queued).
 */
struct me_poll_cq {
	__u32 size;
	__u32 flags;
	__u32 count;
	__u32 entry_size;
	__aligned_u64 entries;
	__u32 timeout_ms;
	__u32 overflow;
};

#define ME_POLL_F_WAIT		(1U << 0)
#define ME_CQ_ENTRIES		4096
#define ME_POLL_CQ_SIZE_VER0	32

#define ME_IOC_POLL_CQ		_IO(ME_IOC_MAGIC, 0x63)

/*
 * ME_IOC_RECV: take the oldest message sent (ME_OP_SEND) to this file,
 * optionally only one from a given peer.  A message belongs to the file
 * that holds the connection it came on: the file that opened it
 * (ME_IOC_CONNECT), or, for a connection a peer opened, the file that took
 * its first message: taking it *accepts* the connection (its later
 * messages come only to that file, which may post on it: ME_IOC_POST with
 * conn; its CONN_CLOSED/DEAD events still go only to the peer's opener,
 * and closing the file leaves it open for that peer but takes no more of
 * its messages).  Until then a peer's connection's messages wait in the
 * namespace's queue, where any file of the namespace may take them.
 * Each file's queue and the namespace's hold ME_RECV_QUEUE messages; a
 * message for a full queue is refused (the sender's send completes with
 * -ENOBUFS), as is one for a connection whose file is gone, and one that
 * would take the namespace's sends, queued or still arriving, above the
 * module's recv_kb (ABI 26; a message of up to ME_SEND_MAX_VER0 bytes
 * counts its length, a longer one its pages).  (Before
 * this, one queue served the whole namespace.)
 *
 * in:  size, flags (ME_RECV_F_WAIT), peer (0: any), buf (user pointer),
 *      len (room at buf), timeout_ms (with WAIT; 0 = forever)
 * out: len (the message's length), peer, conn (the receiving side's id of
 *      the connection it came on); ABI 18: port, the sending file's port
 *      (its bound port, 0 if it has none) when it came on a shared
 *      connection, else 0.  A message on a shared connection goes to the
 *      file bound to the port its send named, never to the namespace's
 *      queue, and adopts nothing.
 *
 * ABI 10: the file polls EPOLLRDBAND (POLLRDBAND) while a message waits
 * that this call would take (with peer 0).
 *
 * Errors: -EOPNOTSUPP unknown flag; -EAGAIN no message (without WAIT);
 * -ETIMEDOUT none in time; -EINTR signal; -EMSGSIZE the message is longer
 * than len (it stays queued, len says how long it is); -EFAULT buf not
 * writable (the message stays queued).
 */
struct me_recv {
	__u32 size;
	__u32 flags;
	__u32 peer;
	__u32 len;
	__aligned_u64 buf;
	__u32 timeout_ms;
	__u32 conn;
	__u32 port;		/* ABI 18, out */
	__u32 __reserved;
};

#define ME_RECV_F_WAIT		(1U << 0)
#define ME_RECV_QUEUE		256
#define ME_RECV_SIZE_VER0	32
#define ME_RECV_SIZE_VER1	40	/* ABI 18: port */

#define ME_IOC_RECV		_IO(ME_IOC_MAGIC, 0x64)

/*
 * ME_IOC_CONN_LIST: the connections of the opener's namespace (all of them,
 * whoever opened them, including the passive side of peers' connections),
 * with their counters.  in/out as ME_IOC_LINK_LIST, entries of struct
 * me_conn_info.
 */
struct me_conn_info {
	__u32 conn;
	__u32 peer;
	__u32 state;		/* ME_CONN_S_* */
	__u32 flags;		/* ME_CONN_I_* */
	__aligned_u64 tx_packets;	/* data packets sent, first copies */
	__aligned_u64 tx_bytes;		/* payload bytes in them */
	__aligned_u64 retransmits;	/* packets sent again */
	__aligned_u64 rx_packets;	/* data packets accepted */
	__aligned_u64 rx_bytes;
	__aligned_u64 rx_dropped;	/* duplicates, out of window, no room */
	__aligned_u64 errors;		/* operations completed with an error */
	__aligned_u64 copies;		/* payload copies into or out of regions */
	/* ABI 11 (88 bytes) */
	__u32 port;			/* the port it was opened to, 0: any */
	__u32 __reserved;
};

#define ME_CONN_S_CONNECTING	1
#define ME_CONN_S_ESTABLISHED	2
#define ME_CONN_S_CLOSING	3
#define ME_CONN_S_CLOSED	4
#define ME_CONN_S_DEAD		5

#define ME_CONN_I_ORDERED	(1U << 0)
#define ME_CONN_I_ACTIVE	(1U << 1)	/* opened from this side */
#define ME_CONN_I_SHARED	(1U << 2)	/* ABI 18: ME_CONNECT_F_SHARED */

#define ME_CONN_INFO_SIZE_VER0	80

struct me_conn_list {
	__u32 size;
	__u32 count;
	__aligned_u64 conns;
	__u32 info_size;
	__u32 __reserved;
};

#define ME_CONN_LIST_SIZE_VER0	24

#define ME_IOC_CONN_LIST	_IO(ME_IOC_MAGIC, 0x45)

/*
 * ME_IOC_STATS: the protocol engine's counters for the opener's namespace,
 * indexed by ME_STAT_*; count in: room, out: ME_STAT_COUNT of the module.
 */
enum me_stat_index {
	ME_STAT_RX_PKTS,
	ME_STAT_RX_SHORT,
	ME_STAT_RX_VERSION,
	ME_STAT_RX_TYPE,
	ME_STAT_RX_FIELD,
	ME_STAT_RX_NOTME,
	ME_STAT_RX_STALE,
	ME_STAT_RX_DUP,
	ME_STAT_RX_WINDOW,
	ME_STAT_RX_CLOSED,
	ME_STAT_RX_NORES,
	ME_STAT_RX_BADACK,
	ME_STAT_RX_BADOP,
	ME_STAT_TX_DATA,
	ME_STAT_TX_RTX_LOSS,
	ME_STAT_TX_RTX_RTO,
	ME_STAT_TX_RTX_FAIL,
	ME_STAT_TX_ACK,
	ME_STAT_TX_NACK,
	ME_STAT_TX_FAIL,
	ME_STAT_RTO_FIRED,
	ME_STAT_LINK_DOWN,
	ME_STAT_LINK_UP,
	ME_STAT_CREDIT_STALL,
	ME_STAT_CONN_REFUSED,	/* CONNECTs refused: sender not alive by HELLO, or too many */
	ME_STAT_KEY_REJECTED,	/* remote accesses with a wrong key (answered EACCES) */
	ME_STAT_CONN_ABORTED,	/* connections aborted after too many wrong keys */
	ME_STAT_RX_HELLO_HELD,	/* HELLOs not believed: a new incarnation or MAC of a peer that answers */
	ME_STAT_PEER_RESTART,	/* new incarnations of peers believed */
	ME_STAT_RX_COOKIE,	/* connection frames with a wrong cookie: dropped */
	ME_STAT_PEER_ABORT,	/* connections the peer gave up (it sent ABORT) */
	/* ABI 9 */
	ME_STAT_PEER_TABLE_FULL,	/* HELLOs of new peers dropped: table full */
	ME_STAT_PEER_EVICTED,	/* never-confirmed peers evicted for new ones */
	ME_STAT_PEER_FORGOTTEN,	/* silent peers without connections forgotten */
	ME_STAT_RX_ADDR,	/* frames of a peer from another MAC than its HELLO's */
	ME_STAT_PATH_STALLED,	/* neighbours taken down: data in flight, nothing acked for ka_ms */
	ME_STAT_PATH_TOLD_DOWN,	/* neighbours taken down: the peer took its end down */
	/* ABI 12 */
	ME_STAT_RTX_SPURIOUS,	/* acks saying a packet came twice: a retransmission was not needed */
	/* ABI 15 */
	ME_STAT_TX_PACKS,	/* frames that carried several small writes (PACK) */
	ME_STAT_TX_PACKED,	/* writes, notifies and sends carried in them */
	/* ABI 16 */
	ME_STAT_ACK_HELD,	/* acks held for the reply to a request to carry */
	ME_STAT_TX_ACK_CARRIED,	/* acks that rode in front of a packet of ours */
	ME_STAT_ACK_HOLD_EXPIRED,	/* held acks sent alone: no reply came in time */
	/* ABI 17 */
	ME_STAT_CC_LOSS_QUEUE,	/* packets found lost, taken for a queue's: the window halves */
	ME_STAT_CC_LOSS_RANDOM,	/* ... for a lossy link's: a fifth off */
	/* ABI 21 */
	ME_STAT_SHARED_LOST,	/* shared connections the peer had lost, ended for its new one */
	/* ABI 24 */
	ME_STAT_TIMER_LATE,	/* timer passes that came late and judged nothing: the host stalled */
	/* ABI 25: congestion control's decisions (protocol.md) */
	ME_STAT_CC_QUEUE_DELAY,	/* of cc_loss_queue: the delay showed a queue */
	ME_STAT_CC_QUEUE_BURST,	/* ... the round lost a burst */
	ME_STAT_CC_QUEUE_FULL,	/* ... the round began at the window a queue overflowed at */
	ME_STAT_CC_CUT_LOSS,	/* windows cut by a loss round */
	ME_STAT_CC_CUT_DELAY,	/* windows cut by a delay above the target */
	ME_STAT_CC_CUT_RTO,	/* windows halved by a timeout */
	ME_STAT_CC_RESET,	/* windows dropped to one MTU by timeouts */
	ME_STAT_CC_UNDO,	/* windows given back: the timeouts were needless */
	ME_STAT_CC_CALM,	/* paths kept from doubling: a queue's second loss round */
	ME_STAT_ACK_NOW,	/* ABI 27: requests whose sender waits (NOW), acked at once */
	ME_STAT_CC_IDLE,	/* ABI 29: windows cut as a path sends again after a pause */
	ME_STAT_COUNT
};

struct me_stats {
	__u32 size;
	__u32 count;
	__aligned_u64 values;	/* user pointer to count __u64 */
};

#define ME_STATS_SIZE_VER0	16

#define ME_IOC_STATS		_IO(ME_IOC_MAGIC, 0x46)

/*
 * io_uring (ABI 5, ME_FEATURE_URING_CMD): the second door to ME_IOC_POST.
 *
 * An IORING_OP_URING_CMD submission on an open /dev/multiedge with
 * sqe->cmd_op = ME_IOC_POST posts one operation, exactly as the ioctl
 * does, with the same struct me_post and the same checks; only its
 * completion differs: it is the ring's CQE, not an entry of the file's
 * completion queue.  The CQE is posted when the operation has completed
 * (a write at the target, a read in local memory), carrying the SQE's
 * user_data; res is 0 or a negative errno: any error at posting or in the
 * completion's status listed under ME_IOC_POST.  On a ring with
 * IORING_SETUP_CQE32, big_cqe[0] holds the bytes moved.  me_post.cookie is
 * not used on this door (user_data identifies the operation).
 *
 * Where the struct me_post is:
 *   - ring with IORING_SETUP_SQE128: in sqe->cmd itself (80 bytes), its
 *     size field first, as for the ioctl; bytes past size are ignored.
 *   - ring with 64-byte SQEs: sqe->cmd (16 bytes) holds struct
 *     me_uring_ptr, the address of the struct in the submitter's memory.
 *     It is read once, when the SQE is first issued: inside
 *     io_uring_enter() for a plain submission, later for IOSQE_ASYNC or
 *     an SQPOLL ring.  Keeping it until the CQE is always safe.
 *
 * A post that would block (the connection's operation queue is full) is
 * parked in the module with the struct as read at its first issue and
 * posted when there is room (never handed back to io_uring, whose re-issue
 * read a reused SQE slot on some kernels); with ME_POST_F_NONBLOCK it
 * completes with -EAGAIN instead.  An IOSQE_ASYNC post waits for room in
 * the io_uring worker that issues it.  Operations
 * deferred that way may reach the wire after later submissions (link SQEs
 * with IOSQE_IO_LINK where order matters).  An unknown cmd_op completes
 * with -ENOTTY; a struct me_uring_ptr with a nonzero __reserved with
 * -EINVAL; a ring set up with IORING_SETUP_IOPOLL is refused by io_uring
 * (-EOPNOTSUPP).
 *
 * An operation the module has accepted holds the file: closing the file
 * descriptor, tearing the ring down or the submitter's exit cancels none
 * of them; each completes (a dead peer fails it within its timeout) and
 * io_uring then releases the file; so does a parked one.  Submissions the
 * module has not accepted yet (not issued, or an IOSQE_ASYNC one waiting
 * in an io_uring worker for room) are io_uring's to cancel at teardown or
 * exit: they post nothing, and a worker's waiting one completes with
 * -EINTR if its CQE can still be seen.
 */
struct me_uring_ptr {
	__aligned_u64 arg;	/* user pointer to the command's struct */
	__aligned_u64 __reserved;	/* must be 0 */
};

#define ME_URING_CMD_SIZE	16	/* sqe->cmd without IORING_SETUP_SQE128 */
#define ME_URING_CMD_SIZE_SQE128	80

#endif /* _UAPI_LINUX_MULTIEDGE_H */
