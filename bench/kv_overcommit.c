// SPDX-License-Identifier: GPL-2.0
/*
 * Key-value instances sharing a fixed memory limit (seed 000 Table 5
 * shape, issue 15): N instances, each a process with a server NIC and a
 * client NIC joined by the software NIC's wires. The server's store is
 * --store MiB (more than its share of --limit MiB once N >= 2), its items
 * 4 KiB each, the first --hot MiB of them asked for (uniformly at random);
 * the client GETs an item with an RDMA READ of its 4 KiB and checks the key
 * stored in it. Two ways to fit N stores in the limit, alternating in one
 * run (the machine is shared: only the ratio means anything):
 *
 *   static   each instance pins (mlock, every IO page table entry set) its
 *            share, 3/4 of the limit / N (the other quarter is the
 *            processes' own): items beyond it are not cached, a GET for one
 *            is a miss (a 64-byte READ of the store's first item, so it
 *            still costs a round trip, and not counted as a hit);
 *   npf      each instance registers its whole store with npfd, unpinned,
 *            with a budget of the same share: every GET is a hit, pages
 *            beyond the budget are evicted and fault back in (the NIC's
 *            page request, npfd's swap store).
 *
 * The limit is kept by construction, the same share on both sides (no
 * cgroup: the comparison is of pinning against paging one share; npf
 * clients sharing a limited cgroup are tests/evict_cgroup_two's). Hits per second
 * summed over the instances, each measured for --seconds after its store was
 * filled, and npf's sum as a ratio to static's.
 * Usage: npf-bench-kv_overcommit [--json] [--quick] [--limit MiB] [--store MiB]
 *                                [--hot MiB] [--seconds S] [--max-n N]
 * Needs a running npfd ($NPF_SOCKET).
 */
#include <getopt.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include "kv.h"

static uint64_t limit_mib = 256, store_mib = 96, hot_mib = 64, max_n = 8;
static double seconds = 3;

struct result {
	uint64_t gets, hits, bad;
	double secs;
	char err[128];
};

/* One instance: fill its store, then GET for the measured time. */
static struct result instance(int npf, uint64_t share, int go_fd, uint64_t seed)
{
	uint64_t hot = (hot_mib << 20) / KV_ITEM;
	struct result r = {0};
	struct kv kv;
	double t0;
	char go;

	if (kv_open(&kv, npf ? bn_connect() : NULL, store_mib << 20, share, r.err, sizeof(r.err)))
		return r;
	for (uint64_t k = 0; k < hot && k < kv.cached; k++)
		*(uint64_t *)(kv.srv.buf + k * KV_ITEM) = k + 1;
	if (read(go_fd, &go, 1) != 1) {
		snprintf(r.err, sizeof(r.err), "no start signal");
		return r;
	}
	t0 = bench_now_s();
	while ((r.secs = bench_now_s() - t0) < seconds) {
		uint64_t k = kv_rnd(&seed) % hot, key = kv_get(&kv, k);

		if (key == k + 1)
			r.hits++;
		else if (key != KV_MISS)
			r.bad++;
		r.gets++;
	}
	kv_close(&kv);
	return r;
}

/* N instances of one kind at once; their hits per second summed. */
static void run(int n, int npf, double *rate, double *hit_pct, uint64_t *bad, char *err,
		size_t errlen)
{
	uint64_t share = ((limit_mib << 20) * 3 / 4 / (uint64_t)n) & ~(KV_ITEM - 1);
	int go[2], res[2];
	pid_t pid[64];
	uint64_t gets = 0, hits = 0;
	int i, st;

	*rate = 0;
	*hit_pct = 0;
	*bad = 0;
	err[0] = '\0';
	if (pipe(go) || pipe(res))
		bench_die("pipe: %s", strerror(errno));
	fflush(stdout);
	for (i = 0; i < n; i++) {
		pid[i] = fork();
		if (pid[i] < 0)
			bench_die("fork: %s", strerror(errno));
		if (pid[i] == 0) {
			struct result r;

			close(go[1]);
			close(res[0]);
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			r = instance(npf, share, go[0], 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1));
			if (write(res[1], &r, sizeof(r)) != sizeof(r))
				_exit(1);
			_exit(0);
		}
	}
	close(go[0]);
	close(res[1]);
	/* filled or not, they start together: each reads one byte */
	for (i = 0; i < n; i++)
		if (write(go[1], "g", 1) != 1)
			bench_die("start: %s", strerror(errno));
	for (i = 0; i < n; i++) {
		struct result r;

		if (read(res[0], &r, sizeof(r)) != sizeof(r)) {
			snprintf(err, errlen, "an instance died without a result");
			continue;
		}
		if (r.err[0])
			snprintf(err, errlen, "%s", r.err);
		if (r.secs > 0)
			*rate += (double)r.hits / r.secs;
		gets += r.gets;
		hits += r.hits;
		*bad += r.bad;
	}
	for (i = 0; i < n; i++)
		waitpid(pid[i], &st, 0);
	close(go[1]);
	close(res[0]);
	*hit_pct = gets ? 100.0 * (double)hits / (double)gets : 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"json", no_argument, NULL, 'j'},	 {"quick", no_argument, NULL, 'q'},
		{"limit", required_argument, NULL, 'l'}, {"store", required_argument, NULL, 's'},
		{"hot", required_argument, NULL, 'h'},	 {"seconds", required_argument, NULL, 't'},
		{"max-n", required_argument, NULL, 'n'}, {}};
	int c, n;

	bench_prog = "npf-bench-kv_overcommit";
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'j':
			bench_json = 1;
			break;
		case 'q':
			limit_mib = 128, store_mib = 48, hot_mib = 32, seconds = 1.5, max_n = 4;
			break;
		case 'l':
			limit_mib = strtoull(optarg, NULL, 0);
			break;
		case 's':
			store_mib = strtoull(optarg, NULL, 0);
			break;
		case 'h':
			hot_mib = strtoull(optarg, NULL, 0);
			break;
		case 't':
			seconds = strtod(optarg, NULL);
			break;
		case 'n':
			max_n = strtoull(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr,
				"usage: %s [--json] [--quick] [--limit MiB] [--store MiB] [--hot MiB] [--seconds S] [--max-n N]\n",
				bench_prog);
			return 2;
		}
	}
	if (!limit_mib || !store_mib || !hot_mib || hot_mib > store_mib || seconds <= 0 || !max_n ||
	    max_n > 64 || limit_mib > (1 << 20) || store_mib > (1 << 20))
		bench_die("--limit, --store, --hot (at most --store) in MiB, --seconds > 0, "
			  "--max-n 1 to 64");
	bench_text("%-3s %-7s %8s %12s %7s %9s %s\n", "N", "memory", "share", "hits/s", "hit%",
		   "vs_static", "note");
	for (n = 1; n <= (int)max_n; n *= 2) {
		double rate[2], pct[2];
		uint64_t bad[2];
		char err[2][128];

		/* static first, then npf: each N's pair in one stretch of the run */
		run(n, 0, &rate[0], &pct[0], &bad[0], err[0], sizeof(err[0]));
		run(n, 1, &rate[1], &pct[1], &bad[1], err[1], sizeof(err[1]));
		for (int k = 0; k < 2; k++) {
			char note[160];

			snprintf(note, sizeof(note), "%s%s%s", bad[k] ? "WRONG BYTES READ; " : "",
				 err[k], !err[k][0] && !bad[k] ? "every hit's key checked" : "");
			bench_row_begin("kv_overcommit");
			bench_col_u64("instances", 3, (uint64_t)n);
			bench_col_str("memory", 7, k ? "npf" : "static");
			bench_col_u64("share_mib", 8, (limit_mib * 3 / 4 / (uint64_t)n));
			bench_col_f("hits_per_s", 12, 0, rate[k]);
			bench_col_f("hit_pct", 7, 1, pct[k]);
			if (rate[0] > 0)
				bench_col_f("vs_static", 9, 2, rate[k] / rate[0]);
			else
				bench_col_raw("vs_static", "        -", "null");
			bench_col_str("note", 0, note);
			bench_row_end();
		}
		if (bad[0] || bad[1])
			return 1;
	}
	return 0;
}
