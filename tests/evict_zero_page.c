// SPDX-License-Identifier: GPL-2.0
/*
 * Pages a process only read before it registered map the kernel's zero
 * page: they hold nothing, and must not count against a budget (region.c:
 * mark_present()). A file-backed region over a file of 0xa5 bytes, its
 * 256 pages read (not written) by the process before the registration, a
 * budget of 16 pages. Counted as present, the 256 zero-page mappings were
 * over the budget and evicted as dirty: 240 pages of zeros written into
 * the file over its data (review). The file must keep its bytes, and npfd
 * write nothing back.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include "budget.h"

#define PG 4096UL
#define NPG 256UL
#define BUDGET 16UL

int main(void)
{
	static unsigned char buf[PG];
	char path[] = "/tmp/npf-zero-page-XXXXXX";
	volatile unsigned char sink = 0;
	struct npf_budget_info bi;
	struct npf_client *c;
	struct th_npfd d;
	unsigned long bad = 0;
	char *mem;
	int fd, id;

	th_require_root();
	th_npfd_start(&d, NULL);
	fd = mkstemp(path);
	TH_ASSERT(fd >= 0, "mkstemp: %s", strerror(errno));
	unlink(path);
	memset(buf, 0xa5, sizeof(buf));
	for (unsigned long p = 0; p < NPG; p++)
		TH_ASSERT(pwrite(fd, buf, PG, (off_t)(p * PG)) == (ssize_t)PG, "write the file");
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	for (unsigned long p = 0; p < NPG; p++)
		sink += (unsigned char)mem[p * PG]; /* the zero page, mapped read-only */
	(void)sink;
	NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = fd);
	id = npf_client__register(c, mem, NPG * PG, &o);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, BUDGET * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));
	usleep(500000); /* eviction would have run by now: a batch per loop pass */
	bi = th_budget(c, id);
	for (unsigned long p = 0; p < NPG; p++) {
		TH_ASSERT(pread(fd, buf, PG, (off_t)(p * PG)) == (ssize_t)PG, "read the file");
		for (unsigned long k = 0; k < PG; k++)
			bad += buf[k] != 0xa5;
	}
	printf("resident %llu, evicted %llu, written back %llu; %lu bytes of the file changed\n",
	       (unsigned long long)bi.resident_pages, (unsigned long long)bi.evicted_pages,
	       (unsigned long long)bi.written_pages, bad);
	TH_ASSERT(
		!bad && !bi.written_pages,
		"npfd wrote %llu pages back and changed %lu bytes of the file: the zero page counted",
		(unsigned long long)bi.written_pages, bad);
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
