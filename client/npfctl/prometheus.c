// SPDX-License-Identifier: GPL-2.0
/*
 * npfctl stats --format prometheus: the Prometheus text exposition format
 * (version 0.0.4), the numbers `npfctl -j stats` shows.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "npf.h"
#include "npf_print.h"
#include "npfctl.h"

/*
 * The Prometheus text exposition format (version 0.0.4): one HELP and TYPE
 * line per metric family, then its samples. Counters end in _total; the
 * latency histogram is in seconds, the base unit, with cumulative buckets
 * at the log2(ns) bucket bounds.
 */
static void prom_label_value(const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			printf("\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", stdout);
		else
			putchar(*s);
	}
}

static void prom_family(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

struct prom_region {
	__u32 id, pid;
	const char *name;
};

static void prom_labels(const struct prom_region *r, const char *extra)
{
	printf("{region=\"%u\",pid=\"%u\",name=\"", r->id, r->pid);
	prom_label_value(r->name);
	printf("\"%s}", extra ? extra : "");
}

static const struct {
	const char *metric, *help;
	size_t off;
} prom_region_counters[] = {
#define C(f, h)                                                                                    \
	{                                                                                          \
		"npf_region_" #f "_total", h, offsetof(struct npf_region_stats, f)                 \
	}
	C(cpu_faults,
	  "CPU page faults in the region seen by the BPF collector (attached with npfd --trace-cpu-faults only)."),
	C(device_faults, "Device page requests for the region."),
	C(uffd_faults, "userfaultfd fault messages npfd resolved for the region."),
	C(pages_zeroed, "Pages npfd installed zero-filled."),
	C(pages_copied, "Pages npfd installed from the backing file."),
	C(bytes_read, "Bytes npfd read from the backing file."),
	C(batches, "Resolver batches that touched the region."),
	C(mm_events, "userfaultfd REMOVE, UNMAP, REMAP and FORK events on the region."),
#undef C
};

static const struct {
	const char *metric, *type, *help;
	size_t off;
} prom_budget[] = {
#define B(m, t, f, h)                                                                              \
	{                                                                                          \
		"npf_region_" m, t, h, offsetof(struct npf_budget_info, f)                         \
	}
	B("budget_pages", "gauge", budget_pages,
	  "The region's budget in pages (0: none of its own)."),
	B("resident_pages", "gauge", resident_pages,
	  "Pages of the region there: npfd installed them, or they were there at the registration."),
	B("stored_pages", "gauge", stored_pages, "Pages of the region in npfd's swap store."),
	B("evicted_pages_total", "counter", evicted_pages, "Pages eviction took away."),
	B("evicted_clean_total", "counter", dropped_clean,
	  "Evicted pages that were clean: nothing written."),
	B("written_back_pages_total", "counter", written_pages,
	  "Evicted pages written back (file or swap store)."),
	B("write_batches_total", "counter", write_batches,
	  "io_uring submissions that carried the written-back pages."),
	B("evict_refaults_total", "counter", refaults, "Pages read back from the swap store."),
	B("evict_kept_total", "counter", aborted,
	  "Victims kept (an acknowledgement, a write or the zap failed)."),
#undef B
};

void print_prometheus(const struct npf_status *st, const struct npf_region_stats_full *sf, size_t n,
		      const struct npf_region_info *ri, size_t nri,
		      const struct npf_budget_info *bi, size_t nbi)
{
	struct prom_region *r = calloc(n ? n : 1, sizeof(*r));
	char(*names)[NPF_NAME_LEN + 1] = calloc(n ? n : 1, sizeof(*names));
	size_t i, k, c;
	int b;

	if (!r || !names) {
		free(r);
		free(names);
		p_err("cannot format the metrics: %s", strerror(ENOMEM));
		return;
	}
	for (i = 0; i < n; i++) {
		r[i].id = sf[i].stats.region_id;
		r[i].pid = sf[i].stats.tgid;
		for (k = 0; k < nri; k++)
			if (ri[k].region_id == r[i].id)
				region_name(names[i], ri[k].name);
		r[i].name = names[i];
	}

	prom_family("npf_up", "gauge", "1: npfd answered.");
	printf("npf_up{pid=\"%u\",protocol_version=\"%u\"} 1\n", st->npfd_pid, st->proto_version);
	prom_family("npf_uptime_seconds", "gauge", "Seconds since npfd started.");
	printf("npf_uptime_seconds %.3f\n", (double)st->uptime_ns / 1e9);
	prom_family("npf_clients", "gauge", "Connected clients.");
	printf("npf_clients %u\n", st->clients);
	prom_family("npf_regions", "gauge", "Registered regions.");
	printf("npf_regions %u\n", st->regions);
	prom_family("npf_faults_resolved_total", "counter", "Faults npfd resolved, all regions.");
	printf("npf_faults_resolved_total %llu\n", (unsigned long long)st->faults_resolved);
	prom_family("npf_batches_total", "counter", "Resolver batches, all regions.");
	printf("npf_batches_total %llu\n", (unsigned long long)st->batches);
	prom_family("npf_iommu_faults_total", "counter", "iommu:io_page_fault events, any device.");
	printf("npf_iommu_faults_total %llu\n", (unsigned long long)st->iommu_faults);
	prom_family("npf_records_dropped_total", "counter",
		    "Fault records lost because the BPF ring buffer was full.");
	printf("npf_records_dropped_total %llu\n", (unsigned long long)st->records_dropped);
	prom_family("npf_bad_messages_total", "counter", "Requests npfd refused as malformed.");
	printf("npf_bad_messages_total %llu\n", (unsigned long long)st->bad_messages);

	prom_family("npf_region_length_bytes", "gauge", "Length of the region.");
	for (i = 0; i < n; i++) {
		printf("npf_region_length_bytes");
		prom_labels(&r[i], NULL);
		printf(" %llu\n", (unsigned long long)sf[i].stats.length);
	}
	for (c = 0; c < sizeof(prom_region_counters) / sizeof(prom_region_counters[0]); c++) {
		prom_family(prom_region_counters[c].metric, "counter",
			    prom_region_counters[c].help);
		for (i = 0; i < n; i++) {
			const char *base = (const char *)&sf[i].stats;

			printf("%s", prom_region_counters[c].metric);
			prom_labels(&r[i], NULL);
			printf(" %llu\n",
			       (unsigned long long)*(const __u64 *)(base +
								    prom_region_counters[c].off));
		}
	}

	prom_family("npf_region_fault_latency_seconds", "histogram",
		    "Fault service time, fault raised to page installed.");
	for (i = 0; i < n; i++) {
		__u64 cum = 0;
		char le[48];

		for (b = 0; b < NPF_LAT_BUCKETS; b++) {
			cum += sf[i].latency.slot[b];
			snprintf(le, sizeof(le), ",le=\"%.9g\"", (double)(1ULL << (b + 1)) / 1e9);
			printf("npf_region_fault_latency_seconds_bucket");
			prom_labels(&r[i], le);
			printf(" %llu\n", (unsigned long long)cum);
		}
		printf("npf_region_fault_latency_seconds_bucket");
		prom_labels(&r[i], ",le=\"+Inf\"");
		printf(" %llu\n", (unsigned long long)cum);
		printf("npf_region_fault_latency_seconds_sum");
		prom_labels(&r[i], NULL);
		printf(" %.9f\n", (double)sf[i].stats.latency_sum_ns / 1e9);
		printf("npf_region_fault_latency_seconds_count");
		prom_labels(&r[i], NULL);
		printf(" %llu\n", (unsigned long long)cum);
	}
	for (c = 0; c < sizeof(prom_budget) / sizeof(prom_budget[0]); c++) {
		prom_family(prom_budget[c].metric, prom_budget[c].type, prom_budget[c].help);
		for (i = 0; i < n; i++)
			for (k = 0; k < nbi; k++) {
				if (bi[k].region_id != r[i].id)
					continue;
				printf("%s", prom_budget[c].metric);
				prom_labels(&r[i], NULL);
				printf(" %llu\n",
				       (unsigned long long)*(const __u64 *)((const char *)&bi[k] +
									    prom_budget[c].off));
			}
	}
	free(names);
	free(r);
}
