// SPDX-License-Identifier: GPL-2.0
/*
 * No descriptor a socket user sends is kept by mistake, and a dropped
 * client learns it at once. As an unprivileged member of the socket's group:
 *  - 2000 messages carrying descriptors on every path that refuses them
 *    (empty, short, bad magic, unknown type, a request that takes no
 *    descriptor, a bad register body, more descriptors than npfd takes:
 *    MSG_CTRUNC): npfd's descriptor count stays flat, it stays up, and a
 *    registration afterwards works (its page reads zeros);
 *  - a client npfd drops sees the end of the connection (POLLRDHUP) at
 *    once (it used to take 30 s and more: a poll request whose removal
 *    missed it kept npfd's end of the socket open), and no poll request
 *    outlives the 40 clients dropped;
 *  - a TCP socket with SO_LINGER of an hour and data its peer never reads,
 *    sent as the 8th descriptor of a message: npfd closes it off its loop
 *    (had it no room for it, the kernel would close it in npfd's
 *    recvmsg(), on the loop, and wait the linger out there), and answers
 *    another client's status request within a second.
 */
#include <stdint.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include "adv.h"
#include "npf.h"

#define ROUNDS 2000

static struct th_npfd d;

/* One hostile message of kind k carrying nfds descriptors; returns the expected refusal. */
static size_t hostile(int k, char *buf, int *nfds)
{
	struct npf_msg_hdr *h = (struct npf_msg_hdr *)buf;

	*nfds = 4;
	switch (k) {
	case 0: /* empty message: recvmsg() returns 0, as at the end of the connection */
		return 0;
	case 1: /* shorter than a header */
		memcpy(buf, "NPF", 3);
		return 3;
	case 2: /* bad magic */
		adv_hdr(h, NPF_MSG_STATUS, sizeof(*h));
		h->magic = 0x12345678;
		return sizeof(*h);
	case 3: /* unknown type */
		adv_hdr(h, 999, sizeof(*h));
		return sizeof(*h);
	case 4: /* a request that takes no descriptors */
		adv_hdr(h, NPF_MSG_STATUS, sizeof(*h));
		return sizeof(*h);
	case 5: /* register with a body of the wrong size */
		adv_hdr(h, NPF_MSG_REGION_REGISTER, sizeof(*h) + 8);
		memset(h + 1, 0, 8);
		return sizeof(*h) + 8;
	case 6: { /* register of nothing mapped: refused after its descriptors were looked at */
		struct npf_region_req *r = (struct npf_region_req *)(h + 1);

		adv_hdr(h, NPF_MSG_REGION_REGISTER, sizeof(*h) + sizeof(*r));
		memset(r, 0, sizeof(*r));
		r->start = 0x1000;
		r->length = 0x1000;
		r->backing = NPF_BACKING_FILE;
		*nfds = 2;
		return sizeof(*h) + sizeof(*r);
	}
	default: /* more descriptors than npfd takes: MSG_CTRUNC */
		adv_hdr(h, NPF_MSG_STATUS, sizeof(*h));
		*nfds = 8;
		return sizeof(*h);
	}
}

/* Send with up to 8 descriptors (npf_fdpass_put stops at NPF_FDPASS_MAX). */
static ssize_t send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf.buf,
			    .msg_controllen = CMSG_SPACE(nfds * sizeof(int))};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	memset(cbuf.buf, 0, sizeof(cbuf.buf));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	return sendmsg(sock, &mh, MSG_NOSIGNAL);
}

static void flood(void *arg)
{
	int fds[8], i, k, sock = adv_connect(d.sock), reconnects = 0, replies = 0;
	char buf[512];

	TH_ASSERT(sock >= 0, "attacker cannot connect: %s", strerror(errno));
	for (i = 0; i < 8; i++) {
		fds[i] = memfd_create("adv-fd", MFD_CLOEXEC);
		TH_ASSERT(fds[i] >= 0, "memfd_create: %s", strerror(errno));
	}
	for (i = 0; i < ROUNDS; i++) {
		int nfds;
		size_t len;

		k = i % 8;
		len = hostile(k, buf, &nfds);
		if (send_fds(sock, buf, len, fds, nfds) != (ssize_t)len) {
			TH_ASSERT(errno == EPIPE || errno == ECONNRESET, "send: %s",
				  strerror(errno));
			close(sock);
			sock = adv_connect(d.sock);
			TH_ASSERT(sock >= 0, "reconnect: %s", strerror(errno));
			reconnects++;
			continue;
		}
		/* every refused request gets a reply; an empty one may end the connection */
		{
			struct pollfd p = {.fd = sock, .events = POLLIN};
			char rbuf[4096];

			if (poll(&p, 1, 5000) != 1)
				th_fail("no answer to hostile message kind %d within 5 s", k);
			if (recv(sock, rbuf, sizeof(rbuf), 0) > 0) {
				replies++;
			} else {
				close(sock);
				sock = adv_connect(d.sock);
				TH_ASSERT(sock >= 0, "reconnect: %s", strerror(errno));
				reconnects++;
			}
		}
	}
	printf("%d hostile messages: %d replies, %d reconnects\n", ROUNDS, replies, reconnects);
	close(sock);
}

/* A registration and its first touch still work. */
static void still_serves(void *arg)
{
	struct npf_client *c = npf_client__connect(NULL);
	char *mem = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int id;

	TH_ASSERT(c, "connect after the flood: %s", strerror(errno));
	id = npf_client__register(c, mem, 1 << 20, NULL);
	TH_ASSERT(id > 0, "register after the flood: %s", npf_client__errmsg(c));
	TH_ASSERT(mem[12345] == 0, "page reads non-zero");
	npf_client__close(c);
}

/*
 * npfd drops a client (here: one that sent an empty message, which reads as
 * the end of the connection, after a few requests): the client must see
 * its end of the connection at once.
 */
static void dropped(void *arg)
{
	int fds[8], conn, i, sock, nfds;
	struct pollfd p;
	char buf[4096];
	double t0;

	for (i = 0; i < 8; i++)
		fds[i] = memfd_create("adv-fd", MFD_CLOEXEC);
	/* The second drop used to leave npfd's end open: a poll request held it. */
	for (conn = 0; conn < 40; conn++) {
		sock = adv_connect(d.sock);
		TH_ASSERT(sock >= 0, "connect: %s", strerror(errno));
		for (i = 1; conn && i < 8; i++) {
			size_t len = hostile(i, buf, &nfds);

			TH_ASSERT(send_fds(sock, buf, len, fds, nfds) == (ssize_t)len, "send: %s",
				  strerror(errno));
			TH_ASSERT(adv_reply(sock, NULL, 0, NULL, 0, 5000) < 0, "accepted");
		}
		TH_ASSERT(send(sock, "", 0, MSG_NOSIGNAL) == 0, "send empty: %s", strerror(errno));
		t0 = th_now();
		p = (struct pollfd){.fd = sock, .events = POLLRDHUP};
		TH_ASSERT(
			poll(&p, 1, 2000) == 1 && (p.revents & (POLLRDHUP | POLLHUP)),
			"connection %d: npfd dropped the client but its end of the connection is still open after 2 s",
			conn);
		TH_ASSERT(recv(sock, buf, sizeof(buf), MSG_DONTWAIT) == 0, "no end of file");
		if (conn < 3)
			printf("dropped client %d saw the end of the connection after %.3f s\n",
			       conn, th_now() - t0);
		close(sock);
	}
}

/* Poll requests npfd has armed in its io_urings (fdinfo lists them as op=6). */
static int count_polls(pid_t pid)
{
	char cmd[128];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "cat /proc/%d/fdinfo/* 2>/dev/null | grep -c 'op=6'", pid);
	f = popen(cmd, "r");
	if (f && fscanf(f, "%d", &n) != 1)
		n = -1;
	if (f)
		pclose(f);
	return n;
}

/* A socket that lingers: SO_LINGER of an hour, and data queued that the peer (listener, never read) will not take. */
static int lingering_socket(const struct sockaddr_in *to)
{
	static char junk[65536];
	struct linger l = {.l_onoff = 1, .l_linger = 3600};
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), small = 4096, queued = 0;

	TH_ASSERT(s >= 0 && !setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) &&
			  !connect(s, (const struct sockaddr *)to, sizeof(*to)),
		  "TCP connect: %s", strerror(errno));
	/* fill the peer's window and our own buffer */
	for (int i = 0; i < 100 && send(s, junk, sizeof(junk), MSG_DONTWAIT | MSG_NOSIGNAL) > 0;
	     i++)
		;
	TH_ASSERT(!setsockopt(s, SOL_SOCKET, SO_LINGER, &l, sizeof(l)), "SO_LINGER: %s",
		  strerror(errno));
	ioctl(s, TIOCOUTQ, &queued);
	TH_ASSERT(queued > 0, "no data queued on the TCP socket: it would not linger");
	return s;
}

static struct sockaddr_in listener_addr;

/* The attacker's message: a status request with 8 descriptors, the 8th the lingering socket. */
static void linger(void *arg)
{
	int fds[8], i, sock = adv_connect(d.sock);
	char buf[512];
	size_t len;

	(void)arg;
	TH_ASSERT(sock >= 0, "connect: %s", strerror(errno));
	for (i = 0; i < 7; i++)
		fds[i] = memfd_create("adv-fd", MFD_CLOEXEC);
	fds[7] = lingering_socket(&listener_addr);
	adv_hdr((struct npf_msg_hdr *)buf, NPF_MSG_STATUS, sizeof(struct npf_msg_hdr));
	len = sizeof(struct npf_msg_hdr);
	TH_ASSERT(send_fds(sock, buf, len, fds, 8) == (ssize_t)len, "send: %s", strerror(errno));
	/*
	 * Its own copies go as it exits, without lingering (a task that
	 * exits does not wait): npfd's, received after, is the last.
	 */
}

/* After the lingering socket: another client's status request is answered within a second. */
static void linger_check(void)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), small = 4096, sock, st;
	socklen_t alen = sizeof(listener_addr);
	struct npf_msg_hdr h;
	double t0;

	listener_addr = (struct sockaddr_in){.sin_family = AF_INET,
					     .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	TH_ASSERT(l >= 0 && !setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) &&
			  !bind(l, (struct sockaddr *)&listener_addr, sizeof(listener_addr)) &&
			  !listen(l, 4) &&
			  !getsockname(l, (struct sockaddr *)&listener_addr, &alen),
		  "listener: %s", strerror(errno));
	/* npfd reads the message only once the attacker is gone */
	TH_ASSERT(!kill(d.pid, SIGSTOP), "SIGSTOP npfd: %s", strerror(errno));
	st = adv_run_as_attacker(linger, NULL, 30);
	TH_ASSERT(!kill(d.pid, SIGCONT), "SIGCONT npfd: %s", strerror(errno));
	TH_ASSERT(st == 0, "the lingering attacker failed (exit %d)", st);
	sock = adv_connect(d.sock);
	TH_ASSERT(sock >= 0, "connect: %s", strerror(errno));
	adv_hdr(&h, NPF_MSG_STATUS, sizeof(h));
	t0 = th_now();
	TH_ASSERT(adv_send(sock, &h, sizeof(h), NULL, 0) == sizeof(h), "send: %s", strerror(errno));
	TH_ASSERT(adv_reply(sock, NULL, 0, NULL, 0, 1000) == 0,
		  "status refused after the lingering socket");
	printf("a status request after an 8th descriptor that lingers: answered in %.0f ms\n",
	       (th_now() - t0) * 1e3);
	close(sock);
	close(l); /* the lingering connection is reset: npfd's close ends */
}

int main(void)
{
	int before, after, st;

	th_npfd_start(&d, NULL);
	adv_open_to_group(&d);
	TH_ASSERT(adv_run_as_attacker(still_serves, NULL, 30) == 0, "cannot register at all");
	usleep(200000);
	before = adv_count_fds(d.pid);
	st = adv_run_as_attacker(flood, NULL, 120);
	TH_ASSERT(st == 0, "flood failed (exit %d)", st);
	usleep(200000);
	after = adv_count_fds(d.pid);
	printf("npfd holds %d descriptors before, %d after %d hostile messages\n", before, after,
	       ROUNDS);
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
	TH_ASSERT(after <= before + 2, "npfd leaked %d descriptors", after - before);
	TH_ASSERT(adv_run_as_attacker(still_serves, NULL, 30) == 0,
		  "registration after the flood failed");
	before = count_polls(d.pid);
	TH_ASSERT(adv_run_as_attacker(dropped, NULL, 60) == 0, "dropped client not told");
	usleep(100000);
	after = count_polls(d.pid);
	printf("npfd's poll requests: %d before 40 dropped clients, %d after\n", before, after);
	TH_ASSERT(before > 0 && after <= before, "%d poll requests outlived their clients",
		  after - before);
	linger_check();
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
