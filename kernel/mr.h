/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_MR_H
#define ME_MR_H

#include <linux/completion.h>
#include <linux/list.h>
#include <linux/refcount.h>
#include <linux/types.h>

struct me_area;
struct me_file;
struct me_net;
struct me_rx_frame;
struct mm_struct;
struct page;

/*
 * A registered memory region: user pages pinned long-term.
 *
 * Lifetime: the namespace's table (me_net.mrs) and the owning file's list
 * hold the base reference; users on the data path take one with
 * me_mr_get_any() and drop it with me_mr_put().  Deregistration removes the
 * region from both, drops the base reference and waits for the last put
 * (the completion) before unpinning.
 */
struct me_mr {
	u32 id;
	u32 access;			/* ME_ACCESS_* */
	u64 key;
	u64 addr;
	u64 length;
	unsigned long npages;
	struct page **pages;		/* pinned; NULL for an area */
	struct me_area *area;		/* a receive area's pages instead */
	unsigned long area_first;	/* area page index of addr's page */
	u32 flags;			/* ME_MR_* */
	struct mm_struct *mm;		/* mmgrab()ed: pinned_vm is charged to it */
	struct me_net *mn;
	struct list_head file_node;	/* in me_file.mrs, under me_file.lock */
	refcount_t ref;
	struct completion released;
};

/* Reports any region or pinned page still accounted (at unload). */
void me_mr_check_unload(void);

void me_mr_net_init(struct me_net *mn);
void me_mr_net_uninit(struct me_net *mn);

/* ioctl handlers, in the caller's context. */
long me_mr_reg(struct me_file *f, void __user *uarg);
long me_mr_dereg(struct me_file *f, void __user *uarg);
/* Deregisters everything the file registered (release). */
void me_mr_release_file(struct me_file *f);

/* Data path: find a region by id; or only a region registered on @f. */
struct me_mr *me_mr_get_any(struct me_net *mn, u32 id);
struct me_mr *me_mr_get_owned(struct me_file *f, u32 id);
void me_mr_put(struct me_mr *mr);
/* The file that registered it (valid while a reference is held). */
struct me_file *me_mr_owner(struct me_mr *mr);

/*
 * For the engine (any context): may a peer access [off, off + len) with
 * @key for @access (ME_ACCESS_*)?  0, -ENOENT, -EKEYREJECTED, -EACCES or
 * -ERANGE.  Local check: range only.  Copies: 0, -ENOENT or -ERANGE.
 */
int me_mr_check_remote(struct me_net *mn, u32 id, u64 key, u64 off, u64 len, u32 access);
/* The same check, keeping the region: referenced, or NULL and *err. */
struct me_mr *me_mr_get_remote(struct me_net *mn, u32 id, u64 key, u64 off, u64 len,
			       u32 access, int *err);
int me_mr_check_local(struct me_net *mn, u32 id, u64 off, u64 len);
/* Region @id, referenced, if [off, off + len) lies in it; else NULL, *err. */
struct me_mr *me_mr_get_range(struct me_net *mn, u32 id, u64 off, u64 len, int *err);
int me_mr_copy_from(struct me_net *mn, u32 id, u64 off, void *dst, u32 len);
/*
 * Places payload: from src, or where @fr (may be NULL) left a whole page
 * out of its buffer, from that page, flipped into a receive area when the
 * destination is a whole page of one.  May sleep (a flip).  0,
 * ME_PLACE_COPIED (a whole page of the region was copied, not flipped) or
 * a negative errno.
 */
int me_mr_place(struct me_net *mn, u32 id, u64 off, const void *src, u32 len,
		struct me_rx_frame *fr);
/* The same into a region the caller holds (-ERANGE outside it). */
int me_mr_place_on(struct me_mr *mr, u64 off, const void *src, u32 len,
		   struct me_rx_frame *fr);
/*
 * Applies a remote atomic operation (core/aop.h) to [off, off + size) of
 * region @id (the engine checked access and range); *old the value found.
 * 0, -EINVAL (the memory is not aligned to @size), -ENOENT or -ERANGE.
 * Any context.
 */
int me_mr_atomic(struct me_net *mn, u32 id, u64 off, u32 size, u32 aop, u64 operand,
		 u64 compare, u64 *old);
/* The same on a region held by the caller. */
int me_mr_atomic_on(struct me_mr *mr, u64 off, u32 size, u32 aop, u64 operand, u64 compare,
		    u64 *old);
/* A message for [off, off + len) is placed (lazy flips finish). */
void me_mr_done(struct me_net *mn, u32 id, u64 off, u64 len);
/* Copies [off, off + len) of a region held by the caller; 0 or -ERANGE. */
int me_mr_read(const struct me_mr *mr, u64 off, void *dst, u32 len);
/* Copies into [off, off + len) of a region held by the caller; 0 or -ERANGE. */
int me_mr_write(struct me_mr *mr, u64 off, const void *src, u32 len);
/*
 * Copies [soff, soff + len) of @src into [doff, doff + len) of @dst (both
 * held by the caller): 0 or -ERANGE.  Process context (it reschedules).
 */
int me_mr_transfer(struct me_mr *dst, u64 doff, const struct me_mr *src, u64 soff, u32 len);
/* Page @pg of the region (0: the page holding addr), with a reference. */
struct page *me_mr_page_get(const struct me_mr *mr, unsigned long pg);

/* Page flipping on (module parameter rx_flip)? */
bool me_mr_flip_enabled(void);
int me_mr_init(void);

/* RLIMIT_MEMLOCK accounting of pages held for @mm (regions and areas). */
int me_charge_pinned(struct mm_struct *mm, unsigned long npages);
void me_uncharge_pinned(struct mm_struct *mm, unsigned long npages);

/* Module-wide accounting, for ME_IOC_QUERY and the unload check. */
u64 me_mr_pinned_pages(void);
u64 me_mr_count(void);

#endif /* ME_MR_H */
