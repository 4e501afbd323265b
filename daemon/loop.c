// SPDX-License-Identifier: GPL-2.0
/*
 * The event loop: one io_uring, a multishot poll per source. A source is a
 * file descriptor and a handler that drains it until EAGAIN, so an edge
 * (one CQE for several messages) loses nothing.
 *
 * Sources are named by (slot, generation) in the CQE's user_data: a CQE that
 * arrives after its source was deleted, or after the slot was reused, finds
 * a different generation and is dropped. No pointer ever lives in the ring.
 *
 * The loop knows only its sources and the hooks main.c gives it (struct
 * loop_hooks): each iteration reaps readiness, runs the intake hook (the
 * BPF ring buffer, so fault timestamps are known), the ready handlers in
 * arrival order, then the after hook (the resolver installs everything
 * they queued as one batch, devices are answered). Whether it sleeps, and
 * how long, the hooks say too.
 */
#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include "loop.h"
#include "log.h"

#define MAX_SOURCES 4096
#define USER_DATA_IGNORE (~0ULL)
/* A poll remove's own user_data: its target's, tagged (ids are < MAX_SOURCES). */
#define USER_DATA_REMOVE (1ULL << 31)

struct source {
	int fd;
	unsigned int mask;
	source_fn fn;
	void *arg;
	__u32 gen;
	bool used;
	bool ready; /* queued for this iteration */
};

static struct io_uring ring;
static struct source sources[MAX_SOURCES];
static int ready[MAX_SOURCES];
static int nready;
static int lowest_free;
static struct loop_hooks hooks;
static volatile int stopping;

void loop_set_hooks(const struct loop_hooks *h)
{
	hooks = *h;
}

void loop_stop(void)
{
	stopping = 1;
}

bool loop_stopping(void)
{
	return stopping;
}

static __u64 user_data(int id)
{
	return ((__u64)sources[id].gen << 32) | (__u32)id;
}

static struct io_uring_sqe *get_sqe(void)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

	if (!sqe) {
		io_uring_submit(&ring);
		sqe = io_uring_get_sqe(&ring);
	}
	return sqe;
}

static void arm(int id)
{
	struct io_uring_sqe *sqe = get_sqe();

	io_uring_prep_poll_multishot(sqe, sources[id].fd, sources[id].mask);
	io_uring_sqe_set_data64(sqe, user_data(id));
}

int loop_init(void)
{
	/* Task work runs only when npfd asks for events: no interrupts while it works. */
	int err = io_uring_queue_init(256, &ring,
				      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);

	if (err == -EINVAL)
		err = io_uring_queue_init(256, &ring, 0);
	if (err) {
		pr_err("cannot create the event loop io_uring: %s", strerror(-err));
		return err;
	}
	return 0;
}

int loop_take_over(void)
{
	struct io_uring old = ring;
	int id, err;

	err = loop_init();
	if (err) {
		ring = old; /* kept: the stop that follows still finds a ring to talk to */
		return err;
	}
	/*
	 * The old ring goes (its polls with it: a poll left armed pins its
	 * file); the thread that made it waits in a system call that is not
	 * the ring's, and never comes back to it.
	 */
	io_uring_queue_exit(&old);
	/*
	 * Readiness reaped but not yet handled stays queued, once: the old
	 * thread may have stopped in the middle of dispatch().
	 */
	for (id = 0, nready = 0; id < MAX_SOURCES; id++) {
		if (!sources[id].used)
			continue;
		arm(id);
		if (sources[id].ready)
			ready[nready++] = id;
	}
	return 0;
}

int source_add(int fd, unsigned int poll_mask, source_fn fn, void *arg)
{
	int id;

	for (id = lowest_free; id < MAX_SOURCES && sources[id].used; id++)
		;
	if (id == MAX_SOURCES) {
		pr_err("too many event sources (%d): refusing fd %d", MAX_SOURCES, fd);
		return -EMFILE;
	}
	lowest_free = id + 1;
	sources[id].fd = fd;
	sources[id].mask = poll_mask;
	sources[id].fn = fn;
	sources[id].arg = arg;
	sources[id].gen++;
	sources[id].used = true;
	sources[id].ready = false;
	/* Arming checks readiness at once: data that arrived before is not missed. */
	arm(id);
	return id;
}

/*
 * Remove the poll named ud. The kernel answers -EALREADY when the poll is
 * running at that moment (its task work pending) and then leaves it armed:
 * reap() tries again. A poll left armed would pin its file -- a dropped
 * client's socket would stay open, a closed userfaultfd would not wake its
 * threads.
 */
static void cancel(__u64 ud)
{
	struct io_uring_sqe *sqe = get_sqe();

	io_uring_prep_poll_remove(sqe, ud);
	io_uring_sqe_set_data64(sqe, ud | USER_DATA_REMOVE);
}

void source_del(int id)
{
	if (id < 0 || id >= MAX_SOURCES || !sources[id].used)
		return;
	cancel(user_data(id));
	/* The remove must reach the kernel before the caller closes the fd. */
	io_uring_submit(&ring);
	sources[id].used = false;
	sources[id].gen++;
	if (id < lowest_free)
		lowest_free = id;
}

static void reap(void)
{
	struct io_uring_cqe *cqe;
	unsigned int head, n = 0;

	io_uring_for_each_cqe(&ring, head, cqe)
	{
		__u64 ud = io_uring_cqe_get_data64(cqe);
		int id = (int)(__u32)ud;

		n++;
		if (ud == USER_DATA_IGNORE)
			continue;
		if (ud & USER_DATA_REMOVE) {
			if (cqe->res == -EALREADY)
				cancel(ud & ~USER_DATA_REMOVE);
			continue;
		}
		if (id >= MAX_SOURCES)
			continue;
		if (!sources[id].used || sources[id].gen != (__u32)(ud >> 32)) {
			/*
			 * A poll that outlived its source (its remove missed it):
			 * it pins the file (a dropped client's socket would never
			 * be released), so remove it now that it has shown itself.
			 */
			if (cqe->flags & IORING_CQE_F_MORE)
				cancel(ud);
			continue;
		}
		if (cqe->res < 0 && cqe->res != -ECANCELED)
			pr_warn("poll of fd %d failed: %s", sources[id].fd, strerror(-cqe->res));
		if (!(cqe->flags & IORING_CQE_F_MORE))
			arm(id); /* multishot ended (overflow, cancel): re-arm */
		if (!sources[id].ready) {
			sources[id].ready = true;
			ready[nready++] = id;
		}
	}
	io_uring_cq_advance(&ring, n);
}

static void dispatch(void)
{
	int i;

	for (i = 0; i < nready; i++) {
		int id = ready[i];

		/* A handler earlier in this pass may have deleted this source. */
		if (!sources[id].used || !sources[id].ready)
			continue;
		sources[id].ready = false;
		sources[id].fn(sources[id].arg);
	}
	nready = 0;
}

int loop_run(void)
{
	unsigned int spins = 0;

	while (!stopping) {
		struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 200 * 1000 * 1000};
		struct io_uring_cqe *cqe;
		bool polling, record_waits;
		int err;

		/*
		 * Work left for later (a userfaultfd said EAGAIN while an mm
		 * event was pending, a device request waits for its policy's
		 * decision): come back soon, not on the next fault.
		 */
		if (hooks.pending && hooks.pending())
			ts.tv_nsec = 50 * 1000;
		polling = hooks.polling && hooks.polling();
		/* While npfd polls, device records do not wake it: see before sleeping. */
		record_waits = hooks.unwoken && hooks.unwoken(polling);
		if (polling) {
			/*
			 * Busy-polling the hot userfaultfds (resolve.c): enter
			 * the ring only now and then, for everything else.
			 */
			if (++spins % 32 == 0)
				io_uring_submit_and_get_events(&ring);
			/* quiet for a while: let the threads sharing this CPU run */
			if (hooks.quiet && hooks.quiet())
				sched_yield();
		} else if (nready == 0 && !record_waits) {
			err = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, NULL);
			if (err < 0 && err != -ETIME && err != -EINTR) {
				pr_err("event loop: io_uring wait failed: %s", strerror(-err));
				return err;
			}
		} else {
			io_uring_submit(&ring);
		}
		reap();
		if (hooks.intake)
			hooks.intake();
		dispatch();
		if (hooks.after)
			hooks.after(polling);
	}
	return 0;
}
