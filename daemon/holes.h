/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A region's holes (region.c): parts of its range the process unmapped
 * from its middle. A region is one range, as the device's memory region
 * is; a hole keeps its addresses in that range but is not the region's: no
 * fault there is its, no page there counts as its, and another region may
 * be registered there. Kept as sorted, disjoint, non-adjacent [start, end)
 * ranges. Pure functions, apart from region.c's state, so that
 * tests/unit/holes.c can call them.
 */
#ifndef NPFD_HOLES_H
#define NPFD_HOLES_H

#include <stdbool.h>
#include <linux/types.h>

/*
 * At most this many holes a region: each is 16 bytes and every fault
 * lookup of the region walks them. Past it, a hole is not kept (region.c
 * says what that costs).
 */
#define HOLES_MAX 64

struct hole {
	__u64 start, end;
};

struct holes {
	struct hole *v;
	unsigned int n;
};

/* Is addr in a hole? */
bool holes_contain(const struct holes *h, __u64 addr);
/* Is [lo, hi) wholly inside one hole? */
bool holes_cover(const struct holes *h, __u64 lo, __u64 hi);
/*
 * [lo, hi) is a hole too: merged with the holes it overlaps or touches.
 * 0, -ENOSPC (HOLES_MAX would be passed; nothing changed) or -ENOMEM.
 */
int holes_add(struct holes *h, __u64 lo, __u64 hi);
/* [*lo, *hi) widened by the holes it overlaps or touches. */
void holes_widen(const struct holes *h, __u64 *lo, __u64 *hi);
/* Only what lies in [lo, hi) stays (the region was cut to it). */
void holes_clip(struct holes *h, __u64 lo, __u64 hi);
/* Every hole moves by delta (the region moved; unsigned, so wrapping is a move down). */
void holes_shift(struct holes *h, __u64 delta);
/*
 * The next piece of [*lo, hi) outside the holes: *lo moves past a hole it
 * is in, *piece_end is where the piece stops (hi, or the next hole). False
 * when nothing of [*lo, hi) is left. A walk:
 *   for (lo = start; holes_piece(h, &lo, end, &pe); lo = pe) ...
 */
bool holes_piece(const struct holes *h, __u64 *lo, __u64 hi, __u64 *piece_end);
void holes_free(struct holes *h);

#endif
