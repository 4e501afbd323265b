// SPDX-License-Identifier: GPL-2.0
/*
 * A file-backed region four times its budget, at a non-zero file offset.
 * Pass 1 only reads: every page is installed clean from the file and
 * evicted without a write (written_pages stays 0, the file unchanged).
 * Pass 2 rewrites every page (those still resident from pass 1 in place:
 * their first write must be seen) and shrinks the budget so that nearly
 * all go: evicted dirty pages go back to the file at file_offset + their
 * offset -- nothing to npfd's swap store -- and every byte reads back
 * right. The file then holds what was written, except
 * the pages still resident (a private mapping: their latest bytes are in
 * memory only until they are evicted).
 */
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include "npf.h"

#define PG 4096UL
#define NPG 512UL
#define BUDGET 128UL
#define OFF (7 * PG)

static uint64_t word(uint64_t gen, uint64_t p, uint64_t w)
{
	return ((gen << 40) + p * 512 + w) * 0x9e3779b97f4a7c15ULL + 3;
}

static void check(const char *mem, uint64_t gen, const char *what)
{
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++) {
			uint64_t v = ((const uint64_t *)(mem + p * PG))[w];

			if (v != word(gen, p, w))
				th_fail("%s: page %llu word %llu is 0x%llx, expected 0x%llx", what,
					(unsigned long long)p, (unsigned long long)w,
					(unsigned long long)v, (unsigned long long)word(gen, p, w));
		}
}

static struct npf_budget_info settle(struct npf_client *c, int id, const char *what)
{
	struct npf_budget_info *bi, out = {0};
	double t0 = th_now();
	size_t n;

	do {
		TH_ASSERT(!npf_client__budget_list(c, (__u32)id, &bi, &n) && n == 1,
			  "budget list: %s", npf_client__errmsg(c));
		/* down to the low watermark, no batch in flight: two equal looks 20 ms apart */
		if (bi->resident_pages <= bi->low_pages && bi->evicted_pages == out.evicted_pages &&
		    bi->resident_pages == out.resident_pages) {
			out = *bi;
			free(bi);
			return out;
		}
		out = *bi;
		free(bi);
		usleep(20000);
	} while (th_now() - t0 < 10);
	th_fail("%s: %llu pages resident after 10 s (low watermark %llu)", what,
		(unsigned long long)out.resident_pages, (unsigned long long)out.low_pages);
}

int main(void)
{
	char path[64] = "/tmp/npf-evict-file-XXXXXX";
	uint64_t buf[PG / 8], p, w, in_file = 0, in_place = 0;
	unsigned char vec[NPG];
	struct npf_budget_info bi;
	struct th_npfd d;
	struct npf_client *c;
	char *mem;
	int fd, id;

	th_npfd_start(&d, NULL);
	fd = mkstemp(path);
	TH_ASSERT(fd >= 0, "mkstemp: %s", strerror(errno));
	unlink(path);
	for (p = 0; p < NPG + OFF / PG; p++) {
		for (w = 0; w < PG / 8; w++)
			buf[w] = p < OFF / PG ? 0xdead : word(1, p - OFF / PG, w);
		TH_ASSERT(pwrite(fd, buf, PG, (off_t)(p * PG)) == (ssize_t)PG, "write the file");
	}
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = fd,
		 .file_offset = OFF, .name = "evict-file");
	id = npf_client__register(c, mem, NPG * PG, &o);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, BUDGET * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));

	check(mem, 1, "pass 1 (reads)");
	bi = settle(c, id, "pass 1");
	printf("pass 1: evicted %llu, clean %llu, written %llu, stored %llu\n",
	       (unsigned long long)bi.evicted_pages, (unsigned long long)bi.dropped_clean,
	       (unsigned long long)bi.written_pages, (unsigned long long)bi.stored_pages);
	/*
	 * Pages only read are dropped without a write. A few may be written
	 * (a fresh clone's CI under load: 9 of 397; evict_anon allows the same,
	 * NPG/16, for pages an install found there already): the same bytes go
	 * back to the file, nothing is lost, and the cause is not found yet
	 * (issue 15's note). Treating read pages as dirty writes them all.
	 */
	TH_ASSERT(bi.evicted_pages >= NPG - BUDGET && bi.written_pages <= NPG / 32 &&
			  bi.dropped_clean + bi.written_pages >= bi.evicted_pages,
		  "pages only read must be dropped without a write");

	/*
	 * The pages still resident from pass 1 (installed clean) first, before
	 * eviction can take them: their writes land in place, and only the
	 * write-protect fault tells npfd they are dirty now.
	 */
	TH_ASSERT(!mincore(mem, NPG * PG, vec), "mincore: %s", strerror(errno));
	for (int resident = 1; resident >= 0; resident--)
		for (p = 0; p < NPG; p++) {
			if ((vec[p] & 1) != resident)
				continue;
			if (resident)
				in_place++;
			for (w = 0; w < PG / 8; w++)
				((uint64_t *)(mem + p * PG))[w] = word(2, p, w);
		}
	printf("pass 2: %llu pages written in place\n", (unsigned long long)in_place);
	TH_ASSERT(in_place, "no page was resident from pass 1");
	bi = settle(c, id, "pass 2");
	/* a smaller budget: the pages resident since pass 1 (written in place) go too */
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, 32 * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));
	bi = settle(c, id, "pass 2, smaller budget");
	check(mem, 2, "pass 2 (read back)");
	bi = settle(c, id, "pass 2, after reading");
	printf("pass 2: evicted %llu, written %llu in %llu batches, stored %llu\n",
	       (unsigned long long)bi.evicted_pages, (unsigned long long)bi.written_pages,
	       (unsigned long long)bi.write_batches, (unsigned long long)bi.stored_pages);
	TH_ASSERT(bi.written_pages >= NPG - BUDGET && !bi.stored_pages,
		  "dirty file pages must go to the file, not the swap store");
	/* the file: pass 2's bytes at file_offset, except pages resident since their last write */
	for (p = 0; p < NPG; p++) {
		TH_ASSERT(pread(fd, buf, PG, (off_t)(OFF + p * PG)) == (ssize_t)PG,
			  "read the file");
		if (buf[0] == word(2, p, 0)) {
			for (w = 0; w < PG / 8; w++)
				TH_ASSERT(buf[w] == word(2, p, w), "file page %llu word %llu torn",
					  (unsigned long long)p, (unsigned long long)w);
			in_file++;
		} else {
			TH_ASSERT(buf[0] == word(1, p, 0), "file page %llu holds neither version",
				  (unsigned long long)p);
		}
	}
	TH_ASSERT(pread(fd, buf, PG, 0) == (ssize_t)PG && buf[0] == 0xdead,
		  "the file before file_offset was written");
	printf("the file holds pass 2's bytes for %llu of %lu pages\n", (unsigned long long)in_file,
	       NPG);
	TH_ASSERT(in_file >= NPG - BUDGET, "only %llu pages written back to the file",
		  (unsigned long long)in_file);
	npf_client__close(c);
	close(fd);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
