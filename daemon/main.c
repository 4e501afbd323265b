// SPDX-License-Identifier: GPL-2.0
/*
 * npfd: resolves page faults of registered, unpinned memory.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>
#include "config.h"
#include "npf_features.h"
#include "npfd.h"
#include "mmwatch.h"
#include "npf_nic_abi.h"
#include "npf_version.h"

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

static struct npfd_cmdline cmdline;
static struct npfd_config config; /* in effect */

/*
 * The options that take effect in a running npfd, pushed into the modules
 * that use them: at start, and again after each reload.
 */
static void config_apply_live(const struct npfd_config *c)
{
	log_level = config_log_level(c);
	resolve_set_poll(c->poll_us);
	resolve_set_fault_around(c->fault_around_kib);
	policy_set_ws_dir(c->ws_dir);
	collect_cpu_trace_always(c->trace_cpu_faults);
}

/*
 * SIGHUP: re-read the configuration file. Clients stay connected; what
 * cannot change under them (socket, pin directory, staging buffer) waits
 * for a restart. A file that does not parse changes nothing.
 */
static void reload(void)
{
	struct npfd_config next;
	char err[768];

	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)(now_ns() / 1000));
	if (config_load(&cmdline, &next, err, sizeof(err))) {
		pr_err("reload: %s; keeping the running configuration", err);
		sd_notify(0, "READY=1\nSTATUS=reload failed: configuration error (see the log)");
		return;
	}
	config_reload_merge(&config, &next);
	config_apply_live(&config);
	pr_info("reload: configuration re-read from %s", cmdline.config_path);
	sd_notify(0, "READY=1\nSTATUS=running");
}

static void signal_ready(void *arg)
{
	int fd = (int)(long)arg;
	struct signalfd_siginfo si;

	while (read(fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			reload();
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

/*
 * Every client costs npfd descriptors (its socket, userfaultfd, backing
 * files): the default soft limit (1024) is what a few hundred clients
 * reach. The per-user limits (control.c) keep one user from taking them all.
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		pr_warn("cannot raise the descriptor limit to %llu: %s",
			(unsigned long long)rl.rlim_max, strerror(errno));
}

int main(int argc, char **argv)
{
	char why[768];
	int err;

	if (config_parse_args(argc, argv, &cmdline))
		return 2;
	switch (cmdline.action) {
	case NPFD_HELP:
		config_usage(stdout);
		return 0;
	case NPFD_CHECK:
		return npf_features_report(stdout) ? 1 : 0;
	case NPFD_VERSION:
		printf("npfd %s (npf protocol %d, fault record %d, maps %d, policy ABI %d, IO page table %d)\n",
		       NPF_VERSION, NPF_PROTO_VERSION, NPF_RECORD_VERSION, NPF_MAPS_VERSION,
		       NPF_POLICY_ABI_VERSION, NPF_IOPT_VERSION);
		return 0;
	default:
		break;
	}
	if (config_load(&cmdline, &config, why, sizeof(why))) {
		fprintf(stderr, "npfd: %s\n", why);
		return 2;
	}
	if (cmdline.action == NPFD_CHECK_CONFIG) {
		config_print(stdout, &config, cmdline.config_path);
		return 0;
	}
	log_level = config_log_level(&config);
	npfd.opt.socket_path = config.socket;
	npfd.opt.bpffs = config.bpffs;
	npfd.opt.config = cmdline.config_path;
	npfd.opt.foreground = config.foreground;
	npfd.opt.staging_pages = config.staging_pages;
	npfd.opt.poll_us = config.poll_us;

	npfd.start_ns = now_ns();
	raise_nofile();
	err = loop_init();
	if (!err)
		err = setup_signals();
	if (!err)
		err = resolve_init(npfd.opt.staging_pages);
	if (!err)
		err = collect_open(npfd.opt.bpffs);
	if (!err)
		config_apply_live(&config);
	if (!err)
		err = control_open(npfd.opt.socket_path);
	if (!err) {
		pr_info("ready (pid %d)", getpid());
		/* BPF loaded, maps pinned, socket listening: clients may come. */
		sd_notify(0, "READY=1\nSTATUS=running");
		err = loop_run();
	}
	sd_notify(0, "STOPPING=1");
	control_close();
	mmwatch_close();
	collect_close();
	resolve_exit();
	return err ? 1 : 0;
}
