// SPDX-License-Identifier: GPL-2.0
/*
 * A region's holes (daemon/holes.c): kept sorted, disjoint and
 * non-adjacent however they are added; found by address; widened, clipped
 * and walked around; bounded by HOLES_MAX.
 */
#include <errno.h>
#include "unit.h"
#include "holes.h"

/* h as "lo-hi lo-hi ..." */
static const char *show(const struct holes *h)
{
	static char buf[4096];
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned int i = 0; i < h->n && n < sizeof(buf) - 64; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%llu-%llu", i ? " " : "",
				      (unsigned long long)h->v[i].start,
				      (unsigned long long)h->v[i].end);
	return buf;
}

static void adding(void)
{
	struct holes h = {0};

	UT_EQ(holes_add(&h, 50, 60), 0, "add");
	UT_EQ(holes_add(&h, 10, 20), 0, "add below");
	UT_EQ(holes_add(&h, 80, 90), 0, "add above");
	UT_STREQ(show(&h), "10-20 50-60 80-90", "sorted");
	UT_EQ(holes_add(&h, 30, 30), 0, "an empty range");
	UT_STREQ(show(&h), "10-20 50-60 80-90", "an empty range adds nothing");
	UT_EQ(holes_add(&h, 20, 25), 0, "touching");
	UT_STREQ(show(&h), "10-25 50-60 80-90", "a hole touching another joins it");
	UT_EQ(holes_add(&h, 55, 85), 0, "overlapping two");
	UT_STREQ(show(&h), "10-25 50-90", "a hole over two makes one of the three");
	UT_EQ(holes_add(&h, 5, 100), 0, "over all");
	UT_STREQ(show(&h), "5-100", "one hole over all");
	holes_free(&h);
	UT_EQ(h.n, 0, "freed");
}

static void finding(void)
{
	struct holes h = {0};

	holes_add(&h, 10, 20);
	holes_add(&h, 40, 50);
	UT_CHECK(!holes_contain(&h, 9) && holes_contain(&h, 10) && holes_contain(&h, 19) &&
			 !holes_contain(&h, 20) && holes_contain(&h, 45) && !holes_contain(&h, 50),
		 "contain: ends are [start, end)");
	UT_CHECK(holes_cover(&h, 10, 20) && holes_cover(&h, 42, 44) && !holes_cover(&h, 15, 25) &&
			 !holes_cover(&h, 5, 15) && !holes_cover(&h, 15, 45),
		 "cover: only inside one hole");
	holes_free(&h);
}

static void reshaping(void)
{
	struct holes h = {0};
	__u64 lo, hi, pe, got[8], n = 0;

	holes_add(&h, 10, 20);
	holes_add(&h, 40, 50);
	lo = 20, hi = 30;
	holes_widen(&h, &lo, &hi);
	UT_CHECK(lo == 10 && hi == 30, "widen by a touching hole: got %llu-%llu",
		 (unsigned long long)lo, (unsigned long long)hi);
	lo = 30, hi = 35;
	holes_widen(&h, &lo, &hi);
	UT_CHECK(lo == 30 && hi == 35, "widen by none: got %llu-%llu", (unsigned long long)lo,
		 (unsigned long long)hi);

	for (lo = 0; holes_piece(&h, &lo, 60, &pe) && n < 8; lo = pe) {
		got[n++] = lo;
		got[n++] = pe;
	}
	UT_EQ(n, 6, "three pieces outside the holes");
	if (n == 6)
		UT_CHECK(got[0] == 0 && got[1] == 10 && got[2] == 20 && got[3] == 40 &&
				 got[4] == 50 && got[5] == 60,
			 "pieces 0-10 20-40 50-60");
	lo = 12;
	UT_CHECK(!holes_piece(&h, &lo, 18, &pe), "nothing outside the holes in 12-18");
	lo = 15;
	UT_CHECK(holes_piece(&h, &lo, 45, &pe) && lo == 20 && pe == 40,
		 "a walk from inside a hole starts past it");

	holes_shift(&h, (__u64)-5);
	UT_STREQ(show(&h), "5-15 35-45", "shift down");
	holes_clip(&h, 12, 40);
	UT_STREQ(show(&h), "12-15 35-40", "clip to the region left");
	holes_clip(&h, 20, 30);
	UT_EQ(h.n, 0, "clipped to nothing");
	UT_CHECK(h.v == NULL, "nothing kept once no hole is left");
}

static void bounded(void)
{
	struct holes h = {0};
	unsigned int i;

	for (i = 0; i < HOLES_MAX; i++)
		UT_EQ(holes_add(&h, 10ULL * i, 10ULL * i + 5), 0, "add up to the bound");
	UT_EQ(holes_add(&h, 10ULL * i, 10ULL * i + 5), -ENOSPC, "one more");
	UT_EQ(h.n, HOLES_MAX, "nothing changed past the bound");
	UT_EQ(holes_add(&h, 3, 12), 0, "a hole joining two still fits");
	UT_EQ(h.n, HOLES_MAX - 1, "two made one");
	holes_free(&h);
}

int main(void)
{
	adding();
	finding();
	reshaping();
	bounded();
	return ut_done("a region's holes");
}
