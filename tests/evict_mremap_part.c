// SPDX-License-Identifier: GPL-2.0
/*
 * Parts of registered regions moved with mremap(). A region is one range,
 * so a part moved away leaves it (UFFD_EVENT_REMAP); its data must go
 * with it. What only npfd held -- anonymous pages evicted to its swap
 * store, a file-backed region's pages not read from its file yet -- must
 * read right at the new place, and the part must be the process's
 * ordinary memory there: written at once, nobody waiting for good. What
 * stays of the region must read right and still meet its budget.
 *
 *   1. the middle of an anonymous region with a batch under way (its zaps
 *      held behind a gate, th_gate_close()), writers at the new place;
 *   2. the middle of one mostly evicted (a hole stays in the region), a
 *      part larger than npfd puts back at once, its last page read first;
 *   3. the head of one (the region is cut: its page state shifts down);
 *   4. the middle of a file-backed region: pages read and evicted, pages
 *      never read;
 *   5. a part moved into the hole another region keeps where its middle was
 *      moved away;
 *   6. the first page past a hole a munmap left in a region;
 *   7. a slice of a part moved again before npfd had put the part all back.
 * In 1., a writer frozen on a victim of the part before the move waits at
 * the old address: it must go on (fault again there, and find nothing).
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include "budget.h"
#include "zap_log.h"

#define PG 4096UL
#define NPG 1024UL
#define BUDGET 64UL
#define PART 256UL /* pages moved, from page PART on (the middle) or 0 (the head) */
#define FILE_FIRST (PART + PART / 2) /* the file-backed region's part: read, and never read */
/* 2.: a part of 8 times what npfd puts back in one pass of its loop (moved.c) */
#define BIG_NPG 12288UL
#define BIG_FIRST 2048UL
#define BIG_PART 8192UL

/* Pages [first, first + n) of the region at mem moved to a free place; where they went. */
static char *move_part(char *mem, __u64 first, __u64 n)
{
	char *hint = mmap(NULL, n * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), *moved;

	TH_ASSERT(hint != MAP_FAILED, "mmap: %s", strerror(errno));
	moved = mremap(mem + first * PG, n * PG, n * PG, MREMAP_MAYMOVE | MREMAP_FIXED, hint);
	TH_ASSERT(moved == hint, "mremap: %s", strerror(errno));
	return moved;
}

/*
 * The moved part is the process's ordinary memory within 5 s: no longer
 * registered with the userfaultfd (no "um"/"uw" in its VmFlags).
 */
static void check_unregistered(const char *what, const char *moved)
{
	for (double t0 = th_now();; usleep(10000)) {
		FILE *f = fopen("/proc/self/smaps", "r");
		char line[512], flags[512] = "";
		bool in = false;

		TH_ASSERT(f, "open smaps: %s", strerror(errno));
		while (fgets(line, sizeof(line), f)) {
			unsigned long lo, hi;

			if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ' ') &&
			    line[strcspn(line, " ")] == ' ' &&
			    strchr(line, '-') < strchr(line, ' '))
				in = lo <= (unsigned long)moved && (unsigned long)moved < hi;
			else if (in && !strncmp(line, "VmFlags:", 8))
				snprintf(flags, sizeof(flags), "%s", line + 8);
		}
		fclose(f);
		TH_ASSERT(flags[0], "%s: no mapping at %p in smaps", what, (const void *)moved);
		if (!strstr(flags, " um") && !strstr(flags, " uw"))
			return;
		TH_ASSERT(th_now() - t0 < 5, "%s: the moved part is still registered 5 s on:%s",
			  what, flags);
	}
}

static void check_part(const char *what, const char *mem, __u64 first, __u64 n, __u64 gen)
{
	__u64 bad = th_wrong_at(mem, first, n, gen);

	printf("%s: pages %llu-%llu: %llu words wrong (%llu pages' worth)\n", what,
	       (unsigned long long)first, (unsigned long long)(first + n - 1),
	       (unsigned long long)bad, (unsigned long long)bad / 512);
	TH_ASSERT(!bad, "%s: %llu words of pages %llu-%llu do not hold generation %llu", what,
		  (unsigned long long)bad, (unsigned long long)first,
		  (unsigned long long)(first + n - 1), (unsigned long long)gen);
}

static char *writer_mem;
static __u64 writer_first, writer_n;

static void *write_moved(void *arg)
{
	(void)arg;
	th_fill_at(writer_mem, writer_first, writer_n, 2);
	return NULL;
}

/*
 * Generation 2 written to the n pages moved (the region's pages first on)
 * within secs; a gate given opens 0.3 s after the writes start.
 */
static void write_moved_within(char *moved, __u64 first, __u64 n, int secs, struct th_gate *g)
{
	struct timespec until;
	pthread_t th;

	writer_mem = moved;
	writer_first = first;
	writer_n = n;
	TH_ASSERT(!pthread_create(&th, NULL, write_moved, NULL), "pthread_create");
	if (g) {
		usleep(300000);
		th_gate_open(g);
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += secs;
	TH_ASSERT(!pthread_timedjoin_np(th, NULL, &until),
		  "a write to the moved part still waits after %d s", secs);
}

/*
 * Pages [first, first + n) of a region of npg pages at mem, generation 1,
 * moved to moved: they read right there, are the process's own memory
 * (written at once), and what stayed reads right.
 */
static void check_moved(const char *what, char *mem, __u64 npg, char *moved, __u64 first, __u64 n)
{
	char label[64];

	snprintf(label, sizeof(label), "%s moved", what);
	check_part(label, moved, first, n, 1);
	check_unregistered(label, moved);
	write_moved_within(moved, first, n, 5, NULL);
	snprintf(label, sizeof(label), "%s moved, written", what);
	check_part(label, moved, first, n, 2);
	snprintf(label, sizeof(label), "%s stays, below", what);
	check_part(label, mem, 0, first, 1);
	snprintf(label, sizeof(label), "%s stays, above", what);
	check_part(label, mem + (first + n) * PG, first + n, npg - first - n, 1);
}

/* At most `pages` of a region of npg pages at mem but its moved-away [first, first + n) present within 20 s. */
static void rest_met(struct npf_client *c, int id, const char *mem, __u64 npg, __u64 first, __u64 n,
		     __u64 pages)
{
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, pages * PG, NULL),
		  "set a budget: %s", npf_client__errmsg(c));
	for (double t0 = th_now();; usleep(100000)) {
		__u64 present = th_present_pages(mem, first) +
				th_present_pages(mem + (first + n) * PG, npg - first - n);

		if (present <= pages) {
			printf("%llu pages of what stays present with a budget of %llu\n",
			       (unsigned long long)present, (unsigned long long)pages);
			return;
		}
		TH_ASSERT(
			th_now() - t0 < 20,
			"%llu pages of what stays present 20 s after the budget came down to %llu",
			(unsigned long long)present, (unsigned long long)pages);
	}
}

/*
 * A region keeps the addresses of a hole moved out of its middle: the
 * next mmap may land there, and a region registered there would overlap
 * it. Unregistered once its part of the test is over.
 */
static void done(struct npf_client *c, int id)
{
	TH_ASSERT(!npf_client__unregister(c, (__u32)id), "unregister: %s", npf_client__errmsg(c));
}

/*
 * A writer frozen on a victim of the part before the move waits at the
 * old address: it must be woken, and fault again there (nothing is
 * mapped there now: SIGSEGV, caught).
 */
static __thread sigjmp_buf poke_jmp;
static __thread volatile int poking;
static char *poke_addr;

static void on_segv(int sig)
{
	(void)sig;
	if (poking)
		siglongjmp(poke_jmp, 1);
	abort();
}

static void *poke_old(void *arg)
{
	(void)arg;
	if (sigsetjmp(poke_jmp, 1))
		return (void *)1; /* the address was gone when it faulted again */
	poking = 1;
	*(volatile __u64 *)(void *)poke_addr = 7;
	poking = 0;
	return NULL;
}

static void middle_while_evicting(struct npf_client *c)
{
	static struct zap_log zaps;
	struct sigaction sa = {.sa_handler = on_segv};
	struct timespec until;
	struct th_gate g;
	char *mem, *moved;
	void *segv = NULL;
	__u64 p, first;
	pthread_t th;
	int id;

	mem = zap_log_gated_region(&zaps, &g, c, NPG, BUDGET, &id);
	/* the part: from the second page under the held zaps on (a middle part) */
	for (p = 1; p + PART <= NPG && !zaps.zap[p]; p++)
		;
	TH_ASSERT(p + PART <= NPG, "no page past the first is under a zap behind the gate");
	first = p;
	TH_ASSERT(!sigaction(SIGSEGV, &sa, NULL), "sigaction");
	poke_addr = mem + p * PG;
	TH_ASSERT(!pthread_create(&th, NULL, poke_old, NULL), "pthread_create");
	usleep(200000); /* it waits on the frozen page */
	moved = move_part(mem, first, PART);
	check_part("1. moved during a batch, before the writes", moved, first, PART, 1);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	TH_ASSERT(!pthread_timedjoin_np(th, &segv, &until),
		  "a writer frozen at the old address of page %llu still waits 10 s after the move",
		  (unsigned long long)p);
	printf("1. the writer frozen at the old address of page %llu went on (%s)\n",
	       (unsigned long long)p, segv ? "SIGSEGV: nothing is mapped there" : "written");
	write_moved_within(moved, first, PART, 10, &g);
	printf("a batch under way at the move: %u zaps behind the gate\n", zaps.n);
	check_part("1. moved during a batch", moved, first, PART, 2);
	check_unregistered("1. moved during a batch", moved);
	check_part("1. stays, below", mem, 0, first, 1);
	check_part("1. stays, above", mem + (first + PART) * PG, first + PART, NPG - first - PART,
		   1);
	rest_met(c, id, mem, NPG, first, PART, 16);
	check_part("1. stays, below, evicted", mem, 0, first, 1);
	check_part("1. stays, above, evicted", mem + (first + PART) * PG, first + PART,
		   NPG - first - PART, 1);
	done(c, id);
}

/* A region of npg pages filled with generation gen and evicted down to its budget: most of it stored. */
static char *evicted_region(struct npf_client *c, __u64 npg, __u64 gen, int *id)
{
	char *mem = th_budget_region(c, npg, BUDGET, id);
	struct npf_budget_info bi;

	th_fill(mem, npg, gen);
	th_budget_settle(c, *id);
	bi = th_budget(c, *id);
	printf("before the move: %llu pages resident, %llu stored\n",
	       (unsigned long long)bi.resident_pages, (unsigned long long)bi.stored_pages);
	TH_ASSERT(bi.stored_pages >= npg / 2, "only %llu pages stored: little was evicted",
		  (unsigned long long)bi.stored_pages);
	return mem;
}

/*
 * More pages than npfd puts back in one pass of its loop (moved.c): a
 * fault on the last one, right after the move, must wait for its data.
 */
static void middle_evicted(struct npf_client *c)
{
	const __u64 last = BIG_FIRST + BIG_PART - 1;
	char *mem, *moved;
	__u64 word;
	int id;

	mem = evicted_region(c, BIG_NPG, 1, &id);
	moved = move_part(mem, BIG_FIRST, BIG_PART);
	word = *(volatile __u64 *)(void *)(moved + (BIG_PART - 1) * PG);
	TH_ASSERT(word == th_word(1, last, 0),
		  "2. the moved part's last page read at once: %#llx, not generation 1",
		  (unsigned long long)word);
	check_moved("2.", mem, BIG_NPG, moved, BIG_FIRST, BIG_PART);
	rest_met(c, id, mem, BIG_NPG, BIG_FIRST, BIG_PART, 16);
	check_part("2. moved, after more eviction", moved, BIG_FIRST, BIG_PART, 2);
	done(c, id);
}

static void head_evicted(struct npf_client *c)
{
	char *mem, *moved;
	int id;

	mem = evicted_region(c, NPG, 1, &id);
	moved = move_part(mem, 0, PART);
	check_part("3. moved head", moved, 0, PART, 1);
	check_unregistered("3. moved head", moved);
	check_part("3. stays", mem + PART * PG, PART, NPG - PART, 1);
	th_budget_met(c, id, mem + PART * PG, NPG - PART, 16, 20);
	check_part("3. stays, evicted", mem + PART * PG, PART, NPG - PART, 1);
	write_moved_within(moved, 0, PART, 5, NULL);
	check_part("3. moved head, written", moved, 0, PART, 2);
	done(c, id);
}

/*
 * A part moved into the hole another region keeps where its own middle
 * was moved away: its faults there are the part's, not that region's
 * (which would install zeros, and the part's put-back would then find
 * the pages there).
 */
static void into_a_hole(struct npf_client *c)
{
	const __u64 last = BIG_FIRST + BIG_PART - 1;
	char *mem1, *mem2, *part1, *part2;
	__u64 word;
	int id1, id2;

	mem1 = evicted_region(c, BIG_NPG, 1, &id1);
	part1 = move_part(mem1, BIG_FIRST, BIG_PART);
	check_part("5. moved out, leaving a hole", part1, BIG_FIRST, BIG_PART, 1);
	mem2 = evicted_region(c, BIG_NPG, 3, &id2);
	part2 = mremap(mem2 + BIG_FIRST * PG, BIG_PART * PG, BIG_PART * PG,
		       MREMAP_MAYMOVE | MREMAP_FIXED, mem1 + BIG_FIRST * PG);
	TH_ASSERT(part2 == mem1 + BIG_FIRST * PG, "mremap into the hole: %s", strerror(errno));
	/* before npfd has put it all back (moved.c: 1024 pages a pass) */
	word = *(volatile __u64 *)(void *)(part2 + (BIG_PART - 1) * PG);
	TH_ASSERT(word == th_word(3, last, 0),
		  "5. the last page of the part moved into the hole read at once: %#llx",
		  (unsigned long long)word);
	check_part("5. moved into the hole", part2, BIG_FIRST, BIG_PART, 3);
	check_unregistered("5. moved into the hole", part2);
	check_part("5. the first region, below", mem1, 0, BIG_FIRST, 1);
	check_part("5. the second region, above", mem2 + (BIG_FIRST + BIG_PART) * PG,
		   BIG_FIRST + BIG_PART, BIG_NPG - BIG_FIRST - BIG_PART, 3);
	done(c, id1);
	done(c, id2);
}

/*
 * A hole whose end is not aligned to the fault-around block: the first
 * page past it must be served (a run that reached into the hole used to
 * fail whole, its faulting page never installed, the fault back for good).
 */
static char *hole_edge_page;

static void *read_hole_edge(void *arg)
{
	(void)arg;
	return (void *)(uintptr_t)(*(volatile __u64 *)(void *)hole_edge_page == 0);
}

static void hole_edge(struct npf_client *c)
{
	char *mem =
		mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct timespec until;
	void *zero = NULL;
	pthread_t th;
	int id;

	TH_ASSERT(mem != MAP_FAILED, "mmap: %s", strerror(errno));
	id = npf_client__register(c, mem, NPG * PG, NULL);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(!munmap(mem + 100 * PG, 101 * PG), "munmap: %s", strerror(errno));
	hole_edge_page = mem + 201 * PG;
	TH_ASSERT(!pthread_create(&th, NULL, read_hole_edge, NULL), "pthread_create");
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	TH_ASSERT(!pthread_timedjoin_np(th, &zero, &until),
		  "6. the page past a hole (pages 100-200) still waits after 10 s");
	TH_ASSERT(zero, "6. the page past a hole does not read zeros");
	printf("6. the page past a hole was served\n");
	done(c, id);
}

/*
 * Pages [0, 2 * PART) read (and evicted, clean: the file has them), the
 * rest never; the part moved is half of each.
 */
static void file_middle(struct npf_client *c)
{
	char *mem, *moved;
	int fd = th_gen_file(NPG, 1), id;

	mem = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = fd,
		 .name = "mremap-part");
	id = npf_client__register(c, mem, NPG * PG, &o);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, BUDGET * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));
	check_part("4. file, read", mem, 0, 2 * PART, 1);
	th_budget_settle(c, id);
	printf("4. file: %llu of the %lu pages read are present before the move\n",
	       (unsigned long long)th_present_pages(mem, 2 * PART), 2 * PART);
	moved = move_part(mem, FILE_FIRST, PART);
	check_moved("4. file,", mem, NPG, moved, FILE_FIRST, PART);
	done(c, id);
	close(fd);
}

/*
 * A slice of a part moved again before npfd has put the part all back
 * (moved.c: 1024 pages a pass): what was left to put there goes with it.
 * Before, npfd forgot it: those pages read zeros at their second place.
 * Whether the move came early enough is seen by the pages not present
 * right after it (every page of the part was evicted or present; a
 * present page moves present); the region is made again if none was.
 */
static void moved_again(struct npf_client *c)
{
	const __u64 skip = BIG_PART / 4, slice = BIG_PART / 2;
	__u64 missing = 0;
	char *mem, *part, *again;
	int id, tries;

	for (tries = 1;; tries++) {
		mem = evicted_region(c, BIG_NPG, 1, &id);
		part = move_part(mem, BIG_FIRST, BIG_PART);
		again = move_part(part, skip, slice);
		missing = slice - th_present_pages(again, slice);
		printf("7. try %d: %llu of the %llu pages moved again were not back yet\n", tries,
		       (unsigned long long)missing, (unsigned long long)slice);
		if (missing)
			break;
		TH_ASSERT(tries < 5,
			  "7. npfd put every part all back before it moved again, %d times", tries);
		done(c, id);
	}
	check_part("7. moved again", again, BIG_FIRST + skip, slice, 1);
	check_unregistered("7. moved again", again);
	check_part("7. the part, below", part, BIG_FIRST, skip, 1);
	check_part("7. the part, above", part + (skip + slice) * PG, BIG_FIRST + skip + slice,
		   BIG_PART - skip - slice, 1);
	check_unregistered("7. the part", part);
	check_part("7. the region, below", mem, 0, BIG_FIRST, 1);
	done(c, id);
}

int main(void)
{
	struct th_npfd d;
	struct npf_client *c;

	static const char *dbg[] = {"-v", "-v", NULL};
	th_npfd_start(&d, getenv("DBG") ? dbg : NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	/* first: a gate needs the ring's io-wq to have one worker (evict_mremap.c) */
	middle_while_evicting(c);
	middle_evicted(c);
	head_evicted(c);
	file_middle(c);
	into_a_hole(c);
	hole_edge(c);
	moved_again(c);
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
