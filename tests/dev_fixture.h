/* SPDX-License-Identifier: GPL-2.0 */
/*
 * For the device tests (tests/dev_*.c): a client that speaks npfd's
 * protocol itself (so it can send a request and not wait for the answer)
 * and a device that is nothing but an IO page table memfd the test reads
 * and acknowledges by hand, as any socket user may hand npfd one (no NIC
 * needed). npfd is the real one, private to the test.
 */
#ifndef DEV_FIXTURE_H
#define DEV_FIXTURE_H

#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/userfaultfd.h>
#include "harness.h"
#include "npf.h"
#include "npf_fdpass.h"
#include "npf_nic_abi.h"
#include "npf_nic.h"

#define DV_PG 4096UL

/*
 * npfd attaches its page-request uprobe to npf_nic_fault_report() in the
 * client's executable: keep the NIC library's definition linked in (the
 * test itself never reports a page request).
 */
void (*const dv_fault_report_site)(const struct npf_page_request *) = npf_nic_fault_report;

static struct th_npfd dv_npfd;

struct dv_conn {
	int fd;
	__u32 seq;    /* of the last request sent */
	__u32 expect; /* the reply dv_reply() wants next; 0: the last request's */
};

static inline void dv_connect(struct dv_conn *c)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", dv_npfd.sock);
	TH_ASSERT(c->fd >= 0 && connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
		  "connect: %s", strerror(errno));
	c->seq = 0;
	c->expect = 0;
}

/* Send a request of type with body (len bytes) and descriptors; returns its seq. */
static inline __u32 dv_send(struct dv_conn *c, __u16 type, const void *body, size_t len,
			    const int *fds, int nfds)
{
	char buf[NPF_REQ_MAX];
	struct npf_msg_hdr *h = (struct npf_msg_hdr *)buf;
	union {
		char buf[NPF_FDPASS_SPACE];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(*h) + len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	*h = (struct npf_msg_hdr){.magic = NPF_PROTO_MAGIC,
				  .version = NPF_PROTO_VERSION,
				  .type = type,
				  .len = (__u32)(sizeof(*h) + len),
				  .seq = ++c->seq};
	if (len)
		memcpy(h + 1, body, len);
	npf_fdpass_put(&mh, cbuf.buf, fds, nfds);
	TH_ASSERT(sendmsg(c->fd, &mh, MSG_NOSIGNAL) == (ssize_t)iov.iov_len, "sendmsg: %s",
		  strerror(errno));
	return c->seq;
}

/*
 * Wait up to ms for a reply; returns 1 with its status, payload and error
 * text, 0 if none came, -1 on EOF (npfd closed the connection or died).
 */
static inline int dv_reply(struct dv_conn *c, int ms, int *status, void *payload, size_t plen,
			   char *err, size_t errlen)
{
	static char buf[NPF_MSG_MAX];
	struct npf_msg_hdr *h = (struct npf_msg_hdr *)buf;
	struct npf_reply *r = (struct npf_reply *)(h + 1);
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	ssize_t n;

	if (poll(&p, 1, ms) == 0)
		return 0;
	n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n <= 0)
		return -1;
	TH_ASSERT(n >= (ssize_t)(sizeof(*h) + sizeof(*r)) && h->magic == NPF_PROTO_MAGIC &&
			  (h->type & NPF_MSG_REPLY) && h->len == n,
		  "malformed reply (%zd bytes)", n);
	TH_ASSERT(h->seq == (c->expect ? c->expect : c->seq), "reply to request %u, want %u",
		  h->seq, c->expect ? c->expect : c->seq);
	*status = r->status;
	if (err)
		snprintf(err, errlen, "%s", r->error);
	if (payload && !r->status)
		memcpy(payload, r + 1, plen);
	return 1;
}

/* A request answered within ms: its status (payload copied), or the test fails. */
static inline int dv_call(struct dv_conn *c, __u16 type, const void *body, size_t len,
			  const int *fds, int nfds, void *payload, size_t plen, char *err,
			  size_t errlen, int ms)
{
	int st = 0, got;

	dv_send(c, type, body, len, fds, nfds);
	got = dv_reply(c, ms, &st, payload, plen, err, errlen);
	TH_ASSERT(got == 1, "request type %u: %s within %d ms", type,
		  got ? "npfd closed the connection" : "no answer", ms);
	return st;
}

/* This process's userfaultfd, with the events npfd requires. */
static inline int dv_uffd(void)
{
	struct uffdio_api api = {.api = UFFD_API,
				 .features = UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_REMOVE |
					     UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_THREAD_ID};
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	TH_ASSERT(fd >= 0 && !ioctl(fd, UFFDIO_API, &api), "userfaultfd: %s", strerror(errno));
	return fd;
}

/*
 * Register [mem, mem + len) anonymous on c with uffd; returns the region id.
 * Exact (no fault-around): the tests count the entries CPU faults set present.
 */
static inline __u32 dv_register(struct dv_conn *c, int uffd, void *mem, size_t len)
{
	struct npf_region_req rq = {.start = (__u64)(uintptr_t)mem,
				    .length = len,
				    .backing = NPF_BACKING_ANON,
				    .flags = NPF_REGION_FAULT_AROUND,
				    .fault_around_kib = 0};
	struct npf_region_info info = {0};
	char err[NPF_ERRMSG_LEN];
	int st = dv_call(c, NPF_MSG_REGION_REGISTER, &rq, sizeof(rq), &uffd, 1, &info, sizeof(info),
			 err, sizeof(err), 5000);

	TH_ASSERT(!st, "register: %d %s", st, err);
	return info.region_id;
}

/* A device: its IO page table, mapped; the test plays the NIC. */
struct dv_dev {
	int fd;
	struct npf_iopt_header *h;
	__u64 *pte;
	__u64 npages;
	size_t size;
	__u32 id;
};

/*
 * Make an IO page table for [start, start + npages pages), sealed with
 * seals (0: unsealed); header fields as given (the test may lie in them).
 */
static inline void dv_iopt(struct dv_dev *d, __u64 start, __u64 npages, unsigned int seals)
{
	size_t hdr = (sizeof(struct npf_iopt_header) + 63) & ~(size_t)63;

	d->npages = npages;
	d->size = hdr + npages * 8;
	d->fd = memfd_create("dev-test-iopt", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	TH_ASSERT(d->fd >= 0 && !ftruncate(d->fd, (off_t)d->size), "memfd: %s", strerror(errno));
	TH_ASSERT(!seals || !fcntl(d->fd, F_ADD_SEALS, seals), "seal: %s", strerror(errno));
	d->h = mmap(NULL, d->size, PROT_READ | PROT_WRITE, MAP_SHARED, d->fd, 0);
	TH_ASSERT(d->h != MAP_FAILED, "mmap: %s", strerror(errno));
	d->h->magic = NPF_IOPT_MAGIC;
	d->h->version = NPF_IOPT_VERSION;
	d->h->start = start;
	d->h->npages = npages;
	d->h->pte_offset = hdr;
	d->h->owner_tgid = (__u32)getpid();
	d->pte = (__u64 *)((char *)d->h + hdr);
}

/* Attach d to region; returns npfd's status (d->id set on success). */
/*
 * Did npfd read the munmap's UNMAP before a request racing it (the request
 * was refused ENOENT, now or late under load)? Then the race was not set up:
 * say so, drop the device and let the test try again.
 */
static inline bool dv_unmap_came_first(int got, int st, const char *err, struct dv_dev *d)
{
	if (got != 1 || st != -ENOENT)
		return false;
	printf("npfd read the UNMAP first (\"%s\"): again\n", err);
	close(d->fd);
	munmap(d->h, d->size);
	return true;
}

static inline int dv_attach(struct dv_conn *c, struct dv_dev *d, __u32 region, char *err,
			    size_t errlen)
{
	struct npf_device_attach_req rq = {.region_id = region};
	struct npf_device_info info = {0};
	int st = dv_call(c, NPF_MSG_DEVICE_ATTACH, &rq, sizeof(rq), &d->fd, 1, &info, sizeof(info),
			 err, errlen, 5000);

	if (!st)
		d->id = info.device_id;
	return st;
}

/* Invalidations npfd posted and the device has not consumed. */
static inline __u32 dv_inval_pending(const struct dv_dev *d)
{
	return __atomic_load_n(&d->h->inval.tail, __ATOMIC_ACQUIRE) - d->h->inval.head;
}

/* Wait up to ms for npfd to post an invalidation. */
static inline bool dv_inval_wait(const struct dv_dev *d, int ms)
{
	double t0 = th_now();

	while (!dv_inval_pending(d))
		if (th_now() - t0 > ms / 1e3)
			return false;
		else
			usleep(200);
	return true;
}

/* The device acknowledges every invalidation posted so far. */
static inline void dv_ack(struct dv_dev *d)
{
	__u32 tail = __atomic_load_n(&d->h->inval.tail, __ATOMIC_ACQUIRE);
	__u64 seq = d->h->inval.ent[(tail - 1) % NPF_NIC_RING_SIZE].seq;

	d->h->inval.head = tail;
	__atomic_store_n(&d->h->inval.acked_seq, seq, __ATOMIC_RELEASE);
}

static inline bool dv_present(const struct dv_dev *d, __u64 i)
{
	return __atomic_load_n(&d->pte[i], __ATOMIC_ACQUIRE) & NPF_PTE_PRESENT;
}

static inline __u32 dv_version(const struct dv_dev *d, __u64 i)
{
	return (__u32)(__atomic_load_n(&d->pte[i], __ATOMIC_ACQUIRE) >> NPF_PTE_VERSION_SHIFT);
}

/* npfd answers a status request on a fresh connection within ms (its loop is not blocked). */
static inline double dv_status_ms(int ms, struct npf_status *out)
{
	struct dv_conn s;
	struct npf_status st;
	char err[NPF_ERRMSG_LEN];
	double t0 = th_now(), dt;
	int rc;

	dv_connect(&s);
	dv_send(&s, NPF_MSG_STATUS, NULL, 0, NULL, 0);
	rc = dv_reply(&s, ms, &(int){0}, &st, sizeof(st), err, sizeof(err));
	dt = (th_now() - t0) * 1e3;
	close(s.fd);
	TH_ASSERT(rc == 1, "npfd did not answer a status request within %d ms (%s)", ms,
		  rc ? "connection closed: npfd died?" : "its event loop is blocked");
	if (out)
		*out = st;
	return dt;
}

/* npfd's open descriptors, but for the /proc files it opens once when first needed. */
static inline int dv_npfd_fds(void)
{
	char cmd[160];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -l /proc/%d/fd | grep -- '->' | grep -vc ' /proc/'",
		 dv_npfd.pid);
	f = popen(cmd, "r");
	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = -1;
		pclose(f);
	}
	return n;
}

/*
 * Fail with npfd's log when it died. A connection npfd closed may mean it
 * is dying (a core dump takes a while): give it a moment to be sure.
 */
static inline void dv_expect_alive(const char *when)
{
	double t0 = th_now();
	int st = 0;
	pid_t r;

	while ((r = waitpid(dv_npfd.pid, &st, WNOHANG)) == 0 && !th_connectable(dv_npfd.sock) &&
	       th_now() - t0 < 5)
		usleep(10 * 1000);
	if (r == dv_npfd.pid) {
		th_npfd_dump_log(&dv_npfd);
		if (WIFSIGNALED(st))
			th_fail("npfd died %s: %s", when, strsignal(WTERMSIG(st)));
		th_fail("npfd exited %s with status %d", when, WEXITSTATUS(st));
	}
}

/* Wait up to ms for entries [first, first + n) of d to be present. */
static inline bool dv_present_wait(const struct dv_dev *d, __u64 first, __u64 n, int ms)
{
	double t0 = th_now();
	__u64 i;

	for (i = first; i < first + n;) {
		if (dv_present(d, i)) {
			i++;
			continue;
		}
		if (th_now() - t0 > ms / 1e3)
			return false;
		usleep(200);
	}
	return true;
}

struct dv_unmap {
	pthread_t t;
	void *addr;
	size_t len;
	int err;
};

static inline void *dv_unmap_thread(void *arg)
{
	struct dv_unmap *u = arg;

	u->err = munmap(u->addr, u->len) ? errno : 0;
	return NULL;
}

/*
 * The race of the issue, made certain: with npfd stopped, send req (type,
 * body) on c, then munmap [addr, addr + len) from another thread, whose
 * UNMAP event npfd will find queued behind the request, then let npfd go.
 * The thread is joined (munmap returns once npfd has read the event).
 */
static inline void dv_request_while_unmapping(struct dv_conn *c, __u16 type, const void *body,
					      size_t len, void *addr, size_t maplen)
{
	struct dv_unmap u = {.addr = addr, .len = maplen};

	TH_ASSERT(!kill(dv_npfd.pid, SIGSTOP), "SIGSTOP npfd: %s", strerror(errno));
	dv_send(c, type, body, len, NULL, 0);
	TH_ASSERT(!pthread_create(&u.t, NULL, dv_unmap_thread, &u), "pthread_create");
	usleep(50 * 1000); /* the thread is in munmap, its event queued */
	TH_ASSERT(!kill(dv_npfd.pid, SIGCONT), "SIGCONT npfd: %s", strerror(errno));
	pthread_join(u.t, NULL);
	TH_ASSERT(!u.err, "munmap: %s", strerror(u.err));
}

#endif
