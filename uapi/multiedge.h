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
 *   -E2BIG    size larger than the kernel knows and the extra bytes not zero
 *   -ENOTTY   unknown command
 */
#ifndef _UAPI_LINUX_MULTIEDGE_H
#define _UAPI_LINUX_MULTIEDGE_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define ME_DEVICE_PATH		"/dev/multiedge"

/* Bumped when a command is added; old commands keep working. */
#define ME_ABI_VERSION		1

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
 * arriving on a device that is not an attached link).
 */
struct me_query {
	__u32 size;
	__u32 abi_version;	/* ME_ABI_VERSION of the module */
	__u32 features;		/* ME_FEATURE_* bits; none defined in ABI 1 */
	__u16 ethertype;	/* host byte order */
	__u16 __reserved;	/* out: zero */
	__aligned_u64 rx_frames;
	__aligned_u64 rx_dropped;
};

#define ME_QUERY_SIZE_VER0	32	/* first published size */

#define ME_IOC_QUERY		_IO(ME_IOC_MAGIC, 0x40)

#endif /* _UAPI_LINUX_MULTIEDGE_H */
