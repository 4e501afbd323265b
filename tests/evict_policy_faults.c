// SPDX-License-Identifier: GPL-2.0
/*
 * Eviction policies see how often npfd installed each page and how long it
 * has been idle (struct npf_evict_cand: installs, idle_ms). A region of
 * 2048 pages, a budget of 256:
 *   1. A = [0, 128) is written, then B = [128, 1024): CLOCK evicts all of A;
 *   2. A is read again: installed a second time;
 *   3. its first CUT pages are unmapped: page i of the region is page
 *      i + CUT of before, and so must be what npfd tells of it;
 *   4. 1.2 s later, with evict-report loaded (it records what it is told of
 *      each candidate in its map), C = [1024, 2048) is written.
 * The policy must have been told: A's pages installed twice and idle a
 * second or more; C's installed once and idle less than a second (told
 * of C's first CUT pages by where they were before the cut, it would see
 * B's installs there, and once more for C's).
 */
#include <sys/mman.h>
#include <bpf/bpf.h>
#include "evict_policy_fixture.h"

#define NPG 2048UL
#define BUDGET 256UL
#define A 128UL
#define CUT 64UL /* pages unmapped at the region's start */

struct seen {
	__u32 installs;
	__u32 idle_ms;
	__u64 batches;
};

static void touch(uint64_t from, uint64_t to, bool write)
{
	volatile char sink = 0;

	for (uint64_t p = from; p < to; p++)
		if (write)
			mem[p * PG] = (char)(p | 1);
		else
			sink += mem[p * PG];
	(void)sink;
}

/* The loaded policy's map, found by its name among the kernel's maps. */
static int find_map(const char *name)
{
	__u32 mid = 0;

	while (!bpf_map_get_next_id(mid, &mid)) {
		struct bpf_map_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_map_get_fd_by_id(mid);

		if (fd < 0)
			continue;
		if (!bpf_obj_get_info_by_fd(fd, &info, &len) && !strcmp(info.name, name))
			return fd;
		close(fd);
	}
	return -1;
}

int main(void)
{
	uint64_t a_seen = 0, c_seen = 0;
	char report[160];
	unsigned int in_a;
	int rc, fd;

	th_require_root();
	th_npfd_start(&d, NULL);
	compile("evict_report", report, sizeof(report));
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	TH_ASSERT(pagemap >= 0, "pagemap: %s", strerror(errno));
	mem = th_budget_region(c, NPG, BUDGET, &id);

	touch(0, A, true);
	touch(A, 1024, true);
	settle("CLOCK");
	in_a = resident(0, A);
	TH_ASSERT(in_a == 0, "CLOCK left %u pages of A: they would not come back", in_a);
	touch(0, A, false);
	settle("A read back");
	TH_ASSERT(!munmap(mem, CUT * PG), "munmap of the first %lu pages: %s", CUT,
		  strerror(errno));
	mem += CUT * PG; /* from here page p is page p + CUT of before */
	usleep(1200000);

	rc = load(report);
	TH_ASSERT(rc > 0, "load evict-report: %d %s", rc, npf_client__errmsg(c));
	fd = find_map("evrep_seen");
	TH_ASSERT(fd >= 0, "the policy's map evrep_seen is not found");
	touch(1024 - CUT, NPG - CUT, true);
	settle("evict-report");

	for (__u32 p = 0; p < NPG - CUT; p++) {
		struct seen s;
		bool in_c = p >= 1024 - CUT;

		TH_ASSERT(!bpf_map_lookup_elem(fd, &p, &s), "map lookup %u: %s", p,
			  strerror(errno));
		if (!s.batches || (p >= A - CUT && !in_c))
			continue;
		if (in_c) {
			c_seen++;
			TH_ASSERT(
				s.installs == 1 && s.idle_ms < 1000,
				"page %u of C: told installs %u, idle %u ms (installed once, just now)",
				p, s.installs, s.idle_ms);
		} else {
			a_seen++;
			TH_ASSERT(
				s.installs == 2 && s.idle_ms >= 1000 &&
					s.idle_ms != NPF_EVICT_IDLE_UNKNOWN,
				"page %u of A: told installs %u, idle %u ms (installed twice, idle 1.2 s)",
				p, s.installs, s.idle_ms);
		}
	}
	printf("the policy saw %llu pages of A (installed twice, idle >= 1 s) and %llu of C (once, < 1 s)\n",
	       (unsigned long long)a_seen, (unsigned long long)c_seen);
	TH_ASSERT(a_seen >= (A - CUT) / 2 && c_seen >= 64,
		  "too few candidates seen: %llu of A, %llu of C", (unsigned long long)a_seen,
		  (unsigned long long)c_seen);
	close(fd);
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
