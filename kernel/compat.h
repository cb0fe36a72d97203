/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel API differences between the releases the module supports: Linux
 * 6.1 (from 6.1.23; Debian 12) to 6.12 (Debian 12 backports, Debian 13),
 * the two the test suite runs on.  Every difference the module meets lives
 * here; the rest of the module uses the names defined below.
 *
 * Headers that moved are found with __has_include; interfaces that changed
 * shape are told apart by LINUX_VERSION_CODE, at the release that changed
 * them (in brackets; the builds check 6.1 and 6.12 only).
 */
#ifndef ME_COMPAT_H
#define ME_COMPAT_H

#include <linux/mm.h>
#include <linux/skbuff.h>
#include <linux/version.h>

/* [6.12] <asm/unaligned.h> became <linux/unaligned.h>. */
#if __has_include(<linux/unaligned.h>)
#include <linux/unaligned.h>
#else
#include <asm/unaligned.h>
#endif

/*
 * struct io_uring_cmd and IO_URING_F_* moved from <linux/io_uring.h> to
 * <linux/io_uring/cmd.h> (6.12 has it, 6.1 not): found by __has_include.
 */
#if __has_include(<linux/io_uring/cmd.h>)
#include <linux/io_uring/cmd.h>
#else
#include <linux/io_uring.h>
#endif

/*
 * [6.4] A uring_cmd carries its whole SQE (ucmd->sqe) instead of a
 * pointer to the command bytes (ucmd->cmd).
 */
static inline const void *me_uring_cmd_bytes(const struct io_uring_cmd *ucmd)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
	return io_uring_sqe_cmd(ucmd->sqe);
#else
	return ucmd->cmd;
#endif
}

/*
 * [6.3] vm_flags is written only through vm_flags_set() (which also
 * asserts the mmap_lock is held for writing).
 */
static inline void me_vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

/*
 * [6.3] zap_page_range() is gone; zap_page_range_single() is exported in
 * its place.  Callers pass a range inside one vma, so both do the same.
 */
static inline void me_zap_range(struct vm_area_struct *vma, unsigned long addr,
				unsigned long size)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	zap_page_range_single(vma, addr, size, NULL);
#else
	zap_page_range(vma, addr, size);
#endif
}

/*
 * [6.10] A ubuf_info points to a const struct ubuf_info_ops whose
 * .complete is the callback it used to hold itself.  The ops live in a
 * static object per call site.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 10, 0)
#define me_ubuf_set_complete(uarg, fn)					\
	do {								\
		static const struct ubuf_info_ops me_ubuf_ops__ = {	\
			.complete = (fn),				\
		};							\
		(uarg)->ops = &me_ubuf_ops__;				\
	} while (0)
#else
#define me_ubuf_set_complete(uarg, fn) ((uarg)->callback = (fn))
#endif

#endif /* ME_COMPAT_H */
