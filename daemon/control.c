// SPDX-License-Identifier: GPL-2.0
/*
 * The control socket: SOCK_SEQPACKET, so every request is one message and
 * a truncated or oversized one is detectable. Each request gets exactly
 * one reply; a bad request gets a reply that says what was wrong, and the
 * connection stays usable. npfd never waits on a client: a client that
 * does not read its replies is dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
#include "collect.h"
#include "control.h"
#include "device.h"
#include "evict.h"
#include "log.h"
#include "loop.h"
#include "mmcall.h"
#include "moved.h"
#include "npf_fdpass.h"
#include "policy.h"
#include "region.h"
#include "resolve.h"
#include "util.h"
#include "wait.h"
#include "wire_check.h"

/*
 * Room for every descriptor a message can carry (the kernel's SCM_MAX_FD):
 * those a buffer has no room for, the kernel closes itself in recvmsg(),
 * on the loop -- and a TCP socket with SO_LINGER closes only when its
 * data is sent or the linger ends (adversarial probe). Requests use at
 * most NPF_FDPASS_MAX; the others are closed as any left over.
 */
#define MAX_FDS 253

static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static char *reply_buf;
/* The connected clients, and the listening socket. */
static struct list_head clients = LIST_HEAD_INIT(clients);
static __u32 nr_clients;
static int listen_fd = -1, listen_src = -1;
static __u64 bad_messages; /* requests refused as malformed (npfctl status) */
/* For npfctl status: when npfd started, and its pin directory. */
static __u64 start_ns;
static const char *bpffs;
/* Clients whose answer went out after a wait: their queued requests are read next. */
static struct list_head resume = LIST_HEAD_INIT(resume);

static int check_runtime_dir(const char *path)
{
	char buf[PATH_MAX];
	struct stat st;
	char *dir;

	snprintf(buf, sizeof(buf), "%s", path);
	dir = dirname(buf);
	if (stat(dir, &st)) {
		if (errno != ENOENT || mkdir(dir, 0750)) {
			pr_err("cannot create runtime directory %s: %s", dir, strerror(errno));
			return -errno;
		}
		return 0;
	}
	if (!S_ISDIR(st.st_mode)) {
		pr_err("runtime directory %s is not a directory", dir);
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid() || (st.st_mode & S_IWOTH)) {
		pr_err("runtime directory %s is %s: refusing to put the socket there (use a directory owned by uid %u and not writable by others)",
		       dir, st.st_uid != geteuid() ? "owned by another user" : "writable by others",
		       geteuid());
		return -EPERM;
	}
	return 0;
}

static void client_ready(void *arg);

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#define CAP_BIT(n) (1ULL << (n))

#ifndef PIDFD_GET_USER_NAMESPACE
#define PIDFD_GET_USER_NAMESPACE _IO(0xFF, 9)
#endif

/*
 * Is the user namespace of the process pidfd names npfd's own? Asked of
 * the pidfd (Linux 6.11 on): /proc/PID/ns/user is looked up under the
 * process's exec_update_lock, which it holds as long as its execve()
 * waits (a FUSE server that never answers the FLUSH of a close-on-exec
 * file), and the loop waited with it (found by an adversarial probe).
 * Before 6.11 the link is opened on mmcall.c's thread, with its deadline.
 */
static bool same_user_ns(int pidfd, pid_t pid)
{
	struct stat peer, self;
	char path[64];
	int ns;

	ns = ioctl(pidfd, PIDFD_GET_USER_NAMESPACE, 0);
	if (ns < 0 && (errno == ENOTTY || errno == EINVAL)) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
		ns = mmcall_open(pid, path, O_RDONLY);
	}
	if (ns < 0)
		return false;
	if (fstat(ns, &peer) || stat("/proc/thread-self/ns/user", &self))
		peer.st_ino = 0;
	close(ns);
	return peer.st_ino && peer.st_dev == self.st_dev && peer.st_ino == self.st_ino;
}

/*
 * May this peer load BPF code (policy.c)? Root, or a process that could
 * load a tracing program itself: CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN,
 * in its effective set when it connected, in npfd's own user namespace: an
 * unprivileged user gets every capability in a user namespace it makes
 * (unshare -U), and with them was taken for root (found by an adversarial
 * review: it turned policies off for everyone and loaded a global one).
 * SO_PEERCRED's uid is translated into npfd's namespace, so root there is
 * root here. Its /proc entries are read through its pid, so the pidfd
 * makes sure the pid still names the peer afterwards.
 */
static bool peer_privileged(int pidfd, const struct ucred *cred)
{
	unsigned long long eff = 0;
	char path[64], line[256];
	bool found = false;
	FILE *f;

	if (cred->uid == 0)
		return true;
	if (pidfd < 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/status", cred->pid);
	f = same_user_ns(pidfd, cred->pid) ? fopen(path, "re") : NULL;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1) {
			found = true;
			break;
		}
	if (f)
		fclose(f);
	if (found && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0))
		found = false; /* the peer is gone: the pid may name another process */
	return found && ((eff & CAP_BIT(21)) /* CAP_SYS_ADMIN */ ||
			 ((eff & CAP_BIT(38)) && (eff & CAP_BIT(39)))); /* CAP_PERFMON, CAP_BPF */
}

/*
 * The connecting process, as a pidfd: SO_PEERPIDFD. On a kernel without
 * that option (before 6.5), pidfd_open() of its pid: a pid reused between
 * the connect and now would name another process, so such a pidfd only
 * tells when that one exits, and *peer_proven says it does not prove who
 * connected. -1 when there is none: SO_PEERPIDFD refuses one for a peer
 * that has exited and been reaped already (before 6.16), and a connection
 * whose process is gone must not be served (peer_exited()).
 */
static int peer_pidfd(int fd, pid_t pid, bool *peer_proven)
{
	socklen_t len = sizeof(int);
	int pidfd = -1;

	*peer_proven = !getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) && pidfd >= 0;
	if (!*peer_proven) {
		pidfd = -1;
		if (errno == ENOPROTOOPT || errno == EOPNOTSUPP)
			pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	}
	if (pidfd >= 0)
		fcntl(pidfd, F_SETFD, FD_CLOEXEC);
	return pidfd;
}

/*
 * Has the process that connected exited? Its connection may live on in
 * another process (a child that inherited the socket), and its pid may
 * come to name another process: every request names the connector's pid
 * (/proc/PID reads, pidfd_getfd(), /proc/PID/mem copies of its memory).
 * Served, a child that waited for the pid to be reused could have read
 * and zapped another user's memory as that process's (review).
 */
static bool peer_exited(const struct npfd_client *c)
{
	struct pollfd p = {.fd = c->pidfd, .events = POLLIN};

	return c->pidfd >= 0 && poll(&p, 1, 0) == 1;
}

struct uid_usage {
	unsigned int connections, regions, fds;
};

/* What npfd holds for uid now: counted, not tracked, so it cannot drift. */
static void uid_usage(uid_t uid, struct uid_usage *u)
{
	struct npfd_client *c;
	struct npfd_mm *mm;
	struct npfd_region *r;

	memset(u, 0, sizeof(*u));
	list_for_each_entry(c, &clients, node)
		if (c->uid == uid)
			u->connections++;
	u->fds = u->connections;
	list_for_each_entry(mm, &mms, node) {
		if (mm->uid != uid || mm->dead)
			continue;
		u->fds += 1 + (mm->pagemap_fd >= 0) + (mm->mem_fd >= 0) + (mm->pidfd >= 0) +
			  (mm->layout_fd >= 0) + device_fds(mm) + evict_fork_fds(mm) +
			  moved_fds(mm);
		list_for_each_entry(r, &mm->regions, node) {
			u->regions++;
			u->fds += (r->file_fd >= 0) + (r->store_fd >= 0);
		}
	}
}

int uid_limit_check(uid_t uid, unsigned int more_regions, unsigned int more_fds, char *err,
		    size_t errlen)
{
	struct uid_usage u;

	if (uid == 0)
		return 0;
	uid_usage(uid, &u);
	if (u.regions + more_regions > NPFD_UID_MAX_REGIONS)
		return refuse(
			err, errlen, ENOSPC,
			"uid %u has %u regions registered: at most %d per user (unregister some)",
			uid, u.regions, NPFD_UID_MAX_REGIONS);
	if (u.fds + more_fds > NPFD_UID_MAX_FDS)
		return refuse(
			err, errlen, EMFILE,
			"npfd holds %u descriptors for uid %u: at most %d per user (close connections or unregister regions)",
			u.fds, uid, NPFD_UID_MAX_FDS);
	return 0;
}

/*
 * Refuse a connection over its uid's limit, or of a process npfd has given
 * up (mmcall.h): one reply (seq 0, type NPF_MSG_REPLY) saying why, then
 * the end of the connection. It is not kept open until it sends a
 * request: idle connections are what is limited.
 */
static bool connection_refused(int fd, const struct ucred *cred)
{
	struct {
		struct npf_msg_hdr hdr;
		struct npf_reply body;
	} m = {};
	struct uid_usage u;

	if (mmcall_refuses(cred->pid)) {
		/* libnpf's fallback serves it meanwhile; it comes back once the call has returned */
		m.body.status = -EAGAIN;
		snprintf(
			m.body.error, sizeof(m.body.error),
			"npfd refused the connection: a call of npfd's into the address space of pid %d, or of %d processes of uid %u, has not returned within mm-call-timeout-ms",
			cred->pid, MMCALL_STUCK_PER_UID, cred->uid);
	} else {
		if (cred->uid == 0)
			return false;
		uid_usage(cred->uid, &u);
		if (u.connections < NPFD_UID_MAX_CONNECTIONS && u.fds < NPFD_UID_MAX_FDS)
			return false;
		m.body.status = u.connections >= NPFD_UID_MAX_CONNECTIONS ? -EUSERS : -EMFILE;
		snprintf(
			m.body.error, sizeof(m.body.error),
			"npfd refused the connection: uid %u has %u connections open and npfd holds %u descriptors for it (at most %d and %d per user)",
			cred->uid, u.connections, u.fds, NPFD_UID_MAX_CONNECTIONS,
			NPFD_UID_MAX_FDS);
	}
	m.hdr.magic = NPF_PROTO_MAGIC;
	m.hdr.version = NPF_PROTO_VERSION;
	m.hdr.type = NPF_MSG_REPLY;
	m.hdr.len = sizeof(m);
	pr_warn_rl("pid %d uid %u: %s", cred->pid, cred->uid, m.body.error);
	send(fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
	shutdown(fd, SHUT_RDWR);
	close(fd);
	return true;
}

static void listen_ready(void *arg)
{
	for (;;) {
		struct npfd_client *c;
		struct ucred cred;
		socklen_t len = sizeof(cred);
		int bufsz = NPF_MSG_MAX * 2;
		int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		bool proven;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR)
				pr_warn("accept on %s failed: %s", sock_path, strerror(errno));
			return;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
			pr_warn("cannot read the peer credentials of a new client: %s",
				strerror(errno));
			close(fd);
			continue;
		}
		if (connection_refused(fd, &cred))
			continue;
		/* Room for the largest reply, so a send never has to wait. */
		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bufsz, sizeof(bufsz)))
			setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof(bufsz));
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		INIT_LIST_HEAD(&c->resume);
		c->pid = cred.pid;
		c->uid = cred.uid;
		c->gid = cred.gid;
		c->pidfd = peer_pidfd(fd, cred.pid, &proven);
		if (c->pidfd < 0 && cred.uid != 0) {
			pr_warn_rl(
				"pid %d uid %u: connection refused: the process that connected cannot be had as a pidfd (it has exited?)",
				cred.pid, cred.uid);
			close(fd);
			free(c);
			continue;
		}
		/* capabilities are read from /proc/PID: only of a process the pidfd proves connected */
		c->privileged = peer_privileged(proven ? c->pidfd : -1, &cred);
		c->src = source_add(fd, POLLIN | POLLRDHUP, client_ready, c);
		if (c->src < 0) {
			pr_warn_rl(
				"pid %d uid %u: connection refused: npfd has no event source left",
				cred.pid, cred.uid);
			close(fd);
			if (c->pidfd >= 0)
				close(c->pidfd);
			free(c);
			continue;
		}
		list_add_tail(&c->node, &clients);
		nr_clients++;
		pr_debug("client pid %d uid %u connected", c->pid, c->uid);
	}
}

int control_open(const char *path, gid_t gid, const char *pin_dir, __u64 started_ns)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, err;

	bpffs = pin_dir;
	start_ns = started_ns;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		pr_err("socket path %s is too long (at most %zu bytes)", path,
		       sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	err = check_runtime_dir(path);
	if (err)
		return err;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	snprintf(sock_path, sizeof(sock_path), "%s", path);
	reply_buf = malloc(NPF_MSG_MAX);
	if (!reply_buf)
		return -ENOMEM;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		pr_err("cannot create the control socket: %s", strerror(errno));
		return -errno;
	}
	/*
	 * A socket file nobody answers on is left by an npfd that died. One
	 * that still accepts may be too: a killed npfd's io_uring is torn down
	 * by a kernel worker after the process is gone, and until then its
	 * listening socket takes connections nobody will read. The listener's
	 * pid (SO_PEERCRED: who called listen()) tells: gone or a zombie, the
	 * socket is stale; not visible from here (0), assume it is alive.
	 */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		struct ucred cr = {0};
		socklen_t len = sizeof(cr);

		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) || cr.pid <= 0 ||
		    process_alive(cr.pid)) {
			pr_err("another npfd (pid %d) is already listening on %s", cr.pid, path);
			close(fd);
			return -EADDRINUSE;
		}
		pr_info("%s is left by pid %d, which is gone: replacing it", path, cr.pid);
	}
	close(fd);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    (gid != (gid_t)-1 && chown(path, (uid_t)-1, gid)) || chmod(path, 0660) ||
	    listen(fd, 64)) {
		err = -errno;
		pr_err("cannot listen on %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return err;
	}
	listen_fd = fd;
	listen_src = source_add(fd, POLLIN, listen_ready, NULL);
	if (listen_src < 0)
		return listen_src;
	pr_info("listening on %s", path);
	return 0;
}

/* Every mm c answers for is given up: not unregistered when c goes (control_give_up_stuck()). */
static void give_up_mms_of(const struct npfd_client *c)
{
	struct npfd_mm *mm;

	list_for_each_entry(mm, &mms, node)
		if (mm->owner == c)
			mm->given_up = true;
}

static void client_drop(struct npfd_client *c)
{
	struct npfd_mm *mm, *tmp;

	if (c->dead)
		return;
	c->dead = true;
	pr_debug("client pid %d disconnected", c->pid);
	/* Its devices still end their retirement; nobody hears of it. */
	if (c->wait)
		c->wait->client = NULL;
	c->wait = NULL;
	list_del_init(&c->resume);
	/*
	 * The client's mm goes with it. npfd stopping, or the process
	 * given up (stuck: its connection may end before the loop gives it
	 * up, and goes the same way): the client's ranges stay registered
	 * with its userfaultfd, its journal entries and stores stay, for
	 * libnpf to hand them to the next npfd (or serve them itself
	 * meanwhile).
	 */
	list_for_each_entry(mm, &mms, node)
		if (mm->owner == c && !mm->given_up && mmcall_refuses(mm->tgid)) {
			give_up_mms_of(c);
			break;
		}
	list_for_each_entry_safe(mm, tmp, &mms, node)
		if (mm->owner == c)
			mm_destroy(mm, !loop_stopping() && !mm->given_up);
	source_del(c->src);
	/*
	 * shutdown() acts on the socket, not on this descriptor: the client
	 * sees the end of the connection now even if something still holds a
	 * reference to the file (a poll request the event loop has not reaped
	 * yet), instead of whenever that reference goes.
	 */
	shutdown(c->fd, SHUT_RDWR);
	close(c->fd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	c->pidfd = -1;
	list_del_init(&c->node);
	nr_clients--;
	free(c);
}

/*
 * Give up the address spaces of the processes whose calls mmcall.c refuses
 * (one missed its deadline): as when npfd stops, their ranges stay
 * registered with their userfaultfds, their stores and layout journals
 * stay, and their connections end. libnpf's fallback serves them
 * meanwhile (frozen pages too, as after a crash), and hands them back to
 * npfd once it accepts the process again (connection_refused()). Served
 * on, such a process would lose wake-ups: a write fault whose unprotect
 * fails is woken to fault again, for ever.
 */
void control_give_up_stuck(void)
{
	static __u64 seen;
	struct npfd_client *c;
	struct npfd_mm *mm;

	if (!mmcall_failed_since(&seen))
		return;
	collect_set_mm_calls_late(mmcall_late());
again:
	list_for_each_entry(mm, &mms, node) {
		if (mm->dead || (!mmcall_refuses(mm->tgid) && !mmcall_failed(mm->tgid)))
			continue;
		pr_warn("pid %d: npfd gives its address space up until its late call returns: libnpf serves its regions meanwhile",
			mm->tgid);
		mm->given_up = true;
		if (!mm->owner) {
			mm_destroy(mm, false);
			goto again;
		}
		/* what else its connection answers for goes the same way, not unregistered */
		give_up_mms_of(mm->owner);
		client_drop(mm->owner);
		goto again; /* it freed mm, and maybe more */
	}
	/* a connection with no address space yet (its late call a close of a descriptor it sent) */
	list_for_each_entry(c, &clients, node) {
		if (c->dead || c->mm || (!mmcall_refuses(c->pid) && !mmcall_failed(c->pid)))
			continue;
		pr_warn("pid %d: npfd closes its connection until its late call returns", c->pid);
		client_drop(c);
		goto again;
	}
	mmcall_failed_forget();
}

void control_close(void)
{
	struct npfd_client *c, *tmp;
	struct npfd_mm *mm, *mtmp;

	/* Answer the requests still waiting for an acknowledgement before the clients go. */
	device_retire_stop();
	list_for_each_entry_safe(c, tmp, &clients, node)
		client_drop(c);
	list_for_each_entry_safe(mm, mtmp, &mms, node)
		mm_destroy(mm, !loop_stopping() && !mm->given_up);
	if (listen_fd > 0) {
		source_del(listen_src);
		close(listen_fd);
		unlink(sock_path);
	}
	free(reply_buf);
}

/* Reply state for the request being handled. */
struct reply {
	struct npf_msg_hdr *hdr;
	struct npf_reply *body;
	char *payload;
	size_t room; /* payload bytes that fit */
	int fd;	     /* a descriptor sent with it (closed once sent), or -1 */
};

static void reply_start(struct reply *rp, const struct npf_msg_hdr *req)
{
	memset(reply_buf, 0, sizeof(struct npf_msg_hdr) + sizeof(struct npf_reply));
	rp->hdr = (struct npf_msg_hdr *)reply_buf;
	rp->body = (struct npf_reply *)(rp->hdr + 1);
	rp->payload = (char *)(rp->body + 1);
	rp->room = NPF_MSG_MAX - sizeof(*rp->hdr) - sizeof(*rp->body);
	rp->hdr->magic = NPF_PROTO_MAGIC;
	rp->hdr->version = NPF_PROTO_VERSION;
	rp->hdr->type = (__u16)((req ? req->type : 0) | NPF_MSG_REPLY);
	rp->hdr->seq = req ? req->seq : 0;
	rp->fd = -1;
}

static void *reply_item(struct reply *rp, size_t size)
{
	void *p;

	if (size > rp->room)
		return NULL;
	p = rp->payload;
	memset(p, 0, size);
	rp->payload += size;
	rp->room -= size;
	rp->body->count++;
	return p;
}

static void reply_error(struct reply *rp, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void reply_error(struct reply *rp, int status, const char *fmt, ...)
{
	va_list ap;

	rp->body->status = status;
	rp->body->count = 0;
	rp->payload = (char *)(rp->body + 1);
	va_start(ap, fmt);
	vsnprintf(rp->body->error, sizeof(rp->body->error), fmt, ap);
	va_end(ap);
}

static int reply_send(struct npfd_client *c, struct reply *rp)
{
	size_t len = (size_t)(rp->payload - reply_buf);

	union {
		char buf[NPF_FDPASS_SPACE];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = reply_buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	rp->hdr->len = (__u32)len;
	npf_fdpass_put(&mh, cbuf.buf, &rp->fd, rp->fd >= 0 && !rp->body->status);
	n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (rp->fd >= 0)
		close(rp->fd);
	rp->fd = -1;
	if (n < 0) {
		pr_warn("client pid %d: cannot send a reply (%s): dropping it", c->pid,
			strerror(errno));
		return -1;
	}
	return 0;
}

static void wait_answer(struct npfd_wait *w);

/* A request that waits for devices' acknowledgements (see struct npfd_wait). */
static struct npfd_wait *wait_new(const struct npf_msg_hdr *req)
{
	struct npfd_wait *w = calloc(1, sizeof(*w));

	if (w) {
		w->req = *req;
		w->answer = wait_answer;
	}
	return w;
}

/*
 * The last device w waited for has ended its retirement (wait_done()):
 * answer the request and let the client's next requests be read.
 */
static void wait_answer(struct npfd_wait *w)
{
	struct npfd_client *c = w->client;
	struct {
		struct npf_msg_hdr hdr;
		struct npf_reply body;
	} m;

	if (!c) {
		free(w); /* the client went while it waited */
		return;
	}
	memset(&m, 0, sizeof(m));
	m.hdr = (struct npf_msg_hdr){.magic = NPF_PROTO_MAGIC,
				     .version = NPF_PROTO_VERSION,
				     .type = (__u16)(w->req.type | NPF_MSG_REPLY),
				     .seq = w->req.seq,
				     .len = sizeof(m)};
	m.body.status = w->status;
	memcpy(m.body.error, w->err, sizeof(m.body.error));
	/* A failed send is seen as a hang-up when the client is read again. */
	if (send(c->fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		pr_warn("client pid %d: cannot send a reply (%s): dropping it", c->pid,
			strerror(errno));
	free(w);
	c->wait = NULL;
	list_add_tail(&c->resume, &resume);
}

/*
 * After each pass of the loop: read the clients whose waiting request was
 * answered (their requests queued behind it raise no new readiness), and
 * those that may have more than the one request read in the pass. Only
 * the ones listed when the pass ended: one read again now is read next
 * pass, after the others' events.
 */
void control_flush(void)
{
	struct list_head now = LIST_HEAD_INIT(now);

	list_splice_init(&resume, &now);
	while (!list_empty(&now)) {
		struct npfd_client *c = list_entry(now.next, struct npfd_client, resume);

		list_del_init(&c->resume);
		client_ready(c);
	}
}

bool control_pending(void)
{
	return !list_empty(&resume);
}

static void do_status(struct reply *rp)
{
	struct npf_status *st = reply_item(rp, sizeof(*st));
	const struct npf_global_stats *g = collect_global();

	st->npfd_pid = (__u32)getpid();
	st->proto_version = NPF_PROTO_VERSION;
	st->clients = nr_clients;
	st->regions = nr_regions;
	st->uptime_ns = now_ns() - start_ns;
	st->faults_resolved = resolve_faults_resolved;
	st->batches = resolve_batches;
	st->iommu_faults = g->iommu_faults;
	st->records_dropped = g->records_dropped;
	st->bad_messages = bad_messages;
	st->filter_misses = g->filter_misses;
	snprintf(st->bpffs, sizeof(st->bpffs), "%s", bpffs);
}

/*
 * May c see what npfd serves in address space mm (its regions' addresses,
 * names, counts)? Only its own user's, unless privileged: /proc/PID/maps of
 * another user's process is not readable either, and the lists gave every
 * user of the socket the layout of every client (review).
 */
static bool sees_mm(const struct npfd_client *c, const struct npfd_mm *mm)
{
	return c->privileged || mm->uid == c->uid;
}

/* A region's, by its id: a process may have two address spaces here (a fork's copy). */
static bool sees_region(const struct npfd_client *c, __u32 region_id)
{
	const struct npfd_region *r;

	if (c->privileged)
		return true;
	r = region_find_id(region_id);
	return r && sees_mm(c, r->mm);
}

static void do_list(const struct npfd_client *c, struct reply *rp)
{
	struct npfd_mm *mm;
	struct npfd_region *r;

	list_for_each_entry(mm, &mms, node)
		list_for_each_entry(r, &mm->regions, node) {
			struct npf_region_info *ri;

			if (!sees_mm(c, mm))
				continue;
			ri = reply_item(rp, sizeof(*ri));
			if (!ri) {
				reply_error(rp, -E2BIG, "too many regions for one reply");
				return;
			}
			region_info(r, ri);
		}
}

static void do_stats(const struct npfd_client *c, struct reply *rp, __u32 id)
{
	struct npfd_mm *mm;
	struct npfd_region *r;

	list_for_each_entry(mm, &mms, node)
		list_for_each_entry(r, &mm->regions, node) {
			struct npf_region_stats_full *sf;

			if ((id && r->id != id) || !r->stats || !sees_mm(c, mm))
				continue;
			sf = reply_item(rp, sizeof(*sf));
			if (!sf) {
				reply_error(rp, -E2BIG, "too many regions for one reply");
				return;
			}
			sf->stats = *r->stats;
			sf->latency = *r->latency;
		}
	if (id && !rp->body->count)
		reply_error(rp, -ENOENT, "no region %u", id);
}

/* One item of a list reply (devices, policies, ...), unless the reply already failed. */
static void emit_item(struct reply *rp, const void *item, size_t size, const char *what)
{
	void *out;

	if (rp->body->status)
		return;
	out = reply_item(rp, size);
	if (!out)
		reply_error(rp, -E2BIG, "too many %s for one reply", what);
	else
		memcpy(out, item, size);
}

/* A list's reply, and whom for (sees_mm()). */
struct listing {
	struct reply *rp;
	const struct npfd_client *c;
};

/*
 * By its user, not its region id: a retiring device is listed under the id
 * of a region that may be gone, and adopted since by another user.
 */
static void emit_device(const struct npf_device_info *info, uid_t uid, void *arg)
{
	struct listing *l = arg;

	if (l->c->privileged || uid == l->c->uid)
		emit_item(l->rp, info, sizeof(*info), "devices");
}

/*
 * The policies root loaded are everyone's to see: any user may choose one
 * by name for a region of its own. A region's choice is its owner's.
 */
static bool sees_policy(const struct npfd_client *c, bool chosen, __u32 region_id)
{
	return !chosen || sees_region(c, region_id);
}

static void emit_health(const struct npf_policy_health *h, bool chosen, void *arg)
{
	struct listing *l = arg;

	if (sees_policy(l->c, chosen, h->region_id))
		emit_item(l->rp, h, sizeof(*h), "policies");
}

static void emit_budget(const struct npf_budget_info *bi, void *arg)
{
	struct listing *l = arg;

	if (sees_region(l->c, bi->region_id))
		emit_item(l->rp, bi, sizeof(*bi), "regions");
}

static void emit_policy(const struct npf_policy_status *st, bool chosen, void *arg)
{
	struct listing *l = arg;

	if (sees_policy(l->c, chosen, st->region_id))
		emit_item(l->rp, st, sizeof(*st), "policies");
}

static void bad_message(struct npfd_client *c)
{
	bad_messages++;
	pr_warn_rl("client pid %d uid %u: refused a malformed request", c->pid, c->uid);
}

/* Handle one received message; returns -1 when the client must be dropped. */
/* A region registered (adopted, forked): its info, and its store for the process to read */
static void reply_region(struct reply *rp, struct npf_region_info *info)
{
	/* its process reads its evicted pages there if npfd dies */
	rp->fd = evict_store_reader(region_find_id(info->region_id));
	if (rp->fd >= 0)
		info->flags |= NPF_REGION_STORE_FD;
	memcpy(reply_item(rp, sizeof(*info)), info, sizeof(*info));
}

static int handle_message(struct npfd_client *c, char *buf, size_t n, int flags, int *fds, int nfds)
{
	struct npf_msg_hdr *hdr = (struct npf_msg_hdr *)buf;
	char why[NPF_ERRMSG_LEN];
	struct reply rp;
	int bad;

	if (n >= sizeof(*hdr) && hdr->magic == NPF_PROTO_MAGIC)
		reply_start(&rp, hdr);
	else
		reply_start(&rp, NULL);

	/* A register request of before fault_around_kib: the same, with the new fields zeroed. */
	_Static_assert(offsetof(struct npf_region_req, fault_around_kib) == NPF_REGION_REQ_SIZE_V1,
		       "NPF_REGION_REQ_SIZE_V1 is where the first version ended");
	if (n == sizeof(*hdr) + NPF_REGION_REQ_SIZE_V1 && hdr->magic == NPF_PROTO_MAGIC &&
	    hdr->type == NPF_MSG_REGION_REGISTER && hdr->len == n) {
		memset(buf + n, 0, sizeof(struct npf_region_req) - NPF_REGION_REQ_SIZE_V1);
		n += sizeof(struct npf_region_req) - NPF_REGION_REQ_SIZE_V1;
		hdr->len = (__u32)n;
	}
	bad = wire_check_request(buf, n, flags, nfds, why, sizeof(why));
	if (bad) {
		bad_message(c);
		reply_error(&rp, bad, "%s", why);
	} else {
		void *body = hdr + 1;
		char err[NPF_ERRMSG_LEN] = "";
		struct npfd_wait *w = NULL;
		int rc = 0;

		switch (hdr->type) {
		case NPF_MSG_STATUS:
			do_status(&rp);
			break;
		case NPF_MSG_REGION_LIST:
			do_list(c, &rp);
			break;
		case NPF_MSG_STATS:
			do_stats(c, &rp, ((struct npf_region_id_req *)body)->region_id);
			break;
		case NPF_MSG_REGION_UNREGISTER:
			w = wait_new(hdr);
			rc = !w ? refuse(err, sizeof(err), ENOMEM, "out of memory") :
				  region_unregister(c,
						    ((struct npf_region_id_req *)body)->region_id,
						    w, err, sizeof(err));
			break;
		case NPF_MSG_DEVICE_ATTACH:
		case NPF_MSG_DEVICE_ADOPT: {
			struct npf_device_attach_req areq = *(struct npf_device_attach_req *)body;
			struct npf_device_info info;
			__u32 want = 0;

			if (hdr->type == NPF_MSG_DEVICE_ADOPT) {
				const struct npf_device_adopt_req *ar = body;

				/* an attach, and the id the device already puts in its requests */
				areq = (struct npf_device_attach_req){.region_id = ar->region_id};
				want = ar->device_id;
				if (!want) {
					rc = -EINVAL;
					snprintf(err, sizeof(err),
						 "adopting a device needs its earlier id");
					break;
				}
			}
			if (nfds != 1) {
				rc = -EINVAL;
				snprintf(
					err, sizeof(err),
					"attaching a device needs 1 descriptor (its IO page table), got %d",
					nfds);
				break;
			}
			rc = uid_limit_check(c->uid, 0, 1, err, sizeof(err));
			if (!rc)
				rc = device_attach(c, &areq, want, fds[0], &info, err, sizeof(err));
			if (!rc)
				memcpy(reply_item(&rp, sizeof(info)), &info, sizeof(info));
			break;
		}
		case NPF_MSG_DEVICE_DETACH:
			w = wait_new(hdr);
			rc = !w ? refuse(err, sizeof(err), ENOMEM, "out of memory") :
				  device_detach(c, ((struct npf_device_id_req *)body)->device_id, w,
						err, sizeof(err));
			break;
		case NPF_MSG_DEVICE_LIST:
			device_list(emit_device, &(struct listing){&rp, c});
			break;
		case NPF_MSG_POLICY_LOAD: {
			struct npf_policy_status st;

			/* no descriptor: choose a loaded policy by name */
			rc = wire_check_policy_load(body, nfds, err, sizeof(err));
			if (!rc)
				rc = policy_load(c, body, nfds ? fds[0] : -1, &st, err,
						 sizeof(err));
			if (!rc)
				memcpy(reply_item(&rp, sizeof(st)), &st, sizeof(st));
			else
				pr_info_rl("client pid %d: policy refused: %s", c->pid, err);
			break;
		}
		case NPF_MSG_POLICY_UNLOAD: {
			struct npf_policy_name_req *nr = body;

			nr->name[sizeof(nr->name) - 1] = '\0';
			rc = policy_unload(c, nr->name, err, sizeof(err));
			break;
		}
		case NPF_MSG_POLICY_LIST:
			policy_list(emit_policy, &(struct listing){&rp, c});
			break;
		case NPF_MSG_POLICY_HEALTH:
			policy_health(emit_health, &(struct listing){&rp, c});
			break;
		case NPF_MSG_REGION_SET: {
			struct npf_budget_info bi;

			rc = evict_region_set(c, body, &bi, err, sizeof(err));
			if (!rc)
				emit_item(&rp, &bi, sizeof(bi), "regions");
			break;
		}
		case NPF_MSG_BUDGET_LIST: {
			__u32 id = ((struct npf_region_id_req *)body)->region_id;

			evict_budget_list(id, emit_budget, &(struct listing){&rp, c});
			if (id && !rp.body->count && !rp.body->status)
				rc = refuse(err, sizeof(err), ENOENT, "no region %u", id);
			break;
		}
		case NPF_MSG_EVICT_RING:
			rc = uid_limit_check(c->uid, 0, 1, err, sizeof(err));
			if (!rc)
				rc = evict_ring_adopt(c, body, err, sizeof(err));
			if (rc)
				pr_info_rl("client pid %d: eviction ring refused: %s", c->pid, err);
			break;
		case NPF_MSG_FORK_PREPARE: {
			struct npf_fork_info fi = {};

			rc = evict_fork_prepare(c, &fi, err, sizeof(err));
			if (!rc)
				memcpy(reply_item(&rp, sizeof(fi)), &fi, sizeof(fi));
			break;
		}
		case NPF_MSG_FORK_DONE:
			rc = evict_fork_done(c, body, err, sizeof(err));
			break;
		case NPF_MSG_LAYOUT: {
			struct npf_layout_info li = {.entries = NPF_LAYOUT_ENTRIES,
						     .entry_size = sizeof(struct npf_layout_entry)};

			if (!c->mm || c->mm->tgid != c->pid) {
				rc = refuse(err, sizeof(err), ENOENT,
					    "this connection has registered no region");
				break;
			}
			rc = c->mm->layout_fd < 0 ?
				     uid_limit_check(c->uid, 0, 1, err, sizeof(err)) :
				     0;
			rp.fd = rc ? -1 : mm_layout_reader(c->mm, err, sizeof(err));
			rc = rc ? rc : rp.fd < 0 ? rp.fd : 0;
			if (!rc)
				memcpy(reply_item(&rp, sizeof(li)), &li, sizeof(li));
			break;
		}
		case NPF_MSG_REGION_FORKED: {
			struct npf_region_forked_req *fr = body;
			struct npfd_region *parent;
			struct npfd_mm *parent_mm;
			struct npf_region_info info;
			struct fork_copy *copy;

			rc = evict_fork_find(c, fr, &copy, &parent_mm, err, sizeof(err));
			parent = rc ? NULL : region_find_id(fr->parent_region_id);
			if (parent && parent->mm != parent_mm)
				parent =
					NULL; /* not the forking process's: its holes are not the child's */
			/* the child's copy has the parent's holes: what is there is not the region's */
			if (!rc)
				rc = region_register(c, &fr->region, fds, nfds, 0,
						     parent ? &parent->holes : NULL, &info, err,
						     sizeof(err));
			if (rc) {
				pr_info_rl("client pid %d: forked region refused: %s", c->pid, err);
				break;
			}
			evict_fork_take(region_find_id(info.region_id), copy);
			reply_region(&rp, &info);
			break;
		}
		case NPF_MSG_POLICY_ENABLE:
			if (!c->privileged) {
				rc = -EPERM;
				snprintf(err, sizeof(err),
					 "only root may switch policies on or off");
				break;
			}
			collect_policy_enable(((struct npf_policy_enable_req *)body)->enabled != 0);
			pr_info("policies %s",
				((struct npf_policy_enable_req *)body)->enabled ?
					"enabled" :
					"disabled: every fault gets the built-in decision");
			break;
		case NPF_MSG_REGION_REGISTER:
		case NPF_MSG_REGION_ADOPT: {
			struct npf_region_adopt_req *ar = body;
			struct npf_region_info info;

			if (hdr->type == NPF_MSG_REGION_ADOPT &&
			    (!ar->region_id || (ar->flags & ~NPF_ADOPT_MORE))) {
				rc = -EINVAL;
				snprintf(
					err, sizeof(err),
					"adopting a region needs its earlier id and no flags (id %u, flags 0x%x)",
					ar->region_id, ar->flags);
				break;
			}
			rc = region_register(c, body, fds, nfds,
					     hdr->type == NPF_MSG_REGION_ADOPT ? ar->region_id : 0,
					     NULL, &info, err, sizeof(err));
			/* the last adoption, done or refused, ends the adopting */
			if (hdr->type == NPF_MSG_REGION_ADOPT && c->mm)
				c->mm->adopting = (ar->flags & NPF_ADOPT_MORE) != 0;
			if (!rc) {
				reply_region(&rp, &info);
			} else {
				pr_info_rl("client pid %d: region refused: %s", c->pid, err);
			}
			break;
		}
		}
		if (w && !rc && w->pending) {
			/* answered by wait_done() once the devices acknowledge */
			w->deferred = true;
			w->client = c;
			c->wait = w;
			return 0;
		}
		if (w && !rc && w->status) {
			rc = w->status;
			memcpy(err, w->err, sizeof(err));
		}
		free(w);
		if (rc)
			reply_error(&rp, rc, "%s", err);
	}
	return reply_send(c, &rp);
}

static void client_ready(void *arg)
{
	struct npfd_client *c = arg;
	char buf[NPF_REQ_MAX];
	union {
		char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf.buf,
			    .msg_controllen = sizeof(cbuf.buf)};
	int fds[MAX_FDS], nfds, i, rc;
	bool gone;
	ssize_t n;

	if (c->wait) {
		/*
		 * A request of c waits for an acknowledgement: the ones behind it
		 * stay queued, so that answers keep their order; control_flush()
		 * reads them. A hang-up is acted on now.
		 */
		struct pollfd p = {.fd = c->fd, .events = POLLRDHUP};

		if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)))
			client_drop(c);
		return;
	}
	if (c->dead)
		return;
	n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	/*
	 * Descriptors first, whatever the message: an empty message
	 * (n == 0) may carry some too, and they are npfd's to close.
	 * Only an empty message with no control data is the end of the
	 * connection.
	 */
	nfds = n >= 0 ? npf_fdpass_take(&mh, fds, MAX_FDS) : 0;
	if (n < 0 || (n == 0 && !mh.msg_controllen && !(mh.msg_flags & MSG_CTRUNC))) {
		client_drop(c);
		return;
	}
	gone = peer_exited(c);
	if (gone) {
		pr_warn_rl(
			"pid %d has exited: its connection, held by another process now, is closed unserved (the pid may come to name another process)",
			c->pid);
		rc = -ESRCH;
	} else {
		rc = handle_message(c, buf, (size_t)n, mh.msg_flags, fds, nfds);
	}
	/*
	 * Descriptors a request did not keep are closed here, whatever
	 * happened: on mmcall.c's worker, as a file on the client's FUSE
	 * mount waits in its close for the FLUSH it sends.
	 */
	for (i = 0; i < nfds; i++)
		mmcall_close(gone ? 0 : c->pid, fds[i]); /* gone: its pid may be another's */
	if (rc) {
		client_drop(c);
		return;
	}
	/*
	 * One request a pass: a client that sends its next one as soon as
	 * it has an answer would otherwise be served until it stops, and
	 * every other client wait (tests/adv_fork: a fork's copy, asked
	 * for again and again, made another client wait 2 s).
	 */
	if (!c->dead && !c->wait && list_empty(&c->resume))
		list_add_tail(&c->resume, &resume);
}
