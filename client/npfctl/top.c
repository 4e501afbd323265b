// SPDX-License-Identifier: GPL-2.0
/* npfctl top: a live view of fault rates and latencies per region. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include "npf.h"
#include "npf_print.h"
#include "npfctl.h"

struct top_sample {
	struct npf_status st;
	struct npf_region_stats_full *sf;
	size_t n;
	struct npf_region_info *ri;
	size_t nri;
	double t; /* CLOCK_MONOTONIC seconds */
};

static volatile sig_atomic_t top_stop;

static void top_signal(int sig)
{
	top_stop = 1;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void top_sample_free(struct top_sample *s)
{
	free(s->sf);
	free(s->ri);
	memset(s, 0, sizeof(*s));
}

static int top_sample_take(struct top_sample *s)
{
	int err;

	memset(s, 0, sizeof(*s));
	err = npf_client__status(client, &s->st);
	if (err)
		return request_failed("status", err);
	err = npf_client__stats(client, 0, &s->sf, &s->n);
	if (err)
		return request_failed("stats", err);
	if (npf_client__region_list(client, &s->ri, &s->nri))
		s->nri = 0;
	s->t = mono_s();
	return 0;
}

static const struct npf_region_stats_full *top_find(const struct top_sample *s, __u32 id)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (s->sf[i].stats.region_id == id)
			return &s->sf[i];
	return NULL;
}

/* A per-second rate in text ("12.3k/s" style); the raw rate in JSON. */
static void print_rate(const char *key, const char *fmt, double per_s)
{
	char buf[32];

	if (is_json_context()) {
		print_u64(key, NULL, (__u64)(per_s + 0.5));
		return;
	}
	if (per_s >= 1e6)
		snprintf(buf, sizeof(buf), "%.1fM", per_s / 1e6);
	else if (per_s >= 1e4)
		snprintf(buf, sizeof(buf), "%.1fk", per_s / 1e3);
	else
		snprintf(buf, sizeof(buf), "%.0f", per_s);
	print_string(NULL, fmt, buf);
}

/* One frame: rates and latencies over the interval between two samples. */
static void top_frame(const struct top_sample *a, const struct top_sample *b)
{
	double dt = b->t - a->t > 0 ? b->t - a->t : 1;
	char name[NPF_NAME_LEN + 1], buf[64];
	size_t i, k;

	open_json_object(NULL);
	print_u64("npfd_pid", "npfd %llu", b->st.npfd_pid);
	print_u64("uptime_ns", NULL, b->st.uptime_ns);
	print_string(NULL, "  up %s", fmt_uptime(buf, sizeof(buf), b->st.uptime_ns));
	print_u64("clients", "  clients %llu", b->st.clients);
	print_u64("regions", "  regions %llu", b->st.regions);
	print_rate("faults_per_s", "  resolved %s/s",
		   (double)(b->st.faults_resolved - a->st.faults_resolved) / dt);
	print_u64("iommu_faults", "  iommu faults %llu", b->st.iommu_faults);
	print_u64("records_dropped", "  dropped %llu\n\n", b->st.records_dropped);
	print_string(
		NULL, "%s\n",
		"ID     PID      NAME             CPU/s    UFFD/s   PAGES/s  READ/s   MEAN     P50      P99");
	open_json_array("per_region");
	for (i = 0; i < b->n; i++) {
		const struct npf_region_stats *s = &b->sf[i].stats;
		const struct npf_region_stats_full *prev = top_find(a, s->region_id);
		struct npf_region_stats z = {0};
		struct npf_latency_hist d = {{0}};
		const struct npf_region_stats *p = prev ? &prev->stats : &z;
		__u64 samples = 0;
		int j;

		for (j = 0; j < NPF_LAT_BUCKETS; j++) {
			d.slot[j] = b->sf[i].latency.slot[j] - (prev ? prev->latency.slot[j] : 0);
			samples += d.slot[j];
		}
		name[0] = '\0';
		for (k = 0; k < b->nri; k++)
			if (b->ri[k].region_id == s->region_id)
				region_name(name, b->ri[k].name);

		open_json_object(NULL);
		print_u64("id", "%-6llu ", s->region_id);
		print_u64("pid", "%-8llu ", s->tgid);
		print_string("name", "%-16.16s ", is_json_context() || *name ? name : "-");
		print_rate("cpu_faults_per_s", "%-8s ",
			   (double)(s->cpu_faults - p->cpu_faults) / dt);
		print_rate("uffd_faults_per_s", "%-8s ",
			   (double)(s->uffd_faults - p->uffd_faults) / dt);
		print_rate("pages_per_s", "%-8s ",
			   (double)(s->pages_zeroed + s->pages_copied - p->pages_zeroed -
				    p->pages_copied) /
				   dt);
		print_rate("bytes_read_per_s", "%-8s ",
			   (double)(s->bytes_read - p->bytes_read) / dt);
		print_u64("latency_samples", NULL, samples);
		if (samples) {
			print_ns("mean_ns", "%-8s ",
				 (s->latency_sum_ns - p->latency_sum_ns) / samples);
			print_ns("p50_ns", "<%-7s ", npf_latency_percentile(&d, 50));
			print_ns("p99_ns", "<%s", npf_latency_percentile(&d, 99));
		} else {
			print_string(NULL, "%s", "-        -        -");
		}
		print_nl();
		close_json_object();
	}
	close_json_array();
	if (!b->n)
		print_string(NULL, "%s\n", "no regions registered");
	close_json_object();
}

int do_top(int argc, char **argv)
{
	struct top_sample a, b;
	struct termios saved, raw;
	bool live, tty_in;
	struct sigaction sa = {.sa_handler = top_signal};
	int err;

	err = no_more_args("top", argc, argv);
	if (err)
		return err;
	live = !top_once && !is_json_context() && isatty(STDOUT_FILENO);
	err = open_client();
	if (err)
		return err;
	err = top_sample_take(&a);
	if (err)
		return err;

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	tty_in = live && isatty(STDIN_FILENO) && !tcgetattr(STDIN_FILENO, &saved);
	if (tty_in) {
		raw = saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	}
	do {
		struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
		char ch;

		/* Wait out the interval; in a live view, 'q' ends it early. */
		if (poll(&pfd, tty_in ? 1 : 0, 1000) > 0 && read(STDIN_FILENO, &ch, 1) == 1 &&
		    (ch == 'q' || ch == 'Q'))
			break;
		if (top_stop)
			break;
		err = top_sample_take(&b);
		if (err)
			break;
		if (live)
			fputs("\033[H\033[2J", stdout);
		top_frame(&a, &b);
		if (live)
			print_string(NULL, "%s", "\n(q to quit)\n");
		fflush(stdout);
		top_sample_free(&a);
		a = b;
	} while (live && !top_stop);
	if (tty_in)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	top_sample_free(&a);
	return err ? EXIT_FAIL : EXIT_OK;
}
