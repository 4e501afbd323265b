// SPDX-License-Identifier: GPL-2.0
/*
 * Observation overhead: what npfd's BPF collectors (page_fault_user
 * tracepoint, mm tracepoints) cost a program that is NOT registered. The
 * workload writes every page of a fresh 32 MiB mapping, 4 times per run
 * (32768 kernel page faults). Rounds alternate: without npfd, and with a
 * private npfd running that watches another process (a child holding one
 * registered region, so the filters have something to compare against).
 *
 * This benchmark starts and stops its own npfd (the one next to it,
 * --npfd PATH otherwise); run it while no other npfd runs, or the
 * "without" rounds are not without. Target (issue 5): <= 3% slowdown.
 *
 * Usage: npf-bench-observe_overhead [--json] [--rounds N] [--npfd PATH]
 */
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "bench.h"
#include "npf.h"
#include <sys/mman.h>
#include <unistd.h>

#define WL_BYTES (32UL << 20)
#define WL_REPS 4

static char npfd_path[PATH_MAX];

static double workload(void)
{
	uint64_t t0 = bench_now_ns();
	size_t off;
	int r;

	for (r = 0; r < WL_REPS; r++) {
		char *m = mmap(NULL, WL_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);

		if (m == MAP_FAILED)
			bench_die("mmap: %s", strerror(errno));
		for (off = 0; off < WL_BYTES; off += 4096)
			((volatile char *)m)[off] = 1;
		munmap(m, WL_BYTES);
	}
	return (double)(bench_now_ns() - t0) / 1e9;
}

struct npfd_run {
	pid_t npfd, holder;
	char dir[64], sock[96], bpffs[96];
};

static void npfd_start(struct npfd_run *r)
{
	int i, pipefd[2];
	char c;

	snprintf(r->dir, sizeof(r->dir), "/tmp/npf-bench-obs-XXXXXX");
	if (!mkdtemp(r->dir))
		bench_die("mkdtemp: %s", strerror(errno));
	snprintf(r->sock, sizeof(r->sock), "%s/npfd.sock", r->dir);
	snprintf(r->bpffs, sizeof(r->bpffs), "/sys/fs/bpf/npf-bench-obs-%d", getpid());
	r->npfd = fork();
	if (!r->npfd) {
		execl(npfd_path, "npfd", "--config", "/dev/null", "--foreground", "-q", "--socket",
		      r->sock, "--bpffs", r->bpffs, (char *)NULL);
		_exit(127);
	}
	for (i = 0; access(r->sock, F_OK); i++) {
		if (i > 400 || waitpid(r->npfd, NULL, WNOHANG) == r->npfd)
			bench_die("npfd (%s) did not start", npfd_path);
		usleep(20000);
	}
	if (pipe(pipefd))
		bench_die("pipe: %s", strerror(errno));
	r->holder = fork();
	if (!r->holder) {
		NPF_OPTS(npf_client_opts, co, .socket_path = r->sock);
		struct npf_client *cl = npf_client__connect(&co);
		void *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);

		if (!cl || npf_client__register(cl, m, 1 << 20, NULL) < 0)
			_exit(1);
		c = 'R';
		if (write(pipefd[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(pipefd[1]);
	if (read(pipefd[0], &c, 1) != 1)
		bench_die("the holder could not register a region with npfd");
	close(pipefd[0]);
}

static void npfd_stop(struct npfd_run *r)
{
	kill(r->holder, SIGKILL);
	waitpid(r->holder, NULL, 0);
	kill(r->npfd, SIGTERM);
	waitpid(r->npfd, NULL, 0);
	unlink(r->sock);
	rmdir(r->dir);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
						 {"rounds", required_argument, NULL, 'r'},
						 {"npfd", required_argument, NULL, 'n'},
						 {"help", no_argument, NULL, 'h'},
						 {}};
	struct bench_samples with = {0}, without = {0};
	struct bench_summary sw, so;
	size_t rounds = 6, i;
	char exe[PATH_MAX];
	double slow;
	ssize_t n;
	int opt, k;

	bench_prog = "npf-bench-observe_overhead";
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	snprintf(npfd_path, sizeof(npfd_path), "%s/npfd", dirname(exe));
	while ((opt = getopt_long(argc, argv, "jr:n:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			bench_json = 1;
			break;
		case 'r':
			rounds = strtoul(optarg, NULL, 0);
			break;
		case 'n':
			snprintf(npfd_path, sizeof(npfd_path), "%s", optarg);
			break;
		case 'h':
			printf("Usage: %s [--json] [--rounds N] [--npfd PATH]\n"
			       "A fault-heavy unregistered program with and without npfd's BPF\n"
			       "collectors attached (starts its own npfd; run with no other npfd).\n",
			       argv[0]);
			return 0;
		default:
			return 2;
		}
	}
	if (!rounds)
		bench_die("--rounds must be at least 1");
	workload(); /* warm the allocator and the page tables' upper levels */
	for (i = 0; i < rounds; i++)
		for (k = 0; k < 2; k++) {
			int on = (int)((i + k) & 1);
			struct npfd_run r;

			if (on)
				npfd_start(&r);
			bench_add(on ? &with : &without, (uint64_t)(workload() * 1e9));
			if (on)
				npfd_stop(&r);
		}
	sw = bench_summarize(&with);
	so = bench_summarize(&without);
	slow = 100.0 * ((double)sw.p50 - (double)so.p50) / (double)so.p50;
	bench_text("%-22s %6s %12s %12s %9s\n", "collectors", "runs", "p50 ms", "ns/fault",
		   "slowdown%");
	for (k = 0; k < 2; k++) {
		struct bench_summary *s = k ? &sw : &so;

		bench_row_begin("observe_overhead");
		bench_col_str("collectors", 22, k ? "attached (npfd up)" : "none (npfd down)");
		bench_col_u64("runs", 6, s->n);
		bench_col_f("p50_ms", 12, 2, (double)s->p50 / 1e6);
		bench_col_f("ns_per_fault", 12, 0,
			    (double)s->p50 / (double)(WL_REPS * WL_BYTES / 4096));
		bench_col_f("slowdown_pct", 9, 2, k ? slow : 0.0);
		bench_row_end();
	}
	bench_row_begin("observe_overhead_target");
	bench_text("target <= 3%% slowdown: ");
	bench_col_f("slowdown_pct", 0, 2, slow);
	bench_col_bool("target_met", 4, slow <= 3.0);
	bench_row_end();
	return 0;
}
