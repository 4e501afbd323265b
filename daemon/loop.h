/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The event loop (loop.c): one io_uring, readiness sources, and the hooks
 * that say what runs around the handlers and whether the loop may sleep.
 * It calls nothing above it: main.c hands it the hooks.
 */
#ifndef NPFD_LOOP_H
#define NPFD_LOOP_H

#include <stdbool.h>

/* A readiness source's handler: it drains its fd until EAGAIN. */
typedef void (*source_fn)(void *arg);

/* Every member may be NULL. */
struct loop_hooks {
	/* Work due soon: sleep at most 50 us instead of 200 ms. */
	bool (*pending)(void);
	/* Busy-poll: do not sleep, enter the ring every 32 passes. */
	bool (*polling)(void);
	/* Polling, but quiet for a while: yield the CPU between passes. */
	bool (*quiet)(void);
	/* Told whether the loop polls; true: work waits that raised no readiness, do not sleep. */
	bool (*unwoken)(bool polling);
	/* After readiness is reaped, before the handlers run. */
	void (*intake)(void);
	/* After the handlers (polling: as polling() said for this pass). */
	void (*after)(bool polling);
};

int loop_init(void);
void loop_set_hooks(const struct loop_hooks *h);
/* Returns an id for source_del(), or -errno. */
int source_add(int fd, unsigned int poll_mask, source_fn fn, void *arg);
void source_del(int id);
int loop_run(void);
/*
 * The calling thread runs the loop from now on (mmcall.c moved it: the
 * thread that ran it waits in a client's address space): a ring of its
 * own, since the loop's accepts one submitter, with every source armed
 * again. 0 or -errno.
 */
int loop_take_over(void);
/* End loop_run() after this pass (a signal handler's request). */
void loop_stop(void);
/* Is npfd stopping (loop_stop() was called)? */
bool loop_stopping(void);

#endif
