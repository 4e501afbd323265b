// SPDX-License-Identifier: GPL-2.0
/*
 * Page bitmaps with a summary (bitmap.h): walks and shifts go a block at a
 * time over the blocks the summary names, eight bytes at a time inside one.
 */
#include <stdlib.h>
#include <string.h>
#include "bitmap.h"

#define BLOCK_BYTES (BITMAP_BLOCK_BITS / 8)

struct bitmap *bitmap_new(__u64 nbits)
{
	__u64 nblocks = nbits / BITMAP_BLOCK_BITS + 1;
	struct bitmap *m;

	/* a region is at most 2^52 pages: nothing here overflows */
	m = calloc(1, sizeof(*m) + nblocks * BLOCK_BYTES + (nblocks / 64 + 1) * sizeof(__u64));
	if (!m)
		return NULL;
	m->nbits = nbits;
	m->nblocks = nblocks;
	m->sum = (__u64 *)(m->bits + nblocks * BLOCK_BYTES);
	return m;
}

void bitmap_free(struct bitmap *m)
{
	free(m);
}

static __u64 nbytes(const struct bitmap *m)
{
	return m->nblocks * BLOCK_BYTES;
}

/* Eight bytes of the bits from byte j, bit k of the result being bit 8j + k; zeros past the end. */
static __u64 word_at(const struct bitmap *m, __u64 j)
{
	__u64 w = 0, k;

	if (j + 8 <= nbytes(m)) {
		memcpy(&w, m->bits + j, sizeof(w));
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
		w = __builtin_bswap64(w);
#endif
		return w;
	}
	for (k = 0; k < 8 && j + k < nbytes(m); k++)
		w |= (__u64)m->bits[j + k] << (8 * k);
	return w;
}

/* Word at byte j (within the map) becomes w, written only if that changes it. */
static void put_word_changed(struct bitmap *m, __u64 j, __u64 w)
{
	if (word_at(m, j) == w)
		return;
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	w = __builtin_bswap64(w);
#endif
	memcpy(m->bits + j, &w, sizeof(w));
}

static bool sum_test(const struct bitmap *m, __u64 b)
{
	return (m->sum[b / 64] >> (b % 64)) & 1;
}

static void sum_put(struct bitmap *m, __u64 b, bool on)
{
	if (sum_test(m, b) == on)
		return;
	if (on)
		m->sum[b / 64] |= 1ULL << (b % 64);
	else
		m->sum[b / 64] &= ~(1ULL << (b % 64));
}

/* The first block at or after b the summary names; nblocks if none. */
static __u64 sum_next(const struct bitmap *m, __u64 b)
{
	while (b < m->nblocks) {
		__u64 w = m->sum[b / 64] >> (b % 64);

		if (w)
			return b + (__u64)__builtin_ctzll(w) < m->nblocks ?
				       b + (__u64)__builtin_ctzll(w) :
				       m->nblocks;
		b = (b / 64 + 1) * 64;
	}
	return m->nblocks;
}

static bool block_empty(const struct bitmap *m, __u64 b)
{
	__u64 j;

	for (j = b * BLOCK_BYTES; j < (b + 1) * BLOCK_BYTES; j += 8)
		if (word_at(m, j))
			return false;
	return true;
}

__u64 bitmap_next(struct bitmap *m, __u64 i, __u64 n)
{
	__u64 lim;

	if (!m)
		return n;
	lim = n < m->nbits ? n : m->nbits;
	while (i < lim) {
		__u64 b = i / BITMAP_BLOCK_BITS, end, k;

		if (!sum_test(m, b)) {
			b = sum_next(m, b + 1);
			if (b >= m->nblocks)
				return n;
			i = b * BITMAP_BLOCK_BITS;
			continue;
		}
		end = (b + 1) * BITMAP_BLOCK_BITS;
		for (k = i / 64; k * 64 < end && k * 64 < lim; k++) {
			__u64 w = word_at(m, 8 * k);

			if (k == i / 64)
				w &= ~0ULL << (i % 64);
			if (w) {
				__u64 f = 64 * k + (__u64)__builtin_ctzll(w);

				return f < lim ? f : n;
			}
		}
		/* looked at to its end and found nothing: it may be empty (bitmap_clear() left its mark) */
		if (end <= lim && block_empty(m, b))
			sum_put(m, b, false);
		i = end;
	}
	return n;
}

void bitmap_set_range(struct bitmap *m, __u64 lo, __u64 hi)
{
	__u64 b, i;

	if (!m)
		return;
	hi = hi < m->nbits ? hi : m->nbits;
	if (lo >= hi)
		return;
	for (b = lo / BITMAP_BLOCK_BITS; b <= (hi - 1) / BITMAP_BLOCK_BITS; b++)
		sum_put(m, b, true);
	for (i = lo; i < hi && i % 8; i++)
		m->bits[i / 8] |= (__u8)(1 << (i % 8));
	memset(m->bits + i / 8, 0xff, (hi - i) / 8);
	for (i += (hi - i) / 8 * 8; i < hi; i++)
		m->bits[i / 8] |= (__u8)(1 << (i % 8));
}

void bitmap_fill(struct bitmap *m)
{
	if (m)
		bitmap_set_range(m, 0, m->nbits);
}

void bitmap_clear_all(struct bitmap *m)
{
	__u64 b, j;

	if (!m)
		return;
	for (b = sum_next(m, 0); b < m->nblocks; b = sum_next(m, b + 1)) {
		for (j = b * BLOCK_BYTES; j < (b + 1) * BLOCK_BYTES; j += 8)
			put_word_changed(m, j, 0);
		sum_put(m, b, false);
	}
}

/*
 * In place, front to back: destination block d is made of bytes from
 * source blocks d + qb and d + qb + 1 (qb: the shift in whole blocks),
 * which no earlier destination block wrote. Only blocks where a
 * destination or its sources may hold a set bit are looked at: a cut of a
 * huge region whose first and last pages are set costs two blocks, not
 * its map (tests/unit/bitmap.c).
 */
void bitmap_shift_down(struct bitmap *m, __u64 shift)
{
	__u64 q, qb, d, nd, ns, nb;
	unsigned int r;

	if (!m || !shift)
		return;
	if (shift >= m->nbits) {
		bitmap_clear_all(m);
		return;
	}
	q = shift / 8;
	r = (unsigned int)(shift % 8);
	qb = q / BLOCK_BYTES;
	nb = m->nblocks;
	nd = sum_next(m, 0);
	ns = sum_next(m, qb);
	for (d = 0;; d++) {
		__u64 from, j;
		bool any = false;

		if (nd < d)
			nd = sum_next(m, d);
		if (ns < d + qb)
			ns = sum_next(m, d + qb);
		/* source block ns feeds destinations ns - qb - 1 and ns - qb */
		from = ns >= nb ? nb : ns > d + qb ? ns - qb - 1 : d;
		d = nd < from ? nd : from;
		if (d >= nb)
			break;
		for (j = d * BLOCK_BYTES; j < (d + 1) * BLOCK_BYTES; j += 8) {
			__u64 w = word_at(m, j + q);

			if (r)
				w = (w >> r) | (word_at(m, j + q + 8) << (64 - r));
			put_word_changed(m, j, w);
			any |= w != 0;
		}
		sum_put(m, d, any);
	}
}
