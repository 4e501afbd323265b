// SPDX-License-Identifier: GPL-2.0
/*
 * A region with a hole in its middle (munmap of a middle part), mostly
 * evicted to the swap store, through two npfd restarts (SIGKILL). The
 * hole's three parts: a second region registered there while npfd serves
 * (refused as overlapping before holes were kept), memory of the
 * process's own that npf must leave alone (not registered, not evicted,
 * not counted), and a third region registered there after the first
 * restart, where the new npfd learned of the hole at its adoption.
 *
 *   1. npfd keeps the hole: the second region is registered in it.
 *   2. npfd is killed. The fallback serves the second region's pages from
 *      its own store, not the first's; the next npfd adopts the first
 *      region around the hole and the second inside it (it refused a
 *      region with a hole: its evicted pages then read zeros). The third
 *      region is registered. A CPU fault on the second region counts as
 *      its own (the BPF programs take the first range an address is in).
 *   3. npfd is killed again; the next one adopts all three.
 *   4. The first region is unregistered: its evicted pages go back into
 *      it (they read zeros before), and the two in its hole stay
 *      registered and served.
 *
 * After each step every byte is checked, and the first region counts no
 * page it does not have: not the process's own, not another region's.
 * Every read runs in a thread with a time limit: a touch that waits for
 * good fails the test instead of hanging it.
 */
#include <pthread.h>
#include <sys/mman.h>
#include "budget.h"
#include "restart_common.h"

#define PG 4096UL
#define NPG 1024UL
#define BUDGET 64UL
#define PART 64UL	    /* a third of the hole */
#define INNER1 256UL	    /* the hole: [INNER1, INNER2 + PART) */
#define OWN (INNER1 + PART) /* the process's own mapping */
#define INNER2 (OWN + PART) /* registered after the first restart */
#define PAST_HOLE (INNER2 + PART)

static struct rs_npfd d;
static char *mem;
static int inners; /* inner regions registered so far */
static __u64 bad_outer, bad_inner, bad_own;

static void *read_all(void *arg)
{
	(void)arg;
	bad_outer = th_wrong_at(mem, 0, INNER1, 1) +
		    th_wrong_at(mem + PAST_HOLE * PG, PAST_HOLE, NPG - PAST_HOLE, 1);
	bad_inner = th_wrong_at(mem + INNER1 * PG, INNER1, PART, 2) +
		    (inners > 1 ? th_wrong_at(mem + INNER2 * PG, INNER2, PART, 2) : 0);
	bad_own = th_wrong_at(mem + OWN * PG, OWN, PART, 3);
	return NULL;
}

/* Every page of the regions and of the process's own mapping read within 20 s. */
static void check(const char *what)
{
	rs_run_within(&d, read_all, NULL, 20, what);
	printf("%s: words wrong: region %llu, inner regions %llu, own mapping %llu\n", what,
	       (unsigned long long)bad_outer, (unsigned long long)bad_inner,
	       (unsigned long long)bad_own);
	if (bad_outer || bad_inner || bad_own)
		rs_npfd_dump_log(&d);
	TH_ASSERT(!bad_outer && !bad_inner && !bad_own, "%s: pages read back wrong", what);
}

/*
 * The first region, evicted to its budget: it counts no more pages than
 * it has outside its hole, and the process's own mapping is neither
 * registered nor evicted.
 */
static void check_outer(struct npf_client *c, int id, const char *what)
{
	__u64 present, resident;

	th_budget_settle(c, id);
	resident = th_budget(c, id).resident_pages;
	present = th_present_pages(mem, INNER1) +
		  th_present_pages(mem + PAST_HOLE * PG, NPG - PAST_HOLE);
	printf("%s: the region counts %llu pages resident, has %llu outside its hole\n", what,
	       (unsigned long long)resident, (unsigned long long)present);
	TH_ASSERT(resident <= present, "%s: the region counts pages it does not have", what);
	TH_ASSERT(!th_uffd_registered(mem + OWN * PG, PART * PG),
		  "%s: the process's own mapping in the hole is registered with a userfaultfd",
		  what);
	TH_ASSERT(th_present_pages(mem + OWN * PG, PART) == PART,
		  "%s: pages of the process's own mapping in the hole were evicted", what);
}

/* Region id's CPU faults, as the BPF programs counted them. */
static __u64 cpu_faults(struct npf_client *c, int id)
{
	struct npf_region_stats_full *st;
	size_t n;
	__u64 v;

	TH_ASSERT(!npf_client__stats(c, (__u32)id, &st, &n) && n == 1, "stats: %s",
		  npf_client__errmsg(c));
	v = st[0].stats.cpu_faults;
	free(st);
	return v;
}

/*
 * check(), the first inner region evicted first: its CPU faults must count
 * as its own. BPF takes the first range an address is in, and the region
 * around it, registered (or adopted) first, came first before npfd wrote
 * the ranges shortest first.
 */
static void check_counted(struct npf_client *c, const int *ids, const char *what)
{
	__u64 inner_before, outer_before;

	th_budget_settle(c, ids[1]);
	inner_before = cpu_faults(c, ids[1]);
	outer_before = cpu_faults(c, ids[0]);
	check(what);
	printf("%s: CPU faults counted: inner region %llu, region around it %llu\n", what,
	       (unsigned long long)(cpu_faults(c, ids[1]) - inner_before),
	       (unsigned long long)(cpu_faults(c, ids[0]) - outer_before));
	/* a fault brings in a block of pages (fault-around): a few faults, not one a page */
	TH_ASSERT(cpu_faults(c, ids[1]) > inner_before,
		  "%s: the inner region's CPU faults were not counted as its own", what);
}

/* A region in the hole at page first, given a budget of a quarter of it, written and evicted. */
static int inner_region(struct npf_client *c, __u64 first)
{
	char *p = mmap(mem + first * PG, PART * PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	int id;

	TH_ASSERT(p == mem + first * PG, "mmap into the hole: %s", strerror(errno));
	id = npf_client__register(c, p, PART * PG, NULL);
	TH_ASSERT(id > 0, "register a region in the hole: %s", npf_client__errmsg(c));
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, PART / 4 * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));
	th_fill_at(p, first, PART, 2);
	th_budget_settle(c, id);
	TH_ASSERT(th_budget(c, id).stored_pages >= PART / 2,
		  "little of the region in the hole was evicted");
	inners++;
	return id;
}

static void restart(struct npf_client *c, const int *ids, const size_t *budgets, int nids)
{
	rs_fallbacks = rs_reconnects = 0;
	rs_npfd_kill(&d, SIGKILL);
	for (double t0 = th_now(); th_now() - t0 < 10 && !rs_fallbacks; usleep(10000))
		;
	TH_ASSERT(rs_fallbacks, "libnpf's fallback did not start within 10 s");
	check("served by the fallback");
	rs_last_warn[0] = '\0';
	rs_npfd_start(&d);
	for (double t0 = th_now(); th_now() - t0 < 10 && !rs_reconnects; usleep(10000))
		;
	TH_ASSERT(rs_reconnects, "libnpf did not reconnect within 10 s");
	TH_ASSERT(!strstr(rs_last_warn, "refused to adopt"), "a region was not adopted: %s",
		  rs_last_warn);
	for (int i = 0; i < nids; i++)
		th_budget_again(c, ids[i], budgets[i]);
}

int main(void)
{
	struct npf_client *c;
	int ids[3];
	size_t budgets[3] = {BUDGET, PART / 4, PART / 4};
	char *own;

	npf_set_print(rs_print);
	d.option = "--trace-cpu-faults";
	rs_npfd_start(&d);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fallback_ms = 200);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = th_budget_region(c, NPG, BUDGET, &ids[0]);
	th_fill(mem, NPG, 1);
	th_budget_settle(c, ids[0]);
	TH_ASSERT(th_budget(c, ids[0]).stored_pages >= NPG / 2, "little was evicted");

	/* 1 */
	TH_ASSERT(!munmap(mem + INNER1 * PG, 3 * PART * PG), "munmap: %s", strerror(errno));
	ids[1] = inner_region(c, INNER1);
	own = mmap(mem + OWN * PG, PART * PG, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	TH_ASSERT(own == mem + OWN * PG, "mmap into the hole: %s", strerror(errno));
	th_fill_at(own, OWN, PART, 3);
	check_counted(c, ids, "a region registered in the hole");
	check_outer(c, ids[0], "npfd keeps the hole");

	/* 2 */
	restart(c, ids, budgets, 2);
	check("adopted, one inside the other's hole");
	check_outer(c, ids[0], "adopted");
	ids[2] = inner_region(c, INNER2);
	check_counted(c, ids, "a region registered in a hole learned at the adoption");

	/* 3 */
	restart(c, ids, budgets, 3);
	check("all three adopted");
	check_outer(c, ids[0], "adopted again");

	/* 4: the regions in the hole stay registered, and served, without the one around them */
	th_budget_settle(c, ids[1]);
	TH_ASSERT(!npf_client__unregister(c, (__u32)ids[0]), "unregister: %s",
		  npf_client__errmsg(c));
	TH_ASSERT(th_uffd_registered(mem + INNER1 * PG, PART * PG) &&
			  th_uffd_registered(mem + INNER2 * PG, PART * PG),
		  "unregistering the region took the regions in its hole with it");
	check("the region around the others unregistered");
	npf_client__close(c);
	rs_npfd_cleanup(&d);
	printf("PASS\n");
	return 0;
}
