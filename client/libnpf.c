// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libnpf: the client side of npfd's control protocol (include/npf_abi.h).
 *
 * One npf_client is one SOCK_SEQPACKET connection to npfd plus, once the
 * first region is registered, one userfaultfd for this process. Each
 * request is one message and gets exactly one reply message; requests on a
 * client are serialized, so replies cannot be confused between threads.
 * Every wait for npfd is bounded (timeout_ms): a reply that comes after its
 * request gave up is recognised by its sequence number and dropped.
 *
 * npfd may die or be restarted. The kernel keeps a userfaultfd's faults
 * pending while any holder of it lives, and this library holds the
 * process's: so it also keeps what it registered (ranges, a duplicate of
 * each backing file and IO page table) and, once npfd is back, hands it
 * all to the new npfd (NPF_MSG_REGION_ADOPT / NPF_MSG_DEVICE_ADOPT), which
 * wakes the stalled threads. One monitor thread per client with regions
 * watches the connection (it never touches registered memory): it
 * reconnects with backoff and, when npfd stays away longer than
 * fallback_ms (or stops reading the faults and answering), serves the
 * faults itself until npfd is back: zeros, or a pread() of the backing
 * file, installed with UFFDIO_COPY -- never zeros for a file's page.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/io_uring.h>
#include <linux/userfaultfd.h>
#include "npf.h"
#include "npf_fdpass.h"
#include "npf_nic_abi.h"
#include "npf_socket.h"
#include "npf_uffd.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

/*
 * What npfd needs to follow the mm. Not EVENT_FORK: a forked child
 * registers its copies of the regions itself (fork_child()).
 */
#define NPF_UFFD_FEATURES                                                                          \
	(UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP |         \
	 UFFD_FEATURE_THREAD_ID)

#define offsetofend(TYPE, FIELD) (offsetof(TYPE, FIELD) + sizeof(((TYPE *)0)->FIELD))

#define DEFAULT_TIMEOUT_MS 5000
#define DEFAULT_FALLBACK_MS 5000
#define MONITOR_TICK_MS 100 /* how often a connected monitor looks for stalled faults */
#define RECONNECT_MIN_MS 10 /* backoff between attempts to reach a restarted npfd */
#define RECONNECT_MAX_MS 200
#define PROBE_EVERY_MS 1000 /* in fallback with npfd connected: is it answering again? */
#define FORK_WAIT_MS 30000  /* fork(): the most it waits for npfd's copies, then for the child */

/* A region as this process registered it: what a new npfd is given to adopt. */
struct lib_region {
	__u32 id;      /* the caller's id: the one npfd answered at registration */
	__u32 npfd_id; /* the current npfd's id (the same unless it was taken) */
	__u64 start, length, file_offset;
	__u32 backing;
	__u32 flags, fault_around_kib; /* as registered (NPF_REGION_*) */
	int fd;			       /* a duplicate of the backing file, or -1 */
	char name[NPF_NAME_LEN];
	/*
	 * Anonymous: npfd's swap store, read-only (NPF_REGION_STORE_FD), or
	 * -1; page at address a is at byte a - store_origin, stored iff that
	 * is not a hole. The fallback reads evicted pages back from it.
	 */
	int store_fd;
	__u64 store_origin;
	/*
	 * What npfd's layout journal said of it when this record last agreed
	 * with npfd (registered, adopted, or an entry applied): an entry is
	 * applied only if npfd changed it since. The fallback's own cuts
	 * (npfd away) are not npfd's, and a dead npfd's entry must not undo
	 * them.
	 */
	__u64 known_start, known_length, known_offset;
};

/*
 * A part of a region that mremap() moved away, whose pages only npfd held
 * (npf_abi.h NPF_LAYOUT_PART): npfd's, from its journal, not all put back
 * when it died or stopped; or one the fallback saw move itself. Its range
 * is still registered with the userfaultfd: the fallback serves it, and
 * before the regions go to the next npfd, which knows nothing of it, it is
 * put back in full and unregistered (parts_finish()). Only the monitor
 * thread changes the parts.
 */
struct lib_part {
	__u64 start, length;
	__u64 offset; /* fd's byte offset of the page at start */
	int fd;	      /* a duplicate of the region's store or file; -1: nothing to read */
	bool store;   /* a store: a page is there to put back iff it holds data, unless dropped */
	int slot; /* its npfd's journal slot (its entry: c->parts_known), or -1 (the fallback's own) */
	__u64 done; /* parts_finish(): bytes from start put back so far */
};

struct lib_device {
	__u32 id;	 /* the device's id: in every page request it makes */
	__u32 region_id; /* the caller's region id */
	int fd;		 /* a duplicate of the IO page table */
	void *map;	 /* the fallback's mapping of it (see fallback_removed()), or NULL */
	size_t map_len;
};

struct npf_client {
	int sock;
	int uffd; /* -1 until the first register */
	__u32 seq;
	pthread_mutex_t lock; /* one request in flight; guards seq, sock, errmsg, buf, tables */
	char *buf;	      /* NPF_MSG_MAX bytes: the reply being received */
	char errmsg[NPF_ERRMSG_LEN];

	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int timeout_ms, fallback_ms;
	__u32 fallback;
	__u32 fork_mode; /* enum npf_fork */
	int connected;	 /* 0 once npfd's end closed; set again by reconnect() */
	__u32 conn_gen;	 /* bumped by every reconnect() */

	/* What was registered, for adoption; also read by the fallback (tab_lock). */
	pthread_mutex_t tab_lock;
	struct lib_region *regions;
	size_t nregions, regions_cap;
	struct lib_device *devices;
	size_t ndevices, devices_cap;
	struct lib_part *parts;
	size_t nparts, parts_cap;
	/* the journal's part entries taken (parts_take()), by slot past the regions', or NULL */
	struct npf_layout_entry *parts_known;

	pthread_t monitor;
	bool monitor_running;
	int wake_fd;	      /* eventfd: npf_client__close() stops the monitor */
	int serving;	      /* the monitor serves faults itself (fallback) */
	char *page;	      /* the fallback's page buffer (never registered memory) */
	int evict_ring;	      /* SQPOLL io_uring npfd evicts through, or -1 */
	__u32 evict_ring_gen; /* conn_gen + 1 of the connection npfd was told of it on */
	/* its rings, read-only: npfd's zaps not yet done are sq tail - cq tail */
	void *ring_map;
	size_t ring_map_len;
	const __u32 *ring_sq_tail, *ring_cq_tail;
	int reply_fd; /* the descriptor the last reply carried, or -1 */
	/* npfd's layout journal of this process's regions, read-only (layout_sync()), or -1 */
	int layout_fd;
	__u32 layout_gen; /* conn_gen + 1 of the connection it came on */
	/*
	 * Ranges the process dropped itself (MADV_DONTNEED) while the fallback
	 * served: they read zeros, not what npfd's store holds (tab_lock).
	 */
	struct drop {
		__u64 start, end;
	} * dropped;
	size_t ndropped, dropped_cap;
	/* pages whose write the fallback holds until no zap can run (fallback_hold()) */
	__u64 *held;
	size_t nheld, held_cap;
	/* fork(): every client of the process (fork_prepare()), and the fork under way */
	struct npf_client *next_client;
	bool forking; /* npfd keeps copies of the stores for the child, named by fork_token */
	__u8 fork_token[NPF_FORK_TOKEN_LEN];
};

static npf_print_fn_t print_fn;

npf_print_fn_t npf_set_print(npf_print_fn_t fn)
{
	npf_print_fn_t old = print_fn;

	print_fn = fn;
	return old;
}

__attribute__((format(printf, 2, 3))) static void pr(enum npf_print_level level, const char *fmt,
						     ...)
{
	npf_print_fn_t fn = print_fn;
	int saved = errno;
	va_list ap;

	if (!fn)
		return;
	va_start(ap, fmt);
	fn(level, fmt, ap);
	va_end(ap);
	errno = saved;
}

#define pr_debug(fmt, ...) pr(NPF_DEBUG, "libnpf: " fmt "\n", ##__VA_ARGS__)
#define pr_info(fmt, ...) pr(NPF_INFO, "libnpf: " fmt "\n", ##__VA_ARGS__)
#define pr_warn(fmt, ...) pr(NPF_WARN, "libnpf: " fmt "\n", ##__VA_ARGS__)

/* Record why the current operation failed, for npf_client__errmsg(); returns -err. */
__attribute__((format(printf, 3, 4))) static int set_err(struct npf_client *c, int err,
							 const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
	va_end(ap);
	pr_debug("%s", c->errmsg);
	return -err;
}

static __u64 now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000 + (__u64)ts.tv_nsec / 1000000;
}

/*
 * An options struct from a caller built against an older or newer npf.h:
 * it must at least hold its size, and bytes this library does not know
 * must be zero (as libbpf's OPTS_VALID).
 */
static bool opts_valid(const void *opts, size_t known)
{
	const char *p = opts;
	size_t sz, i;

	if (!opts)
		return true;
	sz = *(const size_t *)opts;
	if (sz < sizeof(size_t))
		return false;
	for (i = known; i < sz; i++)
		if (p[i])
			return false;
	return true;
}

#define OPTS_HAS(opts, TYPE, FIELD) ((opts) && (opts)->sz >= offsetofend(TYPE, FIELD))
#define OPTS_GET(opts, TYPE, FIELD, DFLT) (OPTS_HAS(opts, TYPE, FIELD) ? (opts)->FIELD : (DFLT))

/* An option: the caller's value, else the environment's, else the default. */
static int opt_ms(int val, const char *env, int dflt)
{
	const char *s = getenv(env);
	char *end;
	long v;

	if (val)
		return val;
	if (!s || !*s)
		return dflt;
	v = strtol(s, &end, 10);
	if (*end || v == 0 || v < -1 || v > 3600 * 1000) {
		pr_warn("ignoring %s=%s (milliseconds, or -1 for none); using %d", env, s, dflt);
		return dflt;
	}
	return (int)v;
}

static int open_socket(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, err;

	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* non-blocking: a listener that does not accept (a stopped npfd) fails at once */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = errno == EAGAIN ? ETIMEDOUT : errno;
		close(fd);
		return -err;
	}
	return fd;
}

static void clients_add(struct npf_client *c);

struct npf_client *npf_client__connect(const struct npf_client_opts *opts)
{
	const char *path = OPTS_GET(opts, struct npf_client_opts, socket_path, NULL);
	const char *fb_env = getenv("NPF_FALLBACK"), *fork_env = getenv("NPF_FORK");
	struct npf_client *c;
	int fd;

	if (!opts_valid(opts, sizeof(struct npf_client_opts))) {
		errno = EINVAL;
		return NULL;
	}
	path = npf_socket_path(path);
	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->uffd = -1;
	c->wake_fd = -1;
	c->evict_ring = -1;
	c->reply_fd = -1;
	c->layout_fd = -1;
	memcpy(c->path, path, strlen(path) + 1);
	c->timeout_ms = opt_ms(OPTS_GET(opts, struct npf_client_opts, timeout_ms, 0),
			       "NPF_TIMEOUT_MS", DEFAULT_TIMEOUT_MS);
	c->fallback_ms = opt_ms(OPTS_GET(opts, struct npf_client_opts, fallback_ms, 0),
				"NPF_FALLBACK_MS", DEFAULT_FALLBACK_MS);
	c->fallback = OPTS_GET(opts, struct npf_client_opts, fallback, NPF_FALLBACK_DEFAULT);
	if (c->fallback == NPF_FALLBACK_DEFAULT)
		c->fallback = fb_env && !strcasecmp(fb_env, "sigbus") ? NPF_FALLBACK_SIGBUS :
									NPF_FALLBACK_SERVE;
	c->fork_mode = OPTS_GET(opts, struct npf_client_opts, fork, NPF_FORK_DEFAULT);
	if (c->fork_mode == NPF_FORK_DEFAULT)
		c->fork_mode = fork_env && !strcasecmp(fork_env, "dontfork") ? NPF_FORK_DONTFORK :
									       NPF_FORK_COPY;
	if ((c->fallback != NPF_FALLBACK_SERVE && c->fallback != NPF_FALLBACK_SIGBUS) ||
	    (c->fork_mode != NPF_FORK_COPY && c->fork_mode != NPF_FORK_DONTFORK)) {
		free(c);
		errno = EINVAL;
		return NULL;
	}
	c->buf = malloc(NPF_MSG_MAX);
	if (!c->buf) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	fd = open_socket(path);
	if (fd < 0) {
		pr_debug("cannot connect to npfd at %s: %s", path, strerror(-fd));
		free(c->buf);
		free(c);
		errno = -fd;
		return NULL;
	}
	c->sock = fd;
	c->connected = 1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->tab_lock, NULL);
	clients_add(c);
	pr_debug("connected to npfd at %s", path);
	return c;
}

const char *npf_client__errmsg(const struct npf_client *c)
{
	return c ? c->errmsg : "";
}

/* Wait until fd is ready for ev, or the deadline (ms, CLOCK_MONOTONIC; 0: none). */
static int wait_ready(int fd, short ev, __u64 deadline)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = ev};
		int left = -1, n;

		if (deadline) {
			__u64 t = now_ms();

			if (t >= deadline)
				return -ETIMEDOUT;
			left = (int)(deadline - t);
		}
		n = poll(&p, 1, left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static __u64 deadline_of(const struct npf_client *c, int ms)
{
	return ms < 0 ? 0 : now_ms() + (__u64)ms;
}

/* npfd's end of the connection is gone: the monitor (or the next call) reconnects. */
static int lost(struct npf_client *c, int err, const char *what)
{
	__atomic_store_n(&c->connected, 0, __ATOMIC_RELEASE);
	return set_err(
		c, err,
		"%s: npfd at %s closed the connection (it died or was restarted); this process's regions are kept and handed to npfd when it is back",
		what, c->path);
}

static int send_request(struct npf_client *c, __u16 type, const void *body, size_t body_len,
			const int *fds, int nfds, __u64 deadline)
{
	struct npf_msg_hdr hdr = {
		.magic = NPF_PROTO_MAGIC,
		.version = NPF_PROTO_VERSION,
		.type = type,
		.len = (__u32)(sizeof(hdr) + body_len),
		.seq = ++c->seq,
	};
	union {
		char buf[NPF_FDPASS_SPACE];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov[2] = {
		{.iov_base = &hdr, .iov_len = sizeof(hdr)},
		{.iov_base = (void *)body, .iov_len = body_len},
	};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = body_len ? 2 : 1};
	ssize_t n;
	int err;

	npf_fdpass_put(&mh, cbuf.buf, fds, nfds);
	for (;;) {
		n = sendmsg(c->sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0 || (errno != EINTR && errno != EAGAIN))
			break;
		if (errno == EAGAIN && (err = wait_ready(c->sock, POLLOUT, deadline)))
			return set_err(
				c, -err,
				err == -ETIMEDOUT ?
					"npfd at %s did not take a request within %d ms (is it stopped or hung?)" :
					"cannot send a request to npfd at %s (%d ms): %s",
				c->path, c->timeout_ms, strerror(-err));
	}
	if (n < 0 && (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN))
		return lost(c, ECONNRESET, "cannot send a request");
	if (n < 0)
		return set_err(c, errno, "cannot send a request to npfd: %s", strerror(errno));
	if ((size_t)n != hdr.len)
		return set_err(c, EPROTO, "short send to npfd: %zd of %u bytes", n, hdr.len);
	return 0;
}

/* Receive the reply to request seq into c->buf; returns its length. */
static ssize_t recv_reply(struct npf_client *c, __u32 seq, __u64 deadline)
{
	const struct npf_msg_hdr *hdr = (const struct npf_msg_hdr *)c->buf;
	union {
		char buf[NPF_FDPASS_SPACE];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = c->buf, .iov_len = NPF_MSG_MAX};
	struct msghdr mh;
	ssize_t n;
	int err, fd;

	for (;;) {
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = sizeof(cbuf.buf);
		n = recvmsg(c->sock, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			err = wait_ready(c->sock, POLLIN, deadline);
			if (err == -ETIMEDOUT)
				return set_err(
					c, ETIMEDOUT,
					"npfd at %s did not answer within %d ms (is it stopped or hung?); set timeout_ms or NPF_TIMEOUT_MS to wait longer",
					c->path, c->timeout_ms);
			if (err)
				return set_err(c, -err, "cannot wait for npfd's reply: %s",
					       strerror(-err));
			continue;
		}
		if (n < 0 && errno == ECONNRESET)
			return lost(c, ECONNRESET, "no reply");
		if (n < 0)
			return set_err(c, errno, "cannot receive npfd's reply: %s",
				       strerror(errno));
		/* At most one descriptor (a region's store): the others are closed. */
		fd = -1;
		npf_fdpass_take(&mh, &fd, 1);
		if (n == 0) {
			if (fd >= 0)
				close(fd);
			return lost(c, ECONNRESET, "no reply");
		}
		/* The late reply of a request that timed out: not ours, drop it. */
		if ((size_t)n >= sizeof(*hdr) && hdr->magic == NPF_PROTO_MAGIC &&
		    (__s32)(seq - hdr->seq) > 0) {
			pr_debug("dropping npfd's late reply to request %u", hdr->seq);
			if (fd >= 0)
				close(fd);
			continue;
		}
		break;
	}
	/* taken by the caller that expects one (reply_take_fd()), else closed with the next */
	if (c->reply_fd >= 0)
		close(c->reply_fd);
	c->reply_fd = fd;
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		return set_err(c, EPROTO, "malformed reply from npfd: %zd bytes, more than %d", n,
			       NPF_MSG_MAX);
	return n;
}

/*
 * The region's store that came with a register or adopt reply (flags has
 * NPF_REGION_STORE_FD), or -1.
 */
static int reply_take_file(struct npf_client *c, bool expected)
{
	int fd = c->reply_fd;
	struct stat st;

	c->reply_fd = -1;
	if (fd < 0)
		return -1;
	/* a pipe or a socket would block the fallback's reads: only a regular file */
	if (!expected || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int reply_take_fd(struct npf_client *c, __u32 flags)
{
	return reply_take_file(c, flags & NPF_REGION_STORE_FD);
}

/*
 * Send one request and wait for its reply, on the current connection. On
 * success the reply's payload (count items of item_size bytes) is copied
 * into a malloc()ed array that the caller owns; when npfd refuses, its
 * reason goes to c->errmsg and its status is returned.
 */
static int request_raw(struct npf_client *c, __u16 type, const void *body, size_t body_len,
		       const int *fds, int nfds, size_t item_size, void **items, size_t *count,
		       int timeout_ms)
{
	const struct npf_msg_hdr *hdr = (const struct npf_msg_hdr *)c->buf;
	const struct npf_reply *rep = (const struct npf_reply *)(hdr + 1);
	__u64 deadline = deadline_of(c, timeout_ms);
	__u32 seq = c->seq + 1;
	ssize_t n;
	size_t want;
	int err;

	err = send_request(c, type, body, body_len, fds, nfds, deadline);
	if (err)
		return err;
	n = recv_reply(c, seq, deadline);
	if (n < 0)
		return (int)n;

	if ((size_t)n < sizeof(*hdr) + sizeof(*rep))
		return set_err(c, EPROTO, "malformed reply from npfd: %zd bytes, less than %zu", n,
			       sizeof(*hdr) + sizeof(*rep));
	if (hdr->magic != NPF_PROTO_MAGIC)
		return set_err(c, EPROTO, "malformed reply from npfd: magic 0x%08x", hdr->magic);
	if (hdr->version != NPF_PROTO_VERSION)
		return set_err(c, EPROTO,
			       "npfd speaks protocol version %u, this libnpf speaks version %d",
			       hdr->version, NPF_PROTO_VERSION);
	/* npfd refused the connection itself (a per-user limit): seq 0, no request type. */
	if (hdr->type == NPF_MSG_REPLY && hdr->seq == 0 && rep->status < 0) {
		memcpy(c->errmsg, rep->error, sizeof(c->errmsg));
		c->errmsg[sizeof(c->errmsg) - 1] = '\0';
		return rep->status;
	}
	if (hdr->type != (type | NPF_MSG_REPLY) || hdr->seq != seq)
		return set_err(
			c, EPROTO,
			"malformed reply from npfd: type 0x%x seq %u for request type %u seq %u",
			hdr->type, hdr->seq, type, seq);
	if (hdr->len != (size_t)n)
		return set_err(c, EPROTO,
			       "malformed reply from npfd: length field %u, received %zd", hdr->len,
			       n);

	if (rep->status < 0) {
		if (rep->count)
			return set_err(c, EPROTO, "malformed reply from npfd: error with %u items",
				       rep->count);
		memcpy(c->errmsg, rep->error, sizeof(c->errmsg));
		c->errmsg[sizeof(c->errmsg) - 1] = '\0';
		if (!c->errmsg[0])
			snprintf(c->errmsg, sizeof(c->errmsg), "%s", strerror(-rep->status));
		pr_debug("npfd refused request type %u: %s", type, c->errmsg);
		return rep->status;
	}
	if (rep->status > 0)
		return set_err(c, EPROTO, "malformed reply from npfd: status %d", rep->status);

	want = sizeof(*hdr) + sizeof(*rep) + (size_t)rep->count * item_size;
	if (want != (size_t)n || (rep->count && !item_size))
		return set_err(c, EPROTO,
			       "malformed reply from npfd: %zd bytes for %u items of %zu bytes", n,
			       rep->count, item_size);
	if (items) {
		/* Never NULL on success, even for no items: callers may test it. */
		*items = malloc(rep->count ? rep->count * item_size : 1);
		if (!*items)
			return set_err(c, ENOMEM, "out of memory for npfd's reply");
		memcpy(*items, rep + 1, rep->count * item_size);
	}
	if (count)
		*count = rep->count;
	return 0;
}

/* A request whose reply is exactly one item, copied to out. */
static int request_one_raw(struct npf_client *c, __u16 type, const void *body, size_t body_len,
			   const int *fds, int nfds, void *out, size_t size)
{
	void *items;
	size_t count;
	int err;

	err = request_raw(c, type, body, body_len, fds, nfds, size, &items, &count, c->timeout_ms);
	if (err)
		return err;
	if (count != 1) {
		free(items);
		return set_err(c, EPROTO, "malformed reply from npfd: %zu items, expected 1",
			       count);
	}
	memcpy(out, items, size);
	free(items);
	return 0;
}

static void region_forget(struct npf_client *c, size_t i);
static void device_forget(struct npf_client *c, size_t i);
static void fallback_settle_drops(struct npf_client *c);
static void wake_all(struct npf_client *c);
static void evict_ring_offer(struct npf_client *c);

/* The request that registers r again (an adoption, a forked child's copy). */
/* As npfd knows r now; an anonymous region's offset is its store's (npf_abi.h NPF_MSG_LAYOUT). */
static struct npf_region_req region_req_of(const struct lib_region *r)
{
	struct npf_region_req req = {.start = r->start,
				     .length = r->length,
				     .file_offset = r->backing == NPF_BACKING_ANON ?
							    r->start - r->store_origin :
							    r->file_offset,
				     .backing = r->backing,
				     .flags = r->flags,
				     .fault_around_kib = r->fault_around_kib};

	memcpy(req.name, r->name, sizeof(req.name));
	return req;
}

static void parts_take(struct npf_client *c, const struct npf_layout_entry *e, size_t n);
static void parts_known_forget(struct npf_client *c);
static int parts_finish(struct npf_client *c, bool npfds_too);

/*
 * Where npfd says this process's regions are now (npf_abi.h
 * NPF_MSG_LAYOUT): it followed their moves (mremap) and cuts (munmap of an
 * end) by the userfaultfd's events, which this process never sees. Read
 * before the regions are handed to the next npfd, and before the fallback
 * serves them: adopted where it was registered, a region moved or cut was
 * refused, and its memory, still registered with nobody to serve it, left
 * its threads waiting for good. A region with no entry (an npfd before
 * the journal) keeps what it was registered as. parts: also the parts of
 * regions that npfd had not put back (parts_take()): when npfd is away.
 */
static void layout_sync(struct npf_client *c, bool parts)
{
	static const size_t size = NPF_LAYOUT_ENTRIES * sizeof(struct npf_layout_entry);
	struct npf_layout_entry *e = malloc(size), *again = malloc(size);
	size_t i, k, n;
	ssize_t got;

	pthread_mutex_lock(&c->tab_lock);
	/* npfd may be writing an entry (alive, stalled): read until two reads agree */
	got = -1;
	for (int tries = 0; e && again && c->layout_fd >= 0 && tries < 8; tries++) {
		got = pread(c->layout_fd, e, size, 0);
		if (got <= 0 || pread(c->layout_fd, again, size, 0) != got ||
		    !memcmp(e, again, (size_t)got))
			break;
	}
	if (!e || !again)
		pr_warn("out of memory: npfd's layout journal is not read");
	n = got > 0 ? (size_t)got / sizeof(e[0]) : 0;
	for (i = 0; i < c->nregions; i++) {
		struct lib_region *r = &c->regions[i];

		/* the regions' slots (after them, the parts') */
		for (k = 0; k < n && k < NPF_MAX_RANGES_PER_PROC && e[k].region_id != r->npfd_id;
		     k++)
			;
		/* npfd's own file, read-only here: still, nothing odd is taken */
		if (k == n || k == NPF_MAX_RANGES_PER_PROC || e[k].flags || !e[k].length ||
		    ((e[k].start | e[k].length | e[k].offset) & 4095) ||
		    (e[k].start == r->known_start && e[k].length == r->known_length &&
		     e[k].offset == r->known_offset))
			continue;
		r->known_start = e[k].start;
		r->known_length = e[k].length;
		r->known_offset = e[k].offset;
		pr_info("region %u is at %p+0x%llx now (npfd followed a move or a cut; registered at %p+0x%llx)",
			r->id, (void *)(unsigned long)e[k].start, (unsigned long long)e[k].length,
			(void *)(unsigned long)r->start, (unsigned long long)r->length);
		if (r->backing == NPF_BACKING_ANON)
			r->store_origin = e[k].start - e[k].offset;
		else
			r->file_offset = e[k].offset;
		r->start = e[k].start;
		r->length = e[k].length;
	}
	if (parts)
		parts_take(c, e, n);
	pthread_mutex_unlock(&c->tab_lock);
	free(e);
	free(again);
}

/* With c->lock held: the current npfd's journal, once per connection (an older npfd has none). */
static void layout_fetch(struct npf_client *c)
{
	void *items = NULL;
	size_t n;
	int fd;

	if (c->layout_gen == c->conn_gen + 1)
		return;
	c->layout_gen = c->conn_gen + 1;
	if (request_raw(c, NPF_MSG_LAYOUT, NULL, 0, NULL, 0, sizeof(struct npf_layout_info), &items,
			&n, c->timeout_ms)) {
		pr_debug("npfd keeps no layout journal: %s", c->errmsg);
		fd = -1; /* an earlier npfd's would be read for this one's regions */
	} else {
		free(items);
		fd = reply_take_file(c, true);
	}
	pthread_mutex_lock(&c->tab_lock);
	if (c->layout_fd >= 0)
		close(c->layout_fd);
	c->layout_fd = fd;
	parts_known_forget(c); /* another npfd's journal */
	pthread_mutex_unlock(&c->tab_lock);
}

static int shorter_first(const void *a, const void *b)
{
	const struct lib_region *x = a, *y = b;

	return x->length < y->length ? -1 : x->length > y->length;
}

/*
 * Unregister [lo, hi) in the kernel. A mapping the process made in a hole
 * of a region (npfd's daemon/holes.h) is not registered, and one of a
 * regular file makes UFFDIO_UNREGISTER of a range over it fail whole
 * (EINVAL): then each private anonymous mapping in the range, one by one.
 */
static void unregister_lenient(int uffd, __u64 lo, __u64 hi)
{
	struct uffdio_range range = {.start = lo, .len = hi - lo};
	unsigned long long a, b, ino;
	char line[512], perms[8];
	FILE *f;

	if (!ioctl(uffd, UFFDIO_UNREGISTER, &range) || errno != EINVAL)
		return;
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx %7s %*s %*s %llu", &a, &b, perms, &ino) != 4 ||
		    b <= lo || a >= hi || ino || perms[3] != 'p')
			continue;
		range.start = a > lo ? a : lo;
		range.len = (b < hi ? b : hi) - range.start;
		ioctl(uffd, UFFDIO_UNREGISTER, &range);
	}
	fclose(f);
}

/*
 * Unregister r's range in the kernel, but not the other regions inside it
 * (in a hole of r: npfd's daemon/holes.h): they are still served.
 */
static void unregister_own(struct npf_client *c, const struct lib_region *r)
{
	__u64 lo = r->start, end = r->start + r->length;

	while (lo < end) {
		__u64 hi = end, next = end;

		for (size_t k = 0; k < c->nregions; k++) {
			const struct lib_region *q = &c->regions[k];

			if (q == r || q->start < lo || q->start >= hi || q->length > end - q->start)
				continue;
			hi = q->start;
			next = q->start + q->length;
		}
		if (hi > lo)
			unregister_lenient(c->uffd, lo, hi);
		lo = next;
	}
}

/*
 * A new connection to npfd, and everything this process had registered
 * handed to it. Called with c->lock held, when the old connection is gone.
 * A region the new npfd refuses (its memory was unmapped meanwhile, say)
 * is forgotten and unregistered in the kernel: a thread faulting on it
 * then gets the kernel's answer instead of waiting for ever.
 */
static int reconnect(struct npf_client *c)
{
	size_t i;
	int fd, err;

	fd = open_socket(c->path);
	if (fd < 0)
		return set_err(
			c, -fd,
			"npfd at %s is not running (%s); this process's regions are kept and handed to npfd when it is back",
			c->path, strerror(-fd));
	layout_sync(c, true); /* the earlier npfd's journal */
	/* the next npfd knows nothing of the parts: all back first, before it reads a fault */
	if (parts_finish(c, true)) {
		close(fd);
		return set_err(
			c, EAGAIN,
			"a part of a region moved by mremap() cannot be put back yet (an mm event of this process is not complete): npfd at %s gets the regions later",
			c->path);
	}
	close(c->sock);
	c->sock = fd;
	c->conn_gen++;
	__atomic_store_n(&c->connected, 1, __ATOMIC_RELEASE);

	fallback_settle_drops(c);
	/*
	 * Shortest first: a region in a hole of another lies inside that
	 * one's range, and the new npfd learns of the hole from it (the
	 * journal has no holes). Adopted first, the region around it would
	 * serve the inner one's pages until the inner one came.
	 */
	pthread_mutex_lock(&c->tab_lock);
	qsort(c->regions, c->nregions, sizeof(*c->regions), shorter_first);
	pthread_mutex_unlock(&c->tab_lock);
	for (i = 0; i < c->nregions;) {
		struct lib_region *r = &c->regions[i];
		struct npf_region_adopt_req req = {.region = region_req_of(r),
						   .region_id = r->npfd_id,
						   .flags = i + 1 < c->nregions ? NPF_ADOPT_MORE :
										  0};
		struct npf_region_info info;
		int fds[2] = {c->uffd, r->fd}, store;

		err = request_one_raw(c, NPF_MSG_REGION_ADOPT, &req, sizeof(req), fds,
				      r->backing == NPF_BACKING_FILE ? 2 : 1, &info, sizeof(info));
		if (err == -ECONNRESET || err == -ETIMEDOUT || err == -EPROTO)
			return err; /* this connection failed too: tried again later */
		if (err) {
			pr_warn("region %u (%p+0x%llx) lost: npfd at %s refused to adopt it: %s",
				r->id, (void *)(unsigned long)r->start,
				(unsigned long long)r->length, c->path, c->errmsg);
			unregister_own(c, r);
			region_forget(c, i);
			continue;
		}
		if (info.region_id != r->npfd_id)
			pr_info("region %u is region %u for the new npfd", r->id, info.region_id);
		r->npfd_id = info.region_id;
		store = reply_take_fd(c, info.flags);
		pthread_mutex_lock(&c->tab_lock);
		/* the new npfd's store (the earlier one's, found, or a new one) */
		if (r->store_fd >= 0)
			close(r->store_fd);
		r->store_fd = store;
		/* anonymous: where its store begins (npf_abi.h NPF_MSG_LAYOUT) */
		r->known_start = info.start;
		r->known_length = info.length;
		r->known_offset = info.file_offset;
		r->store_origin = r->backing == NPF_BACKING_ANON ? info.start - info.file_offset :
								   r->start;
		pthread_mutex_unlock(&c->tab_lock);
		i++;
	}
	for (i = 0; i < c->ndevices;) {
		struct lib_device *d = &c->devices[i];
		struct npf_device_adopt_req req = {.device_id = d->id};
		struct npf_device_info info;
		size_t k;

		for (k = 0; k < c->nregions; k++)
			if (c->regions[k].id == d->region_id)
				req.region_id = c->regions[k].npfd_id;
		err = req.region_id ? request_one_raw(c, NPF_MSG_DEVICE_ADOPT, &req, sizeof(req),
						      &d->fd, 1, &info, sizeof(info)) :
				      set_err(c, ENOENT, "its region %u is gone", d->region_id);
		if (err == -ECONNRESET || err == -ETIMEDOUT || err == -EPROTO)
			return err;
		if (err) {
			pr_warn("device %u lost: npfd at %s refused to adopt it: %s (its page requests go unanswered; attach it again)",
				d->id, c->path, c->errmsg);
			device_forget(c, i);
			continue;
		}
		i++;
	}
	pr_info("reconnected to npfd at %s: %zu regions and %zu devices adopted", c->path,
		c->nregions, c->ndevices);
	if (c->nregions) {
		evict_ring_offer(c);
		layout_fetch(c);
		wake_all(c); /* faults the earlier npfd read outside any region now */
	}
	return 0;
}

/*
 * Map the eviction ring's SQ and CQ rings read-only: the fallback tells
 * npfd's zaps still to run (their REMOVE events) from the process's own
 * drops. Without it every REMOVE counts as the process's own.
 */
static void ring_map(struct npf_client *c, const struct io_uring_params *p)
{
	size_t sq = p->sq_off.array + p->sq_entries * sizeof(__u32);
	size_t cq = p->cq_off.cqes + p->cq_entries * sizeof(struct io_uring_cqe);
	void *m;

	if (!(p->features & IORING_FEAT_SINGLE_MMAP))
		return; /* every kernel with SQPOLL for unprivileged users has it */
	c->ring_map_len = sq > cq ? sq : cq;
	m = mmap(NULL, c->ring_map_len, PROT_READ, MAP_SHARED | MAP_POPULATE, c->evict_ring,
		 IORING_OFF_SQ_RING);
	if (m == MAP_FAILED) {
		pr_debug("cannot map the eviction ring: %s", strerror(errno));
		return;
	}
	c->ring_map = m;
	c->ring_sq_tail = (const __u32 *)((const char *)m + p->sq_off.tail);
	c->ring_cq_tail = (const __u32 *)((const char *)m + p->cq_off.tail);
}

/* npfd's zaps submitted to the eviction ring and not done yet (a dead npfd's too). */
static __u32 zaps_in_flight(const struct npf_client *c)
{
	if (!c->ring_map)
		return 0;
	return __atomic_load_n(c->ring_sq_tail, __ATOMIC_ACQUIRE) -
	       __atomic_load_n(c->ring_cq_tail, __ATOMIC_ACQUIRE);
}

/*
 * With c->lock held, once this connection has a region: give npfd the way
 * to take pages out of this process (eviction, npf_abi.h
 * NPF_MSG_EVICT_RING): an io_uring whose submission thread is ours, by its
 * descriptor number (npfd fetches it with pidfd_getfd()). Nothing else
 * here uses the ring. An npfd that predates eviction refuses it: budgets
 * are then refused for this process, with the reason.
 */
static void evict_ring_offer(struct npf_client *c)
{
	struct npf_evict_ring_req req = {.fd = -1};
	int err;

	if (c->evict_ring_gen == c->conn_gen + 1)
		return;
	if (c->evict_ring < 0) {
		struct io_uring_params p;

		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_SQPOLL;
		p.sq_thread_idle = 1; /* ms the thread polls after work: eviction comes in trains */
		c->evict_ring = (int)syscall(__NR_io_uring_setup, NPF_EVICT_RING_ENTRIES, &p);
		if (c->evict_ring < 0) {
			pr_debug(
				"no eviction ring (io_uring SQPOLL: %s): npfd cannot evict this process's pages",
				strerror(errno));
			c->evict_ring_gen = c->conn_gen + 1;
			return;
		}
		fcntl(c->evict_ring, F_SETFD, FD_CLOEXEC);
		/*
		 * One io-wq worker: npfd's zaps run, and complete, in the order
		 * npfd submits them, so every zap still in flight is among the
		 * ring's last NPF_EVICT_RING_ENTRIES entries -- where the next
		 * npfd reads them if this one dies (npfd's old_zap_ranges()).
		 * With workers in parallel, a zap could outlive its entry.
		 */
		{
			__u32 one[2] = {1, 1}; /* bounded and unbounded workers */

			if (syscall(__NR_io_uring_register, c->evict_ring,
				    IORING_REGISTER_IOWQ_MAX_WORKERS, one, 2))
				pr_debug("cannot limit the eviction ring to one worker: %s",
					 strerror(errno));
		}
		ring_map(c, &p);
	}
	req.fd = c->evict_ring;
	err = request_raw(c, NPF_MSG_EVICT_RING, &req, sizeof(req), NULL, 0, 0, NULL, NULL,
			  c->timeout_ms);
	if (err)
		pr_debug("npfd did not take the eviction ring: %s", c->errmsg);
	c->evict_ring_gen = c->conn_gen + 1;
}

/* With c->lock held: a connection to npfd, reconnecting (and adopting) if it was lost. */
static int connection(struct npf_client *c)
{
	if (__atomic_load_n(&c->connected, __ATOMIC_ACQUIRE))
		return 0;
	/* With regions, the monitor reconnects (it alone, so the fallback never races it). */
	if (c->monitor_running)
		return set_err(
			c, ENOTCONN,
			"npfd at %s is away (it died or was restarted): libnpf is reconnecting in the background and hands this process's regions to it when it is back",
			c->path);
	return reconnect(c);
}

static int npf_request(struct npf_client *c, __u16 type, const void *body, size_t body_len,
		       const int *fds, int nfds, size_t item_size, void **items, size_t *count)
{
	int err = connection(c);

	return err ? err :
		     request_raw(c, type, body, body_len, fds, nfds, item_size, items, count,
				 c->timeout_ms);
}

static int request_one(struct npf_client *c, __u16 type, const void *body, size_t body_len,
		       const int *fds, int nfds, void *out, size_t size)
{
	int err = connection(c);

	return err ? err : request_one_raw(c, type, body, body_len, fds, nfds, out, size);
}

static int create_uffd(void)
{
	int fd, err;

	fd = npf_uffd_create(O_CLOEXEC | O_NONBLOCK);
	if (fd != -EPERM)
		return fd;
	err = -fd;
	pr_debug("userfaultfd() and /dev/userfaultfd: %s; trying userfaultfd(UFFD_USER_MODE_ONLY)",
		 strerror(err));

	/* Enough for the CPU faults of this process, which is what npfd resolves. */
	fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd >= 0)
		return fd;
	pr_debug("userfaultfd(UFFD_USER_MODE_ONLY): %s", strerror(errno));
	return -err;
}

static int uffd_api(int fd, __u64 features)
{
	struct uffdio_api api = {.api = UFFD_API, .features = features};

	return ioctl(fd, UFFDIO_API, &api) ? -errno : 0;
}

/*
 * Create this client's userfaultfd and enable the events npfd follows.
 * The kernel accepts one UFFDIO_API per descriptor.
 */
static int client_uffd(struct npf_client *c)
{
	int fd, err;

	if (c->uffd >= 0)
		return 0;
	fd = create_uffd();
	if (fd < 0)
		return set_err(
			c, -fd,
			fd == -ENOSYS ?
				"cannot create a userfaultfd: %s (the kernel lacks CONFIG_USERFAULTFD)" :
				"cannot create a userfaultfd: %s (run as root, grant access to /dev/userfaultfd, or set vm.unprivileged_userfaultfd=1)",
			strerror(-fd));
	err = uffd_api(fd, NPF_UFFD_FEATURES);
	if (err) {
		close(fd);
		return set_err(
			c, -err,
			"UFFDIO_API failed: %s (npfd needs userfaultfd events REMAP, REMOVE and UNMAP)",
			strerror(-err));
	}
	c->uffd = fd;
	pr_debug("created userfaultfd %d", fd);
	return 0;
}

/* ---- what this process registered (for adoption and the fallback) ---- */

static struct lib_region *region_of_id(struct npf_client *c, __u32 id)
{
	size_t i;

	for (i = 0; i < c->nregions; i++)
		if (c->regions[i].id == id)
			return &c->regions[i];
	return NULL;
}

/* The current npfd's id of the caller's region id (the same unless it changed). */
static __u32 npfd_region_id(struct npf_client *c, __u32 id)
{
	struct lib_region *r = region_of_id(c, id);

	return r ? r->npfd_id : id;
}

static void device_put(struct lib_device *d)
{
	if (d->map)
		munmap(d->map, d->map_len);
	close(d->fd);
}

/* No longer a region: with NPF_FORK_DONTFORK, a child has the memory again. */
static void region_dofork(const struct npf_client *c, const struct lib_region *r)
{
	if (c->fork_mode == NPF_FORK_DONTFORK)
		madvise((void *)(unsigned long)r->start, r->length, MADV_DOFORK);
}

static void region_forget(struct npf_client *c, size_t i)
{
	size_t k;

	pthread_mutex_lock(&c->tab_lock);
	for (k = 0; k < c->ndevices;) {
		if (c->devices[k].region_id == c->regions[i].id) {
			device_put(&c->devices[k]);
			c->devices[k] = c->devices[--c->ndevices];
			continue;
		}
		k++;
	}
	if (c->regions[i].fd >= 0)
		close(c->regions[i].fd);
	if (c->regions[i].store_fd >= 0)
		close(c->regions[i].store_fd);
	/* in order: reconnect() hands them over shortest first */
	memmove(&c->regions[i], &c->regions[i + 1], (--c->nregions - i) * sizeof(*c->regions));
	pthread_mutex_unlock(&c->tab_lock);
}

static void device_forget(struct npf_client *c, size_t i)
{
	pthread_mutex_lock(&c->tab_lock);
	device_put(&c->devices[i]);
	c->devices[i] = c->devices[--c->ndevices];
	pthread_mutex_unlock(&c->tab_lock);
}

static void *grow(void *arr, size_t *cap, size_t n, size_t size)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return arr;
	ncap = *cap ? *cap * 2 : 8;
	p = realloc(arr, ncap * size);
	if (p)
		*cap = ncap;
	return p;
}

/* ---- the fallback: faults served in-process while npfd is away ---- */

/*
 * With tab_lock: the region addr is in, or NULL. The shortest: a region
 * registered in a hole another one keeps (npfd: daemon/holes.h) lies
 * inside that one's range, and the page is the inner one's.
 */
static const struct lib_region *region_at(const struct npf_client *c, __u64 addr)
{
	const struct lib_region *at = NULL;

	for (size_t i = 0; i < c->nregions; i++)
		if (addr >= c->regions[i].start &&
		    addr - c->regions[i].start < c->regions[i].length &&
		    (!at || c->regions[i].length < at->length))
			at = &c->regions[i];
	return at;
}

/*
 * Does store (region r's store, or a duplicate of it) hold the page at
 * addr: data, not a hole, at its offset? addr is in r.
 */
static bool store_holds(int store, const struct lib_region *r, __u64 addr)
{
	off_t off = (off_t)(addr - r->store_origin);

	return addr >= r->store_origin && lseek(store, off, SEEK_DATA) == off;
}

/* With tab_lock: did the process drop addr itself while the fallback served? */
static bool dropped(const struct npf_client *c, __u64 addr)
{
	for (size_t i = 0; i < c->ndropped; i++)
		if (addr >= c->dropped[i].start && addr < c->dropped[i].end)
			return true;
	return false;
}

/* With tab_lock: [start, end) is recorded dropped. */
static void drop_add(struct npf_client *c, __u64 start, __u64 end)
{
	struct drop *d = grow(c->dropped, &c->dropped_cap, c->ndropped, sizeof(*d));

	if (d) {
		c->dropped = d;
		d[c->ndropped++] = (struct drop){start, end};
	} else {
		pr_warn("out of memory: pages dropped at 0x%llx may read npfd's stored copy",
			(unsigned long long)start);
	}
}

/*
 * A REMOVE event read by the fallback (MADV_DONTNEED of [start, end)):
 * the process's own drop, whose pages read zeros from now on, not what
 * npfd's store holds -- unless it may be one of npfd's zaps (zaps: see
 * fallback_read()), whose page was stored first. The cost: a page the
 * process drops itself while zaps are in flight reads its stored copy, not
 * zeros, as after an adoption (docs/design.md).
 */
static void fallback_dropped(struct npf_client *c, __u64 start, __u64 end, bool zaps)
{
	pthread_mutex_lock(&c->tab_lock);
	if (!zaps) {
		drop_add(c, start, end);
	} else {
		/* no zap of npfd's drops a part's page: there, it is the process's own drop */
		for (size_t i = 0; i < c->nparts; i++) {
			__u64 ps = c->parts[i].start, pe = ps + c->parts[i].length;
			__u64 lo = start > ps ? start : ps, hi = end < pe ? end : pe;

			if (lo < hi)
				drop_add(c, lo, hi);
		}
	}
	pthread_mutex_unlock(&c->tab_lock);
}

/*
 * Before a new npfd adopts the regions: the pages dropped while the
 * fallback served and never touched since get the zero page, so that the
 * new npfd, which reads its store on a missing fault, does not serve them
 * their evicted copy; and before npfd, back on the same connection, serves
 * them again (it did not read those drops). By the monitor.
 */
static void fallback_settle_drops(struct npf_client *c)
{
	pthread_mutex_lock(&c->tab_lock);
	for (size_t i = 0; i < c->ndropped; i++)
		for (size_t k = 0; k < c->nregions; k++) {
			const struct lib_region *r = &c->regions[k];
			__u64 lo = c->dropped[i].start > r->start ? c->dropped[i].start : r->start;
			__u64 hi = c->dropped[i].end < r->start + r->length ? c->dropped[i].end :
									      r->start + r->length;
			off_t data;

			while (r->store_fd >= 0 && lo < hi) {
				struct uffdio_zeropage z = {.range = {lo, NPF_PAGE_SIZE}};
				__u64 off = lo - r->store_origin;

				data = lseek(r->store_fd, (off_t)off, SEEK_DATA);
				if (data < 0)
					break; /* nothing stored from here on */
				if ((__u64)data >= off + NPF_PAGE_SIZE) {
					/* on to the page that holds the data: never backwards */
					lo += ((__u64)data - off) & ~(NPF_PAGE_SIZE - 1);
					continue;
				}
				/* EEXIST: touched since, it holds what the process wrote */
				ioctl(c->uffd, UFFDIO_ZEROPAGE, &z);
				lo += NPF_PAGE_SIZE;
			}
		}
	c->ndropped = 0;
	pthread_mutex_unlock(&c->tab_lock);
}

/* ---- parts of regions moved away (struct lib_part) ---- */

#define PARTS_EAGAIN_MS 2000 /* parts_finish(): how long it waits with no progress */

static void fallback_read(struct npf_client *c, bool serve);
static void fallback_unmap(struct npf_client *c, __u64 start, __u64 end);

/* With tab_lock: a part of [start, start + length) more; fd is taken. NULL: no memory (fd closed). */
static struct lib_part *part_add(struct npf_client *c, __u64 start, __u64 length, __u64 offset,
				 int fd, bool store, int slot)
{
	struct lib_part *t = grow(c->parts, &c->parts_cap, c->nparts, sizeof(*t));

	if (!t || (fd < 0 && store)) {
		pr_warn("%s: the pages moved to %p+0x%llx that only npfd held read zeros",
			t ? "no descriptor of the store" : "out of memory",
			(void *)(unsigned long)start, (unsigned long long)length);
		if (!t) {
			if (fd >= 0)
				close(fd);
			return NULL;
		}
	}
	c->parts = t;
	t = &c->parts[c->nparts++];
	*t = (struct lib_part){.start = start,
			       .length = length,
			       .offset = offset,
			       .fd = fd,
			       .store = store,
			       .slot = slot};
	return t;
}

/* With tab_lock. In order: a walk that adds parts at the end goes on over the others. */
static void part_drop(struct npf_client *c, size_t i)
{
	if (c->parts[i].fd >= 0)
		close(c->parts[i].fd);
	memmove(&c->parts[i], &c->parts[i + 1], (--c->nparts - i) * sizeof(*c->parts));
}

static int dup_or_none(int fd)
{
	return fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
}

/* With tab_lock: is part p where npfd's journal says, as it was taken (not moved or cut since)? */
static bool part_is_npfds(const struct npf_client *c, const struct lib_part *p)
{
	const struct npf_layout_entry *e;

	if (p->slot < 0 || !c->parts_known)
		return false;
	e = &c->parts_known[p->slot - NPF_MAX_RANGES_PER_PROC];
	return p->start == e->start && p->length == e->length && p->offset == e->offset;
}

/*
 * With tab_lock: the parts in npfd's journal e[0..n) (npf_abi.h
 * NPF_LAYOUT_PART), read from the regions' stores and files. An entry is
 * taken only if it changed since it was last taken (c->parts_known, per
 * slot, for as long as the journal is the same npfd's): the fallback
 * follows a part's moves and cuts itself while npfd is away, and drops it
 * once it is unmapped or finished; the dead npfd's entry must not bring it
 * back where it was -- into memory that may be another region's by now.
 */
static void parts_take(struct npf_client *c, const struct npf_layout_entry *e, size_t n)
{
	if (n > NPF_MAX_RANGES_PER_PROC && !c->parts_known &&
	    !(c->parts_known = calloc(NPF_LAYOUT_ENTRIES - NPF_MAX_RANGES_PER_PROC,
				      sizeof(*c->parts_known)))) {
		pr_warn("out of memory: the parts of regions npfd did not put back read zeros");
		return;
	}
	for (size_t k = NPF_MAX_RANGES_PER_PROC; k < n && k < NPF_LAYOUT_ENTRIES; k++) {
		struct npf_layout_entry *known = &c->parts_known[k - NPF_MAX_RANGES_PER_PROC];
		bool valid = e[k].region_id && (e[k].flags & NPF_LAYOUT_PART) && e[k].length &&
			     !((e[k].start | e[k].length | e[k].offset) & 4095) &&
			     e[k].start + e[k].length > e[k].start &&
			     e[k].offset + e[k].length > e[k].offset;
		const struct lib_region *r = NULL;
		size_t i;
		int fd;

		if (!memcmp(known, &e[k], sizeof(e[k])))
			continue;
		*known = e[k];
		for (i = 0; i < c->nparts && c->parts[i].slot != (int)k; i++)
			;
		if (i < c->nparts)
			part_drop(c, i); /* npfd finished it, or the slot is another part's now */
		if (!valid)
			continue;
		for (i = 0; i < c->nregions && c->regions[i].npfd_id != e[k].region_id; i++)
			;
		if (i < c->nregions)
			r = &c->regions[i];
		fd = r ? dup_or_none(r->backing == NPF_BACKING_ANON ? r->store_fd : r->fd) : -1;
		if (fd < 0) {
			pr_warn("the part of region %u moved to %p+0x%llx: npfd did not put it all back, and %s: its pages not back read zeros",
				e[k].region_id, (void *)(unsigned long)e[k].start,
				(unsigned long long)e[k].length,
				r ? "npfd's copies of them cannot be read here" :
				    "its region is not registered any more");
			/* still a part: unregistered before the next npfd, which would not know it */
		}
		if (part_add(c, e[k].start, e[k].length, e[k].offset, fd,
			     r && r->backing == NPF_BACKING_ANON, (int)k))
			pr_info("the part of region %u moved to %p+0x%llx is not all back: served here, and put back before the regions go to the next npfd",
				e[k].region_id, (void *)(unsigned long)e[k].start,
				(unsigned long long)e[k].length);
	}
}

/* With tab_lock: the parts taken so far are npfd's to take again (a new journal, or npfd back). */
static void parts_known_forget(struct npf_client *c)
{
	free(c->parts_known);
	c->parts_known = NULL;
}

/* With tab_lock: the part addr is in, or NULL. */
static const struct lib_part *part_at(const struct npf_client *c, __u64 addr)
{
	for (size_t i = 0; i < c->nparts; i++)
		if (addr >= c->parts[i].start && addr - c->parts[i].start < c->parts[i].length)
			return &c->parts[i];
	return NULL;
}

/* Is addr in a part (which the fallback serves whatever its mode: no region's)? */
static bool in_part(struct npf_client *c, __u64 addr)
{
	bool in;

	pthread_mutex_lock(&c->tab_lock);
	in = part_at(c, addr) != NULL;
	pthread_mutex_unlock(&c->tab_lock);
	return in;
}

/* The page at byte off of p's descriptor into buf (past the file's end: zeros). false: none. */
static bool part_read(const struct lib_part *p, off_t off, char *buf)
{
	ssize_t got = pread(p->fd, buf, NPF_PAGE_SIZE, off);

	if (got <= 0)
		return false;
	if (got < (ssize_t)NPF_PAGE_SIZE)
		memset(buf + got, 0, NPF_PAGE_SIZE - (size_t)got);
	return true;
}

/*
 * The page of part p at addr into buf: what is to be put there. false:
 * nothing is (a store's page it does not hold, or one the process dropped
 * since -- dropped, found with tab_lock: the kernel's zeros; a file's page
 * past its end: zeros too, as npfd puts none there). Without tab_lock: the
 * descriptor is the part's, and only the monitor, the caller, closes it.
 */
static bool part_page(const struct lib_part *p, __u64 addr, bool dropped, char *buf)
{
	off_t off = (off_t)(p->offset + (addr - p->start));

	if (p->fd < 0 || (p->store && (dropped || lseek(p->fd, off, SEEK_DATA) != off)))
		return false;
	return part_read(p, off, buf);
}

/* With tab_lock: [start, end) was unmapped. The parts there go; a part cut in its middle becomes two. */
static void parts_unmapped(struct npf_client *c, __u64 start, __u64 end)
{
	size_t i, n = c->nparts; /* a part added here is above end: not met again */

	for (i = 0; i < n;) {
		struct lib_part *p = &c->parts[i];
		__u64 ps = p->start, pe = p->start + p->length;

		if (end <= ps || start >= pe) {
			i++;
			continue;
		}
		if (start <= ps && end >= pe) {
			part_drop(c, i);
			n--;
			continue;
		}
		if (start > ps && end < pe) {
			struct lib_part q = *p;

			/* the piece above: a part of its own (the fallback's: no slot) */
			part_add(c, end, pe - end, q.offset + (end - ps), dup_or_none(q.fd),
				 q.store, -1);
			p = &c->parts[i];
		}
		if (start <= ps) {
			p->offset += end - ps;
			p->start = end;
			p->length = pe - end;
		} else {
			p->length = start - ps;
		}
		p->done = 0;
		i++;
	}
}

/* A range of addresses [start, end). */
struct span {
	__u64 start, end;
};

/* The next piece of [*lo, hi) that no span of s[0..n) covers; false when none is left. */
static bool piece_uncovered(const struct span *s, size_t n, __u64 *lo, __u64 hi, __u64 *pe)
{
	for (bool moved = true; moved;) {
		moved = false;
		for (size_t i = 0; i < n; i++)
			if (s[i].start <= *lo && *lo < s[i].end) {
				*lo = s[i].end;
				moved = true;
			}
	}
	if (*lo >= hi)
		return false;
	*pe = hi;
	for (size_t i = 0; i < n; i++)
		if (s[i].start > *lo && s[i].start < *pe)
			*pe = s[i].start;
	return true;
}

/*
 * With tab_lock: the process's drops recorded in [start, end) (fallback_dropped())
 * go (unmapped: what comes there is new memory), or move by delta with their memory.
 * A record left where its memory was would make what comes there read zeros; one
 * left behind by a move, its dropped pages read their old copy at the new place.
 */
static void drops_follow(struct npf_client *c, __u64 start, __u64 end, bool moved, __u64 delta)
{
	size_t n = 0, cap = 3 * c->ndropped;
	struct drop *out = cap ? malloc(cap * sizeof(*out)) : NULL;

	if (!c->ndropped)
		return;
	if (!out) {
		pr_warn("out of memory: pages dropped at 0x%llx read zeros if memory comes there",
			(unsigned long long)start);
		return;
	}
	for (size_t i = 0; i < c->ndropped; i++) {
		struct drop d = c->dropped[i];
		__u64 lo = d.start > start ? d.start : start, hi = d.end < end ? d.end : end;

		if (lo >= hi) {
			out[n++] = d;
			continue;
		}
		if (d.start < lo)
			out[n++] = (struct drop){d.start, lo};
		if (hi < d.end)
			out[n++] = (struct drop){hi, d.end};
		if (moved)
			out[n++] = (struct drop){lo + delta, hi + delta};
	}
	free(c->dropped);
	c->dropped = out;
	c->ndropped = n;
	c->dropped_cap = cap;
}

/*
 * mremap() of [from, from + len) to to, read by the fallback (npfd away):
 * what npfd would have done. A region or part that moved whole follows its
 * memory (its evicted pages are in the store at the same offsets); a piece
 * of one becomes a part at its new place, served from the region's store or
 * file and put back before the next npfd adopts the regions. A piece is a
 * region's only where no part and no region inside it (in its hole: libnpf
 * does not know the holes) is: those move as themselves, innermost first.
 * What is left at the old place is as if unmapped. Before, the fallback
 * dropped what moved, and its evicted pages read zeros at the new place.
 */
static void fallback_moved(struct npf_client *c, __u64 from, __u64 to, __u64 len)
{
	__u64 end = from + len, delta = to - from;
	struct uffdio_range source = {.start = from, .len = len};
	size_t i, k, n, no = 0, nheld = 0;
	struct span *held;
	size_t *ord;

	pthread_mutex_lock(&c->tab_lock);
	held = malloc((c->nparts + c->nregions + 1) * sizeof(*held));
	ord = malloc((c->nregions + 1) * sizeof(*ord));
	if (!held || !ord) {
		pr_warn("out of memory: what moved to %p+0x%llx is not followed",
			(void *)(unsigned long)to, (unsigned long long)len);
		goto out;
	}
	for (i = 0, n = c->nparts; i < n; i++) {
		struct lib_part p = c->parts[i];
		__u64 lo = from > p.start ? from : p.start;
		__u64 hi = end < p.start + p.length ? end : p.start + p.length;

		if (lo >= hi)
			continue;
		held[nheld++] = (struct span){lo, hi};
		if (lo == p.start && hi == p.start + p.length)
			c->parts[i].start += delta;
		else
			part_add(c, lo + delta, hi - lo, p.offset + (lo - p.start),
				 dup_or_none(p.fd), p.store, -1);
	}
	/* the regions there, shortest first (insertion: a process has few) */
	for (i = 0; i < c->nregions; i++) {
		const struct lib_region *r = &c->regions[i];

		if (r->start >= end || r->start + r->length <= from)
			continue;
		for (k = no++; k && c->regions[ord[k - 1]].length > r->length; k--)
			ord[k] = ord[k - 1];
		ord[k] = i;
	}
	for (k = 0; k < no; k++) {
		struct lib_region *r = &c->regions[ord[k]];
		__u64 lo = from > r->start ? from : r->start, a, pe;
		__u64 hi = end < r->start + r->length ? end : r->start + r->length;
		bool anon = r->backing == NPF_BACKING_ANON;

		if (lo == r->start && hi == r->start + r->length) {
			pr_info("region %u moved to %p while npfd was away", r->id,
				(void *)(unsigned long)(r->start + delta));
			r->start += delta;
			if (anon)
				r->store_origin += delta;
		} else {
			for (a = lo; piece_uncovered(held, nheld, &a, hi, &pe); a = pe) {
				pr_info("pages %p+0x%llx of region %u moved to %p while npfd was away: they leave the region",
					(void *)(unsigned long)a, (unsigned long long)(pe - a),
					r->id, (void *)(unsigned long)(a + delta));
				part_add(c, a + delta, pe - a,
					 anon ? a - r->store_origin :
						r->file_offset + (a - r->start),
					 dup_or_none(anon ? r->store_fd : r->fd), anon, -1);
			}
		}
		held[nheld++] = (struct span){lo, hi};
	}
	parts_unmapped(c, from, end);
	drops_follow(c, from, end, true, delta);
out:
	pthread_mutex_unlock(&c->tab_lock);
	free(held);
	free(ord);
	fallback_unmap(c, from, end); /* the regions cut there (those moved whole are at to now) */
	/* MREMAP_DONTUNMAP left the old place mapped, empty and registered: the process's own now */
	if (ioctl(c->uffd, UFFDIO_UNREGISTER, &source) && errno != EINVAL)
		pr_debug("cannot unregister %p+0x%llx, moved away: %s", (void *)(unsigned long)from,
			 (unsigned long long)len, strerror(errno));
}

/*
 * Put part i back in full, from where an earlier call stopped (its done):
 * every page it is to put there and is not there yet. 0, or -EAGAIN: an
 * mm event of the process is not complete (the kernel refuses UFFDIO_COPY
 * until it is). Only the monitor thread changes the parts, and it is
 * here: i stays part i.
 */
static int part_put_back(struct npf_client *c, size_t i)
{
	struct lib_part p = c->parts[i];
	__u64 off = p.offset + p.done, end = p.offset + p.length, failed = 0;
	struct uffdio_copy cp = {.src = (__u64)(unsigned long)c->page, .len = NPF_PAGE_SIZE};

	while (p.fd >= 0 && off < end) {
		off_t data = lseek(p.fd, (off_t)off, SEEK_DATA), hole;
		bool have, drop;

		if (data < 0 && errno == ENXIO)
			break; /* no data from here on */
		if (data < 0)
			data = (off_t)off; /* it cannot say: data everywhere */
		hole = lseek(p.fd, data, SEEK_HOLE);
		for (off = (__u64)data & ~(NPF_PAGE_SIZE - 1);
		     off < end && (hole < 0 || off < (__u64)hole); off += NPF_PAGE_SIZE) {
			cp.dst = p.start + (off - p.offset);
			cp.copy = 0;
			pthread_mutex_lock(&c->tab_lock);
			drop = dropped(c, cp.dst);
			pthread_mutex_unlock(&c->tab_lock);
			/* in a run of data (SEEK_DATA, SEEK_HOLE above): no second look per page */
			have = !(p.store && drop) && part_read(&p, (off_t)off, c->page);
			if (have && ioctl(c->uffd, UFFDIO_COPY, &cp)) {
				if (errno == EAGAIN)
					return -EAGAIN;
				/* EEXIST: there already (moved present, or written since); ENOENT: unmapped */
				if (errno != EEXIST && errno != ENOENT && !failed++)
					pr_warn("cannot put page %p back: UFFDIO_COPY: %s",
						(void *)(unsigned long)cp.dst, strerror(errno));
			}
			c->parts[i].done = off + NPF_PAGE_SIZE - p.offset;
		}
	}
	if (failed)
		pr_warn("the part at %p+0x%llx: %llu pages could not be put back, and read zeros",
			(void *)(unsigned long)p.start, (unsigned long long)p.length,
			(unsigned long long)failed);
	return 0;
}

/*
 * Put every part back in full and unregister it: it is the process's own
 * memory then, as npfd would have left it. Before the regions go to the
 * next npfd, which knows nothing of the parts (a fault there would be
 * zero-filled as outside every region). npfds_too false: npfd is back on
 * the same connection and still puts its own parts back; only those it
 * cannot know of -- the fallback's own, and its own that the fallback
 * moved or cut -- are finished here. The events that keep a part from
 * being put back are read meanwhile (and followed); -EAGAIN: no progress
 * for PARTS_EAGAIN_MS. The faults it read and did not serve are woken.
 */
static int parts_finish(struct npf_client *c, bool npfds_too)
{
	__u64 deadline = now_ms() + PARTS_EAGAIN_MS;
	bool faults_read = false;
	int err = 0;

	for (;;) {
		size_t i = c->nparts;
		struct lib_part p;
		__u64 done;

		while (i && !npfds_too && part_is_npfds(c, &c->parts[i - 1])) {
			pthread_mutex_lock(&c->tab_lock);
			part_drop(c, --i);
			pthread_mutex_unlock(&c->tab_lock);
		}
		if (!i)
			break;
		p = c->parts[--i];
		done = p.done;
		if (part_put_back(c, i) == -EAGAIN) {
			if (c->parts[i].done != done)
				deadline = now_ms() + PARTS_EAGAIN_MS; /* it went on */
			if (now_ms() >= deadline) {
				err = -EAGAIN;
				break;
			}
			/* the event read, its process goes on; the part may move or be cut meanwhile */
			fallback_read(c, c->serving);
			faults_read |= !c->serving;
			usleep(1000);
			continue;
		}
		unregister_lenient(c->uffd, p.start, p.start + p.length);
		pr_info("the part at %p+0x%llx moved out of a region is all back: the process's own memory now",
			(void *)(unsigned long)p.start, (unsigned long long)p.length);
		pthread_mutex_lock(&c->tab_lock);
		part_drop(c, i);
		pthread_mutex_unlock(&c->tab_lock);
	}
	if (faults_read)
		wake_all(c);
	return err;
}

/* A whole page at off of fd into buf: 0, or -errno (-EIO: the file ends). */
static int read_page(int fd, char *buf, off_t off)
{
	size_t got = 0;

	while (got < NPF_PAGE_SIZE) {
		ssize_t n = pread(fd, buf + got, NPF_PAGE_SIZE - got, off + (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n ? -errno : -EIO;
		got += (size_t)n;
	}
	return 0;
}

/* c->page installed at addr (the monitor's fallback): 0, or -errno to SIGBUS. */
static int fallback_install(struct npf_client *c, __u64 addr, char *why, size_t whylen)
{
	struct uffdio_copy cp = {
		.dst = addr, .src = (__u64)(unsigned long)c->page, .len = NPF_PAGE_SIZE};

	/*
	 * A zap of npfd's may still drop this page: the REMOVE that let it
	 * fault may have been the process's own drop, not the zap's. Then it
	 * is installed write-protected, so that a write waits (fallback_hold())
	 * until no zap can run, or the zap would drop it. EINVAL: a region npfd
	 * never registered for write-protect faults (no budget: no zaps).
	 */
	if (zaps_in_flight(c))
		cp.mode = UFFDIO_COPY_MODE_WP;
	if (!ioctl(c->uffd, UFFDIO_COPY, &cp))
		return 0;
	if (errno == EINVAL && cp.mode) {
		cp.mode = 0;
		cp.copy = 0;
		if (!ioctl(c->uffd, UFFDIO_COPY, &cp))
			return 0;
	}
	if (errno == EEXIST || errno == EAGAIN || errno == ENOENT || errno == ESRCH) {
		/*
		 * There already (npfd was quicker: nothing is overwritten), or
		 * an mm event is pending (EAGAIN): wake the thread, it faults
		 * again if it must and is served after the event.
		 */
		struct uffdio_range range = {.start = addr, .len = NPF_PAGE_SIZE};

		ioctl(c->uffd, UFFDIO_WAKE, &range);
		return 0;
	}
	snprintf(why, whylen, "cannot install page 0x%llx: UFFDIO_COPY: %s",
		 (unsigned long long)addr, strerror(errno));
	return -errno;
}

/*
 * Install one page at addr: zeros, the backing file's bytes, or the copy
 * npfd evicted to its swap store. 0, or -errno to SIGBUS.
 */
static int fallback_page(struct npf_client *c, __u64 addr, char *why, size_t whylen)
{
	struct lib_region r = {.fd = -1};
	const struct lib_region *at;
	const struct lib_part *part;
	bool found = false;
	int fd = -1, store = -1;

	pthread_mutex_lock(&c->tab_lock);
	if ((part = part_at(c, addr))) {
		/* a part moved out of a region: what npfd would put there, or zeros */
		struct lib_part p = *part;
		bool drop = dropped(c, addr);

		pthread_mutex_unlock(&c->tab_lock);
		if (!part_page(&p, addr, drop, c->page))
			memset(c->page, 0, NPF_PAGE_SIZE);
		return fallback_install(c, addr, why, whylen);
	}
	if ((at = region_at(c, addr))) {
		r = *at;
		found = true;
		/* the fd must outlive the lock: a concurrent unregister closes it */
		if (r.fd >= 0)
			fd = fcntl(r.fd, F_DUPFD_CLOEXEC, 0);
		if (r.store_fd >= 0 && !dropped(c, addr))
			store = fcntl(r.store_fd, F_DUPFD_CLOEXEC, 0);
	}
	pthread_mutex_unlock(&c->tab_lock);

	memset(c->page, 0, NPF_PAGE_SIZE);
	if (found && r.backing == NPF_BACKING_FILE) {
		off_t off = (off_t)(r.file_offset + (addr - r.start));
		int err;

		if (fd < 0) {
			snprintf(why, whylen, "region %u: no backing file descriptor (%s)", r.id,
				 strerror(errno));
			return -EBADF;
		}
		err = read_page(fd, c->page, off);
		close(fd);
		if (err) {
			snprintf(
				why, whylen,
				"cannot read page 0x%llx of region %u from its backing file at offset %lld: %s",
				(unsigned long long)addr, r.id, (long long)off,
				err == -EIO ? "end of file" : strerror(-err));
			return err;
		}
	} else if (store >= 0) {
		/* evicted by npfd: its copy in the store (data there), else never stored */
		off_t off = (off_t)(addr - r.store_origin);
		int err = store_holds(store, &r, addr) ? read_page(store, c->page, off) : 0;

		close(store);
		if (err) {
			snprintf(
				why, whylen,
				"cannot read evicted page 0x%llx of region %u from npfd's swap store: %s",
				(unsigned long long)addr, r.id, strerror(-err));
			return err;
		}
	}
	return fallback_install(c, addr, why, whylen);
}

static void fallback_sigbus(struct npf_client *c, __u32 tid, __u64 addr, const char *why)
{
	pr_warn("SIGBUS to thread %u at 0x%llx: %s", tid, (unsigned long long)addr, why);
	if (tid)
		syscall(SYS_tgkill, getpid(), tid, SIGBUS);
	else
		kill(getpid(), SIGBUS);
}

/*
 * Pages of [start, end) left the address space (MADV_DONTNEED, munmap)
 * while npfd is away: no device may keep using them. Their IO page table
 * entries are cleared (version bumped) as npfd would; the device then asks
 * for the pages again, and the next npfd answers. Nothing else of the
 * table is touched: the invalidation ring and its sequence are npfd's.
 */
static void fallback_removed(struct npf_client *c, __u64 start, __u64 end)
{
	size_t k;

	pthread_mutex_lock(&c->tab_lock);
	for (k = 0; k < c->ndevices; k++) {
		struct lib_device *d = &c->devices[k];
		struct npf_iopt_header *h;
		__u64 *pte, lo, hi, i;
		struct stat st;

		if (!d->map) {
			if (fstat(d->fd, &st) || (size_t)st.st_size < sizeof(*h))
				continue;
			d->map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
				      d->fd, 0);
			if (d->map == MAP_FAILED) {
				d->map = NULL;
				pr_warn("device %u: cannot map its IO page table: %s", d->id,
					strerror(errno));
				continue;
			}
			d->map_len = (size_t)st.st_size;
		}
		h = d->map;
		if (h->magic != NPF_IOPT_MAGIC || h->pte_offset < sizeof(*h) ||
		    h->npages > (d->map_len - h->pte_offset) / sizeof(__u64))
			continue;
		pte = (__u64 *)((char *)d->map + h->pte_offset);
		lo = start > h->start ? start : h->start;
		hi = h->start + h->npages * NPF_PAGE_SIZE;
		if (end < hi)
			hi = end;
		for (i = lo; i < hi; i += NPF_PAGE_SIZE) {
			__u64 *e = &pte[(i - h->start) >> NPF_PAGE_SHIFT];
			__u64 old = __atomic_load_n(e, __ATOMIC_RELAXED), val;

			do {
				if (!(old & NPF_PTE_PRESENT))
					break;
				val = (((old >> NPF_PTE_VERSION_SHIFT) + 1)
				       << NPF_PTE_VERSION_SHIFT) |
				      (old & (NPF_PTE_ACCESSED | NPF_PTE_DIRTY));
			} while (!__atomic_compare_exchange_n(e, &old, val, false, __ATOMIC_RELEASE,
							      __ATOMIC_RELAXED));
		}
	}
	pthread_mutex_unlock(&c->tab_lock);
}

/* munmap of [start, end) read by the fallback: regions inside go, those cut shrink. */
static void fallback_unmap(struct npf_client *c, __u64 start, __u64 end)
{
	size_t i;

	pthread_mutex_lock(&c->tab_lock);
	for (i = 0; i < c->nregions;) {
		struct lib_region *r = &c->regions[i];
		__u64 rs = r->start, re = r->start + r->length;

		if (end <= rs || start >= re) {
			i++;
			continue;
		}
		if (start <= rs && end >= re) {
			pthread_mutex_unlock(&c->tab_lock);
			region_forget(c, i);
			pthread_mutex_lock(&c->tab_lock);
			continue;
		}
		if (start <= rs) {
			r->file_offset += end - rs;
			r->start = end;
			r->length = re - end;
		} else if (end >= re) {
			r->length = start - rs;
		}
		i++;
	}
	pthread_mutex_unlock(&c->tab_lock);
}

/*
 * A write fault of a page npfd write-protected while a zap of npfd's may
 * still run (zaps: see fallback_read()): the page may be a victim npfd
 * handed to the zap before it died -- frozen with its copy stored, or
 * clean with no copy at all (installed as zeros, dropped as such). Made
 * writable now, the write would be dropped by that zap and the page read
 * back without it, from its copy or as zeros (tests/evict_adopt_frozen
 * read 136 pages of zeros so, in 1 of 20 runs of its fallback phase). So the
 * writer waits: the zap's REMOVE wakes it (it faults the page in again and
 * writes there), or fallback_release() lets the page go once no zap can
 * run. False if it cannot be held (out of memory): made writable.
 */
static bool fallback_hold(struct npf_client *c, __u64 addr, bool zaps)
{
	__u64 *h;

	if (!zaps)
		return false;
	h = grow(c->held, &c->held_cap, c->nheld, sizeof(*h));
	if (!h)
		return false;
	c->held = h;
	h[c->nheld++] = addr;
	return true;
}

/* [start, end) went (a zap's REMOVE, an unmap): its held writers fault again. */
static void fallback_held_gone(struct npf_client *c, __u64 start, __u64 end)
{
	for (size_t i = 0; i < c->nheld;) {
		struct uffdio_range range = {.start = c->held[i], .len = NPF_PAGE_SIZE};

		if (c->held[i] < start || c->held[i] >= end) {
			i++;
			continue;
		}
		ioctl(c->uffd, UFFDIO_WAKE, &range);
		c->held[i] = c->held[--c->nheld];
	}
}

/*
 * Held writers: made writable and woken once no zap can run, or only
 * woken (unprotect: false) when npfd is back -- they fault again, and npfd
 * decides.
 */
static void fallback_release(struct npf_client *c, bool unprotect)
{
	if (!c->nheld || (unprotect && zaps_in_flight(c)))
		return;
	for (size_t i = 0; i < c->nheld; i++) {
		struct uffdio_writeprotect wp = {
			.range = {.start = c->held[i], .len = NPF_PAGE_SIZE}};

		if (!unprotect || ioctl(c->uffd, UFFDIO_WRITEPROTECT, &wp))
			ioctl(c->uffd, UFFDIO_WAKE, &wp.range);
	}
	c->nheld = 0;
}

/*
 * Read and handle what the userfaultfd holds now (the monitor). serve:
 * faults are served (the fallback); else their threads sleep on, until
 * the parts' unregister or reconnect()'s wake_all() (parts_finish() reads
 * the events that keep it from putting a part back).
 */
static void fallback_read(struct npf_client *c, bool serve)
{
	struct uffd_msg msgs[16];

	for (;;) {
		/*
		 * May an event read now be one of npfd's zaps (its REMOVE)?
		 * While the eviction ring has zaps in flight -- counted before
		 * the read: reading a zap's REMOVE lets that zap finish, so of
		 * the events one read returns, the later ones would find the
		 * zaps of the earlier ones done (tests/evict_fallback_zaps lost
		 * the zapped pages in 2 to 5 runs of 8, counted per event).
		 */
		bool zaps = zaps_in_flight(c) != 0;
		ssize_t n = read(c->uffd, msgs, sizeof(msgs)), i;

		if (n <= 0)
			return;
		for (i = 0; i < n / (ssize_t)sizeof(msgs[0]); i++) {
			struct uffd_msg *m = &msgs[i];
			char why[256];

			switch (m->event) {
			case UFFD_EVENT_PAGEFAULT: {
				__u64 addr = m->arg.pagefault.address & ~(NPF_PAGE_SIZE - 1);
				__u32 tid = m->arg.pagefault.feat.ptid;

				if (!serve)
					break;
				if (m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) {
					/*
					 * A page npfd write-protected to see its first
					 * write (a budget, eviction): it is there, so
					 * writable again and woken, whatever the fallback.
					 */
					struct uffdio_writeprotect wp = {
						.range = {.start = addr, .len = NPF_PAGE_SIZE}};

					/* EAGAIN (an event waits): woken, it faults again */
					if (!fallback_hold(c, addr, zaps) &&
					    ioctl(c->uffd, UFFDIO_WRITEPROTECT, &wp))
						ioctl(c->uffd, UFFDIO_WAKE, &wp.range);
					break;
				}
				if (c->fallback == NPF_FALLBACK_SIGBUS && !in_part(c, addr)) {
					snprintf(
						why, sizeof(why),
						"npfd at %s is away and this client's fallback is SIGBUS",
						c->path);
					fallback_sigbus(c, tid, addr, why);
				} else if (fallback_page(c, addr, why, sizeof(why))) {
					fallback_sigbus(c, tid, addr, why);
				}
				break;
			}
			case UFFD_EVENT_UNMAP:
				fallback_removed(c, m->arg.remove.start, m->arg.remove.end);
				pthread_mutex_lock(&c->tab_lock);
				parts_unmapped(c, m->arg.remove.start, m->arg.remove.end);
				drops_follow(c, m->arg.remove.start, m->arg.remove.end, false, 0);
				pthread_mutex_unlock(&c->tab_lock);
				fallback_unmap(c, m->arg.remove.start, m->arg.remove.end);
				fallback_held_gone(c, m->arg.remove.start, m->arg.remove.end);
				break;
			case UFFD_EVENT_REMOVE:
				fallback_removed(c, m->arg.remove.start, m->arg.remove.end);
				fallback_dropped(c, m->arg.remove.start, m->arg.remove.end, zaps);
				fallback_held_gone(c, m->arg.remove.start, m->arg.remove.end);
				break;
			case UFFD_EVENT_REMAP:
				fallback_removed(c, m->arg.remap.from,
						 m->arg.remap.from + m->arg.remap.len);
				fallback_moved(c, m->arg.remap.from, m->arg.remap.to,
					       m->arg.remap.len);
				fallback_held_gone(c, m->arg.remap.from,
						   m->arg.remap.from + m->arg.remap.len);
				break;
			default:
				break;
			}
		}
		if (n < (ssize_t)sizeof(msgs))
			return;
	}
}

/*
 * Faults npfd read but never served sleep until someone wakes them: wake
 * every range, so that they fault again and whoever serves now sees them.
 * Not only the regions': a part npfd was putting back after a partial
 * mremap (npfd's moved.c) is no region, and its faults wait too. A wake
 * of a fault served meanwhile only makes it fault again.
 */
static void wake_all(struct npf_client *c)
{
	/* the user address space from the lowest address mmap gives (vm.mmap_min_addr's default) */
	struct uffdio_range all = {.start = 0x10000, .len = 0x7ffffffff000ULL - 0x10000};
	size_t i;

	if (ioctl(c->uffd, UFFDIO_WAKE, &all))
		pr_debug("cannot wake the whole address space: %s", strerror(errno));
	pthread_mutex_lock(&c->tab_lock);
	for (i = 0; i < c->nregions; i++) {
		struct uffdio_range range = {.start = c->regions[i].start,
					     .len = c->regions[i].length};

		ioctl(c->uffd, UFFDIO_WAKE, &range);
	}
	pthread_mutex_unlock(&c->tab_lock);
}

static void fallback_start(struct npf_client *c, const char *why)
{
	if (c->serving)
		return;
	layout_sync(c, true);
	c->serving = 1;
	pr_warn("%s: %s until npfd is back", why,
		c->fallback == NPF_FALLBACK_SIGBUS ?
			"each fault of this process gets SIGBUS (fallback: sigbus)" :
			"libnpf serves this process's faults itself");
	wake_all(c);
}

static void fallback_stop(struct npf_client *c, const char *why)
{
	/* npfd back on the same connection puts back its own parts; the fallback's are finished here */
	if (!c->serving || parts_finish(c, false))
		return;
	/* the drops npfd did not read (the fallback did): their pages not its stored copies */
	fallback_settle_drops(c);
	pthread_mutex_lock(&c->tab_lock);
	parts_known_forget(c); /* npfd's again: taken again if it goes away again */
	pthread_mutex_unlock(&c->tab_lock);
	fallback_release(c, false);
	c->serving = 0;
	pr_info("%s: npfd serves this process's faults again", why);
}

/* ---- the monitor thread ---- */

/* Is npfd answering (c->lock is taken only if free: a waiting call says enough)? */
static int probe(struct npf_client *c)
{
	struct npf_status st;
	void *items;
	size_t n;
	int err, ms = c->timeout_ms < 0 || c->timeout_ms > 1000 ? 1000 : c->timeout_ms;

	if (pthread_mutex_trylock(&c->lock))
		return -EBUSY;
	err = request_raw(c, NPF_MSG_STATUS, NULL, 0, NULL, 0, sizeof(st), &items, &n, ms);
	pthread_mutex_unlock(&c->lock);
	if (!err)
		free(items);
	return err;
}

static int poll_ms(struct pollfd *p, int n, int ms)
{
	int r = poll(p, (nfds_t)n, ms);

	return r < 0 && errno == EINTR ? 0 : r;
}

static void *monitor(void *arg)
{
	struct npf_client *c = arg;
	__u64 down_since = 0, stall_since = 0, next_try = 0, last_probe = 0;
	int backoff = RECONNECT_MIN_MS;

	for (;;) {
		struct pollfd p[3];
		int np = 0, iw, ms;
		__u64 t = now_ms();
		bool up = __atomic_load_n(&c->connected, __ATOMIC_ACQUIRE);

		if (!up) {
			if (!down_since)
				down_since = t;
			if (t >= next_try) {
				pthread_mutex_lock(&c->lock);
				if (!__atomic_load_n(&c->connected, __ATOMIC_ACQUIRE) &&
				    reconnect(c) == 0) {
					pthread_mutex_unlock(&c->lock);
					fallback_stop(
						c,
						"npfd is back and adopted this process's regions");
					down_since = stall_since = 0;
					backoff = RECONNECT_MIN_MS;
					continue;
				}
				pthread_mutex_unlock(&c->lock);
				next_try = now_ms() + (__u64)backoff;
				backoff = backoff * 2 > RECONNECT_MAX_MS ? RECONNECT_MAX_MS :
									   backoff * 2;
			}
			if (c->fallback_ms >= 0 && t - down_since >= (__u64)c->fallback_ms) {
				char why[160];

				snprintf(why, sizeof(why), "npfd at %s has been away for %d ms",
					 c->path, c->fallback_ms);
				fallback_start(c, why);
			}
			t = now_ms();
			ms = next_try > t ? (int)(next_try - t) : 0;
			if (c->fallback_ms >= 0 && !c->serving) {
				__u64 at = down_since + (__u64)c->fallback_ms;
				int to = at > t ? (int)(at - t) : 0;

				ms = to < ms ? to : ms;
			}
		} else {
			p[np++] = (struct pollfd){.fd = c->sock, .events = POLLRDHUP};
			ms = c->fallback_ms >= 0 || c->serving ? MONITOR_TICK_MS : -1;
		}
		if (c->serving)
			p[np++] = (struct pollfd){.fd = c->uffd, .events = POLLIN};
		iw = np;
		p[np++] = (struct pollfd){.fd = c->wake_fd, .events = POLLIN};
		if (poll_ms(p, np, ms) < 0)
			break;
		if (p[iw].revents)
			break; /* npf_client__close() */
		if (c->serving) {
			fallback_read(c, true);
			fallback_release(c, true);
		}
		if (!up)
			continue;
		if (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
			pthread_mutex_lock(&c->lock);
			__atomic_store_n(&c->connected, 0, __ATOMIC_RELEASE);
			pthread_mutex_unlock(&c->lock);
			pr_warn("npfd at %s closed the connection (it died or was restarted): reconnecting",
				c->path);
			down_since = now_ms();
			next_try = 0;
			continue;
		}
		/*
		 * Connected: is npfd reading the faults? A fault unread for
		 * fallback_ms while npfd does not answer either (stopped,
		 * hung) is served here.
		 */
		t = now_ms();
		if (c->serving) {
			if (t - last_probe >= PROBE_EVERY_MS) {
				last_probe = t;
				if (probe(c) == 0)
					fallback_stop(c, "npfd answers again");
			}
			continue;
		}
		if (c->fallback_ms < 0)
			continue;
		{
			struct pollfd u = {.fd = c->uffd, .events = POLLIN};

			if (poll(&u, 1, 0) <= 0 || !(u.revents & POLLIN)) {
				stall_since = 0;
				continue;
			}
		}
		if (!stall_since) {
			stall_since = t;
			continue;
		}
		if (t - stall_since >= (__u64)c->fallback_ms && probe(c) == -ETIMEDOUT) {
			char why[200];

			snprintf(
				why, sizeof(why),
				"npfd at %s has left faults unread for %d ms and does not answer (stopped?)",
				c->path, c->fallback_ms);
			last_probe = now_ms();
			fallback_start(c, why);
		}
	}
	return NULL;
}

/* With c->lock held: the first region starts the monitor. */
static int monitor_start(struct npf_client *c)
{
	int err;

	if (c->monitor_running)
		return 0;
	c->page = aligned_alloc(NPF_PAGE_SIZE, NPF_PAGE_SIZE);
	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!c->page || c->wake_fd < 0)
		return set_err(c, ENOMEM, "cannot set up the monitor of npfd's connection: %s",
			       strerror(errno));
	err = pthread_create(&c->monitor, NULL, monitor, c);
	if (err)
		return set_err(c, err, "cannot start the monitor of npfd's connection: %s",
			       strerror(err));
	c->monitor_running = true;
	return 0;
}

/* ---- fork(): the child registers its copies of the regions ---- */

/*
 * Without UFFD_FEATURE_EVENT_FORK (which needs CAP_SYS_PTRACE) the kernel
 * gives a child no userfaultfd: its copy of a region is plain memory, and
 * a page npfd had evicted reads zeros there. So, from pthread_atfork()
 * handlers (npf_abi.h NPF_MSG_FORK_PREPARE): before fork() npfd stops
 * evicting this process and copies its stores; the child registers its
 * copies with a userfaultfd of its own and gets those copies; the parent's
 * fork() returns once the child is done, and eviction goes on. A client
 * whose npfd cannot do that (away, refused) has its child read in, at
 * once, the pages it lacks (fork_fill()).
 */
static pthread_mutex_t clients_lock = PTHREAD_MUTEX_INITIALIZER;
static struct npf_client *clients;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static int fork_pipe[2] = {-1, -1}; /* the child closes its end when it is done */

static int fork_ask(struct npf_client *c)
{
	__u64 deadline = now_ms() + FORK_WAIT_MS;
	struct npf_fork_info fi;
	int err;

	/*
	 * EAGAIN: npfd copies a bounded part of the stores per request (it
	 * serves others between them), or an eviction under way must end
	 * first (within its 2 s deadline).
	 */
	for (;;) {
		err = request_one_raw(c, NPF_MSG_FORK_PREPARE, NULL, 0, NULL, 0, &fi, sizeof(fi));
		if (err != -EAGAIN || now_ms() >= deadline)
			break;
		usleep(200);
	}
	if (err) {
		pr_warn("fork(): npfd at %s cannot keep this process's evicted pages for the child: %s",
			c->path, c->errmsg);
		return err;
	}
	memcpy(c->fork_token, fi.token, sizeof(c->fork_token));
	return 0;
}

static void fork_prepare(void)
{
	struct npf_client *c;
	bool regions = false;

	pthread_mutex_lock(&clients_lock);
	for (c = clients; c; c = c->next_client) {
		/* held until the fork is over: nothing of c changes meanwhile */
		pthread_mutex_lock(&c->lock);
		c->forking = c->nregions && c->fork_mode == NPF_FORK_COPY &&
			     __atomic_load_n(&c->connected, __ATOMIC_ACQUIRE) && !fork_ask(c);
		regions |= c->nregions && c->fork_mode == NPF_FORK_COPY;
		layout_sync(c, false); /* the child claims its regions where they are */
		pthread_mutex_lock(&c->tab_lock);
	}
	if (regions && pipe2(fork_pipe, O_CLOEXEC))
		fork_pipe[0] = fork_pipe[1] = -1;
}

static void fork_parent(void)
{
	struct npf_client *c;

	if (fork_pipe[1] >= 0) {
		struct pollfd p = {.fd = fork_pipe[0], .events = POLLIN};
		__u64 deadline = now_ms() + FORK_WAIT_MS;
		int n;

		close(fork_pipe[1]);
		/* the child's end closes when it has registered its copies (or exits) */
		while ((n = poll(&p, 1, (int)(deadline - now_ms()))) < 0 && errno == EINTR &&
		       now_ms() < deadline)
			;
		if (n == 0)
			pr_warn("fork(): the child did not register its copy of the regions in %d s: going on",
				FORK_WAIT_MS / 1000);
		close(fork_pipe[0]);
		fork_pipe[0] = fork_pipe[1] = -1;
	}
	for (c = clients; c; c = c->next_client) {
		pthread_mutex_unlock(&c->tab_lock);
		if (c->forking) {
			struct npf_fork_req req;

			memcpy(req.token, c->fork_token, sizeof(req.token));
			if (request_raw(c, NPF_MSG_FORK_DONE, &req, sizeof(req), NULL, 0, 0, NULL,
					NULL, c->timeout_ms))
				pr_debug("fork(): npfd did not take the end of the fork: %s",
					 c->errmsg);
			c->forking = false;
		}
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&clients_lock);
}

/* Does this process have the page at addr (present or swapped), by its pagemap? */
static bool page_had(int pagemap, __u64 addr)
{
	__u64 ent = 0;

	if (pread(pagemap, &ent, sizeof(ent), (off_t)(addr / NPF_PAGE_SIZE * sizeof(ent))) !=
	    sizeof(ent))
		return true; /* unknown: never overwritten */
	return (ent >> 63) & 1 || (ent >> 62) & 1;
}

/* Read the page at off of fd into addr, unless the process has it. */
static bool fill_page(int pagemap, int fd, off_t off, __u64 addr)
{
	return !page_had(pagemap, addr) &&
	       pread(fd, (void *)(unsigned long)addr, NPF_PAGE_SIZE, off) > 0;
}

/*
 * In the child, a region npfd does not serve for it: plain memory, whose
 * pages it does not have read zeros. Read in now what npfd would have
 * served: an anonymous region's stored pages (the parent's stores do not
 * change until its fork() returns, which waits for this), a file-backed
 * region's bytes. How many pages.
 */
static __u64 fork_fill(struct npf_client *c, const struct lib_region *r, int pagemap)
{
	__u64 filled = 0, addr, end = r->start + r->length;
	off_t data, hole;
	struct stat st;

	if (pagemap < 0)
		return 0;
	if (r->backing == NPF_BACKING_FILE) {
		if (r->fd < 0 || fstat(r->fd, &st) || (__u64)st.st_size <= r->file_offset)
			return 0;
		if ((__u64)st.st_size - r->file_offset < r->length)
			end = r->start + (__u64)st.st_size - r->file_offset;
		for (addr = r->start; addr < end; addr += NPF_PAGE_SIZE)
			filled += fill_page(pagemap, r->fd,
					    (off_t)(r->file_offset + (addr - r->start)), addr);
		return filled;
	}
	for (data = r->store_fd < 0 ? -1 : lseek(r->store_fd, 0, SEEK_DATA); data >= 0;
	     data = lseek(r->store_fd, hole, SEEK_DATA)) {
		hole = lseek(r->store_fd, data, SEEK_HOLE);
		if (hole < 0)
			break;
		for (data &= ~(off_t)(NPF_PAGE_SIZE - 1); data < hole; data += NPF_PAGE_SIZE) {
			addr = r->store_origin + (__u64)data;
			if (addr < r->start || addr >= end)
				continue;
			if (!dropped(c, addr))
				filled += fill_page(pagemap, r->store_fd, data, addr);
		}
	}
	return filled;
}

/* In the child: register r's copy with npfd, which gives it the parent's stored pages. */
static int fork_claim(struct npf_client *c, struct lib_region *r)
{
	struct npf_region_forked_req req = {.region = region_req_of(r),
					    .parent_region_id = r->npfd_id};
	int fds[2] = {c->uffd, r->fd}, err;
	struct npf_region_info info;

	memcpy(req.token, c->fork_token, sizeof(req.token));
	err = request_one_raw(c, NPF_MSG_REGION_FORKED, &req, sizeof(req), fds,
			      r->backing == NPF_BACKING_FILE ? 2 : 1, &info, sizeof(info));
	if (err)
		return err;
	if (!info.region_id || info.region_id > (__u32)0x7fffffff)
		return set_err(c, EPROTO, "malformed reply from npfd: region id %u",
			       info.region_id);
	r->npfd_id = info.region_id;
	if (r->store_fd >= 0)
		close(r->store_fd);
	r->store_fd = reply_take_fd(c, info.flags);
	r->store_origin = r->start;
	r->known_start = info.start;
	r->known_length = info.length;
	r->known_offset = info.file_offset;
	return 0;
}

/*
 * In the child (one thread; its locks as they were at the fork, taken by
 * fork_prepare()): the parent's connection, monitor, eviction ring and
 * devices are not this process's. Its regions are registered again.
 */
static void fork_child_client(struct npf_client *c)
{
	int parent_uffd = c->uffd, pagemap = -1, err = 0;
	size_t i;

	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->tab_lock, NULL);
	if (c->monitor_running) {
		close(c->wake_fd);
		c->wake_fd = -1;
		free(c->page);
		c->page = NULL;
		c->monitor_running = false;
	}
	c->serving = 0;
	close(c->sock);
	c->sock = -1;
	__atomic_store_n(&c->connected, 0, __ATOMIC_RELEASE);
	c->conn_gen++;
	if (c->ring_map)
		munmap(c->ring_map, c->ring_map_len);
	c->ring_map = NULL;
	if (c->evict_ring >= 0)
		close(c->evict_ring);
	c->evict_ring = -1;
	c->evict_ring_gen = 0;
	if (c->reply_fd >= 0)
		close(c->reply_fd);
	c->reply_fd = -1;
	if (c->layout_fd >= 0)
		close(c->layout_fd); /* the parent's */
	c->layout_fd = -1;
	c->layout_gen = 0;
	while (c->ndevices)
		device_forget(c, c->ndevices - 1);
	while (c->nparts) /* the parent's: the child's copy of a part is not registered */
		part_drop(c, c->nparts - 1);
	parts_known_forget(c);
	c->nheld = 0;
	c->uffd = -1;
	if (parent_uffd >= 0)
		close(parent_uffd);
	if (c->fork_mode == NPF_FORK_DONTFORK)
		while (c->nregions) /* not in the child's address space */
			region_forget(c, c->nregions - 1);

	if (c->nregions && c->forking) {
		int fd = open_socket(c->path);

		err = fd < 0 ? set_err(c, -fd, "cannot connect to npfd at %s: %s", c->path,
				       strerror(-fd)) :
			       client_uffd(c);
		if (fd >= 0) {
			c->sock = fd;
			__atomic_store_n(&c->connected, 1, __ATOMIC_RELEASE);
		}
	} else if (c->nregions) {
		err = set_err(c, ENOTCONN, "npfd kept nothing for this child at the fork");
	}
	for (i = 0; i < c->nregions;) {
		struct lib_region *r = &c->regions[i];
		__u64 filled;

		if (!err) {
			int e = fork_claim(c, r);

			if (!e) {
				i++;
				continue;
			}
			if (e == -ECONNRESET || e == -ETIMEDOUT || e == -EPROTO)
				err = e; /* the connection failed: no more tries */
		}
		if (pagemap < 0)
			pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
		filled = fork_fill(c, r, pagemap);
		pr_warn("fork(): the child's copy of region %u is not npfd's (%s): it has what it lacked (%llu pages) read in, and is plain memory",
			r->id, c->errmsg, (unsigned long long)filled);
		region_forget(c, i);
	}
	if (pagemap >= 0)
		close(pagemap);
	if (c->nregions && !err)
		layout_fetch(c);
	c->ndropped = 0;
	c->forking = false;
}

static void fork_child(void)
{
	struct npf_client *c;

	for (c = clients; c; c = c->next_client)
		fork_child_client(c);
	/* the copies are registered: the parent's fork() returns, its eviction goes on */
	if (fork_pipe[0] >= 0)
		close(fork_pipe[0]);
	if (fork_pipe[1] >= 0)
		close(fork_pipe[1]);
	fork_pipe[0] = fork_pipe[1] = -1;
	for (c = clients; c; c = c->next_client)
		if (c->nregions && !monitor_start(c))
			evict_ring_offer(c);
	pthread_mutex_init(&clients_lock, NULL);
}

static void atfork_register(void)
{
	int err = pthread_atfork(fork_prepare, fork_parent, fork_child);

	if (err)
		pr_warn("pthread_atfork: %s: a forked child's copies of regions read evicted pages as zeros",
			strerror(err));
}

static void clients_add(struct npf_client *c)
{
	pthread_once(&atfork_once, atfork_register);
	pthread_mutex_lock(&clients_lock);
	c->next_client = clients;
	clients = c;
	pthread_mutex_unlock(&clients_lock);
}

static void clients_remove(struct npf_client *c)
{
	struct npf_client **p;

	pthread_mutex_lock(&clients_lock);
	for (p = &clients; *p; p = &(*p)->next_client)
		if (*p == c) {
			*p = c->next_client;
			break;
		}
	pthread_mutex_unlock(&clients_lock);
}

void npf_client__close(struct npf_client *c)
{
	size_t i;

	if (!c)
		return;
	clients_remove(c);
	if (c->monitor_running) {
		__u64 one = 1;

		if (write(c->wake_fd, &one, sizeof(one)) != sizeof(one))
			pr_debug("cannot wake the monitor: %s", strerror(errno));
		pthread_join(c->monitor, NULL);
	}
	/*
	 * Unregister the ranges here, in this process: a munmap() that
	 * follows then never involves npfd (a stopped or dying npfd would
	 * leave it waiting for its UNMAP event to be read). npfd drops every
	 * region of a connection when it closes.
	 */
	for (i = 0; i < c->nregions; i++) {
		struct uffdio_range range = {.start = c->regions[i].start,
					     .len = c->regions[i].length};

		ioctl(c->uffd, UFFDIO_UNREGISTER, &range);
		region_dofork(c, &c->regions[i]);
		if (c->regions[i].fd >= 0)
			close(c->regions[i].fd);
		if (c->regions[i].store_fd >= 0)
			close(c->regions[i].store_fd);
	}
	for (i = 0; i < c->ndevices; i++)
		device_put(&c->devices[i]);
	while (c->nparts) /* not put back: as npfd, close() puts nothing back */
		part_drop(c, c->nparts - 1);
	close(c->sock);
	if (c->uffd >= 0)
		close(c->uffd);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	if (c->evict_ring >= 0)
		close(c->evict_ring);
	if (c->ring_map)
		munmap(c->ring_map, c->ring_map_len);
	if (c->reply_fd >= 0)
		close(c->reply_fd);
	if (c->layout_fd >= 0)
		close(c->layout_fd);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->tab_lock);
	free(c->regions);
	free(c->devices);
	free(c->parts);
	free(c->parts_known);
	free(c->dropped);
	free(c->held);
	free(c->page);
	free(c->buf);
	free(c);
}

int npf_client__register(struct npf_client *c, void *addr, size_t len,
			 const struct npf_region_opts *opts)
{
	struct npf_region_req req = {.start = (__u64)(unsigned long)addr, .length = len};
	__u32 backing = OPTS_GET(opts, struct npf_region_opts, backing, 0);
	int backing_fd = OPTS_GET(opts, struct npf_region_opts, backing_fd, -1);
	const char *name = OPTS_GET(opts, struct npf_region_opts, name, NULL);
	struct npf_region_info info;
	struct lib_region *tab;
	int fds[2], err, fa, dup_fd = -1;

	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	req.file_offset = OPTS_GET(opts, struct npf_region_opts, file_offset, 0);
	fa = OPTS_GET(opts, struct npf_region_opts, fault_around_kib, 0);
	if (fa) {
		req.flags |= NPF_REGION_FAULT_AROUND;
		req.fault_around_kib = fa < 0 ? 0 : (__u32)fa; /* npfd checks the size */
	}
	if (!opts_valid(opts, sizeof(struct npf_region_opts))) {
		err = set_err(c, EINVAL, "bad npf_region_opts: size %zu, or unknown fields set",
			      opts->sz);
		goto out;
	}
	if (!addr || !len || ((req.start | req.length | req.file_offset) & (NPF_PAGE_SIZE - 1))) {
		err = set_err(c, EINVAL,
			      "region %p+0x%zx (file offset 0x%llx) is empty or not page aligned",
			      addr, len, (unsigned long long)req.file_offset);
		goto out;
	}
	if (backing != 0 && backing != NPF_BACKING_ANON && backing != NPF_BACKING_FILE) {
		err = set_err(c, EINVAL,
			      "unknown backing %u (NPF_BACKING_ANON or NPF_BACKING_FILE)", backing);
		goto out;
	}
	if (backing == NPF_BACKING_FILE && backing_fd < 0) {
		err = set_err(c, EBADF, "a file-backed region needs backing_fd");
		goto out;
	}
	req.backing = backing == NPF_BACKING_FILE ? NPF_BACKING_FILE : NPF_BACKING_ANON;
	if (name)
		strncpy(req.name, name, sizeof(req.name) - 1);

	err = client_uffd(c);
	if (err)
		goto out;
	if (c->fork_mode == NPF_FORK_DONTFORK && madvise(addr, len, MADV_DONTFORK)) {
		err = set_err(c, errno, "madvise(MADV_DONTFORK) of %p+0x%zx: %s", addr, len,
			      strerror(errno));
		goto out;
	}
	/* Kept for a restarted npfd, and for the fallback: the caller may close its own. */
	if (req.backing == NPF_BACKING_FILE) {
		dup_fd = fcntl(backing_fd, F_DUPFD_CLOEXEC, 0);
		if (dup_fd < 0) {
			err = set_err(c, errno, "cannot duplicate the backing file descriptor: %s",
				      strerror(errno));
			goto out;
		}
	}
	pthread_mutex_lock(&c->tab_lock);
	tab = grow(c->regions, &c->regions_cap, c->nregions, sizeof(*tab));
	if (tab)
		c->regions = tab;
	pthread_mutex_unlock(&c->tab_lock);
	if (!tab) {
		err = set_err(c, ENOMEM, "out of memory");
		goto out;
	}
	err = monitor_start(c);
	if (err)
		goto out;
	fds[0] = c->uffd;
	fds[1] = backing_fd;
	/* Without a fault-around of its own, the first version's request: any npfd takes it. */
	err = request_one(c, NPF_MSG_REGION_REGISTER, &req,
			  fa ? sizeof(req) : NPF_REGION_REQ_SIZE_V1, fds,
			  req.backing == NPF_BACKING_FILE ? 2 : 1, &info, sizeof(info));
	if (err)
		goto out;
	if (!info.region_id || info.region_id > (__u32)0x7fffffff) {
		err = set_err(c, EPROTO, "malformed reply from npfd: region id %u", info.region_id);
		goto out;
	}
	pthread_mutex_lock(&c->tab_lock);
	c->regions[c->nregions++] = (struct lib_region){.id = info.region_id,
							.npfd_id = info.region_id,
							.start = req.start,
							.length = req.length,
							.file_offset = req.file_offset,
							.backing = req.backing,
							.flags = req.flags,
							.fault_around_kib = req.fault_around_kib,
							.fd = dup_fd,
							.store_fd = reply_take_fd(c, info.flags),
							.store_origin = req.start,
							.known_start = info.start,
							.known_length = info.length,
							.known_offset = info.file_offset};
	memcpy(c->regions[c->nregions - 1].name, req.name, sizeof(req.name));
	pthread_mutex_unlock(&c->tab_lock);
	dup_fd = -1;
	evict_ring_offer(c);
	layout_fetch(c);
	err = (int)info.region_id;
	pr_debug("registered region %d: %p+0x%zx", err, addr, len);
out:
	if (dup_fd >= 0)
		close(dup_fd);
	pthread_mutex_unlock(&c->lock);
	return err;
}

int npf_client__unregister(struct npf_client *c, __u32 region_id)
{
	struct npf_region_id_req req = {.region_id = region_id};
	size_t i;
	int err;

	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	req.region_id = npfd_region_id(c, region_id);
	/*
	 * The region stays registered until npfd has put its evicted pages
	 * back. EINPROGRESS: a step of them went back, more are to go (npfd
	 * serves the others between steps): at once again, for as long as it
	 * takes. EAGAIN: npfd could not put them back yet (a zap of its may
	 * still drop a page, or an mm event of this process is unread: the
	 * kernel refuses UFFDIO_COPY until it is); both pass within
	 * milliseconds, 2 s at most without a step.
	 */
	for (__u64 t0 = now_ms();;) {
		err = npf_request(c, NPF_MSG_REGION_UNREGISTER, &req, sizeof(req), NULL, 0, 0, NULL,
				  NULL);
		if (err == -EINPROGRESS) {
			t0 = now_ms();
			continue;
		}
		if (err != -EAGAIN || now_ms() - t0 > 2000)
			break;
		usleep(1000);
	}
	if (!err)
		for (i = 0; i < c->nregions; i++)
			if (c->regions[i].id == region_id) {
				region_dofork(c, &c->regions[i]);
				region_forget(c, i);
				break;
			}
	pthread_mutex_unlock(&c->lock);
	return err;
}

int npf_client__region_set(struct npf_client *c, __u32 region_id, __u32 key, __u64 value,
			   struct npf_budget_info *out)
{
	struct npf_region_set_req req = {.key = key, .value = value};
	struct npf_budget_info info;
	int err;

	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	req.region_id = npfd_region_id(c, region_id);
	err = request_one(c, NPF_MSG_REGION_SET, &req, sizeof(req), NULL, 0, &info, sizeof(info));
	pthread_mutex_unlock(&c->lock);
	if (!err && out)
		*out = info;
	return err;
}

/* A list request about one region (0: all of them), by the id the caller knows. */
static int region_items(struct npf_client *c, __u16 type, __u32 region_id, size_t item_size,
			void **out, size_t *count)
{
	struct npf_region_id_req req = {.region_id = region_id};
	int err;

	if (!c || !out || !count)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	if (region_id)
		req.region_id = npfd_region_id(c, region_id);
	err = npf_request(c, type, &req, sizeof(req), NULL, 0, item_size, out, count);
	pthread_mutex_unlock(&c->lock);
	return err;
}

int npf_client__budget_list(struct npf_client *c, __u32 region_id, struct npf_budget_info **out,
			    size_t *count)
{
	return region_items(c, NPF_MSG_BUDGET_LIST, region_id, sizeof(**out), (void **)out, count);
}

int npf_client__status(struct npf_client *c, struct npf_status *out)
{
	int err;

	if (!c || !out)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	err = request_one(c, NPF_MSG_STATUS, NULL, 0, NULL, 0, out, sizeof(*out));
	pthread_mutex_unlock(&c->lock);
	return err;
}

int npf_client__region_list(struct npf_client *c, struct npf_region_info **out, size_t *count)
{
	int err;

	if (!c || !out || !count)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	err = npf_request(c, NPF_MSG_REGION_LIST, NULL, 0, NULL, 0, sizeof(**out), (void **)out,
			  count);
	pthread_mutex_unlock(&c->lock);
	return err;
}

int npf_client__stats(struct npf_client *c, __u32 region_id, struct npf_region_stats_full **out,
		      size_t *count)
{
	return region_items(c, NPF_MSG_STATS, region_id, sizeof(**out), (void **)out, count);
}

int npf_client__attach_device(struct npf_client *c, __u32 region_id, int iopt_fd)
{
	struct npf_device_attach_req req = {.region_id = region_id};
	struct npf_device_info info;
	struct lib_device *tab;
	int err, dup_fd;

	if (!c || iopt_fd < 0)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	req.region_id = npfd_region_id(c, region_id);
	/* Kept for a restarted npfd: the device keeps using its id. */
	dup_fd = fcntl(iopt_fd, F_DUPFD_CLOEXEC, 0);
	pthread_mutex_lock(&c->tab_lock);
	tab = grow(c->devices, &c->devices_cap, c->ndevices, sizeof(*tab));
	if (tab)
		c->devices = tab;
	pthread_mutex_unlock(&c->tab_lock);
	if (dup_fd < 0 || !tab)
		err = set_err(c, dup_fd < 0 ? errno : ENOMEM,
			      "cannot keep the IO page table descriptor: %s",
			      dup_fd < 0 ? strerror(errno) : "out of memory");
	else
		err = request_one(c, NPF_MSG_DEVICE_ATTACH, &req, sizeof(req), &iopt_fd, 1, &info,
				  sizeof(info));
	if (!err && (!info.device_id || info.device_id > (__u32)0x7fffffff))
		err = set_err(c, EPROTO, "npfd answered with an invalid device id %u",
			      info.device_id);
	if (!err) {
		pthread_mutex_lock(&c->tab_lock);
		c->devices[c->ndevices++] = (struct lib_device){
			.id = info.device_id, .region_id = region_id, .fd = dup_fd};
		pthread_mutex_unlock(&c->tab_lock);
		dup_fd = -1;
	}
	if (dup_fd >= 0)
		close(dup_fd);
	pthread_mutex_unlock(&c->lock);
	return err ? err : (int)info.device_id;
}

int npf_client__detach_device(struct npf_client *c, __u32 device_id)
{
	struct npf_device_id_req req = {.device_id = device_id};
	size_t i;
	int err;

	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	err = npf_request(c, NPF_MSG_DEVICE_DETACH, &req, sizeof(req), NULL, 0, 0, NULL, NULL);
	/*
	 * Forgotten unless npfd could not be asked: even when the NIC did
	 * not acknowledge, or npfd does not know it, it is not attached.
	 */
	if (err != -ECONNRESET && err != -ENOTCONN && err != -ETIMEDOUT)
		for (i = 0; i < c->ndevices; i++)
			if (c->devices[i].id == device_id) {
				device_forget(c, i);
				break;
			}
	pthread_mutex_unlock(&c->lock);
	return err;
}

int npf_client__device_list(struct npf_client *c, struct npf_device_info **out, size_t *count)
{
	int err;

	if (!c || !out || !count)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	err = npf_request(c, NPF_MSG_DEVICE_LIST, NULL, 0, NULL, 0, sizeof(**out), (void **)out,
			  count);
	pthread_mutex_unlock(&c->lock);
	return err;
}

int npf_client__policy_load(struct npf_client *c, int obj_fd, __u32 region_id, const char *name,
			    struct npf_policy_status *out)
{
	struct npf_policy_load_req req = {.region_id = region_id};
	struct npf_policy_status st;
	int err;

	/* obj_fd < 0: choose the loaded policy `name` (no code is sent) */
	if (!c || (obj_fd < 0 && (!name || !*name)))
		return -EINVAL;
	if (name)
		strncpy(req.name, name, sizeof(req.name) - 1);
	pthread_mutex_lock(&c->lock);
	if (region_id)
		req.region_id = npfd_region_id(c, region_id);
	err = request_one(c, NPF_MSG_POLICY_LOAD, &req, sizeof(req), &obj_fd, obj_fd >= 0 ? 1 : 0,
			  &st, sizeof(st));
	pthread_mutex_unlock(&c->lock);
	if (!err && out)
		*out = st;
	return err ? err : (int)st.policy_id;
}

int npf_client__policy_unload(struct npf_client *c, const char *name)
{
	struct npf_policy_name_req req = {};
	int err;

	if (!c || !name)
		return -EINVAL;
	strncpy(req.name, name, sizeof(req.name) - 1);
	pthread_mutex_lock(&c->lock);
	err = npf_request(c, NPF_MSG_POLICY_UNLOAD, &req, sizeof(req), NULL, 0, 0, NULL, NULL);
	pthread_mutex_unlock(&c->lock);
	return err;
}

int npf_client__policy_list(struct npf_client *c, struct npf_policy_status **out, size_t *count)
{
	int err;

	if (!c || !out || !count)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	err = npf_request(c, NPF_MSG_POLICY_LIST, NULL, 0, NULL, 0, sizeof(**out), (void **)out,
			  count);
	pthread_mutex_unlock(&c->lock);
	return err;
}

int npf_client__policy_health(struct npf_client *c, struct npf_policy_health **out, size_t *count)
{
	int err;

	if (!c || !out || !count)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	err = npf_request(c, NPF_MSG_POLICY_HEALTH, NULL, 0, NULL, 0, sizeof(**out), (void **)out,
			  count);
	pthread_mutex_unlock(&c->lock);
	return err;
}

int npf_client__policy_enable(struct npf_client *c, bool enabled)
{
	struct npf_policy_enable_req req = {.enabled = enabled};
	int err;

	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	err = npf_request(c, NPF_MSG_POLICY_ENABLE, &req, sizeof(req), NULL, 0, 0, NULL, NULL);
	pthread_mutex_unlock(&c->lock);
	return err;
}

__u64 npf_latency_percentile(const struct npf_latency_hist *hist, double pct)
{
	__u64 total = 0, cum = 0;
	double target;
	int i;

	if (!hist)
		return 0;
	for (i = 0; i < NPF_LAT_BUCKETS; i++)
		total += hist->slot[i];
	if (!total)
		return 0;
	if (!(pct > 0)) /* also NaN */
		pct = 0;
	if (pct > 100)
		pct = 100;
	target = (double)total * pct / 100.0;
	for (i = 0; i < NPF_LAT_BUCKETS; i++) {
		cum += hist->slot[i];
		if (cum && (double)cum >= target)
			return 1ULL << (i + 1);
	}
	return 1ULL << NPF_LAT_BUCKETS;
}
