// SPDX-License-Identifier: GPL-2.0
/* Requests answered when devices acknowledge (wait.h). */
#include <stdarg.h>
#include <stdio.h>
#include "wait.h"

void wait_fail(struct npfd_wait *w, int status, const char *fmt, ...)
{
	va_list ap;

	if (w->status)
		return; /* the first failure is the one reported */
	w->status = status;
	va_start(ap, fmt);
	vsnprintf(w->err, sizeof(w->err), fmt, ap);
	va_end(ap);
}

/*
 * One device w waited for has ended its retirement. When it was the last,
 * answer the request (unless the handler has not returned yet: then it
 * answers itself).
 */
void wait_done(struct npfd_wait *w)
{
	if (--w->pending || !w->deferred)
		return;
	w->answer(w);
}
