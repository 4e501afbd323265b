/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Page bitmaps (bit i is map[i / 8] >> (i % 8)), walked and shifted eight
 * bytes at a time: a region may be terabytes with a handful of pages in
 * use, and its mm events (a drop, a cut) must not cost npfd a pass bit by
 * bit over all of it (a 1 TiB region's MADV_DONTNEED held every other
 * client for 0.4 s, 1.6 s with a budget; review).
 */
#ifndef NPFD_BITMAP_H
#define NPFD_BITMAP_H

#include <stdbool.h>
#include <string.h>
#include <linux/types.h>

static inline bool bitmap_test(const __u8 *map, __u64 i)
{
	return map && (map[i / 8] >> (i % 8)) & 1;
}

/* Eight bytes of map from byte j, bit k of the result being bit 8j + k of the map. */
static inline __u64 bitmap_word(const __u8 *map, __u64 j)
{
	__u64 w;

	memcpy(&w, map + j, sizeof(w));
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	w = __builtin_bswap64(w);
#endif
	return w;
}

static inline void bitmap_put_word(__u8 *map, __u64 j, __u64 w)
{
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	w = __builtin_bswap64(w);
#endif
	memcpy(map + j, &w, sizeof(w));
}

/* The first set bit of map at or after i, below n; n if none (or no map). */
static inline __u64 bitmap_next(const __u8 *map, __u64 i, __u64 n)
{
	while (map && i < n) {
		if (i % 64 == 0 && i + 64 <= n) {
			__u64 w = bitmap_word(map, i / 8);

			if (w)
				return i + (__u64)__builtin_ctzll(w);
			i += 64;
		} else if (bitmap_test(map, i)) {
			return i;
		} else {
			i++;
		}
	}
	return n;
}

/* Bytes of map (nbytes of them) up to and with its last nonzero one: 0 if none. */
static inline __u64 bitmap_used_bytes(const __u8 *map, __u64 nbytes)
{
	__u64 j = nbytes;

	while (j % 8 && j && !map[j - 1])
		j--;
	if (j % 8)
		return j;
	while (j >= 8 && !bitmap_word(map, j - 8))
		j -= 8;
	while (j && !map[j - 1])
		j--;
	return j;
}

/*
 * Byte j of map becomes v, or word j (eight bytes) becomes w, written only
 * if that changes it: a huge region's map is mostly memory never touched,
 * which reads as the kernel's zero page until something writes it, and
 * writing zeros over zeros would make all of it npfd's.
 */
static inline void bitmap_put_byte_changed(__u8 *map, __u64 j, __u8 v)
{
	if (map[j] != v)
		map[j] = v;
}

static inline void bitmap_put_word_changed(__u8 *map, __u64 j, __u64 w)
{
	if (bitmap_word(map, j) != w)
		bitmap_put_word(map, j, w);
}

/* Bytes [from, to) of map cleared, written only where not zero. */
static inline void bitmap_clear_bytes(__u8 *map, __u64 from, __u64 to)
{
	for (; from < to && from % 8; from++)
		bitmap_put_byte_changed(map, from, 0);
	for (; from + 8 <= to; from += 8)
		bitmap_put_word_changed(map, from, 0);
	for (; from < to; from++)
		bitmap_put_byte_changed(map, from, 0);
}

/*
 * Bits [shift, nbits) of map move down to [0, nbits - shift), the top
 * `shift` bits cleared; map holds nbits / 8 + 1 bytes, and no bit at
 * nbits or past is set. Only bytes up to the last nonzero one are looked
 * at, and only those that change are written: a client that set the last
 * bit of a 1 TiB region's maps would otherwise make each head cut write
 * them all (224 MiB for a 1 TiB region's maps).
 */
static inline void bitmap_shift_down(__u8 *map, __u64 nbits, __u64 shift)
{
	__u64 nbytes = map ? bitmap_used_bytes(map, nbits / 8 + 1) : 0, q = shift / 8, j;
	unsigned int r = (unsigned int)(shift % 8);

	if (!nbytes)
		return;
	if (shift >= 8 * nbytes) {
		bitmap_clear_bytes(map, 0, nbytes);
		return;
	}
	/* forward: each word is read (and the byte after it) before it is written */
	for (j = 0; j + q + 9 <= nbytes; j += 8)
		bitmap_put_word_changed(map, j,
					r ? (bitmap_word(map, j + q) >> r) |
							((__u64)map[j + q + 8] << (64 - r)) :
					    bitmap_word(map, j + q));
	for (; j + q + 1 < nbytes; j++)
		bitmap_put_byte_changed(map, j,
					(__u8)((map[j + q] >> r) | (map[j + q + 1] << (8 - r))));
	bitmap_put_byte_changed(map, j, (__u8)(map[j + q] >> r));
	/* bits at nbits and past are never set: what moved down from there is zeros */
	bitmap_clear_bytes(map, nbytes - q, nbytes);
}

#endif
