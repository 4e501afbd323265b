// SPDX-License-Identifier: GPL-2.0
/*
 * A socket user cannot make npfd livelock or lie through a backing file.
 * As an unprivileged member of the socket's group:
 *  - a file offset near 2^64 (offset + length wraps) is refused;
 *  - an O_PATH descriptor, a write-only one and a pipe are refused as
 *    backing files, each with its reason;
 *  - a file truncated after registration (to 3.5 pages): pages still in
 *    the file read their bytes (the half page: its bytes, then zeros, as a
 *    mapping of the file would), pages past the new end fail with SIGBUS (never zeros,
 *    never a hang), each counted in npf_global's faults_failed, with a
 *    bounded number of log lines for 2048 such faults; npfd stays up and
 *    keeps serving;
 *  - a file on an overlay it mounted in a user and mount namespace of its
 *    own is refused (EXDEV: its lower layer could be a FUSE file system
 *    whose reads never end, stalling npfd for every client), the same
 *    file through the lower directory accepted.
 * And as root: a file on a FUSE file system (bindfs) is refused (EXDEV),
 * found by its mount's type in npfd's mountinfo (before an fstat() that
 * could ask the server); and the same on a bindfs the client mounted in a
 * mount namespace of its own, which npfd's mountinfo does not list: found
 * by fstatfs().
 */
#include <sched.h>
#include <setjmp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/userfaultfd.h>
#include <bpf/bpf.h>
#include "adv.h"
#include "npf.h"

#define PAGES 2048
#define LOG_RL_BURST_EXPECTED 10 /* daemon/log.h LOG_RL_BURST */
#define PG 4096

static struct th_npfd d;

/* Register mem as file-backed by bfd at off with a raw request; returns the status. */
static int raw_register(int sock, int uffd, int bfd, void *mem, __u64 len, __u64 off, char *err)
{
	struct {
		struct npf_msg_hdr h;
		struct npf_region_req r;
	} m = {};
	int fds[2] = {uffd, bfd};

	adv_hdr(&m.h, NPF_MSG_REGION_REGISTER, sizeof(m));
	m.r.start = (__u64)(uintptr_t)mem;
	m.r.length = len;
	m.r.file_offset = off;
	m.r.backing = NPF_BACKING_FILE;
	TH_ASSERT(adv_send(sock, &m, sizeof(m), fds, 2) == sizeof(m), "send: %s", strerror(errno));
	return adv_reply(sock, err, NPF_ERRMSG_LEN, NULL, 0, 5000);
}

static void expect_refused(const char *what, int st, int want, const char *err)
{
	printf("%-40s -> %d \"%s\"\n", what, st, err);
	TH_ASSERT(st == want, "%s: status %d, want %d (%s)", what, st, want, err);
}

static sigjmp_buf jb;
static volatile int sigbus_code;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	sigbus_code = si->si_code;
	siglongjmp(jb, 1);
}

/* Read one byte of p: 0..255, or -1 when the access raised SIGBUS. */
static int touch(const volatile char *p)
{
	if (sigsetjmp(jb, 1))
		return -1;
	return (unsigned char)*p;
}

/* Write s to path (a /proc file); false on error. */
static bool write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	bool ok = fd >= 0 && write(fd, s, strlen(s)) == (ssize_t)strlen(s);

	if (fd >= 0)
		close(fd);
	return ok;
}

static char ovl[64]; /* a directory with l/f (16 pages), u, w and m for an overlay */

/* As nobody, in a user and mount namespace of its own: a file on its overlay. */
static void overlay_attacker(void *arg)
{
	char err[NPF_ERRMSG_LEN], opts[300], path[128];
	int sock = adv_connect(d.sock), uffd, fd;
	char *mem;

	(void)arg;
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS)) {
		printf("overlay part skipped: unshare(CLONE_NEWUSER | CLONE_NEWNS): %s\n",
		       strerror(errno));
		return;
	}
	{
		/* root in it, as unshare -r makes it: the overlay creates files in u and w */
		char map[64];
		uid_t uid = ADV_UID;
		gid_t gid = ADV_GID;

		/* dropping to nobody made it undumpable: its /proc files root's */
		prctl(PR_SET_DUMPABLE, 1);
		snprintf(map, sizeof(map), "0 %u 1", uid);
		TH_ASSERT(write_file("/proc/self/uid_map", map) &&
				  write_file("/proc/self/setgroups", "deny"),
			  "uid_map: %s", strerror(errno));
		snprintf(map, sizeof(map), "0 %u 1", gid);
		TH_ASSERT(write_file("/proc/self/gid_map", map), "gid_map: %s", strerror(errno));
	}
	snprintf(opts, sizeof(opts), "lowerdir=%s/l,upperdir=%s/u,workdir=%s/w", ovl, ovl, ovl);
	snprintf(path, sizeof(path), "%s/m", ovl);
	if (mount("overlay", path, "overlay", 0, opts)) {
		printf("overlay part skipped: mount overlay as uid %d in its namespace: %s\n",
		       getuid(), strerror(errno));
		return;
	}
	uffd = adv_uffd();
	mem = mmap(NULL, 32 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	snprintf(path, sizeof(path), "%s/m/f", ovl);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	TH_ASSERT(sock >= 0 && mem != MAP_FAILED && fd >= 0, "overlay setup: %s", strerror(errno));
	expect_refused("file on its own namespace's overlay",
		       raw_register(sock, uffd, fd, mem, 16 * PG, 0, err), -EXDEV, err);
	close(fd);
	snprintf(path, sizeof(path), "%s/l/f", ovl);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	TH_ASSERT(fd >= 0, "open %s: %s", path, strerror(errno));
	expect_refused("the same file through the lower directory",
		       raw_register(sock, uffd, fd, mem + 16 * PG, 16 * PG, 0, err), 0, err);
	close(fd);
	close(sock);
}

/* The same bindfs, mounted by a client in a mount namespace of its own (not in npfd's mountinfo). */
static void fuse_backing_unlisted(const char *src, const char *mnt)
{
	char path[128], cmd[256];
	struct npf_client *c;
	int fd, rc, st;
	char *mem;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	TH_ASSERT(pid >= 0, "fork: %s", strerror(errno));
	if (!pid) {
		TH_ASSERT(!unshare(CLONE_NEWNS) &&
				  !mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL),
			  "a mount namespace: %s", strerror(errno));
		snprintf(cmd, sizeof(cmd), "bindfs %s %s", src, mnt);
		TH_ASSERT(!system(cmd), "'%s' failed in a mount namespace of its own", cmd);
		snprintf(path, sizeof(path), "%s/f", mnt);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		TH_ASSERT(fd >= 0, "open %s: %s", path, strerror(errno));
		c = npf_client__connect(NULL);
		TH_ASSERT(c, "connect: %s", strerror(errno));
		mem = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			   0);
		NPF_OPTS(npf_region_opts, fo, .backing = NPF_BACKING_FILE, .backing_fd = fd);
		rc = npf_client__register(c, mem, 16 * PG, &fo);
		expect_refused("FUSE mounted where npfd does not see it", rc, -EXDEV,
			       npf_client__errmsg(c));
		npf_client__close(c);
		close(fd);
		snprintf(cmd, sizeof(cmd), "umount %s", mnt);
		TH_ASSERT(!system(cmd), "%s failed", cmd);
		fflush(stdout);
		_exit(0);
	}
	TH_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the client in a mount namespace of its own failed (0x%x)", st);
}

/* As root: a file on a FUSE file system (bindfs of a directory). */
static void fuse_backing(void)
{
	char src[96], mnt[96], path[128], cmd[256];
	struct npf_client *c;
	char *mem;
	int fd, rc;

	if (system("command -v bindfs >/dev/null 2>&1")) {
		printf("FUSE part skipped: bindfs is not installed\n");
		return;
	}
	snprintf(src, sizeof(src), "%s/fuse-src", d.dir);
	snprintf(mnt, sizeof(mnt), "%s/fuse-mnt", d.dir);
	snprintf(path, sizeof(path), "%s/f", src);
	TH_ASSERT(!mkdir(src, 0700) && !mkdir(mnt, 0700), "mkdir: %s", strerror(errno));
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	TH_ASSERT(fd >= 0 && !ftruncate(fd, 16 * PG), "create %s: %s", path, strerror(errno));
	close(fd);
	snprintf(cmd, sizeof(cmd), "bindfs %s %s", src, mnt);
	if (system(cmd)) {
		printf("FUSE part skipped: '%s' failed\n", cmd);
		return;
	}
	snprintf(path, sizeof(path), "%s/f", mnt);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	TH_ASSERT(fd >= 0, "open %s: %s", path, strerror(errno));
	c = npf_client__connect(NULL);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NPF_OPTS(npf_region_opts, fo, .backing = NPF_BACKING_FILE, .backing_fd = fd);
	rc = npf_client__register(c, mem, 16 * PG, &fo);
	expect_refused("file on a FUSE file system (root)", rc, -EXDEV, npf_client__errmsg(c));
	npf_client__close(c);
	close(fd);
	snprintf(cmd, sizeof(cmd), "umount %s", mnt);
	TH_ASSERT(!system(cmd), "%s failed", cmd);
	fuse_backing_unlisted(src, mnt);
}

static void attacker(void *arg)
{
	char err[NPF_ERRMSG_LEN], path[64];
	int sock = adv_connect(d.sock), uffd = adv_uffd(), mfd, opath, wronly, pfd[2], i;
	struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO};
	struct npf_region_stats_full *sf = NULL;
	struct npf_client *c;
	size_t n;
	char *mem;

	TH_ASSERT(sock >= 0, "attacker cannot connect to %s: %s", d.sock, strerror(errno));
	mem = mmap(NULL, (size_t)PAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0);
	mfd = memfd_create("adv-backing", MFD_CLOEXEC);
	TH_ASSERT(mem != MAP_FAILED && mfd >= 0 && ftruncate(mfd, (off_t)PAGES * PG) == 0,
		  "setup: %s", strerror(errno));
	for (i = 0; i < PAGES; i++) {
		char b = (char)(i % 251 + 1);

		TH_ASSERT(pwrite(mfd, &b, 1, (off_t)i * PG) == 1, "pwrite");
	}

	/* offset + length wraps to a small number: used to pass the size check */
	expect_refused("file offset 2^64 - 4096",
		       raw_register(sock, uffd, mfd, mem, 16 * PG, ~0ULL - PG + 1, err), -EOVERFLOW,
		       err);
	/* offset + length > INT64_MAX: not a file offset pread can take */
	expect_refused("file offset 2^63",
		       raw_register(sock, uffd, mfd, mem, 16 * PG, 1ULL << 63, err), -EOVERFLOW,
		       err);

	snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	opath = open(path, O_PATH | O_CLOEXEC);
	TH_ASSERT(opath >= 0, "open O_PATH: %s", strerror(errno));
	expect_refused("O_PATH backing descriptor",
		       raw_register(sock, uffd, opath, mem, 16 * PG, 0, err), -EBADF, err);
	wronly = open(path, O_WRONLY | O_CLOEXEC);
	TH_ASSERT(wronly >= 0, "open O_WRONLY: %s", strerror(errno));
	expect_refused("write-only backing descriptor",
		       raw_register(sock, uffd, wronly, mem, 16 * PG, 0, err), -EBADF, err);
	TH_ASSERT(pipe(pfd) == 0, "pipe");
	expect_refused("a pipe as backing file",
		       raw_register(sock, uffd, pfd[0], mem, 16 * PG, 0, err), -EINVAL, err);
	close(sock);
	close(uffd);

	/* A real region, then the file is cut to 3.5 pages under it. */
	c = npf_client__connect(NULL);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	{
		NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = mfd,
			 .name = "truncated");
		int id = npf_client__register(c, mem, (size_t)PAGES * PG, &o);

		TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	}
	/*
	 * Nothing touched before the truncation: a page installed before it
	 * (fault-around installs neighbours from the page cache) keeps the
	 * data it had, rightly.
	 */
	TH_ASSERT(ftruncate(mfd, 3 * PG + PG / 2) == 0, "ftruncate");
	sigaction(SIGBUS, &sa, NULL);
	alarm(20); /* a livelock ends the attacker here, and the test fails */
	TH_ASSERT(touch(mem + 2 * PG) == 3, "page 2 (still in the file) reads %d, want 3",
		  touch(mem + 2 * PG));
	/* half of page 3 is left: its bytes, then zeros, as a mapping of the file reads */
	TH_ASSERT(touch(mem + 3 * PG) == 4 && touch(mem + 3 * PG + PG / 2) == 0,
		  "page 3 (half in the file) reads %d, want 4", touch(mem + 3 * PG));
	for (i = 4; i < PAGES; i++) {
		int v = touch(mem + (size_t)i * PG);

		TH_ASSERT(v == -1,
			  "page %d, past the truncated end of the file, reads %d: want SIGBUS", i,
			  v);
	}
	alarm(0);
	printf("pages 4..%d past the end: SIGBUS (si_code %d) each\n", PAGES - 1, sigbus_code);
	TH_ASSERT(npf_client__stats(c, 0, &sf, &n) == 0 && n == 1, "stats: %s",
		  npf_client__errmsg(c));
	printf("pages_copied %llu\n", (unsigned long long)sf->stats.pages_copied);
	free(sf);
	npf_client__close(c);
}

int main(void)
{
	char cmd[256];
	FILE *f;
	int st, lines = 0;

	th_npfd_start(&d, NULL);
	adv_open_to_group(&d);
	st = adv_run_as_attacker(attacker, NULL, 60);
	if (st) {
		th_npfd_dump_log(&d);
		th_fail("the attacker's checks failed (exit %d)", st);
	}
	{
		char f[96];
		int fd;

		snprintf(ovl, sizeof(ovl), "%s/ovl", d.dir);
		TH_ASSERT(!mkdir(ovl, 0777) && !chmod(ovl, 0777) && !chmod(d.dir, 0755),
			  "mkdir %s: %s", ovl, strerror(errno));
		for (const char *sub = "luwm"; *sub; sub++) {
			snprintf(f, sizeof(f), "%s/%c", ovl, *sub);
			TH_ASSERT(!mkdir(f, 0777) && !chmod(f, 0777), "mkdir %s: %s", f,
				  strerror(errno));
		}
		snprintf(f, sizeof(f), "%s/l/f", ovl);
		fd = open(f, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		TH_ASSERT(fd >= 0 && !ftruncate(fd, 16 * PG), "create %s", f);
		close(fd);
		TH_ASSERT(adv_run_as_attacker(overlay_attacker, NULL, 60) == 0,
			  "the overlay checks failed");
	}
	fuse_backing();
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
	{
		char pin[256];
		struct npf_global_stats g;
		__u32 zero = 0;
		int mfd;

		snprintf(pin, sizeof(pin), "%s/%s", d.bpffs, NPF_MAP_GLOBAL);
		mfd = bpf_obj_get(pin);
		TH_ASSERT(mfd >= 0 && bpf_map_lookup_elem(mfd, &zero, &g) == 0, "read %s", pin);
		printf("npf_global: faults_failed %llu\n", (unsigned long long)g.faults_failed);
		TH_ASSERT(g.faults_failed >= PAGES - 4,
			  "faults_failed is %llu, want >= %d (one per page past the end)",
			  (unsigned long long)g.faults_failed, PAGES - 4);
		close(mfd);
	}
	snprintf(cmd, sizeof(cmd), "grep -c 'backing file ends' %s", d.log);
	f = popen(cmd, "r");
	TH_ASSERT(f && fscanf(f, "%d", &lines) == 1, "cannot count log lines");
	pclose(f);
	printf("log lines about the truncated file: %d for %d failed faults\n", lines, PAGES - 4);
	TH_ASSERT(lines >= 1 && lines <= 2 * LOG_RL_BURST_EXPECTED,
		  "%d log lines for the failed faults: want 1..%d (rate limited)", lines,
		  2 * LOG_RL_BURST_EXPECTED);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
