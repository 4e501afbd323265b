/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A control request whose answer waits for devices to acknowledge their
 * invalidation (unregister, detach; seed 000 Fig. 2): npfd posts the
 * invalidations, goes on serving, and answers when the last device has
 * acknowledged or its deadline has passed (device.c). Nothing waits inside
 * a handler. The lower layers (region.c, device.c) only count and fail the
 * wait; the control socket (control.c) makes it and gives the answer.
 */
#ifndef NPFD_WAIT_H
#define NPFD_WAIT_H

#include <stdbool.h>
#include "npf_abi.h"

struct npfd_client;

struct npfd_wait {
	struct npfd_client *client; /* to answer; NULL once it went */
	struct npf_msg_hdr req;	    /* the request, for the reply's type and seq */
	unsigned int pending;	    /* devices whose acknowledgement is awaited */
	bool deferred;		    /* the handler returned: wait_done() answers */
	int status;		    /* 0, or the first failure (-errno) */
	char err[NPF_ERRMSG_LEN];   /* its reason */
	/* in a list of requests waiting for the same thing (evict.c: a ring's zaps) */
	struct npfd_wait *next;
	/* Called by wait_done() once nothing is pending and the handler has returned. */
	void (*answer)(struct npfd_wait *w);
};

/* Record a failure (the first one is the one reported). */
void wait_fail(struct npfd_wait *w, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* One device w waited for has ended its retirement: the last one answers. */
void wait_done(struct npfd_wait *w);

#endif
