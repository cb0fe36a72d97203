/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_RXFRAME_H
#define ME_RXFRAME_H

#include <linux/types.h>

struct page;

/* Whole pages one frame can carry (a 64 KiB frame). */
#define ME_RX_HOLES	16

/*
 * A received frame as a receive thread hands it to the engine
 * (me_core_rx_frame): the engine parses buf, but payload that arrived as
 * whole, exclusively owned pages (skb fragments) was not copied into buf:
 * those "holes" are read from their pages, or the pages are flipped into a
 * receive area (mr.c, area.c).  The skb holds the pages until the engine
 * returns; a flip takes its own reference.
 */
struct me_rx_frame {
	u8 *buf;
	u32 len;
	unsigned int nholes;
	struct {
		u32 off;		/* frame offset; PAGE_SIZE bytes */
		struct page *page;
	} holes[ME_RX_HOLES];		/* ascending offsets */
};

/* The page whose bytes start exactly at frame offset @off, or NULL. */
struct page *me_frame_hole_at(const struct me_rx_frame *fr, u32 off);
/*
 * Where the bytes from frame offset @off are: returns how many of the next
 * @len lie in one place, and sets *page (a hole, from byte *poff) or NULL
 * (in buf).
 */
u32 me_frame_segment(const struct me_rx_frame *fr, u32 off, u32 len, struct page **page,
		     u32 *poff);
/* Fills the holes into buf (the engine copies the frame whole). */
void me_frame_fill(struct me_rx_frame *fr);

#endif /* ME_RXFRAME_H */
