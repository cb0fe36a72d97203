/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_STAGE_H
#define ME_STAGE_H

#include <linux/types.h>

struct me_mr;
struct me_net;
struct page;

/*
 * A write's payload copied at post into pages of its own (stage.c), laid
 * out as in the source region: pages[0] holds the region's page @first_pg,
 * so a byte keeps its offset within its page.
 */
struct me_stage {
	struct page **pages;
	u32 npages;
	unsigned long first_pg;
};

/* Copies [off, off + len) of @mr if this namespace's links want it; else leaves @st empty. */
void me_stage_fill(struct me_net *mn, struct me_stage *st, const struct me_mr *mr, u64 off,
		   u32 len);
void me_stage_release(struct me_net *mn, struct me_stage *st);
/*
 * The staged page holding byte @pos of the region's page layout for a
 * frame carrying @n bytes of it, with a reference for the frame; a whole
 * page (@n == PAGE_SIZE) is handed over and not staged any more.  NULL if
 * there is none (then the frame copies the piece itself).
 * Under the transmit entry's lock: a page is carried whole by one entry.
 */
struct page *me_stage_take(struct me_stage *st, u64 pos, u32 n);
/* Pages staged now, all namespaces. */
u64 me_stage_pages(void);
/* Is staging on (tx_stage_kb): are page flips over veth wanted? */
bool me_stage_on(void);

#endif
