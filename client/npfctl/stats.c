// SPDX-License-Identifier: GPL-2.0
/* npfctl stats: per-region counters and fault latency. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "npf.h"
#include "npf_print.h"
#include "npfctl.h"

static __u64 hist_samples(const struct npf_latency_hist *h)
{
	__u64 total = 0;
	int i;

	for (i = 0; i < NPF_LAT_BUCKETS; i++)
		total += h->slot[i];
	return total;
}

/* Pad a label that may hold multi-byte UTF-8 (µ) to width columns. */
static const char *pad_columns(char *buf, size_t len, const char *s, size_t width)
{
	size_t cols = 0, n = 0;
	const char *p;

	for (p = s; *p && n + 1 < len; p++) {
		if (((unsigned char)*p & 0xc0) != 0x80)
			cols++;
		buf[n++] = *p;
	}
	while (cols++ < width && n + 1 < len)
		buf[n++] = ' ';
	buf[n] = '\0';
	return buf;
}

static void print_histogram(const struct npf_latency_hist *h)
{
	__u64 max = 0;
	int i;

	for (i = 0; i < NPF_LAT_BUCKETS; i++)
		if (h->slot[i] > max)
			max = h->slot[i];
	open_json_array("histogram");
	for (i = 0; i < NPF_LAT_BUCKETS; i++) {
		__u64 lo = 1ULL << i, hi = 1ULL << (i + 1), cnt = h->slot[i];
		char a[32], b[32], label[80], padded[96], bar[41];
		int width;

		if (!cnt)
			continue;
		width = (int)((cnt * 40 + max - 1) / max);
		memset(bar, '#', (size_t)width);
		bar[width] = '\0';
		snprintf(label, sizeof(label), "[%s, %s)", fmt_ns(a, sizeof(a), lo),
			 fmt_ns(b, sizeof(b), hi));

		open_json_object(NULL);
		print_u64("lo_ns", NULL, lo);
		print_u64("hi_ns", NULL, hi);
		print_string(NULL, "    %s", pad_columns(padded, sizeof(padded), label, 18));
		print_u64("count", " %10llu", cnt);
		print_string(NULL, " %s\n", bar);
		close_json_object();
	}
	close_json_array();
}

/* The region's budget and what eviction did (none: an npfd that predates budgets). */
static void print_budget(const struct npf_budget_info *bi)
{
	struct npf_budget_info none = {0};

	if (!bi)
		bi = &none;
	open_json_object("budget");
	print_u64("budget_pages", "  budget   %llu pages", bi->budget_pages);
	print_u64("high_pages", " (high %llu", bi->high_pages);
	print_u64("low_pages", ", low %llu)", bi->low_pages);
	print_u64("resident_pages", "  resident %llu\n", bi->resident_pages);
	print_u64("evicted_pages", "  evicted  %llu", bi->evicted_pages);
	print_u64("dropped_clean", "  clean %llu", bi->dropped_clean);
	print_u64("written_pages", "  written back %llu", bi->written_pages);
	print_u64("write_batches", " in %llu io_uring submissions", bi->write_batches);
	print_u64("refaults", "  read back %llu", bi->refaults);
	print_u64("stored_pages", "  in swap store %llu", bi->stored_pages);
	print_u64("aborted", "  kept %llu\n", bi->aborted);
	close_json_object();
}

static void print_region_stats(const struct npf_region_stats_full *sf, const char *name,
			       const struct npf_budget_info *bi)
{
	const struct npf_region_stats *s = &sf->stats;
	__u64 samples = hist_samples(&sf->latency);

	open_json_object(NULL);
	print_u64("id", "region %llu", s->region_id);
	print_u64("pid", "  pid %llu", s->tgid);
	print_string("name", "  %s", is_json_context() || *name ? name : "-");
	print_u64("start", "  0x%llx", s->start);
	print_size("length", "+%s\n", s->length);
	print_u64("cpu_faults", "  faults   cpu %llu", s->cpu_faults);
	print_u64("device_faults", "  device %llu", s->device_faults);
	print_u64("uffd_faults", "  uffd %llu\n", s->uffd_faults);
	print_u64("pages_zeroed", "  pages    zeroed %llu", s->pages_zeroed);
	print_u64("pages_copied", "  copied %llu", s->pages_copied);
	print_size("bytes_read", "  bytes read %s\n", s->bytes_read);
	print_u64("batches", "  batches  %llu", s->batches);
	print_u64("mm_events", "  mm events %llu\n", s->mm_events);
	print_budget(bi);

	open_json_object("latency");
	print_u64("samples", "  latency  %llu samples", samples);
	print_u64("sum_ns", NULL, s->latency_sum_ns);
	if (samples) {
		print_ns("mean_ns", "  mean %s", s->latency_sum_ns / samples);
		print_ns("p50_ns", "  p50 <%s", npf_latency_percentile(&sf->latency, 50));
		print_ns("p99_ns", "  p99 <%s\n", npf_latency_percentile(&sf->latency, 99));
	} else {
		print_u64("mean_ns", NULL, 0);
		print_u64("p50_ns", NULL, 0);
		print_u64("p99_ns", NULL, 0);
		print_nl();
	}
	print_histogram(&sf->latency);
	close_json_object();
	close_json_object();
}

static int parse_region_id(const char *s, __u32 *id)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || *s == '+' || v == 0 || v > UINT_MAX)
		return -EINVAL;
	*id = (__u32)v;
	return 0;
}

static int do_stats_show(int argc, char **argv)
{
	struct npf_region_stats_full *sf;
	struct npf_region_info *ri = NULL;
	struct npf_budget_info *bi = NULL;
	char name[NPF_NAME_LEN + 1], what[48];
	size_t n, nri = 0, nbi = 0, i, k;
	__u32 id = 0;
	int err;

	if (argc > 0) {
		if (strcmp(argv[0], "region"))
			return usage_error(
				"stats show: unexpected argument '%s' (want 'region ID')", argv[0]);
		if (argc < 2)
			return usage_error("stats show region: missing region ID");
		if (parse_region_id(argv[1], &id))
			return usage_error("stats show region: '%s' is not a region id (1..%u)",
					   argv[1], UINT_MAX);
		err = no_more_args("stats show region ID", argc - 2, argv + 2);
		if (err)
			return err;
	}
	err = open_client();
	if (err)
		return err;
	err = npf_client__stats(client, id, &sf, &n);
	if (err) {
		if (id)
			snprintf(what, sizeof(what), "stats of region %u", id);
		else
			snprintf(what, sizeof(what), "stats");
		return request_failed(what, err);
	}
	/* Names live in the region list; stats are still worth showing without them. */
	if (npf_client__region_list(client, &ri, &nri))
		nri = 0;
	/* Budgets too, from an npfd that has them. */
	if (npf_client__budget_list(client, 0, &bi, &nbi))
		nbi = 0;

	if (prometheus_output) {
		struct npf_status st;

		err = npf_client__status(client, &st);
		if (err) {
			free(ri);
			free(sf);
			return request_failed("status", err);
		}
		print_prometheus(&st, sf, n, ri, nri, bi, nbi);
		free(bi);
		free(ri);
		free(sf);
		return EXIT_OK;
	}
	if (!n)
		print_string(NULL, "%s\n", "no regions registered");
	open_json_array(NULL);
	for (i = 0; i < n; i++) {
		const struct npf_budget_info *b = NULL;

		name[0] = '\0';
		for (k = 0; k < nri; k++)
			if (ri[k].region_id == sf[i].stats.region_id)
				region_name(name, ri[k].name);
		for (k = 0; k < nbi; k++)
			if (bi[k].region_id == sf[i].stats.region_id)
				b = &bi[k];
		if (i)
			print_nl();
		print_region_stats(&sf[i], name, b);
	}
	close_json_array();
	free(bi);
	free(ri);
	free(sf);
	return EXIT_OK;
}

int do_stats(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{"show", do_stats_show},
		{"help", do_help},
		{},
	};

	return cmd_select(cmds, "stats", argc, argv);
}
