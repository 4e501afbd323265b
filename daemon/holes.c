// SPDX-License-Identifier: GPL-2.0
/* A region's holes: see holes.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "holes.h"

bool holes_contain(const struct holes *h, __u64 addr)
{
	for (unsigned int i = 0; i < h->n && h->v[i].start <= addr; i++)
		if (addr < h->v[i].end)
			return true;
	return false;
}

bool holes_cover(const struct holes *h, __u64 lo, __u64 hi)
{
	for (unsigned int i = 0; i < h->n && h->v[i].start <= lo; i++)
		if (hi <= h->v[i].end)
			return true;
	return false;
}

int holes_add(struct holes *h, __u64 lo, __u64 hi)
{
	unsigned int first = 0, last, n;
	struct hole *v;

	if (lo >= hi)
		return 0;
	/* holes [first, last) overlap or touch [lo, hi): they become one */
	while (first < h->n && h->v[first].end < lo)
		first++;
	for (last = first; last < h->n && h->v[last].start <= hi; last++) {
		if (h->v[last].start < lo)
			lo = h->v[last].start;
		if (h->v[last].end > hi)
			hi = h->v[last].end;
	}
	n = h->n - (last - first) + 1;
	if (n > HOLES_MAX)
		return -ENOSPC;
	if (n > h->n) {
		v = realloc(h->v, n * sizeof(*v));
		if (!v)
			return -ENOMEM;
		h->v = v;
	}
	memmove(&h->v[first + 1], &h->v[last], (h->n - last) * sizeof(*h->v));
	h->v[first] = (struct hole){lo, hi};
	h->n = n;
	return 0;
}

void holes_widen(const struct holes *h, __u64 *lo, __u64 *hi)
{
	for (unsigned int i = 0; i < h->n; i++) {
		if (h->v[i].end < *lo || h->v[i].start > *hi)
			continue;
		if (h->v[i].start < *lo)
			*lo = h->v[i].start;
		if (h->v[i].end > *hi)
			*hi = h->v[i].end;
	}
}

void holes_clip(struct holes *h, __u64 lo, __u64 hi)
{
	unsigned int i, n = 0;

	for (i = 0; i < h->n; i++) {
		struct hole x = h->v[i];

		if (x.start < lo)
			x.start = lo;
		if (x.end > hi)
			x.end = hi;
		if (x.start < x.end)
			h->v[n++] = x;
	}
	h->n = n;
	if (!n)
		holes_free(h);
}

void holes_shift(struct holes *h, __u64 delta)
{
	for (unsigned int i = 0; i < h->n; i++) {
		h->v[i].start += delta;
		h->v[i].end += delta;
	}
}

bool holes_piece(const struct holes *h, __u64 *lo, __u64 hi, __u64 *piece_end)
{
	*piece_end = hi;
	for (unsigned int i = 0; i < h->n && h->v[i].start < hi; i++) {
		if (h->v[i].end <= *lo)
			continue;
		if (h->v[i].start <= *lo) {
			*lo = h->v[i].end; /* in this hole: the piece starts past it */
			continue;
		}
		*piece_end = h->v[i].start;
		break;
	}
	return *lo < hi;
}

void holes_free(struct holes *h)
{
	free(h->v);
	h->v = NULL;
	h->n = 0;
}
