// SPDX-License-Identifier: GPL-2.0
/*
 * A connection whose process has exited is not served. npfd names a
 * client by the pid its connection was made with (/proc/PID reads,
 * pidfd_getfd(), process_vm_readv() of its memory); a child that inherits
 * the socket and outlives its parent could wait for that pid to be reused
 * by a process of another user, and act as it. So: P connects and is
 * served (a status request), forks H, and exits; H's request on the
 * inherited connection must get no answer but the connection's end.
 */
#include <sys/wait.h>
#include "adv.h"

static struct th_npfd d;

/* One status request on fd: 1 answered (status 0), 0 the connection ended, -1 other. */
static int status_request(int fd)
{
	char buf[sizeof(struct npf_msg_hdr)];
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char reply[NPF_MSG_MAX];
	ssize_t n;

	adv_hdr((struct npf_msg_hdr *)buf, NPF_MSG_STATUS, sizeof(buf));
	if (adv_send(fd, buf, sizeof(buf), NULL, 0) != (ssize_t)sizeof(buf))
		return errno == EPIPE || errno == ECONNRESET ? 0 : -1;
	if (poll(&p, 1, 5000) != 1)
		return -1;
	n = recv(fd, reply, sizeof(reply), 0);
	if (n <= 0)
		return n == 0 || errno == ECONNRESET ? 0 : -1;
	return ((struct npf_reply *)(reply + sizeof(struct npf_msg_hdr)))->status == 0 ? 1 : -1;
}

int main(void)
{
	int report[2], st;
	char first = 0, second = 0;
	pid_t p;

	th_require_root();
	th_npfd_start(&d, NULL);
	TH_ASSERT(!pipe(report), "pipe: %s", strerror(errno));
	p = fork();
	TH_ASSERT(p >= 0, "fork: %s", strerror(errno));
	if (!p) {
		int fd = adv_connect(d.sock), parent_gone[2];
		char r = status_request(fd) == 1 ? 'A' : 'x';

		if (write(report[1], &r, 1) != 1 || pipe(parent_gone))
			_exit(1);
		if (!fork()) {
			/* H: once P is gone (the pipe's write end with it), a request as P */
			char c;

			close(parent_gone[1]);
			if (read(parent_gone[0], &c, 1) != 0)
				_exit(1);
			st = status_request(fd);
			r = st == 1 ? 'S' : st == 0 ? 'E' : 'x';
			_exit(write(report[1], &r, 1) == 1 ? 0 : 1);
		}
		_exit(0); /* P exits: its pid may be reused from now on */
	}
	close(report[1]);
	TH_ASSERT(waitpid(p, &st, 0) == p && WIFEXITED(st) && !WEXITSTATUS(st), "P failed");
	TH_ASSERT(read(report[0], &first, 1) == 1 && read(report[0], &second, 1) == 1,
		  "no report from P and H");
	printf("P's own request: %s; H's request on P's connection after P exited: %s\n",
	       first == 'A' ? "answered" : "not answered",
	       second == 'S' ? "served" :
	       second == 'E' ? "connection ended" :
			       "other");
	TH_ASSERT(first == 'A', "P's request on its own connection was not answered");
	TH_ASSERT(second != 'S',
		  "a request on the connection of a process that has exited was served");
	TH_ASSERT(second == 'E', "H's request: neither served nor the connection's end");
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
