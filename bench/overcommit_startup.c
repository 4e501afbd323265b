// SPDX-License-Identifier: GPL-2.0
/*
 * Start-up of a large registered pool under a memory limit (seed 001's
 * large-pool / Spark memory results, issue 15): how long until the pool can
 * be used, and how much physical memory it holds then.
 *
 * Each mode runs in a child placed in a fresh cgroup v1 memory cgroup with
 * a --limit MiB limit (made and removed by the benchmark, on every path):
 *
 *   npf register   mmap --pool MiB (4x the limit by default) and register
 *                  it with npfd: nothing is pinned or populated; npfd
 *                  derives the region's budget from the cgroup's limit
 *                  (daemon/memcg.c) so the pool can be used in full later;
 *   npf + use      the same, then the first --use MiB of the pool written
 *                  (one word a page) and read back: the pool really is
 *                  usable, and with --use over the budget eviction keeps it
 *                  under the limit -- time to the end, not start-up;
 *   pin what fits  the baseline: the most a pinning registration can hold
 *                  under that limit (3/4 of it, the rest being the
 *                  process's own), mmap + mlock (what ibv_reg_mr does
 *                  without ODP), timed the same way.
 *
 * Columns: time, the child's resident memory (VmRSS) and its cgroup's
 * usage right after, the pool registered, and the start-up time as a ratio
 * to pinning, measured in the same run (the machine is shared).
 *
 * Usage: npf-bench-overcommit_startup [--json] [--quick] [--pool MiB] [--limit MiB]
 *                                     [--use MiB]
 * --quick: a 2 GiB pool under a 512 MiB limit, 768 MiB used (over its budget).
 * Needs root, a running npfd ($NPF_SOCKET) and the cgroup v1 memory hierarchy.
 */
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench.h"
#include "npf.h"

#define PG 4096UL
#define PREFIX "npf-bench-overcommit-"

static uint64_t pool_mib = 16384, limit_mib = 4096, use_mib = 1024;
static char cg[512];
static pid_t kid;

struct result {
	double seconds;
	uint64_t rss_kib, cg_usage, budget_pages, evicted;
	int ok;
	char note[160];
};

static int cg_put(const char *name, const char *val)
{
	char path[600];
	int fd, ok;

	snprintf(path, sizeof(path), "%s/%s", cg, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ok = write(fd, val, strlen(val)) == (ssize_t)strlen(val);
	close(fd);
	return ok ? 0 : -1;
}

static uint64_t cg_get(const char *name)
{
	char path[600];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", cg, name);
	f = fopen(path, "re");
	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

static void cg_remove(void)
{
	if (kid > 0) {
		kill(kid, SIGKILL);
		waitpid(kid, NULL, 0);
		kid = 0;
	}
	if (cg[0])
		rmdir(cg);
}

static void on_signal(int sig)
{
	cg_remove();
	signal(sig, SIG_DFL);
	raise(sig);
}

static uint64_t vm_rss_kib(void)
{
	char line[256];
	unsigned long long v = 0;
	FILE *f = fopen("/proc/self/status", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %llu", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

/* The child: in the cgroup, one mode; its result through the pipe. */
static void child(int mode, int out)
{
	struct result r = {0};
	uint64_t pool = pool_mib << 20, pin = (limit_mib << 20) * 3 / 4;
	double t0;

	if (cg_put("cgroup.procs", "0")) {
		snprintf(r.note, sizeof(r.note), "cannot enter the cgroup: %s", strerror(errno));
		goto done;
	}
	if (mode == 2) {
		char *p;

		t0 = bench_now_s();
		p = mmap(NULL, pin, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED || mlock(p, pin)) {
			snprintf(r.note, sizeof(r.note), "mlock %llu MiB: %s",
				 (unsigned long long)(pin >> 20), strerror(errno));
			goto done;
		}
		r.seconds = bench_now_s() - t0;
		snprintf(r.note, sizeof(r.note), "%llu MiB pinned; the rest of the pool cannot be",
			 (unsigned long long)(pin >> 20));
	} else {
		struct npf_client *c = npf_client__connect(NULL);
		struct npf_budget_info *bi;
		size_t n;
		uint64_t *p;
		int id;

		if (!c) {
			snprintf(r.note, sizeof(r.note), "cannot connect to npfd: %s",
				 strerror(errno));
			goto done;
		}
		t0 = bench_now_s();
		p = mmap(NULL, pool, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		id = p == MAP_FAILED ? -1 : npf_client__register(c, p, pool, NULL);
		if (id <= 0) {
			snprintf(r.note, sizeof(r.note), "register %llu MiB: %s",
				 (unsigned long long)(pool >> 20), npf_client__errmsg(c));
			goto done;
		}
		/* the budget comes with the eviction ring libnpf offers after registering */
		if (npf_client__budget_list(c, (__u32)id, &bi, &n) || n != 1) {
			snprintf(r.note, sizeof(r.note), "budget list: %s", npf_client__errmsg(c));
			goto done;
		}
		r.budget_pages = bi->budget_pages;
		free(bi);
		if (mode == 1) {
			uint64_t used = (use_mib << 20) < pool ? use_mib << 20 : pool;

			for (uint64_t i = 0; i < used / 8; i += PG / 8)
				p[i] = i * 0x9e3779b97f4a7c15ULL + 1;
			for (uint64_t i = 0; i < used / 8; i += PG / 8)
				if (p[i] != i * 0x9e3779b97f4a7c15ULL + 1) {
					snprintf(r.note, sizeof(r.note),
						 "word %llu read back wrong",
						 (unsigned long long)i);
					goto done;
				}
			if (!npf_client__budget_list(c, (__u32)id, &bi, &n) && n == 1) {
				r.evicted = bi->evicted_pages;
				free(bi);
			}
		}
		r.seconds = bench_now_s() - t0;
		snprintf(r.note, sizeof(r.note), "%s",
			 !r.budget_pages ? "npfd set no budget (not under a cgroup limit?)" :
			 mode == 1	 ? "--use MiB written and read back" :
					   "nothing pinned or populated");
	}
	r.rss_kib = vm_rss_kib();
	r.cg_usage = cg_get("memory.usage_in_bytes");
	r.ok = 1;
done:
	if (write(out, &r, sizeof(r)) != sizeof(r))
		_exit(1);
	_exit(0);
}

static struct result run(int mode)
{
	struct result r = {0};
	char lim[32];
	int pfd[2], st;

	snprintf(lim, sizeof(lim), "%llu", (unsigned long long)(limit_mib << 20));
	if (mkdir(cg, 0755) || cg_put("memory.limit_in_bytes", lim))
		bench_die("cannot make memory cgroup %s with a %llu MiB limit: %s", cg,
			  (unsigned long long)limit_mib, strerror(errno));
	cg_put("memory.memsw.limit_in_bytes", lim);
	cg_put("memory.swappiness", "0");
	if (pipe(pfd))
		bench_die("pipe: %s", strerror(errno));
	fflush(stdout);
	kid = fork();
	if (kid < 0)
		bench_die("fork: %s", strerror(errno));
	if (kid == 0) {
		close(pfd[0]);
		child(mode, pfd[1]);
	}
	close(pfd[1]);
	if (read(pfd[0], &r, sizeof(r)) != sizeof(r))
		snprintf(r.note, sizeof(r.note), "the child died without a result");
	close(pfd[0]);
	waitpid(kid, &st, 0);
	kid = 0;
	{
		char oom[64] = "";
		FILE *f;
		char path[600], line[128];

		snprintf(path, sizeof(path), "%s/memory.oom_control", cg);
		f = fopen(path, "re");
		while (f && fgets(line, sizeof(line), f))
			if (!strncmp(line, "oom_kill ", 9) && strtoull(line + 9, NULL, 10))
				snprintf(oom, sizeof(oom), " (OOM-killed)");
		if (f)
			fclose(f);
		if (oom[0]) {
			r.ok = 0;
			strncat(r.note, oom, sizeof(r.note) - strlen(r.note) - 1);
		}
	}
	if (rmdir(cg))
		fprintf(stderr, "npf-bench-overcommit_startup: cannot remove %s: %s\n", cg,
			strerror(errno));
	return r;
}

static void row(const char *mode, uint64_t registered_mib, const struct result *r,
		const struct result *pin)
{
	bench_row_begin("overcommit_startup");
	bench_col_str("mode", 14, mode);
	bench_col_u64("limit_mib", 6, limit_mib);
	bench_col_u64("registered_mib", 7, registered_mib);
	if (r->ok) {
		bench_col_f("seconds", 8, 3, r->seconds);
		bench_col_u64("rss_mib", 6, r->rss_kib >> 10);
		bench_col_u64("cgroup_mib", 6, r->cg_usage >> 20);
		bench_col_u64("budget_mib", 6, r->budget_pages * PG >> 20);
		if (pin->ok && pin->seconds > 0)
			bench_col_f("vs_pin", 8, 3, r->seconds / pin->seconds);
		else
			bench_col_raw("vs_pin", "       -", "null");
	} else {
		bench_col_raw("seconds", "       -", "null");
		bench_col_raw("rss_mib", "     -", "null");
		bench_col_raw("cgroup_mib", "     -", "null");
		bench_col_raw("budget_mib", "     -", "null");
		bench_col_raw("vs_pin", "       -", "null");
	}
	bench_col_str("note", 0, r->note);
	bench_row_end();
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"json", no_argument, NULL, 'j'},	{"quick", no_argument, NULL, 'q'},
		{"pool", required_argument, NULL, 'p'}, {"limit", required_argument, NULL, 'l'},
		{"use", required_argument, NULL, 'u'},	{}};
	char own[400] = "", line[512];
	struct result npf, use, pin;
	FILE *f;
	int c;

	bench_prog = "npf-bench-overcommit_startup";
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'j':
			bench_json = 1;
			break;
		case 'q':
			pool_mib = 2048;
			limit_mib = 512;
			use_mib = 768;
			break;
		case 'u':
			use_mib = strtoull(optarg, NULL, 0);
			break;
		case 'p':
			pool_mib = strtoull(optarg, NULL, 0);
			break;
		case 'l':
			limit_mib = strtoull(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr,
				"usage: %s [--json] [--quick] [--pool MiB] [--limit MiB] [--use MiB]\n",
				bench_prog);
			return 2;
		}
	}
	if (!pool_mib || !limit_mib || pool_mib > (1ULL << 30) || limit_mib > (1ULL << 30))
		bench_die("--pool and --limit are MiB, 1 to 2^30");
	if (access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK))
		bench_die("no cgroup v1 memory hierarchy at /sys/fs/cgroup/memory");
	f = fopen("/proc/self/cgroup", "re");
	while (f && fgets(line, sizeof(line), f)) {
		char *m = strstr(line, ":memory:");

		if (m) {
			m[strcspn(m, "\n")] = '\0';
			snprintf(own, sizeof(own), "/sys/fs/cgroup/memory%s",
				 strcmp(m + 8, "/") ? m + 8 : "");
		}
	}
	if (f)
		fclose(f);
	if (!own[0])
		bench_die("this process is in no v1 memory cgroup");
	snprintf(cg, sizeof(cg), "%s/" PREFIX "%d", own, (int)getpid());
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	atexit(cg_remove);

	if (!bench_json)
		printf("%-14s %6s %7s %8s %6s %6s %6s %8s %s\n", "mode", "limit", "MiB", "seconds",
		       "rss", "cgroup", "budget", "vs_pin", "note");
	pin = run(2);
	npf = run(0);
	use = run(1);
	row("pin what fits", (limit_mib * 3 / 4), &pin, &pin);
	row("npf register", pool_mib, &npf, &pin);
	row("npf + use", pool_mib, &use, &pin);
	return npf.ok && use.ok && pin.ok ? 0 : 1;
}
