// SPDX-License-Identifier: GPL-2.0
/*
 * End to end: a 1 GiB file-backed and a 1 GiB anonymous region, unpinned,
 * touched at random pages by several threads. Every byte read must equal
 * the file (or zero), and the counts npfd reports (libnpf) must agree with
 * what the threads did and with the pinned BPF map.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include "harness.h"
#include "npf.h"

#define REGION (1ULL << 30)
#define PAGES (REGION / 4096)
#define THREADS 4
#define TOUCHES_PER_THREAD 8192

static char *file_mem, *anon_mem;
static uint8_t *touched_file, *touched_anon; /* per page: 1 if some thread touched it */

/* Word i of file page p holds p * 512 + i + SALT: no two pages alike. */
#define SALT 0x9e3779b97f4a7c15ULL

static void make_file(const char *path)
{
	uint64_t *buf = malloc(1 << 20);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	uint64_t chunk, i;

	TH_ASSERT(fd >= 0 && buf, "create %s: %s", path, strerror(errno));
	for (chunk = 0; chunk < REGION >> 20; chunk++) {
		for (i = 0; i < (1 << 20) / 8; i++)
			buf[i] = (chunk * 256 + i / 512) * 512 + i % 512 + SALT;
		TH_ASSERT(pwrite(fd, buf, 1 << 20, (off_t)(chunk << 20)) == 1 << 20, "write %s",
			  path);
	}
	free(buf);
	close(fd);
}

static void *worker(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg * 7919 + 1;
	int i;

	for (i = 0; i < TOUCHES_PER_THREAD; i++) {
		uint64_t p, w;
		const uint64_t *page;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		p = (seed >> 33) % PAGES;
		page = (const uint64_t *)(file_mem + p * 4096);
		for (w = 0; w < 512; w++)
			if (page[w] != p * 512 + w + SALT)
				th_fail("file region page %llu word %llu: read 0x%llx, want 0x%llx",
					(unsigned long long)p, (unsigned long long)w,
					(unsigned long long)page[w],
					(unsigned long long)(p * 512 + w + SALT));
		touched_file[p] = 1;

		p = (seed >> 13) % PAGES;
		page = (const uint64_t *)(anon_mem + p * 4096);
		for (w = 0; w < 512; w++)
			if (page[w] != 0)
				th_fail("anonymous region page %llu word %llu is 0x%llx, not zero",
					(unsigned long long)p, (unsigned long long)w,
					(unsigned long long)page[w]);
		touched_anon[p] = 1;
	}
	return NULL;
}

static uint64_t count(const uint8_t *v)
{
	uint64_t i, n = 0;

	for (i = 0; i < PAGES; i++)
		n += v[i];
	return n;
}

static void check_pinned(const struct th_npfd *d, const struct npf_region_stats *want)
{
	char path[256];
	struct npf_region_stats st;
	int fd;
	__u32 slot;

	snprintf(path, sizeof(path), "%s/%s", d->bpffs, NPF_MAP_STATS);
	fd = bpf_obj_get(path);
	TH_ASSERT(fd >= 0, "pinned map %s: %s", path, strerror(errno));
	for (slot = 0; slot < NPF_MAX_REGIONS; slot++) {
		if (bpf_map_lookup_elem(fd, &slot, &st) || st.region_id != want->region_id)
			continue;
		TH_ASSERT(st.cpu_faults == want->cpu_faults && st.uffd_faults == want->uffd_faults,
			  "pinned map and npfd disagree on region %u", want->region_id);
		close(fd);
		return;
	}
	th_fail("region %u not found in pinned map %s", want->region_id, path);
}

int main(void)
{
	struct th_npfd d;
	struct npf_client *c;
	struct npf_region_stats_full *sf;
	pthread_t th[THREADS];
	char path[128];
	int fd, id_file, id_anon, i;
	size_t n;
	uint64_t nfile, nanon;

	/* BPF must see every CPU fault here, with or without a policy */
	th_npfd_start(&d, (const char *const[]){"--trace-cpu-faults", NULL});
	snprintf(path, sizeof(path), "%s/backing", d.dir);
	make_file(path);
	fd = open(path, O_RDONLY);
	TH_ASSERT(fd >= 0, "open %s", path);

	file_mem = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	anon_mem = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	touched_file = calloc(PAGES, 1);
	touched_anon = calloc(PAGES, 1);
	TH_ASSERT(file_mem != MAP_FAILED && anon_mem != MAP_FAILED, "mmap 2 GiB");

	c = npf_client__connect(NULL);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	{
		/* Exact: npfd fills the touched pages only, so the counts can be compared. */
		NPF_OPTS(npf_region_opts, fo, .backing = NPF_BACKING_FILE, .backing_fd = fd,
			 .name = "file-1g", .fault_around_kib = NPF_FAULT_AROUND_EXACT);
		NPF_OPTS(npf_region_opts, ao, .name = "anon-1g",
			 .fault_around_kib = NPF_FAULT_AROUND_EXACT);

		id_file = npf_client__register(c, file_mem, REGION, &fo);
		TH_ASSERT(id_file > 0, "register file region: %s (%s)", strerror(-id_file),
			  npf_client__errmsg(c));
		id_anon = npf_client__register(c, anon_mem, REGION, &ao);
		TH_ASSERT(id_anon > 0, "register anon region: %s (%s)", strerror(-id_anon),
			  npf_client__errmsg(c));
	}
	close(fd); /* npfd holds its own reference */

	for (i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	nfile = count(touched_file);
	nanon = count(touched_anon);
	printf("touched %llu file pages and %llu anonymous pages with %d threads\n",
	       (unsigned long long)nfile, (unsigned long long)nanon, THREADS);

	i = npf_client__stats(c, 0, &sf, &n);
	TH_ASSERT(i == 0, "stats: %s", strerror(-i));
	TH_ASSERT(n == 2, "stats returned %zu regions, want 2", n);
	for (i = 0; i < (int)n; i++) {
		struct npf_region_stats *s = &sf[i].stats;
		uint64_t want = (int)s->region_id == id_file ? nfile : nanon;
		uint64_t filled = s->pages_copied + s->pages_zeroed;

		printf("region %u: cpu_faults %llu uffd_faults %llu copied %llu zeroed %llu read %llu B, p50 %llu ns\n",
		       s->region_id, (unsigned long long)s->cpu_faults,
		       (unsigned long long)s->uffd_faults, (unsigned long long)s->pages_copied,
		       (unsigned long long)s->pages_zeroed, (unsigned long long)s->bytes_read,
		       (unsigned long long)npf_latency_percentile(&sf[i].latency, 50));
		TH_ASSERT(filled == want, "region %u: npfd filled %llu pages, threads touched %llu",
			  s->region_id, (unsigned long long)filled, (unsigned long long)want);
		TH_ASSERT(s->uffd_faults == want, "region %u: %llu uffd faults for %llu pages",
			  s->region_id, (unsigned long long)s->uffd_faults,
			  (unsigned long long)want);
		TH_ASSERT(s->cpu_faults >= want,
			  "region %u: BPF saw %llu CPU faults, fewer than %llu", s->region_id,
			  (unsigned long long)s->cpu_faults, (unsigned long long)want);
		/* more than once per page when threads meet on one, but never more than touches */
		TH_ASSERT(s->cpu_faults <= (uint64_t)THREADS * TOUCHES_PER_THREAD,
			  "region %u: BPF counted %llu CPU faults for %d touches", s->region_id,
			  (unsigned long long)s->cpu_faults, THREADS * TOUCHES_PER_THREAD);
		if ((int)s->region_id == id_file)
			TH_ASSERT(s->pages_copied == want && s->bytes_read == want * 4096,
				  "file region: copied %llu pages / read %llu bytes for %llu pages",
				  (unsigned long long)s->pages_copied,
				  (unsigned long long)s->bytes_read, (unsigned long long)want);
		check_pinned(&d, s);
	}
	free(sf);
	npf_client__close(c);
	th_npfd_stop(&d);
	unlink(path);
	printf("ok\n");
	return 0;
}
