// SPDX-License-Identifier: GPL-2.0
/*
 * Receive areas and page flipping (paper §3.2, "context-independent page
 * remapping").
 *
 * An area is memory the module allocates and a process maps with mmap() on
 * /dev/multiedge.  The module keeps the page array, so a receive thread
 * can make a page that arrived whole in a frame page @idx of the area
 * (swap in the array, under the page's bit lock: Table 1 state 9) and then
 * update the process's page table through the mm cached at mmap
 * (mmget_not_zero + mmap_read_trylock, from the thread's own context): zap
 * the old translation (the TLB invalidation) and insert the new page.
 *
 * TLB invalidation is eager (per page, at the flip) or lazy (per message:
 * the old pages stay mapped, "retired", until me_area_done() zaps the
 * message's range once).  A retired page is released only after its
 * translation is gone.  Every page table update and the fault handler run
 * under map_lock and map the page mapped_page_get() names (the retired
 * page if there is one, else the array's), read under the page's bit
 * lock: the translation of a page, where there is one and no update holds
 * map_lock, is always retired[idx] ?: pages[idx].
 *
 * The receive threads are shared by every connection of a link, so they
 * never wait for a process's mmap_lock (a process could keep it busy, or
 * held, for as long as it likes): they only try it.  When it is busy the
 * flip is undone by a copy instead: eager, the frame's page is copied into
 * the mapped page; lazy, me_area_done() copies the current page of each
 * retired index into the retired (still mapped) page and puts that back in
 * the array.  Either way the process's mapping shows every byte before the
 * message's completion or status exists, as placement by copy would, with
 * no work left behind to flush at teardown.  Counted as flip_copied.
 *
 * Pages leaving an area (replaced, or freed with it) go to a small pool
 * the transmit path builds frames from.
 */
#include <linux/highmem.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
/* Last: it uses cpu_relax() without including <asm/processor.h> (6.12). */
#include <linux/bit_spinlock.h>

#include "area.h"
#include "compat.h"
#include "core/aop.h"
#include "mr.h"
#include "uapi/multiedge.h"

static unsigned int pool_max = 1024;
module_param(pool_max, uint, 0444);
MODULE_PARM_DESC(pool_max, "Free pages the module keeps for building frames (0..1048576, default 1024)");

/* Pages inserted into a page table per vm_insert_pages() call. */
#define INSERT_BATCH	32

struct me_area {
	struct kref ref;		/* each vma piece, each region on it */
	struct mm_struct *mm;		/* mmgrab()ed; pinned_vm carries the charge */
	unsigned long uaddr;		/* where it is mapped (mremap refused) */
	unsigned long npages;
	struct page **pages;		/* current pages, each under its bit lock */
	unsigned long *locks;		/* one bit per page */
	struct page **retired;		/* replaced but maybe mapped, retire_lock */
	spinlock_t retire_lock;
	atomic_long_t nretired;
	struct mutex map_lock;		/* page table updates vs the fault handler */
};

static atomic64_t area_pages = ATOMIC64_INIT(0);
static atomic64_t flipped = ATOMIC64_INIT(0);
static atomic64_t flip_copied = ATOMIC64_INIT(0);
static atomic64_t tlb_flushes = ATOMIC64_INIT(0);

static LIST_HEAD(pool);
static DEFINE_SPINLOCK(pool_lock);
static unsigned long pool_n;

/* ---- page pool ---- */

struct page *me_pool_get(gfp_t gfp)
{
	struct page *page;

	spin_lock_bh(&pool_lock);
	page = list_first_entry_or_null(&pool, struct page, lru);
	if (page) {
		list_del(&page->lru);
		pool_n--;
	}
	spin_unlock_bh(&pool_lock);
	/* Charged to the memory cgroup of the task building the frame, if any. */
	return page ?: alloc_page(gfp | __GFP_ACCOUNT);
}

/* Takes the caller's reference; keeps the page only if it was the last. */
void me_pool_put(struct page *page)
{
	if (page_ref_count(page) == 1) {
		spin_lock_bh(&pool_lock);
		if (pool_n < pool_max) {
			list_add(&page->lru, &pool);
			pool_n++;
			page = NULL;
		}
		spin_unlock_bh(&pool_lock);
	}
	if (page)
		put_page(page);
}

static void pool_drain(void)
{
	struct page *page, *tmp;
	LIST_HEAD(list);

	spin_lock_bh(&pool_lock);
	list_splice_init(&pool, &list);
	pool_n = 0;
	spin_unlock_bh(&pool_lock);
	list_for_each_entry_safe(page, tmp, &list, lru) {
		list_del(&page->lru);
		put_page(page);
	}
}

/* A page leaves the area: the pool may have it. */
static void release_page(struct page *page)
{
	atomic64_dec(&area_pages);
	me_pool_put(page);
}

/* ---- page access ---- */

/* Bottom halves off: a frame placed in softirq (rx.c) may take it too. */
static void page_lock(struct me_area *a, unsigned long idx)
{
	local_bh_disable();
	bit_spin_lock(idx % BITS_PER_LONG, a->locks + BIT_WORD(idx));
}

static void page_unlock(struct me_area *a, unsigned long idx)
{
	bit_spin_unlock(idx % BITS_PER_LONG, a->locks + BIT_WORD(idx));
	local_bh_enable();
}

struct page *me_area_page_get(struct me_area *a, unsigned long idx)
{
	struct page *page;

	page_lock(a, idx);
	page = a->pages[idx];
	get_page(page);
	page_unlock(a, idx);
	return page;
}

/*
 * The page the process's translation of @idx shows (area.c header): the
 * retired one if a lazy flip left one, else the current one; a reference.
 */
static struct page *mapped_page_get(struct me_area *a, unsigned long idx)
{
	struct page *page;

	page_lock(a, idx);
	spin_lock_bh(&a->retire_lock);
	page = a->retired[idx] ?: a->pages[idx];
	get_page(page);
	spin_unlock_bh(&a->retire_lock);
	page_unlock(a, idx);
	return page;
}

void me_page_copy(struct page *page, u32 in_page, void *buf, u32 len, bool to_page)
{
	u8 *va = kmap_local_page(page);

	if (to_page) {
		memcpy(va + in_page, buf, len);
		flush_dcache_page(page);
	} else {
		memcpy(buf, va + in_page, len);
	}
	kunmap_local(va);
}

void me_area_copy(struct me_area *a, unsigned long idx, u32 in_page, void *buf,
		  u32 len, bool to_area)
{
	page_lock(a, idx);
	me_page_copy(a->pages[idx], in_page, buf, len, to_area);
	page_unlock(a, idx);
}

/*
 * A compare-and-exchange loop, so that every operation is one atomic
 * step against the others and against the owner's own atomic
 * instructions on the same memory (its mapping shows the same page).
 * Even an operation that changes nothing exchanges: an 8-byte read on a
 * 32-bit machine could tear, the exchange cannot.
 */
u64 me_page_atomic(struct page *page, u32 in_page, u32 size, u32 aop, u64 operand,
		   u64 compare)
{
	u8 *va = kmap_local_page(page);
	u64 found;

	if (size == 4) {
		u32 *p = (u32 *)(va + in_page);
		u32 old = READ_ONCE(*p);

		while (!try_cmpxchg(p, &old, (u32)me_aop_apply(aop, 4, old, operand, compare)))
			;
		found = old;
	} else {
		u64 *p = (u64 *)(va + in_page);
		u64 old = READ_ONCE(*p);

		while (!try_cmpxchg64(p, &old, me_aop_apply(aop, 8, old, operand, compare)))
			;
		found = old;
	}
	flush_dcache_page(page);
	kunmap_local(va);
	return found;
}

u64 me_area_atomic(struct me_area *a, unsigned long idx, u32 in_page, u32 size, u32 aop,
		   u64 operand, u64 compare)
{
	u64 found;

	page_lock(a, idx);
	found = me_page_atomic(a->pages[idx], in_page, size, aop, operand, compare);
	page_unlock(a, idx);
	return found;
}

/* ---- page tables ---- */

static const struct vm_operations_struct area_vm_ops;

static bool vma_is_area(const struct vm_area_struct *vma, const struct me_area *a)
{
	return vma->vm_ops == &area_vm_ops && vma->vm_private_data == a;
}

/* Maps the current pages of [addr, end) of @vma; map_lock held. */
static void insert_range(struct me_area *a, struct vm_area_struct *vma, unsigned long addr,
			 unsigned long end)
{
	struct page *batch[INSERT_BATCH];

	while (addr < end) {
		unsigned long idx = vma->vm_pgoff + ((addr - vma->vm_start) >> PAGE_SHIFT);
		unsigned long n = min_t(unsigned long, (end - addr) >> PAGE_SHIFT, INSERT_BATCH);
		unsigned long i, left = n;

		for (i = 0; i < n; i++)
			batch[i] = mapped_page_get(a, idx + i);
		/* A failure leaves the translation empty: the fault handler fills it. */
		vm_insert_pages(vma, addr, batch, &left);
		for (i = 0; i < n; i++)
			put_page(batch[i]);
		addr += n << PAGE_SHIFT;
	}
}

/* What map_begin() found: the owner's address space ... */
enum map_state {
	MAP_GONE,	/* ... is gone: no translation to update */
	MAP_HELD,	/* ... is held: mm referenced, mmap_lock read, map_lock */
	MAP_BUSY,	/* ... has its mmap_lock busy: nothing taken, do not wait */
};

/*
 * Takes what a page table update needs without ever waiting for the
 * owner's mmap_lock (a receive thread must not: area.c header).
 * map_lock is only held for bounded page table work, so it is waited for.
 */
static enum map_state map_begin(struct me_area *a)
{
	/* A frame placed in softirq (rx.c) cannot take map_lock: as if busy. */
	if (in_softirq())
		return MAP_BUSY;
	if (!mmget_not_zero(a->mm))
		return MAP_GONE;
	if (!mmap_read_trylock(a->mm)) {
		mmput_async(a->mm);
		return MAP_BUSY;
	}
	mutex_lock(&a->map_lock);
	return MAP_HELD;
}

static void map_end(struct me_area *a)
{
	mutex_unlock(&a->map_lock);
	mmap_read_unlock(a->mm);
	mmput_async(a->mm);
}

/*
 * Replaces the translations of pages [first, last] by the pages
 * mapped_page_get() names wherever the area is still mapped; map_begin()
 * returned MAP_HELD.
 */
static void remap(struct me_area *a, unsigned long first, unsigned long last)
{
	unsigned long start = a->uaddr + (first << PAGE_SHIFT);
	unsigned long end = a->uaddr + ((last + 1) << PAGE_SHIFT);
	struct vm_area_struct *vma;
	unsigned long addr = start;

	mmap_assert_locked(a->mm);
	lockdep_assert_held(&a->map_lock);
	while (addr < end && (vma = find_vma(a->mm, addr)) && vma->vm_start < end) {
		unsigned long s = max(addr, vma->vm_start), e = min(end, vma->vm_end);

		if (vma_is_area(vma, a)) {
			me_zap_range(vma, s, e - s);
			atomic64_inc(&tlb_flushes);
			insert_range(a, vma, s, e);
		}
		addr = vma->vm_end;
	}
}

/* Takes the retired pages of [first, last] out; returns how many. */
static unsigned long collect_retired(struct me_area *a, unsigned long first, unsigned long last,
				     struct list_head *out)
{
	unsigned long idx, n = 0;

	if (!atomic_long_read(&a->nretired))
		return 0;
	spin_lock_bh(&a->retire_lock);
	for (idx = first; idx <= last; idx++) {
		struct page *page = a->retired[idx];

		if (page) {
			a->retired[idx] = NULL;
			list_add(&page->lru, out);
			n++;
		}
	}
	atomic_long_sub(n, &a->nretired);
	spin_unlock_bh(&a->retire_lock);
	return n;
}

static void release_list(struct list_head *list)
{
	struct page *page, *tmp;

	list_for_each_entry_safe(page, tmp, list, lru) {
		list_del(&page->lru);
		release_page(page);
	}
}

/*
 * Undoes the lazy flips of [first, last] by copy (the owner's mmap_lock is
 * busy): each retired page, still the mapped one, gets the current page's
 * bytes and becomes the current page again.  Under the page's bit lock, so
 * no copy into the page and no fault handler sees it half done.
 */
static void unflip(struct me_area *a, unsigned long first, unsigned long last)
{
	unsigned long idx;

	for (idx = first; idx <= last && atomic_long_read(&a->nretired); idx++) {
		struct page *mapped, *cur = NULL;
		u8 *va;

		page_lock(a, idx);
		spin_lock_bh(&a->retire_lock);
		mapped = a->retired[idx];
		if (mapped) {
			a->retired[idx] = NULL;
			atomic_long_dec(&a->nretired);
		}
		spin_unlock_bh(&a->retire_lock);
		if (mapped) {
			cur = a->pages[idx];
			va = kmap_local_page(cur);
			me_page_copy(mapped, 0, va, PAGE_SIZE, true);
			kunmap_local(va);
			a->pages[idx] = mapped;
		}
		page_unlock(a, idx);
		if (cur) {
			release_page(cur);
			/* Placed by copy after all: flipped + copied stay the pages. */
			atomic64_dec(&flipped);
			atomic64_inc(&flip_copied);
		}
		if (idx % 64 == 63 && !in_softirq())
			cond_resched();
	}
}

/* An eager flip while the owner's mmap_lock is busy: copy instead. */
static void flip_by_copy(struct me_area *a, unsigned long idx, struct page *page)
{
	u8 *va;

	unflip(a, idx, idx);	/* a lazy flip's retired page is the mapped one */
	va = kmap_local_page(page);
	me_area_copy(a, idx, 0, va, PAGE_SIZE, true);
	kunmap_local(va);
	put_page(page);		/* the caller's: never an area page */
	atomic64_inc(&flip_copied);
}

void me_area_flip(struct me_area *a, unsigned long idx, struct page *page, bool eager)
{
	enum map_state st = MAP_GONE;
	struct page *old;
	LIST_HEAD(list);

	if (eager) {
		st = map_begin(a);
		if (st == MAP_BUSY) {
			flip_by_copy(a, idx, page);
			return;
		}
	}
	atomic64_inc(&area_pages);
	page_lock(a, idx);
	old = a->pages[idx];
	a->pages[idx] = page;
	page_unlock(a, idx);
	atomic64_inc(&flipped);

	if (eager) {
		collect_retired(a, idx, idx, &list);
		if (st == MAP_HELD) {
			remap(a, idx, idx);
			map_end(a);
		}
		release_list(&list);
		release_page(old);
		return;
	}
	/*
	 * Lazy: the old page stays mapped until the message's
	 * me_area_done().  If one is already waiting there, that done has
	 * not collected it yet and will map the current page: the page
	 * replaced now was never the mapped one and can go.
	 */
	spin_lock_bh(&a->retire_lock);
	if (!a->retired[idx]) {
		a->retired[idx] = old;
		atomic_long_inc(&a->nretired);
		old = NULL;
	}
	spin_unlock_bh(&a->retire_lock);
	if (old)
		release_page(old);
}

void me_area_done(struct me_area *a, unsigned long first, unsigned long last)
{
	enum map_state st;
	LIST_HEAD(list);

	if (last >= a->npages)
		last = a->npages - 1;
	if (first > last || !atomic_long_read(&a->nretired))
		return;
	st = map_begin(a);
	if (st == MAP_BUSY) {
		unflip(a, first, last);
		return;
	}
	if (collect_retired(a, first, last, &list) && st == MAP_HELD)
		remap(a, first, last);
	if (st == MAP_HELD)
		map_end(a);
	release_list(&list);
}

/* ---- mapping ---- */

static void area_free(struct kref *ref)
{
	struct me_area *a = container_of(ref, struct me_area, ref);
	unsigned long i;

	for (i = 0; i < a->npages; i++) {
		if (a->pages[i])
			release_page(a->pages[i]);
		if (a->retired[i])
			release_page(a->retired[i]);
	}
	me_uncharge_pinned(a->mm, a->npages);
	mmdrop(a->mm);
	kvfree(a->pages);
	kvfree(a->retired);
	bitmap_free(a->locks);
	kfree(a);
}

void me_area_put(struct me_area *a)
{
	kref_put(&a->ref, area_free);
}

static void area_vm_open(struct vm_area_struct *vma)
{
	struct me_area *a = vma->vm_private_data;

	kref_get(&a->ref);
}

static void area_vm_close(struct vm_area_struct *vma)
{
	me_area_put(vma->vm_private_data);
}

/* Moving would break the address the receive threads update. */
static int area_vm_mremap(struct vm_area_struct *vma)
{
	return -EINVAL;
}

/* A translation zapped by the process (madvise) or lost to a failed insert. */
static vm_fault_t area_vm_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct me_area *a = vma->vm_private_data;
	struct page *page;
	int ret;

	if (vmf->pgoff >= a->npages)
		return VM_FAULT_SIGBUS;
	mutex_lock(&a->map_lock);
	page = mapped_page_get(a, vmf->pgoff);
	ret = vm_insert_page(vma, vmf->address & PAGE_MASK, page);
	put_page(page);
	mutex_unlock(&a->map_lock);
	if (!ret || ret == -EBUSY)
		return VM_FAULT_NOPAGE;
	return ret == -ENOMEM ? VM_FAULT_OOM : VM_FAULT_SIGBUS;
}

static const struct vm_operations_struct area_vm_ops = {
	.open = area_vm_open,
	.close = area_vm_close,
	.mremap = area_vm_mremap,
	.fault = area_vm_fault,
};

int me_area_mmap(struct file *file, struct vm_area_struct *vma)
{
	unsigned long npages = vma_pages(vma), i, left;
	struct mm_struct *mm = vma->vm_mm;
	struct me_area *a;
	int ret;

	/* Private mappings would copy on write and never see a flip. */
	if (vma->vm_pgoff || !(vma->vm_flags & VM_SHARED) ||
	    npages > (ME_MR_MAX_LENGTH >> PAGE_SHIFT))
		return -EINVAL;
	a = kzalloc(sizeof(*a), GFP_KERNEL_ACCOUNT);
	if (!a)
		return -ENOMEM;
	a->npages = npages;
	/* The area and its pages are charged to the mapping task's memory cgroup. */
	a->pages = kvcalloc(npages, sizeof(*a->pages), GFP_KERNEL_ACCOUNT);
	a->retired = kvcalloc(npages, sizeof(*a->retired), GFP_KERNEL_ACCOUNT);
	a->locks = bitmap_zalloc(npages, GFP_KERNEL_ACCOUNT);
	ret = -ENOMEM;
	if (!a->pages || !a->retired || !a->locks)
		goto err_arrays;
	ret = me_charge_pinned(mm, npages);
	if (ret)
		goto err_arrays;
	for (i = 0; i < npages; i++) {
		if (i % 512 == 511) {
			if (fatal_signal_pending(current)) {
				ret = -EINTR;
				goto err_pages;
			}
			cond_resched();
		}
		a->pages[i] = alloc_page(GFP_HIGHUSER | __GFP_ZERO | __GFP_ACCOUNT);
		if (!a->pages[i]) {
			ret = -ENOMEM;
			goto err_pages;
		}
		atomic64_inc(&area_pages);
	}
	kref_init(&a->ref);
	spin_lock_init(&a->retire_lock);
	mutex_init(&a->map_lock);
	mmgrab(mm);
	a->mm = mm;
	a->uaddr = vma->vm_start;

	/* Not inherited by fork: the threads update only this mm. */
	me_vm_flags_set(vma, VM_MIXEDMAP | VM_IO | VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP);
	vma->vm_ops = &area_vm_ops;
	vma->vm_private_data = a;
	/* Populate now; whatever fails is filled by the fault handler. */
	left = npages;
	vm_insert_pages(vma, vma->vm_start, a->pages, &left);
	return 0;

err_pages:
	while (i--) {
		put_page(a->pages[i]);
		atomic64_dec(&area_pages);
	}
	me_uncharge_pinned(mm, npages);
err_arrays:
	kvfree(a->pages);
	kvfree(a->retired);
	bitmap_free(a->locks);
	kfree(a);
	return ret;
}

struct me_area *me_area_find(struct mm_struct *mm, const void *owner, u64 addr, u64 len,
			     unsigned long *first, int *err)
{
	struct vm_area_struct *vma;
	struct me_area *a = NULL;
	u64 end = addr + len, pos;

	*err = 0;
	mmap_read_lock(mm);
	vma = find_vma(mm, addr);
	if (!vma || vma->vm_start >= end)
		goto out;
	if (vma->vm_ops == &area_vm_ops && vma->vm_start <= addr) {
		a = vma->vm_private_data;
		*first = vma->vm_pgoff + ((addr - vma->vm_start) >> PAGE_SHIFT);
	}
	/* Every piece of the range must then be the same area, contiguous. */
	for (pos = vma->vm_end; ; pos = vma->vm_end) {
		bool ours = vma->vm_ops == &area_vm_ops &&
			    vma->vm_file->private_data == owner;

		if (a ? !vma_is_area(vma, a) || !ours : vma->vm_ops == &area_vm_ops) {
			*err = -EINVAL;
			a = NULL;
			goto out;
		}
		if (pos >= end)
			break;
		vma = find_vma(mm, pos);
		if (!vma || vma->vm_start >= end) {
			/* The range runs past the area into unmapped space. */
			if (a) {
				*err = -EINVAL;
				a = NULL;
			}
			goto out;
		}
		if (a && vma->vm_start != pos) {
			*err = -EINVAL;		/* a hole in the area */
			a = NULL;
			goto out;
		}
	}
	/* Registrations index pages[], locks and retired[] by page: bound it. */
	if (a && *first + ((end - 1) >> PAGE_SHIFT) - (addr >> PAGE_SHIFT) >= a->npages) {
		*err = -EINVAL;
		a = NULL;
	}
	if (a)
		kref_get(&a->ref);
out:
	mmap_read_unlock(mm);
	return a;
}

/* ---- accounting ---- */

void me_area_count_copied(void)
{
	atomic64_inc(&flip_copied);
}

void me_area_stats(struct me_area_stats *st)
{
	st->area_pages = atomic64_read(&area_pages);
	spin_lock_bh(&pool_lock);
	st->pool_pages = pool_n;
	spin_unlock_bh(&pool_lock);
	st->flipped = atomic64_read(&flipped);
	st->flip_copied = atomic64_read(&flip_copied);
	st->tlb_flushes = atomic64_read(&tlb_flushes);
}

int me_area_init(void)
{
	if (pool_max > 1048576) {
		pr_err("bad parameter: pool_max=%u (0..1048576)\n", pool_max);
		return -EINVAL;
	}
	return 0;
}

void me_area_exit(void)
{
	u64 left = atomic64_read(&area_pages);

	pool_drain();
	/* Open files pin the module, and every area holds its file. */
	if (left)
		pr_err("leak at unload: %llu receive area pages still accounted\n", left);
}
