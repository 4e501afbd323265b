// SPDX-License-Identifier: GPL-2.0
/*
 * One user of the socket cannot lock the others out. As an unprivileged
 * member of the socket's group (uid 65534):
 *  - 4200 idle connections: npfd keeps 64 (the per-user limit), refuses the
 *    rest at once with EUSERS and its reason, and meanwhile another user
 *    (uid 65533) registers a region and is served;
 *  - regions: 256 per user over several processes, the next refused with
 *    ENOSPC;
 *  - descriptors: idle connections plus file-backed regions reach 320
 *    descriptors held for the user (320), the next file-backed region is refused
 *    with EMFILE;
 * and npfd runs with its soft descriptor limit raised to the hard one.
 */
#include <stdint.h>
#include <sys/mman.h>
#include "adv.h"
#include "npf.h"

/* daemon/control.h */
#define MAX_CONNECTIONS 64
#define MAX_REGIONS 256
#define MAX_FDS 320
#define PER_PROC 32 /* NPF_MAX_RANGES_PER_PROC */

static struct th_npfd d;

/* Is this connection refused? Returns the status of npfd's notice, 0 if none came. */
static int refused(int sock, char *err)
{
	struct pollfd p = {.fd = sock, .events = POLLIN};
	char buf[4096];
	struct npf_reply *r = (struct npf_reply *)(buf + sizeof(struct npf_msg_hdr));

	if (poll(&p, 1, 0) != 1)
		return 0;
	if (recv(sock, buf, sizeof(buf), MSG_DONTWAIT) <
	    (ssize_t)(sizeof(struct npf_msg_hdr) + sizeof(*r)))
		return -ECONNRESET;
	snprintf(err, NPF_ERRMSG_LEN, "%s", r->error);
	return r->status;
}

static int ready_pipe[2], hold_pipe[2];

/* Open 4200 connections and keep the accepted ones until the parent says so. */
static void hog(void *arg)
{
	int i, kept = 0, refusedn = 0, status = 0, *socks = calloc(4200, sizeof(int));
	char err[NPF_ERRMSG_LEN] = "", c;

	for (i = 0; i < 4200; i++) {
		socks[i] = adv_connect(d.sock);
		TH_ASSERT(socks[i] >= 0, "connection %d: %s", i, strerror(errno));
	}
	usleep(500000); /* npfd has accepted (and refused) them all by now */
	for (i = 0; i < 4200; i++) {
		int st = refused(socks[i], err);

		if (st)
			refusedn++, status = st, close(socks[i]);
		else
			kept++;
	}
	printf("4200 connections: %d kept, %d refused (%d: %s)\n", kept, refusedn, status, err);
	TH_ASSERT(kept == MAX_CONNECTIONS, "npfd kept %d connections of one user, want %d", kept,
		  MAX_CONNECTIONS);
	TH_ASSERT(status == -EUSERS, "refused with %d, want -EUSERS", status);
	TH_ASSERT(write(ready_pipe[1], "r", 1) == 1, "pipe");
	TH_ASSERT(read(hold_pipe[0], &c, 1) >= 0, "pipe");
}

/* Another user meanwhile: connect, register, be served. */
static void other_user(void *arg)
{
	struct npf_client *c = npf_client__connect(NULL);
	char *mem = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int id;

	TH_ASSERT(c, "uid 65533 cannot connect while uid 65534 hogs: %s", strerror(errno));
	id = npf_client__register(c, mem, 1 << 20, NULL);
	TH_ASSERT(id > 0, "uid 65533 cannot register: %s", npf_client__errmsg(c));
	TH_ASSERT(mem[4096 * 7] == 0, "page reads non-zero");
	npf_client__close(c);
	printf("uid 65533 registered region %d and was served\n", id);
}

/*
 * Child processes, each registering up to PER_PROC regions (file-backed
 * when file) and holding them; returns the first refusal's status (0: none)
 * and how many regions were registered in all.
 */
static int holders(int nproc, bool file, int *registered, char *why)
{
	int res[2], i, st = 0, total = 0;
	pid_t pids[16];

	TH_ASSERT(pipe(res) == 0, "pipe");
	for (i = 0; i < nproc; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			struct npf_client *c = npf_client__connect(NULL);
			char *mem = mmap(NULL, PER_PROC * 8192, PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			int fd = memfd_create("adv", MFD_CLOEXEC), j, n = 0, rc = 0;
			char msg[NPF_ERRMSG_LEN + 8] = "";
			char ch;

			close(hold_pipe[1]); /* the parent's close ends the hold */
			if (!c || ftruncate(fd, 4096))
				_exit(2);
			for (j = 0; j < PER_PROC; j++) {
				NPF_OPTS(npf_region_opts, o, .backing = file ? NPF_BACKING_FILE : 0,
					 .backing_fd = fd);
				rc = npf_client__register(c, mem + (size_t)j * 8192, 4096, &o);
				if (rc < 0)
					break;
				n++;
			}
			memcpy(msg, &n, sizeof(int));
			memcpy(msg + 4, &rc, sizeof(int));
			snprintf(msg + 8, NPF_ERRMSG_LEN, "%s",
				 rc < 0 ? npf_client__errmsg(c) : "");
			if (write(res[1], msg, sizeof(msg)) != sizeof(msg))
				_exit(2);
			if (read(hold_pipe[0], &ch, 1) < 0)
				_exit(2);
			_exit(0);
		}
		{
			char msg[NPF_ERRMSG_LEN + 8];
			int n, rc;

			TH_ASSERT(read(res[0], msg, sizeof(msg)) == sizeof(msg), "holder %d died",
				  i);
			memcpy(&n, msg, 4);
			memcpy(&rc, msg + 4, 4);
			total += n;
			if (rc < 0 && !st) {
				st = rc;
				snprintf(why, NPF_ERRMSG_LEN, "%s", msg + 8);
			}
		}
	}
	*registered = total;
	return st;
}

static void region_limit(void *arg)
{
	char why[NPF_ERRMSG_LEN] = "";
	int n, st;

	TH_ASSERT(pipe(hold_pipe) == 0, "pipe");
	st = holders(9, false, &n, why);

	printf("9 processes x %d anonymous regions: %d registered, then %d (%s)\n", PER_PROC, n, st,
	       why);
	TH_ASSERT(n == MAX_REGIONS && st == -ENOSPC, "%d regions, refusal %d: want %d and -ENOSPC",
		  n, st, MAX_REGIONS);
	close(hold_pipe[1]);
	while (wait(NULL) > 0)
		;
}

static void fd_limit(void *arg)
{
	char why[NPF_ERRMSG_LEN] = "";
	int socks[40], i, n, st;

	TH_ASSERT(pipe(hold_pipe) == 0, "pipe");
	for (i = 0; i < 40; i++)
		TH_ASSERT((socks[i] = adv_connect(d.sock)) >= 0, "connect");
	/*
	 * 40 idle + 9 x (connection + userfaultfd + pidfd + layout journal) =
	 * 76: file regions up to 244 more
	 */
	st = holders(9, true, &n, why);
	printf("40 idle connections, then 9 processes x %d file-backed regions: %d registered, then %d (%s)\n",
	       PER_PROC, n, st, why);
	/* the refusal comes in the 8th process: the 9th may or may not have connected */
	TH_ASSERT(st == -EMFILE && n >= MAX_FDS - 40 - 4 * 9 && n <= MAX_FDS - 40 - 4 * 8,
		  "%d file-backed regions, refusal %d: want %d..%d and -EMFILE", n, st,
		  MAX_FDS - 40 - 4 * 9, MAX_FDS - 40 - 4 * 8);
	close(hold_pipe[1]);
	while (wait(NULL) > 0)
		;
}

int main(void)
{
	char path[64], line[256];
	FILE *f;
	int st;
	pid_t other;
	char c;

	{
		/* npfd starts with the usual soft limit and must raise it itself */
		struct rlimit rl;

		TH_ASSERT(getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max >= 8192,
			  "the hard descriptor limit is below 8192");
		rl.rlim_cur = 1024;
		TH_ASSERT(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
	}
	th_npfd_start(&d, NULL);
	adv_open_to_group(&d);
	snprintf(path, sizeof(path), "/proc/%d/limits", d.pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long soft, hard;

		if (sscanf(line, "Max open files %lu %lu", &soft, &hard) == 2) {
			printf("npfd: open files soft %lu hard %lu\n", soft, hard);
			TH_ASSERT(soft == hard, "npfd did not raise its soft descriptor limit");
		}
	}
	if (f)
		fclose(f);

	TH_ASSERT(pipe(ready_pipe) == 0 && pipe(hold_pipe) == 0, "pipe");
	{
		struct rlimit rl = {8192, 8192};

		TH_ASSERT(setrlimit(RLIMIT_NOFILE, &rl) == 0,
			  "cannot give the attacker 8192 descriptors");
	}
	fflush(stdout);
	other = fork();
	if (other == 0) {
		close(hold_pipe[1]);
		_exit(adv_run_as_attacker(hog, NULL, 60));
	}
	close(ready_pipe[1]);
	TH_ASSERT(read(ready_pipe[0], &c, 1) == 1, "the connection hog failed");
	/* uid 65533, also of the socket's group */
	{
		gid_t g = ADV_GID;
		pid_t p = fork();

		if (p == 0) {
			TH_ASSERT(setgroups(1, &g) == 0 && setgid(ADV_GID) == 0 &&
					  setuid(65533) == 0,
				  "setuid 65533");
			other_user(NULL);
			fflush(stdout);
			_exit(0);
		}
		TH_ASSERT(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0,
			  "another user was locked out");
	}
	close(hold_pipe[1]);
	TH_ASSERT(waitpid(other, &st, 0) == other && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "the connection hog's checks failed");
	close(hold_pipe[0]);

	TH_ASSERT(adv_run_as_attacker(region_limit, NULL, 60) == 0, "region limit");
	usleep(300000); /* npfd sees the holders go */
	TH_ASSERT(adv_run_as_attacker(fd_limit, NULL, 60) == 0, "descriptor limit");
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
