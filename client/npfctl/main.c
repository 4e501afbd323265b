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
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "npf_json.h"
#include "npf.h"
#include "npf_print.h"
#include "npf_socket.h"
#include "npf_version.h"
#include "npfctl.h"

bool prometheus_output;
bool top_once;
struct npf_client *client;
static const char *socket_path;

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

__attribute__((format(printf, 1, 2))) void p_err(const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fflush(stdout);
	if (is_json_context()) {
		fputs("{\"error\": ", stderr);
		npf_json_escape(stderr, msg);
		fputs("}\n", stderr);
	} else {
		fprintf(stderr, "npfctl: %s\n", msg);
	}
}

__attribute__((format(printf, 1, 2))) int usage_error(const char *fmt, ...)
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
int request_failed(const char *what, int err)
{
	const char *why = npf_client__errmsg(client);

	p_err("%s: %s", what, *why ? why : strerror(-err));
	return EXIT_FAIL;
}

int open_client(void)
{
	NPF_OPTS(npf_client_opts, opts);
	const char *path = npf_socket_path(socket_path);

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

/* Run the command argv[0] from cmds; with no command, the first one. */
int cmd_select(const struct cmd *cmds, const char *object, int argc, char **argv)
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

int no_more_args(const char *what, int argc, char **argv)
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
	"  region set ID budget SIZE  the most of the region npfd keeps installed (bytes, or\n"
	"                             K, M, G, T; 'none'): over it npfd evicts pages\n"
	"  stats [show [region ID]]   per region: CPU, device and userfaultfd faults, pages\n"
	"                             zeroed and copied, bytes read, batches, mm events,\n"
	"                             fault latency (mean, p50, p99, histogram), budget\n"
	"                             and eviction (resident, evicted, written back); with\n"
	"                             --format prometheus, the Prometheus text format\n"
	"  policy list                policies: id, name, ABI version, slot (a region or\n"
	"                             global), decisions, decisions clamped, pages prefetched;\n"
	"                             for an eviction policy: batches it ran for, batches that\n"
	"                             fell back to CLOCK, pages it chose\n"
	"  policy show NAME           one policy\n"
	"  policy load FILE [region ID] [name NAME]\n"
	"                             load a policy object (build/policies/*.bpf.o) for one\n"
	"                             region or, without 'region', for every region without\n"
	"                             its own; it replaces the policy of the same name and\n"
	"                             the one that held that slot (root, or CAP_BPF and\n"
	"                             CAP_PERFMON, only). A fault policy decides what a\n"
	"                             fault fetches; an eviction policy (evict_*.bpf.o, e.g.\n"
	"                             evict_clean: clean pages first) which pages eviction\n"
	"                             takes; without one, CLOCK\n"
	"  policy use NAME region ID  a region's owner chooses a loaded policy for it\n"
	"  policy unload NAME         remove a policy: its faults get the built-in decision,\n"
	"                             its evictions CLOCK\n"
	"  policy { enable | disable }\n"
	"                             the kill switch: disabled, every fault gets the built-in\n"
	"                             decision (only the faulting pages), every eviction CLOCK\n"
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

int do_help(int argc, char **argv)
{
	open_json_object(NULL);
	print_string("help", "%s", help_text);
	close_json_object();
	return EXIT_OK;
}

static int do_version(void)
{
	open_json_object(NULL);
	print_string("version", "npfctl %s", NPF_VERSION);
	print_u64("protocol_version", " (npf protocol %llu)\n", NPF_PROTO_VERSION);
	close_json_object();
	return EXIT_OK;
}

static int do_objects(int argc, char **argv)
{
	static const struct cmd objects[] = {
		{"status", do_status}, {"region", do_region}, {"stats", do_stats},
		{"policy", do_policy}, {"device", do_device}, {"top", do_top},
		{"doctor", do_doctor}, {"help", do_help},     {},
	};

	if (argc < 1)
		return usage_error("missing OBJECT");
	return cmd_select(objects, NULL, argc, argv);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},	  {"pretty", no_argument, NULL, 'p'},
		{"socket", required_argument, NULL, 's'}, {"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},	  {"format", required_argument, NULL, 'F'},
		{"once", no_argument, NULL, 'O'},	  {},
	};
	char bad[128] = "";
	bool help = false, version = false, json_output = false, pretty_output = false;
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
					 "--format: '%s' is not one of text, json, prometheus",
					 optarg);
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
	print_set_json(json_output, pretty_output);
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
