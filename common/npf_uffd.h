/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Creating a userfaultfd, the one way libnpf (for a client's region) and
 * the feature probes (common/features.c) both do it. Header-only so that
 * libnpf, which links nothing of common/, shares it too.
 */
#ifndef NPF_UFFD_H
#define NPF_UFFD_H

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/userfaultfd.h>

#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

/*
 * userfaultfd(flags); when that is refused for want of privilege
 * (vm.unprivileged_userfaultfd=0), /dev/userfaultfd's USERFAULTFD_IOC_NEW,
 * which its file mode may grant instead. Returns the descriptor, or -errno
 * of the syscall.
 */
static inline int npf_uffd_create(int flags)
{
	int fd = (int)syscall(SYS_userfaultfd, flags);
	int err, dev;

	if (fd >= 0)
		return fd;
	err = errno;
	if (err != EPERM)
		return -err;
	dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return -err;
	fd = ioctl(dev, USERFAULTFD_IOC_NEW, flags);
	close(dev);
	return fd >= 0 ? fd : -err;
}

#endif
