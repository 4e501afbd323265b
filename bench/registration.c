// SPDX-License-Identifier: GPL-2.0
/*
 * Registration cost (seed 001 Table 2): make 1, 4 and 16 GiB usable by the
 * NIC, and the memory resident afterwards (VmRSS of this process).
 *
 *   npf           npf_client__register + nic_reg_mr + attach the IO page
 *                 table to npfd: nothing is touched
 *   mlock         mlock() of the range (populates and pins it), then
 *                 nic_reg_mr with every entry set (a pinning driver)
 *   map-populate  mmap(MAP_POPULATE) then the same nic_reg_mr
 *
 * mlock and MAP_POPULATE make the whole size resident: a size is run only
 * when it leaves 4 GiB of MemAvailable; otherwise the row says skipped.
 *
 * Usage: npf-bench-registration [--json] [--sizes GiB,GiB,...]
 */
#include <getopt.h>
#include "bench_nic.h"

static uint64_t meminfo_kib(const char *key)
{
	char line[256];
	unsigned long long v = 0;
	FILE *f = fopen("/proc/meminfo", "r");
	size_t kl = strlen(key);

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':')
			sscanf(line + kl + 1, "%llu", &v);
	if (f)
		fclose(f);
	return v;
}

static uint64_t rss_kib(void)
{
	char line[256];
	unsigned long long v = 0;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			sscanf(line + 6, "%llu", &v);
	if (f)
		fclose(f);
	return v;
}

static void row(size_t gib, const char *method, double secs, uint64_t rss0, const char *skip)
{
	uint64_t rss = rss_kib();

	bench_row_begin("registration");
	bench_col_u64("gib", 4, gib);
	bench_col_str("method", 13, method);
	if (skip) {
		bench_col_raw("seconds", "         -", "null");
		bench_col_raw("resident_mib", "          -", "null");
		bench_col_str("note", 0, skip);
	} else {
		bench_col_f("seconds", 10, 3, secs);
		bench_col_u64("resident_mib", 11, (rss > rss0 ? rss - rss0 : 0) / 1024);
		bench_col_str("note", 0, "");
	}
	bench_row_end();
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
						 {"sizes", required_argument, NULL, 's'},
						 {"help", no_argument, NULL, 'h'},
						 {}};
	size_t sizes[8] = {1, 4, 16}, nsizes = 3, i;
	struct npf_client *c;
	struct bn_ep ep = {0};
	char *list, *tok;
	int opt;

	bench_prog = "npf-bench-registration";
	while ((opt = getopt_long(argc, argv, "js:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			bench_json = 1;
			break;
		case 's':
			nsizes = 0;
			list = strdup(optarg);
			for (tok = strtok(list, ","); tok && nsizes < 8; tok = strtok(NULL, ","))
				sizes[nsizes++] = strtoul(tok, NULL, 0);
			free(list);
			break;
		case 'h':
			printf("Usage: %s [--json] [--sizes GiB,GiB,...]\n"
			       "Time and resident memory to register 1/4/16 GiB with npf vs mlock vs\n"
			       "MAP_POPULATE (skipped when it would leave < 4 GiB available). Needs npfd.\n",
			       argv[0]);
			return 0;
		default:
			return 2;
		}
	}
	c = bn_connect();
	bn_ep_open(&ep, 0, 0);
	bench_text("%4s %-13s %10s %11s %s\n", "GiB", "method", "seconds", "resident MiB", "note");
	for (i = 0; i < nsizes; i++) {
		size_t len = sizes[i] << 30;
		uint64_t avail = meminfo_kib("MemAvailable") << 10;
		char skip[128];
		int fits = len + (4ULL << 30) <= avail;
		uint64_t rss0, t0;
		struct bn_mem m;
		int k;

		snprintf(skip, sizeof(skip),
			 "skipped: needs %zu GiB resident, MemAvailable %.1f GiB, keeps 4 GiB free",
			 sizes[i], (double)avail / (1 << 30));
		rss0 = rss_kib();
		t0 = bench_now_ns();
		bn_mem_npf(&m, c, &ep, len, -1, "registration");
		row(sizes[i], "npf", (double)(bench_now_ns() - t0) / 1e9, rss0, NULL);
		bn_mem_free(&m);

		for (k = 0; k < 2; k++) {
			const char *name = k ? "map-populate" : "mlock";
			struct nic_mr *mr;
			char *buf;

			if (!fits) {
				row(sizes[i], name, 0, 0, skip);
				continue;
			}
			rss0 = rss_kib();
			t0 = bench_now_ns();
			buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | (k ? MAP_POPULATE : 0), -1, 0);
			if (buf == MAP_FAILED)
				bench_die("mmap %zu GiB: %s", sizes[i], strerror(errno));
			if (!k && mlock(buf, len))
				bench_die("mlock %zu GiB: %s", sizes[i], strerror(errno));
			mr = nic_reg_mr(ep.pd, buf, len, BN_ACCESS_ALL);
			if (!mr)
				bench_die("nic_reg_mr: %s", strerror(errno));
			bn_iopt_fill(mr);
			row(sizes[i], name, (double)(bench_now_ns() - t0) / 1e9, rss0, NULL);
			nic_dereg_mr(mr);
			munmap(buf, len);
		}
	}
	bench_text(
		"paper (seed 001 Table 2): create MR 50 us + 400 ms/GB pinned, 135 us + 20 ms/GB NP-RDMA\n");
	nic_close(ep.nic);
	npf_client__close(c);
	return 0;
}
