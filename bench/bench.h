/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What every benchmark shares: timing, sorted-sample percentiles, medians
 * with confidence intervals and target verdicts, the table-or-JSON row
 * printer, and dying with a reason. One copy, here.
 *
 * Rows: bench_row_begin(bench) then bench_col_*() per column, then
 * bench_row_end(). In text mode a column prints "value" padded to its
 * width; with --json the same calls print "key":value, so the table and
 * the JSON cannot drift (iproute2's print_*(PRINT_ANY, ...) idiom). The
 * JSON goes through npfctl's writer (common/npf_json.h), which escapes
 * every string.
 */
#ifndef NPF_BENCH_H
#define NPF_BENCH_H

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "npf_json.h"

static int bench_json;	       /* --json: one object per row */
static const char *bench_prog; /* "npf-bench-NAME", for error messages */
static int bench_first_col;

static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline double bench_now_s(void)
{
	return (double)bench_now_ns() / 1e9;
}

static inline void __attribute__((noreturn, format(printf, 1, 2))) bench_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", bench_prog ? bench_prog : "npf-bench");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static inline int bench_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Percentile p (0..100) of v[0..n), which must be sorted. */
static inline uint64_t bench_pct(const uint64_t *v, size_t n, double p)
{
	size_t i;

	if (!n)
		return 0;
	i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

/* A growable sample set; summarised after sorting. */
struct bench_samples {
	uint64_t *v;
	size_t n, cap;
};

struct bench_summary {
	size_t n;
	uint64_t p50, p95, p99, max, min;
	double mean;
};

static inline void bench_add(struct bench_samples *s, uint64_t x)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 1024;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v)
			bench_die("out of memory for samples");
	}
	s->v[s->n++] = x;
}

static inline struct bench_summary bench_summarize(struct bench_samples *s)
{
	struct bench_summary r = {.n = s->n};
	double sum = 0;
	size_t i;

	if (!s->n)
		return r;
	qsort(s->v, s->n, sizeof(*s->v), bench_cmp_u64);
	for (i = 0; i < s->n; i++)
		sum += (double)s->v[i];
	r.mean = sum / (double)s->n;
	r.min = s->v[0];
	r.p50 = bench_pct(s->v, s->n, 50);
	r.p95 = bench_pct(s->v, s->n, 95);
	r.p99 = bench_pct(s->v, s->n, 99);
	r.max = s->v[s->n - 1];
	return r;
}

static inline void bench_free(struct bench_samples *s)
{
	free(s->v);
	*s = (struct bench_samples){0};
}

/*
 * Write sorted samples as "value_ns cumulative_fraction" lines (a CDF for
 * gnuplot) to DIR/NAME.dat, DIR from $NPF_BENCH_DATA; nothing when unset.
 * At most ~2000 points: every k-th sample plus the last.
 */
static inline void bench_write_cdf(const char *name, const struct bench_samples *s)
{
	const char *dir = getenv("NPF_BENCH_DATA");
	char path[4096];
	size_t i, step;
	FILE *f;

	if (!dir || !*dir || !s->n)
		return;
	snprintf(path, sizeof(path), "%s/%s.dat", dir, name);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "%s: cannot write %s: %s\n", bench_prog, path, strerror(errno));
		return;
	}
	step = s->n > 2000 ? s->n / 2000 : 1;
	for (i = 0; i < s->n; i += step)
		fprintf(f, "%llu %.6f\n", (unsigned long long)s->v[i],
			(double)(i + 1) / (double)s->n);
	fprintf(f, "%llu 1.0\n", (unsigned long long)s->v[s->n - 1]);
	fclose(f);
}

/* ---- comparisons: medians, confidence intervals, verdicts ---------------------- */

/* A median and its 95% confidence interval. */
struct bench_ci {
	double est, lo, hi;
};

/* Fewer values than this cannot give a 95% interval for their median. */
#define BENCH_CI_MIN_N 6

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of v[0..n), n > 0; sorts v. */
static inline double bench_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return n & 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * The median of v[0..n) (sorted in place) with a distribution-free 95%
 * interval from order statistics: for n independent values, the k-th
 * smallest and k-th largest enclose the true median with probability
 * 1 - 2 P(Bin(n, 1/2) < k), whatever their distribution (latencies here
 * have tails ten times the median, so nothing normal is assumed). k is the
 * largest that keeps that probability at least 95%. n >= BENCH_CI_MIN_N.
 */
static inline struct bench_ci bench_median_ci(double *v, size_t n)
{
	struct bench_ci r;
	double tail = 0, p;
	size_t k = 0;

	if (n < BENCH_CI_MIN_N)
		bench_die("%zu values cannot give a 95%% interval (at least %d)", n,
			  BENCH_CI_MIN_N);
	r.est = bench_median(v, n);
	for (;; k++) {
		p = exp(lgamma((double)n + 1) - lgamma((double)k + 1) -
			lgamma((double)(n - k) + 1) - (double)n * M_LN2);
		if (2 * (tail + p) > 0.05)
			break;
		tail += p; /* P(Bin(n, 1/2) <= k) */
	}
	r.lo = v[k - 1];
	r.hi = v[n - k];
	return r;
}

enum bench_verdict { BENCH_MET, BENCH_NOT_MET, BENCH_INCONCLUSIVE };

/* The largest difference an A/A control's interval admits between identical set-ups. */
static inline double bench_noise_floor(struct bench_ci aa)
{
	return fmax(fabs(aa.lo), fabs(aa.hi));
}

/*
 * A cost target "cost <= bound" judged on the cost's 95% interval: met
 * when all of it is within the bound, not met when all of it is beyond,
 * inconclusive when the bound falls inside it. aa is the same comparison
 * between two identical set-ups in the same run (an A/A control): unless
 * its interval lies within +-bound, the run cannot resolve the bound and
 * gives no verdict either way.
 */
static inline enum bench_verdict bench_judge(struct bench_ci cost, struct bench_ci aa, double bound)
{
	if (bench_noise_floor(aa) > bound)
		return BENCH_INCONCLUSIVE;
	if (cost.hi <= bound)
		return BENCH_MET;
	if (cost.lo > bound)
		return BENCH_NOT_MET;
	return BENCH_INCONCLUSIVE;
}

/*
 * A ratio target "ratio <= bound" (e.g. a p50 within 1.5x of its baseline)
 * judged on the 95% interval of per-round ratios: met when the whole
 * interval is within the bound, not met when all of it is beyond,
 * inconclusive when the bound falls inside it. No A/A control: the
 * baseline is measured in the same rounds, and the interval carries the
 * run's noise.
 */
static inline enum bench_verdict bench_judge_ratio(struct bench_ci ratio, double bound)
{
	if (ratio.hi <= bound)
		return BENCH_MET;
	if (ratio.lo > bound)
		return BENCH_NOT_MET;
	return BENCH_INCONCLUSIVE;
}

/* ---- rows ------------------------------------------------------------------------ */

/*
 * JSON rows go to stdout with --json; otherwise, when $NPF_BENCH_JSON names
 * a file, they are appended to it while the table goes to stdout, so that
 * bench/run.sh gets both from one run.
 */
static struct npf_json bench_jw; /* the row being built, into bench_jrow */
static FILE *bench_jf;
static char *bench_jrow;
static size_t bench_jrow_len;

/* Write one complete JSON object line to the JSON sink (see above). */
static inline void bench_json_line(const char *line)
{
	const char *path = getenv("NPF_BENCH_JSON");
	FILE *f;

	if (bench_json) {
		fputs(line, stdout);
		return;
	}
	if (!path || !*path)
		return;
	f = fopen(path, "a");
	if (!f)
		return;
	fputs(line, f);
	fclose(f);
}

static inline void bench_row_begin(const char *bench)
{
	bench_first_col = 1;
	bench_jf = open_memstream(&bench_jrow, &bench_jrow_len);
	if (!bench_jf)
		bench_die("cannot build a JSON row: %s", strerror(errno));
	npf_json_init(&bench_jw, bench_jf, false);
	npf_json_open_object(&bench_jw);
	npf_json_key(&bench_jw, "bench");
	npf_json_string(&bench_jw, bench);
}

/* A JSON member "key": the value follows from one npf_json_*() call. */
static inline struct npf_json *bench_jkey(const char *key)
{
	npf_json_key(&bench_jw, key);
	return &bench_jw;
}

static inline void bench_row_end(void)
{
	npf_json_close_object(&bench_jw); /* "}\n": the row is one line */
	if (fclose(bench_jf))
		bench_die("cannot build a JSON row: %s", strerror(errno));
	bench_json_line(bench_jrow);
	free(bench_jrow);
	bench_jrow = NULL;
	if (!bench_json)
		putchar('\n');
}

static inline void bench_sep(void)
{
	if (!bench_json && !bench_first_col)
		putchar(' ');
	bench_first_col = 0;
}

/* Text columns: left-aligned strings, right-aligned numbers, width w. */
static inline void bench_col_str(const char *key, int w, const char *val)
{
	bench_sep();
	npf_json_string(bench_jkey(key), val);
	if (!bench_json)
		printf("%-*s", w, val);
}

static inline void bench_col_u64(const char *key, int w, uint64_t val)
{
	bench_sep();
	npf_json_u64(bench_jkey(key), val);
	if (!bench_json)
		printf("%*llu", w, (unsigned long long)val);
}

/* prec digits after the point in the table; JSON keeps one more. */
static inline void bench_col_f(const char *key, int w, int prec, double val)
{
	bench_sep();
	npf_json_double(bench_jkey(key), prec + 1, val);
	if (!bench_json)
		printf("%*.*f", w, prec, val);
}

/* A boolean verdict: "yes"/"NO" in the table, true/false in JSON. */
static inline void bench_col_bool(const char *key, int w, int val)
{
	bench_sep();
	npf_json_bool(bench_jkey(key), val);
	if (!bench_json)
		printf("%*s", w, val ? "yes" : "NO");
}

/* "est [lo, hi]" in the table; "key", "key_lo", "key_hi" in JSON. */
static inline void bench_col_ci(const char *key, int w, int prec, struct bench_ci ci)
{
	char text[96], k[128];

	bench_sep();
	npf_json_double(bench_jkey(key), prec + 1, ci.est);
	snprintf(k, sizeof(k), "%s_lo", key);
	npf_json_double(bench_jkey(k), prec + 1, ci.lo);
	snprintf(k, sizeof(k), "%s_hi", key);
	npf_json_double(bench_jkey(k), prec + 1, ci.hi);
	if (bench_json)
		return;
	snprintf(text, sizeof(text), "%+.*f [%+.*f, %+.*f]", prec, ci.est, prec, ci.lo, prec,
		 ci.hi);
	printf("%*s", w, text);
}

static inline void bench_col_verdict(const char *key, int w, enum bench_verdict v)
{
	static const char *const text[] = {"met", "NOT met", "inconclusive"};
	static const char *const json[] = {"met", "not_met", "inconclusive"};

	bench_sep();
	npf_json_string(bench_jkey(key), json[v]);
	if (!bench_json)
		printf("%-*s", w, text[v]);
}

/* Preformatted: text in the table, json (a JSON value: number, null, "string") in JSON. */
static inline void bench_col_raw(const char *key, const char *text, const char *json)
{
	bench_sep();
	npf_json_raw(bench_jkey(key), json);
	if (!bench_json)
		fputs(text, stdout);
}

/* Text-only header line (nothing in JSON mode). */
static inline void __attribute__((format(printf, 1, 2))) bench_text(const char *fmt, ...)
{
	va_list ap;

	if (bench_json)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
}

#endif /* NPF_BENCH_H */
