// SPDX-License-Identifier: GPL-2.0
/*
 * The swap store: where a dirty page of an anonymous region goes when
 * eviction takes it away (a file-backed region's go back to its file).
 *
 * One file per region in npfd's swap directory (swap-dir, npfd.conf(5)),
 * made when the region's first page is stored. The file is its own index:
 * the region's page i is at byte i * 4096 (evict.c adds the pages a munmap
 * cut off the front), and a page is stored iff that range is not a hole
 * (SEEK_DATA / SEEK_HOLE find them; a freed page is hole-punched). So no
 * map that could be lost lives only in npfd's memory: an npfd that is
 * killed leaves the files, and the next npfd, asked by the process to adopt
 * the region, finds its file by name and reads the pages back from it.
 *
 * The name says whose it is: BOOT.PID.TOKEN.REGION -- the boot id (a store
 * of another boot is stale: its process is gone), the process's pid and
 * token (process_token(): a later process with the same pid does not own
 * it) and the region id. At start-up the stores of processes that are gone are
 * deleted; a store goes with its region (unregistered, unmapped, its
 * process gone) -- but not when npfd stops with pages still in it.
 *
 * The directory is npfd's own (0700): a store is opened by name relative
 * to it with O_NOFOLLOW, and created with O_EXCL.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/falloc.h>
#include "log.h"
#include "util.h"
#include "swapstore.h"

#define BOOT_ID_LEN 36 /* a UUID, as /proc/sys/kernel/random/boot_id writes it */

static int dir_fd = -1;
static char store_dir[256];
static char boot_id[BOOT_ID_LEN + 1];

static int read_boot_id(void)
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, boot_id, BOOT_ID_LEN);
	close(fd);
	if (n != BOOT_ID_LEN)
		return -EIO;
	boot_id[BOOT_ID_LEN] = '\0';
	return 0;
}

static void store_name(char name[SWAPSTORE_NAME_LEN], pid_t pid, __u64 token, __u32 id)
{
	snprintf(name, SWAPSTORE_NAME_LEN, "%s.%d.%llu.%u", boot_id, (int)pid,
		 (unsigned long long)token, id);
}

/*
 * A hole must say "not stored" to the next npfd: the file system must punch
 * holes and find them (SEEK_DATA), and make unnamed files (copies for forked
 * children, named later). Tried once on an unnamed file.
 */
static int probe_holes(void)
{
	static char page[4096] = {1};
	int fd = openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600), err = 0;

	if (fd < 0)
		return -errno;
	if (pwrite(fd, page, sizeof(page), 0) != (ssize_t)sizeof(page) ||
	    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, sizeof(page)))
		err = -errno;
	else if (lseek(fd, 0, SEEK_DATA) >= 0 || errno != ENXIO)
		err = -EOPNOTSUPP;
	close(fd);
	return err;
}

/* A store whose process is gone (or ran in another boot) nobody can adopt: delete it. */
static void remove_stale(void)
{
	int fd = dup(dir_fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	unsigned int removed = 0, kept = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		pr_warn("swap store: cannot list %s: %s (stale stores stay)", store_dir,
			strerror(errno));
		return;
	}
	while ((de = readdir(d))) {
		char boot[BOOT_ID_LEN + 1];
		unsigned long long token;
		unsigned int id;
		int pid, end = 0;

		if (sscanf(de->d_name, "%36[0-9a-f-].%d.%llu.%u%n", boot, &pid, &token, &id,
			   &end) != 4 ||
		    de->d_name[end] != '\0')
			continue; /* not a store: not npfd's to delete */
		if (!strcmp(boot, boot_id)) {
			__u64 now = process_token(pid);
			char name[SWAPSTORE_NAME_LEN];

			if (now && now == token) {
				kept++;
				continue;
			}
			/*
			 * Named by an npfd of before pidfs tokens, by the start
			 * time: renamed, for this one to find (start-up: the
			 * loop does not run yet).
			 */
			store_name(name, pid, now, id);
			if (now && token == process_start_time(pid) &&
			    !renameat(dir_fd, de->d_name, dir_fd, name)) {
				kept++;
				continue;
			}
		}
		if (unlinkat(dir_fd, de->d_name, 0) && errno != ENOENT)
			pr_warn("swap store: cannot delete the stale %s/%s: %s", store_dir,
				de->d_name, strerror(errno));
		else
			removed++;
	}
	closedir(d);
	if (removed || kept)
		pr_info("swap store %s: %u stale stores deleted, %u of running processes kept",
			store_dir, removed, kept);
}

int swapstore_open(const char *dir)
{
	struct stat st;
	int err;

	snprintf(store_dir, sizeof(store_dir), "%s", dir);
	err = read_boot_id();
	if (err) {
		pr_err("swap store: cannot read the boot id: %s", strerror(-err));
		return err;
	}
	if (mkdir_p(dir, 0700)) {
		pr_err("swap store: cannot create %s: %s (set swap-dir in npfd.conf)", dir,
		       strerror(errno));
		return -errno;
	}
	dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir_fd < 0) {
		err = -errno;
		pr_err("swap store: cannot open the directory %s: %s (set swap-dir in npfd.conf)",
		       dir, strerror(errno));
		return err;
	}
	if (fstat(dir_fd, &st) || st.st_uid != geteuid() || (st.st_mode & 022)) {
		pr_err("swap store: %s must be a directory only npfd's user may write (owner uid %u, mode %o): fix it or set swap-dir in npfd.conf",
		       dir, (unsigned int)st.st_uid, (unsigned int)(st.st_mode & 07777));
		close(dir_fd);
		dir_fd = -1;
		return -EPERM;
	}
	err = probe_holes();
	if (err) {
		pr_err("swap store: %s cannot hold stores: unnamed files (O_TMPFILE), punched holes and SEEK_DATA are needed: %s (set swap-dir in npfd.conf to a tmpfs, ext4, xfs or btrfs directory)",
		       dir, strerror(-err));
		close(dir_fd);
		dir_fd = -1;
		return err;
	}
	remove_stale();
	return 0;
}

void swapstore_close(void)
{
	if (dir_fd >= 0)
		close(dir_fd);
	dir_fd = -1;
}

bool swapstore_ready(void)
{
	return dir_fd >= 0;
}

int swapstore_create(pid_t pid, __u32 id, char name[SWAPSTORE_NAME_LEN])
{
	__u64 token = pid ? process_token(pid) : 0;
	int fd, err;

	name[0] = '\0';
	if (dir_fd < 0)
		return -EBADF;
	if (!pid) {
		fd = openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	} else if (!token) {
		return -ESRCH;
	} else {
		store_name(name, pid, token, id);
		/* one left by an npfd that lost this region (not adopted): stale */
		unlinkat(dir_fd, name, 0);
		fd = openat(dir_fd, name, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	if (fd < 0) {
		err = -errno;
		pr_warn_rl("swap store: cannot create %s/%s: %s", store_dir,
			   name[0] ? name : "(unnamed)", strerror(errno));
		name[0] = '\0';
		return err;
	}
	return fd;
}

int swapstore_find(pid_t pid, __u32 id, char name[SWAPSTORE_NAME_LEN])
{
	__u64 token = process_token(pid);
	int fd;

	name[0] = '\0';
	if (dir_fd < 0 || !token)
		return -ENOENT;
	store_name(name, pid, token, id);
	fd = openat(dir_fd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int err = -errno;

		if (errno != ENOENT)
			pr_warn("swap store: cannot open %s/%s: %s", store_dir, name,
				strerror(errno));
		name[0] = '\0';
		return err;
	}
	return fd;
}

int swapstore_rename(char name[SWAPSTORE_NAME_LEN], pid_t pid, __u32 id)
{
	char to[SWAPSTORE_NAME_LEN];
	__u64 token = process_token(pid);

	if (!token)
		return -ESRCH;
	store_name(to, pid, token, id);
	if (renameat(dir_fd, name, dir_fd, to)) {
		pr_warn("swap store: cannot rename %s to %s: %s", name, to, strerror(errno));
		return -errno;
	}
	memcpy(name, to, SWAPSTORE_NAME_LEN);
	return 0;
}

int swapstore_link(int fd, pid_t pid, __u32 id, char name[SWAPSTORE_NAME_LEN])
{
	__u64 token = process_token(pid);
	char path[32];

	name[0] = '\0';
	if (dir_fd < 0 || !token)
		return -ESRCH;
	store_name(name, pid, token, id);
	unlinkat(dir_fd, name, 0); /* stale: as in swapstore_create() */
	snprintf(path, sizeof(path), "/proc/thread-self/fd/%d", fd);
	if (linkat(AT_FDCWD, path, dir_fd, name, AT_SYMLINK_FOLLOW)) {
		int err = -errno;

		pr_warn_rl("swap store: cannot name a store %s/%s: %s", store_dir, name,
			   strerror(errno));
		name[0] = '\0';
		return err;
	}
	return 0;
}

void swapstore_remove(const char *name)
{
	if (dir_fd >= 0 && name[0] && unlinkat(dir_fd, name, 0) && errno != ENOENT)
		pr_warn_rl("swap store: cannot delete %s/%s: %s", store_dir, name, strerror(errno));
}

void swapstore_punch_range(int fd, __u64 off, __u64 len)
{
	if (len &&
	    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len))
		pr_warn_rl(
			"swap store: cannot free the pages at 0x%llx+0x%llx: %s (a restarted npfd, or the process after npfd's death, would take a stale copy for an evicted page)",
			(unsigned long long)off, (unsigned long long)len, strerror(errno));
}

void swapstore_punch(int fd, __u64 off)
{
	swapstore_punch_range(fd, off, 4096);
}
