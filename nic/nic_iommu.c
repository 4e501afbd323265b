// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The soft IOMMU: every page the device touches is checked in the MR's IO
 * page table. A present page with the right permission costs one load (and
 * an atomic OR the first time it is accessed or dirtied); anything else
 * becomes a page request group, one per WR, reported through
 * npf_nic_fault_report() and answered by npfd in the IOPT's response ring.
 * Invalidations from npfd are acknowledged here too.
 */
#include <errno.h>
#include <string.h>
#include "nic_internal.h"

/*
 * The fault-report site. Its first instruction is the 5-byte nop
 * 0f 1f 44 00 00, which the kernel can turn into a cheap uprobe; then it
 * returns. Written in assembly so that no prologue or code motion can put
 * anything before the nop. As an external call, the compiler must have
 * *req fully written to memory before calling it, which is what the uprobe
 * reads.
 */
#if defined(__x86_64__)
__asm__("	.text\n"
	"	.globl npf_nic_fault_report\n"
	"	.type npf_nic_fault_report, @function\n"
	"	.p2align 4\n"
	"npf_nic_fault_report:\n"
	"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
	"	ret\n"
	"	.size npf_nic_fault_report, .-npf_nic_fault_report\n");
#else
__attribute__((noinline, used)) void npf_nic_fault_report(const struct npf_page_request *req)
{
	__asm__ volatile("" : : "r"(req) : "memory");
}
#endif

static inline bool pte_ok(__u64 *pte, __u64 need, __u64 mark)
{
	__u64 v = __atomic_load_n(pte, __ATOMIC_ACQUIRE);

	if ((v & need) != need)
		return false;
	if ((v & mark) != mark)
		__atomic_fetch_or(pte, mark, __ATOMIC_RELAXED);
	return true;
}

static inline __u64 pte_need(int dir)
{
	return NPF_PTE_PRESENT | (dir == DMA_WRITE ? NPF_PTE_WRITE : NPF_PTE_READ);
}

/*
 * Device access to [vaddr, vaddr + len): all pages are checked before any
 * byte moves, so a packet either lands whole or not at all. Returns 0,
 * -EFAULT when a page is not present with the needed permission (nothing
 * copied), -EINVAL when the range is outside the MR.
 */
int nic_mr_dma(struct nic_mr *mr, __u64 vaddr, void *buf, __u64 len, int dir)
{
	__u64 need = pte_need(dir);
	__u64 mark = NPF_PTE_ACCESSED | (dir == DMA_WRITE ? NPF_PTE_DIRTY : 0);
	__u64 i, first, last;

	if (!mr_contains(mr, vaddr, len))
		return -EINVAL;
	if (!len)
		return 0;
	first = (vaddr - mr->start) >> PAGE_SH;
	last = (vaddr + len - 1 - mr->start) >> PAGE_SH;
	for (i = first; i <= last; i++)
		if (!pte_ok(&mr->pte[i], need, mark))
			return -EFAULT;
	if (dir == DMA_WRITE)
		memcpy((void *)(uintptr_t)vaddr, buf, len);
	else
		memcpy(buf, (const void *)(uintptr_t)vaddr, len);
	return 0;
}

/* Builds the page request groups of one WR: one group per MR it touches. */
struct pr_builder {
	struct nic_qp *qp;
	int dir;
	struct nic_mr *mr;
	__u64 first, last;
	__u32 npages;
	bool prot;
	bool missing;
	bool failed;
};

static bool pr_covers(const struct nic_pr *pr, __u32 key, __u64 page)
{
	return pr->key == key && page >= pr->first && page <= pr->last;
}

static void prb_flush(struct pr_builder *b)
{
	struct nic_qp *qp = b->qp;
	struct nic *nic = qp->nic;
	struct npf_page_request req;
	struct nic_pr *pr;

	if (!b->npages)
		return;
	if (qp->npr >= qp->attr.max_page_requests) {
		/* asked again when an answer frees a slot (fault_gen changes) */
		b->npages = 0;
		return;
	}
	memset(&req, 0, sizeof(req));
	req.magic = NPF_IOPT_MAGIC;
	req.mr_id = b->mr->npf_id;
	req.addr = b->mr->start + (b->first << PAGE_SH);
	req.len = (b->last - b->first + 1) << PAGE_SH;
	req.cookie = ((__u64)qp->qpn << 32) | ++qp->pr_seq;
	req.npages = b->npages;
	req.access = (b->dir == DMA_WRITE ? NPF_ACCESS_WRITE : NPF_ACCESS_READ) |
		     (b->prot ? NPF_ACCESS_PROT : 0);
	pr = &qp->pr[qp->npr++];
	pr->cookie = req.cookie;
	pr->key = b->mr->key;
	pr->first = b->first;
	pr->last = b->last;
	pr->req = req;
	pr->issued_ns = nic_now_ns();
	nic->stats.page_requests++;
	npf_nic_fault_report(&req);
	pr->reported_ns = nic_now_ns();
	nic->stats.report_ns_total += pr->reported_ns - pr->issued_ns;
	b->npages = 0;
}

/* Report again the page requests that have waited NIC_PR_REISSUE_MS without an answer. */
int nic_qp_reissue_prs(struct nic_qp *qp, __u64 now, __u64 *deadline)
{
	const __u64 after = NIC_PR_REISSUE_MS * 1000000ULL;
	int work = 0;
	__u32 i;

	for (i = 0; i < qp->npr; i++) {
		struct nic_pr *pr = &qp->pr[i];

		/* issued_ns may be later than now: it is stamped during this pass */
		if (now >= pr->issued_ns + after) {
			pr->issued_ns = now;
			qp->nic->stats.page_requests_reissued++;
			npf_nic_fault_report(&pr->req);
			work++;
		}
		if (!*deadline || pr->issued_ns + after < *deadline)
			*deadline = pr->issued_ns + after;
	}
	return work;
}

static void prb_scan(struct pr_builder *b, struct nic_mr *mr, __u64 vaddr, __u64 len)
{
	struct nic_qp *qp = b->qp;
	__u64 need = pte_need(b->dir);
	__u64 i, first, last;
	__u32 j;

	if (!len)
		return;
	first = (vaddr - mr->start) >> PAGE_SH;
	last = (vaddr + len - 1 - mr->start) >> PAGE_SH;
	for (i = first; i <= last; i++) {
		__u64 v = __atomic_load_n(&mr->pte[i], __ATOMIC_ACQUIRE);
		bool dup = false;

		if ((v & need) == need)
			continue;
		if (!b->missing)
			qp->miss_ns = nic_now_ns(); /* a fault's service time starts here */
		b->missing = true;
		if (qp->failed.key && pr_covers(&qp->failed, mr->key, i)) {
			b->failed = true;
			continue;
		}
		for (j = 0; j < qp->npr && !dup; j++)
			dup = pr_covers(&qp->pr[j], mr->key, i);
		if (dup) {
			qp->nic->stats.page_requests_suppressed++;
			continue;
		}
		if (b->npages && b->mr != mr)
			prb_flush(b);
		if (!b->npages) {
			b->mr = mr;
			b->first = i;
			b->prot = false;
		}
		b->last = i;
		b->npages++;
		if (v & NPF_PTE_PRESENT)
			b->prot = true;
	}
}

static int prb_finish(struct pr_builder *b)
{
	prb_flush(b);
	if (b->failed) {
		b->qp->failed.key = 0; /* reported once: the WR that hit it fails */
		return -EFAULT;
	}
	return b->missing ? -EAGAIN : 0;
}

/*
 * Check [vaddr, vaddr + len) of mr for access dir and raise one page
 * request for its missing pages. Returns 0 if everything is present,
 * -EAGAIN if the caller must wait for an answer, -EFAULT if npfd answered
 * INVALID for one of the pages.
 */
int nic_fault_range(struct nic_qp *qp, struct nic_mr *mr, __u64 vaddr, __u64 len, int dir)
{
	struct pr_builder b = {.qp = qp, .dir = dir};

	prb_scan(&b, mr, vaddr, len);
	return prb_finish(&b);
}

/*
 * The same for bytes [off, off + len) of the message an SGL describes.
 * Returns -EINVAL for a bad lkey or an SGE outside its MR.
 */
int nic_fault_sgl(struct nic_qp *qp, const struct nic_sge *sge, int nsge, __u64 off, __u64 len,
		  int dir)
{
	struct pr_builder b = {.qp = qp, .dir = dir};
	__u64 pos = 0, end = off + len;
	int i;

	for (i = 0; i < nsge && pos < end; pos += sge[i].length, i++) {
		struct nic_mr *mr = nic_mr_lookup(qp->nic, sge[i].lkey);
		__u64 s, e;

		if (!mr || mr->pd != qp->pd || !mr_contains(mr, sge[i].addr, sge[i].length) ||
		    (dir == DMA_WRITE && !(mr->access & NIC_ACCESS_LOCAL_WRITE)))
			return -EINVAL;
		if (pos + sge[i].length <= off)
			continue;
		s = off > pos ? off - pos : 0;
		e = end - pos < sge[i].length ? end - pos : sge[i].length;
		prb_scan(&b, mr, sge[i].addr + s, e - s);
	}
	return prb_finish(&b);
}

/* Forget the page requests of a deregistered MR. */
void nic_qp_drop_prs(struct nic_qp *qp, __u32 key)
{
	__u32 i = 0;

	while (i < qp->npr) {
		if (qp->pr[i].key == key) {
			qp->pr[i] = qp->pr[--qp->npr];
			qp->fault_gen++;
		} else {
			i++;
		}
	}
	if (qp->failed.key == key)
		qp->failed.key = 0;
}

static void nic_page_response(struct nic *nic, const struct npf_page_response *resp)
{
	struct nic_qp *qp = nic_qp_lookup(nic, resp->cookie >> 32);
	__u32 i;

	nic->stats.page_responses++;
	if (!qp)
		return;
	for (i = 0; i < qp->npr; i++) {
		if (qp->pr[i].cookie != resp->cookie)
			continue;
		nic->stats.answer_wait_ns_total += nic_now_ns() - qp->pr[i].reported_ns;
		if (resp->status != NPF_PR_SUCCESS)
			qp->failed = qp->pr[i];
		qp->pr[i] = qp->pr[--qp->npr];
		qp->fault_gen++;
		return;
	}
}

/*
 * Consume the MR's response and invalidation rings; returns entries
 * handled. With opts.inval_ack_delay_us, invalidations wait that long
 * (*deadline says when to look again).
 */
int nic_poll_mr(struct nic *nic, struct nic_mr *mr, __u64 now, __u64 *deadline)
{
	struct npf_iopt_header *h = mr->iopt;
	__u32 head, tail;
	int work = 0;

	head = h->resp.head;
	tail = __atomic_load_n(&h->resp.tail, __ATOMIC_ACQUIRE);
	for (; head != tail; head++, work++) {
		struct npf_page_response r = h->resp.ent[head % NPF_NIC_RING_SIZE];

		nic_page_response(nic, &r);
	}
	__atomic_store_n(&h->resp.head, head, __ATOMIC_RELEASE);

	head = h->inval.head;
	tail = __atomic_load_n(&h->inval.tail, __ATOMIC_ACQUIRE);
	if (head != tail && nic->opts.inval_ack_delay_us) {
		__u64 due;

		if (!mr->inval_seen_ns)
			mr->inval_seen_ns = now;
		due = mr->inval_seen_ns + nic->opts.inval_ack_delay_us * 1000ULL;
		if (now < due) {
			if (!*deadline || due < *deadline)
				*deadline = due;
			return work;
		}
		mr->inval_seen_ns = 0;
	}
	if (head != tail) {
		__u64 seq = 0;

		/*
		 * DMA happens only on this thread, one packet at a time, each
		 * after a fresh PTE check: while we are here no DMA is in
		 * flight, and every later access sees the cleared entries.
		 */
		for (; head != tail; head++, work++) {
			seq = h->inval.ent[head % NPF_NIC_RING_SIZE].seq;
			nic->stats.invalidations++;
		}
		__atomic_store_n(&h->inval.head, head, __ATOMIC_RELEASE);
		__atomic_store_n(&h->inval.acked_seq, seq, __ATOMIC_RELEASE);
		nic_futex_wake((_Atomic __u32 *)&h->inval.acked_seq, true);
	}
	return work;
}
