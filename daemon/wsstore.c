// SPDX-License-Identifier: GPL-2.0
/*
 * Working-set storage for the wsreplay policy (policies/wsreplay.bpf.c):
 * the policy marks the faults it wants kept (NPF_DECIDE_RECORD), npfd
 * writes them here, and when a region of that name is registered again
 * with wsreplay loaded, its recorded pages are queued before the first
 * fault. Loading and running policies is policy.c's; this file only keeps
 * the records.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "log.h"
#include "objects.h"
#include "policy.h"
#include "resolve.h"
#include "util.h"
#include "wsstore.h"

/*
 * A region's record is a file named after its owner's uid and the
 * region's name under ws_dir (UID.NAME.ws): NPF_WS_MAGIC, then the region-relative
 * page index of every recorded fault (__u64, native order). A run that
 * replayed a record appends to it, so the record grows to the union of
 * the runs; a run that did not starts it afresh.
 */
#define NPF_WS_MAGIC "NPFWS001"

static const char *ws_dir; /* --ws-dir: set at start and on reload */

void ws_set_dir(const char *dir)
{
	ws_dir = dir;
}

static int ws_path(const struct npfd_region *r, char *buf, size_t len)
{
	const char *c;

	if (!r->name[0])
		return -EINVAL;
	for (c = r->name; *c; c++)
		if (*c == '/' || (*c == '.' && c == r->name))
			return -EINVAL; /* a name is not a path */
	/*
	 * The owner's uid first: a record is one user's (another user's
	 * region of the same name read it and wrote over it; found by an
	 * adversarial review).
	 */
	return snprintf(buf, len, "%s/%u.%s.ws", ws_dir, (unsigned int)r->mm->uid, r->name) <
			       (int)len ?
		       0 :
		       -ENAMETOOLONG;
}

void ws_record(struct npfd_region *r, __u64 page)
{
	__u64 idx = (page - r->start) >> NPF_PAGE_SHIFT;
	char path[512];

	if (r->ws_fd < 0) {
		if (r->ws_failed || ws_path(r, path, sizeof(path)))
			return;
		mkdir_p(ws_dir, 0750);
		r->ws_fd =
			open(path,
			     O_WRONLY | O_CREAT | O_CLOEXEC | (r->ws_replayed ? O_APPEND : O_TRUNC),
			     0640);
		if (r->ws_fd < 0) {
			pr_warn("region %u: cannot record its working set in %s: %s", r->id, path,
				strerror(errno));
			r->ws_failed = true;
			return;
		}
		if (!r->ws_replayed && write(r->ws_fd, NPF_WS_MAGIC, 8) != 8)
			pr_warn("region %u: cannot write %s", r->id, path);
	}
	if (write(r->ws_fd, &idx, sizeof(idx)) != sizeof(idx)) {
		pr_warn("region %u: recording the working set failed: %s", r->id, strerror(errno));
		close(r->ws_fd);
		r->ws_fd = -1;
		r->ws_failed = true;
	}
}

/* A region was registered: with wsreplay loaded, prefetch what its last run faulted on. */
void ws_region_registered(struct npfd_region *r)
{
	__u64 idx[512], npages = r->length >> NPF_PAGE_SHIFT, queued = 0;
	char path[512], magic[8];
	ssize_t n;
	int fd;

	r->ws_fd = -1;
	if (!policy_loaded("wsreplay") || ws_path(r, path, sizeof(path)))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (read(fd, magic, 8) != 8 || memcmp(magic, NPF_WS_MAGIC, 8)) {
		pr_warn("region %u: %s is not a working-set record: ignored", r->id, path);
		close(fd);
		return;
	}
	while ((n = read(fd, idx, sizeof(idx))) > 0) {
		ssize_t i;

		for (i = 0; i < n / (ssize_t)sizeof(idx[0]); i++)
			if (idx[i] < npages &&
			    !holes_contain(&r->holes, r->start + idx[i] * NPF_PAGE_SIZE)) {
				resolve_queue(r->mm, r->start + idx[i] * NPF_PAGE_SIZE, now_ns(),
					      false);
				queued++;
			}
	}
	close(fd);
	r->ws_replayed = true;
	pr_info("region %u: replaying %llu recorded pages from %s", r->id,
		(unsigned long long)queued, path);
}

/* A region is going away: its record, if one is being written, is complete. */
void ws_region_gone(struct npfd_region *r)
{
	if (r->ws_fd >= 0) {
		close(r->ws_fd);
		r->ws_fd = -1;
	}
}
