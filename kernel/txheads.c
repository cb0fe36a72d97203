// SPDX-License-Identifier: GPL-2.0
/*
 * Heads of frames sent, carved from pages each CPU keeps and reuses.
 *
 * A frame's linear part is a piece of a page.  Debian's kernels zero
 * every page the allocator hands out (init_on_alloc), so a head from a
 * fresh page costs as many bytes zeroed as it holds: for a device
 * without scatter-gather, whose frames are linear whole, every byte sent
 * is written twice more, zeroed and copied (two guests at MTU 9000:
 * clear_page_rep, under kmalloc()'s 16 KiB per frame, 8% of the
 * sender's samples).  The stack's page fragment cache reuses its page
 * only if every piece was freed by the time the page is used up, which
 * a burst of frames held for the driver never is.
 *
 * So each CPU keeps a ring of 32 KiB pages (one page where pages are
 * larger) with a reference of its own on each.  Pieces are carved from
 * one page until it is used up, each piece taking a reference that the
 * skb's free drops; then from the next page in the ring, whose frames
 * have all gone by then (its count is back to ours: it is carved again
 * without the allocator), or which is given up to its frames and
 * replaced by a fresh page.  A ring holds TXH_PAGES pages at most,
 * 256 KiB with 4 KiB pages, on each CPU that sent frames.
 */
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/skbuff.h>

#include "txheads.h"

#define TXH_ORDER	get_order(32768)
#define TXH_BYTES	(PAGE_SIZE << TXH_ORDER)
#define TXH_PAGES	8

struct txh_ring {
	struct page *page[TXH_PAGES];
	unsigned int cur;	/* the page being carved */
	unsigned int offset;	/* its next free byte */
	u64 reused;		/* pages carved again, their frames gone */
	u64 fresh;		/* pages taken from the allocator */
};

static DEFINE_PER_CPU(struct txh_ring, txh_rings);

/* The ring's next page, emptied of frames, or a fresh one; NULL: none. */
static struct page *txh_next(struct txh_ring *r)
{
	unsigned int i = (r->cur + 1) % TXH_PAGES;
	struct page *page = r->page[i];

	r->cur = i;
	r->offset = 0;
	if (page && page_ref_count(page) == 1) {
		/* Its frames' reads came before their puts: carve it again. */
		smp_acquire__after_ctrl_dep();
		WRITE_ONCE(r->reused, r->reused + 1);
		return page;
	}
	if (page)
		put_page(page);		/* the last of its frames frees it */
	page = alloc_pages(GFP_ATOMIC | __GFP_COMP | __GFP_NOWARN | __GFP_NORETRY,
			   TXH_ORDER);
	/* Not the emergency reserves: those go back as soon as they can. */
	if (page && page_is_pfmemalloc(page)) {
		put_page(page);
		page = NULL;
	}
	if (page)
		WRITE_ONCE(r->fresh, r->fresh + 1);
	r->page[i] = page;
	return page;
}

void *me_txheads_alloc(unsigned int size)
{
	struct txh_ring *r = this_cpu_ptr(&txh_rings);
	struct page *page = r->page[r->cur];
	void *data;

	if (size > TXH_BYTES)
		return NULL;
	if (!page || r->offset + size > TXH_BYTES) {
		page = txh_next(r);
		if (!page)
			return NULL;
	}
	data = page_address(page) + r->offset;
	r->offset += size;
	page_ref_inc(page);
	return data;
}

void me_txheads_stats(u64 *reused, u64 *fresh)
{
	unsigned int cpu;

	*reused = 0;
	*fresh = 0;
	for_each_possible_cpu(cpu) {
		const struct txh_ring *r = per_cpu_ptr(&txh_rings, cpu);

		*reused += READ_ONCE(r->reused);
		*fresh += READ_ONCE(r->fresh);
	}
}

void me_txheads_exit(void)
{
	unsigned int cpu, i;

	for_each_possible_cpu(cpu) {
		struct txh_ring *r = per_cpu_ptr(&txh_rings, cpu);

		for (i = 0; i < TXH_PAGES; i++) {
			if (r->page[i])
				put_page(r->page[i]);
			r->page[i] = NULL;
		}
	}
}
