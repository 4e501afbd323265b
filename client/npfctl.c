// SPDX-License-Identifier: GPL-2.0
/*
 * npfctl: look at what npfd is doing.
 *
 *   npfctl [OPTIONS] OBJECT COMMAND [ARGS]
 *
 * Text and JSON output come from the same print_*() calls (the iproute2
 * idiom): each call names a JSON key and a text format, and prints
 * whichever the output mode wants, so the two cannot drift apart.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include "npf_features.h"
#include "npf.h"

#define NPFCTL_VERSION "0.1"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

static bool json_output;
static bool pretty_output;
static bool prometheus_output;
static bool top_once;
static const char *socket_path;
static struct npf_client *client;

/* ------------------------------------------------------------------ */
/* JSON writer                                                         */
/* ------------------------------------------------------------------ */

#define JSON_MAX_DEPTH 16

static struct {
	int depth;
	bool first[JSON_MAX_DEPTH]; /* no member written yet at this depth */
	bool after_key;		    /* a key was written: the value follows directly */
} jw;

/* s as a JSON string; invalid UTF-8 becomes U+FFFD so the document stays valid. */
static void json_escape(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	while (*p) {
		unsigned char ch = *p;
		int n = 0, i;

		if (ch == '"' || ch == '\\') {
			fprintf(f, "\\%c", ch);
		} else if (ch == '\n') {
			fputs("\\n", f);
		} else if (ch == '\t') {
			fputs("\\t", f);
		} else if (ch == '\r') {
			fputs("\\r", f);
		} else if (ch < 0x20 || ch == 0x7f) {
			fprintf(f, "\\u%04x", ch);
		} else if (ch < 0x80) {
			fputc(ch, f);
		} else {
			if ((ch & 0xe0) == 0xc0 && ch >= 0xc2)
				n = 1;
			else if ((ch & 0xf0) == 0xe0)
				n = 2;
			else if ((ch & 0xf8) == 0xf0 && ch <= 0xf4)
				n = 3;
			for (i = 1; i <= n; i++)
				if ((p[i] & 0xc0) != 0x80)
					break;
			if (!n || i <= n) {
				fputs("\\ufffd", f);
			} else {
				fwrite(p, 1, (size_t)n + 1, f);
				p += n;
			}
		}
		p++;
	}
	fputc('"', f);
}

static void jw_indent(void)
{
	int i;

	if (!pretty_output)
		return;
	fputc('\n', stdout);
	for (i = 0; i < jw.depth; i++)
		fputs("    ", stdout);
}

/* Separate a new member or element from the previous one. */
static void jw_begin_value(void)
{
	if (jw.after_key) {
		jw.after_key = false;
		return;
	}
	if (jw.depth) {
		if (!jw.first[jw.depth])
			fputc(',', stdout);
		jw.first[jw.depth] = false;
		jw_indent();
	}
}

static void jw_key(const char *key)
{
	jw_begin_value();
	json_escape(stdout, key);
	fputs(pretty_output ? ": " : ":", stdout);
	jw.after_key = true;
}

static void jw_u64(__u64 v)
{
	jw_begin_value();
	printf("%llu", (unsigned long long)v);
}

static void jw_string(const char *s)
{
	jw_begin_value();
	json_escape(stdout, s);
}

static void jw_open(char ch)
{
	jw_begin_value();
	fputc(ch, stdout);
	if (jw.depth + 1 < JSON_MAX_DEPTH)
		jw.depth++;
	jw.first[jw.depth] = true;
}

static void jw_close(char ch)
{
	bool empty = jw.first[jw.depth];

	if (jw.depth)
		jw.depth--;
	if (!empty)
		jw_indent();
	fputc(ch, stdout);
	if (!jw.depth)
		fputc('\n', stdout);
}

/* ------------------------------------------------------------------ */
/* Printing: one call per field, JSON member or text                   */
/* ------------------------------------------------------------------ */

/* key NULL: text only; fmt NULL: JSON only. */
static void open_json_object(const char *key)
{
	if (!json_output)
		return;
	if (key)
		jw_key(key);
	jw_open('{');
}

static void close_json_object(void)
{
	if (json_output)
		jw_close('}');
}

static void open_json_array(const char *key)
{
	if (!json_output)
		return;
	if (key)
		jw_key(key);
	jw_open('[');
}

static void close_json_array(void)
{
	if (json_output)
		jw_close(']');
}

static void print_u64(const char *key, const char *fmt, __u64 v)
{
	if (json_output) {
		if (key) {
			jw_key(key);
			jw_u64(v);
		}
	} else if (fmt) {
		printf(fmt, (unsigned long long)v);
	}
}

static void print_string(const char *key, const char *fmt, const char *s)
{
	if (json_output) {
		if (key) {
			jw_key(key);
			jw_string(s);
		}
	} else if (fmt) {
		printf(fmt, s);
	}
}

/* 1.0G: sizes in powers of 1024 */
static const char *fmt_size(char *buf, size_t len, __u64 v)
{
	static const char units[] = "KMGTPE";
	double d = (double)v;
	int u = -1;

	if (v < 1024) {
		snprintf(buf, len, "%llu", (unsigned long long)v);
		return buf;
	}
	while (d >= 1024 && u < 5) {
		d /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f%c", d, units[u]);
	return buf;
}

/* 4.1µs: two or three significant digits */
static const char *fmt_ns(char *buf, size_t len, __u64 ns)
{
	static const char *const units[] = {"ns", "µs", "ms", "s"};
	double d = (double)ns;
	int u = 0;

	while (u < 3 && d >= 999.5) {
		d /= 1000;
		u++;
	}
	if (!u)
		snprintf(buf, len, "%lluns", (unsigned long long)ns);
	else
		snprintf(buf, len, d < 9.95 ? "%.1f%s" : "%.0f%s", d, units[u]);
	return buf;
}

static const char *fmt_uptime(char *buf, size_t len, __u64 ns)
{
	unsigned long long s = ns / 1000000000ULL;

	if (s >= 86400)
		snprintf(buf, len, "%llud %lluh %llum %llus", s / 86400, s % 86400 / 3600,
			 s % 3600 / 60, s % 60);
	else if (s >= 3600)
		snprintf(buf, len, "%lluh %llum %llus", s / 3600, s % 3600 / 60, s % 60);
	else if (s >= 60)
		snprintf(buf, len, "%llum %llus", s / 60, s % 60);
	else
		snprintf(buf, len, "%llus", s);
	return buf;
}

/* Bytes: a number in JSON, 1.0G in text (fmt takes a %s). */
static void print_size(const char *key, const char *fmt, __u64 v)
{
	char buf[32];

	print_u64(key, NULL, v);
	print_string(NULL, fmt, fmt_size(buf, sizeof(buf), v));
}

/* Nanoseconds: a number in JSON, 4.1µs in text (fmt takes a %s). */
static void print_ns(const char *key, const char *fmt, __u64 v)
{
	char buf[32];

	print_u64(key, NULL, v);
	print_string(NULL, fmt, fmt_ns(buf, sizeof(buf), v));
}

static void print_nl(void)
{
	if (!json_output)
		putchar('\n');
}

/* A name a client chose: bounded, and harmless on a terminal in text mode. */
static const char *region_name(char *buf, const char name[NPF_NAME_LEN])
{
	size_t i, n = strnlen(name, NPF_NAME_LEN);

	memcpy(buf, name, n);
	buf[n] = '\0';
	if (!json_output)
		for (i = 0; i < n; i++)
			if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
				buf[i] = '?';
	return buf;
}

static const char *backing_name(__u32 backing)
{
	switch (backing) {
	case NPF_BACKING_ANON:
		return "anon";
	case NPF_BACKING_FILE:
		return "file";
	}
	return "unknown";
}

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

__attribute__((format(printf, 1, 2))) static void p_err(const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fflush(stdout);
	if (json_output) {
		fputs("{\"error\": ", stderr);
		json_escape(stderr, msg);
		fputs("}\n", stderr);
	} else {
		fprintf(stderr, "npfctl: %s\n", msg);
	}
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	p_err("%s (run 'npfctl help' for the grammar)", msg);
	return EXIT_USAGE;
}

/* npfd refused, or the exchange failed: say what npfd (or libnpf) said. */
static int request_failed(const char *what, int err)
{
	const char *why = npf_client__errmsg(client);

	p_err("%s: %s", what, *why ? why : strerror(-err));
	return EXIT_FAIL;
}

static int open_client(void)
{
	NPF_OPTS(npf_client_opts, opts);
	const char *path = socket_path;

	if (!path)
		path = getenv("NPF_SOCKET");
	if (!path || !*path)
		path = NPF_DEFAULT_SOCKET;
	opts.socket_path = path;
	client = npf_client__connect(&opts);
	if (client)
		return 0;
	if (errno == ENOENT || errno == ECONNREFUSED)
		p_err("cannot connect to npfd at %s: %s (is npfd running? start it with 'npfd --foreground' or 'systemctl start npfd')",
		      path, strerror(errno));
	else if (errno == EACCES || errno == EPERM)
		p_err("cannot connect to npfd at %s: %s (the socket is for root and npfd's group)",
		      path, strerror(errno));
	else
		p_err("cannot connect to npfd at %s: %s", path, strerror(errno));
	return EXIT_FAIL;
}

/* ------------------------------------------------------------------ */
/* Commands                                                            */
/* ------------------------------------------------------------------ */

struct cmd {
	const char *name;
	int (*func)(int argc, char **argv);
};

/* Run the command argv[0] from cmds; with no command, the first one. */
static int cmd_select(const struct cmd *cmds, const char *object, int argc, char **argv)
{
	int i;

	if (argc < 1)
		return cmds[0].func(argc, argv);
	for (i = 0; cmds[i].name; i++)
		if (!strcmp(argv[0], cmds[i].name))
			return cmds[i].func(argc - 1, argv + 1);
	if (object)
		return usage_error("unknown command '%s' for object '%s'", argv[0], object);
	return usage_error("unknown object '%s'", argv[0]);
}

static int no_more_args(const char *what, int argc, char **argv)
{
	if (argc > 0)
		return usage_error("%s: unexpected argument '%s'", what, argv[0]);
	return 0;
}

static const char help_text[] =
	"Usage: npfctl [OPTIONS] OBJECT COMMAND [ARGS]\n"
	"       npfctl help\n"
	"\n"
	"Objects and commands:\n"
	"  status [show]              npfd's pid, protocol version, uptime, clients, regions,\n"
	"                             faults resolved, batches, IOMMU faults, ring buffer\n"
	"                             records dropped, bad messages, bpffs directory\n"
	"  region { list | show }     registered regions: id, pid, start, length, backing,\n"
	"                             file offset, name\n"
	"  stats [show [region ID]]   per region: CPU, device and userfaultfd faults, pages\n"
	"                             zeroed and copied, bytes read, batches, mm events,\n"
	"                             fault latency (mean, p50, p99, histogram); with\n"
	"                             --format prometheus, the Prometheus text format\n"
	"  policy list                fault policies: id, name, ABI version, slot (a region\n"
	"                             or global), decisions, decisions clamped, pages prefetched\n"
	"  policy show NAME           one policy\n"
	"  policy load FILE [region ID] [name NAME]\n"
	"                             load a policy object (build/policies/*.bpf.o) for one\n"
	"                             region or, without 'region', for every region without\n"
	"                             its own; it replaces the policy of the same name and\n"
	"                             the one that held that slot\n"
	"  policy unload NAME         remove a policy: its faults get the built-in decision\n"
	"  policy { enable | disable }\n"
	"                             the kill switch: disabled, every fault gets the built-in\n"
	"                             decision (only the faulting pages)\n"
	"  device { list | show }     device memory regions (software NIC MRs) npfd serves:\n"
	"                             page requests answered, pages mapped, invalidations\n"
	"  top [--once]               live view, refreshed every second: fault rates and\n"
	"                             latencies per region ('q' quits); one frame with\n"
	"                             --once, --json, or when stdout is not a terminal\n"
	"  doctor                     probe every kernel feature npf uses by trying it;\n"
	"                             print what works, what does not and what that\n"
	"                             disables (exit 1 when a required one is missing)\n"
	"  help                       this text (also OBJECT help)\n"
	"\n"
	"Options:\n"
	"  -j, --json                 print one JSON document (numbers in bytes and ns)\n"
	"  -p, --pretty               pretty-print the JSON (implies --json)\n"
	"      --format FMT           text (default), json (as --json), or prometheus\n"
	"                             (stats only)\n"
	"      --once                 top: print one frame and exit\n"
	"  -s, --socket PATH          npfd's control socket (default: $NPF_SOCKET, else\n"
	"                             " NPF_DEFAULT_SOCKET ")\n"
	"  -h, --help                 this text\n"
	"  -V, --version              npfctl's version and protocol version\n"
	"\n"
	"Exit status: 0 success, 1 failure (npfd not running, npfd refused the request, or\n"
	"doctor found a required feature missing), 2 usage error. With --json, errors are\n"
	"{\"error\": \"...\"} on stderr.\n";

static int do_help(int argc, char **argv)
{
	open_json_object(NULL);
	print_string("help", "%s", help_text);
	close_json_object();
	return EXIT_OK;
}

static int do_version(void)
{
	open_json_object(NULL);
	print_string("version", "npfctl %s", NPFCTL_VERSION);
	print_u64("protocol_version", " (npf protocol %llu)\n", NPF_PROTO_VERSION);
	close_json_object();
	return EXIT_OK;
}

/* status */

static int do_status_show(int argc, char **argv)
{
	struct npf_status st;
	char buf[64], bpffs[sizeof(st.bpffs) + 1];
	int err;

	err = no_more_args("status show", argc, argv);
	if (err)
		return err;
	err = open_client();
	if (err)
		return err;
	err = npf_client__status(client, &st);
	if (err)
		return request_failed("status", err);
	memcpy(bpffs, st.bpffs, sizeof(st.bpffs));
	bpffs[sizeof(st.bpffs)] = '\0';

	open_json_object(NULL);
	print_u64("npfd_pid", "npfd pid          %llu\n", st.npfd_pid);
	print_u64("proto_version", "protocol version  %llu\n", st.proto_version);
	print_u64("uptime_ns", NULL, st.uptime_ns);
	print_string(NULL, "uptime            %s\n", fmt_uptime(buf, sizeof(buf), st.uptime_ns));
	print_u64("clients", "clients           %llu\n", st.clients);
	print_u64("regions", "regions           %llu\n", st.regions);
	print_u64("faults_resolved", "faults resolved   %llu\n", st.faults_resolved);
	print_u64("batches", "batches           %llu\n", st.batches);
	print_u64("iommu_faults", "iommu faults      %llu\n", st.iommu_faults);
	print_u64("records_dropped", "records dropped   %llu\n", st.records_dropped);
	print_u64("bad_messages", "bad messages      %llu\n", st.bad_messages);
	print_u64("filter_misses", "filter misses     %llu\n", st.filter_misses);
	print_string("bpffs", "bpffs dir         %s\n", bpffs);
	close_json_object();
	return EXIT_OK;
}

static int do_status(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{"show", do_status_show},
		{"help", do_help},
		{},
	};

	return cmd_select(cmds, "status", argc, argv);
}

/* region */

static int do_region_list(int argc, char **argv)
{
	struct npf_region_info *ri;
	char name[NPF_NAME_LEN + 1];
	size_t n, i;
	int err;

	err = no_more_args("region list", argc, argv);
	if (err)
		return err;
	err = open_client();
	if (err)
		return err;
	err = npf_client__region_list(client, &ri, &n);
	if (err)
		return request_failed("region list", err);

	print_string(NULL, "%s\n",
		     "ID     PID      START               LENGTH    BACKING  OFFSET          NAME");
	open_json_array(NULL);
	for (i = 0; i < n; i++) {
		open_json_object(NULL);
		print_u64("id", "%-6llu ", ri[i].region_id);
		print_u64("pid", "%-8llu ", ri[i].tgid);
		print_u64("start", "0x%-16llx ", ri[i].start);
		print_size("length", "%-9s ", ri[i].length);
		print_string("backing", "%-8s ", backing_name(ri[i].backing));
		if (json_output || ri[i].backing == NPF_BACKING_FILE)
			print_u64("file_offset", "0x%-13llx ", ri[i].file_offset);
		else
			print_string(NULL, "%-15s ", "-");
		region_name(name, ri[i].name);
		print_string("name", "%s", json_output || *name ? name : "-");
		print_nl();
		close_json_object();
	}
	close_json_array();
	free(ri);
	return EXIT_OK;
}

static int do_region(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{"list", do_region_list},
		{"show", do_region_list},
		{"help", do_help},
		{},
	};

	return cmd_select(cmds, "region", argc, argv);
}

/* stats */

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

static void print_region_stats(const struct npf_region_stats_full *sf, const char *name)
{
	const struct npf_region_stats *s = &sf->stats;
	__u64 samples = hist_samples(&sf->latency);

	open_json_object(NULL);
	print_u64("id", "region %llu", s->region_id);
	print_u64("pid", "  pid %llu", s->tgid);
	print_string("name", "  %s", json_output || *name ? name : "-");
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
#define C(f, h) {"npf_region_" #f "_total", h, offsetof(struct npf_region_stats, f)}
	C(cpu_faults, "CPU page faults in the region seen by the BPF collector (attached while a policy is loaded, or with npfd --trace-cpu-faults)."),
	C(device_faults, "Device page requests for the region."),
	C(uffd_faults, "userfaultfd fault messages npfd resolved for the region."),
	C(pages_zeroed, "Pages npfd installed zero-filled."),
	C(pages_copied, "Pages npfd installed from the backing file."),
	C(bytes_read, "Bytes npfd read from the backing file."),
	C(batches, "Resolver batches that touched the region."),
	C(mm_events, "userfaultfd REMOVE, UNMAP, REMAP and FORK events on the region."),
#undef C
};

static void print_prometheus(const struct npf_status *st, const struct npf_region_stats_full *sf,
			     size_t n, const struct npf_region_info *ri, size_t nri)
{
	struct prom_region *r = calloc(n ? n : 1, sizeof(*r));
	char (*names)[NPF_NAME_LEN + 1] = calloc(n ? n : 1, sizeof(*names));
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
	printf("npf_up{pid=\"%u\",protocol_version=\"%u\"} 1\n", st->npfd_pid,
	       st->proto_version);
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
		prom_family(prom_region_counters[c].metric, "counter", prom_region_counters[c].help);
		for (i = 0; i < n; i++) {
			const char *base = (const char *)&sf[i].stats;

			printf("%s", prom_region_counters[c].metric);
			prom_labels(&r[i], NULL);
			printf(" %llu\n",
			       (unsigned long long)*(const __u64 *)(base + prom_region_counters[c].off));
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
	free(names);
	free(r);
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
	char name[NPF_NAME_LEN + 1], what[48];
	size_t n, nri = 0, i, k;
	__u32 id = 0;
	int err;

	if (argc > 0) {
		if (strcmp(argv[0], "region"))
			return usage_error("stats show: unexpected argument '%s' (want 'region ID')",
					   argv[0]);
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

	if (prometheus_output) {
		struct npf_status st;

		err = npf_client__status(client, &st);
		if (err) {
			free(ri);
			free(sf);
			return request_failed("status", err);
		}
		print_prometheus(&st, sf, n, ri, nri);
		free(ri);
		free(sf);
		return EXIT_OK;
	}
	if (!n)
		print_string(NULL, "%s\n", "no regions registered");
	open_json_array(NULL);
	for (i = 0; i < n; i++) {
		name[0] = '\0';
		for (k = 0; k < nri; k++)
			if (ri[k].region_id == sf[i].stats.region_id)
				region_name(name, ri[k].name);
		if (i)
			print_nl();
		print_region_stats(&sf[i], name);
	}
	close_json_array();
	free(ri);
	free(sf);
	return EXIT_OK;
}

static int do_stats(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{"show", do_stats_show},
		{"help", do_help},
		{},
	};

	return cmd_select(cmds, "stats", argc, argv);
}

/* doctor */

static const char *need_name(enum npf_feat_need need)
{
	switch (need) {
	case NPF_NEED_REQUIRED:
		return "required";
	case NPF_NEED_OPTIONAL:
		return "optional";
	default:
		return "unused";
	}
}

static int do_doctor(int argc, char **argv)
{
	size_t i;
	int err, missing;

	err = no_more_args("doctor", argc, argv);
	if (err)
		return err;
	/* The text report is npfd --check's, word for word. */
	if (!json_output) {
		missing = npf_features_report(stdout);
		return missing ? EXIT_FAIL : EXIT_OK;
	}
	missing = npf_features_missing_required();
	open_json_object(NULL);
	open_json_array("features");
	for (i = 0; i < npf_nr_features; i++) {
		const struct npf_feature *f = &npf_features[i];

		open_json_object(NULL);
		print_string("group", NULL, f->group);
		print_string("name", NULL, f->name);
		print_string("result", NULL, npf_feature_verdict(f));
		print_string("need", NULL, need_name(f->need));
		print_string("detail", NULL, f->detail);
		print_string("disables", NULL, f->disables);
		close_json_object();
	}
	close_json_array();
	print_u64("missing_required", NULL, (__u64)missing);
	close_json_object();
	return missing ? EXIT_FAIL : EXIT_OK;
}

/* top */

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

	if (json_output) {
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
	print_string(NULL, "%s\n",
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
		print_string("name", "%-16.16s ", json_output || *name ? name : "-");
		print_rate("cpu_faults_per_s", "%-8s ", (double)(s->cpu_faults - p->cpu_faults) / dt);
		print_rate("uffd_faults_per_s", "%-8s ",
			   (double)(s->uffd_faults - p->uffd_faults) / dt);
		print_rate("pages_per_s", "%-8s ",
			   (double)(s->pages_zeroed + s->pages_copied - p->pages_zeroed -
				    p->pages_copied) / dt);
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

static int do_top(int argc, char **argv)
{
	struct top_sample a, b;
	struct termios saved, raw;
	bool live, tty_in;
	struct sigaction sa = {.sa_handler = top_signal};
	int err;

	err = no_more_args("top", argc, argv);
	if (err)
		return err;
	live = !top_once && !json_output && isatty(STDOUT_FILENO);
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

/* policy */

static void print_policy(const struct npf_policy_status *p)
{
	char name[sizeof(p->name) + 1];

	snprintf(name, sizeof(name), "%.*s", (int)sizeof(p->name), p->name);
	open_json_object(NULL);
	print_u64("id", "%-4llu ", p->policy_id);
	print_string("name", "%-16s ", name);
	print_u64("abi_version", "%-4llu ", p->abi_version);
	if (p->region_id)
		print_u64("region", "region %-6llu ", p->region_id);
	else
		print_string("region", "%-13s ", "global");
	print_u64("invocations", "%-12llu ", p->invocations);
	print_u64("clamped", "%-9llu ", p->clamped);
	print_u64("pages_prefetched", "%-12llu", p->pages_prefetched);
	print_nl();
	close_json_object();
}

static const char policy_header[] =
	"ID   NAME             ABI  SLOT          DECISIONS    CLAMPED   PREFETCHED";

static int policy_list_or_show(const char *name)
{
	struct npf_policy_status *ps;
	size_t n, i, shown = 0;
	int err = open_client();

	if (err)
		return err;
	err = npf_client__policy_list(client, &ps, &n);
	if (err)
		return request_failed("policy list", err);
	if (!name) {
		/* The kill switch is npfd-wide: say so above the table. */
		if (n)
			print_string(NULL, "%s\n", ps[0].enabled ? "policies enabled"
								  : "policies DISABLED (kill switch): every fault gets the built-in decision");
		print_string(NULL, "%s\n", policy_header);
		open_json_array(NULL);
	}
	for (i = 0; i < n; i++) {
		if (name && strncmp(ps[i].name, name, sizeof(ps[i].name)))
			continue;
		if (name && shown == 0)
			print_string(NULL, "%s\n", policy_header);
		print_policy(&ps[i]);
		shown++;
	}
	if (!name)
		close_json_array();
	free(ps);
	if (name && !shown) {
		p_err("policy show: no policy named '%s'", name);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

static int do_policy_list(int argc, char **argv)
{
	int err = no_more_args("policy list", argc, argv);

	return err ? err : policy_list_or_show(NULL);
}

static int do_policy_show(int argc, char **argv)
{
	if (argc != 1)
		return usage_error("policy show NAME");
	return policy_list_or_show(argv[0]);
}

/* policy load FILE [region ID] [name NAME] */
static int do_policy_load(int argc, char **argv)
{
	struct npf_policy_status st;
	const char *file, *name = NULL;
	unsigned long region = 0;
	char *end;
	int fd, err;

	if (argc < 1)
		return usage_error("policy load FILE [region ID] [name NAME]");
	file = argv[0];
	for (argc--, argv++; argc > 0; argc -= 2, argv += 2) {
		if (argc < 2)
			return usage_error("policy load: '%s' needs a value", argv[0]);
		if (!strcmp(argv[0], "region")) {
			region = strtoul(argv[1], &end, 10);
			if (*end || !region || region > 0xffffffffUL)
				return usage_error("policy load: region '%s' is not a region id",
						   argv[1]);
		} else if (!strcmp(argv[0], "name")) {
			name = argv[1];
			if (!*name || strlen(name) >= sizeof(st.name))
				return usage_error("policy load: a name is 1 to %zu characters",
						   sizeof(st.name) - 1);
		} else {
			return usage_error("policy load: unknown argument '%s' (region ID, name NAME)",
					   argv[0]);
		}
	}
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		p_err("policy load: cannot open %s: %s", file, strerror(errno));
		return EXIT_FAIL;
	}
	err = open_client();
	if (err) {
		close(fd);
		return err;
	}
	err = npf_client__policy_load(client, fd, (__u32)region, name, &st);
	close(fd);
	if (err < 0)
		return request_failed("policy load", err);
	print_string(NULL, "%s\n", policy_header);
	print_policy(&st);
	return EXIT_OK;
}

static int do_policy_unload(int argc, char **argv)
{
	int err;

	if (argc != 1)
		return usage_error("policy unload NAME");
	err = open_client();
	if (err)
		return err;
	err = npf_client__policy_unload(client, argv[0]);
	if (err)
		return request_failed("policy unload", err);
	open_json_object(NULL);
	print_string("unloaded", "policy %s unloaded\n", argv[0]);
	close_json_object();
	return EXIT_OK;
}

static int policy_switch(bool on, int argc, char **argv)
{
	int err = no_more_args(on ? "policy enable" : "policy disable", argc, argv);

	if (err)
		return err;
	err = open_client();
	if (err)
		return err;
	err = npf_client__policy_enable(client, on);
	if (err)
		return request_failed(on ? "policy enable" : "policy disable", err);
	open_json_object(NULL);
	print_string("policies", "policies %s\n", on ? "enabled" : "disabled");
	close_json_object();
	return EXIT_OK;
}

static int do_policy_enable(int argc, char **argv)
{
	return policy_switch(true, argc, argv);
}

static int do_policy_disable(int argc, char **argv)
{
	return policy_switch(false, argc, argv);
}

static int do_policy(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{"list", do_policy_list},
		{"show", do_policy_show},
		{"load", do_policy_load},
		{"unload", do_policy_unload},
		{"enable", do_policy_enable},
		{"disable", do_policy_disable},
		{"help", do_help},
		{},
	};

	return cmd_select(cmds, "policy", argc, argv);
}

/* device */

static int do_device_list(int argc, char **argv)
{
	struct npf_device_info *di;
	size_t n, i;
	int err = no_more_args("device list", argc, argv);

	if (err)
		return err;
	err = open_client();
	if (err)
		return err;
	err = npf_client__device_list(client, &di, &n);
	if (err)
		return request_failed("device list", err);
	print_string(NULL, "%s\n",
		     "ID     REGION PID      START               PAGES      REQUESTS   MAPPED     INVALIDATIONS MEAN-SERVICE");
	open_json_array(NULL);
	for (i = 0; i < n; i++) {
		open_json_object(NULL);
		print_u64("id", "%-6llu ", di[i].device_id);
		print_u64("region", "%-6llu ", di[i].region_id);
		print_u64("pid", "%-8llu ", di[i].tgid);
		print_u64("start", "0x%-16llx ", di[i].start);
		print_u64("pages", "%-10llu ", di[i].npages);
		print_u64("page_requests", "%-10llu ", di[i].page_requests);
		print_u64("pages_mapped", "%-10llu ", di[i].pages_mapped);
		print_u64("invalidations", "%-13llu ", di[i].invalidations);
		print_ns("mean_service_ns", "%s",
			 di[i].page_requests ? di[i].fault_ns_sum / di[i].page_requests : 0);
		print_nl();
		close_json_object();
	}
	close_json_array();
	free(di);
	return EXIT_OK;
}

static int do_device(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{"list", do_device_list},
		{"show", do_device_list},
		{"help", do_help},
		{},
	};

	return cmd_select(cmds, "device", argc, argv);
}

static int do_objects(int argc, char **argv)
{
	static const struct cmd objects[] = {
		{"status", do_status},
		{"region", do_region},
		{"stats", do_stats},
		{"policy", do_policy},
		{"device", do_device},
		{"top", do_top},
		{"doctor", do_doctor},
		{"help", do_help},
		{},
	};

	if (argc < 1)
		return usage_error("missing OBJECT");
	return cmd_select(objects, NULL, argc, argv);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"pretty", no_argument, NULL, 'p'},
		{"socket", required_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{"format", required_argument, NULL, 'F'},
		{"once", no_argument, NULL, 'O'},
		{},
	};
	char bad[128] = "";
	bool help = false, version = false;
	int opt, ret;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":jps:hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			json_output = true;
			break;
		case 'p':
			json_output = true;
			pretty_output = true;
			break;
		case 's':
			socket_path = optarg;
			break;
		case 'h':
			help = true;
			break;
		case 'V':
			version = true;
			break;
		case 'F':
			if (!strcmp(optarg, "json")) {
				json_output = true;
			} else if (!strcmp(optarg, "prometheus")) {
				prometheus_output = true;
			} else if (strcmp(optarg, "text") && !*bad) {
				snprintf(bad, sizeof(bad),
					 "--format: '%s' is not one of text, json, prometheus", optarg);
			}
			break;
		case 'O':
			top_once = true;
			break;
		case ':':
			/* Reported after the loop, once -j is known. */
			if (!*bad)
				snprintf(bad, sizeof(bad), "option '%s' needs an argument",
					 argv[optind - 1]);
			break;
		default:
			if (!*bad) {
				if (optopt)
					snprintf(bad, sizeof(bad), "unknown option '-%c'", optopt);
				else
					snprintf(bad, sizeof(bad), "unknown option '%s'",
						 argv[optind - 1]);
			}
			break;
		}
	}
	if (!*bad && prometheus_output && json_output)
		snprintf(bad, sizeof(bad), "--format prometheus and --json exclude each other");
	if (!*bad && prometheus_output && (optind >= argc || strcmp(argv[optind], "stats")))
		snprintf(bad, sizeof(bad), "--format prometheus applies to 'stats' only");
	if (!*bad && top_once && (optind >= argc || strcmp(argv[optind], "top")))
		snprintf(bad, sizeof(bad), "--once applies to 'top' only");
	if (*bad)
		return usage_error("%s", bad);
	if (help)
		return do_help(0, NULL);
	if (version)
		return do_version();

	ret = do_objects(argc - optind, argv + optind);
	npf_client__close(client);
	if (fflush(stdout) || ferror(stdout)) {
		p_err("cannot write the output: %s", strerror(errno));
		ret = EXIT_FAIL;
	}
	return ret;
}
