// SPDX-License-Identifier: GPL-2.0
/*
 * Regions whose layout changed while npfd served them, then npfd killed
 * (SIGKILL): one moved whole with mremap(), one cut at its head with
 * munmap(), both anonymous and mostly evicted to the swap store, and a
 * file-backed one cut at its head (its file offset moves up). npfd
 * followed those events from the userfaultfd; the process did not see
 * them. First the fallback serves the process (npfd away), and the
 * process cuts a fourth region's tail meanwhile (the fallback follows
 * that one itself); then a new npfd adopts the regions: every page must read what was written, where
 * it is now, and nothing may wait for good. Before the layout journal
 * (npf_abi.h NPF_MSG_LAYOUT) libnpf handed the regions over as they were
 * registered: refused ("nothing is mapped"), their memory still
 * registered with nobody serving it, the first touch waited for ever.
 */
#include <pthread.h>
#include <sys/mman.h>
#include "budget.h"
#include "restart_common.h"

#define PG 4096UL
#define NPG 1024UL
#define BUDGET 64UL
#define CUT 64UL

static struct rs_npfd d;
static char *moved, *cut, *file_mem, *tail;
static int file_fd;

static __u64 bad_moved, bad_cut, bad_file, bad_tail;
#define HALF                                                                                       \
	(CUT + (NPG - CUT) / 2) /* the fallback reads the pages below, the new npfd the others */

static void *read_half(void *arg)
{
	bool second = arg != NULL;
	__u64 lo = second ? HALF : CUT, hi = second ? NPG : HALF;

	bad_moved = th_wrong_at(moved + lo * PG, lo, hi - lo, 1);
	bad_cut = th_wrong_at(cut + lo * PG, lo, hi - lo, 1);
	bad_file = th_wrong_at(file_mem + lo * PG, lo, hi - lo, 1);
	/* the region whose tail the process unmapped while the fallback served */
	bad_tail = th_wrong_at(tail + lo * PG, lo, (hi < NPG - CUT ? hi : NPG - CUT) - lo, 1);
	return NULL;
}

/*
 * Half the pages of the three (after the cut) read within 20 s (a
 * thread: a touch that waits for good fails here).
 */
static void check(const char *what, bool second)
{
	rs_run_within(&d, read_half, second ? (void *)1 : NULL, 20, what);
	printf("%s: words wrong: moved %llu, cut %llu, file-backed cut %llu\n", what,
	       (unsigned long long)bad_moved, (unsigned long long)bad_cut,
	       (unsigned long long)bad_file);
	printf("%s: words wrong in the region cut during the fallback: %llu\n", what,
	       (unsigned long long)bad_tail);
	if (bad_moved || bad_cut || bad_file || bad_tail)
		rs_npfd_dump_log(&d);
	TH_ASSERT(!bad_moved && !bad_cut && !bad_file && !bad_tail, "%s: pages read back wrong",
		  what);
}

static char *file_region(struct npf_client *c, int *id)
{
	char *mem;

	file_fd = th_gen_file(NPG, 1);
	mem = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = file_fd);
	*id = npf_client__register(c, mem, NPG * PG, &o);
	TH_ASSERT(*id > 0, "register: %s", npf_client__errmsg(c));
	return mem;
}

int main(void)
{
	struct npf_client *c;
	char *a, *hint;
	int ida, idb, idf, idt;

	npf_set_print(rs_print);
	rs_npfd_start(&d);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fallback_ms = 200);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	a = th_budget_region(c, NPG, BUDGET, &ida);
	th_fill(a, NPG, 1);
	th_budget_settle(c, ida);
	cut = th_budget_region(c, NPG, BUDGET, &idb);
	th_fill(cut, NPG, 1);
	th_budget_settle(c, idb);
	file_mem = file_region(c, &idf);
	tail = th_budget_region(c, NPG, BUDGET, &idt);
	th_fill(tail, NPG, 1);
	th_budget_settle(c, idt);
	printf("stored before the changes: %llu and %llu pages\n",
	       (unsigned long long)th_budget(c, ida).stored_pages,
	       (unsigned long long)th_budget(c, idb).stored_pages);
	TH_ASSERT(th_budget(c, ida).stored_pages >= NPG / 2 &&
			  th_budget(c, idb).stored_pages >= NPG / 2,
		  "little was evicted");

	hint = mmap(NULL, NPG * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(hint != MAP_FAILED, "mmap: %s", strerror(errno));
	moved = mremap(a, NPG * PG, NPG * PG, MREMAP_MAYMOVE | MREMAP_FIXED, hint);
	TH_ASSERT(moved == hint, "mremap: %s", strerror(errno));
	TH_ASSERT(!munmap(cut, CUT * PG), "munmap: %s", strerror(errno));
	TH_ASSERT(!munmap(file_mem, CUT * PG), "munmap: %s", strerror(errno));
	/* npfd has read the events once a request after them is answered */
	TH_ASSERT(th_budget(c, ida).budget_pages == BUDGET, "budget list");

	rs_npfd_kill(&d, SIGKILL);
	for (double t0 = th_now(); th_now() - t0 < 10 && !rs_fallbacks; usleep(10000))
		;
	TH_ASSERT(rs_fallbacks, "libnpf's fallback did not start within 10 s");
	check("served by the fallback", false);
	/*
	 * The fallback follows this cut itself (npfd is away): the dead
	 * npfd's journal, which does not know it, must not undo it when the
	 * next npfd comes.
	 */
	TH_ASSERT(!munmap(tail + (NPG - CUT) * PG, CUT * PG), "munmap: %s", strerror(errno));

	rs_npfd_start(&d);
	for (double t0 = th_now(); th_now() - t0 < 10 && !rs_reconnects; usleep(10000))
		;
	TH_ASSERT(rs_reconnects, "libnpf did not reconnect within 10 s");
	TH_ASSERT(!strstr(rs_last_warn, "refused to adopt"), "a region was not adopted: %s",
		  rs_last_warn);
	th_budget_again(c, ida, BUDGET);
	check("served by the new npfd", true);
	npf_client__close(c);
	close(file_fd);
	rs_npfd_cleanup(&d);
	printf("PASS\n");
	return 0;
}
