/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The software RNIC set-up the NIC benchmarks share: two NICs in this
 * process (A, the side whose memory is measured, and B, the peer) joined by
 * shared-memory wires, and three kinds of memory region:
 *
 *  - npf:    registered with npfd, never pinned; the MR's IO page table is
 *            attached to npfd, which alone sets entries present.
 *  - static: what a pinning driver does at ibv_reg_mr time: the memory is
 *            mlock()ed (populated) and every IO page table entry is set
 *            present at registration. npfd is not involved; this is the
 *            baseline.
 *  - warm npf: an npf region whose pages were all faulted in once (CPU
 *            touch, then one device pass over it): the steady state of an
 *            unpinned but resident buffer, i.e. the present-page path.
 *
 * One process, two NICs: both engines run here, so a WR's completion time
 * is the whole device path (post, engine, wire, peer engine, ack).
 */
#ifndef NPF_BENCH_NIC_H
#define NPF_BENCH_NIC_H

#include <sys/mman.h>
#include <unistd.h>
#include "bench.h"
#include "npf.h"
#include "npf_nic.h"

#define BN_PAGE 4096UL
#define BN_MAX_QP 16

struct bn_ep {
	struct nic *nic;
	struct nic_pd *pd;
	struct nic_cq *cq;
	struct nic_qp *qp[BN_MAX_QP];
};

struct bn_pair {
	struct bn_ep a, b;
	int nqp;
};

struct bn_mem {
	char *buf;
	size_t len;
	struct nic_mr *mr;
	int region, device; /* npf kinds; 0 for static */
	struct npf_client *c;
};

/* An endpoint with nqp QPs; qp_flags: each QP's enum nic_qp_flags (NULL: all 0). */
static inline void bn_ep_open_flags(struct bn_ep *ep, int nqp, __u32 max_page_requests,
				    const __u32 *qp_flags)
{
	int i;

	ep->nic = nic_open(NULL);
	if (!ep->nic)
		bench_die("nic_open: %s", strerror(errno));
	ep->pd = nic_alloc_pd(ep->nic);
	ep->cq = nic_create_cq(ep->nic, 4096);
	if (!ep->pd || !ep->cq)
		bench_die("NIC PD/CQ: %s", strerror(errno));
	for (i = 0; i < nqp; i++) {
		NIC_OPTS(nic_qp_init_attr, qa, .send_cq = ep->cq, .recv_cq = ep->cq,
			 .max_send_wr = 1024, .max_recv_wr = 1024,
			 .max_page_requests = max_page_requests,
			 .flags = qp_flags ? qp_flags[i] : 0);

		ep->qp[i] = nic_create_qp(ep->pd, &qa);
		if (!ep->qp[i])
			bench_die("nic_create_qp: %s", strerror(errno));
	}
}

static inline void bn_ep_open(struct bn_ep *ep, int nqp, __u32 max_page_requests)
{
	bn_ep_open_flags(ep, nqp, max_page_requests, NULL);
}

/*
 * Two NICs, nqp connected QP pairs (A's qp[i] <-> B's qp[i]); qp_flags:
 * each pair's enum nic_qp_flags (NULL: all 0).
 */
static inline void bn_pair_open_flags(struct bn_pair *p, int nqp, const __u32 *qp_flags)
{
	int i;

	p->nqp = nqp;
	bn_ep_open_flags(&p->a, nqp, 0, qp_flags);
	bn_ep_open_flags(&p->b, nqp, 0, qp_flags);
	for (i = 0; i < nqp; i++) {
		struct nic_qp_info ia, ib;

		if (nic_qp_local_info(p->a.qp[i], &ia) || nic_qp_local_info(p->b.qp[i], &ib) ||
		    nic_qp_connect(p->a.qp[i], &ib) || nic_qp_connect(p->b.qp[i], &ia))
			bench_die("cannot connect QP pair %d", i);
	}
}

static inline void bn_pair_open(struct bn_pair *p, int nqp)
{
	bn_pair_open_flags(p, nqp, NULL);
}

/* Detach every device of ours first (npfd waits for the NICs' acks), then close. */
static inline void bn_pair_close(struct bn_pair *p, struct npf_client *c)
{
	struct npf_device_info *di;
	size_t n, i;

	if (c && !npf_client__device_list(c, &di, &n)) {
		for (i = 0; i < n; i++)
			if (di[i].tgid == (__u32)getpid())
				npf_client__detach_device(c, di[i].device_id);
		free(di);
	}
	nic_close(p->a.nic);
	nic_close(p->b.nic);
}

static inline void *bn_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		bench_die("mmap %zu bytes: %s", len, strerror(errno));
	return p;
}

#define BN_ACCESS_ALL (NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE | NIC_ACCESS_REMOTE_READ)

/* Set every IO page table entry of mr present (read + write): the pinning driver's job. */
static inline void bn_iopt_fill(struct nic_mr *mr)
{
	int fd = nic_mr_iopt_fd(mr);
	struct npf_iopt_header h;
	__u64 *pte, i;
	size_t size;
	void *map;

	if (pread(fd, &h, sizeof(h), 0) != sizeof(h) || h.magic != NPF_IOPT_MAGIC)
		bench_die("cannot read the MR's IO page table header");
	size = h.pte_offset + h.npages * 8;
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		bench_die("cannot map the MR's IO page table: %s", strerror(errno));
	pte = (__u64 *)((char *)map + h.pte_offset);
	for (i = 0; i < h.npages; i++)
		__atomic_store_n(&pte[i],
				 (NPF_PTE_PRESENT | NPF_PTE_READ | NPF_PTE_WRITE) +
					 (1ULL << NPF_PTE_VERSION_SHIFT),
				 __ATOMIC_RELEASE);
	munmap(map, size);
}

/*
 * Pinned memory as an ibverbs driver gives it: locked, populated, all
 * entries present. lock 0: the entries are present but the memory is not
 * locked (the caller pins or touches it itself, e.g. per message).
 */
static inline void bn_mem_static_lock(struct bn_mem *m, struct bn_ep *ep, size_t len, int lock)
{
	*m = (struct bn_mem){.buf = bn_map(len), .len = len};
	if (lock && mlock(m->buf, len))
		bench_die("mlock %zu bytes: %s", len, strerror(errno));
	memset(m->buf, 0x5a, len);
	m->mr = nic_reg_mr(ep->pd, m->buf, len, BN_ACCESS_ALL);
	if (!m->mr)
		bench_die("nic_reg_mr: %s", strerror(errno));
	bn_iopt_fill(m->mr);
}

static inline void bn_mem_static(struct bn_mem *m, struct bn_ep *ep, size_t len)
{
	bn_mem_static_lock(m, ep, len, 1);
}

/* An npf region over fresh memory (anonymous, or backed by fd at offset 0); nothing resident. */
static inline void bn_mem_register(struct bn_mem *m, struct npf_client *c, size_t len, int fd,
				   const char *name)
{
	NPF_OPTS(npf_region_opts, ro, .name = name);

	*m = (struct bn_mem){.buf = bn_map(len), .len = len, .c = c};
	if (fd >= 0) {
		ro.backing = NPF_BACKING_FILE;
		ro.backing_fd = fd;
	}
	m->region = npf_client__register(c, m->buf, len, &ro);
	if (m->region < 0)
		bench_die("npfd refused region %s (%zu bytes): %s", name, len,
			  npf_client__errmsg(c));
}

/*
 * Register m's buffer with ep's NIC and attach the MR to m's region: from
 * now on npfd alone maps its pages for the NIC (and maps at once the pages
 * it installs for CPU faults: touch a page before this to leave it resident
 * but unmapped, a minor fault for the NIC).
 */
static inline void bn_mem_attach(struct bn_mem *m, struct bn_ep *ep)
{
	m->mr = nic_reg_mr(ep->pd, m->buf, m->len, BN_ACCESS_ALL);
	if (!m->mr)
		bench_die("nic_reg_mr: %s", strerror(errno));
	m->device = npf_client__attach_device(m->c, (__u32)m->region, nic_mr_iopt_fd(m->mr));
	if (m->device < 0)
		bench_die("npfd refused to attach an MR of region %d: %s", m->region,
			  npf_client__errmsg(m->c));
	if (nic_mr_set_npf_id(m->mr, (__u32)m->device))
		bench_die("nic_mr_set_npf_id failed");
}

/* Both: an npf region, its MR attached to npfd. Nothing is resident and no entry is present. */
static inline void bn_mem_npf(struct bn_mem *m, struct npf_client *c, struct bn_ep *ep, size_t len,
			      int fd, const char *name)
{
	bn_mem_register(m, c, len, fd, name);
	bn_mem_attach(m, ep);
}

static inline void bn_mem_free(struct bn_mem *m)
{
	if (m->device > 0)
		npf_client__detach_device(m->c, (__u32)m->device);
	nic_dereg_mr(m->mr);
	if (m->region > 0)
		npf_client__unregister(m->c, (__u32)m->region);
	munmap(m->buf, m->len);
	*m = (struct bn_mem){0};
}

/* npfd's view of a device (page requests answered, raised->answered ns). */
static inline struct npf_device_info bn_device_info(struct npf_client *c, int device)
{
	struct npf_device_info *di, out = {0};
	size_t n, i;

	if (npf_client__device_list(c, &di, &n))
		bench_die("npfd device list: %s", npf_client__errmsg(c));
	for (i = 0; i < n; i++)
		if ((int)di[i].device_id == device)
			out = di[i];
	free(di);
	return out;
}

/* ---- work requests ----------------------------------------------------------- */

/* Post one signaled RDMA op on qp: local [laddr, +len) of lmr, remote raddr of rmr. */
static inline void bn_post(struct nic_qp *qp, enum nic_wr_opcode op, __u64 wr_id, void *laddr,
			   __u32 len, struct nic_mr *lmr, void *raddr, struct nic_mr *rmr)
{
	struct nic_sge sge = {(uintptr_t)laddr, len, nic_mr_lkey(lmr)};
	struct nic_send_wr wr = {.wr_id = wr_id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = NIC_SEND_SIGNALED,
				 .remote_addr = (uintptr_t)raddr,
				 .rkey = rmr ? nic_mr_rkey(rmr) : 0};
	int err = nic_post_send(qp, &wr, NULL);

	if (err)
		bench_die("nic_post_send: %s", strerror(-err));
}

static inline void bn_post_recv(struct nic_qp *qp, __u64 wr_id, void *buf, __u32 len,
				struct nic_mr *mr)
{
	struct nic_sge sge = {(uintptr_t)buf, len, nic_mr_lkey(mr)};
	struct nic_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1};

	if (nic_post_recv(qp, &wr, NULL))
		bench_die("nic_post_recv failed");
}

/*
 * Wait for one completion on cq: spin briefly (the latency benchmarks must
 * not measure futex wake-ups), then sleep. Dies on an error completion.
 */
static inline struct nic_wc bn_wait(struct nic_cq *cq)
{
	struct nic_wc wc;
	int spins = 0;

	for (;;) {
		if (nic_poll_cq(cq, 1, &wc) == 1)
			break;
		if (++spins > 20000 && nic_cq_wait(cq, 30000))
			bench_die("no completion within 30 s");
	}
	if (wc.status != NIC_WC_SUCCESS)
		bench_die("WR %llu completed with %s", (unsigned long long)wc.wr_id,
			  nic_wc_status_str(wc.status));
	return wc;
}

/* Run one op to completion and return its latency in ns. */
static inline uint64_t bn_op(struct bn_pair *p, int q, enum nic_wr_opcode op, void *laddr,
			     __u32 len, struct nic_mr *lmr, void *raddr, struct nic_mr *rmr)
{
	uint64_t t0 = bench_now_ns();

	bn_post(p->a.qp[q], op, 1, laddr, len, lmr, raddr, rmr);
	bn_wait(p->a.cq);
	return bench_now_ns() - t0;
}

/*
 * Fault every page of an npf MR on side A into npfd's view: the CPU touches
 * it (unless it is file-backed: reading it would be the same), then RDMA
 * READs over it from peer (a static MR of at least 4 MiB) let the device
 * see every page once, so that every entry is present afterwards.
 */
static inline void bn_warm(struct bn_pair *p, struct bn_mem *m, struct bn_mem *peer)
{
	size_t off, chunk = peer->len < (4UL << 20) ? peer->len : (4UL << 20);
	volatile char *v = m->buf;

	for (off = 0; off < m->len; off += BN_PAGE)
		v[off] = v[off];
	for (off = 0; off < m->len; off += chunk) {
		size_t n = m->len - off < chunk ? m->len - off : chunk;

		bn_op(p, 0, NIC_WR_RDMA_READ, m->buf + off, (__u32)n, m->mr, peer->buf, peer->mr);
	}
}

static inline struct npf_client *bn_connect(void)
{
	struct npf_client *c = npf_client__connect(NULL);

	if (!c)
		bench_die(
			"cannot connect to npfd at %s: %s (is npfd running? make bench starts one)",
			getenv("NPF_SOCKET") ? getenv("NPF_SOCKET") : NPF_DEFAULT_SOCKET,
			strerror(errno));
	return c;
}

#endif /* NPF_BENCH_NIC_H */
