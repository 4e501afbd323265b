// SPDX-License-Identifier: GPL-2.0
/*
 * The shipped eviction policy evict-clean (policies/evict_clean.bpf.c)
 * takes clean pages before dirty ones. A region of 1024 pages with a
 * budget of 768, backed by a file, has every even page written (dirty)
 * and every odd page only read (installed clean from the file),
 * interleaved: CLOCK, taking pages in hand
 * order, writes dirty pages back; with evict-clean loaded, a second such
 * region gives only clean pages (512 of them, more than the 333 it must
 * give), so nothing is written back. Every byte reads back right.
 */
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include "budget.h"
#include "npf.h"

#define PG 4096UL
#define NPG 1024UL
#define BUDGET 768UL /* pages */

static struct th_npfd d;
static struct npf_client *c;

static struct npf_budget_info budget(int id)
{
	return th_budget(c, id);
}

static struct npf_budget_info settle(int id)
{
	struct npf_budget_info bi, again;
	double t0 = th_now();

	do {
		bi = budget(id);
		/*
		 * Down to the low watermark; or between it and the high one
		 * and still there 200 ms later: eviction stopped draining
		 * while the writer still faulted pages in (hysteresis), and
		 * starts again only over the high watermark.
		 */
		if (bi.resident_pages <= bi.high_pages) {
			usleep(bi.resident_pages <= bi.low_pages ? 20000 : 200000);
			again = budget(id);
			if (again.evicted_pages == bi.evicted_pages &&
			    again.resident_pages == bi.resident_pages)
				return again;
		}
		usleep(2000);
	} while (th_now() - t0 < 20);
	th_fail("region %d: %llu pages resident after 20 s, low watermark %llu (evicted %llu, aborted %llu, written %llu, dropped clean %llu)",
		id, (unsigned long long)bi.resident_pages, (unsigned long long)bi.low_pages,
		(unsigned long long)bi.evicted_pages, (unsigned long long)bi.aborted,
		(unsigned long long)bi.written_pages, (unsigned long long)bi.dropped_clean);
}

static uint64_t word(uint64_t gen, uint64_t p, uint64_t w)
{
	return ((gen << 40) + p * 512 + w) * 0x9e3779b97f4a7c15ULL + 5;
}

/*
 * A file-backed region with even pages written and odd pages read; its
 * budget info once evicted.
 */
static struct npf_budget_info run(const char *name)
{
	char *mem =
		mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char path[] = "/tmp/npf-evict-policy-clean-XXXXXX";
	static uint64_t buf[PG / 8];
	struct npf_budget_info bi;
	volatile uint64_t sum = 0;
	int id, fd = mkstemp(path);

	TH_ASSERT(mem != MAP_FAILED, "mmap");
	TH_ASSERT(fd >= 0, "mkstemp: %s", strerror(errno));
	unlink(path);
	for (uint64_t p = 0; p < NPG; p++) {
		for (uint64_t w = 0; w < PG / 8; w++)
			buf[w] = word(1, p, w);
		TH_ASSERT(pwrite(fd, buf, PG, (off_t)(p * PG)) == (ssize_t)PG, "write the file");
	}
	/* one page per fault: a write fault's neighbours would be installed writable, dirty */
	NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = fd, .name = name,
		 .fault_around_kib = NPF_FAULT_AROUND_EXACT);
	id = npf_client__register(c, mem, NPG * PG, &o);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, BUDGET * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));
	for (uint64_t p = 0; p < NPG; p++) {
		uint64_t *v = (uint64_t *)(mem + p * PG);

		if (p % 2)
			sum += v[0];
		else
			for (uint64_t w = 0; w < PG / 8; w++)
				v[w] = word(2, p, w);
	}
	bi = settle(id);
	printf("%s: evicted %llu, written back %llu, dropped clean %llu\n", name,
	       (unsigned long long)bi.evicted_pages, (unsigned long long)bi.written_pages,
	       (unsigned long long)bi.dropped_clean);
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			TH_ASSERT(((uint64_t *)(mem + p * PG))[w] == word(p % 2 ? 1 : 2, p, w),
				  "%s: page %llu word %llu is wrong", name, (unsigned long long)p,
				  (unsigned long long)w);
	TH_ASSERT(!npf_client__unregister(c, (__u32)id), "unregister: %s", npf_client__errmsg(c));
	munmap(mem, NPG * PG);
	close(fd);
	return bi;
}

int main(void)
{
	struct npf_budget_info clock, clean;
	struct npf_policy_status st;
	char obj[256];
	int fd, rc;

	th_require_root();
	th_npfd_start(&d, NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));

	clock = run("clock");
	TH_ASSERT(clock.evicted_pages >= NPG - BUDGET && clock.written_pages > 0,
		  "CLOCK wrote nothing back (evicted %llu): the policy's effect cannot show",
		  (unsigned long long)clock.evicted_pages);

	snprintf(obj, sizeof(obj), "%s/../policies/evict_clean.bpf.o", th_bin_dir());
	fd = open(obj, O_RDONLY | O_CLOEXEC);
	TH_ASSERT(fd >= 0, "no %s (make builds it)", obj);
	rc = npf_client__policy_load(c, fd, 0, NULL, &st);
	close(fd);
	TH_ASSERT(rc > 0, "load evict-clean: %d %s", rc, npf_client__errmsg(c));
	TH_ASSERT(!strcmp(st.name, "evict-clean"), "loaded as '%s'", st.name);

	clean = run("evict-clean");
	TH_ASSERT(clean.evicted_pages >= NPG - BUDGET && clean.written_pages == 0,
		  "evict-clean: evicted %llu, wrote back %llu dirty pages (CLOCK: %llu)",
		  (unsigned long long)clean.evicted_pages, (unsigned long long)clean.written_pages,
		  (unsigned long long)clock.written_pages);

	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
