/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A test's own cgroup v1 memory cgroup (tests/evict_cgroup.c,
 * tests/adv_memcg_ceiling.c): MEMCG_PREFIX + the test's pid under this
 * process's own memory cgroup, its files read and written, those left by
 * a killed run removed. The test defines MEMCG_PREFIX and fills cg[].
 */
#ifndef NPF_TEST_MEMCG_FIXTURE_H
#define NPF_TEST_MEMCG_FIXTURE_H

#include <dirent.h>
#include <stdint.h>
#include "harness.h"

static char cg[512]; /* the test's cgroup directory */

static inline int put(const char *name, const char *val)
{
	char path[600];
	int fd, ok;

	snprintf(path, sizeof(path), "%s/%s", cg, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ok = write(fd, val, strlen(val)) == (ssize_t)strlen(val);
	close(fd);
	return ok ? 0 : -1;
}

static inline unsigned long long get(const char *name, const char *key)
{
	char path[600], line[256];
	unsigned long long v = ~0ULL;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", cg, name);
	f = fopen(path, "re");
	if (!f)
		return v;
	while (fgets(line, sizeof(line), f)) {
		size_t n = key ? strlen(key) : 0;

		if (!key || (!strncmp(line, key, n) && line[n] == ' ')) {
			v = strtoull(line + (key ? n + 1 : 0), NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

/* The memory hierarchy's directory of this process's own cgroup, or skip. */
static inline void own_cgroup(char *out, size_t len)
{
	char line[512];
	FILE *f = fopen("/proc/self/cgroup", "re");

	if (access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK))
		th_skip("no cgroup v1 memory hierarchy at /sys/fs/cgroup/memory");
	TH_ASSERT(f, "/proc/self/cgroup: %s", strerror(errno));
	out[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *c = strstr(line, ":memory:");

		if (c) {
			c[strcspn(c, "\n")] = '\0';
			snprintf(out, len, "/sys/fs/cgroup/memory%s",
				 strcmp(c + 8, "/") ? c + 8 : "");
		}
	}
	fclose(f);
	if (!out[0])
		th_skip("this process has no cgroup v1 memory cgroup");
}

/* Cgroups left by a run killed before it could remove its own. */
static inline void remove_stale(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char path[700];
		int pid;

		if (strncmp(e->d_name, MEMCG_PREFIX, strlen(MEMCG_PREFIX)))
			continue;
		pid = atoi(e->d_name + strlen(MEMCG_PREFIX));
		if (pid > 0 && kill(pid, 0) && errno == ESRCH) {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			rmdir(path);
		}
	}
	if (d)
		closedir(d);
}

/*
 * Make the test's cgroup, limited to limit bytes with no swap for it (so
 * that only eviction keeps it below), or skip. The caller has its cleanup
 * registered first: it removes cg once cg[0] is set.
 */
static inline void memcg_make(unsigned long limit)
{
	char own[400], lim[32];

	own_cgroup(own, sizeof(own));
	remove_stale(own);
	snprintf(cg, sizeof(cg), "%s/" MEMCG_PREFIX "%d", own, (int)getpid());
	if (mkdir(cg, 0755)) {
		int e = errno;

		cg[0] = '\0';
		th_skip("cannot create a memory cgroup under %s: %s", own, strerror(e));
	}
	snprintf(lim, sizeof(lim), "%lu", limit);
	TH_ASSERT(!put("memory.limit_in_bytes", lim), "set %s/memory.limit_in_bytes: %s", cg,
		  strerror(errno));
	put("memory.memsw.limit_in_bytes", lim);
	put("memory.swappiness", "0");
}

#endif
