// SPDX-License-Identifier: GPL-2.0
/*
 * The address space changes under npfd and npfd follows it:
 * - MADV_DONTNEED (UFFD_EVENT_REMOVE): the page refaults and reads the file again;
 * - mremap (UFFD_EVENT_REMAP): the region moves and is filled at its new place
 *   with the right file offsets;
 * - fork: the child (its copies registered by libnpf) is served too, with file data;
 * - munmap (UFFD_EVENT_UNMAP): the region disappears from npfd's table.
 */
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include "npf.h"

#define REGION (8ULL << 20)

static uint64_t word(uint64_t off)
{
	return off * 2654435761ULL + 17;
}

static void check_page(const char *mem, uint64_t page, const char *what)
{
	const uint64_t *w = (const uint64_t *)(mem + page * 4096);
	int i;

	for (i = 0; i < 512; i++)
		if (w[i] != word(page * 4096 + (uint64_t)i * 8))
			th_fail("%s: page %llu word %d is 0x%llx, want 0x%llx", what,
				(unsigned long long)page, i, (unsigned long long)w[i],
				(unsigned long long)word(page * 4096 + (uint64_t)i * 8));
}

static size_t nregions(struct npf_client *c)
{
	struct npf_region_info *ri;
	size_t n;

	TH_ASSERT(npf_client__region_list(c, &ri, &n) == 0, "region list");
	free(ri);
	return n;
}

int main(void)
{
	struct th_npfd d;
	struct npf_client *c;
	struct npf_region_info *ri;
	uint64_t *buf = malloc(REGION), i;
	char path[128], *mem, *moved;
	int fd, id, st;
	size_t n;
	pid_t pid;

	th_npfd_start(&d, NULL);
	snprintf(path, sizeof(path), "%s/backing", d.dir);
	for (i = 0; i < REGION / 8; i++)
		buf[i] = word(i * 8);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	TH_ASSERT(fd >= 0 && write(fd, buf, REGION) == (ssize_t)REGION, "write %s", path);

	c = npf_client__connect(NULL);
	TH_ASSERT(c, "connect");
	mem = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	{
		NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = fd,
			 .name = "events");
		id = npf_client__register(c, mem, REGION, &o);
		TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	}

	/* REMOVE: scribble, drop the page, read the file's bytes again. */
	check_page(mem, 3, "first touch");
	memset(mem + 3 * 4096, 0xee, 4096);
	TH_ASSERT(madvise(mem + 3 * 4096, 4096, MADV_DONTNEED) == 0, "madvise");
	check_page(mem, 3, "after MADV_DONTNEED");
	printf("MADV_DONTNEED: page refilled from the file\n");

	/* FORK: the child reads pages the parent never touched. */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		for (i = 100; i < 164; i++)
			check_page(mem, i, "forked child");
		_exit(0);
	}
	waitpid(pid, &st, 0);
	TH_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "forked child failed (0x%x)", st);
	printf("fork: the child was served with file data\n");

	/* REMAP: move the whole region; untouched pages still come from the right offsets. */
	moved = mremap(mem, REGION, REGION, MREMAP_MAYMOVE | MREMAP_FIXED,
		       mem + 2 * REGION + (64 << 20));
	TH_ASSERT(moved != MAP_FAILED, "mremap: %s", strerror(errno));
	for (i = 200; i < 264; i++)
		check_page(moved, i, "after mremap");
	check_page(moved, 3, "touched page after mremap");
	TH_ASSERT(npf_client__region_list(c, &ri, &n) == 0 && n >= 1, "region list");
	TH_ASSERT(ri[0].start == (uint64_t)(uintptr_t)moved,
		  "region start 0x%llx, memory now at %p", (unsigned long long)ri[0].start, moved);
	free(ri);
	printf("mremap: region followed its memory\n");

	/* UNMAP: the region goes away. */
	munmap(moved, REGION);
	{
		double t0 = th_now();

		while (nregions(c) != 0) {
			TH_ASSERT(th_now() - t0 < 5, "region still listed after munmap");
			usleep(10000);
		}
	}
	printf("munmap: region dropped\n");
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
	npf_client__close(c);
	close(fd);
	th_npfd_stop(&d);
	unlink(path);
	free(buf);
	printf("ok\n");
	return 0;
}
