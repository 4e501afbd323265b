// SPDX-License-Identifier: GPL-2.0
/*
 * Per-thread streams: two threads each scan their own half of a region in
 * strict alternation (A's page i, B's page i, A's page i + 1, ...), with
 * the seq policy loaded for it. seq keeps one stream per thread (the
 * fault's thread id reaches the policy through npfd, which runs it), so
 * each thread's window grows as if it were alone: a few dozen faults. One
 * stream per region would see every fault land away from the other
 * thread's window and reset it: one fault per page. Also: the policy
 * decides with no tracepoint attached (npfctl policy list: invocations).
 * A fault seq sees no stream for is left to npfd's fault-around (the
 * aligned 64 KiB block: 16 pages), while exact installs the faulting page
 * only (the old behaviour).
 */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include "npf.h"

#define PAGES 4096
#define LEN (PAGES * 4096UL)

static struct th_npfd d;
static char *mem;
static volatile int turn;

struct scan {
	int me;
	unsigned int first;
	uint64_t sum;
};

static void *scan(void *arg)
{
	struct scan *s = arg;
	unsigned int i;

	for (i = 0; i < PAGES / 2; i++) {
		while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != s->me)
			;
		s->sum += *(volatile uint64_t *)(mem + (s->first + i) * 4096UL);
		__atomic_store_n(&turn, !s->me, __ATOMIC_RELEASE);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct scan s[2] = {{.me = 0, .first = 0}, {.me = 1, .first = PAGES / 2}};
	struct npf_region_stats_full *sf;
	struct npf_policy_status *pl;
	char path[PATH_MAX + 32];
	struct npf_client *c;
	pthread_t th[2];
	size_t n, i;
	uint64_t faults, invocations = 0;
	int id, fd;

	th_npfd_start(&d, NULL);
	snprintf(path, sizeof(path), "%s/../policies/seq.bpf.o", th_bin_dir());
	fd = open(path, O_RDONLY);
	if (fd < 0)
		th_skip("no %s (build the policies): %s", path, strerror(errno));
	c = npf_client__connect(NULL);
	mem = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(c && mem != MAP_FAILED, "setup: %s", strerror(errno));
	id = npf_client__register(c, mem, LEN, NULL);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(npf_client__policy_load(c, fd, (__u32)id, NULL, NULL) > 0, "load seq: %s",
		  npf_client__errmsg(c));
	close(fd);

	for (i = 0; i < 2; i++)
		TH_ASSERT(!pthread_create(&th[i], NULL, scan, &s[i]), "pthread_create");
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	TH_ASSERT(s[0].sum == 0 && s[1].sum == 0, "an anonymous region read non-zero bytes");

	TH_ASSERT(!npf_client__stats(c, (__u32)id, &sf, &n) && n == 1, "stats");
	faults = sf->stats.uffd_faults;
	free(sf);
	TH_ASSERT(!npf_client__policy_list(c, &pl, &n), "policy list");
	for (i = 0; i < n; i++)
		invocations += pl[i].region_id == (__u32)id ? pl[i].invocations : 0;
	free(pl);
	printf("2 threads alternating over their own halves (%d pages): %llu faults, seq decided %llu\n",
	       PAGES, (unsigned long long)faults, (unsigned long long)invocations);
	TH_ASSERT(invocations > 0 && invocations >= faults - 2,
		  "seq decided %llu of %llu faults: npfd did not run the policy for them",
		  (unsigned long long)invocations, (unsigned long long)faults);
	/* Alone, a thread's 2048 pages take 1 + log2(512/8) + 2048/512 ~ 12 faults. */
	TH_ASSERT(faults <= 64, "%llu faults: the threads' streams disturbed each other",
		  (unsigned long long)faults);

	/* One fault of a fresh region under seq, then under exact: pages installed. */
	for (i = 0; i < 2; i++) {
		const char *pol = i ? "exact" : "seq";
		unsigned int want = i ? 1 : 16;
		char *m =
			mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		int rid;

		TH_ASSERT(m != MAP_FAILED, "mmap");
		rid = npf_client__register(c, m, LEN, NULL);
		TH_ASSERT(rid > 0, "register: %s", npf_client__errmsg(c));
		snprintf(path, sizeof(path), "%s/../policies/%s.bpf.o", th_bin_dir(), pol);
		fd = open(path, O_RDONLY);
		TH_ASSERT(fd >= 0, "%s: %s", path, strerror(errno));
		TH_ASSERT(npf_client__policy_load(c, fd, (__u32)rid, pol, NULL) > 0, "load %s: %s",
			  pol, npf_client__errmsg(c));
		close(fd);
		(void)*(volatile char *)(m + 1000 * 4096UL);
		TH_ASSERT(!npf_client__stats(c, (__u32)rid, &sf, &n) && n == 1, "stats");
		printf("%s: one fault installed %llu pages\n", pol,
		       (unsigned long long)sf->stats.pages_zeroed);
		TH_ASSERT(sf->stats.uffd_faults == 1 && sf->stats.pages_zeroed == want,
			  "%s: %llu faults installed %llu pages, want 1 fault and %u pages", pol,
			  (unsigned long long)sf->stats.uffd_faults,
			  (unsigned long long)sf->stats.pages_zeroed, want);
		free(sf);
		munmap(m, LEN);
	}
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("ok\n");
	return 0;
}
