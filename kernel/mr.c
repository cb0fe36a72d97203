// SPDX-License-Identifier: GPL-2.0
/*
 * Memory registration: user buffers pinned long-term so the receive path can
 * place payload into them from any context (no mm needed to copy into a
 * pinned page).
 *
 * Pinned pages are charged to the registering process's mm->pinned_vm
 * (VmPin) against RLIMIT_MEMLOCK, as RDMA's ib_umem does; the mm is held
 * with mmgrab() so the charge can be returned even after the process exited.
 * The module counts every pinned page and region itself and reports any
 * left at unload.
 *
 * A range inside a receive area (area.c) registers the area's own pages
 * instead: nothing is pinned, and placement may flip whole pages in
 * (me_mr_place) rather than copy them.
 */
#include <linux/atomic.h>
#include <linux/capability.h>
#include <linux/mm.h>
#include <linux/random.h>
#include <linux/rcupdate.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/highmem.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>

#include "core/me_plat.h"
#include "area.h"
#include "chardev.h"
#include "mr.h"
#include "rxframe.h"
#include "netns.h"
#include "uapi/multiedge.h"

/* Pages pinned per pin_user_pages_fast() call: bounds the latency of one. */
#define PIN_CHUNK	512

static bool rx_flip = true;
module_param(rx_flip, bool, 0444);
MODULE_PARM_DESC(rx_flip, "Place whole payload pages into receive areas by page flip (default Y; N: always copy)");

static char *flip_tlb = "lazy";
module_param(flip_tlb, charp, 0444);
MODULE_PARM_DESC(flip_tlb, "TLB invalidation after page flips unless a region chooses: lazy (once per message, default) or eager (per page)");
static bool flip_eager;

struct me_mr_full {
	struct me_mr mr;
	struct me_file *owner;
	struct rcu_head rcu;
};

static atomic64_t pinned_pages = ATOMIC64_INIT(0);
static atomic64_t nr_regions = ATOMIC64_INIT(0);

static struct me_mr_full *full(struct me_mr *mr)
{
	return container_of(mr, struct me_mr_full, mr);
}

/* Charges @npages to @mm's pinned_vm unless that exceeds RLIMIT_MEMLOCK. */
int me_charge_pinned(struct mm_struct *mm, unsigned long npages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	u64 pinned = atomic64_add_return(npages, &mm->pinned_vm);

	if (pinned > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return -ENOMEM;
	}
	return 0;
}

void me_uncharge_pinned(struct mm_struct *mm, unsigned long npages)
{
	atomic64_sub(npages, &mm->pinned_vm);
}

bool me_mr_flip_enabled(void)
{
	return rx_flip;
}

int me_mr_init(void)
{
	if (!strcmp(flip_tlb, "eager")) {
		flip_eager = true;
	} else if (strcmp(flip_tlb, "lazy")) {
		pr_err("bad parameter: flip_tlb=%s (lazy or eager)\n", flip_tlb);
		return -EINVAL;
	}
	return 0;
}

static int pin_range(struct me_mr *mr)
{
	unsigned long start = mr->addr & PAGE_MASK;
	unsigned long done = 0;
	int n;

	while (done < mr->npages) {
		n = pin_user_pages_fast(start + (done << PAGE_SHIFT),
					min_t(unsigned long, mr->npages - done, PIN_CHUNK),
					FOLL_WRITE | FOLL_LONGTERM, mr->pages + done);
		if (n <= 0) {
			if (done)
				unpin_user_pages(mr->pages, done);
			return n ? n : -EFAULT;
		}
		done += n;
		if (fatal_signal_pending(current)) {
			unpin_user_pages(mr->pages, done);
			return -EINTR;
		}
		cond_resched();
	}
	return 0;
}

/* Frees a region nobody can reach any more. */
static void mr_destroy(struct me_mr *mr)
{
	if (mr->area) {
		me_area_put(mr->area);
	} else {
		/* Peers may have written into them: let the mm know. */
		unpin_user_pages_dirty_lock(mr->pages, mr->npages, true);
		me_uncharge_pinned(mr->mm, mr->npages);
		atomic64_sub(mr->npages, &pinned_pages);
	}
	atomic64_dec(&nr_regions);
	mmdrop(mr->mm);
	kvfree(mr->pages);
	pr_debug("region %u destroyed (%lu pages)\n", mr->id, mr->npages);
	/* me_mr_get_any() may still be looking at it under RCU. */
	kfree_rcu(full(mr), rcu);
}

/* Called with the region already unreachable for new users. */
static void mr_retire(struct me_mr *mr)
{
	me_mr_put(mr);				/* the base reference */
	wait_for_completion(&mr->released);	/* in-flight users done */
	mr_destroy(mr);
}

long me_mr_reg(struct me_file *f, void __user *uarg)
{
	struct me_net *mn = me_net(f->net);
	struct me_mr_reg req;
	struct me_mr_full *mf;
	struct me_mr *mr;
	u64 first, last;
	long usize;
	int ret;

	usize = me_copy_arg_in(&req, sizeof(req), ME_MR_REG_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;
	if (req.access & ~ME_ACCESS_ALL || req.flags & ~ME_MR_FLAGS_ALL)
		return -EOPNOTSUPP;
	if (req.__reserved)
		return -EINVAL;
	if ((req.flags & ME_MR_TLB_EAGER) && (req.flags & ME_MR_TLB_LAZY))
		return -EINVAL;
	if (!req.length || req.length > ME_MR_MAX_LENGTH || req.addr + req.length < req.addr)
		return -EINVAL;
	if (!current->mm)
		return -EFAULT;

	mutex_lock(&f->lock);
	if (f->nr_mrs >= ME_MR_MAX_PER_FILE) {
		mutex_unlock(&f->lock);
		return -ENOSPC;
	}
	f->nr_mrs++;	/* reserved; undone on failure */
	mutex_unlock(&f->lock);

	ret = -ENOMEM;
	mf = kzalloc(sizeof(*mf), GFP_KERNEL);
	if (!mf)
		goto err_reserve;
	mr = &mf->mr;
	mf->owner = f;
	mr->mn = mn;
	mr->access = req.access;
	mr->addr = req.addr;
	mr->length = req.length;
	first = req.addr >> PAGE_SHIFT;
	last = (req.addr + req.length - 1) >> PAGE_SHIFT;
	mr->npages = last - first + 1;
	mr->flags = req.flags;
	mr->area = me_area_find(current->mm, f, req.addr, req.length, &mr->area_first, &ret);
	if (ret)
		goto err_free;
	mr->mm = current->mm;
	mmgrab(mr->mm);
	if (mr->area) {
		req.info = ME_MR_INFO_AREA;
	} else {
		req.info = 0;
		ret = -ENOMEM;
		mr->pages = kvmalloc_array(mr->npages, sizeof(*mr->pages), GFP_KERNEL);
		if (!mr->pages)
			goto err_mm;
		ret = me_charge_pinned(mr->mm, mr->npages);
		if (ret)
			goto err_mm;
		ret = pin_range(mr);
		if (ret)
			goto err_charge;
		atomic64_add(mr->npages, &pinned_pages);
	}
	atomic64_inc(&nr_regions);

	/* A caller that cannot see key_hi gets a key it can name whole. */
	mr->key = usize < offsetofend(struct me_mr_reg, key_hi) ? get_random_u32() :
		  get_random_u64();
	refcount_set(&mr->ref, 1);
	init_completion(&mr->released);

	mutex_lock(&f->lock);
	ret = xa_alloc_cyclic(&mn->mrs, &mr->id, mr, XA_LIMIT(1, U32_MAX - 1), &mn->mr_next,
			      GFP_KERNEL);
	if (ret < 0) {
		mutex_unlock(&f->lock);
		goto err_counted;
	}
	list_add_tail(&mr->file_node, &f->mrs);
	mutex_unlock(&f->lock);
	pr_debug("region %u created (%lu pages, access 0x%x)\n", mr->id, mr->npages, mr->access);

	req.region = mr->id;
	req.key = lower_32_bits(mr->key);
	req.key_hi = upper_32_bits(mr->key);
	if (copy_to_user(uarg, &req, min_t(size_t, usize, sizeof(req)))) {
		/* The caller cannot know the region: take it back. */
		mutex_lock(&f->lock);
		xa_erase(&mn->mrs, mr->id);
		list_del(&mr->file_node);
		f->nr_mrs--;
		mutex_unlock(&f->lock);
		mr_retire(mr);
		return -EFAULT;
	}
	return 0;

err_counted:
	atomic64_dec(&nr_regions);
	if (mr->area)
		goto err_mm;
	atomic64_sub(mr->npages, &pinned_pages);
	unpin_user_pages(mr->pages, mr->npages);
err_charge:
	me_uncharge_pinned(mr->mm, mr->npages);
err_mm:
	if (mr->area)
		me_area_put(mr->area);
	mmdrop(mr->mm);
	kvfree(mr->pages);
err_free:
	kfree(mf);
err_reserve:
	mutex_lock(&f->lock);
	f->nr_mrs--;
	mutex_unlock(&f->lock);
	return ret;
}

long me_mr_dereg(struct me_file *f, void __user *uarg)
{
	struct me_net *mn = me_net(f->net);
	struct me_mr_dereg req;
	struct me_mr *mr;
	long usize;

	usize = me_copy_arg_in(&req, sizeof(req), ME_MR_DEREG_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;

	mutex_lock(&f->lock);
	/*
	 * Another file's region may be freed under us (RCU): look only at its
	 * owner.  Ours cannot go away: only this file, under f->lock, removes
	 * them.
	 */
	rcu_read_lock();
	mr = xa_load(&mn->mrs, req.region);
	if (mr && full(mr)->owner != f)
		mr = NULL;
	rcu_read_unlock();
	if (!mr) {
		mutex_unlock(&f->lock);
		return -ENOENT;
	}
	xa_erase(&mn->mrs, mr->id);
	list_del(&mr->file_node);
	f->nr_mrs--;
	mutex_unlock(&f->lock);

	mr_retire(mr);
	return 0;
}

void me_mr_release_file(struct me_file *f)
{
	struct me_net *mn = me_net(f->net);
	struct me_mr *mr;

	for (;;) {
		mutex_lock(&f->lock);
		mr = list_first_entry_or_null(&f->mrs, struct me_mr, file_node);
		if (mr) {
			xa_erase(&mn->mrs, mr->id);
			list_del(&mr->file_node);
			f->nr_mrs--;
		}
		mutex_unlock(&f->lock);
		if (!mr)
			break;
		mr_retire(mr);
	}
}

struct me_mr *me_mr_get_any(struct me_net *mn, u32 id)
{
	struct me_mr *mr;

	rcu_read_lock();
	mr = xa_load(&mn->mrs, id);
	if (mr && !refcount_inc_not_zero(&mr->ref))
		mr = NULL;
	rcu_read_unlock();
	return mr;
}

struct me_mr *me_mr_get_owned(struct me_file *f, u32 id)
{
	struct me_mr *mr = me_mr_get_any(me_net(f->net), id);

	if (mr && full(mr)->owner != f) {
		me_mr_put(mr);
		mr = NULL;
	}
	return mr;
}

struct me_file *me_mr_owner(struct me_mr *mr)
{
	return full(mr)->owner;
}

static bool mr_in_range(const struct me_mr *mr, u64 off, u64 len)
{
	return off <= mr->length && len <= mr->length - off;
}

/*
 * The range is checked only for a peer holding the key (a prober must not
 * map region lengths); the engine tells the peer EACCES for no region, a
 * wrong key and no access alike (me_plat.h).
 */
static int remote_access(const struct me_mr *mr, u64 key, u64 off, u64 len, u32 access)
{
	if (mr->key != key)
		return -EKEYREJECTED;
	if ((mr->access & access) != access)
		return -EACCES;
	return mr_in_range(mr, off, len) ? 0 : -ERANGE;
}

struct me_mr *me_mr_get_remote(struct me_net *mn, u32 id, u64 key, u64 off, u64 len,
			       u32 access, int *err)
{
	struct me_mr *mr = me_mr_get_any(mn, id);

	*err = mr ? remote_access(mr, key, off, len, access) : -ENOENT;
	if (mr && *err) {
		me_mr_put(mr);
		mr = NULL;
	}
	return mr;
}

/*
 * Once per packet placed: no reference is taken, the fields read are
 * set before the region is published and it is freed after a grace
 * period (mr_destroy); one already retiring is as good as gone.
 */
int me_mr_check_remote(struct me_net *mn, u32 id, u64 key, u64 off, u64 len, u32 access)
{
	struct me_mr *mr;
	int err = -ENOENT;

	rcu_read_lock();
	mr = xa_load(&mn->mrs, id);
	if (mr && refcount_read(&mr->ref))
		err = remote_access(mr, key, off, len, access);
	rcu_read_unlock();
	return err;
}

struct me_mr *me_mr_get_range(struct me_net *mn, u32 id, u64 off, u64 len, int *err)
{
	struct me_mr *mr = me_mr_get_any(mn, id);

	*err = mr ? 0 : -ENOENT;
	if (mr && !mr_in_range(mr, off, len)) {
		me_mr_put(mr);
		*err = -ERANGE;
		mr = NULL;
	}
	return mr;
}

int me_mr_check_local(struct me_net *mn, u32 id, u64 off, u64 len)
{
	int err;
	struct me_mr *mr = me_mr_get_range(mn, id, off, len, &err);

	if (mr)
		me_mr_put(mr);
	return err;
}

struct page *me_mr_page_get(const struct me_mr *mr, unsigned long pg)
{
	if (mr->area)
		return me_area_page_get(mr->area, mr->area_first + pg);
	get_page(mr->pages[pg]);
	return mr->pages[pg];
}

/* Copies within page @pg of the region (pinned: no lock needed). */
static void page_copy(const struct me_mr *mr, unsigned long pg, u32 in_page, void *buf, u32 n,
		      bool to_region)
{
	if (mr->area)
		me_area_copy(mr->area, mr->area_first + pg, in_page, buf, n, to_region);
	else
		me_page_copy(mr->pages[pg], in_page, buf, n, to_region);
}

/* Copies between @buf and [off, off + len) of a region held by the caller. */
static int mr_copy(const struct me_mr *mr, u64 off, void *buf, u32 len, bool to_region)
{
	u64 pos;

	if (off > mr->length || len > mr->length - off)
		return -ERANGE;
	/*
	 * Page by page through short-lived local mappings: valid in any
	 * context, whatever process (if any) is current.
	 */
	pos = (mr->addr & ~PAGE_MASK) + off;
	while (len) {
		u32 in_page = pos & ~PAGE_MASK;
		u32 n = min_t(u32, len, PAGE_SIZE - in_page);

		page_copy(mr, pos >> PAGE_SHIFT, in_page, buf, n, to_region);
		buf += n;
		pos += n;
		len -= n;
	}
	return 0;
}

int me_mr_read(const struct me_mr *mr, u64 off, void *dst, u32 len)
{
	return mr_copy(mr, off, dst, len, false);
}

int me_mr_write(struct me_mr *mr, u64 off, const void *src, u32 len)
{
	return mr_copy(mr, off, (void *)src, len, true);
}

/*
 * Each piece of a source page is mapped and copied once, straight into
 * the destination page (a receive area's under its page lock, so never
 * into a page being flipped away).  A source area page is read through
 * the reference me_mr_page_get() took: a flip meanwhile leaves it whole.
 */
int me_mr_transfer(struct me_mr *dst, u64 doff, const struct me_mr *src, u64 soff, u32 len)
{
	u64 dpos, spos;

	if (doff > dst->length || len > dst->length - doff ||
	    soff > src->length || len > src->length - soff)
		return -ERANGE;
	dpos = (dst->addr & ~PAGE_MASK) + doff;
	spos = (src->addr & ~PAGE_MASK) + soff;
	while (len) {
		u32 s_in = spos & ~PAGE_MASK, d_in = dpos & ~PAGE_MASK;
		u32 n = min_t(u32, len, PAGE_SIZE - max(s_in, d_in));
		struct page *page = me_mr_page_get(src, spos >> PAGE_SHIFT);
		u8 *va = kmap_local_page(page);

		page_copy(dst, dpos >> PAGE_SHIFT, d_in, va + s_in, n, true);
		kunmap_local(va);
		put_page(page);
		spos += n;
		dpos += n;
		len -= n;
		cond_resched();
	}
	return 0;
}

int me_mr_copy_from(struct me_net *mn, u32 id, u64 off, void *dst, u32 len)
{
	int err;
	struct me_mr *mr = me_mr_get_range(mn, id, off, len, &err);

	if (!mr)
		return err;
	err = me_mr_read(mr, off, dst, len);
	me_mr_put(mr);
	return err;
}

/*
 * Copies payload at frame offset @fo (src) into page @pg of the region:
 * from the frame's buffer, or straight from the skb's pages (segments).
 */
static void place_copy(struct me_mr *mr, unsigned long pg, u32 in_page, const void *src,
		       u32 n, const struct me_rx_frame *fr, u32 fo)
{
	u32 done = 0;

	if (!fr || !fr->nsegs) {
		page_copy(mr, pg, in_page, (void *)src, n, true);
		return;
	}
	while (done < n) {
		struct page *seg;
		u32 poff, k = me_frame_segment(fr, fo + done, n - done, &seg, &poff);
		u8 *va;

		if (!seg) {
			page_copy(mr, pg, in_page + done, (void *)src + done, k, true);
		} else {
			va = kmap_local_page(seg);
			page_copy(mr, pg, in_page + done, va + poff, k, true);
			kunmap_local(va);
		}
		done += k;
	}
}

static bool may_flip(const struct me_mr *mr)
{
	return mr->area && rx_flip && !(mr->flags & ME_MR_RX_COPY);
}

static bool flip_is_eager(const struct me_mr *mr)
{
	if (mr->flags & (ME_MR_TLB_EAGER | ME_MR_TLB_LAZY))
		return mr->flags & ME_MR_TLB_EAGER;
	return flip_eager;
}

int me_mr_place_on(struct me_mr *mr, u64 off, const void *src, u32 len,
		   struct me_rx_frame *fr)
{
	bool copied = false;
	u32 fo = 0;
	u64 pos;

	if (!mr_in_range(mr, off, len))
		return -ERANGE;
	if (fr) {
		/* The engine passes payload out of the frame it was given. */
		if ((const u8 *)src < fr->buf || (const u8 *)src + len > fr->buf + fr->len)
			return -EFAULT;
		fo = (const u8 *)src - fr->buf;
	}
	pos = (mr->addr & ~PAGE_MASK) + off;
	while (len) {
		unsigned long pg = pos >> PAGE_SHIFT;
		u32 in_page = pos & ~PAGE_MASK;
		u32 n = min_t(u32, len, PAGE_SIZE - in_page);
		struct page *page = NULL;

		if (fr && n == PAGE_SIZE)
			page = me_frame_flip_page_at(fr, fo);
		if (page && may_flip(mr)) {
			get_page(page);
			me_area_flip(mr->area, mr->area_first + pg, page, flip_is_eager(mr));
		} else {
			if (n == PAGE_SIZE && may_flip(mr))
				me_area_count_copied();
			copied |= n == PAGE_SIZE;
			place_copy(mr, pg, in_page, src, n, fr, fo);
		}
		src += n;
		fo += n;
		pos += n;
		len -= n;
	}
	return copied ? ME_PLACE_COPIED : 0;
}

int me_mr_place(struct me_net *mn, u32 id, u64 off, const void *src, u32 len,
		struct me_rx_frame *fr)
{
	struct me_mr *mr = me_mr_get_any(mn, id);
	int err;

	if (!mr)
		return -ENOENT;
	err = me_mr_place_on(mr, off, src, len, fr);	/* checks the range */
	me_mr_put(mr);
	return err;
}

int me_mr_atomic_on(struct me_mr *mr, u64 off, u32 size, u32 aop, u64 operand, u64 compare,
		    u64 *old)
{
	u64 pos;

	if (!mr_in_range(mr, off, size))
		return -ERANGE;
	/* The memory, not the offset, must be aligned (so within a page). */
	pos = (mr->addr & ~PAGE_MASK) + off;
	if (pos & (size - 1))
		return -EINVAL;
	if (mr->area)
		*old = me_area_atomic(mr->area, mr->area_first + (pos >> PAGE_SHIFT),
				      pos & ~PAGE_MASK, size, aop, operand, compare);
	else
		*old = me_page_atomic(mr->pages[pos >> PAGE_SHIFT], pos & ~PAGE_MASK, size,
				      aop, operand, compare);
	return 0;
}

int me_mr_atomic(struct me_net *mn, u32 id, u64 off, u32 size, u32 aop, u64 operand,
		 u64 compare, u64 *old)
{
	int err;
	struct me_mr *mr = me_mr_get_range(mn, id, off, size, &err);

	if (!mr)
		return err;
	err = me_mr_atomic_on(mr, off, size, aop, operand, compare, old);
	me_mr_put(mr);
	return err;
}

void me_mr_done(struct me_net *mn, u32 id, u64 off, u64 len)
{
	struct me_mr *mr = me_mr_get_any(mn, id);
	u64 pos;

	if (!mr)
		return;
	if (mr->area && len && mr_in_range(mr, off, len)) {
		pos = (mr->addr & ~PAGE_MASK) + off;
		me_area_done(mr->area, mr->area_first + (pos >> PAGE_SHIFT),
			     mr->area_first + ((pos + len - 1) >> PAGE_SHIFT));
	}
	me_mr_put(mr);
}

void me_mr_put(struct me_mr *mr)
{
	if (refcount_dec_and_test(&mr->ref))
		complete(&mr->released);
}

void me_mr_net_init(struct me_net *mn)
{
	xa_init_flags(&mn->mrs, XA_FLAGS_ALLOC1);
	mn->mr_next = 1;
}

/* Every file holds its namespace, so no region outlives it. */
void me_mr_net_uninit(struct me_net *mn)
{
	xa_destroy(&mn->mrs);
}

u64 me_mr_pinned_pages(void)
{
	return atomic64_read(&pinned_pages);
}

u64 me_mr_count(void)
{
	return atomic64_read(&nr_regions);
}

void me_mr_check_unload(void)
{
	/* Open files pin the module, so at unload every region must be gone. */
	if (me_mr_count() || me_mr_pinned_pages())
		pr_err("unload with %llu regions and %llu pinned pages accounted: leak\n",
		       me_mr_count(), me_mr_pinned_pages());
}
