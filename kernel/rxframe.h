/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ME_RXFRAME_H
#define ME_RXFRAME_H

#include <linux/types.h>

struct page;

/* Fragments one frame can leave in place (the rest is copied whole). */
#define ME_RX_SEGS	18

/*
 * A received data frame as a receive thread hands it to the engine
 * (me_core_rx_frame): the engine parses buf, which holds the frame's
 * linear part and at least its header, but the payload the skb carries in
 * page fragments was not copied into buf: those "segments" are read from
 * their pages by placement (mr.c), and a segment that is a whole page
 * nobody else holds may instead be flipped into a receive area (area.c).
 * The skb holds the pages until the engine returns; a flip takes its own
 * reference.
 */
struct me_rx_frame {
	u8 *buf;
	u32 len;
	unsigned int nsegs;
	struct {
		u32 off;		/* frame offset of the first byte */
		u32 len;
		u32 poff;		/* where it starts in page (may pass its end: compound) */
		bool whole;		/* a whole order-0 page at 0, the skb's alone */
		bool flip;		/* whole, and flips are on */
		struct page *page;
	} segs[ME_RX_SEGS];		/* ascending, disjoint, all at or past the header */
};

/* The flippable page whose bytes start exactly at frame offset @off, or NULL. */
struct page *me_frame_flip_page_at(const struct me_rx_frame *fr, u32 off);
/*
 * Where the bytes from frame offset @off are: returns how many of the next
 * @len lie in one place, and sets *page (a segment's page, from byte
 * *poff, never past that page's end) or NULL (in buf).
 */
u32 me_frame_segment(const struct me_rx_frame *fr, u32 off, u32 len, struct page **page,
		     u32 *poff);
/* Copies the segments into buf (the engine copies the frame whole). */
void me_frame_fill(struct me_rx_frame *fr);

#endif /* ME_RXFRAME_H */
