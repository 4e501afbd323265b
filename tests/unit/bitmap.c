// SPDX-License-Identifier: GPL-2.0
/*
 * Page bitmaps with a summary (daemon/bitmap.h): against a plain array of
 * bits handled a bit at a time, over maps of up to five blocks with bits
 * set and cleared at random (a cleared bit leaves its block's summary
 * mark), every kind of shift, walks from anywhere, ranges set, all set,
 * all cleared; and long mixed sequences of those on maps of up to 140
 * blocks, the summary checked after each. And a 1 TiB region's map (32 MiB of bits) whose first and
 * last bits are set: walked across and shifted, only what changes is
 * written and only the blocks in use are read -- the rest stays memory
 * never touched (a walk over all of it held npfd 0.37 s for 64 TiB).
 */
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "unit.h"
#include "bitmap.h"

#define MAXBITS (5 * BITMAP_BLOCK_BITS + 100)

static int bit(const __u8 *m, __u64 i)
{
	return (m[i / 8] >> (i % 8)) & 1;
}

static void put(__u8 *m, __u64 i, int on)
{
	if (on)
		m[i / 8] |= (__u8)(1 << (i % 8));
	else
		m[i / 8] &= (__u8) ~(1 << (i % 8));
}

static unsigned int bad_bits, bad_tail, bad_next;

/* m holds what ref holds, and no bit at nbits or past; walks from from to lim agree */
static void compare(struct bitmap *m, const __u8 *ref, __u64 n, __u64 from, __u64 lim)
{
	__u64 want = lim, i;

	for (i = 0; i < n; i++)
		bad_bits += bitmap_test(m, i) != bit(ref, i);
	for (i = n; i < 8 * m->nblocks * (BITMAP_BLOCK_BITS / 8); i += 1)
		bad_tail += bit(m->bits, i);
	for (i = from; i < lim && i < n; i++)
		if (bit(ref, i)) {
			want = i;
			break;
		}
	bad_next += bitmap_next(m, from, lim) != want;
}

static void random_maps(void)
{
	static __u8 ref[MAXBITS / 8 + 1], tmp[MAXBITS / 8 + 1];

	srand(1);
	for (int t = 0; t < 3000; t++) {
		__u64 n = 1 + (__u64)rand() % MAXBITS, i, shift, lo, hi;
		int density = (int[]){2, 7, 300, 5000}[t % 4];
		struct bitmap *m = bitmap_new(n);

		if (!m) {
			UT_CHECK(false, "bitmap_new(%llu): out of memory", (unsigned long long)n);
			return;
		}
		memset(ref, 0, sizeof(ref));
		for (i = 0; i < n; i++)
			if (rand() % density == 0) {
				bitmap_set(m, i);
				put(ref, i, 1);
			}
		/* clear some: their blocks keep their summary marks */
		for (i = 0; i < n; i++)
			if (bit(ref, i) && rand() % 3 == 0) {
				bitmap_clear(m, i);
				put(ref, i, 0);
			}
		compare(m, ref, n, (__u64)rand() % (n + 1), (__u64)rand() % (n + 10));
		compare(m, ref, n, 0, n);
		switch (t % 5) {
		case 0: /* under a byte, a byte, a block and more, past the end */
			shift = (__u64[]){1, 8, BITMAP_BLOCK_BITS, BITMAP_BLOCK_BITS + 13, n, n + 5}
				[rand() % 6];
			break;
		default:
			shift = (__u64)rand() % (n + 3);
		}
		memset(tmp, 0, sizeof(tmp));
		for (i = 0; i + shift < n; i++)
			put(tmp, i, bit(ref, i + shift));
		memcpy(ref, tmp, sizeof(ref));
		bitmap_shift_down(m, shift);
		compare(m, ref, n, (__u64)rand() % (n + 1), n);
		/* a range set, then a walk and another shift over it */
		lo = (__u64)rand() % (n + 1);
		hi = lo + (__u64)rand() % (n + 1 - lo + 3);
		bitmap_set_range(m, lo, hi);
		for (i = lo; i < hi && i < n; i++)
			put(ref, i, 1);
		compare(m, ref, n, (__u64)rand() % (n + 1), n);
		if (t % 7 == 0) {
			bitmap_clear_all(m);
			memset(ref, 0, sizeof(ref));
			compare(m, ref, n, 0, n);
			bitmap_fill(m);
			for (i = 0; i < n; i++)
				put(ref, i, 1);
			compare(m, ref, n, (__u64)rand() % (n + 1), n);
		}
		bitmap_free(m);
	}
	UT_EQ(bad_bits, 0, "every bit where a bit-by-bit map has it");
	UT_EQ(bad_tail, 0, "no bit set past the map's length");
	UT_EQ(bad_next, 0, "the next set bit where a bit-by-bit walk finds it");
	UT_EQ(bitmap_next(NULL, 0, 10), 10, "no map: none");
}

static unsigned int bad_summary, bad_walk;

/*
 * Every set bit's block is marked in the summary, and a walk from 0 with
 * bitmap_next() meets exactly the set bits of ref.
 */
static void check_whole(struct bitmap *m, const __u8 *ref, __u64 n)
{
	__u64 i, j = 0;

	for (i = 0; i < n; i++) {
		if (!ref[i / 8]) {
			i |= 7;
			continue;
		}
		if (!bit(ref, i))
			continue;
		bad_summary +=
			!((m->sum[i / BITMAP_BLOCK_BITS / 64] >> (i / BITMAP_BLOCK_BITS % 64)) & 1);
		j = bitmap_next(m, j, n);
		bad_walk += j != i;
		j = i + 1;
	}
	bad_walk += bitmap_next(m, j, n) != n;
}

/*
 * Long mixed sequences on one map of up to 140 blocks (its summary more
 * than a word): sparse bits near block edges set and cleared, ranges,
 * shifts near whole blocks and whole summary words, clears and fills.
 */
static void long_sequences(void)
{
	static const __u64 sizes[] = {
		0, 1, 4095, 4097, 64 * 4096 + 1, 65 * 4096 + 77, 130 * 4096 + 5};
	__u64 maxbits = 140 * BITMAP_BLOCK_BITS;
	__u8 *ref = calloc(maxbits / 8 + 1, 1), *tmp = calloc(maxbits / 8 + 1, 1);

	if (!ref || !tmp) {
		UT_CHECK(false, "out of memory");
		return;
	}
	srand(2);
	for (int t = 0; t < 40; t++) {
		__u64 n = t < 7 ? sizes[t] : (__u64)rand() % maxbits, i, k, shift, lo, hi;
		struct bitmap *m = bitmap_new(n);

		if (!m) {
			UT_CHECK(false, "bitmap_new(%llu): out of memory", (unsigned long long)n);
			break;
		}
		memset(ref, 0, maxbits / 8 + 1);
		for (int op = 0; op < 60 && n; op++) {
			switch (rand() % 6) {
			case 0: /* sparse bits, near block edges */
				for (k = 0; k < 20; k++) {
					i = ((__u64)rand() % (n / BITMAP_BLOCK_BITS + 1)) *
						    BITMAP_BLOCK_BITS +
					    (__u64)rand() % 5 - 2;
					if (i < n) {
						bitmap_set(m, i);
						put(ref, i, 1);
					}
				}
				break;
			case 1: /* some cleared: their marks stay */
				for (i = bitmap_next(m, (__u64)rand() % n, n); i < n;
				     i = bitmap_next(m, i + 1 + (__u64)rand() % 5000, n))
					if (rand() % 2) {
						bitmap_clear(m, i);
						put(ref, i, 0);
					}
				break;
			case 2:
				lo = (__u64)rand() % n;
				hi = lo + (__u64)rand() % 9000;
				bitmap_set_range(m, lo, hi);
				for (i = lo; i < hi && i < n; i++)
					put(ref, i, 1);
				break;
			case 3: /* around whole blocks and whole summary words of blocks */
				shift = (__u64[]){1,
						  4095,
						  4096,
						  4097,
						  64 * 4096 - 2,
						  64 * 4096 + 3,
						  (__u64)rand() % n}[rand() % 7];
				memset(tmp, 0, maxbits / 8 + 1);
				for (i = 0; i + shift < n; i++)
					if (bit(ref, i + shift))
						put(tmp, i, 1);
				memcpy(ref, tmp, maxbits / 8 + 1);
				bitmap_shift_down(m, shift);
				break;
			case 4:
				if (rand() % 4 == 0) {
					bitmap_clear_all(m);
					memset(ref, 0, maxbits / 8 + 1);
				}
				break;
			default:
				if (rand() % 8 == 0) {
					bitmap_fill(m);
					for (i = 0; i < n; i++)
						put(ref, i, 1);
				}
			}
			check_whole(m, ref, n);
		}
		check_whole(m, ref, n);
		bitmap_free(m);
	}
	free(ref);
	free(tmp);
	UT_EQ(bad_summary, 0, "every set bit's block marked in the summary");
	UT_EQ(bad_walk, 0, "a walk meets the set bits, and only them");
}

/* Pages of [p, p + len): resident (read or written: the zero page counts), and the process's own. */
static void pages_of(const void *p, size_t len, unsigned long *resident, unsigned long *own)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p / pg * pg, end = ((uintptr_t)p + len + pg - 1) / pg * pg;
	size_t n = (end - a) / pg, k;
	unsigned char *vec = malloc(n);
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	__u64 e;

	*resident = *own = ~0UL;
	if (!vec || fd < 0 || mincore((void *)a, end - a, vec)) {
		free(vec);
		if (fd >= 0)
			close(fd);
		return;
	}
	*resident = *own = 0;
	for (k = 0; k < n; k++) {
		*resident += vec[k] & 1;
		if (pread(fd, &e, sizeof(e), (off_t)((a / pg + k) * sizeof(e))) != sizeof(e)) {
			*own = ~0UL;
			break;
		}
		*own += (e >> 56) & 1; /* "exclusively mapped": not the zero page */
	}
	free(vec);
	close(fd);
}

/*
 * A 1 TiB region's map: its first and last bits set, walked across, then
 * shifted down by a page and by 4095 more (the last bit moves down two
 * words, the first one out). Only the blocks holding them are read, and
 * only the pages around them written: the map's 8192 pages of bits and
 * its summary's 2 stay as they were, never touched.
 */
static void huge_map(void)
{
	__u64 nbits = 1ULL << 28, i;
	struct bitmap *m = bitmap_new(nbits);
	unsigned long resident, own;
	size_t bytes;

	if (!m) {
		UT_CHECK(false, "a 1 TiB region's map: out of memory");
		return;
	}
	bytes = sizeof(*m) + m->nblocks * (BITMAP_BLOCK_BITS / 8) + (m->nblocks / 64 + 1) * 8;
	bitmap_set(m, 0);
	bitmap_set(m, nbits - 1);
	i = bitmap_next(m, 1, nbits);
	UT_EQ(i, nbits - 1, "the walk from the second bit finds the last");
	bitmap_clear(m, nbits - 1);
	UT_EQ(bitmap_next(m, 1, nbits), nbits, "cleared, it is found no more");
	bitmap_set(m, nbits - 1);
	bitmap_shift_down(m, 1);
	bitmap_shift_down(m, 4095);
	UT_EQ(bitmap_next(m, 0, nbits), nbits - 4097, "the last bit moved down 4096 places");
	pages_of(m, bytes, &resident, &own);
	UT_CHECK(resident <= 8, "walks and shifts read %lu pages of a map using two of its blocks",
		 resident);
	UT_CHECK(own <= 6, "shifts wrote %lu pages of a map using two of its blocks", own);
	bitmap_free(m);
}

int main(void)
{
	random_maps();
	long_sequences();
	huge_map();
	return ut_done("page bitmaps");
}
