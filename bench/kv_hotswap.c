// SPDX-License-Identifier: GPL-2.0
/*
 * Two key-value instances whose hot sets swap halfway through the run
 * (seed 000 Fig. 7 shape, issue 15). Instance A asks for a small hot set
 * (--small MiB of items, uniformly at random), B for a large one (--large
 * MiB); after --phase seconds they swap: A asks for the large one, B for
 * the small one (the seed: 100 MB <-> 900 MB of items under a 1 GB cgroup,
 * swapped at 50 s). Both share --memory MiB, held in one of two ways, one
 * after the other in the same run (the machine is shared: only ratios of
 * the same run mean anything):
 *
 *   static   each pins half of it (the seed's 500 MB each): items beyond
 *            the half cannot be cached, a GET of one is a miss;
 *   npf      both register their whole store unpinned with an npfd whose
 *            client budget (npfd.conf's client-budget-mib) is --memory:
 *            the two stores are regions of one connection (the instances
 *            are two threads of one process), so the budget is theirs
 *            together and npfd decides which pages go.
 *
 * An instance is kv.h's: a server NIC and a client NIC on the software
 * NIC's wires, 4 KiB items. The store starts empty, as a cache does: a GET
 * that finds its item never set is a miss followed by a SET of it (an RDMA
 * WRITE), as memaslap's clients do, where the server can hold it; a GET that
 * finds the item is a hit, its key checked (a set item read back as zeros or
 * another key is wrong bytes: the run fails). Before the clock starts each
 * instance sets its first hot set, so the first phase is steady from its
 * start. Hits are counted per --interval (100 ms), per instance; npfd's
 * resident pages per instance are sampled at the same interval.
 *
 * Reported per kind and instance (and A+B, the seed's Fig. 7(c)): the steady
 * hit rate before and after the swap (the mean over the last third of each
 * phase), the switch-over time (below), and npfd's evictions, read-backs
 * and device faults in each phase. The seed shows "a short transition period
 * after which the system stabilizes" and gives no number; here the
 * switch-over is the time from the swap until the hit rate (a moving mean
 * of 5 intervals, 500 ms) comes within 10% of the after-swap steady rate
 * and stays there for 1 s; "settled" says whether that came before the
 * steady window. The curves go to $NPF_BENCH_DATA/kv_hotswap.dat, which
 * bench/run.sh plots (kv_hotswap.png).
 *
 * Starts its own npfd (the client budget is npfd-wide): --npfd PATH, by
 * default the npfd next to this program.
 * Defaults: --memory 64, --large 48, --small large / 9 (6), --phase 25 s
 * (each kind runs 50 s: npf's switch-over took 10-14 s here); --quick: 32 MiB,
 * 24 MiB, 8 s.
 * Usage: npf-bench-kv_hotswap [--json] [--quick] [--memory MiB] [--large MiB]
 *                             [--small MiB] [--phase S] [--interval MS] [--npfd PATH]
 */
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "kv.h"

#define MAX_BINS 4096
#define SMOOTH 5    /* intervals in the moving mean */
#define BAND_PCT 10 /* switch-over: within this much of the new steady rate */
#define STAY 10	    /* intervals it stays there (1 s) */

static uint64_t mem_mib = 64, large_mib = 48, small_mib;
static double phase_s = 25, interval_s = 0.1;
static char npfd_path[PATH_MAX];
static char sock[PATH_MAX];

enum { STATIC, NPF, NKINDS };
static const char *const kind_name[NKINDS] = {"static", "npf"};

/* npfd's counters of one region, at a point of the run. */
struct snap {
	uint64_t resident, evicted, refaults, written, device_faults, uffd_faults;
};

/* One kind's run, in memory shared with the child that runs it. */
struct run {
	uint64_t hits[2][MAX_BINS], gets[2][MAX_BINS];
	uint64_t resident[2][MAX_BINS]; /* npf: pages, sampled at each interval's end */
	struct snap at[3][2];		/* npf: at the start, the swap and the end */
	uint64_t bad[2], sets[2];
	int nbins;
	char err[192];
};

/* One instance's thread in the child. */
struct inst {
	int idx;
	struct npf_client *c; /* npf: the process's one connection (NULL: static) */
	struct run *run;
	uint64_t hot[2]; /* items asked for before and after the swap */
	struct kv kv;
	pthread_barrier_t *ready, *go;
	double *t0;
	char err[160];
};

static void *instance(void *arg)
{
	struct inst *in = arg;
	struct run *run = in->run;
	uint64_t store = in->hot[0] > in->hot[1] ? in->hot[0] : in->hot[1];
	uint64_t seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(in->idx + 1), k;
	uint64_t share = (mem_mib << 20) / 2 & ~(KV_ITEM - 1);
	uint8_t *set;
	double t;

	/* npf: no budget of the region's own, the client's applies */
	if (kv_open(&in->kv, in->c, store * KV_ITEM, in->c ? 0 : share, in->err, sizeof(in->err)))
		set = NULL;
	else if (!(set = calloc(store, 1)))
		snprintf(in->err, sizeof(in->err), "out of memory");
	for (k = 0; set && k < in->hot[0] && k < in->kv.cached; k++) {
		kv_set(&in->kv, k);
		set[k] = 1;
	}
	pthread_barrier_wait(in->ready);
	pthread_barrier_wait(in->go);
	while (set && (t = bench_now_s() - *in->t0) < 2 * phase_s) {
		int bin = (int)(t / interval_s), ph = t >= phase_s;
		uint64_t key;

		if (bin >= run->nbins)
			bin = run->nbins - 1;
		k = kv_rnd(&seed) % in->hot[ph];
		key = kv_get(&in->kv, k);
		run->gets[in->idx][bin]++;
		if (key == k + 1) {
			run->hits[in->idx][bin]++;
		} else if (key == 0 && !set[k]) {
			kv_set(&in->kv, k); /* a miss: memaslap sets it */
			set[k] = 1;
			run->sets[in->idx]++;
		} else if (key != KV_MISS) {
			run->bad[in->idx]++;
		}
	}
	free(set);
	return NULL;
}

/* npfd's counters of the two regions (npf only); 0, or -1 with the reason in run->err. */
static int snapshot(struct npf_client *c, const int *region, struct snap *out)
{
	struct npf_budget_info *bi;
	struct npf_region_stats_full *st;
	size_t n, i;
	int j;

	memset(out, 0, 2 * sizeof(*out));
	if (npf_client__budget_list(c, 0, &bi, &n))
		return -1;
	for (i = 0; i < n; i++)
		for (j = 0; j < 2; j++)
			if ((int)bi[i].region_id == region[j]) {
				out[j].resident = bi[i].resident_pages;
				out[j].evicted = bi[i].evicted_pages;
				out[j].refaults = bi[i].refaults;
				out[j].written = bi[i].written_pages;
			}
	free(bi);
	if (npf_client__stats(c, 0, &st, &n))
		return -1;
	for (i = 0; i < n; i++)
		for (j = 0; j < 2; j++)
			if ((int)st[i].stats.region_id == region[j]) {
				out[j].device_faults = st[i].stats.device_faults;
				out[j].uffd_faults = st[i].stats.uffd_faults;
			}
	free(st);
	return 0;
}

/* The child: both instances as threads of this process, the main thread samples. */
static void run_kind(int kind, struct run *run)
{
	pthread_barrier_t ready, go;
	struct inst in[2];
	pthread_t th[2];
	struct npf_client *c = NULL;
	int region[2], i, bin;
	double t0 = 0, next;

	/*
	 * npf: one connection for both stores. npfd's client budget is per
	 * connection (its userfaultfd), so two would get one budget each.
	 */
	if (kind == NPF)
		c = bn_connect();
	pthread_barrier_init(&ready, NULL, 3);
	pthread_barrier_init(&go, NULL, 3);
	for (i = 0; i < 2; i++) {
		in[i] = (struct inst){
			.idx = i, .c = c, .run = run, .ready = &ready, .go = &go, .t0 = &t0};
		/* A: small, then large; B: large, then small */
		in[i].hot[i] = (small_mib << 20) / KV_ITEM;
		in[i].hot[!i] = (large_mib << 20) / KV_ITEM;
		if (pthread_create(&th[i], NULL, instance, &in[i]))
			bench_die("pthread_create: %s", strerror(errno));
	}
	pthread_barrier_wait(&ready);
	for (i = 0; i < 2; i++)
		if (in[i].err[0])
			snprintf(run->err, sizeof(run->err), "instance %c: %s", 'A' + i, in[i].err);
	if (c && !run->err[0]) {
		for (i = 0; i < 2; i++)
			region[i] = in[i].kv.srv.region;
		if (snapshot(c, region, run->at[0]))
			snprintf(run->err, sizeof(run->err), "npfd's counters: %s",
				 npf_client__errmsg(c));
	}
	t0 = bench_now_s();
	pthread_barrier_wait(&go);
	/* sample npfd's resident pages at each interval's end, and its counters at the swap */
	for (bin = 0, next = t0 + interval_s; c && !run->err[0] && bin < run->nbins;
	     bin++, next += interval_s) {
		struct snap s[2];
		double now = bench_now_s();

		if (next > now)
			usleep((useconds_t)((next - now) * 1e6));
		if (snapshot(c, region, s))
			break;
		for (i = 0; i < 2; i++)
			run->resident[i][bin] = s[i].resident;
		if (bin == (int)(phase_s / interval_s + 0.5) - 1)
			memcpy(run->at[1], s, sizeof(s));
	}
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	if (c && !run->err[0] && snapshot(c, region, run->at[2]))
		snprintf(run->err, sizeof(run->err), "npfd's counters: %s", npf_client__errmsg(c));
	for (i = 0; i < 2; i++)
		if (!in[i].err[0])
			kv_close(&in[i].kv);
}

/* A private npfd whose client budget is --memory; returns its pid. */
static pid_t npfd_start(char *dir)
{
	char budget[32], bpffs[64], log[PATH_MAX + 16], swap[PATH_MAX + 16];
	NPF_OPTS(npf_client_opts, co, .socket_path = sock);
	struct npf_client *c;
	pid_t pid;
	int i, fd;

	snprintf(budget, sizeof(budget), "%llu", (unsigned long long)mem_mib);
	snprintf(bpffs, sizeof(bpffs), "/sys/fs/bpf/npf-bench-hotswap-%d", getpid());
	snprintf(sock, sizeof(sock), "%s/npfd.sock", dir);
	snprintf(log, sizeof(log), "%s/npfd.log", dir);
	snprintf(swap, sizeof(swap), "%s/swap", dir);
	if (mkdir(swap, 0700))
		bench_die("mkdir %s: %s", swap, strerror(errno));
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (!pid) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd >= 0)
			dup2(fd, 2);
		execl(npfd_path, "npfd", "--config", "/dev/null", "--foreground", "-q", "--socket",
		      sock, "--bpffs", bpffs, "--ws-dir", dir, "--swap-dir", swap,
		      "--client-budget-mib", budget, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", npfd_path, strerror(errno));
		_exit(127);
	}
	/* its socket exists from bind() on, but answers only once npfd listens */
	for (i = 0; !(c = npf_client__connect(&co)); i++) {
		if (i == 2000 || waitpid(pid, NULL, WNOHANG) == pid)
			bench_die("npfd (%s) did not start: see %s", npfd_path, log);
		usleep(10000);
	}
	npf_client__close(c);
	setenv("NPF_SOCKET", sock, 1);
	return pid;
}

/* Remove our npfd's directory: its socket, log, swap store directory and working-set records. */
static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path) && errno != ENOENT ? -1 : 0;
}

static void rmtree(const char *dir)
{
	if (nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS))
		fprintf(stderr, "%s: cannot remove %s: %s\n", bench_prog, dir, strerror(errno));
}

static double rate(const uint64_t *hits, int b)
{
	return (double)hits[b] / interval_s;
}

/* Mean hit rate over bins [from, to). */
static double mean_rate(const uint64_t *hits, int from, int to)
{
	uint64_t sum = 0;
	int b;

	for (b = from; b < to; b++)
		sum += hits[b];
	return to > from ? (double)sum / ((double)(to - from) * interval_s) : 0;
}

struct curve {
	double before, after, switch_s, hit_pct;
	int settled;
};

/* The moving mean of the last SMOOTH intervals up to b, none before the swap (half). */
static double moving(const uint64_t *hits, int half, int b)
{
	return mean_rate(hits, b - SMOOTH + 1 > half ? b - SMOOTH + 1 : half, b + 1);
}

/*
 * Steady rates (the mean over the last third of each phase) and the
 * switch-over: from the swap to the end of the first interval from which
 * the moving mean stays within +-BAND_PCT of the after-swap rate for STAY
 * intervals (a rate that falls at once switches in one interval; one that
 * swings around the new rate has not switched). settled: that came before
 * the after window.
 */
static struct curve analyse(const uint64_t *hits, const uint64_t *gets, int nbins)
{
	int half = nbins / 2, third = half / 3, b, j = 0;
	uint64_t h = 0, g = 0;
	struct curve c;

	c.before = mean_rate(hits, half - third, half);
	c.after = mean_rate(hits, nbins - third, nbins);
	for (b = half; b < nbins; b++) {
		for (j = b; j < nbins && j < b + STAY; j++)
			if (fabs(moving(hits, half, j) - c.after) > c.after * BAND_PCT / 100)
				break;
		if (j == nbins || j == b + STAY)
			break;
	}
	c.switch_s = (double)(b + 1 - half) * interval_s;
	c.settled = b < nbins - third;
	for (b = nbins - third; b < nbins; b++) {
		h += hits[b];
		g += gets[b];
	}
	c.hit_pct = g ? 100.0 * (double)h / (double)g : 0;
	return c;
}

static void write_curves(struct run *const *run)
{
	const char *dir = getenv("NPF_BENCH_DATA");
	char path[PATH_MAX];
	FILE *f;
	int b;

	if (!dir || !*dir)
		return;
	snprintf(path, sizeof(path), "%s/kv_hotswap.dat", dir);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "%s: cannot write %s: %s\n", bench_prog, path, strerror(errno));
		return;
	}
	fprintf(f, "# swap_s %g\n# memory_mib %llu small_mib %llu large_mib %llu\n", phase_s,
		(unsigned long long)mem_mib, (unsigned long long)small_mib,
		(unsigned long long)large_mib);
	fprintf(f, "# t_s npf_A npf_B static_A static_B npf_A+B static_A+B "
		   "npf_resident_A_mib npf_resident_B_mib (hits/s)\n");
	for (b = 0; b < run[NPF]->nbins; b++) {
		const struct run *n = run[NPF], *s = run[STATIC];

		fprintf(f, "%.3f %.0f %.0f %.0f %.0f %.0f %.0f %.2f %.2f\n", (b + 1) * interval_s,
			rate(n->hits[0], b), rate(n->hits[1], b), rate(s->hits[0], b),
			rate(s->hits[1], b), rate(n->hits[0], b) + rate(n->hits[1], b),
			rate(s->hits[0], b) + rate(s->hits[1], b),
			(double)n->resident[0][b] * KV_ITEM / (1 << 20),
			(double)n->resident[1][b] * KV_ITEM / (1 << 20));
	}
	fclose(f);
}

static void row(int kind, int who, const struct run *run, const struct curve *c,
		const struct curve *base)
{
	static const char *const name[] = {"A", "B", "A+B"};
	char hot[32], note[256];
	uint64_t bad;
	int i, ph;

	if (who == 2)
		snprintf(hot, sizeof(hot), "%llu+%llu", (unsigned long long)small_mib,
			 (unsigned long long)large_mib);
	else
		snprintf(hot, sizeof(hot), "%llu->%llu",
			 (unsigned long long)(who ? large_mib : small_mib),
			 (unsigned long long)(who ? small_mib : large_mib));
	bench_row_begin("kv_hotswap");
	bench_col_str("memory", 7, kind_name[kind]);
	bench_col_str("instance", 4, name[who]);
	bench_col_str("hot_mib", 8, hot);
	bench_col_f("before_hits_s", 10, 0, c->before);
	bench_col_f("after_hits_s", 10, 0, c->after);
	bench_col_f("after_hit_pct", 6, 1, c->hit_pct);
	if (base->after > 0)
		bench_col_f("after_vs_static", 7, 2, c->after / base->after);
	else
		bench_col_raw("after_vs_static", "      -", "null");
	bench_col_f("switch_s", 6, 1, c->switch_s);
	bench_col_bool("settled", 4, c->settled);
	/* npfd's work in each phase: evicted pages, read back from swap, device faults */
	for (ph = 0; ph < 2; ph++) {
		static const char *const key[2][3] = {{"evicted_1", "refaults_1", "dev_faults_1"},
						      {"evicted_2", "refaults_2", "dev_faults_2"}};
		uint64_t v[3] = {0};

		for (i = 0; kind == NPF && i < 2; i++) {
			const struct snap *a = &run->at[ph][i], *z = &run->at[ph + 1][i];

			if (who != 2 && who != i)
				continue;
			v[0] += z->evicted - a->evicted;
			v[1] += z->refaults - a->refaults;
			v[2] += z->device_faults - a->device_faults;
		}
		bench_col_u64(key[ph][0], 7, v[0]);
		bench_col_u64(key[ph][1], 7, v[1]);
		bench_col_u64(key[ph][2], 7, v[2]);
	}
	bad = who == 2 ? run->bad[0] + run->bad[1] : run->bad[who];
	snprintf(note, sizeof(note), "%s%s%s", bad ? "WRONG BYTES READ; " : "", run->err,
		 !run->err[0] && !bad ? "every hit's key checked" : "");
	bench_col_str("note", 0, note);
	bench_row_end();
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"json", no_argument, NULL, 'j'},
					   {"quick", no_argument, NULL, 'q'},
					   {"memory", required_argument, NULL, 'm'},
					   {"large", required_argument, NULL, 'L'},
					   {"small", required_argument, NULL, 's'},
					   {"phase", required_argument, NULL, 'p'},
					   {"interval", required_argument, NULL, 'i'},
					   {"npfd", required_argument, NULL, 'n'},
					   {}};
	char exe[PATH_MAX] = "", dir[] = "/tmp/npf-bench-hotswap-XXXXXX";
	struct run *run[NKINDS];
	struct curve cv[NKINDS][3];
	uint64_t ab_hits[NKINDS][MAX_BINS], ab_gets[NKINDS][MAX_BINS];
	ssize_t len;
	pid_t npfd;
	int c, k, w, b, nbins, failed = 0;

	bench_prog = "npf-bench-kv_hotswap";
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len > 0)
		exe[len] = '\0';
	snprintf(npfd_path, sizeof(npfd_path), "%s/npfd", dirname(exe));
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'j':
			bench_json = 1;
			break;
		case 'q':
			mem_mib = 32, large_mib = 24, phase_s = 8;
			break;
		case 'm':
			mem_mib = strtoull(optarg, NULL, 0);
			break;
		case 'L':
			large_mib = strtoull(optarg, NULL, 0);
			break;
		case 's':
			small_mib = strtoull(optarg, NULL, 0);
			break;
		case 'p':
			phase_s = strtod(optarg, NULL);
			break;
		case 'i':
			interval_s = strtod(optarg, NULL) / 1000;
			break;
		case 'n':
			snprintf(npfd_path, sizeof(npfd_path), "%s", optarg);
			break;
		default:
			fprintf(stderr,
				"usage: %s [--json] [--quick] [--memory MiB] [--large MiB] [--small MiB] [--phase S] [--interval MS] [--npfd PATH]\n",
				bench_prog);
			return 2;
		}
	}
	if (!small_mib)
		small_mib = (large_mib + 8) / 9; /* the seed's factor of nine */
	if (!mem_mib || mem_mib > (1 << 20) || !large_mib || large_mib > (1 << 20) || !small_mib ||
	    small_mib > large_mib || phase_s <= 0 || interval_s < 0.01)
		bench_die("--memory, --large, --small (at most --large) in MiB, --phase > 0, "
			  "--interval at least 10 ms");
	nbins = (int)(2 * phase_s / interval_s + 0.5);
	if (nbins < 2 * 3 * SMOOTH || nbins > MAX_BINS)
		bench_die("--phase / --interval: %d intervals, %d to %d fit", nbins, 6 * SMOOTH,
			  MAX_BINS);
	if (!mkdtemp(dir))
		bench_die("mkdtemp %s: %s", dir, strerror(errno));
	npfd = npfd_start(dir);

	for (k = 0; k < NKINDS; k++) {
		pid_t pid;
		int st;

		run[k] = mmap(NULL, sizeof(*run[k]), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (run[k] == MAP_FAILED)
			bench_die("mmap: %s", strerror(errno));
		run[k]->nbins = nbins;
		fflush(stdout);
		pid = fork();
		if (pid < 0)
			bench_die("fork: %s", strerror(errno));
		if (!pid) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			run_kind(k, run[k]);
			_exit(0);
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			snprintf(run[k]->err, sizeof(run[k]->err), "%s run died (status %d)",
				 kind_name[k], st);
	}
	kill(npfd, SIGTERM);
	waitpid(npfd, NULL, 0);
	rmtree(dir);

	for (k = 0; k < NKINDS; k++) {
		for (b = 0; b < nbins; b++) {
			ab_hits[k][b] = run[k]->hits[0][b] + run[k]->hits[1][b];
			ab_gets[k][b] = run[k]->gets[0][b] + run[k]->gets[1][b];
		}
		for (w = 0; w < 2; w++)
			cv[k][w] = analyse(run[k]->hits[w], run[k]->gets[w], nbins);
		cv[k][2] = analyse(ab_hits[k], ab_gets[k], nbins);
		failed |= run[k]->bad[0] || run[k]->bad[1] || run[k]->err[0];
	}
	write_curves(run);
	bench_text("%-7s %-4s %-8s %10s %10s %6s %7s %6s %4s %7s %7s %7s %7s %7s %7s %s\n",
		   "memory", "inst", "hot_MiB", "before/s", "after/s", "hit%", "vs_stat", "switch",
		   "setl", "evict1", "refal1", "dfault1", "evict2", "refal2", "dfault2", "note");
	for (k = 0; k < NKINDS; k++)
		for (w = 0; w < 3; w++)
			row(k, w, run[k], &cv[k][w], &cv[STATIC][w]);
	return failed;
}
