// SPDX-License-Identifier: GPL-2.0
/*
 * Busy-polling (busypoll.h). Waking a sleeping npfd costs more than the fault itself on
 * a virtual machine (a halted vCPU must be rescheduled by the host), and
 * faults come in trains (a scan, a thread walking a buffer). So for poll_ns
 * after the last fault npfd keeps reading the userfaultfds that faulted
 * instead of sleeping -- but only when a CPU is spare: when the faulting
 * threads already keep every CPU busy, a spinning npfd takes CPU time they
 * need (measured: -26% throughput, 4 threads on 2 CPUs). 0 disables it.
 *
 * The resolver notes the userfaultfds that had messages; the event loop
 * asks whether to poll (main.c's hooks) and, while it does, has the hot
 * userfaultfds read again after each pass.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "busypoll.h"
#include "util.h"

#define MAX_HOT 16
static struct npfd_mm *hot[MAX_HOT];
static unsigned int nhot;
static __u64 poll_until, poll_ns;
static long ncpus;
static int loadavg_fd = -1;

void busypoll_set(unsigned int us)
{
	poll_ns = (__u64)us * 1000;
	ncpus = sysconf(_SC_NPROCESSORS_ONLN);
}

/* Is a CPU left once npfd spins? /proc/loadavg's 4th field counts running tasks. */
static bool cpu_to_spare(void)
{
	unsigned int running, total;
	char buf[128];
	ssize_t n;

	if (loadavg_fd < 0)
		loadavg_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	n = loadavg_fd >= 0 ? pread(loadavg_fd, buf, sizeof(buf) - 1, 0) : -1;
	if (n <= 0)
		return true;
	buf[n] = '\0';
	if (sscanf(buf, "%*s %*s %*s %u/%u", &running, &total) != 2)
		return true;
	return (long)running <= ncpus; /* npfd itself is one of the running */
}

/*
 * Work arrived at t: keep polling for poll_ns more, if a CPU is spare. A
 * train of faults keeps npfd polling, but the spare CPU is looked for
 * again every SPARE_RECHECK_NS: others may have become busy meanwhile.
 */
#define SPARE_RECHECK_NS (1000 * 1000)
static __u64 spare_checked;

static bool note_busy(__u64 t)
{
	if (!poll_ns)
		return false;
	if (t >= poll_until || t - spare_checked >= SPARE_RECHECK_NS) {
		spare_checked = t;
		if (!cpu_to_spare()) {
			poll_until = 0;
			return false;
		}
	}
	poll_until = t + poll_ns;
	return true;
}

/* A device page request arrived: its next one comes through the ring buffer. */
void busypoll_note_device(void)
{
	note_busy(now_ns());
}

/* A userfaultfd had messages at t: poll it while polling lasts. */
void busypoll_note_hot(struct npfd_mm *mm, __u64 t)
{
	unsigned int i;

	if (!note_busy(t))
		return;
	for (i = 0; i < nhot; i++)
		if (hot[i] == mm)
			return;
	if (nhot == MAX_HOT)
		memmove(hot, hot + 1, --nhot * sizeof(hot[0])); /* forget the oldest */
	hot[nhot++] = mm;
}

static __u64 poll_seen; /* when busypoll_polling() last looked at the clock */

bool busypoll_polling(void)
{
	if (!poll_until)
		return false;
	poll_seen = now_ns();
	if (poll_seen < poll_until)
		return true;
	poll_until = 0;
	nhot = 0;
	return false;
}

/*
 * Polling, but nothing came for a while (as of the last busypoll_polling()):
 * npfd may share its CPU with the threads it serves (a NIC engine waiting
 * for its answer), so it lets them run between two looks.
 */
#define POLL_QUIET_NS (10 * 1000)
bool busypoll_quiet(void)
{
	return poll_until && poll_seen + poll_ns - poll_until > POLL_QUIET_NS;
}

/* While polling: read each hot userfaultfd (fn: the resolver's handler). */
void busypoll_hot(void (*fn)(void *mm))
{
	unsigned int i;

	for (i = 0; i < nhot; i++)
		fn(hot[i]);
}

/* mm is going: it is not polled any more. */
void busypoll_forget(struct npfd_mm *mm)
{
	unsigned int h, k = 0;

	for (h = 0; h < nhot; h++)
		if (hot[h] != mm)
			hot[k++] = hot[h];
	nhot = k;
}
