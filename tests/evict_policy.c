// SPDX-License-Identifier: GPL-2.0
/*
 * Eviction policies (issue 15). An anonymous region of 1024 pages with a
 * budget of 256 is written front to back, five times:
 *   1. CLOCK alone: some of pages [0, 128) -- the oldest -- are evicted;
 *   2. with 'evict-head' (tests/policies/evict_head.bpf.c, keeps [0, 128))
 *      loaded: every one of them is resident (pagemap), the others are
 *      evicted down to the budget, every byte reads back right;
 *   3. unloaded: CLOCK again evicts some of [0, 128);
 *   4. 'evict-keepall' (keeps every page: nonsense): each batch falls back
 *      to CLOCK and is counted (npfctl policy list: clamped == runs), and
 *      eviction still meets the budget;
 *   5. 'evict-slow' (spins for milliseconds): the watchdog disables it,
 *      and eviction goes on by CLOCK.
 * Then hostile objects: a policy of an unknown kind, one with a 1 GiB map
 * of its own, and a fault policy's name taken by an eviction policy, are
 * refused. Last, evict-head loaded for the region alone keeps [0, 128),
 * and the kill switch (npfctl policy disable) brings CLOCK back.
 */
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include "evict_policy_fixture.h"

#define NPG 1024UL
#define BUDGET 256UL /* pages */
#define HEAD 128UL   /* evict-head keeps pages [0, HEAD) */

static uint64_t word(uint64_t gen, uint64_t p, uint64_t w)
{
	return ((gen << 40) + p * 512 + w) * 0x9e3779b97f4a7c15ULL + 1;
}

static void fill(uint64_t gen)
{
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			((uint64_t *)(mem + p * PG))[w] = word(gen, p, w);
}

static void verify(uint64_t gen)
{
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			TH_ASSERT(((uint64_t *)(mem + p * PG))[w] == word(gen, p, w),
				  "generation %llu: page %llu word %llu is wrong",
				  (unsigned long long)gen, (unsigned long long)p,
				  (unsigned long long)w);
}

static struct npf_policy_status status(const char *name, struct npf_policy_health *h)
{
	struct npf_policy_status *ps, out;
	struct npf_policy_health *hs;
	size_t n, nh, i;

	TH_ASSERT(!npf_client__policy_list(c, &ps, &n), "policy list: %s", npf_client__errmsg(c));
	TH_ASSERT(!npf_client__policy_health(c, &hs, &nh) && nh == n, "policy health: %s",
		  npf_client__errmsg(c));
	for (i = 0; i < n && strcmp(ps[i].name, name); i++)
		;
	TH_ASSERT(i < n, "policy %s is not listed", name);
	out = ps[i];
	if (h)
		*h = hs[i];
	free(ps);
	free(hs);
	return out;
}

int main(void)
{
	char head[160], keepall[160], slow[160], badkind[160], bigmap[160];
	struct npf_policy_status st;
	struct npf_policy_health h;
	unsigned int in_head, rest;
	uint64_t gen = 0;
	int rc, pass;

	th_require_root();
	th_npfd_start(&d, NULL);
	compile("evict_head", head, sizeof(head));
	compile("evict_keepall", keepall, sizeof(keepall));
	compile("evict_slow", slow, sizeof(slow));
	compile("evict_badkind", badkind, sizeof(badkind));
	compile("evict_bigmap", bigmap, sizeof(bigmap));
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	TH_ASSERT(pagemap >= 0, "pagemap: %s", strerror(errno));
	mem = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	NPF_OPTS(npf_region_opts, o, .name = "evict-policy");
	id = npf_client__register(c, mem, NPG * PG, &o);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, BUDGET * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));

	/* 1. CLOCK */
	fill(++gen);
	settle("CLOCK");
	in_head = resident(0, HEAD);
	printf("CLOCK: %u of pages [0, %lu) resident, %u others\n", in_head, HEAD,
	       resident(HEAD, NPG));
	TH_ASSERT(in_head < HEAD, "CLOCK kept all of [0, %lu): the policy's effect cannot show",
		  HEAD);
	verify(gen);

	/* 2. evict-head keeps [0, HEAD) */
	rc = load(head);
	TH_ASSERT(rc > 0, "load evict-head: %d %s", rc, npf_client__errmsg(c));
	fill(++gen);
	settle("evict-head");
	in_head = resident(0, HEAD);
	rest = resident(HEAD, NPG);
	printf("evict-head: %u of pages [0, %lu) resident, %u others\n", in_head, HEAD, rest);
	TH_ASSERT(in_head == HEAD, "evict-head loaded: only %u of pages [0, %lu) resident", in_head,
		  HEAD);
	TH_ASSERT(rest <= BUDGET - HEAD, "%u other pages resident: not evicted to the budget",
		  rest);
	verify(gen);
	settle("evict-head, after reading");
	TH_ASSERT(resident(0, HEAD) == HEAD, "evict-head: a page of [0, %lu) left after reading",
		  HEAD);
	st = status("evict-head", NULL);
	printf("evict-head: %llu runs, %llu fell back, %llu pages chosen\n",
	       (unsigned long long)st.invocations, (unsigned long long)st.clamped,
	       (unsigned long long)st.pages_prefetched);
	TH_ASSERT(st.invocations > 0 && st.clamped == 0, "evict-head: %llu runs, %llu fell back",
		  (unsigned long long)st.invocations, (unsigned long long)st.clamped);

	/* 3. unloaded: CLOCK again */
	TH_ASSERT(!npf_client__policy_unload(c, "evict-head"), "unload: %s", npf_client__errmsg(c));
	fill(++gen);
	settle("CLOCK again");
	in_head = resident(0, HEAD);
	printf("unloaded: %u of pages [0, %lu) resident\n", in_head, HEAD);
	TH_ASSERT(in_head < HEAD, "evict-head unloaded, yet all of [0, %lu) stayed", HEAD);
	verify(gen);

	/* 4. a policy that keeps everything: each batch by CLOCK, counted */
	rc = load(keepall);
	TH_ASSERT(rc > 0, "load evict-keepall: %d %s", rc, npf_client__errmsg(c));
	fill(++gen);
	settle("evict-keepall");
	verify(gen);
	st = status("evict-keepall", NULL);
	printf("evict-keepall: %llu runs, %llu fell back\n", (unsigned long long)st.invocations,
	       (unsigned long long)st.clamped);
	TH_ASSERT(st.invocations > 0 && st.clamped == st.invocations,
		  "evict-keepall: %llu runs, %llu fell back to CLOCK",
		  (unsigned long long)st.invocations, (unsigned long long)st.clamped);
	TH_ASSERT(!npf_client__policy_unload(c, "evict-keepall"), "unload: %s",
		  npf_client__errmsg(c));

	/* 5. a slow policy: the watchdog takes it out, eviction goes on */
	rc = load(slow);
	TH_ASSERT(rc > 0, "load evict-slow: %d %s", rc, npf_client__errmsg(c));
	for (pass = 0; pass < 20; pass++) {
		fill(++gen);
		settle("evict-slow");
		status("evict-slow", &h);
		if (h.state == NPF_POLICY_WATCHDOG)
			break;
	}
	st = status("evict-slow", &h);
	printf("evict-slow: %d passes, %llu runs, %llu slow, state %u\n", pass + 1,
	       (unsigned long long)st.invocations, (unsigned long long)h.slow_decisions, h.state);
	TH_ASSERT(h.state == NPF_POLICY_WATCHDOG,
		  "evict-slow still active after %llu runs (%llu slow)",
		  (unsigned long long)st.invocations, (unsigned long long)h.slow_decisions);
	fill(++gen);
	settle("after the watchdog");
	TH_ASSERT(status("evict-slow", NULL).invocations == st.invocations,
		  "the watchdog's prey still runs");
	verify(gen);
	TH_ASSERT(!npf_client__policy_unload(c, "evict-slow"), "unload: %s", npf_client__errmsg(c));

	/* hostile objects */
	rc = load(badkind);
	printf("unknown kind: %d \"%s\"\n", rc, npf_client__errmsg(c));
	TH_ASSERT(rc == -EINVAL, "a policy of kind 9 was not refused: %d", rc);
	rc = load(bigmap);
	printf("1 GiB map: %d \"%s\"\n", rc, npf_client__errmsg(c));
	TH_ASSERT(rc == -E2BIG, "an eviction policy with a 1 GiB map was not refused: %d", rc);
	rc = load(head);
	TH_ASSERT(rc > 0, "load evict-head: %d %s", rc, npf_client__errmsg(c));
	{
		char fault[256];
		int fd;

		snprintf(fault, sizeof(fault), "%s/../policies/seq.bpf.o", th_bin_dir());
		fd = open(fault, O_RDONLY | O_CLOEXEC);
		TH_ASSERT(fd >= 0, "no %s (make builds it)", fault);
		rc = npf_client__policy_load(c, fd, 0, "evict-head", &st);
		close(fd);
		printf("fault policy under an eviction policy's name: %d\n", rc);
		TH_ASSERT(rc == -EEXIST, "a fault policy replaced eviction policy evict-head: %d",
			  rc);
	}

	/* the region's own choice of evict-head, and the kill switch */
	TH_ASSERT(!npf_client__policy_unload(c, "evict-head"), "unload: %s", npf_client__errmsg(c));
	rc = npf_client__policy_load(c, -1, 0, "evict-head", &st);
	TH_ASSERT(rc == -ENOENT, "chose an unloaded policy: %d", rc);
	{
		int fd = open(head, O_RDONLY | O_CLOEXEC);

		rc = npf_client__policy_load(c, fd, (__u32)id, NULL, &st);
		close(fd);
	}
	TH_ASSERT(rc > 0, "load evict-head for region %d: %d %s", id, rc, npf_client__errmsg(c));
	fill(++gen);
	settle("evict-head for the region");
	in_head = resident(0, HEAD);
	printf("evict-head for region %d: %u of pages [0, %lu) resident\n", id, in_head, HEAD);
	TH_ASSERT(in_head == HEAD, "region's evict-head: only %u of [0, %lu) resident", in_head,
		  HEAD);
	TH_ASSERT(!npf_client__policy_enable(c, false), "kill switch: %s", npf_client__errmsg(c));
	fill(++gen);
	settle("kill switch");
	in_head = resident(0, HEAD);
	printf("kill switch off: %u of pages [0, %lu) resident\n", in_head, HEAD);
	TH_ASSERT(in_head < HEAD, "policies disabled, yet all of [0, %lu) stayed", HEAD);
	verify(gen);
	TH_ASSERT(!npf_client__policy_enable(c, true), "kill switch: %s", npf_client__errmsg(c));

	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
