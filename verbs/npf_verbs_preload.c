// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libnpfverbs-preload.so: what npf-run preloads into the command it runs.
 *
 * libibverbs implements ibv_create_comp_channel() without a provider hook:
 * it write()s an IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL command to the
 * device's command fd and expects the kernel to have stored a new fd in the
 * response. npf devices have no kernel driver (their command fd is
 * /dev/full, on which every write fails with ENOSPC), so this library
 * interposes write(): on a command fd the npf provider has claimed, it
 * answers that one command with the read end of a pipe, whose write end the
 * provider writes completion events to (8 bytes: the CQ, what
 * ibv_get_cq_event() reads). Every other command fails with EOPNOTSUPP.
 * close() is interposed too, to close the write end with the channel.
 * Writes to any other fd cost one array load.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>

#define NPF_PRELOAD_FDS 65536

static _Atomic unsigned char npf_cmd_fd[NPF_PRELOAD_FDS];
static _Atomic int npf_chan_wfd[NPF_PRELOAD_FDS]; /* read end -> write end + 1 */

__attribute__((visibility("default"))) void npf_verbs_preload_claim(int fd, int claim)
{
	if (fd >= 0 && fd < NPF_PRELOAD_FDS)
		atomic_store(&npf_cmd_fd[fd], claim ? 1 : 0);
}

/* The write end of a completion channel made here, or -1. */
__attribute__((visibility("default"))) int npf_verbs_preload_channel_wfd(int rfd)
{
	if (rfd < 0 || rfd >= NPF_PRELOAD_FDS)
		return -1;
	return atomic_load(&npf_chan_wfd[rfd]) - 1;
}

static ssize_t npf_cmd_write(const void *buf, size_t n)
{
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_create_comp_channel req;
	struct ib_uverbs_create_comp_channel_resp resp;
	int p[2];

	if (n < sizeof(hdr)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&hdr, buf, sizeof(hdr));
	if (hdr.command != IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL) {
		errno = EOPNOTSUPP; /* npf devices take no other command through write() */
		return -1;
	}
	if (n < sizeof(hdr) + sizeof(req)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&req, (const char *)buf + sizeof(hdr), sizeof(req));
	if (!req.response) {
		errno = EFAULT;
		return -1;
	}
	if (pipe2(p, O_CLOEXEC))
		return -1;
	if (p[0] >= NPF_PRELOAD_FDS) {
		close(p[0]);
		close(p[1]);
		errno = EMFILE;
		return -1;
	}
	/* events are written by the device engine: never let it block */
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	atomic_store(&npf_chan_wfd[p[0]], p[1] + 1);
	resp.fd = p[0];
	memcpy((void *)(uintptr_t)req.response, &resp, sizeof(resp));
	return n;
}

ssize_t write(int fd, const void *buf, size_t n)
{
	static ssize_t (*real_write)(int, const void *, size_t);

	if (fd >= 0 && fd < NPF_PRELOAD_FDS &&
	    atomic_load_explicit(&npf_cmd_fd[fd], memory_order_relaxed))
		return npf_cmd_write(buf, n);
	if (!real_write)
		real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	return real_write ? real_write(fd, buf, n) : syscall(SYS_write, fd, buf, n);
}

int close(int fd)
{
	static int (*real_close)(int);

	if (fd >= 0 && fd < NPF_PRELOAD_FDS) {
		int w = atomic_exchange(&npf_chan_wfd[fd], 0) - 1;

		if (w >= 0)
			syscall(SYS_close, w);
		atomic_store(&npf_cmd_fd[fd], 0);
	}
	if (!real_close)
		real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
	return real_close ? real_close(fd) : (int)syscall(SYS_close, fd);
}
