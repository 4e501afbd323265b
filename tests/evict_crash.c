// SPDX-License-Identifier: GPL-2.0
/*
 * npfd is killed (SIGKILL: no put-back, nothing cleaned up) while most of
 * an anonymous region is evicted to its swap store. The store outlives
 * it: the next npfd adopts the region (libnpf hands it over) and every
 * evicted page reads back with its bytes, not zeros. Then: the store goes
 * with its region (munmap); a store of a process that is gone, or of
 * another boot, is deleted when npfd starts, one of a live process is not.
 */
#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include "budget.h"
#include "restart_common.h"

#define PG 4096UL
#define NPG 1024UL
#define BUDGET 128UL

static struct rs_npfd d;

static void check(const char *mem, uint64_t gen, const char *what)
{
	uint64_t bad = 0, zero = 0, first = NPG;

	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t w = 0; w < PG / 8; w++) {
			uint64_t v = ((const uint64_t *)(mem + p * PG))[w];

			if (v == th_word(gen, p, w))
				continue;
			bad++;
			zero += !v;
			if (first == NPG)
				first = p;
		}
	if (bad)
		th_fail("%s: %llu words wrong (%llu zeros), the first in page %llu", what,
			(unsigned long long)bad, (unsigned long long)zero,
			(unsigned long long)first);
}

/* The stores in the swap directory: how many files, and pages of data in them. */
static int stores(uint64_t *pages)
{
	DIR *dir = opendir(d.swap);
	struct dirent *de;
	int n = 0;

	*pages = 0;
	TH_ASSERT(dir, "opendir %s: %s", d.swap, strerror(errno));
	while ((de = readdir(dir))) {
		off_t data, hole = 0;
		int fd;

		if (de->d_name[0] == '.' || !strcmp(de->d_name, "README"))
			continue;
		n++;
		fd = openat(dirfd(dir), de->d_name, O_RDONLY);
		TH_ASSERT(fd >= 0, "open %s: %s", de->d_name, strerror(errno));
		while ((data = lseek(fd, hole, SEEK_DATA)) >= 0 &&
		       (hole = lseek(fd, data, SEEK_HOLE)) > data)
			*pages += (uint64_t)(hole - data) / PG;
		close(fd);
	}
	closedir(dir);
	return n;
}

static uint64_t nonresident(char *mem)
{
	unsigned char vec[NPG];
	uint64_t n = 0;

	TH_ASSERT(!mincore(mem, NPG * PG, vec), "mincore: %s", strerror(errno));
	for (uint64_t p = 0; p < NPG; p++)
		n += !(vec[p] & 1);
	return n;
}

/* When pid started: /proc/PID/stat field 22 (what npfd named stores by before pidfs tokens). */
static unsigned long long start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long t = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	TH_ASSERT(f && fgets(buf, sizeof(buf), f), "read %s", path);
	fclose(f);
	p = strrchr(buf, ')') + 2;
	for (int field = 3; field < 22; field++)
		p = strchr(p, ' ') + 1;
	TH_ASSERT(sscanf(p, "%llu", &t) == 1, "start time of %d", pid);
	return t;
}

/*
 * What npfd names a process's stores by (BOOT.PID.TOKEN.REGION): its pidfs
 * inode number, or before pidfs its start time. 0: no pidfs.
 */
static unsigned long long pidfs_token(pid_t pid)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	unsigned long long t = 0;
	struct statfs fs;
	struct stat st;

	TH_ASSERT(pidfd >= 0, "pidfd_open(%d): %s", pid, strerror(errno));
	if (!fstatfs(pidfd, &fs) && fs.f_type == 0x50494446 /* PID_FS_MAGIC */ &&
	    !fstat(pidfd, &st))
		t = st.st_ino;
	close(pidfd);
	return t;
}

static unsigned long long token(pid_t pid)
{
	unsigned long long t = pidfs_token(pid);

	return t ? t : start_time(pid);
}

static void touch(const char *name)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", d.swap, name);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	TH_ASSERT(fd >= 0 && pwrite(fd, "x", 1, 0) == 1, "create %s: %s", path, strerror(errno));
	close(fd);
}

static bool exists(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", d.swap, name);
	return !access(path, F_OK);
}

int main(void)
{
	char boot[64] = "", live[160], dead[160], other_boot[160], old_live[160], renamed[160];
	struct npf_client *c;
	uint64_t evicted = 0, stored, gone;
	double t0;
	char *mem;
	pid_t child;
	FILE *f;
	int id;

	npf_set_print(rs_print);
	rs_npfd_start(&d);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fallback_ms = 60000);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = th_budget_region(c, NPG, BUDGET, &id);
	th_fill(mem, NPG, 1);
	evicted = th_budget_settle(c, id);
	TH_ASSERT(evicted >= NPG - BUDGET, "only %llu pages evicted", (unsigned long long)evicted);

	rs_npfd_kill(&d, SIGKILL);
	gone = nonresident(mem);
	TH_ASSERT(stores(&stored) == 1, "%d stores in %s after the kill, expected 1",
		  stores(&stored), d.swap);
	printf("killed with %llu pages evicted, %llu not resident, %llu in the store\n",
	       (unsigned long long)evicted, (unsigned long long)gone, (unsigned long long)stored);
	TH_ASSERT(gone >= NPG - BUDGET && stored >= gone,
		  "%llu pages not resident, %llu stored: expected >= %lu and >= that",
		  (unsigned long long)gone, (unsigned long long)stored, NPG - BUDGET);

	rs_npfd_start(&d);
	/* every evicted page reads back from the store the killed npfd left */
	check(mem, 1, "after the kill and restart");
	th_fill(mem, NPG, 2);
	check(mem, 2, "rewritten after the restart");
	TH_ASSERT(rs_reconnects >= 1, "libnpf did not reconnect");

	/* the store goes with its region */
	TH_ASSERT(!munmap(mem, NPG * PG), "munmap");
	for (t0 = th_now(); th_now() - t0 < 10 && stores(&stored); usleep(10000))
		;
	TH_ASSERT(stores(&stored) == 0, "the store is still there after its region was unmapped");

	/* stale stores: of a process that is gone, of another boot; not of a live one */
	f = fopen("/proc/sys/kernel/random/boot_id", "r");
	TH_ASSERT(f && fscanf(f, "%63s", boot) == 1, "boot id");
	fclose(f);
	child = fork();
	if (!child)
		_exit(0);
	snprintf(dead, sizeof(dead), "%s.%d.%llu.%u", boot, child, token(child), 77);
	waitpid(child, NULL, 0);
	snprintf(live, sizeof(live), "%s.%d.%llu.%u", boot, getpid(), token(getpid()), 77);
	snprintf(other_boot, sizeof(other_boot), "00000000-0000-0000-0000-000000000000.%d.%llu.%u",
		 getpid(), token(getpid()), 78);
	/* one an npfd of before pidfs tokens named by the start time: renamed, not deleted */
	snprintf(old_live, sizeof(old_live), "%s.%d.%llu.%u", boot, getpid(), start_time(getpid()),
		 79);
	snprintf(renamed, sizeof(renamed), "%s.%d.%llu.%u", boot, getpid(), token(getpid()), 79);
	touch(dead);
	touch(live);
	touch(other_boot);
	touch("README");
	if (pidfs_token(getpid()))
		touch(old_live);
	rs_npfd_kill(&d, SIGTERM);
	rs_npfd_start(&d);
	TH_ASSERT(!exists(dead), "the store of a process that is gone was not deleted");
	TH_ASSERT(!exists(other_boot), "the store of another boot was not deleted");
	TH_ASSERT(exists(live), "the store of a live process was deleted");
	TH_ASSERT(exists("README"), "a file that is not a store was deleted");
	if (pidfs_token(getpid()))
		TH_ASSERT(!exists(old_live) && exists(renamed),
			  "a store named by the start time: %s there %d, %s there %d (expected "
			  "renamed)",
			  old_live, exists(old_live), renamed, exists(renamed));
	else
		printf("no pidfs: stores are named by start times, nothing to rename\n");

	npf_client__close(c);
	rs_npfd_cleanup(&d);
	printf("PASS\n");
	return 0;
}
