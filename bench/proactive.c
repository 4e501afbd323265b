// SPDX-License-Identifier: GPL-2.0
/*
 * Proactive page-in (seed 004 Fig. 12-14). The peer RDMA-WRITEs a message
 * of 4 KiB-4 MiB into side A's buffer, of which a fraction of the pages
 * (1-100%, chosen at random per transfer) is not resident. Methods:
 *
 *   exact, pi4, pia  an npf region each, with its own policy; the missing
 *                    pages were dropped with MADV_DONTNEED (npfd
 *                    invalidates their IO page table entries); the NIC
 *                    faults at the destination (RNR NAK, the peer retries)
 *                    and npfd pages in what the policy says: exact (the
 *                    built-in: the pages the NIC asked for), pi4 (the 16
 *                    KiB block), pia (the rest of the transfer)
 *   touch-nopres     an npf region too (registered, exact policy), pages
 *                    dropped the same way; the application touches every
 *                    page of the message before posting, so the NIC finds
 *                    them all present: the time includes the touch (CPU
 *                    faults, served by npfd through userfaultfd)
 *   pin-nopres       plain memory under a pinning driver's MR (entries
 *                    always present), pages dropped the same way, mlock()ed
 *                    before the transfer (the time includes mlock) and
 *                    unlocked after
 *   transfer-only    that plain memory, all resident: no fault, no touch
 *
 * Method: each repetition measures every cell (size, fraction missing),
 * and in each cell every method once, in an order that rotates from one
 * repetition to the next; so each cell's repetitions are spread over the
 * whole run, and drifts of the machine hit all methods and cells alike.
 * Every transfer, transfer-only's too, starts --settle-us (1000) after
 * its pages were dropped: npfd has posted its invalidations and stopped
 * polling, and every thread is asleep, as for the others (transfer-only
 * used to start right after another method's transfer, often with npfd
 * still polling on the second CPU). A cell reports each method's median
 * and p95 and the medians of the per-repetition ratio to transfer-only
 * and difference from it (us), with 95% intervals. At 4 KiB a transfer is
 * a few thread wake-ups, whose cost follows the machine's load (15-60 us
 * here): the difference, an RNR round trip for the faulting methods,
 * moves less than the ratio. Transfer-only's spread (p95/p50) says how
 * steady the baseline was; "xfer-alone" is transfer-only again, the same
 * number of transfers back to back after the interleaved ones (its ratio
 * is of p50s, to the interleaved transfer-only). --cpu N pins the process
 * (the poster and both NIC engines) to CPU N: then the 4 KiB baseline
 * follows whatever else runs on that CPU (two runs on CPU 1: 16 us and
 * 54 us), so make bench does not pin. --sizes LIST measures some sizes
 * only. After the run, touch-nopres's region must have taken its CPU
 * faults through npfd (it is registered memory).
 *
 * Usage: npf-bench-proactive [--json] [--reps N] [--cpu N] [--policies DIR]
 *                            [--sizes 4096,65536,1048576,4194304] [--settle-us N]
 */
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include "bench_nic.h"

#define BUF (4UL << 20)

enum { M_EXACT, M_PI4, M_PIA, M_TOUCH, M_PIN, M_XFER, NMETH };
#define NPF_METH (M_TOUCH + 1) /* methods on an npf region of their own */
#define MAX_REPS 256
/* the time of cell c, method m, repetition i */
#define T(c, m, i) t[((c)*NMETH + (size_t)(m)) * reps + (i)]
static const char *const meth_name[] = {"exact",	"pi4",	      "pia",
					"touch-nopres", "pin-nopres", "transfer-only"};
static const __u32 all_sizes[] = {4096, 65536, 1 << 20, 4 << 20};
static __u32 sizes[4];
static size_t nsizes;
static unsigned int settle_us = 1000;
static const int probs[] = {1, 10, 50, 100};
#define NPROBS (sizeof(probs) / sizeof(probs[0]))
static uint64_t rng = 88172645463325252ULL;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Drop each page of [buf, +len) with probability prob%; at least one page. */
static void drop(char *buf, size_t len, int prob)
{
	size_t pg, n = len / BN_PAGE, dropped = 0;

	for (pg = 0; pg < n; pg++)
		if ((int)(rnd() % 100) < prob) {
			madvise(buf + pg * BN_PAGE, BN_PAGE, MADV_DONTNEED);
			dropped++;
		}
	if (!dropped)
		madvise(buf + (rnd() % n) * BN_PAGE, BN_PAGE, MADV_DONTNEED);
}

/* Attach policy `name` (exact: none, the built-in decision) to `region`. */
static void load_policy(struct npf_client *c, const char *dir, const char *name, int region)
{
	char path[PATH_MAX + 32], pname[32];
	int fd, ret;

	if (!strcmp(name, "exact") || !strcmp(name, "touch-nopres"))
		return; /* the built-in decision */
	snprintf(pname, sizeof(pname), "bench-proactive-%s", name);
	npf_client__policy_unload(c, pname); /* left by a killed run, if any */
	snprintf(path, sizeof(path), "%s/%s.bpf.o", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		bench_die("%s: %s (make builds the policies)", path, strerror(errno));
	ret = npf_client__policy_load(c, fd, (__u32)region, pname, NULL);
	close(fd);
	if (ret < 0)
		bench_die("load policy %s: %s", name, npf_client__errmsg(c));
}

static void unload_policies(struct npf_client *c)
{
	char pname[32];
	int m;

	for (m = M_PI4; m <= M_PIA; m++) {
		snprintf(pname, sizeof(pname), "bench-proactive-%s", meth_name[m]);
		npf_client__policy_unload(c, pname);
	}
}

/* One transfer of `bytes` by method m into dst (pages dropped first unless transfer-only). */
static uint64_t transfer(struct bn_pair *p, struct bn_mem *peer, struct bn_mem *dst, int m,
			 size_t bytes, int prob, uint64_t id)
{
	uint64_t t0, t;
	size_t pg;

	if (m != M_XFER)
		drop(dst->buf, bytes, prob);
	usleep(settle_us);
	t0 = bench_now_ns();
	if (m == M_TOUCH)
		for (pg = 0; pg < bytes; pg += BN_PAGE)
			((volatile char *)dst->buf)[pg] = 1;
	if (m == M_PIN && mlock(dst->buf, bytes))
		bench_die("mlock: %s", strerror(errno));
	/* B writes into A: B's QP is the requester. */
	bn_post(p->b.qp[0], NIC_WR_RDMA_WRITE, id, peer->buf, (__u32)bytes, peer->mr, dst->buf,
		dst->mr);
	bn_wait(p->b.cq);
	t = bench_now_ns() - t0;
	if (m == M_PIN)
		munlock(dst->buf, bytes);
	return t;
}

/*
 * touch-nopres is a registered region: its touches are CPU faults npfd
 * serves (userfaultfd), and they leave nothing for the NIC to fault on.
 */
static void check_touch(struct npf_client *c, const struct bn_mem *m)
{
	struct npf_region_stats_full *sf;
	size_t n;

	if (npf_client__stats(c, (__u32)m->region, &sf, &n) || n != 1)
		bench_die("stats of touch-nopres's region %d: %s", m->region,
			  npf_client__errmsg(c));
	bench_text("touch-nopres: npf region %d: %llu CPU faults served by npfd, %llu page "
		   "requests from the NIC\n",
		   m->region, (unsigned long long)sf->stats.uffd_faults,
		   (unsigned long long)sf->stats.device_faults);
	if (!sf->stats.uffd_faults)
		bench_die("touch-nopres's touches took no fault through npfd: its memory is not "
			  "a registered region, and the method measures something else");
	free(sf);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
						 {"reps", required_argument, NULL, 'r'},
						 {"cpu", required_argument, NULL, 'c'},
						 {"policies", required_argument, NULL, 'P'},
						 {"sizes", required_argument, NULL, 's'},
						 {"settle-us", required_argument, NULL, 'S'},
						 {"help", no_argument, NULL, 'h'},
						 {}};
	char policy_dir[PATH_MAX], exe[PATH_MAX];
	struct bn_mem peer, npf[NPF_METH], plain;
	size_t reps = 12, i, cell, ncells;
	double *t;
	struct npf_client *c;
	struct bn_pair p;
	int opt, m, cpu = -1;
	ssize_t n;

	bench_prog = "npf-bench-proactive";
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	snprintf(policy_dir, sizeof(policy_dir), "%s/../policies", dirname(exe));
	while ((opt = getopt_long(argc, argv, "jr:c:P:s:S:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 's': {
			char *tok, *save = NULL;

			for (tok = strtok_r(optarg, ",", &save); tok;
			     tok = strtok_r(NULL, ",", &save)) {
				unsigned long v = strtoul(tok, NULL, 0);

				for (i = 0; i < 4 && all_sizes[i] != v; i++)
					;
				if (i == 4 || nsizes == 4)
					bench_die(
						"--sizes: %s is not one of 4096, 65536, 1048576, 4194304",
						tok);
				sizes[nsizes++] = (__u32)v;
			}
			break;
		}
		case 'S':
			settle_us = (unsigned int)strtoul(optarg, NULL, 0);
			break;
		case 'j':
			bench_json = 1;
			break;
		case 'r':
			reps = strtoul(optarg, NULL, 0);
			break;
		case 'c':
			cpu = atoi(optarg);
			break;
		case 'P':
			snprintf(policy_dir, sizeof(policy_dir), "%s", optarg);
			break;
		case 'h':
			printf("Usage: %s [--json] [--reps N] [--cpu N] [--policies DIR]\n"
			       "       [--sizes LIST] [--settle-us N]\n"
			       "RDMA WRITE into partly non-resident memory: exact/pi4/pia page-in vs\n"
			       "pre-touching (registered memory) and pinning, 4 KiB-4 MiB, 1-100%% of pages\n"
			       "missing; methods interleaved in rotating order, N repetitions (default 12,\n"
			       "6-256) each over every cell; --cpu pins this process and its NIC threads;\n"
			       "--sizes: some of 4096,65536,1048576,4194304; --settle-us: pause before\n"
			       "each transfer (default 1000). Needs npfd.\n",
			       argv[0]);
			return 0;
		default:
			return 2;
		}
	}
	if (!nsizes)
		for (nsizes = 0; nsizes < 4; nsizes++)
			sizes[nsizes] = all_sizes[nsizes];
	if (reps < BENCH_CI_MIN_N || reps > MAX_REPS)
		bench_die("--reps must be %d-%d (each repetition gives one ratio)", BENCH_CI_MIN_N,
			  MAX_REPS);
	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		/* before the NICs start their threads: they inherit it */
		if (sched_setaffinity(0, sizeof(set), &set))
			bench_die("pin to CPU %d: %s", cpu, strerror(errno));
	}
	c = bn_connect();
	bn_pair_open(&p, 1);
	bn_mem_static(&peer, &p.b, BUF);
	for (m = 0; m < NPF_METH; m++) {
		bn_mem_npf(&npf[m], c, &p.a, BUF, -1, meth_name[m]);
		memset(npf[m].buf, 1, BUF); /* resident, entries present (npfd maps on install) */
		load_policy(c, policy_dir, meth_name[m], npf[m].region);
	}
	bn_mem_static_lock(&plain, &p.a, BUF, 0);

	/*
	 * Repetition-major: repetition i measures every cell, each cell every
	 * method. So each cell's repetitions are spread over the whole run
	 * instead of one or two seconds of it: a 4 KiB transfer is a few
	 * thread wake-ups, whose cost follows the machine's load, which
	 * changes over seconds (a cell measured in one stretch saw one load
	 * and two runs disagreed 2x on the 4 KiB ratios).
	 */
	ncells = nsizes * NPROBS;
	t = calloc(ncells * NMETH * reps, sizeof(*t));
	if (!t)
		bench_die("out of memory");
	for (i = 0; i < reps; i++)
		for (cell = 0; cell < ncells; cell++)
			for (opt = 0; opt < NMETH; opt++) {
				m = (int)((i + (size_t)opt) % NMETH);
				T(cell, m, i) = (double)transfer(&p, &peer,
								 m < NPF_METH ? &npf[m] : &plain, m,
								 sizes[cell / NPROBS],
								 probs[cell % NPROBS], i);
			}

	bench_text("%-8s %5s %-14s %5s %10s %10s %22s %24s %6s\n", "bytes", "miss%", "method",
		   "reps", "p50(us)", "p95(us)", "x xfer [95%]", "+us over xfer [95%]", "spread");
	for (cell = 0; cell < ncells; cell++) {
		__u32 bytes = sizes[cell / NPROBS];
		int prob = probs[cell % NPROBS];
		struct bench_summary xs, as;
		char text[40], json[24];

		{
			struct bench_samples xv = {0}, av = {0};

			for (i = 0; i < reps; i++)
				bench_add(&xv, (uint64_t)T(cell, M_XFER, i));
			xs = bench_summarize(&xv);
			bench_free(&xv);
			/* transfer-only alone, back to back: what interleaving does to it */
			for (i = 0; i < reps; i++)
				bench_add(&av, transfer(&p, &peer, &plain, M_XFER, bytes, prob, i));
			as = bench_summarize(&av);
			bench_free(&av);
		}
		for (m = 0; m < NMETH; m++) {
			struct bench_samples v = {0};
			struct bench_summary sm;
			double ratio[MAX_REPS], extra[MAX_REPS];

			for (i = 0; i < reps; i++) {
				bench_add(&v, (uint64_t)T(cell, m, i));
				ratio[i] = T(cell, m, i) / T(cell, M_XFER, i);
				extra[i] = (T(cell, m, i) - T(cell, M_XFER, i)) / 1e3;
			}
			sm = bench_summarize(&v);
			bench_free(&v);
			bench_row_begin("proactive");
			bench_col_u64("bytes", 8, bytes);
			bench_col_u64("miss_pct", 5, (uint64_t)prob);
			bench_col_str("method", 14, meth_name[m]);
			bench_col_u64("reps", 5, reps);
			bench_col_f("p50_us", 10, 1, (double)sm.p50 / 1e3);
			bench_col_f("p95_us", 10, 1, (double)sm.p95 / 1e3);
			if (m != M_XFER) {
				bench_col_ci("ratio_to_transfer_only", 22, 2,
					     bench_median_ci(ratio, reps));
				bench_col_ci("us_over_transfer_only", 24, 1,
					     bench_median_ci(extra, reps));
			} else {
				bench_col_raw("ratio_to_transfer_only", "                     -",
					      "null");
				bench_col_raw("us_over_transfer_only", "                       -",
					      "null");
			}
			/* how steady the baseline was in this cell */
			bench_col_f("xfer_p95_over_p50", 6, 2, (double)xs.p95 / (double)xs.p50);
			bench_row_end();
		}
		bench_row_begin("proactive");
		bench_col_u64("bytes", 8, bytes);
		bench_col_u64("miss_pct", 5, (uint64_t)prob);
		bench_col_str("method", 14, "xfer-alone");
		bench_col_u64("reps", 5, reps);
		bench_col_f("p50_us", 10, 1, (double)as.p50 / 1e3);
		bench_col_f("p95_us", 10, 1, (double)as.p95 / 1e3);
		/* not paired with anything: the ratio of the two p50s, no interval */
		snprintf(json, sizeof(json), "%.3f", (double)as.p50 / (double)xs.p50);
		snprintf(text, sizeof(text), "%17s p50s", json);
		bench_col_raw("ratio_to_transfer_only", text, json);
		bench_col_raw("us_over_transfer_only", "                       -", "null");
		bench_col_f("xfer_p95_over_p50", 6, 2, (double)as.p95 / (double)as.p50);
		bench_row_end();
	}
	free(t);
	check_touch(c, &npf[M_TOUCH]);
	unload_policies(c);
	bn_pair_close(&p, c);
	npf_client__close(c);
	return 0;
}
