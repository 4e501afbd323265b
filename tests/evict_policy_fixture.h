/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the eviction policy tests share (tests/evict_policy*.c): one npfd,
 * one client and its region, what of it is resident (pagemap), eviction
 * settled, and the test policies (tests/policies/) built and loaded.
 */
#ifndef NPF_TEST_EVICT_POLICY_FIXTURE_H
#define NPF_TEST_EVICT_POLICY_FIXTURE_H

#include <fcntl.h>
#include <stdint.h>
#include "harness.h"
#include "adv.h"
#include "budget.h"
#include "npf.h"

#ifndef PG
#define PG 4096UL
#endif

static struct th_npfd d;
static struct npf_client *c;
static char *mem;
static int id, pagemap;

static bool present(uint64_t p)
{
	uint64_t ent;
	off_t off = (off_t)(((uintptr_t)mem + p * PG) / PG * 8);

	TH_ASSERT(pread(pagemap, &ent, 8, off) == 8, "pagemap: %s", strerror(errno));
	return ent >> 63;
}

static unsigned int resident(uint64_t from, uint64_t to)
{
	unsigned int n = 0;

	for (uint64_t p = from; p < to; p++)
		n += present(p);
	return n;
}

static struct npf_budget_info budget(void)
{
	return th_budget(c, id);
}

/* Evicted as far as it goes, and no batch in flight (two equal looks). */
static struct npf_budget_info settle(const char *what)
{
	struct npf_budget_info bi, again;
	double t0 = th_now();

	do {
		bi = budget();
		/*
		 * Down to the low watermark; or between it and the high one
		 * and still there 200 ms later: eviction stopped draining
		 * while the writer still faulted pages in (hysteresis), and
		 * starts again only over the high watermark.
		 */
		if (bi.resident_pages <= bi.high_pages) {
			usleep(bi.resident_pages <= bi.low_pages ? 20000 : 200000);
			again = budget();
			if (again.evicted_pages == bi.evicted_pages &&
			    again.resident_pages == bi.resident_pages)
				return again;
		}
		usleep(2000);
	} while (th_now() - t0 < 20);
	th_fail("%s: %llu pages resident after 20 s, low watermark %llu", what,
		(unsigned long long)bi.resident_pages, (unsigned long long)bi.low_pages);
}

static int load(const char *obj)
{
	struct npf_policy_status st;
	int fd = open(obj, O_RDONLY | O_CLOEXEC), rc;

	TH_ASSERT(fd >= 0, "open %s: %s", obj, strerror(errno));
	rc = npf_client__policy_load(c, fd, 0, NULL, &st);
	close(fd);
	return rc;
}

/* A test policy built into the test's directory (adv.h's builder). */
static void compile(const char *name, char *out, size_t len)
{
	adv_compile_policy(name, d.dir, out, len);
}

#endif
