// SPDX-License-Identifier: GPL-2.0
/*
 * npfd's options and its configuration file. The file is lines of
 *
 *	key = value
 *
 * where key is a long option and value its argument (yes/no for an option
 * that takes none, a count for verbose); blank lines and lines starting
 * with # are ignored. A key appears once. Anything else is refused with
 * the file, the line and the reason: a daemon that starts with a setting
 * it did not understand is worse than one that does not start.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "log.h"
#include "mmcall.h"
#include "npf_abi.h"

enum opt_type {
	T_PATH,	  /* an absolute path that fits the field */
	T_GROUP,  /* a group's name or number, known to the system */
	T_UINT,	  /* a number from min to max */
	T_BOOL,	  /* command line: a flag; file: yes/no */
	T_COUNT,  /* command line: repeatable flag; file: a number from min to max */
	T_ACTION, /* command line only: what npfd does instead of running */
};

enum opt_live {
	L_LIVE,	   /* SIGHUP applies it */
	L_RESTART, /* read at start only */
	L_NONE,	   /* not part of the configuration */
};

struct opt_desc {
	const char *name;
	int short_opt; /* 0: long only */
	enum opt_type type;
	enum opt_live live;
	size_t off; /* in struct npfd_config */
	size_t size;
	unsigned int min, max;
	const char *arg; /* the argument's name in --help */
	const char *help;
	int action; /* T_ACTION: enum npfd_action; also --config when -1 */
};

#define F(field) offsetof(struct npfd_config, field), sizeof(((struct npfd_config *)0)->field)

static const struct opt_desc opts[] = {
	{"socket", 's', T_PATH, L_RESTART, F(socket), 0, 0, "PATH",
	 "control socket (default " NPF_DEFAULT_SOCKET ")"},
	{"socket-group", 0, T_GROUP, L_RESTART, F(socket_group), 0, 0, "GROUP",
	 "the control socket's group (mode 0660: its members may\n"
	 "use npfd; default: npfd's own group, root's)"},
	{"bpffs", 'b', T_PATH, L_RESTART, F(bpffs), 0, 0, "DIR",
	 "where BPF maps are pinned (default " NPF_DEFAULT_BPFFS ")"},
	{"config", 'c', T_ACTION, L_NONE, 0, 0, 0, 0, "FILE",
	 "configuration file (default " NPFD_DEFAULT_CONFIG ";\n"
	 "if that is missing, the built-in defaults)",
	 -1},
	{"foreground", 'f', T_BOOL, L_RESTART, F(foreground), 0, 0, NULL,
	 "stay in the foreground (npfd never daemonizes;\n"
	 "accepted for compatibility with service managers)"},
	{"staging-pages", 0, T_UINT, L_RESTART, F(staging_pages), 1, 65536, "N",
	 "pages in the I/O staging buffer (default 1024)"},
	{"poll-us", 0, T_UINT, L_LIVE, F(poll_us), 0, 100000, "N",
	 "after a fault, keep polling for the next one for N µs\n"
	 "before sleeping, when a CPU is spare: the faulting\n"
	 "userfaultfds, and the ring buffer of device page\n"
	 "requests, which then skip their wakeup (default 100;\n"
	 "0: never poll)"},
	{"fault-around-kib", 0, T_UINT, L_LIVE, F(fault_around_kib), 0, NPF_FAULT_AROUND_MAX_KIB,
	 "N",
	 "a CPU fault no policy decides for also installs the\n"
	 "other pages of its aligned N KiB block that cost no\n"
	 "I/O (in the page cache, or zeros), as the kernel's\n"
	 "fault-around does; rounded down to a power of two;\n"
	 "a region may set its own (default 64; 0: the\n"
	 "faulting page only)"},
	{"trace-cpu-faults", 0, T_BOOL, L_LIVE, F(trace_cpu_faults), 0, 0, NULL,
	 "attach the CPU fault tracepoint program: BPF then\n"
	 "counts every CPU fault of a registered region and\n"
	 "stamps its trap time, at a cost to every page fault\n"
	 "on the machine (~50 ns; default: not attached, also\n"
	 "while a policy is loaded: npfd runs policies itself)"},
	{"ws-dir", 0, T_PATH, L_LIVE, F(ws_dir), 0, 0, "DIR",
	 "where the wsreplay policy keeps working-set records\n"
	 "(default " NPFD_DEFAULT_WS_DIR ")"},
	{"client-budget-mib", 0, T_UINT, L_LIVE, F(client_budget_mib), 0, 1U << 24, "N",
	 "each client's budget: the most MiB of its registered\n"
	 "memory npfd keeps installed, all its regions together;\n"
	 "over it npfd evicts (default 0: none; a region may\n"
	 "have its own, npfctl region set ID budget SIZE)"},
	{"budget-high-pct", 0, T_UINT, L_LIVE, F(budget_high_pct), 1, 100, "N",
	 "eviction starts when a budget is N% used (default 100)"},
	{"budget-low-pct", 0, T_UINT, L_LIVE, F(budget_low_pct), 1, 100, "N",
	 "and evicts down to N% of it (default 90; at most\n"
	 "budget-high-pct)"},
	{"swap-dir", 0, T_PATH, L_RESTART, F(swap_dir), 0, 0, "DIR",
	 "where npfd keeps the evicted dirty pages of anonymous\n"
	 "regions, a file per region that outlives a killed npfd\n"
	 "(default " NPFD_DEFAULT_SWAP_DIR ")"},
	{"mm-call-timeout-ms", 0, T_UINT, L_LIVE, F(mm_call_timeout_ms), 10, 60000, "N",
	 "the longest npfd waits for a call into a client's\n"
	 "address space (registering, write-protecting or\n"
	 "reading its pages, its /proc files): a client that\n"
	 "holds one longer is given up until it returns, its\n"
	 "regions served by libnpf meanwhile (default 500)"},
	{"verbose", 'v', T_COUNT, L_LIVE, F(verbose), 0, 2, NULL,
	 "more logging (repeat for debug)"},
	{"quiet", 'q', T_BOOL, L_LIVE, F(quiet), 0, 0, NULL,
	 "errors and warnings only (overrides --verbose)"},
	{"check", 0, T_ACTION, L_NONE, 0, 0, 0, 0, NULL,
	 "probe the kernel features npf uses, print what works\n"
	 "and what is disabled, and exit (1: a required one\n"
	 "is missing)",
	 NPFD_CHECK},
	{"check-config", 0, T_ACTION, L_NONE, 0, 0, 0, 0, NULL,
	 "read the configuration, print it as npfd would run\n"
	 "with it, and exit (2: it is invalid)",
	 NPFD_CHECK_CONFIG},
	{"help", 'h', T_ACTION, L_NONE, 0, 0, 0, 0, NULL, "this text", NPFD_HELP},
	{"version", 'V', T_ACTION, L_NONE, 0, 0, 0, 0, NULL,
	 "print npfd's version and the protocol and ABI\n"
	 "versions it speaks, and exit",
	 NPFD_VERSION},
};

#define NR_OPTS (sizeof(opts) / sizeof(opts[0]))

static void *field(struct npfd_config *c, const struct opt_desc *o)
{
	return (char *)c + o->off;
}

static const void *cfield(const struct npfd_config *c, const struct opt_desc *o)
{
	return (const char *)c + o->off;
}

static unsigned long bit(const struct opt_desc *o)
{
	return 1UL << (o - opts);
}

static void config_defaults(struct npfd_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->socket, sizeof(c->socket), "%s", NPF_DEFAULT_SOCKET);
	snprintf(c->bpffs, sizeof(c->bpffs), "%s", NPF_DEFAULT_BPFFS);
	c->staging_pages = 1024;
	c->poll_us = 100;
	c->fault_around_kib = 64;
	snprintf(c->ws_dir, sizeof(c->ws_dir), "%s", NPFD_DEFAULT_WS_DIR);
	snprintf(c->swap_dir, sizeof(c->swap_dir), "%s", NPFD_DEFAULT_SWAP_DIR);
	c->budget_high_pct = 100;
	c->budget_low_pct = 90;
	c->mm_call_timeout_ms = MMCALL_DEFAULT_TIMEOUT_MS;
}

/* "socket, bpffs, ...": the keys a file may set, from the table. */
static void list_keys(char *buf, size_t len)
{
	size_t i, n = 0;

	buf[0] = '\0';
	for (i = 0; i < NR_OPTS && n < len; i++)
		if (opts[i].type != T_ACTION)
			n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "",
					      opts[i].name);
}

static int parse_uint(const char *s, unsigned int min, unsigned int max, unsigned int *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || *s == '+' || v < min || v > max)
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"yes", "true", "on", "1"};
	static const char *const no[] = {"no", "false", "off", "0"};
	size_t i;

	for (i = 0; i < 4; i++) {
		if (!strcmp(s, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcmp(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

/* A group's name or number as a gid: 0, or -ENOENT when the system has no such group. */
static int group_gid(const char *name, gid_t *gid)
{
	struct group gr, *found = NULL;
	size_t size = 4096;
	char *buf = NULL, *end;
	unsigned long v;
	int ret;

	errno = 0;
	v = strtoul(name, &end, 10);
	if (*name >= '0' && *name <= '9' && !*end && !errno && v < (gid_t)-1) {
		*gid = (gid_t)v;
		return 0;
	}
	/* a group of many members needs a larger buffer (ERANGE) */
	do {
		char *more = realloc(buf, size);

		if (!more) {
			free(buf);
			return -ENOMEM;
		}
		buf = more;
		ret = getgrnam_r(name, &gr, buf, size, &found);
		size *= 2;
	} while (ret == ERANGE && size <= (1U << 20));
	if (!ret && found)
		*gid = found->gr_gid;
	free(buf);
	return !ret && found ? 0 : -ENOENT;
}

int config_socket_gid(const struct npfd_config *c, gid_t *gid)
{
	*gid = (gid_t)-1;
	return c->socket_group[0] ? group_gid(c->socket_group, gid) : 0;
}

/* Set option o from the text val (a file's value, or an option's argument). */
static int set_value(struct npfd_config *c, const struct opt_desc *o, const char *val, char *err,
		     size_t len)
{
	switch (o->type) {
	case T_PATH:
		if (val[0] != '/') {
			snprintf(err, len, "%s: '%s' is not an absolute path", o->name, val);
			return -EINVAL;
		}
		if (strlen(val) >= o->size) {
			snprintf(err, len, "%s: '%s' is longer than %zu bytes", o->name, val,
				 o->size - 1);
			return -ENAMETOOLONG;
		}
		snprintf(field(c, o), o->size, "%s", val);
		break;
	case T_GROUP: {
		gid_t gid;

		if (strlen(val) >= o->size || group_gid(val, &gid)) {
			snprintf(err, len, "%s: '%s' is no group of this system", o->name, val);
			return -EINVAL;
		}
		snprintf(field(c, o), o->size, "%s", val);
		break;
	}
	case T_UINT:
	case T_COUNT:
		if (parse_uint(val, o->min, o->max, field(c, o))) {
			snprintf(err, len, "%s: '%s' is not a number from %u to %u", o->name, val,
				 o->min, o->max);
			return -EINVAL;
		}
		break;
	case T_BOOL:
		if (parse_bool(val, field(c, o))) {
			snprintf(err, len, "%s: '%s' is not yes or no", o->name, val);
			return -EINVAL;
		}
		break;
	case T_ACTION:
		snprintf(err, len, "%s: is a command-line option, not a configuration key",
			 o->name);
		return -EINVAL;
	}
	c->set |= bit(o);
	return 0;
}

static const struct opt_desc *find_key(const char *name)
{
	size_t i;

	for (i = 0; i < NR_OPTS; i++)
		if (!strcmp(opts[i].name, name))
			return &opts[i];
	return NULL;
}

void config_usage(FILE *f)
{
	size_t i;

	fprintf(f, "Usage: npfd [OPTIONS]\n"
		   "Resolve page faults of memory registered with npf (unpinned) on behalf of\n"
		   "applications and devices.\n"
		   "\n"
		   "Options:\n");
	for (i = 0; i < NR_OPTS; i++) {
		const struct opt_desc *o = &opts[i];
		char head[48];
		const char *h = o->help, *nl;
		int n;

		if (o->short_opt)
			n = snprintf(head, sizeof(head), "  -%c, --%s", o->short_opt, o->name);
		else
			n = snprintf(head, sizeof(head), "      --%s", o->name);
		if (o->arg && n > 0 && (size_t)n < sizeof(head))
			snprintf(head + n, sizeof(head) - (size_t)n, " %s", o->arg);
		fprintf(f, "%-27s", head);
		for (;;) {
			nl = strchr(h, '\n');
			fprintf(f, "%.*s\n", nl ? (int)(nl - h) : (int)strlen(h), h);
			if (!nl)
				break;
			h = nl + 1;
			fprintf(f, "%27s", "");
		}
	}
	fprintf(f,
		"\n"
		"Every option but --config, --check, --check-config, --help and --version is\n"
		"also a key of the configuration file (npfd.conf(5)): 'poll-us = 50'. The\n"
		"command line overrides the file; SIGHUP (systemctl reload npfd) re-reads it.\n"
		"\n"
		"npfd must run as root (or with CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN): it loads\n"
		"BPF programs and serves other processes' userfaultfds.\n"
		"\n"
		"Exit status: 0 clean shutdown, 1 failure at start or while running, 2 usage or\n"
		"configuration error.\n");
}

int config_parse_args(int argc, char **argv, struct npfd_cmdline *cl)
{
	struct option longopts[NR_OPTS + 1];
	char shortopts[2 * NR_OPTS + 1], err[512];
	size_t i, ns = 0;
	int opt, idx;

	memset(cl, 0, sizeof(*cl));
	memset(longopts, 0, sizeof(longopts));
	cl->config_path = NPFD_DEFAULT_CONFIG;
	for (i = 0; i < NR_OPTS; i++) {
		longopts[i].name = opts[i].name;
		longopts[i].has_arg = opts[i].arg ? required_argument : no_argument;
		longopts[i].val = 256 + (int)i;
		if (opts[i].short_opt) {
			shortopts[ns++] = (char)opts[i].short_opt;
			if (opts[i].arg)
				shortopts[ns++] = ':';
		}
	}
	shortopts[ns] = '\0';

	while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		const struct opt_desc *o = NULL;

		if (opt >= 256)
			o = &opts[opt - 256];
		for (i = 0; !o && i < NR_OPTS; i++)
			if (opts[i].short_opt == opt)
				o = &opts[i];
		if (!o) {
			fprintf(stderr, "npfd: see npfd --help for the options\n");
			return -EINVAL;
		}
		idx = (int)(o - opts);
		if (o->type == T_ACTION) {
			if (o->action < 0) {
				cl->config_path = optarg;
				cl->config_given = true;
			} else {
				cl->action = (enum npfd_action)o->action;
			}
			continue;
		}
		if (o->type == T_COUNT) {
			if (cl->opt.verbose < o->max)
				cl->opt.verbose++;
			cl->opt.set |= 1UL << idx;
			continue;
		}
		if (set_value(&cl->opt, o, o->arg ? optarg : "yes", err, sizeof(err))) {
			fprintf(stderr, "npfd: --%s\n", err);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "npfd: unexpected argument '%s' (see npfd --help)\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/* Read path into c; every refusal names path:line and the reason. */
static int config_read_file(const char *path, bool must_exist, struct npfd_config *c, char *err,
			    size_t len)
{
	unsigned int line_of[NR_OPTS] = {0};
	char buf[1024], why[512];
	unsigned int lineno = 0;
	FILE *f;
	int ret = 0;

	f = fopen(path, "re");
	if (!f) {
		int e = errno;

		if (e == ENOENT && !must_exist)
			return 0;
		snprintf(err, len, "%s: cannot read the configuration file: %s%s", path,
			 strerror(e),
			 e == ENOENT ? " (create it, or leave out --config for the defaults)" : "");
		return -e;
	}
	while (fgets(buf, sizeof(buf), f)) {
		const struct opt_desc *o;
		char *key, *val, *eq;

		lineno++;
		if (!strchr(buf, '\n') && !feof(f)) {
			snprintf(err, len, "%s:%u: line longer than %zu bytes", path, lineno,
				 sizeof(buf) - 2);
			ret = -EINVAL;
			break;
		}
		key = trim(buf);
		if (!*key || *key == '#')
			continue;
		eq = strchr(key, '=');
		if (!eq) {
			snprintf(err, len, "%s:%u: '%s' is not 'key = value'", path, lineno, key);
			ret = -EINVAL;
			break;
		}
		*eq = '\0';
		key = trim(key);
		val = trim(eq + 1);
		o = find_key(key);
		if (!o) {
			char keys[256];

			list_keys(keys, sizeof(keys));
			snprintf(err, len,
				 "%s:%u: unknown key '%s' (keys are npfd's long options: %s)", path,
				 lineno, key, keys);
			ret = -EINVAL;
			break;
		}
		if (line_of[o - opts]) {
			snprintf(err, len, "%s:%u: '%s' is already set on line %u", path, lineno,
				 key, line_of[o - opts]);
			ret = -EINVAL;
			break;
		}
		if (!*val) {
			snprintf(err, len, "%s:%u: %s: no value after '='", path, lineno, key);
			ret = -EINVAL;
			break;
		}
		ret = set_value(c, o, val, why, sizeof(why));
		if (ret) {
			snprintf(err, len, "%s:%u: %s", path, lineno, why);
			break;
		}
		line_of[o - opts] = lineno;
	}
	if (!ret && ferror(f)) {
		snprintf(err, len, "%s: cannot read the configuration file: %s", path,
			 strerror(errno));
		ret = -EIO;
	}
	fclose(f);
	return ret;
}

int config_load(const struct npfd_cmdline *cl, struct npfd_config *out, char *err, size_t len)
{
	size_t i;
	int ret;

	config_defaults(out);
	ret = config_read_file(cl->config_path, cl->config_given, out, err, len);
	if (ret)
		return ret;
	/* The command line wins, option by option; -v and -q together as the log level. */
	if (cl->opt.set & (bit(find_key("verbose")) | bit(find_key("quiet")))) {
		out->verbose = cl->opt.verbose;
		out->quiet = cl->opt.quiet;
	}
	for (i = 0; i < NR_OPTS; i++) {
		const struct opt_desc *o = &opts[i];

		if (!(cl->opt.set & bit(o)) || o->type == T_COUNT || !strcmp(o->name, "quiet"))
			continue;
		memcpy(field(out, o), cfield(&cl->opt, o), o->size);
	}
	out->set |= cl->opt.set;
	return 0;
}

int config_log_level(const struct npfd_config *c)
{
	if (c->quiet)
		return LOG_WARN;
	return LOG_INFO + (int)c->verbose;
}

static void format_value(const struct npfd_config *c, const struct opt_desc *o, char *buf,
			 size_t len)
{
	switch (o->type) {
	case T_PATH:
	case T_GROUP:
		snprintf(buf, len, "%s", (const char *)cfield(c, o));
		break;
	case T_UINT:
	case T_COUNT:
		snprintf(buf, len, "%u", *(const unsigned int *)cfield(c, o));
		break;
	case T_BOOL:
		snprintf(buf, len, "%s", *(const bool *)cfield(c, o) ? "yes" : "no");
		break;
	case T_ACTION:
		buf[0] = '\0';
		break;
	}
}

void config_print(FILE *f, const struct npfd_config *c, const char *path)
{
	char val[300];
	size_t i;

	fprintf(f, "# npfd configuration in effect: defaults < %s < command line\n", path);
	for (i = 0; i < NR_OPTS; i++) {
		if (opts[i].type == T_ACTION)
			continue;
		format_value(c, &opts[i], val, sizeof(val));
		fprintf(f, "%s = %s\n", opts[i].name, val);
	}
}

void config_reload_merge(struct npfd_config *cur, const struct npfd_config *next)
{
	char was[300], now[300];
	size_t i;

	for (i = 0; i < NR_OPTS; i++) {
		const struct opt_desc *o = &opts[i];

		if (o->live == L_NONE || !memcmp(cfield(cur, o), cfield(next, o), o->size))
			continue;
		format_value(cur, o, was, sizeof(was));
		format_value(next, o, now, sizeof(now));
		if (o->live == L_RESTART) {
			pr_warn("reload: %s changed from %s to %s: takes effect when npfd restarts",
				o->name, was, now);
			continue;
		}
		pr_info("reload: %s: %s -> %s", o->name, was, now);
		memcpy(field(cur, o), cfield(next, o), o->size);
	}
}
