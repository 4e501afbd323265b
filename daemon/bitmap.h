/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Page bitmaps with a summary. A region may be 64 TiB with a handful of
 * pages in use, and its mm events (a drop, a cut) must not cost npfd a walk
 * over all of its map: 2 GiB of bits for 64 TiB, which held every other
 * client 0.37 s per MADV_DONTNEED of the whole range (0.12 s for 8 TiB
 * with a budget, whose state is five maps). So the bits come in blocks of
 * BITMAP_BLOCK_BITS, and a summary bit per block says whether the block
 * may hold a set bit: clear, it surely holds none, and walks skip it (the
 * summary of 64 TiB is 512 KiB).
 *
 * Setting a bit sets its block's summary bit; clearing one leaves it, and
 * a walk that finds the block empty clears it then. The summary is never
 * short of a block in use -- a bit set behind its back would be a page
 * npfd no longer finds (a stored copy lost) -- so every write goes
 * through these functions: the map is opaque.
 *
 * Bit i lives in byte i / 8 at (i % 8); no bit at nbits or past is ever
 * set. Maps are written only where that changes them: a huge map is
 * mostly memory never touched, which reads as the kernel's zero page
 * until something writes it, and writing zeros over zeros would make all
 * of it npfd's.
 */
#ifndef NPFD_BITMAP_H
#define NPFD_BITMAP_H

#include <stdbool.h>
#include <linux/types.h>

#define BITMAP_BLOCK_BITS 4096ULL

struct bitmap {
	__u64 nbits;
	__u64 nblocks; /* nbits / BITMAP_BLOCK_BITS + 1: the last may be partly past nbits */
	__u64 *sum;    /* bit b (of word b / 64): block b may hold a set bit */
	__u8 bits[];   /* nblocks whole blocks */
};

/* A map of nbits, all clear; NULL when out of memory. */
struct bitmap *bitmap_new(__u64 nbits);
void bitmap_free(struct bitmap *m);

static inline bool bitmap_test(const struct bitmap *m, __u64 i)
{
	return m && i < m->nbits && (m->bits[i / 8] >> (i % 8)) & 1;
}

static inline void bitmap_set(struct bitmap *m, __u64 i)
{
	__u64 b = i / BITMAP_BLOCK_BITS;

	if (!m || i >= m->nbits)
		return;
	m->bits[i / 8] |= (__u8)(1 << (i % 8));
	if (!((m->sum[b / 64] >> (b % 64)) & 1))
		m->sum[b / 64] |= 1ULL << (b % 64);
}

static inline void bitmap_clear(struct bitmap *m, __u64 i)
{
	if (bitmap_test(m, i))
		m->bits[i / 8] &= (__u8) ~(1 << (i % 8));
}

static inline void bitmap_assign(struct bitmap *m, __u64 i, bool on)
{
	if (on)
		bitmap_set(m, i);
	else
		bitmap_clear(m, i);
}

/* The first set bit of m at or after i, below n; n if none (or no map). */
__u64 bitmap_next(struct bitmap *m, __u64 i, __u64 n);

/* Bits [lo, hi) set (below nbits); every bit set; every bit clear. */
void bitmap_set_range(struct bitmap *m, __u64 lo, __u64 hi);
void bitmap_fill(struct bitmap *m);
void bitmap_clear_all(struct bitmap *m);

/* Bits [shift, nbits) move down to [0, nbits - shift), the top `shift` bits cleared. */
void bitmap_shift_down(struct bitmap *m, __u64 shift);

#endif
