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
 */
#ifndef _UAPI_LINUX_MULTIEDGE_H
#define _UAPI_LINUX_MULTIEDGE_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define ME_DEVICE_PATH		"/dev/multiedge"

/* Bumped when a command is added; old commands keep working. */
#define ME_ABI_VERSION		3

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
 */
struct me_query {
	__u32 size;
	__u32 abi_version;	/* ME_ABI_VERSION of the module */
	__u32 features;		/* ME_FEATURE_* bits; none defined yet */
	__u16 ethertype;	/* host byte order */
	__u16 __reserved;	/* out: zero */
	__aligned_u64 rx_frames;
	__aligned_u64 rx_dropped;
	__aligned_u64 pinned_pages;	/* user pages pinned by registrations */
	__aligned_u64 regions;		/* registered memory regions */
};

#define ME_QUERY_SIZE_VER0	32	/* first published size */
#define ME_QUERY_SIZE_VER1	48	/* + pinned_pages, regions */

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
	__u32 __reserved;	/* zero */
	__aligned_u64 rx_frames;	/* multiedge frames received on it */
	__aligned_u64 rx_bytes;
};

#define ME_LINK_F_UP		(1U << 0)	/* device up with carrier */

#define ME_LINK_INFO_SIZE_VER0	48

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
 * Errors: -EINVAL info_size too small or __reserved not zero; -EFAULT the
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
 * alignment.  Region ids are unique per namespace; keys are random.  The
 * region belongs to the open file: closing it (or exiting) deregisters.
 *
 * in:  size, access (ME_ACCESS_*), addr, length
 * out: region, key
 *
 * Errors:
 *   -EOPNOTSUPP  unknown access bit
 *   -EINVAL      length 0 or above ME_MR_MAX_LENGTH, or addr + length wraps
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
};

#define ME_ACCESS_REMOTE_READ	(1U << 0)	/* peers may read it */
#define ME_ACCESS_REMOTE_WRITE	(1U << 1)	/* peers may write it */
#define ME_ACCESS_ALL		(ME_ACCESS_REMOTE_READ | ME_ACCESS_REMOTE_WRITE)

#define ME_MR_MAX_LENGTH	(1ULL << 30)
#define ME_MR_MAX_PER_FILE	4096
#define ME_MR_REG_SIZE_VER0	32

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

#endif /* _UAPI_LINUX_MULTIEDGE_H */
