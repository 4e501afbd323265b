// SPDX-License-Identifier: GPL-2.0
/*
 * npf-workload: a real workload on unpinned memory. It writes a backing
 * file, registers a file-backed and an anonymous region with npfd (no
 * pinning, nothing touched), and lets several threads read random pages of
 * both, checking every byte against the file (or zero). It prints what it
 * did; npfctl shows what npfd did.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "npf.h"

static uint64_t region_bytes = 1ULL << 30;
static unsigned int nthreads = 4;
static unsigned long touches = 16384;
static char *file_mem, *anon_mem;
static volatile unsigned long errors;

#define SALT 0x9e3779b97f4a7c15ULL

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *reader(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg * 104729 + 1, pages = region_bytes / 4096;
	unsigned long i;

	for (i = 0; i < touches; i++) {
		const uint64_t *f, *a;
		uint64_t p, w;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		p = (seed >> 33) % pages;
		f = (const uint64_t *)(file_mem + p * 4096);
		a = (const uint64_t *)(anon_mem + ((seed >> 11) % pages) * 4096);
		for (w = 0; w < 512; w++)
			if (f[w] != ((p * 512 + w) ^ SALT) || a[w] != 0)
				__sync_fetch_and_add(&errors, 1);
	}
	return NULL;
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"Usage: %s [--dir DIR] [--size MiB] [--threads N] [--touches N] [--hold FILE]\n"
		"Register a file-backed and an anonymous region with npfd (unpinned) and read\n"
		"random pages of both from several threads, checking every byte.\n"
		"  --dir DIR      where to write the backing file (default /tmp)\n"
		"  --size MiB     size of each region (default 1024)\n"
		"  --threads N    reader threads (default 4)\n"
		"  --touches N    pages each thread reads in each region (default 16384)\n"
		"  --hold FILE    when done, create FILE and keep the regions registered until\n"
		"                 FILE is removed (lets npfctl inspect them)\n",
		prog);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"dir", required_argument, NULL, 'd'},
						 {"size", required_argument, NULL, 's'},
						 {"threads", required_argument, NULL, 't'},
						 {"touches", required_argument, NULL, 'n'},
						 {"hold", required_argument, NULL, 'H'},
						 {"help", no_argument, NULL, 'h'},
						 {}};
	const char *dir = "/tmp", *hold = NULL;
	pthread_t th[64];
	struct npf_client *c;
	char path[512];
	uint64_t *buf, chunk, i;
	int opt, fd, idf, ida;
	unsigned int t;
	double t0, t1;

	setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines in order when piped */
	while ((opt = getopt_long(argc, argv, "d:s:t:n:H:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			dir = optarg;
			break;
		case 's':
			region_bytes = strtoull(optarg, NULL, 0) << 20;
			break;
		case 't':
			nthreads = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'n':
			touches = strtoul(optarg, NULL, 0);
			break;
		case 'H':
			hold = optarg;
			break;
		case 'h':
			usage(stdout, argv[0]);
			return 0;
		default:
			usage(stderr, argv[0]);
			return 2;
		}
	}
	if (!region_bytes || !nthreads || nthreads > 64) {
		fprintf(stderr, "npf-workload: --size must be > 0 and --threads 1..64\n");
		return 2;
	}

	snprintf(path, sizeof(path), "%s/npf-workload.data", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	buf = malloc(1 << 20);
	if (fd < 0 || !buf) {
		fprintf(stderr, "npf-workload: cannot create %s: %s\n", path, strerror(errno));
		return 1;
	}
	printf("writing a %llu MiB backing file %s\n", (unsigned long long)(region_bytes >> 20),
	       path);
	for (chunk = 0; chunk < region_bytes >> 20; chunk++) {
		for (i = 0; i < (1 << 20) / 8; i++)
			buf[i] = (chunk * (1 << 20) / 8 + i) ^ SALT;
		if (pwrite(fd, buf, 1 << 20, (off_t)(chunk << 20)) != 1 << 20) {
			fprintf(stderr, "npf-workload: writing %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	free(buf);

	c = npf_client__connect(NULL);
	if (!c) {
		fprintf(stderr, "npf-workload: cannot connect to npfd: %s (is npfd running?)\n",
			strerror(errno));
		return 1;
	}
	file_mem = mmap(NULL, region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			0);
	anon_mem = mmap(NULL, region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			0);
	if (file_mem == MAP_FAILED || anon_mem == MAP_FAILED) {
		fprintf(stderr, "npf-workload: mmap: %s\n", strerror(errno));
		return 1;
	}
	t0 = now();
	{
		NPF_OPTS(npf_region_opts, fo, .backing = NPF_BACKING_FILE, .backing_fd = fd,
			 .name = "workload-file");
		NPF_OPTS(npf_region_opts, ao, .name = "workload-anon");

		idf = npf_client__register(c, file_mem, region_bytes, &fo);
		ida = idf > 0 ? npf_client__register(c, anon_mem, region_bytes, &ao) : idf;
	}
	t1 = now();
	if (idf < 0 || ida < 0) {
		fprintf(stderr, "npf-workload: npfd refused a region: %s\n", npf_client__errmsg(c));
		return 1;
	}
	printf("registered region %d (file-backed) and region %d (anonymous), %llu MiB each, in %.3f ms, nothing pinned\n",
	       idf, ida, (unsigned long long)(region_bytes >> 20), (t1 - t0) * 1e3);

	t0 = now();
	for (t = 0; t < nthreads; t++)
		pthread_create(&th[t], NULL, reader, (void *)(uintptr_t)t);
	for (t = 0; t < nthreads; t++)
		pthread_join(th[t], NULL);
	t1 = now();
	printf("%u threads read %lu random pages of each region in %.3f s (%.0f page reads/s); %s\n",
	       nthreads, touches * nthreads, t1 - t0, 2.0 * (double)touches * nthreads / (t1 - t0),
	       errors ? "DATA MISMATCHES" : "every byte matched the file (or zero)");

	if (hold) {
		int h = open(hold, O_CREAT | O_WRONLY, 0600);
		struct stat st;

		if (h >= 0)
			close(h);
		while (stat(hold, &st) == 0)
			usleep(50000);
	}
	npf_client__close(c);
	close(fd);
	unlink(path);
	return errors ? 1 : 0;
}
