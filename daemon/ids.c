// SPDX-License-Identifier: GPL-2.0
/*
 * Region and device ids (ids.h): handed out here, never reused across
 * restarts.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ids.h"
#include "log.h"

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
static __u32 next_id[ID_KINDS]; /* the last id handed out, per kind */

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

void ids_open(const char *socket_path)
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
	for (int k = 0; k < ID_KINDS; k++)
		next_id[k] = (__u32)mark;
	ids_save((__u32)mark);
	if (mark)
		pr_info("ids start above %lu (%s)", mark, path);
}

/*
 * A clean exit with regions still served keeps the mark: their clients
 * adopt them in the next npfd. With none, nobody can come back.
 */
void ids_close(bool regions_left)
{
	char path[64];

	if (ids_fd < 0 || regions_left)
		return;
	snprintf(path, sizeof(path), "/proc/thread-self/fd/%d", ids_fd);
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

__u32 id_alloc(enum id_kind kind)
{
	__u32 id = ++next_id[kind];

	if (id >= ids_mark)
		ids_save(id);
	return id;
}

void id_taken(enum id_kind kind, __u32 id)
{
	if (id > next_id[kind])
		next_id[kind] = id;
	if (id >= ids_mark)
		ids_save(id);
}
