// SPDX-License-Identifier: GPL-2.0
/*
 * Transmit staging: a write's payload copied at post, in the posting
 * task, into pages a receive area can flip (off by default).
 *
 * Over a veth a frame goes by reference untracked (link.c): the
 * receiver's placement copies its bytes straight from the sender's pinned
 * pages, one copy in all, but pages that a process maps cannot be flipped
 * into a receive area.  With tx_stage_kb, a namespace all of whose links
 * are veths copies each write of a page or more here instead, into pool
 * pages laid out as the region's, and its frames carry those with
 * references of their own.  A page a frame carries whole is handed to
 * that frame (no other frame carries a byte of it), so the receiver may
 * flip it into a receive area; should the frame go again, its
 * retransmission copies that piece anew (link.c).  So no frame of a
 * staged write refers to the region, and the write completes without
 * waiting for any frame.  Into an area that flips them that is one copy
 * per byte, the sender's; into pinned memory two, where an untracked
 * frame costs one.  (Staging came first: a tracked frame's pages were
 * copied by the veth in whatever context transmitted, mostly the
 * receiver's CPU handling the ack (benchmarks.md, 2026-11-28), and
 * staging moved that copy to the poster.)  On links that send by
 * reference to hardware the copy would be one too many: only a namespace
 * all of whose links are veths stages, up to tx_stage_kb of payload at a
 * time.
 */
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>

#include "area.h"
#include "engine.h"
#include "mr.h"
#include "netns.h"
#include "stage.h"

static unsigned int tx_stage_kb;
module_param(tx_stage_kb, uint, 0444);
MODULE_PARM_DESC(tx_stage_kb,
		 "Write payload copied at post into pages a receive area can flip, not sent by reference, per namespace, while every link attached is a veth, KiB (default 0: never; 16384 for page flips over veth)");

/* Pages staged, all namespaces (me_query.staged_pages). */
static atomic64_t staged_pages = ATOMIC64_INIT(0);

u64 me_stage_pages(void)
{
	return atomic64_read(&staged_pages);
}

bool me_stage_on(void)
{
	return tx_stage_kb;
}

static bool stage_wanted(struct me_net *mn, u32 len)
{
	unsigned int links = READ_ONCE(mn->nr_links);

	/* Frames below the zero-copy size are copied into the entry anyway. */
	return tx_stage_kb && len >= PAGE_SIZE && me_engine_zc_min() &&
	       len >= me_engine_zc_min() && links && READ_ONCE(mn->nr_links_copy) == links;
}

void me_stage_fill(struct me_net *mn, struct me_stage *st, const struct me_mr *mr, u64 off,
		   u32 len)
{
	u64 pos = (mr->addr & ~PAGE_MASK) + off, end = pos + len;
	unsigned long first, n, i;

	st->pages = NULL;
	st->npages = 0;
	if (!stage_wanted(mn, len))
		return;
	first = pos >> PAGE_SHIFT;
	n = ((end - 1) >> PAGE_SHIFT) - first + 1;
	if (atomic64_add_return(n << PAGE_SHIFT, &mn->staged) > (u64)tx_stage_kb << 10)
		goto unbudget;
	st->pages = kvcalloc(n, sizeof(*st->pages), GFP_KERNEL_ACCOUNT);
	if (!st->pages)
		goto unbudget;
	st->first_pg = first;
	st->npages = n;		/* budgeted; pages not filled yet are NULL */
	for (i = 0; i < n; i++) {
		u64 from = max(pos, (u64)(first + i) << PAGE_SHIFT);
		u64 to = min(end, (u64)(first + i + 1) << PAGE_SHIFT);
		struct page *page = me_pool_get(GFP_KERNEL);
		void *va;
		int err;

		if (!page)
			goto fail;
		st->pages[i] = page;
		atomic64_inc(&staged_pages);
		va = kmap_local_page(page);
		err = me_mr_read(mr, off + (from - pos), va + (from & ~PAGE_MASK), to - from);
		kunmap_local(va);
		if (err)
			goto fail;
		cond_resched();
	}
	return;

fail:
	me_stage_release(mn, st);	/* sent by reference instead */
	return;
unbudget:
	atomic64_sub(n << PAGE_SHIFT, &mn->staged);
}

void me_stage_release(struct me_net *mn, struct me_stage *st)
{
	u32 i;

	if (!st->pages)
		return;
	for (i = 0; i < st->npages; i++)
		if (st->pages[i]) {
			me_pool_put(st->pages[i]);
			atomic64_dec(&staged_pages);
		}
	atomic64_sub((u64)st->npages << PAGE_SHIFT, &mn->staged);
	kvfree(st->pages);
	st->pages = NULL;
	st->npages = 0;
}

struct page *me_stage_take(struct me_stage *st, u64 pos, u32 n)
{
	unsigned long pg = pos >> PAGE_SHIFT;
	struct page *page;

	if (!st->pages || pg < st->first_pg || pg - st->first_pg >= st->npages)
		return NULL;
	if (n == PAGE_SIZE) {
		page = xchg(&st->pages[pg - st->first_pg], NULL);
		if (page)
			atomic64_dec(&staged_pages);
		return page;
	}
	page = READ_ONCE(st->pages[pg - st->first_pg]);
	if (page)
		get_page(page);
	return page;
}
