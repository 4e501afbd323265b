// SPDX-License-Identifier: GPL-2.0
/*
 * Proactive page-in (seed 004 Fig. 12-14). The peer RDMA-WRITEs a message
 * of 4 KiB-4 MiB into side A's buffer, of which a fraction of the pages
 * (1-100%, chosen at random per transfer) is not resident. Methods:
 *
 *   exact, pi4, pia  npf region; the missing pages were dropped with
 *                    MADV_DONTNEED (npfd invalidates their IO page table
 *                    entries); the NIC faults at the destination (RNR NAK,
 *                    the peer retries) and npfd pages in what the policy
 *                    says: exact (the built-in: the pages the NIC asked for),
 *                    pi4 (the 16 KiB block), pia (the rest of the transfer)
 *   touch-nopres     plain memory, entries always present (no faults): the
 *                    application touches every page of the message before
 *                    posting; the time includes the touch (minor CPU faults)
 *   pin-nopres       the same memory, mlock()ed before the transfer (the
 *                    time includes mlock) and unlocked after
 *   transfer-only    the same memory, all resident: no fault, no touch
 *
 * Mean transfer time per cell, and the ratio to transfer-only.
 * Usage: npf-bench-proactive [--json] [--reps N] [--policies DIR]
 */
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include "bench_nic.h"

#define BUF (4UL << 20)

enum { M_EXACT, M_PI4, M_PIA, M_TOUCH, M_PIN, M_XFER, NMETH };
static const char *const meth_name[] = {"exact", "pi4", "pia", "touch-nopres", "pin-nopres",
					"transfer-only"};
static const __u32 sizes[] = {4096, 65536, 1 << 20, 4 << 20};
static const int probs[] = {1, 10, 50, 100};
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

static void load_policy(struct npf_client *c, const char *dir, const char *name, int region)
{
	char path[PATH_MAX + 32];
	int fd, ret;

	npf_client__policy_unload(c, "bench-proactive");
	if (!strcmp(name, "exact"))
		return; /* the built-in decision */
	snprintf(path, sizeof(path), "%s/%s.bpf.o", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		bench_die("%s: %s (make builds the policies)", path, strerror(errno));
	ret = npf_client__policy_load(c, fd, (__u32)region, "bench-proactive", NULL);
	close(fd);
	if (ret < 0)
		bench_die("load policy %s: %s", name, npf_client__errmsg(c));
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
						 {"reps", required_argument, NULL, 'r'},
						 {"policies", required_argument, NULL, 'P'},
						 {"help", no_argument, NULL, 'h'},
						 {}};
	char policy_dir[PATH_MAX], exe[PATH_MAX];
	struct bn_mem peer, npf, plain;
	size_t reps = 6, s, pr, m, i;
	struct npf_client *c;
	struct bn_pair p;
	ssize_t n;
	int opt;

	bench_prog = "npf-bench-proactive";
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	snprintf(policy_dir, sizeof(policy_dir), "%s/../policies", dirname(exe));
	while ((opt = getopt_long(argc, argv, "jr:P:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			bench_json = 1;
			break;
		case 'r':
			reps = strtoul(optarg, NULL, 0);
			break;
		case 'P':
			snprintf(policy_dir, sizeof(policy_dir), "%s", optarg);
			break;
		case 'h':
			printf("Usage: %s [--json] [--reps N] [--policies DIR]\n"
			       "RDMA WRITE into partly non-resident memory: exact/pi4/pia page-in vs\n"
			       "pre-touching and pinning, 4 KiB-4 MiB, 1-100%% of pages missing. Needs npfd.\n",
			       argv[0]);
			return 0;
		default:
			return 2;
		}
	}
	if (!reps)
		bench_die("--reps must be at least 1");
	c = bn_connect();
	bn_pair_open(&p, 1);
	bn_mem_static(&peer, &p.b, BUF);
	bn_mem_npf(&npf, c, &p.a, BUF, -1, "proactive");
	memset(npf.buf, 1, BUF); /* resident, entries present (npfd maps on install) */
	bn_mem_static_lock(&plain, &p.a, BUF, 0);

	bench_text("%-8s %5s %-14s %5s %12s %10s\n", "bytes", "miss%", "method", "reps", "mean(us)",
		   "x xfer");
	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (pr = 0; pr < sizeof(probs) / sizeof(probs[0]); pr++) {
			double sum[NMETH] = {0};

			for (m = 0; m < NMETH; m++) {
				if (m <= M_PIA)
					load_policy(c, policy_dir, meth_name[m], npf.region);
				for (i = 0; i < reps; i++) {
					struct bn_mem *dst = m <= M_PIA ? &npf : &plain;
					uint64_t t0;
					size_t pg;

					if (m != M_XFER)
						drop(dst->buf, sizes[s], probs[pr]);
					if (m <= M_PIA)
						usleep(200); /* let npfd post the invalidation */
					t0 = bench_now_ns();
					if (m == M_TOUCH)
						for (pg = 0; pg < sizes[s]; pg += BN_PAGE)
							((volatile char *)dst->buf)[pg] = 1;
					if (m == M_PIN && mlock(dst->buf, sizes[s]))
						bench_die("mlock: %s", strerror(errno));
					/* B writes into A: B's QP is the requester. */
					bn_post(p.b.qp[0], NIC_WR_RDMA_WRITE, i, peer.buf, sizes[s],
						peer.mr, dst->buf, dst->mr);
					bn_wait(p.b.cq);
					sum[m] += (double)(bench_now_ns() - t0);
					if (m == M_PIN)
						munlock(dst->buf, sizes[s]);
				}
			}
			npf_client__policy_unload(c, "bench-proactive");
			for (m = 0; m < NMETH; m++) {
				bench_row_begin("proactive");
				bench_col_u64("bytes", 8, sizes[s]);
				bench_col_u64("miss_pct", 5, (uint64_t)probs[pr]);
				bench_col_str("method", 14, meth_name[m]);
				bench_col_u64("reps", 5, reps);
				bench_col_f("mean_us", 12, 1, sum[m] / (double)reps / 1e3);
				bench_col_f("ratio_to_transfer_only", 10, 2, sum[m] / sum[M_XFER]);
				bench_row_end();
			}
		}
	bn_pair_close(&p, c);
	npf_client__close(c);
	return 0;
}
