// SPDX-License-Identifier: GPL-2.0
/*
 * The benchmarks' statistics (bench/bench.h): percentiles of sorted
 * samples (nearest rank, rounded), the summary (min, p50, p95, p99, max,
 * mean of unsorted samples), medians, the median's distribution-free 95%
 * interval (order statistics k and n+1-k), and the verdict against a
 * target with its A/A noise floor.
 */
#include "unit.h"
#include "bench.h"

int main(void)
{
	uint64_t v[100], one = 7;
	struct bench_samples s = {0};
	struct bench_summary sum;
	double d[20], e[6];
	struct bench_ci ci, aa = {0, -0.01, 0.01};
	size_t i;

	for (i = 0; i < 100; i++)
		v[i] = i + 1; /* 1..100 */
	UT_EQ(bench_pct(v, 100, 0), 1, "p0 is the minimum");
	UT_EQ(bench_pct(v, 100, 50), 51, "p50 of 1..100 (rank 49.5 rounds up)");
	UT_EQ(bench_pct(v, 100, 95), 95, "p95 of 1..100");
	UT_EQ(bench_pct(v, 100, 99), 99, "p99 of 1..100");
	UT_EQ(bench_pct(v, 100, 100), 100, "p100 is the maximum");
	UT_EQ(bench_pct(v, 0, 50), 0, "no samples: 0");
	UT_EQ(bench_pct(&one, 1, 99), 7, "one sample is every percentile");
	UT_EQ(bench_pct(v, 11, 50), 6, "p50 of 1..11 is the middle");

	/* unsorted input, a long tail: summarize sorts */
	for (i = 0; i < 1000; i++)
		bench_add(&s, (i * 7919) % 1000 + 1); /* 1..1000, shuffled */
	bench_add(&s, 1000000);
	sum = bench_summarize(&s);
	UT_EQ(sum.n, 1001, "samples counted");
	UT_EQ(sum.min, 1, "min");
	UT_EQ(sum.max, 1000000, "max is the tail");
	UT_EQ(sum.p50, 501, "p50");
	UT_EQ(sum.p95, 951, "p95");
	UT_EQ(sum.p99, 991, "p99");
	UT_CHECK(fabs(sum.mean - (500500.0 + 1e6) / 1001) < 1e-6, "mean: got %f", sum.mean);
	bench_free(&s);
	UT_EQ(bench_summarize(&s).n, 0, "an empty set summarises to nothing");

	/* medians */
	for (i = 0; i < 20; i++)
		d[i] = (double)((i * 13) % 20); /* 0..19 shuffled */
	ci = bench_median_ci(d, 20);
	UT_CHECK(ci.est == 9.5, "median of 0..19 (even n: the mean of the middle two): got %f",
		 ci.est);
	UT_CHECK(ci.lo == 5 && ci.hi == 14,
		 "95%% interval of the median of 20 values: the 6th and 15th smallest (5, 14), got "
		 "%g, %g",
		 ci.lo, ci.hi);
	for (i = 0; i < 6; i++)
		e[i] = 10.0 - (double)i; /* 10..5 */
	ci = bench_median_ci(e, 6);
	UT_CHECK(ci.est == 7.5 && ci.lo == 5 && ci.hi == 10,
		 "6 values: the interval is their range (97%%): got %g [%g, %g]", ci.est, ci.lo,
		 ci.hi);
	e[0] = 3, e[1] = 1, e[2] = 2;
	UT_CHECK(bench_median(e, 3) == 2, "median of 3 values");

	/* verdicts: cost <= 0.05 */
	UT_EQ(bench_judge((struct bench_ci){0.02, 0.01, 0.04}, aa, 0.05), BENCH_MET,
	      "interval within the bound: met");
	UT_EQ(bench_judge((struct bench_ci){0.08, 0.06, 0.1}, aa, 0.05), BENCH_NOT_MET,
	      "interval beyond the bound: not met");
	UT_EQ(bench_judge((struct bench_ci){0.05, 0.03, 0.07}, aa, 0.05), BENCH_INCONCLUSIVE,
	      "the bound inside the interval: inconclusive");
	UT_EQ(bench_judge((struct bench_ci){0.02, 0.01, 0.04}, (struct bench_ci){0, -0.08, 0.02},
			  0.05),
	      BENCH_INCONCLUSIVE, "an A/A control noisier than the bound: inconclusive");
	UT_CHECK(bench_noise_floor((struct bench_ci){0, -0.08, 0.02}) == 0.08,
		 "the noise floor is the A/A interval's larger end");
	return ut_done("latency percentiles, medians, intervals and verdicts");
}
