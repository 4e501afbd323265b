// SPDX-License-Identifier: GPL-2.0
/* Small helpers more than one part of npfd needs. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include "npfd.h"

/* mkdir -p: create path and its missing parents; 0 or -errno. */
int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	char *p;

	snprintf(buf, sizeof(buf), "%s", path);
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		return -errno;
	return 0;
}
