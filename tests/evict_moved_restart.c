// SPDX-License-Identifier: GPL-2.0
/*
 * Parts of budgeted regions moved with mremap() (a part leaves its region:
 * UFFD_EVENT_REMAP) and npfd away meanwhile. npfd puts a part's pages
 * back at its new place a bounded step at a time (daemon/moved.c); what
 * it has not put back yet only its swap store (or the region's file)
 * holds. libnpf's fallback serves the process while npfd is away, and
 * hands the regions to the next npfd: every page must read what was
 * written, where it is now, and a part must end as the process's ordinary
 * memory (its range no longer registered with the userfaultfd).
 *
 *   A. npfd killed (SIGKILL) while it puts back a part moved out of the
 *      middle of an anonymous region, mostly evicted;
 *   B. the same with the top 3/4 of a file-backed region (a part's pages
 *      come from the file);
 *   C. npfd killed first, then the process moves one region whole and a
 *      middle part of another while the fallback serves.
 *   D-G, npfd killed first: what the fallback records follows the memory
 *      (see above drops_unmapped()): D. pages the process dropped, then
 *      unmapped, and another region moved there; E. pages dropped, then
 *      their region moved; F. a region in another's hole moved; G. as A,
 *      the part unmapped and another region moved where it was.
 * Before, the fallback knew nothing of a part: in A and B the pages npfd
 * had not put back yet, and in C every evicted page at the new places,
 * read zeros (the fallback installed zeros outside its regions), and the
 * part's range stayed registered after the handover. A and B read the
 * part's upper half (put back last: the pages surely not back) through the
 * fallback, the lower half after the handover.
 *
 * $EVICT_MOVED_RESTART_CASES (e.g. "B,C") runs only those, to look at one.
 */
#include <pthread.h>
#include <sys/mman.h>
#include "budget.h"
#include "restart_common.h"

#define PG 4096UL
#define BUDGET 64UL
/*
 * A: 24 times what npfd puts back in one pass of its loop (moved.c: 1024
 * pages): some 50 ms of put-back, which the kill, one request after the
 * move, comes well within.
 */
#define A_NPG 32768UL
#define A_FIRST 4096UL
#define A_PART 24576UL
/* B: the top 3/4 of a file-backed region (its tail: the region is cut) */
#define B_NPG 32768UL
#define B_FIRST (B_NPG / 4)
#define B_PART (B_NPG - B_FIRST)
#define B_READ (B_NPG / 2) /* pages read (and evicted, clean) before the move; the rest never */
/* C: npfd is away at the moves, so nothing races them: smaller regions */
#define C_NPG 8192UL
#define C_FIRST (C_NPG / 4)
#define C_PART (C_NPG / 2)
#define TRIES 5

static struct rs_npfd d;

/* ---- what is read, and checked ---- */

/*
 * Pages [first, first + n) of a region (th_word() numbering) at `at`, of
 * generation gen; gen 0: zeros (pages the process dropped).
 */
struct span {
	const char *what; /* NULL ends a list */
	char *at;
	__u64 first, n, gen;
	__u64 bad, zeros; /* words not of gen, and of them the zeros */
};

static void *read_spans(void *arg)
{
	for (struct span *s = arg; s->what; s++) {
		s->bad = s->zeros = 0;
		for (__u64 p = 0; p < s->n; p++)
			for (__u64 w = 0; w < 512; w++) {
				__u64 v = ((const volatile __u64 *)(void *)(s->at + p * PG))[w];

				if (v != (s->gen ? th_word(s->gen, s->first + p, w) : 0)) {
					s->bad++;
					s->zeros += !v;
				}
			}
	}
	return NULL;
}

/*
 * The spans read within 20 s (a thread: a touch that waits for good fails
 * here, with npfd's log), each one's count printed, and none may be wrong.
 */
static void check_spans(const char *phase, struct span *spans)
{
	__u64 bad = 0;

	rs_run_within(&d, read_spans, spans, 20, phase);
	for (struct span *s = spans; s->what; s++) {
		printf("%s: %s (pages %llu-%llu): %llu words wrong, %llu of them zeros\n", phase,
		       s->what, (unsigned long long)s->first,
		       (unsigned long long)(s->first + s->n - 1), (unsigned long long)s->bad,
		       (unsigned long long)s->zeros);
		bad += s->bad;
	}
	if (bad)
		rs_npfd_dump_log(&d);
	TH_ASSERT(!bad, "%s: %llu words read back wrong (see above)", phase,
		  (unsigned long long)bad);
}

static void *write_span(void *arg)
{
	struct span *s = arg;

	th_fill_at(s->at, s->first, s->n, s->gen);
	return NULL;
}

/*
 * A part after the handover: no longer registered with the userfaultfd
 * within 5 s of the reconnect (at since), and the process's ordinary
 * memory: generation 2 written within 10 s, and still there a moment on
 * (nobody puts a stale page over it).
 */
static void check_part_own(const char *what, char *part, __u64 first, __u64 n, double since)
{
	struct span s[] = {{"the part, written", part, first, n, 2}, {NULL}};
	char phase[128];

	for (;; usleep(10000)) {
		if (!th_uffd_registered(part, n * PG))
			break;
		TH_ASSERT(
			th_now() - since < 5,
			"%s: the part's range (%llu pages at %p) is still registered with the userfaultfd %.1f s after the handover",
			what, (unsigned long long)n, (void *)part, th_now() - since);
	}
	printf("%s: the part's range is not registered (%.2f s after the handover)\n", what,
	       th_now() - since);
	snprintf(phase, sizeof(phase), "%s, written", what);
	rs_run_within(&d, write_span, &s[0], 10, phase);
	usleep(200000);
	check_spans(phase, s);
}

/* ---- npfd, the client ---- */

static int counter(const int *n)
{
	return __atomic_load_n(n, __ATOMIC_RELAXED);
}

static struct npf_client *connect_client(void)
{
	struct npf_client *c;

	if (!d.pid)
		rs_npfd_start(&d);
	/* the fallback serves 200 ms after npfd is gone (5 s by default) */
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fallback_ms = 200);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	return c;
}

/* npfd killed (SIGKILL); returns once libnpf's fallback serves. */
static void kill_npfd(const char *what)
{
	int before = counter(&rs_fallbacks);

	rs_npfd_kill(&d, SIGKILL);
	for (double t0 = th_now(); counter(&rs_fallbacks) == before; usleep(10000))
		TH_ASSERT(th_now() - t0 < 10, "%s: libnpf's fallback did not start within 10 s",
			  what);
}

/* A new npfd, and libnpf reconnected to it (handed its regions over); when it did. */
static double restart_npfd(const char *what)
{
	int before = counter(&rs_reconnects);

	rs_npfd_start(&d);
	for (double t0 = th_now(); counter(&rs_reconnects) == before; usleep(2000))
		TH_ASSERT(th_now() - t0 < 10, "%s: libnpf did not reconnect within 10 s", what);
	return th_now();
}

/*
 * The new npfd serves a region at [start, start + npages pages): adopted
 * where it is now (a region keeps the holes moved out of its middle).
 */
static void check_adopted(const char *what, struct npf_client *c, const char *start, __u64 npages)
{
	struct npf_region_info *ri;
	bool found = false;
	size_t n;

	TH_ASSERT(!npf_client__region_list(c, &ri, &n), "%s: region list: %s", what,
		  npf_client__errmsg(c));
	for (size_t i = 0; i < n; i++)
		found |= ri[i].start == (uintptr_t)start && ri[i].length == npages * PG;
	if (!found)
		for (size_t i = 0; i < n; i++)
			printf("%s: the new npfd's region %u: %#llx+%#llx\n", what, ri[i].region_id,
			       (unsigned long long)ri[i].start, (unsigned long long)ri[i].length);
	free(ri);
	TH_ASSERT(found, "%s: the new npfd has no region at %p+%#llx", what, (const void *)start,
		  (unsigned long long)(npages * PG));
	printf("%s: adopted at %p+%#llx\n", what, (const void *)start,
	       (unsigned long long)(npages * PG));
}

/* Region id (npg pages at mem) with generation gen written, evicted down to its budget: most of it stored. */
static void evict_written(const char *what, struct npf_client *c, char *mem, __u64 npg, __u64 gen,
			  int id)
{
	double t0 = th_now();
	struct npf_budget_info bi;

	th_fill(mem, npg, gen);
	th_budget_settle(c, id);
	bi = th_budget(c, id);
	printf("%s: %llu pages written and evicted in %.2f s: %llu resident, %llu stored\n", what,
	       (unsigned long long)npg, th_now() - t0, (unsigned long long)bi.resident_pages,
	       (unsigned long long)bi.stored_pages);
	TH_ASSERT(bi.stored_pages >= npg / 2, "%s: only %llu pages stored: little was evicted",
		  what, (unsigned long long)bi.stored_pages);
}

/* A region of npg pages with generation gen written, evicted down to its budget. */
static char *evicted_region(const char *what, struct npf_client *c, __u64 npg, __u64 gen, int *id)
{
	char *mem = th_budget_region(c, npg, BUDGET, id);

	evict_written(what, c, mem, npg, gen, *id);
	return mem;
}

/* A free place for n pages (PROT_NONE: a mremap() with MREMAP_FIXED replaces it). */
static char *reserve(__u64 n)
{
	char *p = mmap(NULL, n * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	TH_ASSERT(p != MAP_FAILED, "mmap: %s", strerror(errno));
	return p;
}

/* Pages [first, first + n) of the region at mem moved to a free place; where they went. */
static char *move_part(char *mem, __u64 first, __u64 n)
{
	char *to = reserve(n), *moved;

	moved = mremap(mem + first * PG, n * PG, n * PG, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	TH_ASSERT(moved == to, "mremap: %s", strerror(errno));
	return moved;
}

/*
 * The part just moved, then npfd killed before it has put it all back:
 * how many of its pages are not there yet (every page of the part was
 * evicted or present, and a present page moves present). The kill comes
 * one answered request after the move: npfd has read the REMAP event
 * once mremap() returns, but handles it (and journals the part) on its
 * loop, and a request sent after the move is answered after that.
 */
static __u64 move_and_kill(const char *what, struct npf_client *c, int id, char *mem, __u64 first,
			   __u64 n, char **part)
{
	__u64 missing;

	*part = move_part(mem, first, n);
	th_budget(c, id);
	kill_npfd(what);
	missing = n - th_present_pages(*part, n);
	printf("%s: %llu of the %llu pages moved were not back when npfd died\n", what,
	       (unsigned long long)missing, (unsigned long long)n);
	return missing;
}

/*
 * A try whose part npfd had put all back before it died: a new npfd, the
 * regions handed over (nothing of a part left), then gone with the client.
 */
static void discard(const char *what, struct npf_client *c, char *mem, __u64 npg, char *part,
		    __u64 first, __u64 n)
{
	restart_npfd(what);
	npf_client__close(c);
	/* not where the part was: a thread's stack may be there now */
	munmap(mem, first * PG);
	if (first + n < npg)
		munmap(mem + (first + n) * PG, (npg - first - n) * PG);
	munmap(part, n * PG);
}

/* ---- the cases ---- */

static void anon_killed(void)
{
	const __u64 half = A_PART / 2, above = A_FIRST + A_PART;
	struct npf_client *c;
	__u64 stored;
	char *mem, *part;
	double since;
	int id;

	for (int tries = 1;; tries++) {
		c = connect_client();
		mem = evicted_region("A.", c, A_NPG, 1, &id);
		if (move_and_kill("A.", c, id, mem, A_FIRST, A_PART, &part))
			break;
		TH_ASSERT(tries < TRIES, "A. npfd put the part all back before it died, %d times",
			  tries);
		printf("A. try %d: nothing left to put back at the kill: again\n", tries);
		discard("A.", c, mem, A_NPG, part, A_FIRST, A_PART);
	}
	check_spans("A. through the fallback",
		    (struct span[]){{"the part, upper half", part + half * PG, A_FIRST + half,
				     A_PART - half, 1},
				    {"the region, below the part", mem, 0, A_FIRST, 1},
				    {NULL}});
	since = restart_npfd("A.");
	check_adopted("A. the region", c, mem, A_NPG);
	th_budget_again(c, id, BUDGET);
	check_spans("A. after the handover",
		    (struct span[]){{"the part, lower half", part, A_FIRST, half, 1},
				    {"the part, upper half again", part + half * PG, A_FIRST + half,
				     A_PART - half, 1},
				    {"the region, above the part", mem + above * PG, above,
				     A_NPG - above, 1},
				    {NULL}});
	check_part_own("A. after the handover", part, A_FIRST, A_PART, since);
	/* the region: evicted again by the new npfd, and read back from its store */
	th_budget_settle(c, id);
	stored = th_budget(c, id).stored_pages;
	printf("A. the new npfd stored %llu pages of the region\n", (unsigned long long)stored);
	/* the part's copies left in the store are in the region's hole: not the region's pages */
	TH_ASSERT(stored <= A_NPG - A_PART,
		  "A. the new npfd counts %llu stored pages, more than the region's %llu",
		  (unsigned long long)stored, (unsigned long long)(A_NPG - A_PART));
	check_spans("A. the region, served by the new npfd",
		    (struct span[]){{"below the part", mem, 0, A_FIRST, 1},
				    {"above the part", mem + above * PG, above, A_NPG - above, 1},
				    {NULL}});
	npf_client__close(c);
	/* not the hole between: a thread's stack may be there now */
	munmap(mem, A_FIRST * PG);
	munmap(mem + above * PG, (A_NPG - above) * PG);
	munmap(part, A_PART * PG);
}

static char *file_region(struct npf_client *c, int fd, int *id)
{
	char *mem =
		mmap(NULL, B_NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	TH_ASSERT(mem != MAP_FAILED, "mmap: %s", strerror(errno));
	NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = fd,
		 .name = "moved-restart");
	*id = npf_client__register(c, mem, B_NPG * PG, &o);
	TH_ASSERT(*id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(!npf_client__region_set(c, (__u32)*id, NPF_SET_BUDGET, BUDGET * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));
	return mem;
}

static void file_killed(void)
{
	const __u64 half = B_PART / 2;
	int fd = th_gen_file(B_NPG, 1), id;
	struct npf_client *c;
	char *mem, *part;
	double since, t0;

	for (int tries = 1;; tries++) {
		c = connect_client();
		mem = file_region(c, fd, &id);
		/* pages [0, B_READ) read (most evicted again: clean, dropped), the rest never */
		t0 = th_now();
		check_spans("B. before the move",
			    (struct span[]){{"read", mem, 0, B_READ, 1}, {NULL}});
		th_budget_settle(c, id);
		printf("B. %lu pages read and evicted in %.2f s; %llu present\n", B_READ,
		       th_now() - t0, (unsigned long long)th_present_pages(mem, B_NPG));
		if (move_and_kill("B.", c, id, mem, B_FIRST, B_PART, &part))
			break;
		TH_ASSERT(tries < TRIES, "B. npfd put the part all back before it died, %d times",
			  tries);
		printf("B. try %d: nothing left to put back at the kill: again\n", tries);
		discard("B.", c, mem, B_NPG, part, B_FIRST, B_PART);
	}
	check_spans("B. through the fallback",
		    (struct span[]){{"the part, upper half", part + half * PG, B_FIRST + half,
				     B_PART - half, 1},
				    {"the region (below the part)", mem, 0, B_FIRST, 1},
				    {NULL}});
	since = restart_npfd("B.");
	check_adopted("B. the region", c, mem, B_FIRST);
	th_budget_again(c, id, BUDGET);
	check_spans("B. after the handover",
		    (struct span[]){{"the part, lower half", part, B_FIRST, half, 1},
				    {"the part, upper half again", part + half * PG, B_FIRST + half,
				     B_PART - half, 1},
				    {NULL}});
	check_part_own("B. after the handover", part, B_FIRST, B_PART, since);
	th_budget_settle(c, id);
	check_spans("B. the region, served by the new npfd",
		    (struct span[]){{"the region", mem, 0, B_FIRST, 1}, {NULL}});
	npf_client__close(c);
	munmap(mem, B_FIRST * PG);
	munmap(part, B_PART * PG);
	close(fd);
}

/*
 * C's moves, made in a thread: a mremap() waits until its REMAP event is
 * read. Both places are taken before the moves: the part does not land
 * where region i was (mmap() would give it those addresses, freed by the
 * first move), which the dead npfd's journal still holds as region i's.
 */
static char *c_whole, *c_whole_to, *c_cut, *c_part, *c_part_to;

static void *c_moves(void *arg)
{
	(void)arg;
	TH_ASSERT(mremap(c_whole, C_NPG * PG, C_NPG * PG, MREMAP_MAYMOVE | MREMAP_FIXED,
			 c_whole_to) == c_whole_to,
		  "mremap region i: %s", strerror(errno));
	c_part = mremap(c_cut + C_FIRST * PG, C_PART * PG, C_PART * PG,
			MREMAP_MAYMOVE | MREMAP_FIXED, c_part_to);
	TH_ASSERT(c_part == c_part_to, "mremap a part of region ii: %s", strerror(errno));
	return NULL;
}

/* A page of the npg at mem not present (evicted), or npg. */
static __u64 absent_page(const char *mem, __u64 npg)
{
	__u64 p;

	for (p = 0; p < npg && th_present_pages(mem + p * PG, 1); p++)
		;
	return p;
}

static void moved_while_away(void)
{
	const __u64 above = C_FIRST + C_PART, half = C_NPG / 2;
	struct npf_client *c;
	int id_whole, id_cut;
	double since;
	__u64 p, stored;

	c = connect_client();
	c_whole = evicted_region("C. region i", c, C_NPG, 1, &id_whole);
	c_cut = evicted_region("C. region ii", c, C_NPG, 3, &id_cut);
	kill_npfd("C.");
	/* the fallback serves: an evicted page reads its stored copy */
	p = absent_page(c_whole, C_NPG);
	TH_ASSERT(p < C_NPG, "C. no page of region i is evicted");
	check_spans("C. the fallback serves",
		    (struct span[]){{"an evicted page", c_whole + p * PG, p, 1, 1}, {NULL}});
	c_whole_to = reserve(C_NPG);
	c_part_to = reserve(C_PART);
	rs_run_within(&d, c_moves, NULL, 10, "C. the moves (mremap) while npfd is away");
	printf("C. region i moved whole from %p to %p, pages %lu-%llu of region ii to %p\n",
	       (void *)c_whole, (void *)c_whole_to, C_FIRST, (unsigned long long)(above - 1),
	       (void *)c_part);
	check_spans(
		"C. through the fallback",
		(struct span[]){{"region i at its new place, upper half", c_whole_to + half * PG,
				 half, C_NPG - half, 1},
				{"region ii's part at its new place", c_part, C_FIRST, C_PART, 3},
				{"region ii, above the part", c_cut + above * PG, above,
				 C_NPG - above, 3},
				{NULL}});
	since = restart_npfd("C.");
	check_adopted("C. region i at its new place", c, c_whole_to, C_NPG);
	check_adopted("C. region ii", c, c_cut, C_NPG);
	th_budget_again(c, id_whole, BUDGET);
	th_budget_again(c, id_cut, BUDGET);
	check_spans(
		"C. after the handover",
		(struct span[]){{"region i at its new place, lower half", c_whole_to, 0, half, 1},
				{"region ii, below the part", c_cut, 0, C_FIRST, 3},
				{"region ii's part, again", c_part, C_FIRST, C_PART, 3},
				{NULL}});
	check_part_own("C. region ii's part", c_part, C_FIRST, C_PART, since);
	/* both evicted again by the new npfd, and read back from its store */
	th_budget_settle(c, id_whole);
	th_budget_settle(c, id_cut);
	stored = th_budget(c, id_cut).stored_pages;
	printf("C. the new npfd stored %llu and %llu pages\n",
	       (unsigned long long)th_budget(c, id_whole).stored_pages, (unsigned long long)stored);
	TH_ASSERT(stored <= C_NPG - C_PART,
		  "C. the new npfd counts %llu stored pages of region ii, more than its %llu",
		  (unsigned long long)stored, (unsigned long long)(C_NPG - C_PART));
	check_spans("C. served by the new npfd",
		    (struct span[]){{"region i at its new place", c_whole_to, 0, C_NPG, 1},
				    {"region ii, below the part", c_cut, 0, C_FIRST, 3},
				    {"region ii, above the part", c_cut + above * PG, above,
				     C_NPG - above, 3},
				    {NULL}});
	npf_client__close(c);
	munmap(c_whole_to, C_NPG * PG);
	munmap(c_cut, C_FIRST * PG); /* not the hole between: a thread's stack may be there now */
	munmap(c_cut + above * PG, (C_NPG - above) * PG);
	munmap(c_part, C_PART * PG);
}

/*
 * D-G: what libnpf's fallback keeps of the process's drops and of the
 * parts, as the process unmaps and moves memory while npfd is away.
 * Their steps run in a thread (rs_run_within()): each madvise(), munmap()
 * and mremap() returns once the fallback has read its event; and the
 * thread's stack is taken before the first of them, not in a place one
 * of them frees.
 */
#define D_NPG 8192UL
#define D_DROP 2048UL /* the pages the process drops: [D_DROP, D_DROP + D_NDROP) */
#define D_NDROP 4096UL
/* F: the hole of region O, where region I is: pages [F_HOLE, F_HOLE + F_INNER) of O */
#define F_NPG 8192UL
#define F_HOLE 2048UL
#define F_INNER 2048UL

static char *r1, *r2, *r3, *r3_to, *inner, *inner_to, *g_part, *g_r;

static void *d_steps(void *arg)
{
	(void)arg;
	TH_ASSERT(!madvise(r1 + D_DROP * PG, D_NDROP * PG, MADV_DONTNEED), "madvise R1: %s",
		  strerror(errno));
	TH_ASSERT(!munmap(r1, D_NPG * PG), "munmap R1: %s", strerror(errno));
	TH_ASSERT(mremap(r2, D_NPG * PG, D_NPG * PG, MREMAP_MAYMOVE | MREMAP_FIXED, r1) == r1,
		  "mremap R2 onto R1's old place: %s", strerror(errno));
	return NULL;
}

/*
 * D. A region unmapped after the process dropped some of its pages while
 * the fallback served, and another region moved whole to where it was: the
 * other's pages there are its own, not the dropped ones. Before, the drops
 * stayed recorded where they were made: the pages moved there read zeros
 * through the fallback, and fallback_settle_drops() gave those not read
 * yet the zero page before the next npfd adopted the region.
 */
static void drops_unmapped(void)
{
	const __u64 above = D_DROP + D_NDROP, half = D_DROP + D_NDROP / 2;
	struct npf_client *c;
	int id1, id2;

	c = connect_client();
	r1 = evicted_region("D. region R1", c, D_NPG, 4, &id1);
	r2 = evicted_region("D. region R2", c, D_NPG, 5, &id2);
	kill_npfd("D.");
	rs_run_within(&d, d_steps, NULL, 10, "D. the drop, the unmap and the move");
	printf("D. pages %lu-%llu of R1 (at %p) dropped, R1 unmapped, R2 moved whole from %p to where R1 was\n",
	       D_DROP, (unsigned long long)(above - 1), (void *)r1, (void *)r2);
	check_spans("D. through the fallback",
		    (struct span[]){{"R2 where R1 was dropped, upper half", r1 + half * PG, half,
				     above - half, 5},
				    {"R2 above that", r1 + above * PG, above, D_NPG - above, 5},
				    {NULL}});
	restart_npfd("D.");
	check_spans("D. after the handover",
		    (struct span[]){{"R2 where R1 was dropped, lower half", r1 + D_DROP * PG,
				     D_DROP, half - D_DROP, 5},
				    {"R2 below that", r1, 0, D_DROP, 5},
				    {"R2 where R1 was dropped, upper half again", r1 + half * PG,
				     half, above - half, 5},
				    {NULL}});
	check_adopted("D. R2 where R1 was", c, r1, D_NPG);
	th_budget_again(c, id2, BUDGET);
	th_budget_settle(c, id2);
	check_spans("D. R2, served by the new npfd",
		    (struct span[]){{"R2", r1, 0, D_NPG, 5}, {NULL}});
	npf_client__close(c);
	munmap(r1, D_NPG * PG);
}

static void *e_steps(void *arg)
{
	(void)arg;
	TH_ASSERT(!madvise(r3 + D_DROP * PG, D_NDROP * PG, MADV_DONTNEED), "madvise R3: %s",
		  strerror(errno));
	TH_ASSERT(mremap(r3, D_NPG * PG, D_NPG * PG, MREMAP_MAYMOVE | MREMAP_FIXED, r3_to) == r3_to,
		  "mremap R3: %s", strerror(errno));
	return NULL;
}

/*
 * E. Evicted pages dropped by the process while the fallback served, then
 * their region moved whole: at the new place they read zeros. Before, the
 * drops stayed recorded at the old place: at the new one the pages read
 * their stored copies, through the fallback and from the next npfd.
 */
static void drops_moved(void)
{
	const __u64 above = D_DROP + D_NDROP, half = D_DROP + D_NDROP / 2;
	struct npf_client *c;
	int id;

	c = connect_client();
	r3 = evicted_region("E. region R3", c, D_NPG, 6, &id);
	kill_npfd("E.");
	r3_to = reserve(D_NPG);
	rs_run_within(&d, e_steps, NULL, 10, "E. the drop and the move");
	printf("E. pages %lu-%llu of R3 dropped, R3 moved whole from %p to %p\n", D_DROP,
	       (unsigned long long)(above - 1), (void *)r3, (void *)r3_to);
	check_spans("E. through the fallback",
		    (struct span[]){{"the pages dropped, upper half (zeros)", r3_to + half * PG,
				     half, above - half, 0},
				    {"R3 above them", r3_to + above * PG, above, D_NPG - above, 6},
				    {NULL}});
	restart_npfd("E.");
	check_spans("E. after the handover",
		    (struct span[]){{"the pages dropped, lower half (zeros)", r3_to + D_DROP * PG,
				     D_DROP, half - D_DROP, 0},
				    {"R3 below them", r3_to, 0, D_DROP, 6},
				    {"the pages dropped, upper half again (zeros)",
				     r3_to + half * PG, half, above - half, 0},
				    {NULL}});
	check_adopted("E. R3 at its new place", c, r3_to, D_NPG);
	th_budget_again(c, id, BUDGET);
	th_budget_settle(c, id);
	check_spans("E. R3, served by the new npfd",
		    (struct span[]){{"below the pages dropped", r3_to, 0, D_DROP, 6},
				    {"the pages dropped (zeros)", r3_to + D_DROP * PG, D_DROP,
				     D_NDROP, 0},
				    {"above them", r3_to + above * PG, above, D_NPG - above, 6},
				    {NULL}});
	npf_client__close(c);
	munmap(r3_to, D_NPG * PG);
}

static void *f_move(void *arg)
{
	(void)arg;
	TH_ASSERT(mremap(inner, F_INNER * PG, F_INNER * PG, MREMAP_MAYMOVE | MREMAP_FIXED,
			 inner_to) == inner_to,
		  "mremap region I: %s", strerror(errno));
	return NULL;
}

/*
 * F. A region registered in another's hole (npfd keeps the hole: libnpf
 * and the journal do not), moved whole while npfd is away: it moves as
 * itself, and nothing of the region around it moves with it. Before, the
 * fallback also made a part of the outer region's store for the inner
 * one's range at the new place, served before the inner region (its
 * copies there punched: zeros), and finished at the handover by
 * unregistering that range: the new npfd refused the inner region.
 */
static void inner_moved(void)
{
	const __u64 above = F_HOLE + F_INNER, half = F_INNER / 2;
	struct npf_client *c;
	int id_o, id_i;
	char *o;

	c = connect_client();
	o = evicted_region("F. region O", c, F_NPG, 8, &id_o);
	TH_ASSERT(!munmap(o + F_HOLE * PG, F_INNER * PG), "munmap O's middle: %s", strerror(errno));
	inner = mmap(o + F_HOLE * PG, F_INNER * PG, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	TH_ASSERT(inner == o + F_HOLE * PG, "mmap into O's hole: %s", strerror(errno));
	id_i = npf_client__register(c, inner, F_INNER * PG, NULL);
	TH_ASSERT(id_i > 0, "register region I in O's hole: %s", npf_client__errmsg(c));
	TH_ASSERT(!npf_client__region_set(c, (__u32)id_i, NPF_SET_BUDGET, BUDGET * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));
	evict_written("F. region I, in O's hole", c, inner, F_INNER, 9, id_i);
	kill_npfd("F.");
	inner_to = reserve(F_INNER);
	rs_run_within(&d, f_move, NULL, 10, "F. the move of region I");
	printf("F. region I moved whole from %p (pages %lu-%llu of O) to %p\n", (void *)inner,
	       F_HOLE, (unsigned long long)(above - 1), (void *)inner_to);
	check_spans("F. through the fallback",
		    (struct span[]){{"I at its new place, upper half", inner_to + half * PG, half,
				     F_INNER - half, 9},
				    {"O below its hole", o, 0, F_HOLE, 8},
				    {NULL}});
	restart_npfd("F.");
	check_spans("F. after the handover",
		    (struct span[]){{"I at its new place, lower half", inner_to, 0, half, 9},
				    {"I at its new place, upper half again", inner_to + half * PG,
				     half, F_INNER - half, 9},
				    {"O above its hole", o + above * PG, above, F_NPG - above, 8},
				    {NULL}});
	check_adopted("F. region I at its new place", c, inner_to, F_INNER);
	check_adopted("F. region O", c, o, F_NPG);
	th_budget_again(c, id_i, BUDGET);
	th_budget_again(c, id_o, BUDGET);
	th_budget_settle(c, id_i);
	th_budget_settle(c, id_o);
	check_spans("F. served by the new npfd",
		    (struct span[]){{"I at its new place", inner_to, 0, F_INNER, 9},
				    {"O below its hole", o, 0, F_HOLE, 8},
				    {"O above its hole", o + above * PG, above, F_NPG - above, 8},
				    {NULL}});
	npf_client__close(c);
	munmap(inner_to, F_INNER * PG);
	munmap(o, F_HOLE * PG); /* not the hole: a thread's stack may be there now */
	munmap(o + above * PG, (F_NPG - above) * PG);
}

static void *g_steps(void *arg)
{
	(void)arg;
	TH_ASSERT(!munmap(g_part, A_PART * PG), "munmap the part: %s", strerror(errno));
	TH_ASSERT(mremap(g_r, A_PART * PG, A_PART * PG, MREMAP_MAYMOVE | MREMAP_FIXED, g_part) ==
			  g_part,
		  "mremap region R onto the part's place: %s", strerror(errno));
	return NULL;
}

/*
 * G. As A, and the process unmaps the part while the fallback serves, then
 * moves another region whole to where the part was: the dead npfd's
 * journal entry of the part, taken once when the fallback started, is not
 * taken again at the handover. Before, it was (no part had its slot any
 * more): the part came back over region R, its stored copies were put
 * into R's missing pages, and its range, R's, was unregistered: the new
 * npfd refused R, whose other missing pages read zeros.
 */
static void part_unmapped(void)
{
	const __u64 half = A_PART / 2, above = A_FIRST + A_PART;
	struct npf_client *c;
	int id, id_r;
	char *mem;

	for (int tries = 1;; tries++) {
		c = connect_client();
		mem = evicted_region("G.", c, A_NPG, 10, &id);
		g_r = evicted_region("G. region R", c, A_PART, 11, &id_r);
		if (move_and_kill("G.", c, id, mem, A_FIRST, A_PART, &g_part))
			break;
		TH_ASSERT(tries < TRIES, "G. npfd put the part all back before it died, %d times",
			  tries);
		printf("G. try %d: nothing left to put back at the kill: again\n", tries);
		discard("G.", c, mem, A_NPG, g_part, A_FIRST, A_PART);
		munmap(g_r, A_PART * PG);
	}
	rs_run_within(&d, g_steps, NULL, 10, "G. the unmap of the part and the move of R");
	printf("G. the part at %p unmapped, region R moved whole from %p to its place\n",
	       (void *)g_part, (void *)g_r);
	check_spans("G. through the fallback",
		    (struct span[]){{"R where the part was, upper half", g_part + half * PG, half,
				     A_PART - half, 11},
				    {"the region, below where the part was", mem, 0, A_FIRST, 10},
				    {NULL}});
	restart_npfd("G.");
	check_spans("G. after the handover",
		    (struct span[]){{"R where the part was, lower half", g_part, 0, half, 11},
				    {"R where the part was, upper half again", g_part + half * PG,
				     half, A_PART - half, 11},
				    {"the region, above where the part was", mem + above * PG,
				     above, A_NPG - above, 10},
				    {NULL}});
	check_adopted("G. region R where the part was", c, g_part, A_PART);
	check_adopted("G. the region", c, mem, A_NPG);
	th_budget_again(c, id_r, BUDGET);
	th_budget_settle(c, id_r);
	check_spans("G. R, served by the new npfd",
		    (struct span[]){{"R", g_part, 0, A_PART, 11}, {NULL}});
	npf_client__close(c);
	munmap(mem, A_FIRST * PG);
	munmap(mem + above * PG, (A_NPG - above) * PG);
	munmap(g_part, A_PART * PG);
}

/*
 * At exit: npfd's stores go (a killed npfd leaves them, some 130 MiB of
 * them after a failure), its log stays for a look.
 */
static void drop_stores(void)
{
	char cmd[128];

	if (!d.swap[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", d.swap);
	if (system(cmd) < 0)
		perror("system");
}

/* $EVICT_MOVED_RESTART_CASES (e.g. "A,C") runs only those; all by default */
static bool wanted(char which)
{
	const char *only = getenv("EVICT_MOVED_RESTART_CASES");

	return !only || strchr(only, which);
}

int main(void)
{
	double t0 = th_now();

	th_require_root();
	atexit(drop_stores);
	npf_set_print(rs_print);
	if (wanted('A'))
		anon_killed();
	if (wanted('B'))
		file_killed();
	if (wanted('C'))
		moved_while_away();
	if (wanted('D'))
		drops_unmapped();
	if (wanted('E'))
		drops_moved();
	if (wanted('F'))
		inner_moved();
	if (wanted('G'))
		part_unmapped();
	rs_npfd_cleanup(&d);
	printf("PASS (%.1f s)\n", th_now() - t0);
	return 0;
}
