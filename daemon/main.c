// SPDX-License-Identifier: GPL-2.0
/*
 * npfd: resolves page faults of registered, unpinned memory.
 *
 * main.c starts and stops npfd and is the one file that knows every layer:
 * it applies the configuration (at start and on SIGHUP) and connects the
 * layers' hooks, so that each layer calls only those below it
 * (docs/design.md, "Layers"; scripts/check-layers.sh checks it).
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
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>
#include "config.h"
#include "npf_features.h"
#include "busypoll.h"
#include "collect.h"
#include "control.h"
#include "device.h"
#include "evict.h"
#include "memcg.h"
#include "moved.h"
#include "ids.h"
#include "log.h"
#include "loop.h"
#include "mmcall.h"
#include "mmwatch.h"
#include "policy.h"
#include "region.h"
#include "resolve.h"
#include "util.h"
#include "wsstore.h"
#include "npf_nic_abi.h"
#include "npf_version.h"

/*
 * The hooks: where a lower layer hands something up (wire() below says
 * which goes where). The functions here are the steps that take more than
 * one layer.
 */

/* A device's page request from the ring buffer: keep polling for the next, serve it. */
static void device_request_read(const struct npf_fault_record *rec)
{
	busypoll_note_device();
	device_record(rec);
}

/* After the handlers: install the batch, answer devices, then the control clients. */
static void loop_after(bool polling)
{
	if (polling)
		busypoll_hot(resolve_uffd_ready);
	moved_step(); /* before the faults that wait for it */
	resolve_flush();
	device_flush();
	evict_tick();
	mmwatch_flush();
	mmwatch_tick();
	control_flush();
	control_give_up_stuck();
	mmcall_unregister_flush();
}

/*
 * A batch left work for later (a userfaultfd said EAGAIN while an mm event
 * was pending), a device request waits for its policy's decision, an
 * eviction batch for an acknowledgement, its writes or its zap, or a
 * client has more requests than the one read in the pass.
 */
static bool loop_pending(void)
{
	return resolve_pending() || device_awaiting() || evict_busy() || control_pending() ||
	       moved_pending();
}

/*
 * Devices first: no DMA may reach the pages once they are not served. When
 * npfd stops, the pages stay registered and installed and the next npfd
 * adopts the devices: their waiting requests are not failed, their entries
 * stay (device_mm_gone() forgets them).
 */
static void region_going(struct npfd_region *r, bool stopping, bool alive, struct npfd_wait *w)
{
	if (!stopping)
		device_region_gone(r, alive, w);
	ws_region_gone(r);
	policy_region_gone(r);
	memcg_region_gone(r);
	evict_region_gone(r, stopping, w);
}

/*
 * Its process unregisters r and keeps the memory: the pages only the swap
 * store holds go back first. Under a memory cgroup with no room for them
 * the process would be OOM-killed, or (not put back) read zeros there:
 * the unregister is refused and r stays registered and served.
 */
static int region_put_back(struct npfd_region *r, char *err, size_t errlen)
{
	/* checked when a put-back begins, not at each of its steps (each would count all) */
	__u64 stored = evict_put_back_under_way(r) ? 0 : evict_stored_only(r), room;
	int ret;

	if (stored && !memcg_room(r->mm, stored, &room))
		return refuse(
			err, errlen, ENOMEM,
			"region %u: %llu of its pages are only in npfd's swap store and its memory cgroup has room for %llu: unregistered, they would be lost, or put back, its process OOM-killed; it stays registered (unmap or MADV_DONTNEED the memory, or raise the limit)",
			r->id, (unsigned long long)stored, (unsigned long long)room);
	ret = evict_put_back(r);
	if (ret == -EINPROGRESS)
		return refuse(
			err, errlen, EINPROGRESS,
			"region %u: part of its evicted pages went back, more are to go: it stays registered until they are (ask again)",
			r->id);
	if (ret)
		return refuse(
			err, errlen, -ret,
			"region %u: some of its evicted pages could not be put back (%s); it stays registered",
			r->id, strerror(-ret));
	return 0;
}

/* A region registered: the wsreplay record, the client's budget. */
static void region_registered(struct npfd_region *r)
{
	ws_region_registered(r);
	memcg_region_registered(r); /* a cgroup memory limit sets its budget first */
	evict_region_registered(r);
}

/* An address space is gone: its devices, its eviction ring. */
static void mm_gone(struct npfd_mm *mm)
{
	device_mm_gone(mm);
	evict_mm_gone(mm);
}

/* Pages installed: devices waiting for them may map them; eviction learns which are clean. */
static void pages_installed(struct npfd_region *r, __u64 start, __u64 npages, bool clean)
{
	device_pages_installed(r, start, npages);
	evict_installed(r, start, npages, clean);
}

/* Pages an install found there already: devices may go on; eviction keeps their state. */
static void pages_present(struct npfd_region *r, __u64 start, __u64 npages)
{
	device_pages_installed(r, start, npages);
	evict_present(r, start, npages);
}

/* Does a fault wait for eviction to make room: under its cgroup's ceiling, or its budget? */
static bool hold_fault(const struct npfd_region *r, __u64 npages)
{
	return evict_hold(r, npages) ||
	       memcg_hold(r, npages); /* memcg_hold() counts what it lets by */
}

/* An address space is being torn down: forget its queued faults, stop polling it. */
static void mm_going(struct npfd_mm *mm)
{
	resolve_forget_mm(mm);
	busypoll_forget(mm);
}

static void wire(void)
{
	static const struct loop_hooks loop = {
		.pending = loop_pending,
		.polling = busypoll_polling,
		.quiet = busypoll_quiet,
		/* while npfd polls, device records do not wake it: may it sleep? */
		.unwoken = collect_ring_polling,
		/* before the handlers: fault records (timestamps, device requests) */
		.intake = collect_drain,
		.after = loop_after,
	};
	static const struct collect_hooks collect = {
		.device_record = device_request_read,
		.drained = device_await_expire,
	};
	static const struct region_hooks region = {
		.uffd_ready = resolve_uffd_ready,
		.uid_limit = uid_limit_check,
		.registered = region_registered,
		.adopted = evict_region_adopted,
		.put_back = region_put_back,
		.going = region_going,
		.range_removed = device_range_removed,
		.dropped = evict_range_removed,
		.cut = evict_region_cut,
		.moved = evict_region_moved,
		.part_leaving = evict_part_leaving,
		.unmapping = evict_range_unmapped,
		.mm_going = mm_going,
		.mm_gone = mm_gone,
	};
	static const struct resolve_hooks resolve = {
		.installed = pages_installed,
		.present = pages_present,
		.wp_fault = evict_wp_fault,
		.stored = evict_run_stored,
		.zap_may_run = evict_run_zap_may_run,
		.install_stored = evict_install_stored,
		.hold = hold_fault,
		.record = ws_record,
	};

	static const struct device_hooks device = {
		.wanted = evict_device_wanted,
	};

	loop_set_hooks(&loop);
	collect_set_hooks(&collect);
	device_set_hooks(&device);
	region_set_hooks(&region);
	resolve_set_hooks(&resolve);
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
	busypoll_set(c->poll_us);
	resolve_set_fault_around(c->fault_around_kib);
	ws_set_dir(c->ws_dir);
	collect_cpu_trace_always(c->trace_cpu_faults);
	evict_set_config(c->client_budget_mib, c->budget_high_pct, c->budget_low_pct);
	mmcall_set_timeout_ms(c->mm_call_timeout_ms);
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
		loop_stop();
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

/* Run the loop, then stop: on the main thread, or on the one that took the loop over. */
static int serve(int err)
{
	if (!err)
		err = loop_run();
	sd_notify(0, "STOPPING=1");
	ids_close(nr_regions != 0);
	moved_stop();
	evict_stop();
	control_close();
	mmwatch_close();
	collect_close();
	resolve_exit();
	evict_exit();
	return err ? 1 : 0;
}

/*
 * A call the loop made on the fault path missed its deadline: this thread
 * (mmcall.c's watchdog) runs the loop from now on, and the old one exits
 * once its call returns. The stuck process goes first: what the old thread
 * left half done is its (mmcall.h); the loop then starts again from its
 * top, where readiness already reaped waits to be handled.
 */
static void __attribute__((noreturn)) loop_moved(void)
{
	int err = loop_take_over();

	if (err)
		pr_err("cannot take the event loop over: %s", strerror(-err));
	else
		pr_warn("the event loop goes on on thread %ld: the one that ran it waits in a client's address space",
			(long)syscall(SYS_gettid));
	/* what a late install on the old thread reads from holds nothing of anyone's any more */
	resolve_retire_sources();
	evict_retire_sources();
	moved_retire_sources();
	control_give_up_stuck();
	err = serve(err);
	/*
	 * Not exit(): its handlers include LeakSanitizer's (make
	 * check-sanitize), which cannot suspend the exited leader thread and
	 * reports that instead of leaks.
	 */
	fflush(NULL);
	_exit(err);
}

int main(int argc, char **argv)
{
	char why[768];
	__u64 start_ns;
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

	start_ns = now_ns();
	raise_nofile();
	wire();
	mmwatch_set_pin_dir(config.bpffs);
	err = loop_init();
	if (!err)
		err = setup_signals();
	if (!err)
		err = resolve_init(config.staging_pages);
	if (!err)
		err = evict_init(config.swap_dir,
				 &(struct evict_hooks){.region_evictable =
							       memcg_region_registered});
	if (!err)
		err = collect_open(config.bpffs);
	if (!err)
		config_apply_live(&config);
	if (!err) {
		gid_t gid;

		err = config_socket_gid(&config, &gid);
		if (err)
			pr_err("socket-group: there is no group '%s' any more",
			       config.socket_group);
		else
			err = control_open(config.socket, gid, config.bpffs, start_ns);
	}
	if (!err)
		ids_open(config.socket);
	if (!err) {
		pr_info("ready (pid %d)", getpid());
		/* BPF loaded, maps pinned, socket listening: clients may come. */
		sd_notify(0, "READY=1\nSTATUS=running");
		if (mmcall_watch(loop_moved))
			pr_warn("cannot start the watchdog of calls on the fault path: a client that holds its own address space can hold npfd there");
	}
	return serve(err);
}
