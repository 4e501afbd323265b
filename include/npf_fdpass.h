/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Passing descriptors with SCM_RIGHTS: the one copy npfd, libnpf and the
 * tests share. Userspace only (unlike the other headers in include/).
 */
#ifndef NPF_FDPASS_H
#define NPF_FDPASS_H

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NPF_FDPASS_MAX 4
#define NPF_FDPASS_SPACE CMSG_SPACE(NPF_FDPASS_MAX * sizeof(int))

/* Attach fds[0..nfds) to mh, using cbuf (NPF_FDPASS_SPACE bytes, aligned). */
static inline void npf_fdpass_put(struct msghdr *mh, void *cbuf, const int *fds, int nfds)
{
	struct cmsghdr *cm;

	if (nfds <= 0)
		return;
	memset(cbuf, 0, NPF_FDPASS_SPACE);
	mh->msg_control = cbuf;
	mh->msg_controllen = CMSG_SPACE(nfds * sizeof(int));
	cm = CMSG_FIRSTHDR(mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
}

/*
 * Take the descriptors a received message carries: up to max go to fds[],
 * the rest are closed (never leaked). Returns how many went to fds[].
 */
static inline int npf_fdpass_take(struct msghdr *mh, int *fds, int max)
{
	struct cmsghdr *cm;
	int n = 0;

	for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		size_t k, cnt;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < cnt; k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + k * sizeof(int), sizeof(int));
			if (n < max)
				fds[n++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

#endif
