// SPDX-License-Identifier: GPL-2.0
/*
 * Bad input gets a clear error and loses nothing: each malformed request
 * or bad region gets a refusal that names the problem, npfd stays up, and
 * a well-behaved client registered beforehand keeps being served.
 */
#include <fcntl.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/userfaultfd.h>
#include "harness.h"
#include "npf.h"
#include "npf_fdpass.h"

static struct th_npfd d;
static int seq;

static int raw_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d.sock);
	TH_ASSERT(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect: %s",
		  strerror(errno));
	return fd;
}

static void send_raw(int fd, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		char buf[NPF_FDPASS_SPACE];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	npf_fdpass_put(&mh, cbuf.buf, fds, nfds);
	TH_ASSERT(sendmsg(fd, &mh, 0) == (ssize_t)len, "sendmsg: %s", strerror(errno));
}

/* Receive one reply; return its status and copy the error text. */
static int recv_reply(int fd, char *err, size_t errlen)
{
	static char buf[NPF_MSG_MAX];
	struct npf_msg_hdr *h = (struct npf_msg_hdr *)buf;
	struct npf_reply *r = (struct npf_reply *)(h + 1);
	ssize_t n = recv(fd, buf, sizeof(buf), 0);

	TH_ASSERT(n >= (ssize_t)(sizeof(*h) + sizeof(*r)), "short reply (%zd bytes): %s", n,
		  strerror(errno));
	TH_ASSERT(h->magic == NPF_PROTO_MAGIC && (h->type & NPF_MSG_REPLY) && h->len == n,
		  "malformed reply");
	snprintf(err, errlen, "%s", r->error);
	return r->status;
}

static void hdr_init(struct npf_msg_hdr *h, __u16 type, size_t len)
{
	h->magic = NPF_PROTO_MAGIC;
	h->version = NPF_PROTO_VERSION;
	h->type = type;
	h->len = (__u32)len;
	h->seq = (__u32)++seq;
}

/* Expect a refusal whose text contains `needle`. */
static void expect(int fd, const char *what, int want_status, const char *needle)
{
	char err[NPF_ERRMSG_LEN];
	int st = recv_reply(fd, err, sizeof(err));

	printf("%-38s -> %d \"%s\"\n", what, st, err);
	TH_ASSERT(st == want_status, "%s: status %d, want %d (%s)", what, st, want_status, err);
	TH_ASSERT(strstr(err, needle), "%s: error \"%s\" does not mention \"%s\"", what, err,
		  needle);
	TH_ASSERT(th_npfd_alive(&d), "npfd died after: %s", what);
}

static int make_uffd(__u64 features)
{
	struct uffdio_api api = {.api = UFFD_API, .features = features};
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	TH_ASSERT(fd >= 0, "userfaultfd: %s", strerror(errno));
	TH_ASSERT(ioctl(fd, UFFDIO_API, &api) == 0, "UFFDIO_API: %s", strerror(errno));
	return fd;
}

static void region_req(int fd, void *addr, size_t len, __u32 backing, __u64 off, const int *fds,
		       int nfds)
{
	struct {
		struct npf_msg_hdr h;
		struct npf_region_req r;
	} m = {};

	hdr_init(&m.h, NPF_MSG_REGION_REGISTER, sizeof(m));
	m.r.start = (__u64)(uintptr_t)addr;
	m.r.length = len;
	m.r.backing = backing;
	m.r.file_offset = off;
	send_raw(fd, &m, sizeof(m), fds, nfds);
}

int main(void)
{
	const __u64 feats = UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_REMOVE |
			    UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_THREAD_ID;
	struct npf_client *good;
	char *good_mem, *mem, *far;
	int fd, uffd, pipefd[2], filefd, i, id;
	char path[128], big[NPF_REQ_MAX + 100];

	th_npfd_start(&d, NULL);

	/* A well-behaved client, registered first, must survive all that follows. */
	good = npf_client__connect(NULL);
	TH_ASSERT(good, "connect: %s", strerror(errno));
	good_mem = mmap(NULL, 64 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	{
		NPF_OPTS(npf_region_opts, o, .name = "good");
		id = npf_client__register(good, good_mem, 64 << 20, &o);
		TH_ASSERT(id > 0, "good client: %s", npf_client__errmsg(good));
	}

	fd = raw_connect();
	{
		struct npf_msg_hdr h;

		/* truncated: fewer bytes than a header */
		send_raw(fd, "NPF", 3, NULL, 0);
		expect(fd, "truncated request", -EBADMSG, "truncated");

		hdr_init(&h, NPF_MSG_STATUS, sizeof(h));
		h.magic = 0xdeadbeef;
		send_raw(fd, &h, sizeof(h), NULL, 0);
		expect(fd, "bad magic", -EBADMSG, "magic");

		hdr_init(&h, NPF_MSG_STATUS, sizeof(h));
		h.version = 99;
		send_raw(fd, &h, sizeof(h), NULL, 0);
		expect(fd, "wrong protocol version", -EPROTONOSUPPORT, "version 99");

		hdr_init(&h, NPF_MSG_STATUS, sizeof(h) + 8);
		send_raw(fd, &h, sizeof(h), NULL, 0);
		expect(fd, "length field mismatch", -EBADMSG, "length");

		hdr_init(&h, 4242, sizeof(h));
		send_raw(fd, &h, sizeof(h), NULL, 0);
		expect(fd, "unknown request type", -EOPNOTSUPP, "unknown request type");

		memset(big, 'x', sizeof(big));
		hdr_init((struct npf_msg_hdr *)big, NPF_MSG_STATUS, sizeof(big));
		send_raw(fd, big, sizeof(big), NULL, 0);
		expect(fd, "oversized request", -EMSGSIZE, "too large");

		hdr_init(&h, NPF_MSG_REGION_REGISTER, sizeof(h));
		send_raw(fd, &h, sizeof(h), NULL, 0);
		expect(fd, "register without a body", -EBADMSG, "body");
	}

	mem = mmap(NULL, 16 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	TH_ASSERT(pipe(pipefd) == 0, "pipe");

	region_req(fd, mem, 1 << 20, NPF_BACKING_ANON, 0, pipefd, 1);
	expect(fd, "a pipe instead of a userfaultfd", -EBADF, "not a userfaultfd");

	region_req(fd, mem, 1 << 20, NPF_BACKING_ANON, 0, NULL, 0);
	expect(fd, "no userfaultfd at all", -EINVAL, "descriptor");

	uffd = make_uffd(0);
	region_req(fd, mem, 1 << 20, NPF_BACKING_ANON, 0, &uffd, 1);
	expect(fd, "userfaultfd without event features", -EINVAL, "EVENT_UNMAP");
	close(uffd);

	uffd = make_uffd(feats);
	region_req(fd, mem + 100, 1 << 20, NPF_BACKING_ANON, 0, &uffd, 1);
	expect(fd, "unaligned region", -EINVAL, "aligned");

	region_req(fd, mem, 0, NPF_BACKING_ANON, 0, &uffd, 1);
	expect(fd, "empty region", -EINVAL, "length is 0");

	/* Memory the client does not own: an address nothing is mapped at. */
	far = mmap(NULL, 1 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(far, 1 << 20);
	region_req(fd, far, 1 << 20, NPF_BACKING_ANON, 0, &uffd, 1);
	expect(fd, "unmapped memory", -EFAULT, "nothing is mapped");

	/* A file mapping is not memory npf can fill. */
	snprintf(path, sizeof(path), "%s/short", d.dir);
	filefd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	TH_ASSERT(filefd >= 0 && ftruncate(filefd, 1 << 20) == 0, "create %s", path);
	{
		char *fm = mmap(NULL, 1 << 20, PROT_READ, MAP_SHARED, filefd, 0);

		region_req(fd, fm, 1 << 20, NPF_BACKING_ANON, 0, &uffd, 1);
		expect(fd, "a shared file mapping", -EFAULT, "not private anonymous");
		munmap(fm, 1 << 20);
	}

	{
		int fds[2] = {uffd, filefd};

		region_req(fd, mem, 4 << 20, NPF_BACKING_FILE, 0, fds, 2);
		expect(fd, "backing file shorter than the region", -EINVAL, "shorter");
	}

	/*
	 * A userfaultfd of another process (a child that inherited our mapping
	 * hands us its own): registering through it would act on the child's
	 * memory, so npfd must refuse it.
	 */
	{
		int sv[2], cfd = -1, nfd;
		char *shared_addr = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		pid_t child;

		TH_ASSERT(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0, "socketpair");
		child = fork();
		if (child == 0) {
			int u = make_uffd(feats);
			char ch;

			send_raw(sv[1], "u", 1, &u, 1);
			if (read(sv[1], &ch, 1) < 0) /* wait for the parent */
				_exit(1);
			_exit(0);
		}
		{
			union {
				char buf[NPF_FDPASS_SPACE];
				struct cmsghdr align;
			} cb;
			char ch;
			struct iovec iov = {.iov_base = &ch, .iov_len = 1};
			struct msghdr mh = {.msg_iov = &iov,
					    .msg_iovlen = 1,
					    .msg_control = cb.buf,
					    .msg_controllen = sizeof(cb.buf)};

			TH_ASSERT(recvmsg(sv[0], &mh, 0) == 1, "receive the child's uffd");
			TH_ASSERT(npf_fdpass_take(&mh, &cfd, 1) == 1,
				  "no descriptor from the child");
		}
		nfd = raw_connect();
		region_req(nfd, shared_addr, 1 << 20, NPF_BACKING_ANON, 0, &cfd, 1);
		expect(nfd, "another process's userfaultfd", -EPERM, "not pid");
		close(nfd);
		close(cfd);
		TH_ASSERT(write(sv[0], "x", 1) == 1, "release the child");
		waitpid(child, NULL, 0);
		/* Still ours: the refused registration left nothing behind. */
		TH_ASSERT(shared_addr[0] == 0, "page of a refused region");
	}

	/* A good region, then one overlapping it. */
	region_req(fd, mem, 4 << 20, NPF_BACKING_ANON, 0, &uffd, 1);
	{
		char err[NPF_ERRMSG_LEN];
		int st = recv_reply(fd, err, sizeof(err));

		TH_ASSERT(st == 0, "valid region refused: %s", err);
	}
	region_req(fd, mem + (2 << 20), 4 << 20, NPF_BACKING_ANON, 0, &uffd, 1);
	expect(fd, "overlapping region", -EEXIST, "overlaps");

	/* The registered raw region is really served. */
	TH_ASSERT(mem[4096] == 0, "raw region page not zero");

	/* Someone else's region cannot be unregistered. */
	{
		struct {
			struct npf_msg_hdr h;
			struct npf_region_id_req r;
		} m = {};

		hdr_init(&m.h, NPF_MSG_REGION_UNREGISTER, sizeof(m));
		m.r.region_id = (__u32)id;
		send_raw(fd, &m, sizeof(m), NULL, 0);
		/* Same pid (one process plays both clients): refused as another connection's. */
		expect(fd, "unregister another client's region", -EPERM, "belongs to");
	}

	/* The good client was served throughout and still is. */
	for (i = 0; i < 64; i++)
		TH_ASSERT(good_mem[(size_t)i << 20] == 0, "good client page %d not zero", i);
	{
		struct npf_status st;

		TH_ASSERT(npf_client__status(good, &st) == 0, "status after bad input");
		printf("npfd counted %llu bad messages\n", (unsigned long long)st.bad_messages);
		TH_ASSERT(st.bad_messages >= 7, "npfd counted only %llu bad messages",
			  (unsigned long long)st.bad_messages);
	}
	close(fd);
	npf_client__close(good);
	th_npfd_stop(&d);
	unlink(path);
	printf("ok\n");
	return 0;
}
