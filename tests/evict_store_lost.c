// SPDX-License-Identifier: GPL-2.0
/*
 * Part of a region's swap store is lost (truncated under npfd, as a full
 * or failing disk might leave it): an evicted page whose copy is gone must
 * fail with SIGBUS when touched, never read zeros or another page's bytes,
 * and every page whose copy is still there must read back right -- also
 * one that shares a fault's run (fault-around) with a lost one: npfd reads
 * a run's stored pages in spans and installs the run with one ioctl, and a
 * failed read must not take the pages before it down with it.
 */
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include "budget.h"

#define PG 4096UL
#define NPG 512UL
#define BUDGET 32UL
#define KEPT 200UL /* pages whose copies are left in the store: it is cut after them */

static sigjmp_buf jb;

static void on_sigbus(int sig)
{
	(void)sig;
	siglongjmp(jb, 1);
}

/* Words of page p that are not generation 1's, or -1 when reading it raised SIGBUS. */
static long wrong_words(const char *mem, __u64 p)
{
	long bad = 0;

	if (sigsetjmp(jb, 1))
		return -1;
	for (__u64 w = 0; w < PG / 8; w++)
		bad += ((const volatile __u64 *)(mem + p * PG))[w] != th_word(1, p, w);
	return bad;
}

int main(void)
{
	struct sigaction sa = {.sa_handler = on_sigbus};
	unsigned char vec[NPG];
	struct npf_client *c;
	struct th_npfd d;
	char link[300], path[64];
	__u64 kept_ok = 0, kept_bad = 0, lost_bus = 0, lost_read = 0, present_bad = 0;
	char *mem;
	int id, store, fd;
	ssize_t len;

	th_require_root();
	th_npfd_start(&d, NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = th_budget_region(c, NPG, BUDGET, &id);
	th_fill(mem, NPG, 1);
	th_budget_settle(c, id);

	/* the store: libnpf holds a descriptor of it (for its fallback) */
	store = th_fd_of("/var/lib/npf/swap/");
	TH_ASSERT(store >= 0, "no descriptor of the region's swap store in this process");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", store);
	len = readlink(path, link, sizeof(link) - 1);
	TH_ASSERT(len > 0, "readlink %s: %s", path, strerror(errno));
	link[len] = 0;
	fd = open(link, O_WRONLY | O_CLOEXEC);
	TH_ASSERT(fd >= 0 && !ftruncate(fd, (off_t)(KEPT * PG)), "truncate %s: %s", link,
		  strerror(errno));
	close(fd);

	/* no more eviction: what is missing now stays missing until read */
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, NPG * PG, NULL),
		  "set the budget: %s", npf_client__errmsg(c));
	TH_ASSERT(!mincore(mem, NPG * PG, vec), "mincore: %s", strerror(errno));
	TH_ASSERT(!sigaction(SIGBUS, &sa, NULL), "sigaction: %s", strerror(errno));
	for (__u64 p = 0; p < NPG; p++) {
		long bad = wrong_words(mem, p);
		bool lost = !(vec[p] & 1) && p >= KEPT, wrong = lost ? bad >= 0 : bad != 0;

		if (vec[p] & 1)
			present_bad += bad != 0;
		else if (!lost)
			*(bad ? &kept_bad : &kept_ok) += 1;
		else
			*(bad < 0 ? &lost_bus : &lost_read) += 1;
		if (wrong && present_bad + kept_bad + lost_read == 1)
			printf("page %llu (%s): %s\n", (unsigned long long)p,
			       vec[p] & 1 ? "present" :
			       lost	  ? "copy lost" :
					    "copy kept",
			       bad < 0 ? "SIGBUS" :
			       bad     ? "wrong words" :
					 "read");
	}
	printf("store cut after %lu pages: evicted with a copy %llu read right, %llu not; evicted without %llu SIGBUS, %llu read; present %llu wrong\n",
	       KEPT, (unsigned long long)kept_ok, (unsigned long long)kept_bad,
	       (unsigned long long)lost_bus, (unsigned long long)lost_read,
	       (unsigned long long)present_bad);
	TH_ASSERT(kept_ok > KEPT / 2 && lost_bus > (NPG - KEPT) / 2,
		  "too few pages evicted on either side of the cut to tell");
	TH_ASSERT(!kept_bad, "%llu evicted pages whose copies are kept did not read back right",
		  (unsigned long long)kept_bad);
	TH_ASSERT(
		!lost_read,
		"%llu evicted pages whose copies are lost were read (zeros or other bytes), not SIGBUS",
		(unsigned long long)lost_read);
	TH_ASSERT(!present_bad, "%llu present pages read wrong", (unsigned long long)present_bad);
	/* the unregister puts back what it can and ends: a page the store cannot give is left */
	TH_ASSERT(!npf_client__unregister(c, (__u32)id), "unregister: %s", npf_client__errmsg(c));
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
