/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by the adversarial tests (tests/adv_*.c): the attacker is an
 * unprivileged member of the control socket's group, as in a deployment
 * where the socket (mode 0660) is given to a group of users. The test's
 * npfd runs as root; adv_open_to_group() hands its socket directory and
 * socket to ADV_GID, adv_become_attacker() drops to ADV_UID in that group.
 * Raw protocol helpers speak to npfd without libnpf, so a test can send
 * what libnpf never would.
 */
#ifndef NPF_TEST_ADV_H
#define NPF_TEST_ADV_H

#include <dirent.h>
#include <grp.h>
#include <poll.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <linux/userfaultfd.h>
#include "harness.h"
#include "npf_abi.h"
#include "npf_fdpass.h"

#define ADV_UID 65534 /* nobody */
#define ADV_GID 4321  /* the socket's group in the test; needs no /etc/group entry */

/* Give the socket (0660, as npfd makes it) and its directory to ADV_GID. */
static inline void adv_open_to_group(struct th_npfd *d)
{
	TH_ASSERT(chown(d->dir, 0, ADV_GID) == 0 && chmod(d->dir, 0750) == 0, "chown %s: %s",
		  d->dir, strerror(errno));
	TH_ASSERT(chown(d->sock, (uid_t)-1, ADV_GID) == 0, "chown %s: %s", d->sock,
		  strerror(errno));
}

/* Become the attacker: uid ADV_UID, only group ADV_GID, no capabilities. */
static inline void adv_become_attacker(void)
{
	gid_t g = ADV_GID;

	TH_ASSERT(setgroups(1, &g) == 0 && setgid(ADV_GID) == 0 && setuid(ADV_UID) == 0,
		  "cannot drop to uid %d gid %d: %s", ADV_UID, ADV_GID, strerror(errno));
	TH_ASSERT(geteuid() == ADV_UID, "still uid %d", geteuid());
}

/*
 * A userfaultfd with the events npfd requires, as the attacker can make one:
 * an unprivileged user may not handle kernel-mode faults
 * (vm.unprivileged_userfaultfd=0), so user-mode faults only.
 */
static inline int adv_uffd(void)
{
	struct uffdio_api api = {.api = UFFD_API,
				 .features = UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_REMOVE |
					     UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_THREAD_ID};
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);

	TH_ASSERT(fd >= 0, "userfaultfd: %s", strerror(errno));
	TH_ASSERT(ioctl(fd, UFFDIO_API, &api) == 0, "UFFDIO_API: %s", strerror(errno));
	return fd;
}

static inline int adv_connect(const char *sock)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static inline ssize_t adv_send(int fd, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		char buf[NPF_FDPASS_SPACE];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	npf_fdpass_put(&mh, cbuf.buf, fds, nfds);
	return sendmsg(fd, &mh, MSG_NOSIGNAL);
}

static inline void adv_hdr(struct npf_msg_hdr *h, __u16 type, size_t len)
{
	static __u32 seq;

	h->magic = NPF_PROTO_MAGIC;
	h->version = NPF_PROTO_VERSION;
	h->type = type;
	h->len = (__u32)len;
	h->seq = ++seq;
}

/*
 * Receive one reply within timeout_ms; returns its status and copies the
 * error text and up to outlen payload bytes. Fails the test on no reply.
 */
static inline int adv_reply(int fd, char *err, size_t errlen, void *out, size_t outlen,
			    int timeout_ms)
{
	static char buf[NPF_MSG_MAX];
	struct npf_msg_hdr *h = (struct npf_msg_hdr *)buf;
	struct npf_reply *r = (struct npf_reply *)(h + 1);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;

	TH_ASSERT(poll(&p, 1, timeout_ms) == 1, "no reply from npfd within %d ms", timeout_ms);
	n = recv(fd, buf, sizeof(buf), 0);
	TH_ASSERT(n >= (ssize_t)(sizeof(*h) + sizeof(*r)), "short reply (%zd bytes): %s", n,
		  strerror(errno));
	TH_ASSERT(h->magic == NPF_PROTO_MAGIC && (h->type & NPF_MSG_REPLY) && h->len == n,
		  "malformed reply");
	if (err)
		snprintf(err, errlen, "%s", r->error);
	if (out && outlen && r->status == 0) {
		size_t have = (size_t)n - sizeof(*h) - sizeof(*r);

		memcpy(out, r + 1, have < outlen ? have : outlen);
	}
	return r->status;
}

/*
 * Adopt [m, m + len) as region id (NPF_MSG_REGION_ADOPT keeps an id nobody
 * holds), registered with a userfaultfd of its own as an earlier npfd
 * would have left it. Returns npfd's status; *conn is the connection,
 * which keeps the region while it is open.
 */
static inline int adv_adopt(const char *sock, void *m, size_t len, __u32 id,
			    struct npf_region_info *info, char *err, size_t errlen, int *conn)
{
	struct {
		struct npf_msg_hdr h;
		struct npf_region_adopt_req a;
	} q = {0};
	int uffd = adv_uffd();
	struct uffdio_register reg = {.range = {.start = (__u64)(uintptr_t)m, .len = len},
				      .mode = UFFDIO_REGISTER_MODE_MISSING};

	TH_ASSERT(!ioctl(uffd, UFFDIO_REGISTER, &reg), "UFFDIO_REGISTER: %s", strerror(errno));
	*conn = adv_connect(sock);
	TH_ASSERT(*conn >= 0, "connect: %s", strerror(errno));
	adv_hdr(&q.h, NPF_MSG_REGION_ADOPT, sizeof(q));
	q.a.region.start = (__u64)(uintptr_t)m;
	q.a.region.length = len;
	q.a.region.backing = NPF_BACKING_ANON;
	q.a.region_id = id;
	TH_ASSERT(adv_send(*conn, &q, sizeof(q), &uffd, 1) == sizeof(q), "send: %s",
		  strerror(errno));
	return adv_reply(*conn, err, errlen, info, sizeof(*info), 5000);
}

/* How many descriptors process pid holds now. */
static inline int adv_count_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/*
 * An attacker in a child of its own that the test steps through pipes: npfd
 * started (d) with its socket open to the attackers' group, then a child
 * that becomes the attacker (ADV_UID) and runs fn(d->sock). The child reads
 * go[0] and writes done[1]; the test the other ends. Its pid.
 */
static inline pid_t adv_attacker_stepped(struct th_npfd *d, int go[2], int done[2],
					 void (*fn)(void *))
{
	pid_t pid;

	th_require_root();
	th_npfd_start(d, NULL);
	adv_open_to_group(d);
	TH_ASSERT(!pipe(go) && !pipe(done), "pipe: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	TH_ASSERT(pid >= 0, "fork: %s", strerror(errno));
	if (!pid) {
		close(go[1]); /* a parent gone ends the child's reads */
		close(done[0]);
		adv_become_attacker();
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* after the setuid(), which clears it */
		fn(d->sock);
		fflush(stdout);
		_exit(0);
	}
	close(go[0]);
	close(done[1]);
	return pid;
}

/* How many descriptors process pid holds of a file whose link names it (a memfd: "memfd:NAME"). */
static inline int adv_fds_of_file(pid_t pid, const char *name)
{
	char path[64], link[320], target[256];
	struct dirent *e;
	int n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	dir = opendir(path);
	TH_ASSERT(dir, "%s: %s", path, strerror(errno));
	while ((e = readdir(dir))) {
		ssize_t len;

		snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
		len = readlink(link, target, sizeof(target) - 1);
		if (len > 0 && (target[len] = '\0', strstr(target, name)))
			n++;
	}
	closedir(dir);
	return n;
}

/* adv_fds_of_file() once it is at most most, or after seconds: the count. */
static inline int adv_fds_of_file_down_to(pid_t pid, const char *name, int most, double seconds)
{
	int n = adv_fds_of_file(pid, name);

	for (double t0 = th_now(); n > most && th_now() - t0 < seconds;) {
		usleep(20000);
		n = adv_fds_of_file(pid, name);
	}
	return n;
}

/*
 * Build the test policy tests/policies/NAME.bpf.c into DIR (out: its path);
 * skips the test when clang cannot.
 */
static inline void adv_compile_policy(const char *name, const char *dir, char *out, size_t outlen)
{
	char cmd[1024];

	snprintf(out, outlen, "%s/%s.bpf.o", dir, name);
	snprintf(
		cmd, sizeof(cmd),
		"clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -Iinclude -I%s/../gen -Ibpf -c tests/policies/%s.bpf.c -o %s",
		th_bin_dir(), name, out);
	if (system("command -v clang >/dev/null"))
		th_skip("clang is missing: the test policies cannot be built");
	if (system(cmd))
		th_skip("cannot build the test policy %s with clang", name);
}

/* Run fn in a child as the attacker; returns its exit status (0 pass, 1 fail, 77 skip). */
static inline int adv_run_as_attacker(void (*fn)(void *), void *arg, int timeout_s)
{
	pid_t pid;
	int st;
	double t0;

	fflush(stdout);
	pid = fork();
	TH_ASSERT(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		adv_become_attacker();
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* after the setuid(), which clears it */
		fn(arg);
		fflush(stdout);
		_exit(0);
	}
	for (t0 = th_now(); waitpid(pid, &st, WNOHANG) == 0;) {
		if (th_now() - t0 > timeout_s) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			printf("attacker still running after %d s: killed\n", timeout_s);
			return 1;
		}
		usleep(10000);
	}
	if (WIFSIGNALED(st)) {
		printf("attacker died of signal %d\n", WTERMSIG(st));
		return 1;
	}
	return WEXITSTATUS(st);
}

#endif
