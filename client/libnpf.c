// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libnpf: the client side of npfd's control protocol (include/npf_abi.h).
 *
 * One npf_client is one SOCK_SEQPACKET connection to npfd plus, once the
 * first region is registered, one userfaultfd for this process. Each
 * request is one message and gets exactly one reply message; requests on a
 * client are serialized, so replies cannot be confused between threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
#include "npf.h"
#include "npf_fdpass.h"
#include "npf_socket.h"
#include "npf_uffd.h"
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

/* What npfd needs to follow the mm; EVENT_FORK is optional (see uffd_api()). */
#define NPF_UFFD_FEATURES                                                                          \
	(UFFD_FEATURE_EVENT_FORK | UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_REMOVE |          \
	 UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_THREAD_ID)

#define offsetofend(TYPE, FIELD) (offsetof(TYPE, FIELD) + sizeof(((TYPE *)0)->FIELD))

struct npf_client {
	int sock;
	int uffd; /* -1 until the first register */
	__u32 seq;
	pthread_mutex_t lock; /* one request in flight; guards seq, uffd, errmsg, buf */
	char *buf;	      /* NPF_MSG_MAX bytes: the reply being received */
	char errmsg[NPF_ERRMSG_LEN];
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

struct npf_client *npf_client__connect(const struct npf_client_opts *opts)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	const char *path = OPTS_GET(opts, struct npf_client_opts, socket_path, NULL);
	struct npf_client *c;
	int err;

	if (!opts_valid(opts, sizeof(struct npf_client_opts))) {
		errno = EINVAL;
		return NULL;
	}
	path = npf_socket_path(path);
	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->uffd = -1;
	c->buf = malloc(NPF_MSG_MAX);
	if (!c->buf) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->sock < 0 || connect(c->sock, (struct sockaddr *)&sa, sizeof(sa))) {
		err = errno;
		pr_debug("cannot connect to npfd at %s: %s", path, strerror(err));
		if (c->sock >= 0)
			close(c->sock);
		free(c->buf);
		free(c);
		errno = err;
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	pr_debug("connected to npfd at %s", path);
	return c;
}

void npf_client__close(struct npf_client *c)
{
	if (!c)
		return;
	/* npfd drops every region of a connection when it closes. */
	close(c->sock);
	if (c->uffd >= 0)
		close(c->uffd);
	pthread_mutex_destroy(&c->lock);
	free(c->buf);
	free(c);
}

const char *npf_client__errmsg(const struct npf_client *c)
{
	return c ? c->errmsg : "";
}

static int send_request(struct npf_client *c, __u16 type, const void *body, size_t body_len,
			const int *fds, int nfds)
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

	npf_fdpass_put(&mh, cbuf.buf, fds, nfds);
	do
		n = sendmsg(c->sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return set_err(c, errno, "cannot send a request to npfd: %s", strerror(errno));
	if ((size_t)n != hdr.len)
		return set_err(c, EPROTO, "short send to npfd: %zd of %u bytes", n, hdr.len);
	return 0;
}

/* Receive one reply into c->buf; returns its length. */
static ssize_t recv_reply(struct npf_client *c)
{
	union {
		char buf[NPF_FDPASS_SPACE];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = c->buf, .iov_len = NPF_MSG_MAX};
	struct msghdr mh;
	ssize_t n;

	do {
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = sizeof(cbuf.buf);
		n = recvmsg(c->sock, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return set_err(c, errno, "cannot receive npfd's reply: %s", strerror(errno));
	/* Replies carry no descriptors: do not leak any that arrive anyway. */
	npf_fdpass_take(&mh, NULL, 0);
	if (n == 0)
		return set_err(c, ECONNRESET, "npfd closed the connection");
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		return set_err(c, EPROTO, "malformed reply from npfd: %zd bytes, more than %d",
			       n, NPF_MSG_MAX);
	return n;
}

/*
 * Send one request and wait for its reply. On success the reply's payload
 * (count items of item_size bytes) is copied into a malloc()ed array that
 * the caller owns; when npfd refuses, its reason goes to c->errmsg and its
 * status is returned.
 */
static int npf_request(struct npf_client *c, __u16 type, const void *body, size_t body_len,
		       const int *fds, int nfds, size_t item_size, void **items, size_t *count)
{
	const struct npf_msg_hdr *hdr = (const struct npf_msg_hdr *)c->buf;
	const struct npf_reply *rep = (const struct npf_reply *)(hdr + 1);
	__u32 seq = c->seq + 1;
	ssize_t n;
	size_t want;
	int err;

	err = send_request(c, type, body, body_len, fds, nfds);
	if (err)
		return err;
	n = recv_reply(c);
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
		return set_err(c, EPROTO,
			       "malformed reply from npfd: type 0x%x seq %u for request type %u seq %u",
			       hdr->type, hdr->seq, type, seq);
	if (hdr->len != (size_t)n)
		return set_err(c, EPROTO, "malformed reply from npfd: length field %u, received %zd",
			       hdr->len, n);

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
static int request_one(struct npf_client *c, __u16 type, const void *body, size_t body_len,
		       const int *fds, int nfds, void *out, size_t size)
{
	void *items;
	size_t count;
	int err;

	err = npf_request(c, type, body, body_len, fds, nfds, size, &items, &count);
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
		return set_err(c, -fd,
			       fd == -ENOSYS ? "cannot create a userfaultfd: %s (the kernel lacks CONFIG_USERFAULTFD)"
					     : "cannot create a userfaultfd: %s (run as root, grant access to /dev/userfaultfd, or set vm.unprivileged_userfaultfd=1)",
			       strerror(-fd));
	err = uffd_api(fd, NPF_UFFD_FEATURES);
	if (err == -EPERM) {
		/*
		 * EVENT_FORK needs CAP_SYS_PTRACE. Without it npfd still
		 * serves this process; a forked child just does not inherit
		 * the registration. Use a fresh descriptor for the retry.
		 */
		pr_debug("UFFDIO_API with EVENT_FORK: %s; continuing without it", strerror(-err));
		close(fd);
		fd = create_uffd();
		if (fd < 0)
			return set_err(c, -fd, "cannot create a userfaultfd: %s", strerror(-fd));
		err = uffd_api(fd, NPF_UFFD_FEATURES & ~(__u64)UFFD_FEATURE_EVENT_FORK);
	}
	if (err) {
		close(fd);
		return set_err(c, -err,
			       "UFFDIO_API failed: %s (npfd needs userfaultfd events REMAP, REMOVE and UNMAP)",
			       strerror(-err));
	}
	c->uffd = fd;
	pr_debug("created userfaultfd %d", fd);
	return 0;
}

int npf_client__register(struct npf_client *c, void *addr, size_t len,
			 const struct npf_region_opts *opts)
{
	struct npf_region_req req = {.start = (__u64)(unsigned long)addr, .length = len};
	__u32 backing = OPTS_GET(opts, struct npf_region_opts, backing, 0);
	int backing_fd = OPTS_GET(opts, struct npf_region_opts, backing_fd, -1);
	const char *name = OPTS_GET(opts, struct npf_region_opts, name, NULL);
	struct npf_region_info info;
	int fds[2], err, fa;

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
		err = set_err(c, EINVAL, "unknown backing %u (NPF_BACKING_ANON or NPF_BACKING_FILE)",
			      backing);
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
	fds[0] = c->uffd;
	fds[1] = backing_fd;
	/* Without a fault-around of its own, the first version's request: any npfd takes it. */
	err = request_one(c, NPF_MSG_REGION_REGISTER, &req,
			  fa ? sizeof(req) : NPF_REGION_REQ_SIZE_V1, fds,
			  req.backing == NPF_BACKING_FILE ? 2 : 1, &info, sizeof(info));
	if (err)
		goto out;
	if (!info.region_id || info.region_id > (__u32)0x7fffffff) {
		err = set_err(c, EPROTO, "malformed reply from npfd: region id %u",
			      info.region_id);
		goto out;
	}
	err = (int)info.region_id;
	pr_debug("registered region %d: %p+0x%zx", err, addr, len);
out:
	pthread_mutex_unlock(&c->lock);
	return err;
}

int npf_client__unregister(struct npf_client *c, __u32 region_id)
{
	struct npf_region_id_req req = {.region_id = region_id};
	int err;

	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	err = npf_request(c, NPF_MSG_REGION_UNREGISTER, &req, sizeof(req), NULL, 0, 0, NULL, NULL);
	pthread_mutex_unlock(&c->lock);
	return err;
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
	struct npf_region_id_req req = {.region_id = region_id};
	int err;

	if (!c || !out || !count)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	err = npf_request(c, NPF_MSG_STATS, &req, sizeof(req), NULL, 0, sizeof(**out),
			  (void **)out, count);
	pthread_mutex_unlock(&c->lock);
	return err;
}

int npf_client__attach_device(struct npf_client *c, __u32 region_id, int iopt_fd)
{
	struct npf_device_attach_req req = {.region_id = region_id};
	struct npf_device_info info;
	int err;

	if (!c || iopt_fd < 0)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	err = request_one(c, NPF_MSG_DEVICE_ATTACH, &req, sizeof(req), &iopt_fd, 1, &info,
			  sizeof(info));
	if (!err && (!info.device_id || info.device_id > (__u32)0x7fffffff))
		err = set_err(c, EPROTO, "npfd answered with an invalid device id %u",
			      info.device_id);
	pthread_mutex_unlock(&c->lock);
	return err ? err : (int)info.device_id;
}

int npf_client__detach_device(struct npf_client *c, __u32 device_id)
{
	struct npf_device_id_req req = {.device_id = device_id};
	int err;

	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	err = npf_request(c, NPF_MSG_DEVICE_DETACH, &req, sizeof(req), NULL, 0, 0, NULL, NULL);
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
