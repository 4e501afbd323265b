// SPDX-License-Identifier: GPL-2.0
/*
 * npfd: resolves page faults of registered, unpinned memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

/*
 * Region and device ids are never reused across restarts: a client whose
 * npfd died adopts its regions and devices under their ids (a device puts
 * its id in every page request), so a new npfd must not give those ids to
 * anyone else first. npfd keeps, in npfd.ids beside its socket (a
 * directory only it may write), a mark above every id it may have handed
 * out, moved up a block at a time, and starts above the mark it finds.
 */
#define IDS_BLOCK 1024
static int ids_fd = -1;
static __u32 ids_mark;

static void ids_save(__u32 id)
{
	char buf[16];
	int n;

	ids_mark = (id / IDS_BLOCK + 1) * IDS_BLOCK;
	if (ids_fd < 0)
		return;
	n = snprintf(buf, sizeof(buf), "%10u\n", ids_mark);
	if (pwrite(ids_fd, buf, (size_t)n, 0) != n)
		pr_warn("cannot write the id mark: %s (ids may be reused after a restart)",
			strerror(errno));
}

static void ids_open(const char *socket_path)
{
	char path[PATH_MAX], buf[32] = "";
	const char *slash = strrchr(socket_path, '/');
	unsigned long mark = 0;
	ssize_t n;

	/* the socket's directory, which control_open() checked is npfd's own */
	snprintf(path, sizeof(path), "%.*snpfd.ids", slash ? (int)(slash - socket_path + 1) : 0,
		 socket_path);
	ids_fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (ids_fd < 0) {
		pr_warn("cannot open %s: %s (region and device ids may be reused after a restart)",
			path, strerror(errno));
		return;
	}
	n = pread(ids_fd, buf, sizeof(buf) - 1, 0);
	if (n > 0) {
		buf[n] = '\0';
		mark = strtoul(buf, NULL, 10);
	}
	/* ids stay below 2^31 (libnpf returns them as int); wrap far before */
	if (mark >= 0x7fff0000UL)
		mark = 0;
	npfd.next_region_id = npfd.next_device_id = (__u32)mark;
	ids_save((__u32)mark);
	if (mark)
		pr_info("ids start above %lu (%s)", mark, path);
}

/*
 * A clean exit with regions still served keeps the mark: their clients
 * adopt them in the next npfd. With none, nobody can come back.
 */
static void ids_close(bool regions_left)
{
	char path[64];

	if (ids_fd < 0 || regions_left)
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", ids_fd);
	{
		char target[PATH_MAX];
		ssize_t n = readlink(path, target, sizeof(target) - 1);

		if (n > 0) {
			target[n] = '\0';
			unlink(target);
		}
	}
	close(ids_fd);
	ids_fd = -1;
}

__u32 id_alloc(__u32 *counter)
{
	__u32 id = ++*counter;

	if (id >= ids_mark)
		ids_save(id);
	return id;
}

void id_taken(__u32 *counter, __u32 id)
{
	if (id > *counter)
		*counter = id;
	if (id >= ids_mark)
		ids_save(id);
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
	if (!err)
		ids_open(npfd.opt.socket_path);
	if (!err) {
		pr_info("ready (pid %d)", getpid());
		/* BPF loaded, maps pinned, socket listening: clients may come. */
		sd_notify(0, "READY=1\nSTATUS=running");
		err = loop_run();
	}
	sd_notify(0, "STOPPING=1");
	ids_close(npfd.nr_regions != 0);
	control_close();
	mmwatch_close();
	collect_close();
	resolve_exit();
	return err ? 1 : 0;
}
