// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The device: its engine thread, protection domains, memory regions and
 * their IO page tables, completion queues, queue-pair lifetime, posting.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "nic_internal.h"

__u64 nic_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

int nic_futex_wake(_Atomic __u32 *addr, bool shared)
{
	return syscall(SYS_futex, addr, FUTEX_WAKE | (shared ? 0 : FUTEX_PRIVATE_FLAG), INT32_MAX,
		       NULL, NULL, 0);
}

/* Tell the engine there is work; costs a syscall only when it sleeps. */
void nic_doorbell(struct nic *nic)
{
	atomic_fetch_add(&nic->doorbell, 1);
	if (atomic_load(&nic->sleeping))
		nic_futex_wake(&nic->doorbell, false);
}

struct nic_mr *nic_mr_lookup(struct nic *nic, __u32 key)
{
	struct nic_mr *mr = nic->mr[(key >> 8) % NIC_MAX_MR];

	return mr && mr->key == key ? mr : NULL;
}

struct nic_qp *nic_qp_lookup(struct nic *nic, __u32 qpn)
{
	__u32 i = qpn - NIC_QPN_BASE;

	if (i >= NIC_MAX_QP || !nic->qp[i] || nic->qp[i]->qpn != qpn)
		return NULL;
	return nic->qp[i];
}

/*
 * Control calls take the device lock between two engine passes: they
 * announce themselves so that a busy engine lets go instead of retaking
 * the (unfair) mutex at once.
 */
void nic_ctl_lock(struct nic *nic)
{
	atomic_fetch_add(&nic->ctl_waiting, 1);
	pthread_mutex_lock(&nic->lock);
	atomic_fetch_sub(&nic->ctl_waiting, 1);
}

/*
 * Between two passes: let waiting control calls have the device lock and,
 * with cpu, let every thread that is ready to run on this CPU run first.
 */
static void nic_engine_yield(struct nic *nic, bool cpu)
{
	if (!cpu && !atomic_load(&nic->ctl_waiting))
		return;
	pthread_mutex_unlock(&nic->lock);
	do
		sched_yield();
	while (atomic_load(&nic->ctl_waiting));
	pthread_mutex_lock(&nic->lock);
}

/* ---- engine ----------------------------------------------------------------- */

/* One pass over everything; returns how much work it did. */
static int nic_pass(struct nic *nic, __u64 *deadline)
{
	__u64 now = nic_now_ns();
	struct nic_mr *mr;
	struct nic_qp *qp;
	int i, work = 0;

	nic_for_each_mr(nic, i, mr)
		work += nic_poll_mr(nic, mr, now, deadline);
	if (nic->roce_fd >= 0)
		work += nic_roce_rx(nic);
	nic_for_each_qp(nic, i, qp)
		work += nic_qp_poll(qp, now, deadline);
	return work;
}

#define NIC_WAITV_MAX 128

/*
 * Announce (1) or end (0) a sleep to everyone who would have to wake the
 * engine: posters (doorbell), peer NICs (shm rings), npfd (IO page tables).
 * Each store is sequentially consistent: a full barrier before the engine
 * snapshots the words it will sleep on.
 */
static void nic_sleep_flags(struct nic *nic, __u32 v)
{
	struct nic_mr *mr;
	struct nic_qp *qp;
	int i;

	atomic_store(&nic->sleeping, v);
	nic_for_each_mr(nic, i, mr)
		__atomic_store_n(&mr->iopt->resp.nic_sleeping, v, __ATOMIC_SEQ_CST);
	nic_for_each_qp(nic, i, qp)
		if (qp->wire.type == NIC_WIRE_SHM && qp->wire.rx)
			atomic_store(&qp->wire.rx->sleeping, v);
}

static int nic_waitv_add(struct futex_waitv *w, int n, _Atomic __u32 *addr, bool shared)
{
	if (n >= NIC_WAITV_MAX)
		return n + 1; /* counted: tells the caller to poll instead */
	w[n].uaddr = (uintptr_t)addr;
	w[n].val = atomic_load(addr);
	w[n].flags = FUTEX_32 | (shared ? 0 : FUTEX_PRIVATE_FLAG);
	w[n].__reserved = 0;
	return n + 1;
}

/*
 * Collect every word whose change means work: the doorbell (posts, control
 * calls, UDP arrivals), each IO page table's response and invalidation
 * tails (npfd), each shared-memory receive ring's tail (the peer NIC).
 */
static int nic_collect_waits(struct nic *nic, struct futex_waitv *w)
{
	struct nic_mr *mr;
	struct nic_qp *qp;
	int i, n = 0;

	n = nic_waitv_add(w, n, &nic->doorbell, false);
	nic_for_each_mr(nic, i, mr) {
		n = nic_waitv_add(w, n, (_Atomic __u32 *)&mr->iopt->resp.tail, true);
		n = nic_waitv_add(w, n, (_Atomic __u32 *)&mr->iopt->inval.tail, true);
	}
	nic_for_each_qp(nic, i, qp)
		if (qp->wire.type == NIC_WIRE_SHM && qp->wire.rx)
			n = nic_waitv_add(w, n, &qp->wire.rx->tail, true);
	return n;
}

static void nic_idle_wait(struct futex_waitv *w, int n, __u64 deadline)
{
	struct timespec ts, *tsp = NULL;
	long r;

	if (n > NIC_WAITV_MAX) {
		/* too many words for one wait: poll the doorbell every millisecond */
		__u64 poll_at = nic_now_ns() + 1000000;

		if (!deadline || deadline > poll_at)
			deadline = poll_at;
		n = 1;
	}
	if (deadline) {
		ts.tv_sec = deadline / 1000000000ULL;
		ts.tv_nsec = deadline % 1000000000ULL;
		tsp = &ts;
	}
	r = syscall(SYS_futex_waitv, w, n, 0, tsp, CLOCK_MONOTONIC);
	if (r < 0 && errno == ENOSYS) {
		struct timespec rel = {0, 1000000};

		syscall(SYS_futex, (void *)(uintptr_t)w[0].uaddr, FUTEX_WAIT | FUTEX_PRIVATE_FLAG,
			(__u32)w[0].val, &rel, NULL, 0);
	}
}

/*
 * While a queue pair waits for a page response, the engine polls for it a
 * little before it sleeps: npfd answers within tens of microseconds, and
 * on a virtual machine waking a sleeping thread costs as much again (the
 * same trade npfd makes, daemon/resolve.c). Hardware polls too. But a
 * hardware NIC polls with its own silicon: this engine polls with a CPU,
 * so between two passes it gives that CPU to whatever else is ready to run
 * on it. Spinning on it kept them all waiting for the page: the peer's
 * engine (another QP's READ response), the application reaping another
 * QP's completion, npfd itself when the scheduler put it there (bench/hol.c
 * with the NIC's threads on one CPU: a READ on another QP completed after
 * the faulting one, at 4x its time without a fault; 1.05x with the yield).
 */
#define NIC_PR_POLL_NS (100 * 1000)
/*
 * For the first NIC_PR_SPIN_NS it does not yield: a polling npfd answers
 * within 1-2 µs, and a yield then only adds latency (bench/nic_fault: minor
 * fault p50 0.91-0.93x the CPU fault with it, 0.95-0.96x yielding at once).
 */
#define NIC_PR_SPIN_NS (10 * 1000)

static bool nic_awaits_pages(struct nic *nic)
{
	struct nic_qp *qp;
	int i;

	nic_for_each_qp(nic, i, qp)
		if (qp->npr)
			return true;
	return false;
}

static void *nic_engine(void *arg)
{
	struct nic *nic = arg;
	struct futex_waitv w[NIC_WAITV_MAX];
	__u64 last_work = 0;

	pthread_mutex_lock(&nic->lock);
	while (!atomic_load(&nic->stop)) {
		__u64 deadline = 0;
		int n;

		if (nic_pass(nic, &deadline)) {
			last_work = nic_now_ns();
			nic_engine_yield(nic, false);
			continue;
		}
		if (nic_awaits_pages(nic)) {
			__u64 waited = nic_now_ns() - last_work;

			if (waited < NIC_PR_POLL_NS) {
				nic_engine_yield(nic, waited >= NIC_PR_SPIN_NS);
				continue;
			}
		}
		/*
		 * Nothing to do: announce sleep, snapshot the words, and look
		 * once more. A change after the snapshot fails the wait at once;
		 * a change before it is seen by the second pass.
		 */
		nic_sleep_flags(nic, 1);
		n = nic_collect_waits(nic, w);
		if (nic_pass(nic, &deadline) || atomic_load(&nic->stop)) {
			nic_sleep_flags(nic, 0);
			continue;
		}
		pthread_mutex_unlock(&nic->lock);
		nic_idle_wait(w, n, deadline);
		pthread_mutex_lock(&nic->lock);
		nic_sleep_flags(nic, 0);
	}
	pthread_mutex_unlock(&nic->lock);
	return NULL;
}

struct nic *nic_open(const struct nic_opts *opts)
{
	struct nic *nic;
	int err;

	nic = calloc(1, sizeof(*nic));
	if (!nic)
		return NULL;
	if (opts)
		memcpy(&nic->opts, opts, opts->sz < sizeof(*opts) ? opts->sz : sizeof(*opts));
	nic->opts.sz = sizeof(nic->opts);
	if (!nic->opts.wire)
		nic->opts.wire = NIC_WIRE_SHM;
	if (nic->opts.wire != NIC_WIRE_SHM && nic->opts.wire != NIC_WIRE_UDP &&
	    nic->opts.wire != NIC_WIRE_ROCE) {
		err = EINVAL;
		goto err_free;
	}
	nic->udp_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (nic->opts.udp_addr && inet_pton(AF_INET, nic->opts.udp_addr, &nic->udp_addr) != 1) {
		err = EINVAL;
		goto err_free;
	}
	nic->opts.udp_addr = NULL; /* not kept: the caller owns the string */
	nic->epfd = nic->stop_efd = nic->roce_fd = -1;
	nic->key_salt = (__u32)nic_now_ns();
	pthread_mutex_init(&nic->lock, NULL);
	if (nic->opts.wire == NIC_WIRE_ROCE) {
		err = -nic_roce_open(nic);
		if (err)
			goto err_free;
	}
	if (nic->opts.wire != NIC_WIRE_SHM) {
		err = -nic_udp_thread_start(nic);
		if (err)
			goto err_roce;
	}
	err = pthread_create(&nic->engine, NULL, nic_engine, nic);
	if (err) {
		nic_udp_thread_stop(nic);
		goto err_roce;
	}
	return nic;

err_roce:
	nic_roce_close(nic);
err_free:
	free(nic);
	errno = err;
	return NULL;
}

void nic_close(struct nic *nic)
{
	struct nic_mr *mr;
	struct nic_qp *qp;
	int i;

	if (!nic)
		return;
	atomic_store(&nic->stop, 1);
	nic_doorbell(nic);
	nic_futex_wake(&nic->doorbell, false);
	pthread_join(nic->engine, NULL);
	nic_udp_thread_stop(nic);
	nic_for_each_qp(nic, i, qp)
		nic_destroy_qp(qp);
	nic_for_each_mr(nic, i, mr)
		nic_dereg_mr(mr);
	nic_roce_close(nic);
	free(nic);
}

int nic_query_stats(struct nic *nic, struct nic_stats *stats, size_t sz)
{
	if (!nic || !stats)
		return -EINVAL;
	nic_ctl_lock(nic);
	memcpy(stats, &nic->stats, sz < sizeof(nic->stats) ? sz : sizeof(nic->stats));
	pthread_mutex_unlock(&nic->lock);
	return 0;
}

/* ---- protection domains ---------------------------------------------------- */

struct nic_pd *nic_alloc_pd(struct nic *nic)
{
	struct nic_pd *pd;

	if (!nic) {
		errno = EINVAL;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (pd)
		pd->nic = nic;
	return pd;
}

int nic_dealloc_pd(struct nic_pd *pd)
{
	int refs;

	if (!pd)
		return -EINVAL;
	nic_ctl_lock(pd->nic);
	refs = pd->refs;
	pthread_mutex_unlock(&pd->nic->lock);
	if (refs)
		return -EBUSY;
	free(pd);
	return 0;
}

/* ---- memory regions ----------------------------------------------------------- */

static int nic_iopt_create(struct nic_mr *mr)
{
	size_t hdr = (sizeof(struct npf_iopt_header) + 63) & ~(size_t)63;
	struct npf_iopt_header *h;
	int fd, err;

	mr->iopt_size = hdr + mr->npages * sizeof(__u64);
	fd = memfd_create("npf-iopt", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, mr->iopt_size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		err = -errno;
		close(fd);
		return err;
	}
	h = mmap(NULL, mr->iopt_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED) {
		err = -errno;
		close(fd);
		return err;
	}
	h->start = mr->start;
	h->npages = mr->npages;
	h->pte_offset = hdr;
	h->owner_tgid = getpid();
	h->version = NPF_IOPT_VERSION;
	/* magic last: a reader that sees it sees a complete header */
	__atomic_store_n(&h->magic, NPF_IOPT_MAGIC, __ATOMIC_RELEASE);
	mr->iopt_fd = fd;
	mr->iopt = h;
	mr->pte = (__u64 *)((char *)h + hdr);
	return 0;
}

struct nic_mr *nic_reg_mr(struct nic_pd *pd, void *addr, size_t len, int access)
{
	struct nic *nic;
	struct nic_mr *mr;
	__u64 a = (uintptr_t)addr;
	int i, err;

	if (!pd || !len || (access & ~7) || a + len < a) {
		errno = EINVAL;
		return NULL;
	}
	nic = pd->nic;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return NULL;
	mr->nic = nic;
	mr->pd = pd;
	mr->access = access;
	mr->addr = a;
	mr->len = len;
	mr->start = a & ~(PAGE_SZ - 1);
	mr->npages = ((a + len + PAGE_SZ - 1) & ~(PAGE_SZ - 1)) - mr->start;
	mr->npages >>= PAGE_SH;
	err = nic_iopt_create(mr);
	if (err)
		goto err_free;

	nic_ctl_lock(nic);
	for (i = 0; i < NIC_MAX_MR; i++)
		if (!nic->mr[i])
			break;
	if (i == NIC_MAX_MR) {
		pthread_mutex_unlock(&nic->lock);
		err = -ENOSPC;
		goto err_unmap;
	}
	nic->key_salt = nic->key_salt * 1103515245 + 12345;
	mr->key = ((__u32)i << 8) | ((nic->key_salt >> 16) & 0xff);
	nic->mr[i] = mr;
	if (i >= nic->mr_end)
		nic->mr_end = i + 1;
	pd->refs++;
	pthread_mutex_unlock(&nic->lock);
	nic_doorbell(nic); /* the engine waits on the new rings from now on */
	return mr;

err_unmap:
	munmap(mr->iopt, mr->iopt_size);
	close(mr->iopt_fd);
err_free:
	free(mr);
	errno = -err;
	return NULL;
}

/*
 * An implicit MR: an MR of one byte at address 0 (so that it has a key, an
 * IO page table the engine may look at, and no memory a local SGE could
 * reach), flagged implicit: remote requests through it go to its children.
 */
struct nic_mr *nic_reg_mr_implicit(struct nic_pd *pd, int access)
{
	struct nic_mr *mr = nic_reg_mr(pd, NULL, 1, access);

	if (mr) {
		nic_ctl_lock(mr->nic);
		mr->implicit = true;
		mr->len = 0;
		pthread_mutex_unlock(&mr->nic->lock);
	}
	return mr;
}

int nic_mr_add_child(struct nic_mr *parent, struct nic_mr *child)
{
	if (!parent || !child || !parent->implicit || child->implicit ||
	    child->nic != parent->nic || child->pd != parent->pd)
		return -EINVAL;
	nic_ctl_lock(parent->nic);
	if (child->parent) {
		pthread_mutex_unlock(&parent->nic->lock);
		return -EBUSY;
	}
	child->parent = parent;
	child->sibling = parent->children;
	parent->children = child;
	pthread_mutex_unlock(&parent->nic->lock);
	nic_doorbell(parent->nic); /* an RNR NAKed peer may be back already */
	return 0;
}

int nic_mr_refuse(struct nic_mr *parent, __u64 addr, __u64 len)
{
	if (!parent || !parent->implicit)
		return -EINVAL;
	nic_ctl_lock(parent->nic);
	parent->refused_addr = addr;
	parent->refused_len = len;
	pthread_mutex_unlock(&parent->nic->lock);
	return 0;
}

static bool range_overlaps(__u64 a, __u64 alen, __u64 b, __u64 blen)
{
	return alen && blen && a <= b + (blen - 1) && b <= a + (alen - 1);
}

/*
 * Engine side: the child of an implicit MR holding [vaddr, vaddr + len),
 * or NULL; with *miss set when the application may still add one (it is
 * told once per range, again after NIC_PR_REISSUE_MS).
 */
struct nic_mr *nic_mr_child(struct nic_mr *parent, __u64 vaddr, __u64 len, bool *miss)
{
	struct nic_mr *c;
	__u64 now;

	for (c = parent->children; c; c = c->sibling)
		if (mr_contains(c, vaddr, len))
			return c;
	if (!len || vaddr + len < vaddr || !miss ||
	    range_overlaps(vaddr, len, parent->refused_addr, parent->refused_len))
		return NULL;
	*miss = true;
	now = nic_now_ns();
	if (parent->miss_addr != vaddr || parent->miss_len != len ||
	    now - parent->miss_ns > NIC_PR_REISSUE_MS * 1000000ULL) {
		struct nic_event ev = {
			.type = NIC_EVENT_MR_MISS, .mr = parent, .addr = vaddr, .len = len};

		parent->miss_addr = vaddr;
		parent->miss_len = len;
		parent->miss_ns = now;
		if (parent->nic->opts.event_fn)
			parent->nic->opts.event_fn(parent->nic->opts.event_arg, &ev);
	}
	return NULL;
}

int nic_dereg_mr(struct nic_mr *mr)
{
	struct nic_qp *qp;
	struct nic *nic;
	struct nic_mr **pp, *c;
	int i;

	if (!mr)
		return -EINVAL;
	nic = mr->nic;
	nic_ctl_lock(nic);
	if (mr->parent)
		for (pp = &mr->parent->children; *pp; pp = &(*pp)->sibling)
			if (*pp == mr) {
				*pp = mr->sibling;
				break;
			}
	for (c = mr->children; c; c = c->sibling)
		c->parent = NULL;
	nic->mr[(mr->key >> 8) % NIC_MAX_MR] = NULL;
	while (nic->mr_end && !nic->mr[nic->mr_end - 1])
		nic->mr_end--;
	nic_for_each_qp(nic, i, qp)
		nic_qp_drop_prs(qp, mr->key);
	mr->pd->refs--;
	pthread_mutex_unlock(&nic->lock);
	nic_doorbell(nic);
	munmap(mr->iopt, mr->iopt_size);
	close(mr->iopt_fd);
	free(mr);
	return 0;
}

__u32 nic_mr_lkey(const struct nic_mr *mr)
{
	return mr->key;
}

__u32 nic_mr_rkey(const struct nic_mr *mr)
{
	return mr->key;
}

int nic_mr_iopt_fd(const struct nic_mr *mr)
{
	return mr ? mr->iopt_fd : -EINVAL;
}

int nic_mr_map_pinned(struct nic_mr *mr)
{
	__u64 i;

	if (!mr)
		return -EINVAL;
	for (i = 0; i < mr->npages; i++) {
		__u64 old = __atomic_load_n(&mr->pte[i], __ATOMIC_RELAXED), new;

		do
			new = (old | NPF_PTE_PRESENT | NPF_PTE_READ | NPF_PTE_WRITE) +
			      (1ULL << NPF_PTE_VERSION_SHIFT);
		while (!__atomic_compare_exchange_n(&mr->pte[i], &old, new, false, __ATOMIC_RELEASE,
						    __ATOMIC_RELAXED));
	}
	return 0;
}

static bool pte_ok(__u64 pte, int write)
{
	__u64 want = NPF_PTE_PRESENT | NPF_PTE_READ | (write ? NPF_PTE_WRITE : 0);

	return (pte & want) == want;
}

int nic_mr_prefetch(struct nic_mr *mr, __u64 addr, __u64 len, int write, int resident_only,
		    int flush_ms)
{
	static _Atomic __u32 seq;
	__u64 first, last, i, run = UINT64_MAX, end_ns;
	unsigned char *vec = NULL;

	if (!mr || !len || !mr_contains(mr, addr, len))
		return -EINVAL;
	if (!mr->npf_id)
		return 0;
	first = ((addr & ~(__u64)(PAGE_SZ - 1)) - mr->start) >> PAGE_SH;
	last = ((addr + len - 1) & ~(__u64)(PAGE_SZ - 1)) - mr->start;
	last >>= PAGE_SH;
	if (resident_only) {
		vec = malloc(last - first + 1);
		if (!vec)
			return -ENOMEM;
		if (mincore((void *)(uintptr_t)(mr->start + (first << PAGE_SH)),
			    (last - first + 1) << PAGE_SH, vec)) {
			free(vec);
			return -errno;
		}
	}
	/* one request per run of wanted pages; cookie QPN 0: no QP waits for it */
	for (i = first; i <= last + 1; i++) {
		bool want = i <= last &&
			    !pte_ok(__atomic_load_n(&mr->pte[i], __ATOMIC_ACQUIRE), write) &&
			    (!vec || (vec[i - first] & 1));

		if (want && run == UINT64_MAX)
			run = i;
		if (!want && run != UINT64_MAX) {
			struct npf_page_request req = {
				.magic = NPF_IOPT_MAGIC,
				.mr_id = mr->npf_id,
				.addr = mr->start + (run << PAGE_SH),
				.len = (i - run) << PAGE_SH,
				.cookie = atomic_fetch_add(&seq, 1) + 1,
				.npages = (__u32)(i - run),
				.access = write ? NPF_ACCESS_WRITE : NPF_ACCESS_READ,
			};

			npf_nic_fault_report(&req);
			run = UINT64_MAX;
		}
	}
	if (flush_ms < 0) {
		free(vec);
		return 0;
	}
	end_ns = nic_now_ns() + (__u64)flush_ms * 1000000;
	for (i = first; i <= last; i++) {
		if (vec && !(vec[i - first] & 1))
			continue;
		while (!pte_ok(__atomic_load_n(&mr->pte[i], __ATOMIC_ACQUIRE), write)) {
			struct timespec ts = {0, 50000};

			if (nic_now_ns() > end_ns) {
				free(vec);
				return -ETIMEDOUT;
			}
			nanosleep(&ts, NULL);
		}
	}
	free(vec);
	return 0;
}

int nic_mr_set_npf_id(struct nic_mr *mr, __u32 id)
{
	if (!mr)
		return -EINVAL;
	nic_ctl_lock(mr->nic);
	mr->npf_id = id;
	pthread_mutex_unlock(&mr->nic->lock);
	return 0;
}

/* ---- completion queues ---------------------------------------------------------- */

static __u32 roundup_pow2(__u32 v)
{
	__u32 r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

struct nic_cq *nic_create_cq(struct nic *nic, int cqe)
{
	struct nic_cq *cq;

	if (!nic || cqe <= 0 || cqe > (1 << 22)) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	cq->nic = nic;
	cq->size = roundup_pow2(cqe);
	cq->ring = calloc(cq->size, sizeof(*cq->ring));
	if (!cq->ring) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	return cq;
}

int nic_destroy_cq(struct nic_cq *cq)
{
	int refs;

	if (!cq)
		return -EINVAL;
	nic_ctl_lock(cq->nic);
	refs = cq->refs;
	pthread_mutex_unlock(&cq->nic->lock);
	if (refs)
		return -EBUSY;
	free(cq->ring);
	free(cq);
	return 0;
}

/* Engine side: hand an asynchronous event to the application's handler. */
void nic_event(struct nic *nic, enum nic_event_type type, struct nic_qp *qp, struct nic_cq *cq)
{
	struct nic_event ev = {.type = type, .qp = qp, .cq = cq};

	if (nic->opts.event_fn)
		nic->opts.event_fn(nic->opts.event_arg, &ev);
}

/*
 * Engine side. A full CQ loses the completion and counts it, as an
 * overrun (-ENOSPC): the CQ is in error (NIC_EVENT_CQ_ERR, once).
 */
int nic_cq_push(struct nic_cq *cq, const struct nic_wc *wc)
{
	__u32 prod = atomic_load_explicit(&cq->prod, memory_order_relaxed);

	if (prod - atomic_load_explicit(&cq->cons, memory_order_acquire) >= cq->size) {
		cq->nic->stats.cq_overruns++;
		if (!cq->overran) {
			cq->overran = true;
			nic_event(cq->nic, NIC_EVENT_CQ_ERR, NULL, cq);
		}
		return -ENOSPC;
	}
	cq->ring[prod & (cq->size - 1)] = *wc;
	/* seq_cst: the store must be visible before we look for waiters */
	atomic_store(&cq->prod, prod + 1);
	if (atomic_load(&cq->waiters))
		nic_futex_wake(&cq->prod, false);
	if (atomic_load_explicit(&cq->armed, memory_order_relaxed) &&
	    atomic_exchange(&cq->armed, 0)) {
		ssize_t n = write(cq->notify_fd, &cq->notify_cookie, sizeof(cq->notify_cookie));

		(void)n; /* a full pipe: events are pending anyway */
	}
	return 0;
}

int nic_cq_arm(struct nic_cq *cq, int fd, __u64 cookie)
{
	if (!cq)
		return -EINVAL;
	if (fd < 0) {
		atomic_store(&cq->armed, 0);
		return 0;
	}
	cq->notify_fd = fd;
	cq->notify_cookie = cookie;
	atomic_store(&cq->armed, 1);
	return 0;
}

int nic_poll_cq(struct nic_cq *cq, int n, struct nic_wc *wc)
{
	__u32 cons = atomic_load_explicit(&cq->cons, memory_order_relaxed);
	__u32 prod = atomic_load_explicit(&cq->prod, memory_order_acquire);
	int got = 0;

	while (got < n && cons != prod) {
		wc[got++] = cq->ring[cons & (cq->size - 1)];
		cons++;
	}
	atomic_store_explicit(&cq->cons, cons, memory_order_release);
	return got;
}

int nic_cq_wait(struct nic_cq *cq, int timeout_ms)
{
	__u64 end = timeout_ms >= 0 ? nic_now_ns() + (__u64)timeout_ms * 1000000 : 0;
	int ret = 0;

	atomic_fetch_add(&cq->waiters, 1);
	for (;;) {
		__u32 prod = atomic_load(&cq->prod);
		struct timespec ts, *tsp = NULL;

		if (prod != atomic_load(&cq->cons))
			break;
		if (end) {
			__u64 now = nic_now_ns();

			if (now >= end) {
				ret = -ETIMEDOUT;
				break;
			}
			ts.tv_sec = (end - now) / 1000000000ULL;
			ts.tv_nsec = (end - now) % 1000000000ULL;
			tsp = &ts;
		}
		syscall(SYS_futex, &cq->prod, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, prod, tsp, NULL, 0);
	}
	atomic_fetch_sub(&cq->waiters, 1);
	return ret;
}

const char *nic_wc_status_str(enum nic_wc_status status)
{
	static const char *const names[] = {
		[NIC_WC_SUCCESS] = "success",
		[NIC_WC_LOC_LEN_ERR] = "local length error",
		[NIC_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[NIC_WC_LOC_PROT_ERR] = "local protection error",
		[NIC_WC_WR_FLUSH_ERR] = "WR flushed",
		[NIC_WC_LOC_ACCESS_ERR] = "local access error",
		[NIC_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[NIC_WC_REM_ACCESS_ERR] = "remote access error",
		[NIC_WC_REM_OP_ERR] = "remote operation error",
		[NIC_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[NIC_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
	};

	if ((unsigned int)status >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[status];
}

/* ---- queue pairs ------------------------------------------------------------------ */

struct nic_qp *nic_create_qp(struct nic_pd *pd, const struct nic_qp_init_attr *attr)
{
	struct nic *nic;
	struct nic_qp *qp;
	int i, err;

	if (!pd || !attr || !attr->send_cq || !attr->recv_cq) {
		errno = EINVAL;
		return NULL;
	}
	nic = pd->nic;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	memcpy(&qp->attr, attr, attr->sz < sizeof(*attr) ? attr->sz : sizeof(*attr));
	qp->attr.sz = sizeof(qp->attr);
	if (!qp->attr.max_send_wr)
		qp->attr.max_send_wr = 256;
	if (!qp->attr.max_recv_wr)
		qp->attr.max_recv_wr = 256;
	if (!qp->attr.max_page_requests)
		qp->attr.max_page_requests = NIC_DEFAULT_MAX_PAGE_REQUESTS;
	if (qp->attr.max_page_requests > NIC_MAX_PR)
		qp->attr.max_page_requests = NIC_MAX_PR;
	if (!qp->attr.rnr_timer_us)
		qp->attr.rnr_timer_us = 100;
	if (!qp->attr.timeout_us)
		qp->attr.timeout_us = 10000;
	if (!qp->attr.retry_cnt)
		qp->attr.retry_cnt = 7;
	if (!qp->attr.rnr_retry)
		qp->attr.rnr_retry = 7;
	if (qp->attr.max_send_wr > 65536 || qp->attr.max_recv_wr > 65536 ||
	    (qp->attr.flags & ~NIC_QP_RELAXED_ORDERING)) {
		err = EINVAL;
		goto err_free;
	}
	qp->nic = nic;
	qp->pd = pd;
	qp->scq = attr->send_cq;
	qp->rcq = attr->recv_cq;
	qp->mtu = NIC_DEFAULT_MTU;
	qp->sq_size = roundup_pow2(qp->attr.max_send_wr);
	qp->rq_size = roundup_pow2(qp->attr.max_recv_wr);
	qp->sq = calloc(qp->sq_size, sizeof(*qp->sq));
	qp->ord = calloc(qp->sq_size, sizeof(*qp->ord));
	qp->rq = calloc(qp->rq_size, sizeof(*qp->rq));
	qp->wire.fd = -1;
	pthread_mutex_init(&qp->post_lock, NULL);
	if (!qp->sq || !qp->ord || !qp->rq) {
		err = ENOMEM;
		goto err_free;
	}
	qp->next_psn = (__u32)nic_now_ns() & 0xffffff;
	qp->una = qp->next_psn;
	qp->tx_high = qp->next_psn;

	nic_ctl_lock(nic);
	for (i = 0; i < NIC_MAX_QP; i++)
		if (!nic->qp[i])
			break;
	if (i == NIC_MAX_QP) {
		pthread_mutex_unlock(&nic->lock);
		err = ENOSPC;
		goto err_free;
	}
	qp->qpn = NIC_QPN_BASE + i;
	err = -nic_wire_init(nic, qp);
	if (err) {
		pthread_mutex_unlock(&nic->lock);
		goto err_free;
	}
	nic->qp[i] = qp;
	if (i >= nic->qp_end)
		nic->qp_end = i + 1;
	pd->refs++;
	qp->scq->refs++;
	qp->rcq->refs++;
	pthread_mutex_unlock(&nic->lock);
	return qp;

err_free:
	free(qp->sq);
	free(qp->ord);
	free(qp->rq);
	free(qp);
	errno = err;
	return NULL;
}

int nic_destroy_qp(struct nic_qp *qp)
{
	struct nic *nic;

	if (!qp)
		return -EINVAL;
	nic = qp->nic;
	nic_ctl_lock(nic);
	nic->qp[qp->qpn - NIC_QPN_BASE] = NULL;
	while (nic->qp_end && !nic->qp[nic->qp_end - 1])
		nic->qp_end--;
	nic_wire_fini(nic, qp);
	qp->pd->refs--;
	qp->scq->refs--;
	qp->rcq->refs--;
	pthread_mutex_unlock(&nic->lock);
	free(qp->sq);
	free(qp->ord);
	free(qp->rq);
	free(qp);
	return 0;
}

__u32 nic_qp_num(const struct nic_qp *qp)
{
	return qp->qpn;
}

int nic_qp_local_info(const struct nic_qp *qp, struct nic_qp_info *info)
{
	if (!qp || !info)
		return -EINVAL;
	memset(info, 0, sizeof(*info));
	info->magic = NIC_QP_INFO_MAGIC;
	info->version = 1;
	info->wire = qp->wire.type;
	info->qpn = qp->qpn;
	info->psn = qp->next_psn;
	info->mtu = qp->mtu;
	if (qp->wire.type == NIC_WIRE_ROCE) {
		info->udp_addr = qp->nic->udp_addr.s_addr;
		info->udp_port = qp->nic->roce_port;
	} else if (qp->wire.type == NIC_WIRE_UDP) {
		info->udp_addr = qp->wire.local.sin_addr.s_addr;
		info->udp_port = qp->wire.local.sin_port;
	} else {
		memcpy(info->shm_name, qp->wire.rx_name, sizeof(info->shm_name));
	}
	return 0;
}

int nic_qp_set_psn(struct nic_qp *qp, __u32 psn)
{
	int err = 0;

	if (!qp)
		return -EINVAL;
	nic_ctl_lock(qp->nic);
	/* connected but nothing posted yet (RTR -> RTS) is still in time */
	if (qp->state == QPS_ERR ||
	    (qp->state == QPS_RTS && (atomic_load(&qp->sq_prod) != atomic_load(&qp->sq_head) ||
				      qp->sq_next != qp->sq_head || qp->tx_high != qp->next_psn))) {
		err = -EISCONN;
	} else {
		qp->next_psn = psn & 0xffffff;
		qp->una = qp->next_psn;
		qp->tx_high = qp->next_psn;
	}
	pthread_mutex_unlock(&qp->nic->lock);
	return err;
}

int nic_qp_set_timers(struct nic_qp *qp, const struct nic_qp_init_attr *attr, unsigned int mask)
{
	if (!qp || !attr ||
	    (mask & ~(NIC_QP_TIMEOUT | NIC_QP_RETRY_CNT | NIC_QP_RNR_RETRY | NIC_QP_RNR_TIMER)))
		return -EINVAL;
	if (((mask & NIC_QP_TIMEOUT) && !attr->timeout_us) ||
	    ((mask & NIC_QP_RNR_RETRY) && attr->rnr_retry > 7))
		return -EINVAL;
	nic_ctl_lock(qp->nic);
	if (mask & NIC_QP_TIMEOUT)
		qp->attr.timeout_us = attr->timeout_us;
	if (mask & NIC_QP_RETRY_CNT)
		qp->attr.retry_cnt = attr->retry_cnt;
	if (mask & NIC_QP_RNR_RETRY)
		qp->attr.rnr_retry = attr->rnr_retry;
	if (mask & NIC_QP_RNR_TIMER)
		qp->attr.rnr_timer_us = attr->rnr_timer_us;
	pthread_mutex_unlock(&qp->nic->lock);
	return 0;
}

int nic_qp_in_error(const struct nic_qp *qp)
{
	return qp && __atomic_load_n(&qp->state, __ATOMIC_RELAXED) == QPS_ERR;
}

int nic_qp_connect(struct nic_qp *qp, const struct nic_qp_info *remote)
{
	int err;

	if (!qp || !remote)
		return -EINVAL;
	if (remote->magic != NIC_QP_INFO_MAGIC || remote->version != 1)
		return -EPROTO;
	if (remote->wire != qp->wire.type)
		return -EPROTONOSUPPORT;
	if (remote->mtu < 256)
		return -EINVAL;
	nic_ctl_lock(qp->nic);
	if (qp->state != QPS_INIT) {
		pthread_mutex_unlock(&qp->nic->lock);
		return -EISCONN;
	}
	err = nic_wire_connect(qp, remote);
	if (!err) {
		qp->peer_qpn = remote->qpn;
		qp->epsn = remote->psn;
		if (remote->mtu < qp->mtu)
			qp->mtu = remote->mtu;
		qp->state = QPS_RTS;
	}
	pthread_mutex_unlock(&qp->nic->lock);
	nic_doorbell(qp->nic);
	return err;
}

static int nic_full_io(int fd, void *buf, size_t len, bool wr)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = wr ? write(fd, (char *)buf + done, len - done) :
				 read(fd, (char *)buf + done, len - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ECONNRESET;
		done += r;
	}
	return 0;
}

int nic_qp_connect_fd(struct nic_qp *qp, int sockfd)
{
	struct nic_qp_info mine, theirs;
	int err;

	err = nic_qp_local_info(qp, &mine);
	if (!err)
		err = nic_full_io(sockfd, &mine, sizeof(mine), true);
	if (!err)
		err = nic_full_io(sockfd, &theirs, sizeof(theirs), false);
	if (!err)
		err = nic_qp_connect(qp, &theirs);
	return err;
}

/* ---- posting ------------------------------------------------------------------------ */

int nic_post_send(struct nic_qp *qp, struct nic_send_wr *wr, struct nic_send_wr **bad_wr)
{
	int err = 0;

	if (!qp)
		return -EINVAL;
	pthread_mutex_lock(&qp->post_lock);
	for (; wr; wr = wr->next) {
		__u32 prod = atomic_load_explicit(&qp->sq_prod, memory_order_relaxed);
		struct nic_swqe *w;
		int i;

		if (qp->state == QPS_INIT || wr->num_sge < 0 || wr->num_sge > NIC_MAX_SGE ||
		    (wr->num_sge && !wr->sg_list) || (unsigned int)wr->opcode > NIC_WR_RDMA_READ) {
			err = -EINVAL;
			break;
		}
		if (prod - atomic_load_explicit(&qp->sq_head, memory_order_acquire) >=
		    qp->sq_size) {
			err = -ENOMEM;
			break;
		}
		w = &qp->sq[prod & (qp->sq_size - 1)];
		memset(w, 0, sizeof(*w));
		w->wr_id = wr->wr_id;
		w->opcode = wr->opcode;
		w->flags = wr->send_flags | (qp->attr.sq_sig_all ? NIC_SEND_SIGNALED : 0);
		w->num_sge = wr->num_sge;
		for (i = 0; i < wr->num_sge; i++) {
			w->sge[i] = wr->sg_list[i];
			w->len += wr->sg_list[i].length;
		}
		w->remote_addr = wr->remote_addr;
		w->rkey = wr->rkey;
		atomic_store_explicit(&qp->sq_prod, prod + 1, memory_order_release);
	}
	pthread_mutex_unlock(&qp->post_lock);
	if (err && bad_wr)
		*bad_wr = wr;
	nic_doorbell(qp->nic);
	return err;
}

int nic_post_recv(struct nic_qp *qp, struct nic_recv_wr *wr, struct nic_recv_wr **bad_wr)
{
	int err = 0;

	if (!qp)
		return -EINVAL;
	pthread_mutex_lock(&qp->post_lock);
	for (; wr; wr = wr->next) {
		__u32 prod = atomic_load_explicit(&qp->rq_prod, memory_order_relaxed);
		struct nic_rwqe *w;
		int i;

		if (wr->num_sge < 0 || wr->num_sge > NIC_MAX_SGE || (wr->num_sge && !wr->sg_list)) {
			err = -EINVAL;
			break;
		}
		if (prod - atomic_load_explicit(&qp->rq_head, memory_order_acquire) >=
		    qp->rq_size) {
			err = -ENOMEM;
			break;
		}
		w = &qp->rq[prod & (qp->rq_size - 1)];
		w->wr_id = wr->wr_id;
		w->num_sge = wr->num_sge;
		for (i = 0; i < wr->num_sge; i++)
			w->sge[i] = wr->sg_list[i];
		atomic_store_explicit(&qp->rq_prod, prod + 1, memory_order_release);
	}
	pthread_mutex_unlock(&qp->post_lock);
	if (err && bad_wr)
		*bad_wr = wr;
	nic_doorbell(qp->nic);
	return err;
}
