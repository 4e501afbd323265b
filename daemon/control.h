/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The control socket (control.c): clients connect, send requests, get one
 * reply per request, in order. The top of npfd below main.c: it calls
 * every layer, none calls it.
 */
#ifndef NPFD_CONTROL_H
#define NPFD_CONTROL_H

#include <stddef.h>
#include <sys/types.h>
#include "npf_abi.h"

/*
 * Per-uid limits: what one user of the socket may make npfd hold, so that
 * one user cannot lock the others out (root is not limited). Descriptors
 * are the connection sockets, userfaultfds, backing files, swap stores
 * (one per anonymous region), pidfds and layout journals (one each per
 * process) npfd holds for the user: as many as its regions and
 * connections may be.
 */
#define NPFD_UID_MAX_CONNECTIONS 64
#define NPFD_UID_MAX_REGIONS 256
#define NPFD_UID_MAX_FDS 320
/* May uid hold that much more? 0, or -errno with the reason in err (region.c's hook). */
int uid_limit_check(uid_t uid, unsigned int more_regions, unsigned int more_fds, char *err,
		    size_t errlen);
/*
 * Listen on path, mode 0660, of group gid ((gid_t)-1: npfd's own); pin_dir
 * and started_ns are what npfctl status reports.
 */
int control_open(const char *path, gid_t gid, const char *pin_dir, __u64 started_ns);
void control_close(void);
/* After each loop pass: read the clients whose waiting request was answered. */
void control_flush(void);
/* Give up the address spaces of processes npfd's calls into are stuck in (mmcall.h). */
void control_give_up_stuck(void);
/* Clients with requests to read in the next pass (the loop must not sleep). */
bool control_pending(void);

#endif
