/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Test fixtures for the software RNIC tests (tests/nic_*.c).
 *
 *  - two-process runner: the two NICs live in two forked processes that
 *    talk like two hosts; a socketpair carries the out-of-band exchange;
 *  - nic_test_mark_present(): for the transport tests only (no faults
 *    wanted), marks memory the test made resident itself present;
 *  - the real npfd: the fault tests run against a private npfd
 *    (fx_pair_npfd), register their memory with libnpf and attach their
 *    MRs' IO page tables to it (fx_npf_mr): npfd alone marks pages present.
 */
#ifndef NIC_FIXTURE_H
#define NIC_FIXTURE_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "harness.h"
#include "npf.h"
#include "npf_nic.h"

#define FX_SKIP TH_SKIP
#define PG 4096UL

static struct nic *fx_dump_nic; /* its counters are printed on failure */

static inline void fx_print_stats(const char *who, struct nic *nic)
{
	struct nic_stats st;

	if (!nic || nic_query_stats(nic, &st, sizeof(st)))
		return;
	printf("%s: tx %llu rx %llu dropped %llu retransmits %llu timeouts %llu rnr_nak tx %llu rx "
	       "%llu seq_nak %llu page requests %llu (suppressed %llu) responses %llu stalls %llu "
	       "invalidations %llu\n",
	       who, (unsigned long long)st.pkts_tx, (unsigned long long)st.pkts_rx,
	       (unsigned long long)st.pkts_dropped, (unsigned long long)st.retransmits,
	       (unsigned long long)st.timeouts, (unsigned long long)st.rnr_nak_tx,
	       (unsigned long long)st.rnr_nak_rx, (unsigned long long)st.seq_nak_tx,
	       (unsigned long long)st.page_requests,
	       (unsigned long long)st.page_requests_suppressed,
	       (unsigned long long)st.page_responses, (unsigned long long)st.requester_stalls,
	       (unsigned long long)st.invalidations);
}

static inline void __attribute__((noreturn, format(printf, 2, 3)))
fx_exit(int code, const char *fmt, ...)
{
	va_list ap;

	if (code != FX_SKIP)
		fx_print_stats("failing side", fx_dump_nic);

	printf(code == FX_SKIP ? "SKIP: " : "FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	_exit(code);
}

#define fx_fail(...) fx_exit(1, __VA_ARGS__)
#define fx_skip(...) fx_exit(FX_SKIP, __VA_ARGS__)
#define FX_ASSERT(cond, ...)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			fx_fail(__VA_ARGS__);                                                      \
	} while (0)

/* ---- data ----------------------------------------------------------------- */

static inline void fx_fill(void *buf, size_t len, __u64 seed)
{
	__u64 *p = buf, x = seed * 0x9e3779b97f4a7c15ULL + 1;
	size_t i;

	for (i = 0; i < len / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = x;
	}
	for (i = len & ~7UL; i < len; i++)
		((unsigned char *)buf)[i] = (unsigned char)(seed + i);
}

/* FNV-1a over 64-bit words (bytes for the tail). */
static inline __u64 fx_sum(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	__u64 h = 0xcbf29ce484222325ULL, w;
	size_t i;

	/* memcpy: a message may start at any byte offset of a buffer. */
	for (i = 0; i < len / 8; i++) {
		memcpy(&w, p + i * 8, sizeof(w));
		h = (h ^ w) * 0x100000001b3ULL;
	}
	for (i = len & ~7UL; i < len; i++)
		h = (h ^ ((const unsigned char *)buf)[i]) * 0x100000001b3ULL;
	return h;
}

static inline void *fx_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	FX_ASSERT(p != MAP_FAILED, "mmap %zu: %s", len, strerror(errno));
	return p;
}

/* ---- out-of-band messages --------------------------------------------------- */

static inline void fx_send(int sock, const void *buf, size_t len)
{
	FX_ASSERT(write(sock, buf, len) == (ssize_t)len, "oob write: %s", strerror(errno));
}

static inline void fx_recv(int sock, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = read(sock, (char *)buf + got, len - got);

		FX_ASSERT(r > 0, "oob read: %s", r ? strerror(errno) : "peer closed");
		got += r;
	}
}

/* A rendezvous: both sides call it with the same tag. */
static inline void fx_sync(int sock, __u32 tag)
{
	__u32 got;

	fx_send(sock, &tag, sizeof(tag));
	fx_recv(sock, &got, sizeof(got));
	FX_ASSERT(got == tag, "out of step with the peer: tag %u vs %u", tag, got);
}

struct fx_region {
	__u64 addr;
	__u64 len;
	__u32 rkey;
	__u32 pad;
};

/* ---- two processes ---------------------------------------------------------- */

typedef int (*fx_side_fn)(int sock, void *arg);

/* In a side fx_pair() runs: 0 in A, 1 in B (one function can play both). */
static int fx_me;

/*
 * Run a and b in two child processes joined by a socketpair; each must exit
 * 0. Returns the test's exit code (77 if either side skipped). A side that
 * takes longer than timeout_s seconds is killed.
 */
static inline int fx_pair(fx_side_fn a, fx_side_fn b, void *arg, int timeout_s)
{
	int sv[2], i, st, code = 0;
	pid_t pid[2];
	fx_side_fn fn[2] = {a, b};
	time_t end = time(NULL) + timeout_s;

	fflush(stdout);
	FX_ASSERT(!socketpair(AF_UNIX, SOCK_STREAM, 0, sv), "socketpair: %s", strerror(errno));
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		FX_ASSERT(pid[i] >= 0, "fork: %s", strerror(errno));
		if (!pid[i]) {
			close(sv[!i]);
			fx_me = i;
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			setvbuf(stdout, NULL, _IOLBF,
				0); /* a side killed on failure keeps its lines */
			st = fn[i](sv[i], arg);
			fflush(stdout);
			_exit(st);
		}
	}
	close(sv[0]);
	close(sv[1]);
	for (i = 0; i < 2; i++) {
		for (;;) {
			pid_t r = waitpid(pid[i], &st, WNOHANG);

			if (r == pid[i])
				break;
			if (time(NULL) > end) {
				kill(pid[0], SIGKILL);
				kill(pid[1], SIGKILL);
				waitpid(pid[i], &st, 0);
				printf("side %c timed out after %d s\n", 'A' + i, timeout_s);
				code = 1;
				break;
			}
			usleep(10000);
		}
		if (WIFSIGNALED(st)) {
			printf("side %c killed by signal %d\n", 'A' + i, WTERMSIG(st));
			kill(pid[!i], SIGKILL);
			code = 1;
		} else if (WEXITSTATUS(st) == FX_SKIP && code == 0) {
			code = FX_SKIP;
		} else if (WEXITSTATUS(st) && WEXITSTATUS(st) != FX_SKIP) {
			printf("side %c failed\n", 'A' + i);
			kill(pid[!i], SIGKILL);
			code = 1;
		}
	}
	return code;
}

/* Both sides run side (fx_me tells them apart); PASS and what it showed when both passed. */
static inline int fx_pair_same(fx_side_fn side, int timeout_s, const char *shown)
{
	int r = fx_pair(side, side, NULL, timeout_s);

	if (!r)
		printf("PASS: %s\n", shown);
	return r;
}

/* ---- two network namespaces joined by a veth pair ----------------------------------------- */

static char fx_ns[2][32];
static const char *const fx_ns_addr[2] = {"10.251.7.1", "10.251.7.2"};

static inline int __attribute__((format(printf, 1, 2))) fx_sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static inline void fx_netns_cleanup(void)
{
	if (!fx_ns[0][0])
		return;
	fx_sh("ip netns del %s 2>/dev/null", fx_ns[0]);
	fx_sh("ip netns del %s 2>/dev/null", fx_ns[1]);
}

static inline void fx_netns_on_signal(int sig)
{
	fx_netns_cleanup();
	_exit(128 + sig);
}

/*
 * Create two namespaces, veth between them, fx_ns_addr[i] on side i. They
 * are removed at exit, on SIGTERM/SIGINT (the runner's timeout), and when
 * setting up fails (then the test skips with the reason).
 */
static inline void fx_netns_setup(void)
{
	int id = getpid() % 100000;

	if (geteuid())
		fx_skip("creating network namespaces needs root");
	if (fx_sh("ip -V >/dev/null 2>&1"))
		fx_skip("the ip command (iproute2) is missing");
	snprintf(fx_ns[0], sizeof(fx_ns[0]), "npfnicA%d", getpid());
	snprintf(fx_ns[1], sizeof(fx_ns[1]), "npfnicB%d", getpid());
	atexit(fx_netns_cleanup);
	signal(SIGTERM, fx_netns_on_signal);
	signal(SIGINT, fx_netns_on_signal);
	if (fx_sh("ip netns add %s && ip netns add %s", fx_ns[0], fx_ns[1]) ||
	    fx_sh("ip link add vnpfa%d netns %s type veth peer name vnpfb%d netns %s", id, fx_ns[0],
		  id, fx_ns[1]) ||
	    fx_sh("ip -n %s addr add %s/24 dev vnpfa%d && ip -n %s link set vnpfa%d up && "
		  "ip -n %s link set lo up",
		  fx_ns[0], fx_ns_addr[0], id, fx_ns[0], id, fx_ns[0]) ||
	    fx_sh("ip -n %s addr add %s/24 dev vnpfb%d && ip -n %s link set vnpfb%d up && "
		  "ip -n %s link set lo up",
		  fx_ns[1], fx_ns_addr[1], id, fx_ns[1], id, fx_ns[1])) {
		fx_netns_cleanup(); /* fx_skip() exits without running atexit handlers */
		fx_skip("cannot set up two network namespaces joined by veth");
	}
}

/* Move the calling process (a side of fx_pair) into namespace i. */
static inline void fx_netns_enter(int i)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", fx_ns[i]);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	FX_ASSERT(fd >= 0 && !setns(fd, CLONE_NEWNET), "enter netns %s: %s", fx_ns[i],
		  strerror(errno));
	close(fd);
}

/* ---- one NIC endpoint --------------------------------------------------------- */

struct fx_ep {
	struct nic *nic;
	struct nic_pd *pd;
	struct nic_cq *cq;
	struct nic_qp *qp;
};

static inline void fx_ep_open(struct fx_ep *ep, const struct nic_opts *opts)
{
	ep->nic = nic_open(opts);
	FX_ASSERT(ep->nic, "nic_open: %s", strerror(errno));
	fx_dump_nic = ep->nic;
	ep->pd = nic_alloc_pd(ep->nic);
	ep->cq = nic_create_cq(ep->nic, 4096);
	FX_ASSERT(ep->pd && ep->cq, "pd/cq: %s", strerror(errno));
}

/* A QP of ep (flags: enum nic_qp_flags) connected to the peer's over sock. */
static inline struct nic_qp *fx_qp_flags(struct fx_ep *ep, int sock, __u32 flags)
{
	NIC_OPTS(nic_qp_init_attr, attr, .send_cq = ep->cq, .recv_cq = ep->cq, .max_send_wr = 1024,
		 .max_recv_wr = 1024, .flags = flags);
	struct nic_qp *qp = nic_create_qp(ep->pd, &attr);
	int err;

	FX_ASSERT(qp, "nic_create_qp: %s", strerror(errno));
	err = nic_qp_connect_fd(qp, sock);
	FX_ASSERT(!err, "nic_qp_connect_fd: %s", strerror(-err));
	if (!ep->qp)
		ep->qp = qp;
	return qp;
}

static inline struct nic_qp *fx_qp(struct fx_ep *ep, int sock)
{
	return fx_qp_flags(ep, sock, 0);
}

static inline void fx_wait_wc(struct nic_cq *cq, struct nic_wc *wc, int timeout_ms)
{
	for (;;) {
		if (nic_poll_cq(cq, 1, wc) == 1)
			return;
		FX_ASSERT(nic_cq_wait(cq, timeout_ms) == 0, "no completion within %d ms",
			  timeout_ms);
	}
}

static inline void fx_expect_wc(struct nic_cq *cq, __u64 wr_id, enum nic_wc_status st)
{
	struct nic_wc wc;

	fx_wait_wc(cq, &wc, 20000);
	FX_ASSERT(wc.wr_id == wr_id && wc.status == st,
		  "completion wr_id %llu status '%s', expected wr_id %llu status '%s'",
		  (unsigned long long)wc.wr_id, nic_wc_status_str(wc.status),
		  (unsigned long long)wr_id, nic_wc_status_str(st));
}

/* Post one signaled WR (flags: more enum nic_send_flags) over [buf, buf + len) of mr. */
static inline int fx_post_flags(struct nic_qp *qp, enum nic_wr_opcode op, __u64 wr_id, void *buf,
				__u32 len, struct nic_mr *mr, __u64 raddr, __u32 rkey,
				unsigned int flags)
{
	struct nic_sge sge = {(uintptr_t)buf, len, nic_mr_lkey(mr)};
	struct nic_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = NIC_SEND_SIGNALED | flags,
		.remote_addr = raddr,
		.rkey = rkey,
	};

	return nic_post_send(qp, &wr, NULL);
}

static inline int fx_post(struct nic_qp *qp, enum nic_wr_opcode op, __u64 wr_id, void *buf,
			  __u32 len, struct nic_mr *mr, __u64 raddr, __u32 rkey)
{
	return fx_post_flags(qp, op, wr_id, buf, len, mr, raddr, rkey, 0);
}

/*
 * Move n chunks of `chunk` bytes between local buf (in mr) and the remote
 * region at raddr, `depth` work requests in flight; every one must succeed.
 */
static inline void fx_stream(struct fx_ep *ep, enum nic_wr_opcode op, char *buf, __u64 n,
			     __u32 chunk, struct nic_mr *mr, __u64 raddr, __u32 rkey, __u64 depth)
{
	__u64 posted = 0, done = 0;

	while (done < n) {
		if (posted < n && posted - done < depth) {
			FX_ASSERT(!fx_post(ep->qp, op, posted, buf + posted * chunk, chunk, mr,
					   raddr + posted * chunk, rkey),
				  "post WR %llu", (unsigned long long)posted);
			posted++;
			continue;
		}
		fx_expect_wc(ep->cq, done, NIC_WC_SUCCESS);
		done++;
	}
}

static inline void fx_post_recv(struct nic_qp *qp, __u64 wr_id, void *buf, __u32 len,
				struct nic_mr *mr)
{
	struct nic_sge sge = {(uintptr_t)buf, len, nic_mr_lkey(mr)};
	struct nic_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1};

	FX_ASSERT(!nic_post_recv(qp, &wr, NULL), "nic_post_recv failed");
}

/* ---- the IO page table, as npfd sees it ----------------------------------------- */

struct fx_iopt {
	struct npf_iopt_header *h;
	__u64 *pte;
	size_t size;
};

static inline void fx_iopt_map(struct fx_iopt *t, struct nic_mr *mr)
{
	int fd = nic_mr_iopt_fd(mr);
	struct npf_iopt_header h;

	FX_ASSERT(pread(fd, &h, sizeof(h), 0) == sizeof(h), "read IOPT header");
	FX_ASSERT(h.magic == NPF_IOPT_MAGIC && h.version == NPF_IOPT_VERSION, "bad IOPT header");
	t->size = h.pte_offset + h.npages * 8;
	t->h = mmap(NULL, t->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	FX_ASSERT(t->h != MAP_FAILED, "map IOPT: %s", strerror(errno));
	t->pte = (__u64 *)((char *)t->h + h.pte_offset);
}

static inline void fx_pte_update(__u64 *pte, __u64 set, __u64 clear)
{
	__u64 old = __atomic_load_n(pte, __ATOMIC_RELAXED), new;

	do
		new = ((old & ~clear) | set) + (1ULL << NPF_PTE_VERSION_SHIFT);
	while (!__atomic_compare_exchange_n(pte, &old, new, false, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
}

/*
 * TEST FIXTURE: mark [addr, addr + len) present for read and write, as npfd
 * does after paging it in. The caller has made the memory resident.
 */
static inline void nic_test_mark_present(struct fx_iopt *t, __u64 addr, __u64 len)
{
	__u64 i = (addr - t->h->start) / PG, end = (addr + len - t->h->start + PG - 1) / PG;

	for (; i < end; i++)
		fx_pte_update(&t->pte[i], NPF_PTE_PRESENT | NPF_PTE_READ | NPF_PTE_WRITE, 0);
}

/* TEST FIXTURE: register [buf, buf + len) with acc, every page present (no faults). */
static inline struct nic_mr *fx_reg_present(struct nic_pd *pd, void *buf, size_t len, int acc)
{
	struct nic_mr *mr = nic_reg_mr(pd, buf, len, acc);
	struct fx_iopt t;

	FX_ASSERT(mr, "nic_reg_mr: %s", strerror(errno));
	fx_iopt_map(&t, mr);
	nic_test_mark_present(&t, (uintptr_t)buf, len);
	return mr;
}

/* ---- the real npfd -------------------------------------------------------------------- */

static pid_t fx_npfd_pid; /* the private npfd of this test (fx_pair_npfd) */

/*
 * Connect to npfd ($NPF_SOCKET). The NIC tests need the real npfd: when it
 * is absent, say so, with libnpf's reason.
 */
static inline struct npf_client *fx_npf_connect(void)
{
	const char *path = getenv("NPF_SOCKET");
	struct npf_client *c = npf_client__connect(NULL);

	FX_ASSERT(
		c,
		"cannot connect to npfd at %s: %s (is npfd running? the NIC tests start a private one)",
		path ? path : NPF_DEFAULT_SOCKET, strerror(errno));
	return c;
}

/* Register [buf, buf + len) with npfd: never pinned; o NULL: zero-filled on first touch. */
static inline int fx_npf_register(struct npf_client *c, void *buf, size_t len,
				  const struct npf_region_opts *o)
{
	int id = npf_client__register(c, buf, len, o);

	FX_ASSERT(id > 0, "npfd refused region %p+%zu: %s (%s)", buf, len, strerror(-id),
		  npf_client__errmsg(c));
	return id;
}

/*
 * An MR over [buf, buf + len) of npf region `region`, its IO page table
 * attached to npfd (which alone will set entries present), the MR told
 * its device id. Returns the MR; *device gets the id.
 */
static inline struct nic_mr *fx_npf_mr(struct npf_client *c, struct fx_ep *ep, int region,
				       void *buf, size_t len, int acc, int *device)
{
	struct nic_mr *mr = nic_reg_mr(ep->pd, buf, len, acc);
	int dev;

	FX_ASSERT(mr, "nic_reg_mr: %s", strerror(errno));
	dev = npf_client__attach_device(c, (__u32)region, nic_mr_iopt_fd(mr));
	FX_ASSERT(dev > 0, "npfd refused to attach the MR to region %d: %s (%s)", region,
		  strerror(-dev), npf_client__errmsg(c));
	FX_ASSERT(!nic_mr_set_npf_id(mr, (__u32)dev), "nic_mr_set_npf_id");
	if (device)
		*device = dev;
	return mr;
}

/* npfd's view of a device: page request groups answered, entries mapped, ... */
static inline struct npf_device_info fx_device_info(struct npf_client *c, int device)
{
	struct npf_device_info *di, out = {0};
	size_t n, i;
	int err = npf_client__device_list(c, &di, &n);

	FX_ASSERT(!err, "npfd device list: %s", strerror(-err));
	for (i = 0; i < n; i++)
		if ((int)di[i].device_id == device)
			out = di[i];
	free(di);
	FX_ASSERT(out.device_id, "npfd does not list device %d", device);
	return out;
}

/* A region's counters (device_faults is counted by the BPF uprobe program). */
static inline struct npf_region_stats fx_region_stats(struct npf_client *c, int region)
{
	struct npf_region_stats_full *sf;
	struct npf_region_stats out;
	size_t n;
	int err = npf_client__stats(c, (__u32)region, &sf, &n);

	FX_ASSERT(!err && n == 1, "npfd stats of region %d: %s", region, strerror(-err));
	out = sf->stats;
	free(sf);
	return out;
}

/* Faults of the region must have been visible to npfd: device_faults and page requests. */
static inline void fx_expect_page_requests(struct npf_client *c, const char *who, int region,
					   int device)
{
	struct npf_region_stats rs = fx_region_stats(c, region);
	struct npf_device_info di = fx_device_info(c, device);

	printf("%s: region %d: %llu device faults (BPF), %llu pages zeroed, %llu copied; device %d: %llu page requests answered, %llu entries mapped, mean raised->answered %llu ns\n",
	       who, region, (unsigned long long)rs.device_faults,
	       (unsigned long long)rs.pages_zeroed, (unsigned long long)rs.pages_copied, device,
	       (unsigned long long)di.page_requests, (unsigned long long)di.pages_mapped,
	       (unsigned long long)(di.page_requests ? di.fault_ns_sum / di.page_requests : 0));
	FX_ASSERT(rs.device_faults > 0, "%s: npfd counted no device fault for region %d", who,
		  region);
	FX_ASSERT(di.page_requests > 0, "%s: npfd answered no page request of device %d", who,
		  device);
}

/*
 * Tear down a side: detach this process's devices while its NIC still runs
 * (npfd waits for the NIC's ack), then close the NIC and the connection.
 * Closing the NIC first would leave npfd waiting for an ack nobody sends.
 */
static inline void fx_npf_close(struct npf_client *c, struct fx_ep *ep)
{
	struct npf_device_info *di;
	size_t n, i;

	if (!npf_client__device_list(c, &di, &n)) {
		for (i = 0; i < n; i++)
			if (di[i].tgid == (__u32)getpid())
				npf_client__detach_device(c, di[i].device_id);
		free(di);
	}
	nic_close(ep->nic);
	npf_client__close(c);
}

/* Stop / continue npfd: holds back its answers for real (it is a process that can be descheduled). */
static inline void fx_npfd_signal(int sig)
{
	char path[64], buf[512], *p;
	int i;

	FX_ASSERT(fx_npfd_pid > 0 && !kill(fx_npfd_pid, sig), "signal npfd: %s", strerror(errno));
	if (sig != SIGSTOP)
		return;
	/* kill() returns before the target stops: wait until /proc says 'T' */
	snprintf(path, sizeof(path), "/proc/%d/stat", fx_npfd_pid);
	for (i = 0; i < 5000; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = 0;
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2] == 'T')
			return;
		usleep(1000);
	}
	fx_fail("npfd did not stop");
}

/*
 * main() of a NIC test: start a private npfd, run a and b (fx_pair), check
 * that npfd is alive and stops cleanly. Returns the exit code.
 */
static inline int fx_pair_npfd(fx_side_fn a, fx_side_fn b, void *arg, int timeout_s)
{
	struct th_npfd d;
	int r;

	th_npfd_start(&d, NULL);
	fx_npfd_pid = d.pid;
	r = fx_pair(a, b, arg, timeout_s);
	kill(d.pid, SIGCONT); /* a side that failed may have left it stopped */
	if (!th_npfd_alive(&d)) {
		th_npfd_dump_log(&d);
		th_fail("npfd died during the test");
	}
	if (r == 1)
		th_npfd_dump_log(&d);
	th_npfd_stop(&d);
	return r;
}

#endif /* NIC_FIXTURE_H */
