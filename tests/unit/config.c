// SPDX-License-Identifier: GPL-2.0
/*
 * npfd's configuration (daemon/config.c): the command line and the file,
 * their validation, and their precedence (defaults < file < command line,
 * option by option; -v/-q together as the log level).
 */
#include <getopt.h>
#include "unit.h"
#include "config.h"
#include "log.h"
#include "npf_abi.h"

static char dir[] = "/tmp/npf-unit-XXXXXX";

/* Parse a NULL-terminated argument list; returns config_parse_args()'s result. */
static int parse(struct npfd_cmdline *cl, const char *first, ...)
{
	char *argv[32] = {"npfd"};
	int argc = 1;
	const char *a;
	va_list ap;

	va_start(ap, first);
	for (a = first; a && argc < 31; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	optind = 0; /* getopt starts over */
	return config_parse_args(argc, argv, cl);
}

static const char *file(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		th_fail("writing %s: %s", path, strerror(errno));
	return path;
}

/* Load with the command line args (NULL-terminated, after --config path). */
static int load(const char *path, struct npfd_config *c, char *err, size_t len, const char *a1,
		const char *a2, const char *a3)
{
	struct npfd_cmdline cl;
	int r = parse(&cl, "--config", path, a1, a2, a3, NULL);

	if (r)
		return 1000 + r; /* the command line itself was refused */
	err[0] = '\0';
	return config_load(&cl, c, err, len);
}

static void defaults(void)
{
	struct npfd_cmdline cl;
	struct npfd_config c;
	char err[512] = "";

	UT_EQ(parse(&cl, NULL), 0, "no arguments");
	UT_EQ(cl.config_given, 0, "no --config: the default file need not exist");
	UT_STREQ(cl.config_path, NPFD_DEFAULT_CONFIG, "default config path");
	cl.config_path = "/nonexistent/npfd.conf"; /* the default file, missing */
	UT_EQ(config_load(&cl, &c, err, sizeof(err)), 0, "a missing default file is no error");
	UT_STREQ(c.socket, NPF_DEFAULT_SOCKET, "default socket");
	UT_STREQ(c.bpffs, NPF_DEFAULT_BPFFS, "default bpffs");
	UT_EQ(c.staging_pages, 1024, "default staging-pages");
	UT_EQ(c.poll_us, 100, "default poll-us");
	UT_EQ(c.trace_cpu_faults, 0, "default trace-cpu-faults");
	UT_EQ(config_log_level(&c), LOG_INFO, "default log level");

	UT_EQ(parse(&cl, "--config", "/nonexistent/npfd.conf", NULL), 0, "--config parses");
	UT_EQ(cl.config_given, 1, "--config given");
	UT_CHECK(config_load(&cl, &c, err, sizeof(err)) == -ENOENT,
		 "a missing --config file must be an error");
	UT_HAS(err, "/nonexistent/npfd.conf", "the error names the file");
}

static void file_values(void)
{
	struct npfd_config c;
	char err[512];
	const char *p = file("ok.conf", "# a comment\n"
					"\n"
					"  staging-pages = 64  \n"
					"poll-us=5\n"
					"trace-cpu-faults = yes\r\n"
					"socket = /run/x/npfd.sock\n"
					"ws-dir\t=\t/var/tmp/ws\n"
					"verbose = 2\n");

	UT_EQ(load(p, &c, err, sizeof(err), NULL, NULL, NULL), 0, "a good file loads");
	UT_EQ(c.staging_pages, 64, "file staging-pages");
	UT_EQ(c.poll_us, 5, "file poll-us");
	UT_EQ(c.trace_cpu_faults, 1, "file trace-cpu-faults");
	UT_STREQ(c.socket, "/run/x/npfd.sock", "file socket");
	UT_STREQ(c.ws_dir, "/var/tmp/ws", "file ws-dir (tabs around '=')");
	UT_STREQ(c.bpffs, NPF_DEFAULT_BPFFS, "a key the file leaves out keeps its default");
	UT_EQ(config_log_level(&c), LOG_INFO + 2, "file verbose = 2");

	/* the command line wins, option by option */
	UT_EQ(load(p, &c, err, sizeof(err), "--poll-us", "7", "-q"), 0, "file + command line");
	UT_EQ(c.poll_us, 7, "--poll-us over the file's poll-us");
	UT_EQ(c.staging_pages, 64,
	      "the file's staging-pages stays when the command line is silent");
	UT_EQ(config_log_level(&c), LOG_WARN, "-q over the file's verbose = 2");
	UT_EQ(load(p, &c, err, sizeof(err), "-v", NULL, NULL), 0, "file + -v");
	UT_EQ(config_log_level(&c), LOG_INFO + 1, "-v replaces the file's verbose = 2");
	UT_EQ(load(p, &c, err, sizeof(err), "--trace-cpu-faults", "-s", "/tmp/s.sock"), 0,
	      "file + flags");
	UT_STREQ(c.socket, "/tmp/s.sock", "-s over the file's socket");

	p = file("quiet.conf", "quiet = yes\nverbose = 1\n");
	UT_EQ(load(p, &c, err, sizeof(err), NULL, NULL, NULL), 0, "quiet file");
	UT_EQ(config_log_level(&c), LOG_WARN, "quiet overrides verbose in a file");
	UT_EQ(load(p, &c, err, sizeof(err), "-v", "-v", "-v"), 0, "quiet file, -v -v -v");
	UT_EQ(config_log_level(&c), LOG_INFO + 2,
	      "-v on the command line undoes the file's quiet; "
	      "verbose stops at 2");
}

/* A file that must be refused, with its line number and a word of the reason. */
static void bad_file(const char *text, const char *line, const char *why)
{
	struct npfd_config c;
	char err[512];
	const char *p = file("bad.conf", text);

	UT_CHECK(load(p, &c, err, sizeof(err), NULL, NULL, NULL) < 0, "'%s' must be refused", text);
	UT_HAS(err, line, "the error names the file and line");
	UT_HAS(err, why, "the error says why");
}

static void file_errors(void)
{
	bad_file("staging-pages = 0\n", "bad.conf:1:", "from 1 to 65536");
	bad_file("\n\nstaging-pages = 65537\n", "bad.conf:3:", "from 1 to 65536");
	bad_file("poll-us = -1\n", ":1:", "not a number");
	bad_file("poll-us = 100001\n", ":1:", "from 0 to 100000");
	bad_file("poll-us = 12abc\n", ":1:", "not a number");
	bad_file("poll-us = 4294967296\n", ":1:", "not a number");
	bad_file("poll-us = +3\n", ":1:", "not a number");
	bad_file("trace-cpu-faults = maybe\n", ":1:", "yes or no");
	bad_file("socket = relative/npfd.sock\n", ":1:", "not an absolute path");
	bad_file("bogus = 1\n", ":1:", "unknown key 'bogus'");
	bad_file("poll-us = 1\npoll-us = 2\n", ":2:", "already set on line 1");
	bad_file("poll-us 5\n", ":1:", "not 'key = value'");
	bad_file("poll-us =\n", ":1:", "no value");
	bad_file("help = yes\n", ":1:", "command-line option");
	bad_file("verbose = 3\n", ":1:", "from 0 to 2");
	bad_file("socket-group = no-such-group-here\n", ":1:", "no group of this system");
}

/* socket-group: a name or a number, resolved to its gid; unset: none (-1). */
static void socket_group(void)
{
	struct npfd_config c;
	char err[512];
	gid_t gid = 0;
	const char *p = file("group.conf", "socket-group = root\n");

	UT_EQ(load(p, &c, err, sizeof(err), NULL, NULL, NULL), 0, "socket-group = root loads");
	UT_EQ(config_socket_gid(&c, &gid), 0, "root's gid");
	UT_EQ(gid, 0, "socket-group = root is gid 0");
	UT_EQ(load(p, &c, err, sizeof(err), "--socket-group", "4242", NULL), 0,
	      "a number needs no name");
	UT_EQ(config_socket_gid(&c, &gid), 0, "gid 4242");
	UT_EQ(gid, 4242, "--socket-group 4242 over the file's root");
	p = file("nogroup.conf", "");
	UT_EQ(load(p, &c, err, sizeof(err), NULL, NULL, NULL), 0, "no socket-group");
	UT_EQ(config_socket_gid(&c, &gid), 0, "no socket-group: no error");
	UT_EQ(gid, (gid_t)-1, "no socket-group: npfd's own group (-1)");
}

static void bad_args(const char *a1, const char *a2, const char *what)
{
	struct npfd_cmdline cl;

	UT_CHECK(parse(&cl, a1, a2, NULL) == -EINVAL, "%s (%s %s) must be refused", what, a1,
		 a2 ? a2 : "");
}

static void args(void)
{
	struct npfd_cmdline cl;
	char longpath[300];

	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	bad_args("--staging-pages", "0", "below the minimum");
	bad_args("--staging-pages", "65537", "above the maximum");
	bad_args("--poll-us", "x", "not a number");
	bad_args("--socket", "npfd.sock", "a relative socket path");
	bad_args("--socket", longpath, "a socket path longer than sun_path");
	bad_args("--bogus", NULL, "an unknown option");
	bad_args("--socket-group", "no-such-group-here", "a group the system does not know");
	bad_args("--socket-group", "", "an empty group");
	bad_args("extra", NULL, "an unexpected argument");
	UT_EQ(parse(&cl, "--check", NULL), 0, "--check");
	UT_EQ(cl.action, NPFD_CHECK, "--check is an action");
	UT_EQ(parse(&cl, "--check-config", "-vv", NULL), 0, "--check-config -vv");
	UT_EQ(cl.action, NPFD_CHECK_CONFIG, "--check-config is an action");
	UT_EQ(cl.opt.verbose, 2, "-vv counts");
	UT_EQ(parse(&cl, "-h", NULL), 0, "-h");
	UT_EQ(cl.action, NPFD_HELP, "-h is --help");
	UT_EQ(parse(&cl, "--staging-pages", "65536", "--poll-us", "0", NULL), 0, "the limits");
	UT_EQ(cl.opt.staging_pages, 65536, "--staging-pages at its maximum");
}

int main(void)
{
	char cmd[64];

	if (!mkdtemp(dir))
		th_fail("mkdtemp: %s", strerror(errno));
	defaults();
	file_values();
	file_errors();
	socket_group();
	args();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) < 0)
		perror("system");
	return ut_done("configuration parsing, validation and precedence");
}
