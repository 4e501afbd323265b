// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel feature probes: each one tries the thing npf does (create a
 * userfaultfd with a feature bit, arm a multishot poll, load a program of a
 * type, attach a uprobe) rather than reading a version number, so the answer
 * holds for this kernel, its configuration and its lockdown policy.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <linux/userfaultfd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <liburing.h>
#include "npf_features.h"
#include "npf_uffd.h"

#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)
#endif
#define BPF_FS_MAGIC 0xcafe4a11
#define TRACEFS_MAGIC 0x74726163

/* The probe could not tell because it lacks privilege: say so, not "missing". */
static enum npf_feat_result refused(char *detail, size_t len, const char *what, int err)
{
	if ((err == EPERM || err == EACCES) && geteuid() != 0) {
		snprintf(detail, len, "%s: %s (probe as root to know)", what, strerror(err));
		return NPF_FEAT_UNKNOWN;
	}
	snprintf(detail, len, "%s: %s", what, strerror(err));
	return NPF_FEAT_NO;
}

/* ------------------------------------------------------------------ */
/* userfaultfd                                                         */
/* ------------------------------------------------------------------ */

/* UFFDIO_API may be called once per descriptor: one fresh descriptor per feature. */
static enum npf_feat_result uffd_feature(char *detail, size_t len, __u64 feature, const char *name)
{
	struct uffdio_api api = {.api = UFFD_API, .features = feature};
	int fd = npf_uffd_create(O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return refused(detail, len, "cannot create a userfaultfd", -fd);
	if (ioctl(fd, UFFDIO_API, &api)) {
		int e = errno;

		close(fd);
		return refused(detail, len, name, e);
	}
	close(fd);
	snprintf(detail, len, "UFFDIO_API accepts %s", name);
	return NPF_FEAT_YES;
}

static enum npf_feat_result probe_uffd_syscall(char *detail, size_t len)
{
	struct uffdio_api api = {.api = UFFD_API};
	int fd = (int)syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return refused(detail, len, "userfaultfd()", errno);
	if (ioctl(fd, UFFDIO_API, &api)) {
		int e = errno;

		close(fd);
		return refused(detail, len, "UFFDIO_API", e);
	}
	close(fd);
	snprintf(detail, len, "features 0x%llx", (unsigned long long)api.features);
	return NPF_FEAT_YES;
}

static enum npf_feat_result probe_uffd_dev(char *detail, size_t len)
{
	int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	int fd;

	if (dev < 0)
		return refused(detail, len, "open /dev/userfaultfd", errno);
	fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		close(dev);
		return refused(detail, len, "USERFAULTFD_IOC_NEW", e);
	}
	close(fd);
	close(dev);
	snprintf(detail, len, "USERFAULTFD_IOC_NEW works");
	return NPF_FEAT_YES;
}

#define UFFD_PROBE(fn, bit)                                                                        \
	static enum npf_feat_result fn(char *detail, size_t len)                                   \
	{                                                                                          \
		return uffd_feature(detail, len, bit, #bit);                                       \
	}
UFFD_PROBE(probe_uffd_fork, UFFD_FEATURE_EVENT_FORK)
UFFD_PROBE(probe_uffd_remap, UFFD_FEATURE_EVENT_REMAP)
UFFD_PROBE(probe_uffd_remove, UFFD_FEATURE_EVENT_REMOVE)
UFFD_PROBE(probe_uffd_unmap, UFFD_FEATURE_EVENT_UNMAP)
UFFD_PROBE(probe_uffd_thread_id, UFFD_FEATURE_THREAD_ID)
UFFD_PROBE(probe_uffd_missing_shmem, UFFD_FEATURE_MISSING_SHMEM)
UFFD_PROBE(probe_uffd_minor_shmem, UFFD_FEATURE_MINOR_SHMEM)
UFFD_PROBE(probe_uffd_poison, UFFD_FEATURE_POISON)

/* ------------------------------------------------------------------ */
/* io_uring                                                            */
/* ------------------------------------------------------------------ */

static enum npf_feat_result probe_uring_setup(char *detail, size_t len)
{
	struct io_uring ring;
	int err = io_uring_queue_init(4, &ring, 0);

	if (err)
		return refused(detail, len, "io_uring_setup", -err);
	io_uring_queue_exit(&ring);
	snprintf(detail, len, "io_uring_setup works");
	return NPF_FEAT_YES;
}

static enum npf_feat_result probe_uring_defer_taskrun(char *detail, size_t len)
{
	struct io_uring ring;
	int err = io_uring_queue_init(4, &ring,
				      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);

	if (err)
		return refused(detail, len, "io_uring_setup(DEFER_TASKRUN)", -err);
	io_uring_queue_exit(&ring);
	snprintf(detail, len, "SINGLE_ISSUER | DEFER_TASKRUN accepted");
	return NPF_FEAT_YES;
}

/* Arm a multishot poll on an eventfd, fire it, and see the completion say "more". */
static enum npf_feat_result probe_uring_poll_multishot(char *detail, size_t len)
{
	struct __kernel_timespec ts = {.tv_sec = 1};
	struct io_uring_cqe *cqe;
	struct io_uring ring;
	enum npf_feat_result r;
	__u64 one = 1;
	int efd, err;

	err = io_uring_queue_init(4, &ring, 0);
	if (err)
		return refused(detail, len, "io_uring_setup", -err);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (efd < 0) {
		io_uring_queue_exit(&ring);
		return refused(detail, len, "eventfd", errno);
	}
	io_uring_prep_poll_multishot(io_uring_get_sqe(&ring), efd, POLLIN);
	io_uring_submit(&ring);
	if (write(efd, &one, sizeof(one)) != sizeof(one)) {
		r = refused(detail, len, "eventfd write", errno);
	} else if ((err = io_uring_wait_cqe_timeout(&ring, &cqe, &ts))) {
		r = refused(detail, len, "multishot POLL_ADD completion", -err);
	} else if (cqe->res < 0) {
		r = refused(detail, len, "multishot POLL_ADD", -cqe->res);
	} else if (!(cqe->flags & IORING_CQE_F_MORE)) {
		snprintf(detail, len, "POLL_ADD completed but is not multishot");
		r = NPF_FEAT_NO;
	} else {
		snprintf(detail, len, "POLL_ADD with IORING_POLL_ADD_MULTI stays armed");
		r = NPF_FEAT_YES;
	}
	close(efd);
	io_uring_queue_exit(&ring);
	return r;
}

/* The opcode is known to the kernel, and a buffer can be registered for it. */
static enum npf_feat_result probe_uring_read_fixed(char *detail, size_t len)
{
	struct io_uring_probe *probe;
	struct io_uring ring;
	struct iovec iov;
	enum npf_feat_result r;
	int err;

	err = io_uring_queue_init(4, &ring, 0);
	if (err)
		return refused(detail, len, "io_uring_setup", -err);
	probe = io_uring_get_probe_ring(&ring);
	iov.iov_len = 4096;
	iov.iov_base =
		mmap(NULL, iov.iov_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!probe) {
		r = refused(detail, len, "IORING_REGISTER_PROBE", ENOTSUP);
	} else if (!io_uring_opcode_supported(probe, IORING_OP_READ_FIXED)) {
		snprintf(detail, len, "IORING_OP_READ_FIXED is not supported");
		r = NPF_FEAT_NO;
	} else if (iov.iov_base == MAP_FAILED) {
		r = refused(detail, len, "mmap", errno);
	} else if ((err = io_uring_register_buffers(&ring, &iov, 1))) {
		r = refused(detail, len, "IORING_REGISTER_BUFFERS", -err);
	} else {
		snprintf(detail, len, "READ_FIXED supported; buffers register");
		r = NPF_FEAT_YES;
	}
	if (iov.iov_base != MAP_FAILED)
		munmap(iov.iov_base, iov.iov_len);
	if (probe)
		io_uring_free_probe(probe);
	io_uring_queue_exit(&ring);
	return r;
}

/* ------------------------------------------------------------------ */
/* BPF                                                                 */
/* ------------------------------------------------------------------ */

static enum npf_feat_result probe_bpffs(char *detail, size_t len)
{
	struct statfs st;
	char line[256];
	FILE *f;

	if (statfs("/sys/fs/bpf", &st) == 0 && st.f_type == BPF_FS_MAGIC) {
		snprintf(detail, len, "mounted on /sys/fs/bpf");
		return NPF_FEAT_YES;
	}
	f = fopen("/proc/filesystems", "re");
	if (!f)
		return refused(detail, len, "/proc/filesystems", errno);
	while (fgets(line, sizeof(line), f)) {
		if (!strcmp(line, "nodev\tbpf\n")) {
			fclose(f);
			snprintf(detail, len, "not mounted; npfd mounts it on /sys/fs/bpf");
			return NPF_FEAT_YES;
		}
	}
	fclose(f);
	snprintf(detail, len, "the kernel has no bpf filesystem");
	return NPF_FEAT_NO;
}

static enum npf_feat_result probe_btf(char *detail, size_t len)
{
	struct btf *btf = btf__load_vmlinux_btf();

	if (!btf)
		return refused(detail, len, "/sys/kernel/btf/vmlinux", errno);
	snprintf(detail, len, "%u types", btf__type_cnt(btf));
	btf__free(btf);
	return NPF_FEAT_YES;
}

static enum npf_feat_result map_type(char *detail, size_t len, enum bpf_map_type t,
				     const char *name)
{
	int r = libbpf_probe_bpf_map_type(t, NULL);

	if (r < 0)
		return refused(detail, len, name, -r);
	/* libbpf reports EPERM as "not supported": without root that proves nothing. */
	if (!r && geteuid() != 0)
		return refused(detail, len, name, EPERM);
	snprintf(detail, len, "%s %s", name, r ? "creates" : "is refused");
	return r ? NPF_FEAT_YES : NPF_FEAT_NO;
}

static enum npf_feat_result prog_type(char *detail, size_t len, enum bpf_prog_type t,
				      const char *name)
{
	int r = libbpf_probe_bpf_prog_type(t, NULL);

	if (r < 0)
		return refused(detail, len, name, -r);
	if (!r && geteuid() != 0)
		return refused(detail, len, name, EPERM);
	snprintf(detail, len, "%s %s", name, r ? "loads" : "is refused");
	return r ? NPF_FEAT_YES : NPF_FEAT_NO;
}

#define MAP_PROBE(fn, t)                                                                           \
	static enum npf_feat_result fn(char *detail, size_t len)                                   \
	{                                                                                          \
		return map_type(detail, len, t, #t);                                               \
	}
#define PROG_PROBE(fn, t)                                                                          \
	static enum npf_feat_result fn(char *detail, size_t len)                                   \
	{                                                                                          \
		return prog_type(detail, len, t, #t);                                              \
	}
MAP_PROBE(probe_map_hash, BPF_MAP_TYPE_HASH)
MAP_PROBE(probe_map_ringbuf, BPF_MAP_TYPE_RINGBUF)
MAP_PROBE(probe_map_prog_array, BPF_MAP_TYPE_PROG_ARRAY)
PROG_PROBE(probe_prog_tracepoint, BPF_PROG_TYPE_TRACEPOINT)
PROG_PROBE(probe_prog_raw_tp, BPF_PROG_TYPE_RAW_TRACEPOINT)
PROG_PROBE(probe_prog_kprobe, BPF_PROG_TYPE_KPROBE)
PROG_PROBE(probe_prog_syscall, BPF_PROG_TYPE_SYSCALL)

/* An array userspace can mmap: how npfd counts without a syscall per fault. */
static enum npf_feat_result probe_map_array_mmap(char *detail, size_t len)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "npf_probe", 4, 8, 512, &opts);
	void *p;

	if (fd < 0)
		return refused(detail, len, "BPF_MAP_TYPE_ARRAY with BPF_F_MMAPABLE", errno);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		int e = errno;

		close(fd);
		return refused(detail, len, "mmap of an array map", e);
	}
	munmap(p, 4096);
	close(fd);
	snprintf(detail, len, "BPF_F_MMAPABLE array creates and maps");
	return NPF_FEAT_YES;
}

static const struct bpf_insn ret0[] = {
	{.code = 0xb7, .dst_reg = 0, .imm = 0}, /* r0 = 0 */
	{.code = 0x95},				/* exit */
};

/* fentry on a kernel function: refused under lockdown, which npf works around. */
static enum npf_feat_result probe_fentry(char *detail, size_t len)
{
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_TRACE_FENTRY);
	struct btf *btf = btf__load_vmlinux_btf();
	int id, fd;

	if (!btf)
		return refused(detail, len, "vmlinux BTF", errno);
	id = btf__find_by_name_kind(btf, "do_nanosleep", BTF_KIND_FUNC);
	btf__free(btf);
	if (id <= 0) {
		snprintf(detail, len, "no BTF for do_nanosleep to attach to");
		return NPF_FEAT_UNKNOWN;
	}
	opts.attach_btf_id = (__u32)id;
	fd = bpf_prog_load(BPF_PROG_TYPE_TRACING, "npf_probe", "GPL", ret0, 2, &opts);
	if (fd < 0) {
		enum npf_feat_result r = refused(detail, len, "fentry load", errno);

		if (r == NPF_FEAT_NO && errno == EPERM)
			snprintf(
				detail, len,
				"refused (expected on this kernel: lockdown); npf uses tracepoints and tail calls instead");
		return r;
	}
	close(fd);
	snprintf(detail, len, "fentry programs load");
	return NPF_FEAT_YES;
}

/* ------------------------------------------------------------------ */
/* Tracing                                                             */
/* ------------------------------------------------------------------ */

static const char *const tracefs_dirs[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};

static bool is_tracefs(const char *dir)
{
	struct statfs st;

	return statfs(dir, &st) == 0 && st.f_type == TRACEFS_MAGIC;
}

static enum npf_feat_result probe_tracefs(char *detail, size_t len)
{
	char line[256];
	size_t i;
	FILE *f;

	for (i = 0; i < sizeof(tracefs_dirs) / sizeof(tracefs_dirs[0]); i++) {
		if (is_tracefs(tracefs_dirs[i])) {
			snprintf(detail, len, "mounted on %s", tracefs_dirs[i]);
			return NPF_FEAT_YES;
		}
	}
	f = fopen("/proc/filesystems", "re");
	if (!f)
		return refused(detail, len, "/proc/filesystems", errno);
	while (fgets(line, sizeof(line), f)) {
		if (!strcmp(line, "nodev\ttracefs\n")) {
			fclose(f);
			snprintf(detail, len, "not mounted; npfd mounts it on /sys/kernel/tracing");
			return NPF_FEAT_YES;
		}
	}
	fclose(f);
	snprintf(detail, len, "the kernel has no tracefs");
	return NPF_FEAT_NO;
}

static enum npf_feat_result tracepoint(char *detail, size_t len, const char *cat, const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(tracefs_dirs) / sizeof(tracefs_dirs[0]); i++) {
		char p[192];

		if (!is_tracefs(tracefs_dirs[i]))
			continue;
		snprintf(p, sizeof(p), "%s/events/%s/%s/id", tracefs_dirs[i], cat, name);
		if (!access(p, R_OK)) {
			snprintf(detail, len, "%s:%s exists", cat, name);
			return NPF_FEAT_YES;
		}
		return refused(detail, len, p, errno);
	}
	snprintf(detail, len, "tracefs is not mounted: cannot look (npfd mounts it)");
	return NPF_FEAT_UNKNOWN;
}

static enum npf_feat_result probe_tp_page_fault_user(char *detail, size_t len)
{
	return tracepoint(detail, len, "exceptions", "page_fault_user");
}

static enum npf_feat_result probe_tp_io_page_fault(char *detail, size_t len)
{
	return tracepoint(detail, len, "iommu", "io_page_fault");
}

/*
 * Two probe sites in this program: a function whose first instruction is
 * the 5-byte nop the kernel can optimize a uprobe on (as the software NIC's
 * npf_nic_fault_report), and one starting with a 1-byte nop, which the
 * kernel can only trap on.
 */
#if defined(__x86_64__)
__asm__("	.text\n"
	"	.p2align 4\n"
	"	.type npf_feat_site_nop5, @function\n"
	"npf_feat_site_nop5:\n"
	"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
	"	ret\n"
	"	.size npf_feat_site_nop5, .-npf_feat_site_nop5\n"
	"	.p2align 4\n"
	"	.type npf_feat_site_nop1, @function\n"
	"npf_feat_site_nop1:\n"
	"	nop\n"
	"	ret\n"
	"	.size npf_feat_site_nop1, .-npf_feat_site_nop1\n");
void npf_feat_site_nop5(void);
void npf_feat_site_nop1(void);
#endif

/* Where addr lives in the file mapped there: the path and file offset a uprobe needs. */
static int file_offset_of(const void *addr, char *path, size_t plen, __u64 *off)
{
	uintptr_t a = (uintptr_t)addr;
	unsigned long start, end, pgoff;
	char line[512], file[256];
	int found = -ENOENT;
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		file[0] = '\0';
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %255s", &start, &end, &pgoff, file) < 3)
			continue;
		if (a >= start && a < end && file[0] == '/') {
			snprintf(path, plen, "%s", file);
			*off = a - start + pgoff;
			found = 0;
			break;
		}
	}
	fclose(f);
	return found;
}

static int uprobe_pmu_type(void)
{
	FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "re");
	int type = -1;

	if (!f)
		return -errno;
	if (fscanf(f, "%d", &type) != 1)
		type = -EINVAL;
	fclose(f);
	return type;
}

/* A uprobe running prog_fd on fn in this process; returns the perf event fd or -errno. */
static int uprobe_attach(void (*fn)(void), int prog_fd)
{
	struct perf_event_attr attr = {.size = sizeof(attr)};
	char path[256];
	__u64 off = 0;
	int type = uprobe_pmu_type(), fd, err;

	if (type < 0)
		return type;
	err = file_offset_of((const void *)fn, path, sizeof(path), &off);
	if (err)
		return err;
	attr.type = (__u32)type;
	attr.config1 = (__u64)(uintptr_t)path;
	attr.config2 = off;
	fd = (int)syscall(__NR_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog_fd) || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

static double hit_ns(void (*fn)(void), int hits)
{
	struct timespec a, b;
	int i;

	for (i = 0; i < 10; i++) /* the kernel optimizes a site after its first hit */
		fn();
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < hits; i++)
		fn();
	clock_gettime(CLOCK_MONOTONIC, &b);
	return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / hits;
}

static int uprobe_prog(void)
{
	return bpf_prog_load(BPF_PROG_TYPE_KPROBE, "npf_probe", "GPL", ret0, 2, NULL);
}

static enum npf_feat_result probe_uprobe(char *detail, size_t len)
{
#if defined(__x86_64__)
	int prog = uprobe_prog(), fd;

	if (prog < 0)
		return refused(detail, len, "BPF_PROG_TYPE_KPROBE load", errno);
	fd = uprobe_attach(npf_feat_site_nop1, prog);
	close(prog);
	if (fd < 0)
		return refused(detail, len, "uprobe attach (perf_event_open)", -fd);
	npf_feat_site_nop1();
	close(fd);
	snprintf(detail, len, "a BPF uprobe attaches and fires");
	return NPF_FEAT_YES;
#else
	snprintf(detail, len, "probed on x86-64 only");
	return NPF_FEAT_UNKNOWN;
#endif
}

/*
 * The kernel cannot be asked whether it optimizes uprobes on a 5-byte nop;
 * it can be watched doing it: time hits on both sites. An optimized site
 * costs a syscall, a trapped one an int3 and a single-step. Unoptimized,
 * both sites trap and cost the same; optimized, the 5-byte one is faster
 * by a factor of 2 to several on the kernels measured (2.0 on a slow
 * moment of one machine, which a factor of 2 as the line called missing):
 * 1.5 is the line.
 */
static enum npf_feat_result probe_uprobe_nop5(char *detail, size_t len)
{
#if defined(__x86_64__)
	enum { HITS = 200, ROUNDS = 5 };
	int prog = uprobe_prog(), fd5, fd1;
	double t5, t1;

	if (prog < 0)
		return refused(detail, len, "BPF_PROG_TYPE_KPROBE load", errno);
	fd5 = uprobe_attach(npf_feat_site_nop5, prog);
	fd1 = uprobe_attach(npf_feat_site_nop1, prog);
	close(prog);
	if (fd5 < 0 || fd1 < 0) {
		int e = fd5 < 0 ? -fd5 : -fd1;

		if (fd5 >= 0)
			close(fd5);
		if (fd1 >= 0)
			close(fd1);
		return refused(detail, len, "uprobe attach", e);
	}
	/*
	 * The fastest of rounds taken in turn: a machine busy for a moment
	 * slowed one site's mean by 0.2 µs and flipped the verdict (0.4
	 * against 0.7 µs, where 0.2 against 0.5 was usual), so that two
	 * probes a second apart disagreed (tests/ops_doctor).
	 */
	t5 = t1 = 1e12;
	for (int round = 0; round < ROUNDS; round++) {
		double a = hit_ns(npf_feat_site_nop5, HITS), b = hit_ns(npf_feat_site_nop1, HITS);

		t5 = a < t5 ? a : t5;
		t1 = b < t1 ? b : t1;
	}
	close(fd5);
	close(fd1);
	snprintf(detail, len, "%.1f µs per hit on a 5-byte nop, %.1f µs on a 1-byte nop", t5 / 1000,
		 t1 / 1000);
	return t5 * 3 < t1 * 2 ? NPF_FEAT_YES : NPF_FEAT_NO;
#else
	snprintf(detail, len, "probed on x86-64 only");
	return NPF_FEAT_UNKNOWN;
#endif
}

/* ------------------------------------------------------------------ */
/* The table                                                           */
/* ------------------------------------------------------------------ */

#define REQ NPF_NEED_REQUIRED
#define OPT NPF_NEED_OPTIONAL
#define INFO NPF_NEED_INFO

struct npf_feature npf_features[] = {
	{"userfaultfd", "userfaultfd()", probe_uffd_syscall, OPT,
	 "clients create their userfaultfd through /dev/userfaultfd instead"},
	{"userfaultfd", "/dev/userfaultfd", probe_uffd_dev, OPT,
	 "clients need the userfaultfd() syscall (vm.unprivileged_userfaultfd or privilege)"},
	{"userfaultfd", "EVENT_FORK", probe_uffd_fork, OPT,
	 "regions are not followed into forked children (libnpf registers without it)"},
	{"userfaultfd", "EVENT_REMAP", probe_uffd_remap, REQ,
	 "registration: npfd cannot follow mremap() of registered memory"},
	{"userfaultfd", "EVENT_REMOVE", probe_uffd_remove, REQ,
	 "registration: npfd cannot follow madvise(DONTNEED) of registered memory"},
	{"userfaultfd", "EVENT_UNMAP", probe_uffd_unmap, REQ,
	 "registration: npfd cannot follow munmap() of registered memory"},
	{"userfaultfd", "THREAD_ID", probe_uffd_thread_id, REQ,
	 "registration: libnpf asks for it to match faults to BPF timestamps"},
	{"userfaultfd", "MISSING_SHMEM", probe_uffd_missing_shmem, INFO,
	 "nothing today: npf registers private anonymous memory only"},
	{"userfaultfd", "MINOR_SHMEM", probe_uffd_minor_shmem, INFO,
	 "nothing today: UFFDIO_CONTINUE would fill shmem regions in place"},
	{"userfaultfd", "POISON", probe_uffd_poison, INFO,
	 "nothing today: UFFDIO_POISON would mark pages whose backing read failed"},
	{"io_uring", "io_uring_setup", probe_uring_setup, REQ,
	 "npfd: its event loop and backing-file reads are io_uring"},
	{"io_uring", "DEFER_TASKRUN", probe_uring_defer_taskrun, OPT,
	 "npfd's event loop falls back to a plain ring (task work may interrupt it)"},
	{"io_uring", "POLL_ADD multishot", probe_uring_poll_multishot, REQ,
	 "npfd's event loop (one multishot poll per socket and userfaultfd)"},
	{"io_uring", "READ_FIXED", probe_uring_read_fixed, REQ,
	 "file-backed regions: batched reads into registered staging buffers"},
	{"bpf", "bpffs", probe_bpffs, REQ, "pinned maps (npfctl stats, bpftool map dump)"},
	{"bpf", "BTF (vmlinux)", probe_btf, REQ, "loading the collectors (CO-RE)"},
	{"bpf", "map hash", probe_map_hash, REQ, "the in-kernel fault filter (npf_procs)"},
	{"bpf", "map array mmapable", probe_map_array_mmap, REQ,
	 "counters and latency histograms (npf_region_stats, npf_latency, npf_global)"},
	{"bpf", "map ringbuf", probe_map_ringbuf, REQ, "fault records to npfd (npf_events)"},
	{"bpf", "map prog_array", probe_map_prog_array, OPT,
	 "runtime-loaded fault policies (tail calls)"},
	{"bpf", "prog tracepoint", probe_prog_tracepoint, REQ,
	 "the CPU and IOMMU fault collectors"},
	{"bpf", "prog kprobe (uprobe)", probe_prog_kprobe, OPT,
	 "device page requests of the software NIC (uprobe on npf_nic_fault_report)"},
	{"bpf", "prog raw_tp", probe_prog_raw_tp, INFO,
	 "nothing today: an alternative attach for the collectors"},
	{"bpf", "prog syscall", probe_prog_syscall, INFO,
	 "nothing today: in-kernel setup of policy maps"},
	{"bpf", "fentry", probe_fentry, INFO,
	 "nothing: npf uses tracepoints, uprobes and tail calls instead"},
	{"tracing", "tracefs", probe_tracefs, REQ, "attaching the fault tracepoints"},
	{"tracing", "exceptions:page_fault_user", probe_tp_page_fault_user, REQ,
	 "npfd: CPU fault counting and latency (cpu_faults)"},
	{"tracing", "iommu:io_page_fault", probe_tp_io_page_fault, OPT,
	 "counting IOMMU faults of real devices (iommu_faults)"},
	{"tracing", "uprobe", probe_uprobe, OPT, "device page requests of the software NIC"},
	{"tracing", "uprobe on nop5 optimized", probe_uprobe_nop5, OPT,
	 "cheap software NIC page requests (each costs a trap instead of a syscall)"},
};

const size_t npf_nr_features = sizeof(npf_features) / sizeof(npf_features[0]);

enum npf_feat_result npf_feature_probe(struct npf_feature *f)
{
	if (f->result == NPF_FEAT_UNPROBED) {
		f->detail[0] = '\0';
		errno = 0;
		f->result = f->probe(f->detail, sizeof(f->detail));
	}
	return f->result;
}

const char *npf_feature_verdict(const struct npf_feature *f)
{
	switch (f->result) {
	case NPF_FEAT_YES:
		return "ok";
	case NPF_FEAT_NO:
		return f->need == NPF_NEED_INFO ? "refused" : "missing";
	case NPF_FEAT_UNKNOWN:
		return "unknown";
	default:
		return "unprobed";
	}
}

int npf_features_missing_required(void)
{
	size_t i;
	int n = 0;

	for (i = 0; i < npf_nr_features; i++)
		if (npf_feature_probe(&npf_features[i]) == NPF_FEAT_NO &&
		    npf_features[i].need == NPF_NEED_REQUIRED)
			n++;
	return n;
}

int npf_features_report(FILE *out)
{
	const char *group = "";
	bool lost = false;
	size_t i;

	for (i = 0; i < npf_nr_features; i++) {
		struct npf_feature *f = &npf_features[i];

		npf_feature_probe(f);
		if (strcmp(group, f->group)) {
			group = f->group;
			fprintf(out, "%s%s\n", i ? "\n" : "", group);
		}
		fprintf(out, "  %-28s %-8s %s\n", f->name, npf_feature_verdict(f), f->detail);
	}
	for (i = 0; i < npf_nr_features; i++) {
		struct npf_feature *f = &npf_features[i];

		if (f->result == NPF_FEAT_YES || f->need == NPF_NEED_INFO)
			continue;
		if (!lost)
			fprintf(out, "\nWhat this disables:\n");
		lost = true;
		fprintf(out, "  %-28s %s%s%s\n", f->name,
			f->need == NPF_NEED_REQUIRED ? "REQUIRED: " : "", f->disables,
			f->result == NPF_FEAT_UNKNOWN ? " (if missing)" : "");
	}
	if (!lost)
		fprintf(out, "\nEverything npf uses works.\n");
	return npf_features_missing_required();
}
