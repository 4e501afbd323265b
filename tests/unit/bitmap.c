// SPDX-License-Identifier: GPL-2.0
/*
 * Page bitmaps (daemon/bitmap.h), walked and shifted eight bytes at a
 * time: against the same done a bit at a time, over maps of every length
 * up to 700 bits with bits set at random, every shift and start.
 */
#include <stdlib.h>
#include "unit.h"
#include "bitmap.h"

static int bit(const __u8 *m, __u64 i)
{
	return (m[i / 8] >> (i % 8)) & 1;
}

int main(void)
{
	unsigned int bad_shift = 0, bad_tail = 0, bad_next = 0;

	srand(1);
	for (int t = 0; t < 20000; t++) {
		__u64 n = 1 + (__u64)(rand() % 700), shift = (__u64)(rand() % (int)(n + 3));
		__u64 from = (__u64)(rand() % (int)(n + 1)), want = n;
		__u8 a[100] = {0}, b[100];

		for (__u64 i = 0; i < n; i++)
			if (rand() % (t % 2 ? 3 : 97) == 0)
				a[i / 8] |= (__u8)(1 << (i % 8));
		memcpy(b, a, sizeof(a));
		bitmap_shift_down(b, n, shift);
		for (__u64 i = 0; i < n; i++)
			bad_shift += bit(b, i) != (i + shift < n ? bit(a, i + shift) : 0);
		for (__u64 i = n; i < 8 * (n / 8 + 1); i++)
			bad_tail += bit(b, i);
		for (__u64 i = from; i < n; i++)
			if (bit(a, i)) {
				want = i;
				break;
			}
		bad_next += bitmap_next(a, from, n) != want;
	}
	UT_EQ(bad_shift, 0, "bits shifted down where a bit-by-bit shift puts them");
	UT_EQ(bad_tail, 0, "no bit set past the map's length after a shift");
	UT_EQ(bad_next, 0, "the next set bit where a bit-by-bit walk finds it");
	UT_EQ(bitmap_next(NULL, 0, 10), 10, "no map: none");
	return ut_done("page bitmaps");
}
