// SPDX-License-Identifier: GPL-2.0
/*
 * npfd: resolves page faults of registered, unpinned memory.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>
#include "npfd.h"

struct npfd npfd = {
	.clients = LIST_HEAD_INIT(npfd.clients),
	.mms = LIST_HEAD_INIT(npfd.mms),
	.listen_fd = -1,
};

__u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + (__u64)ts.tv_nsec;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: npfd [OPTIONS]\n"
		"Resolve page faults of memory registered with npf (unpinned) on behalf of\n"
		"applications and devices.\n"
		"\n"
		"Options:\n"
		"  -s, --socket PATH        control socket (default %s)\n"
		"  -b, --bpffs DIR          where BPF maps are pinned (default %s)\n"
		"  -c, --config FILE        configuration file (default /etc/npf/npfd.conf;\n"
		"                           not read yet: this npfd takes options only)\n"
		"  -f, --foreground         stay in the foreground (npfd never daemonizes;\n"
		"                           accepted for compatibility with service managers)\n"
		"      --staging-pages N    pages in the I/O staging buffer (default 1024)\n"
		"      --poll-us N          after a fault, keep polling for the next one for N µs\n"
		"                           before sleeping (default 100; 0: never poll)\n"
		"  -v, --verbose            more logging (repeat for debug)\n"
		"  -q, --quiet              errors and warnings only\n"
		"  -h, --help               this text\n"
		"\n"
		"npfd must run as root (or with CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN): it loads\n"
		"BPF programs and serves other processes' userfaultfds.\n",
		NPF_DEFAULT_SOCKET, NPF_DEFAULT_BPFFS);
}

static void signal_ready(void *arg)
{
	int fd = (int)(long)arg;
	struct signalfd_siginfo si;

	while (read(fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			pr_info("SIGHUP: nothing to reload (no configuration file is read yet)");
			continue;
		}
		pr_info("%s: shutting down", strsignal((int)si.ssi_signo));
		npfd.stop = 1;
	}
}

static int setup_signals(void)
{
	sigset_t set;
	int fd;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0) {
		pr_err("cannot create a signalfd: %s", strerror(errno));
		return -errno;
	}
	return source_add(fd, POLLIN, signal_ready, (void *)(long)fd) < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"socket", required_argument, NULL, 's'},
		{"bpffs", required_argument, NULL, 'b'},
		{"config", required_argument, NULL, 'c'},
		{"foreground", no_argument, NULL, 'f'},
		{"staging-pages", required_argument, NULL, 'P'},
		{"poll-us", required_argument, NULL, 'U'},
		{"verbose", no_argument, NULL, 'v'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{},
	};
	int opt, err;
	char *end;

	npfd.opt.socket_path = NPF_DEFAULT_SOCKET;
	npfd.opt.bpffs = NPF_DEFAULT_BPFFS;
	npfd.opt.staging_pages = 1024;
	npfd.opt.poll_us = 100;
	while ((opt = getopt_long(argc, argv, "s:b:c:fvqh", longopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			npfd.opt.socket_path = optarg;
			break;
		case 'b':
			npfd.opt.bpffs = optarg;
			break;
		case 'c':
			npfd.opt.config = optarg;
			break;
		case 'f':
			npfd.opt.foreground = true;
			break;
		case 'P':
			npfd.opt.staging_pages = (unsigned int)strtoul(optarg, &end, 0);
			if (*end || npfd.opt.staging_pages < 1 || npfd.opt.staging_pages > 65536) {
				fprintf(stderr, "npfd: --staging-pages: '%s' is not a number from 1 to 65536\n",
					optarg);
				return 2;
			}
			break;
		case 'U':
			npfd.opt.poll_us = (unsigned int)strtoul(optarg, &end, 0);
			if (*end || npfd.opt.poll_us > 100000) {
				fprintf(stderr, "npfd: --poll-us: '%s' is not a number from 0 to 100000\n",
					optarg);
				return 2;
			}
			break;
		case 'v':
			log_level++;
			break;
		case 'q':
			log_level = LOG_WARN;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "npfd: unexpected argument '%s' (see npfd --help)\n", argv[optind]);
		return 2;
	}
	if (npfd.opt.config) {
		fprintf(stderr, "npfd: --config: configuration files are not supported yet; pass options on the command line\n");
		return 2;
	}

	npfd.start_ns = now_ns();
	err = loop_init();
	if (!err)
		err = setup_signals();
	resolve_set_poll(npfd.opt.poll_us);
	if (!err)
		err = resolve_init(npfd.opt.staging_pages);
	if (!err)
		err = collect_open(npfd.opt.bpffs);
	if (!err)
		err = control_open(npfd.opt.socket_path);
	if (!err) {
		pr_info("ready (pid %d)", getpid());
		err = loop_run();
	}
	control_close();
	collect_close();
	resolve_exit();
	return err ? 1 : 0;
}
