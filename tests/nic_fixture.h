/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Test fixtures for the software RNIC tests (tests/nic_*.c).
 *
 *  - two-process runner: the two NICs live in two forked processes that
 *    talk like two hosts; a socketpair carries the out-of-band exchange;
 *  - nic_test_mark_present(): what npfd does once a page is resident, done
 *    by the test on memory it made resident itself;
 *  - fx_npfd: a thread that STANDS IN FOR npfd UNTIL ITS NIC BACKEND LANDS.
 *    It learns page requests the way npfd will (a BPF uprobe on
 *    npf_nic_fault_report() reading *req into a ring buffer), resolves
 *    them through the IO page table memfd (touch/fill the pages, set
 *    PRESENT with a version bump, post a response, futex-wake), and can
 *    invalidate ranges (clear, bump, post, wait for the NIC's ack).
 */
#ifndef NIC_FIXTURE_H
#define NIC_FIXTURE_H

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/futex.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "npf_abi.h"
#include "npf_nic.h"

#define FX_SKIP 77
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
	       (unsigned long long)st.page_requests, (unsigned long long)st.page_requests_suppressed,
	       (unsigned long long)st.page_responses, (unsigned long long)st.requester_stalls,
	       (unsigned long long)st.invalidations);
}

static inline void __attribute__((noreturn, format(printf, 2, 3))) fx_exit(int code, const char *fmt,
									       ...)
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
	const __u64 *p = buf;
	__u64 h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < len / 8; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
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
			prctl(PR_SET_PDEATHSIG, SIGKILL);
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

static inline struct nic_qp *fx_qp(struct fx_ep *ep, int sock)
{
	NIC_OPTS(nic_qp_init_attr, attr, .send_cq = ep->cq, .recv_cq = ep->cq,
		 .max_send_wr = 1024, .max_recv_wr = 1024);
	struct nic_qp *qp = nic_create_qp(ep->pd, &attr);
	int err;

	FX_ASSERT(qp, "nic_create_qp: %s", strerror(errno));
	err = nic_qp_connect_fd(qp, sock);
	FX_ASSERT(!err, "nic_qp_connect_fd: %s", strerror(-err));
	if (!ep->qp)
		ep->qp = qp;
	return qp;
}

static inline void fx_wait_wc(struct nic_cq *cq, struct nic_wc *wc, int timeout_ms)
{
	for (;;) {
		if (nic_poll_cq(cq, 1, wc) == 1)
			return;
		FX_ASSERT(nic_cq_wait(cq, timeout_ms) == 0, "no completion within %d ms", timeout_ms);
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

static inline int fx_post(struct nic_qp *qp, enum nic_wr_opcode op, __u64 wr_id, void *buf,
			  __u32 len, struct nic_mr *mr, __u64 raddr, __u32 rkey)
{
	struct nic_sge sge = {(uintptr_t)buf, len, nic_mr_lkey(mr)};
	struct nic_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = NIC_SEND_SIGNALED,
		.remote_addr = raddr,
		.rkey = rkey,
	};

	return nic_post_send(qp, &wr, NULL);
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

static inline void fx_respond(struct fx_iopt *t, __u64 cookie, __u32 status)
{
	struct npf_resp_ring *r = &t->h->resp;
	__u32 tail = r->tail;

	while (tail - __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) >= NPF_NIC_RING_SIZE)
		sched_yield();
	r->ent[tail % NPF_NIC_RING_SIZE].cookie = cookie;
	r->ent[tail % NPF_NIC_RING_SIZE].status = status;
	__atomic_store_n(&r->tail, tail + 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &r->tail, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Invalidate pages [first, first + n): clear, bump, post, wait for the ack. */
static inline void fx_invalidate(struct fx_iopt *t, __u64 first, __u64 n, __u64 seq)
{
	struct npf_inval_ring *r = &t->h->inval;
	__u32 tail = r->tail;
	__u64 i;

	for (i = first; i < first + n; i++)
		fx_pte_update(&t->pte[i], 0, NPF_PTE_PRESENT | NPF_PTE_READ | NPF_PTE_WRITE);
	while (tail - __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) >= NPF_NIC_RING_SIZE)
		sched_yield();
	r->ent[tail % NPF_NIC_RING_SIZE].seq = seq;
	r->ent[tail % NPF_NIC_RING_SIZE].first_page = first;
	r->ent[tail % NPF_NIC_RING_SIZE].npages = n;
	__atomic_store_n(&r->tail, tail + 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &r->tail, FUTEX_WAKE, 1, NULL, NULL, 0);
	for (;;) {
		__u64 acked = __atomic_load_n(&r->acked_seq, __ATOMIC_ACQUIRE);
		struct timespec ts = {1, 0};

		if (acked >= seq)
			break;
		syscall(SYS_futex, &r->acked_seq, FUTEX_WAIT, (__u32)acked, &ts, NULL, 0);
	}
}

/* ---- fx_npfd: stands in for npfd until its NIC backend lands ----------------------- */

#define FX_MAX_MR 8

struct fx_npfd {
	int rb_fd, prog_fd, perf_fd;
	struct ring_buffer *rb;
	pthread_t thread;
	atomic_int stop;
	struct fx_iopt mr[FX_MAX_MR]; /* index = npf id - 1 */
	int nmr;
	/* observed */
	atomic_int nreq;
	struct npf_page_request last;
	atomic_uint max_npages;
	/* policy: hold answers for this QP until released */
	atomic_uint hold_qpn;
	/* fill resolved pages with this byte (-1: leave contents alone) */
	int fill;
	/* serialises resolution with fx_invalidate() from other threads */
	pthread_mutex_t lock;
	struct npf_page_request held[64];
	int nheld;
};

#define BPF_INSN(c, d, s, o, i) ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})

static inline int fx_uprobe_type(void)
{
	FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
	int t = -1;

	if (f) {
		if (fscanf(f, "%d", &t) != 1)
			t = -1;
		fclose(f);
	}
	return t;
}

/* File offset of the fault-report site in the executable mapping. */
static inline long fx_site_offset(char *path, size_t plen)
{
	unsigned long site = (unsigned long)&npf_nic_fault_report, lo, hi, off;
	char line[512], perm[8], file[400];
	FILE *f = fopen("/proc/self/maps", "r");
	long ret = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		file[0] = 0;
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %399s", &lo, &hi, perm, &off, file) < 4)
			continue;
		if (site >= lo && site < hi && file[0] == '/') {
			ret = site - lo + off;
			snprintf(path, plen, "%s", file);
			break;
		}
	}
	fclose(f);
	return ret;
}

static int fx_npfd_event(void *ctx, void *data, size_t len);

static inline void fx_npfd_resolve(struct fx_npfd *d, const struct npf_page_request *rq)
{
	struct fx_iopt *t;
	__u64 i, first;

	if (rq->mr_id < 1 || (int)rq->mr_id > d->nmr) {
		fx_fail("page request for unknown MR id %u", rq->mr_id);
	}
	t = &d->mr[rq->mr_id - 1];
	first = (rq->addr - t->h->start) / PG;
	pthread_mutex_lock(&d->lock);
	for (i = first; i < first + rq->len / PG; i++) {
		volatile char *p = (char *)(uintptr_t)(t->h->start + i * PG);

		if (d->fill >= 0)
			memset((void *)p, d->fill, PG);
		else
			p[0] = p[0]; /* make it resident, keep the contents */
		fx_pte_update(&t->pte[i], NPF_PTE_PRESENT | NPF_PTE_READ | NPF_PTE_WRITE, 0);
	}
	fx_respond(t, rq->cookie, NPF_PR_SUCCESS);
	pthread_mutex_unlock(&d->lock);
}

static int fx_npfd_event(void *ctx, void *data, size_t len)
{
	struct fx_npfd *d = ctx;
	struct npf_page_request rq;

	if (len < sizeof(rq))
		return 0;
	memcpy(&rq, data, sizeof(rq));
	FX_ASSERT(rq.magic == NPF_IOPT_MAGIC, "page request without magic");
	d->last = rq;
	if (rq.npages > d->max_npages)
		d->max_npages = rq.npages;
	atomic_fetch_add(&d->nreq, 1);
	if (d->hold_qpn && (rq.cookie >> 32) == d->hold_qpn && d->nheld < 64) {
		d->held[d->nheld++] = rq;
		return 0;
	}
	fx_npfd_resolve(d, &rq);
	return 0;
}

static inline void *fx_npfd_main(void *arg)
{
	struct fx_npfd *d = arg;

	while (!atomic_load(&d->stop)) {
		ring_buffer__poll(d->rb, 20);
		if (!d->hold_qpn && d->nheld) {
			int i;

			for (i = 0; i < d->nheld; i++)
				fx_npfd_resolve(d, &d->held[i]);
			d->nheld = 0;
		}
	}
	return NULL;
}

/*
 * Attach the uprobe. Returns 0, or skips the test when BPF or uprobes are
 * not available (with the reason).
 */
static inline void fx_npfd_start(struct fx_npfd *d)
{
	char path[400];
	long off = fx_site_offset(path, sizeof(path));
	int type = fx_uprobe_type(), tgid = getpid();
	struct perf_event_attr pa;
	char log[4096];
	LIBBPF_OPTS(bpf_prog_load_opts, po, .log_buf = log, .log_size = sizeof(log), .log_level = 0);
	struct bpf_insn prog[] = {
		BPF_INSN(BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 0, 0),
		BPF_INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_get_current_pid_tgid),
		BPF_INSN(BPF_ALU64 | BPF_RSH | BPF_K, 0, 0, 0, 32),
		BPF_INSN(BPF_JMP | BPF_JNE | BPF_K, 0, 0, 12, tgid),
		BPF_INSN(BPF_LDX | BPF_MEM | BPF_DW, 3, 6, 112, 0), /* pt_regs->di */
		BPF_INSN(BPF_ALU64 | BPF_MOV | BPF_X, 1, 10, 0, 0),
		BPF_INSN(BPF_ALU64 | BPF_ADD | BPF_K, 1, 0, 0, -40),
		BPF_INSN(BPF_ALU64 | BPF_MOV | BPF_K, 2, 0, 0, 40),
		BPF_INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_probe_read_user),
		BPF_INSN(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, 0),
		BPF_INSN(0, 0, 0, 0, 0),
		BPF_INSN(BPF_ALU64 | BPF_MOV | BPF_X, 2, 10, 0, 0),
		BPF_INSN(BPF_ALU64 | BPF_ADD | BPF_K, 2, 0, 0, -40),
		BPF_INSN(BPF_ALU64 | BPF_MOV | BPF_K, 3, 0, 0, 40),
		BPF_INSN(BPF_ALU64 | BPF_MOV | BPF_K, 4, 0, 0, 0),
		BPF_INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_ringbuf_output),
		BPF_INSN(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0),
		BPF_INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};

	_Static_assert(sizeof(struct npf_page_request) == 40, "request size");
	pthread_mutex_init(&d->lock, NULL);
	if (geteuid())
		fx_skip("the npfd stand-in attaches a BPF uprobe: run as root");
	if (off < 0 || type < 0)
		fx_skip("cannot place a uprobe (no uprobe PMU or no file-backed text)");
	d->rb_fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "fx_npf_rb", 0, 0, 1 << 20, NULL);
	if (d->rb_fd < 0)
		fx_skip("BPF ring buffer unavailable: %s", strerror(errno));
	prog[9].imm = d->rb_fd;
	d->prog_fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "fx_npf_uprobe", "GPL", prog,
				   sizeof(prog) / sizeof(prog[0]), &po);
	if (d->prog_fd < 0)
		fx_skip("cannot load the uprobe program: %s %s", strerror(errno), log);
	memset(&pa, 0, sizeof(pa));
	pa.size = sizeof(pa);
	pa.type = type;
	pa.config1 = (__u64)(uintptr_t)path;
	pa.config2 = off;
	d->perf_fd = syscall(SYS_perf_event_open, &pa, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
	if (d->perf_fd < 0)
		fx_skip("cannot open a uprobe on %s+%#lx: %s", path, off, strerror(errno));
	if (ioctl(d->perf_fd, PERF_EVENT_IOC_SET_BPF, d->prog_fd) ||
	    ioctl(d->perf_fd, PERF_EVENT_IOC_ENABLE, 0))
		fx_skip("cannot attach the uprobe program: %s", strerror(errno));
	d->rb = ring_buffer__new(d->rb_fd, fx_npfd_event, d, NULL);
	FX_ASSERT(d->rb, "ring_buffer__new: %s", strerror(errno));
	d->fill = -1;
	FX_ASSERT(!pthread_create(&d->thread, NULL, fx_npfd_main, d), "pthread_create");
}

/* Hand an MR to the stand-in: it maps the IOPT and gives the MR its id. */
static inline void fx_npfd_add_mr(struct fx_npfd *d, struct nic_mr *mr)
{
	FX_ASSERT(d->nmr < FX_MAX_MR, "too many MRs");
	fx_iopt_map(&d->mr[d->nmr], mr);
	d->nmr++;
	FX_ASSERT(!nic_mr_set_npf_id(mr, d->nmr), "nic_mr_set_npf_id");
}

static inline void fx_npfd_stop(struct fx_npfd *d)
{
	atomic_store(&d->stop, 1);
	pthread_join(d->thread, NULL);
	ring_buffer__free(d->rb);
	close(d->perf_fd);
	close(d->prog_fd);
	close(d->rb_fd);
}

#endif /* NIC_FIXTURE_H */
