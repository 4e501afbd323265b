// SPDX-License-Identifier: GPL-2.0
/*
 * Page bitmaps (daemon/bitmap.h), walked and shifted eight bytes at a
 * time: against the same done a bit at a time, over maps of every length
 * up to 700 bits with bits set at random, every shift and start. And a
 * shift of a 1 TiB region's map (32 MiB) whose last bit alone is set
 * writes only what changes: the rest stays memory never touched.
 */
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include "unit.h"
#include "bitmap.h"

static int bit(const __u8 *m, __u64 i)
{
	return (m[i / 8] >> (i % 8)) & 1;
}

/*
 * Pages of [p, p + len) the process has for its own (pagemap's
 * "exclusively mapped" bit): a page only read maps the kernel's zero page,
 * which is not.
 */
static unsigned long own_pages(void *p, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = (len + pg - 1) / pg, k;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	unsigned long own = 0;
	__u64 e;

	if (fd < 0)
		return ~0UL;
	for (k = 0; k < n; k++) {
		if (pread(fd, &e, sizeof(e), (off_t)(((uintptr_t)p / pg + k) * sizeof(e))) !=
		    sizeof(e)) {
			own = ~0UL;
			break;
		}
		own += (e >> 56) & 1;
	}
	close(fd);
	return own;
}

/*
 * A 1 TiB region's map with its last page's bit set, shifted down by a
 * page and then by 4095 more: the bit moves down two words, and only the
 * map's pages around it may be written. Writing every word (zeros over
 * zeros) made all 32 MiB npfd's.
 */
static void huge_map_shift(void)
{
	__u64 nbits = 1ULL << 28, nbytes = nbits / 8 + 1;
	__u8 *m = mmap(NULL, nbytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	unsigned long in;

	if (m == MAP_FAILED) {
		UT_CHECK(false, "mmap of a 32 MiB map: %s", strerror(errno));
		return;
	}
	m[(nbits - 1) / 8] |= (__u8)(1 << ((nbits - 1) % 8));
	bitmap_shift_down(m, nbits, 1);
	bitmap_shift_down(m, nbits, 4095);
	UT_EQ(bitmap_next(m, 0, nbits), nbits - 4097, "the last bit moved down 4096 places");
	in = own_pages(m, nbytes);
	UT_CHECK(in <= 2, "shifts wrote %lu pages of a map whose one bit was in its last page", in);
	munmap(m, nbytes);
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
	huge_map_shift();
	return ut_done("page bitmaps");
}
