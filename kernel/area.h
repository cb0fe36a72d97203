/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_AREA_H
#define ME_AREA_H

#include <linux/types.h>

struct file;
struct me_area;
struct mm_struct;
struct page;
struct vm_area_struct;

/*
 * Receive areas: memory a process maps from /dev/multiedge (mmap).  The
 * module owns the pages, so the receive threads can replace one by a page
 * that arrived in a frame (page flip) and update the process's page table
 * through the mm cached at mmap, from their own context.  See
 * Documentation/design.md, "Receive page flipping".
 */

/* file_operations.mmap of /dev/multiedge. */
int me_area_mmap(struct file *file, struct vm_area_struct *vma);

/*
 * The area mapped at [addr, addr + len) of @mm by the open file whose
 * private_data is @owner, with a reference, and the index of the page
 * holding @addr.  NULL and *err 0 if no part of the range is an area;
 * NULL and *err -EINVAL if only part of it is, or another file's.
 */
struct me_area *me_area_find(struct mm_struct *mm, const void *owner, u64 addr,
			     u64 len, unsigned long *first, int *err);
void me_area_put(struct me_area *a);

/* Page @idx with a reference (a frame may send it while it is replaced). */
struct page *me_area_page_get(struct me_area *a, unsigned long idx);

/* Copies within @page through a short-lived local mapping (any context). */
void me_page_copy(struct page *page, u32 in_page, void *buf, u32 len, bool to_page);

/* Copies within page @idx, holding the page's lock (Table 1 state 9). */
void me_area_copy(struct me_area *a, unsigned long idx, u32 in_page, void *buf,
		  u32 len, bool to_area);

/*
 * Applies atomic operation @aop (ME_AOP_*, core/aop.h) to the @size (4 or
 * 8) bytes at @in_page of @page, aligned to @size; the value found there.
 * Any context.
 */
u64 me_page_atomic(struct page *page, u32 in_page, u32 size, u32 aop, u64 operand,
		   u64 compare);
/* The same within page @idx of the area, holding the page's lock. */
u64 me_area_atomic(struct me_area *a, unsigned long idx, u32 in_page, u32 size, u32 aop,
		   u64 operand, u64 compare);

/*
 * Makes @page (whole payload; the caller's reference passes to the area)
 * page @idx of the area and the process's mapping.  eager: the page table
 * is updated now, one TLB invalidation per page; otherwise at
 * me_area_done() for the message, one per message.  Never waits for the
 * owner's mmap_lock: if it is busy the page is copied instead (area.c).
 * May sleep (the area's map_lock).
 */
void me_area_flip(struct me_area *a, unsigned long idx, struct page *page, bool eager);

/*
 * A message covering pages [first, last] is placed: finish lazy flips
 * (remap, or undo them by copy if the owner's mmap_lock is busy), so the
 * owner's mapping shows the message.  May sleep (map_lock).
 */
void me_area_done(struct me_area *a, unsigned long first, unsigned long last);

/*
 * Page pool: pages that leave areas (replaced by flips, or freed with
 * their area) for the next frames the module builds (me_pool_get falls
 * back to the page allocator).  At most pool_max pages.
 */
struct page *me_pool_get(gfp_t gfp);
void me_pool_put(struct page *page);

struct me_area_stats {
	u64 area_pages;		/* pages backing areas (incl. awaiting unmap) */
	u64 pool_pages;
	u64 flipped;		/* pages placed by flip */
	u64 flip_copied;	/* whole aligned area pages copied: no page to flip */
	u64 tlb_flushes;	/* page table invalidations for flips */
};
void me_area_stats(struct me_area_stats *st);
void me_area_count_copied(void);

int me_area_init(void);
/* At unload: frees the pool, reports pages still accounted. */
void me_area_exit(void);

#endif /* ME_AREA_H */
