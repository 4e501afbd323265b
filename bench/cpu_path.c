// SPDX-License-Identifier: GPL-2.0
/*
 * CPU faults of a whole region, npf beside the kernel (issue 14's pattern).
 *
 * A program maps a region (default 64 MiB; issue 14 used --size 256),
 * registers it with npfd, and T threads read one word from every page:
 *
 *   shuffled     the pages in one random order, cut into T parts
 *   sequential   the region cut into T parts, each thread scans its own
 *
 * Each row runs the same pattern on the kernel's own mapping in the same
 * round (MAP_PRIVATE of the same file; an anonymous mapping for anonymous
 * rows), in alternating order, and reports microseconds per page for
 * both, their ratio, and npfd's fault count (userfaultfd messages): the
 * median over rounds and the worst round. Rows:
 *
 *   backing      file on ext4 (--ext4-dir, default /var/tmp), file on
 *                tmpfs (--tmpfs-dir, default /dev/shm), anonymous
 *   cache        warm: the file read once before; cold: POSIX_FADV_DONTNEED
 *                before each run (ext4 only: tmpfs pages are the file)
 *   policy       built-in (npfd's own decision) on every row; seq (loaded
 *                for the region) on sequential rows
 *
 * After each timed pass every byte of the region is compared with the
 * file (zeros for anonymous rows); a single mismatch fails the run.
 *
 * A third baseline, once per round: the private-page floor, what the
 * kernel takes to give a process private pages at all (MADV_POPULATE_WRITE
 * of an anonymous mapping of the same size, no trap). npf must give the
 * program private copies -- its memory is private anonymous -- where the
 * kernel's MAP_PRIVATE read of a file maps the page-cache pages
 * themselves, so npf / floor says how far npf is from the copy's own cost.
 *
 * Targets (issue 14, ratios of one run): shuffled, warm, 2 threads,
 * ext4: npf <= 2x the kernel; sequential with seq, 2 threads, ext4
 * warm: <= 1.5x; tmpfs no slower than ext4 warm (npf's µs per page).
 *
 * Usage: npf-bench-cpu_path [--json] [--size MiB] [--rounds N] [--quick]
 *                           [--ext4-dir DIR] [--tmpfs-dir DIR] [--policies DIR]
 * --quick: only the rows of the targets. Needs a running npfd ($NPF_SOCKET).
 */
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>
#include "bench.h"
#include "npf.h"

#define EXT4_MAGIC 0xEF53
#define TMPFS_MAGIC 0x01021994
#define MAX_THREADS 2
#define MAX_ROUNDS 64

enum backing { B_EXT4, B_TMPFS, B_ANON };
static const char *const backing_name[] = {"file-ext4", "file-tmpfs", "anon"};

struct row {
	enum backing backing;
	bool shuffled, cold, seq;
	int threads;
	/* per round */
	double kern_us[MAX_ROUNDS], npf_us[MAX_ROUNDS], ratio[MAX_ROUNDS], faults[MAX_ROUNDS];
	double kern_med, npf_med, npf_worst, ratio_med, ratio_worst, faults_med;
};

static struct npf_client *cl;
static uint64_t region_bytes = 64ULL << 20, pages;
static uint64_t *perm; /* a random permutation of the page indexes */
static int file_fd[2] = {-1, -1};
static char file_path[2][PATH_MAX];
static char policy_dir[PATH_MAX];
static uint64_t mismatches;
static double floor_us[MAX_ROUNDS]; /* MADV_POPULATE_WRITE, µs per page, per round */

/* The private-page floor (see above): µs per page. */
static double populate_floor(void)
{
	char *m = mmap(NULL, region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		       0);
	uint64_t t0;
	double us;

	if (m == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	t0 = bench_now_ns();
	if (madvise(m, region_bytes, MADV_POPULATE_WRITE))
		bench_die("MADV_POPULATE_WRITE: %s", strerror(errno));
	us = (double)(bench_now_ns() - t0) / 1000.0 / (double)pages;
	munmap(m, region_bytes);
	return us;
}

/* The file's content: every 8-byte word says where it is. */
static inline uint64_t pattern(uint64_t off)
{
	return (off * 0x9E3779B97F4A7C15ULL) ^ 0x6e7066636f6e7465ULL;
}

static void make_file(int which, const char *dir, long magic)
{
	struct statfs sf;
	uint64_t *buf, off, i;
	size_t chunk = 1 << 20;

	if (statfs(dir, &sf))
		bench_die("%s: %s", dir, strerror(errno));
	if ((long)sf.f_type != magic)
		bench_die("%s is not on %s (f_type 0x%lx): pass --%s-dir", dir,
			  magic == EXT4_MAGIC ? "ext4" : "tmpfs", (long)sf.f_type,
			  magic == EXT4_MAGIC ? "ext4" : "tmpfs");
	snprintf(file_path[which], sizeof(file_path[which]), "%s/npf-bench-cpu_path-XXXXXX", dir);
	file_fd[which] = mkstemp(file_path[which]);
	if (file_fd[which] < 0)
		bench_die("cannot create a file in %s: %s", dir, strerror(errno));
	buf = malloc(chunk);
	for (off = 0; off < region_bytes; off += chunk) {
		for (i = 0; i < chunk / 8; i++)
			buf[i] = pattern(off + i * 8);
		if (pwrite(file_fd[which], buf, chunk, (off_t)off) != (ssize_t)chunk)
			bench_die("writing %s: %s", file_path[which], strerror(errno));
	}
	free(buf);
	/* Written back: POSIX_FADV_DONTNEED drops clean pages only. */
	if (fsync(file_fd[which]))
		bench_die("fsync %s: %s", file_path[which], strerror(errno));
}

static void cleanup(void)
{
	int i;

	for (i = 0; i < 2; i++)
		if (file_path[i][0])
			unlink(file_path[i]);
}

static void warm(int fd)
{
	char *buf = malloc(1 << 20);
	uint64_t off;

	for (off = 0; off < region_bytes; off += 1 << 20)
		if (pread(fd, buf, 1 << 20, (off_t)off) != 1 << 20)
			bench_die("warming the file: %s", strerror(errno));
	free(buf);
}

static void drop_cache(int fd)
{
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
		bench_die("POSIX_FADV_DONTNEED: %s", strerror(errno));
}

/* ---- the workload: T threads, one word per page ------------------------------- */

struct worker {
	pthread_t th;
	const volatile char *mem;
	const uint64_t *order; /* NULL: sequential over [first, first + n) */
	uint64_t first, n;
	uint64_t end_ns, sink;
};

static volatile int go;

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t i, s = 0;

	while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
		__builtin_ia32_pause();
	if (w->order)
		for (i = 0; i < w->n; i++)
			s += *(const volatile uint64_t *)(w->mem + w->order[w->first + i] * 4096);
	else
		for (i = 0; i < w->n; i++)
			s += *(const volatile uint64_t *)(w->mem + (w->first + i) * 4096);
	w->sink = s;
	w->end_ns = bench_now_ns();
	return NULL;
}

/* Read one word of every page of mem in the row's pattern: µs per page. */
static double scan(const char *mem, const struct row *rw)
{
	struct worker w[MAX_THREADS] = {};
	uint64_t t0, end = 0;
	int t;

	go = 0;
	for (t = 0; t < rw->threads; t++) {
		w[t].mem = mem;
		w[t].order = rw->shuffled ? perm : NULL;
		w[t].first = pages * (uint64_t)t / (uint64_t)rw->threads;
		w[t].n = pages * (uint64_t)(t + 1) / (uint64_t)rw->threads - w[t].first;
		if (pthread_create(&w[t].th, NULL, work, &w[t]))
			bench_die("pthread_create failed");
	}
	t0 = bench_now_ns();
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	for (t = 0; t < rw->threads; t++) {
		pthread_join(w[t].th, NULL);
		if (w[t].end_ns > end)
			end = w[t].end_ns;
	}
	return (double)(end - t0) / 1000.0 / (double)pages;
}

/* Every byte of mem against the file (or zeros); counts the bytes that differ. */
static void check(const char *mem, enum backing b, const char *who)
{
	const uint64_t *w = (const uint64_t *)mem;
	uint64_t i, bad = 0;

	for (i = 0; i < region_bytes / 8; i++) {
		uint64_t want = b == B_ANON ? 0 : pattern(i * 8), x = w[i] ^ want;

		for (; x; x >>= 8)
			bad += (x & 0xff) != 0;
	}
	if (bad)
		fprintf(stderr, "npf-bench-cpu_path: %s %s: %llu bytes differ from the file\n", who,
			backing_name[b], (unsigned long long)bad);
	mismatches += bad;
}

static double run_kernel(const struct row *rw)
{
	int fd = rw->backing == B_ANON ? -1 : file_fd[rw->backing];
	char *mem;
	double us;

	if (rw->cold)
		drop_cache(fd);
	mem = mmap(NULL, region_bytes, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | (fd < 0 ? MAP_ANONYMOUS : 0), fd, 0);
	if (mem == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	us = scan(mem, rw);
	check(mem, rw->backing, "kernel");
	munmap(mem, region_bytes);
	return us;
}

static void load_seq(int region)
{
	char path[PATH_MAX + 16];
	int fd, ret;

	snprintf(path, sizeof(path), "%s/seq.bpf.o", policy_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		bench_die("%s: %s (pass --policies DIR)", path, strerror(errno));
	ret = npf_client__policy_load(cl, fd, (__u32)region, "bench-seq", NULL);
	close(fd);
	if (ret < 0)
		bench_die("loading seq for region %d: %s", region, npf_client__errmsg(cl));
}

static double run_npf(const struct row *rw, double *faults)
{
	NPF_OPTS(npf_region_opts, o, .name = "bench-cpu_path");
	struct npf_region_stats_full *sf;
	size_t cnt;
	char *mem;
	double us;
	int id;

	if (rw->backing != B_ANON) {
		o.backing = NPF_BACKING_FILE;
		o.backing_fd = file_fd[rw->backing];
		if (rw->cold)
			drop_cache(o.backing_fd);
	}
	mem = mmap(NULL, region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	id = npf_client__register(cl, mem, region_bytes, &o);
	if (id < 0)
		bench_die("register: %s", npf_client__errmsg(cl));
	if (rw->seq)
		load_seq(id);
	us = scan(mem, rw);
	check(mem, rw->backing, "npf");
	if (npf_client__stats(cl, (__u32)id, &sf, &cnt) || cnt != 1)
		bench_die("stats: %s", npf_client__errmsg(cl));
	*faults = (double)sf->stats.uffd_faults;
	free(sf);
	munmap(mem, region_bytes); /* npfd drops the region and its policy */
	return us;
}

static void shuffle(uint64_t seed)
{
	uint64_t i;

	for (i = 0; i < pages; i++)
		perm[i] = i;
	for (i = pages - 1; i > 0; i--) {
		uint64_t j, t;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		j = (seed >> 33) % (i + 1);
		t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}

static double med(const double *v, int n)
{
	double tmp[MAX_ROUNDS];

	memcpy(tmp, v, (size_t)n * sizeof(*v));
	return bench_median(tmp, (size_t)n);
}

static double worst(const double *v, int n)
{
	double m = v[0];
	int i;

	for (i = 1; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

static struct row *find(struct row *rows, int n, enum backing b, bool shuffled, bool cold, bool seq,
			int threads)
{
	int i;

	for (i = 0; i < n; i++)
		if (rows[i].backing == b && rows[i].shuffled == shuffled && rows[i].cold == cold &&
		    rows[i].seq == seq && rows[i].threads == threads)
			return &rows[i];
	return NULL;
}

static void target(const char *key, const char *what, const struct row *a, const struct row *b,
		   double bound, int rounds)
{
	double r[MAX_ROUNDS], est;
	int i;

	if (!a || !b)
		return;
	/* a's npf against b's npf, or (b NULL meaning a's kernel) a's ratio */
	for (i = 0; i < rounds; i++)
		r[i] = a == b ? a->ratio[i] : a->npf_us[i] / b->npf_us[i];
	est = med(r, rounds);
	bench_row_begin("cpu_path_target");
	bench_col_str("target", 0, key);
	bench_text(": %s: median", what);
	bench_col_f("ratio", 0, 2, est);
	bench_text("x (worst round");
	bench_col_f("ratio_worst", 0, 2, worst(r, rounds));
	bench_text("x), npf / private-page floor");
	for (i = 0; i < rounds; i++)
		r[i] = a->npf_us[i] / floor_us[i];
	bench_col_f("npf_to_floor", 0, 2, med(r, rounds));
	bench_text("x, bound");
	bench_col_f("bound", 0, 2, bound);
	bench_text("x:");
	bench_col_raw("verdict", est <= bound ? " met" : " NOT met",
		      est <= bound ? "\"met\"" : "\"not_met\"");
	bench_row_end();
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
						 {"size", required_argument, NULL, 's'},
						 {"rounds", required_argument, NULL, 'r'},
						 {"quick", no_argument, NULL, 'q'},
						 {"ext4-dir", required_argument, NULL, 'E'},
						 {"tmpfs-dir", required_argument, NULL, 'T'},
						 {"policies", required_argument, NULL, 'P'},
						 {"help", no_argument, NULL, 'h'},
						 {}};
	const char *ext4_dir = "/var/tmp", *tmpfs_dir = "/dev/shm";
	struct row rows[64];
	int nrows = 0, rounds = 3, opt, i, k, quick = 0;
	char exe[PATH_MAX];
	ssize_t n;

	bench_prog = "npf-bench-cpu_path";
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	snprintf(policy_dir, sizeof(policy_dir), "%s/../policies", dirname(exe));
	while ((opt = getopt_long(argc, argv, "js:r:qE:T:P:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			bench_json = 1;
			break;
		case 's':
			region_bytes = strtoull(optarg, NULL, 0) << 20;
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'q':
			quick = 1;
			break;
		case 'E':
			ext4_dir = optarg;
			break;
		case 'T':
			tmpfs_dir = optarg;
			break;
		case 'P':
			snprintf(policy_dir, sizeof(policy_dir), "%s", optarg);
			break;
		case 'h':
			printf("Usage: %s [--json] [--size MiB] [--rounds N] [--quick]\n"
			       "       [--ext4-dir DIR] [--tmpfs-dir DIR] [--policies DIR]\n"
			       "T threads read one word of every page of an npf region (file on ext4,\n"
			       "file on tmpfs, anonymous; shuffled, sequential; warm, cold), beside the\n"
			       "kernel's own mapping of the same file in the same round. Default 64 MiB\n"
			       "(issue 14: --size 256), 3 rounds. Needs a running npfd.\n",
			       argv[0]);
			return 0;
		default:
			return 2;
		}
	}
	if (!region_bytes || rounds < 1 || rounds > MAX_ROUNDS)
		bench_die("--size must be at least 1 and --rounds 1 to %d", MAX_ROUNDS);
	pages = region_bytes / 4096;
	perm = malloc(pages * sizeof(*perm));
	if (!perm)
		bench_die("out of memory");
	shuffle(20261123);
	atexit(cleanup);
	cl = npf_client__connect(NULL);
	if (!cl)
		bench_die("cannot connect to npfd (is it running?): %s", strerror(errno));
	make_file(B_EXT4, ext4_dir, EXT4_MAGIC);
	make_file(B_TMPFS, tmpfs_dir, TMPFS_MAGIC);

	/* The rows: every backing, order and thread count; cold on ext4; seq on sequential. */
	for (k = 0; k < 2; k++) {
		bool shuffled = k == 0;
		int t, b, c, s;

		for (b = B_EXT4; b <= B_ANON; b++)
			for (c = 0; c < (b == B_EXT4 ? 2 : 1); c++)
				for (s = 0; s < (shuffled ? 1 : 2); s++)
					for (t = 1; t <= MAX_THREADS; t++) {
						struct row *rw = &rows[nrows];

						if (quick && !(t == 2 && !c && (b != B_ANON) &&
							       (shuffled || s)))
							continue;
						*rw = (struct row){.backing = (enum backing)b,
								   .shuffled = shuffled,
								   .cold = c,
								   .seq = s,
								   .threads = t};
						nrows++;
					}
	}

	for (i = 0; i < rounds; i++) {
		floor_us[i] = populate_floor();
		for (k = 0; k < nrows; k++) {
			struct row *rw = &rows[k];

			if (rw->backing != B_ANON && !rw->cold)
				warm(file_fd[rw->backing]);
			/* Alternate who goes first: what one leaves behind hits both alike. */
			if ((i + k) & 1) {
				rw->kern_us[i] = run_kernel(rw);
				if (!rw->cold && rw->backing != B_ANON)
					warm(file_fd[rw->backing]);
				rw->npf_us[i] = run_npf(rw, &rw->faults[i]);
			} else {
				rw->npf_us[i] = run_npf(rw, &rw->faults[i]);
				if (!rw->cold && rw->backing != B_ANON)
					warm(file_fd[rw->backing]);
				rw->kern_us[i] = run_kernel(rw);
			}
			rw->ratio[i] = rw->npf_us[i] / rw->kern_us[i];
		}
	}

	bench_text("%u MiB (%llu pages), %d rounds; µs per page: median [worst round]\n",
		   (unsigned)(region_bytes >> 20), (unsigned long long)pages, rounds);
	bench_text("%-10s %-10s %-5s %-8s %3s %16s %16s %16s %9s\n", "backing", "order", "cache",
		   "policy", "thr", "kernel µs/page", "npf µs/page", "npf/kernel", "faults");
	for (k = 0; k < nrows; k++) {
		struct row *rw = &rows[k];
		char text[64], json[64];

		rw->kern_med = med(rw->kern_us, rounds);
		rw->npf_med = med(rw->npf_us, rounds);
		rw->npf_worst = worst(rw->npf_us, rounds);
		rw->ratio_med = med(rw->ratio, rounds);
		rw->ratio_worst = worst(rw->ratio, rounds);
		rw->faults_med = med(rw->faults, rounds);
		bench_row_begin("cpu_path");
		bench_col_str("backing", 10, backing_name[rw->backing]);
		bench_col_str("order", 10, rw->shuffled ? "shuffled" : "sequential");
		bench_col_str("cache", 5, rw->backing == B_ANON ? "-" : rw->cold ? "cold" : "warm");
		bench_col_str("policy", 8, rw->seq ? "seq" : "built-in");
		bench_col_u64("threads", 3, (uint64_t)rw->threads);
		snprintf(text, sizeof(text), " %7.3f [%6.3f]", rw->kern_med,
			 worst(rw->kern_us, rounds));
		snprintf(json, sizeof(json), "%.4f", rw->kern_med);
		bench_col_raw("kernel_us_per_page", text, json);
		snprintf(text, sizeof(text), "%7.3f [%6.3f]", rw->npf_med, rw->npf_worst);
		snprintf(json, sizeof(json), "%.4f", rw->npf_med);
		bench_col_raw("npf_us_per_page", text, json);
		snprintf(text, sizeof(text), "%7.2f [%6.2f]", rw->ratio_med, rw->ratio_worst);
		snprintf(json, sizeof(json), "%.3f", rw->ratio_med);
		bench_col_raw("ratio", text, json);
		bench_col_u64("npf_faults", 9, (uint64_t)rw->faults_med);
		bench_row_end();
	}
	{
		double f = med(floor_us, rounds);
		char text[96], json[32];

		snprintf(text, sizeof(text),
			 "\nprivate-page floor (MADV_POPULATE_WRITE, same size): %.3f µs/page", f);
		snprintf(json, sizeof(json), "%.4f", f);
		bench_row_begin("cpu_path_floor");
		bench_col_raw("populate_write_us_per_page", text, json);
		bench_row_end();
	}
	bench_text("\nbytes checked against the file: %llu regions x %u MiB, mismatches: %llu\n",
		   (unsigned long long)(2ULL * (uint64_t)nrows * (uint64_t)rounds),
		   (unsigned)(region_bytes >> 20), (unsigned long long)mismatches);
	{
		struct row *shuf = find(rows, nrows, B_EXT4, true, false, false, 2);
		struct row *seq = find(rows, nrows, B_EXT4, false, false, true, 2);
		struct row *tshuf = find(rows, nrows, B_TMPFS, true, false, false, 2);
		struct row *tseq = find(rows, nrows, B_TMPFS, false, false, true, 2);

		target("shuffled_warm_2t", "shuffled, ext4 warm, 2 threads, npf / kernel", shuf,
		       shuf, 2.0, rounds);
		target("seq_warm_2t", "sequential with seq, ext4 warm, 2 threads, npf / kernel",
		       seq, seq, 1.5, rounds);
		target("tmpfs_vs_ext4_shuffled", "npf shuffled 2 threads, tmpfs / ext4 warm", tshuf,
		       shuf, 1.0, rounds);
		target("tmpfs_vs_ext4_seq", "npf sequential seq 2 threads, tmpfs / ext4 warm", tseq,
		       seq, 1.0, rounds);
	}
	npf_client__close(cl);
	if (mismatches)
		bench_die("%llu bytes read through a mapping differ from the file",
			  (unsigned long long)mismatches);
	return 0;
}
