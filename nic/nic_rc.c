// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The reliable-connection transport, both halves of a QP.
 *
 * Requester: WQEs get PSNs when they start (a READ reserves one PSN per
 * response packet); packets are generated from the WQE on demand, so
 * go-back-N retransmission needs no copies. Before a WQE starts, all its
 * local pages are checked: missing ones raise one page request and the
 * WQE waits until npfd answers (seed 000 §4). By default the send queue
 * stalls there, in order; with relaxed ordering (seed 001 §3.3) later WQEs
 * that conflict with no earlier outstanding one start meanwhile, so PSN
 * order -- the order of everything after the start: transmission,
 * go-back-N, ACKs, completions -- can differ from posting order.
 *
 * Responder: takes packets at its expected PSN only. A packet that would
 * touch a missing page raises one page request for the rest of the message
 * and is answered with an RNR NAK; the requester waits the RNR timer and
 * resends from that PSN. Incoming READs fault the same way (the seed's
 * proposed extension of RNR to reads). ACKs are coalesced per engine pass
 * and queued behind READ responses so that the requester sees them in PSN
 * order.
 */
#include <errno.h>
#include <string.h>
#include "nic_internal.h"

#define SYN_FATAL(s) ((s) >= SYN_NAK_INV_REQ)

static inline struct nic_swqe *sq_at(struct nic_qp *qp, __u32 idx)
{
	return &qp->sq[idx & (qp->sq_size - 1)];
}

/* The started WQE at position pos of ord[] (PSN order). */
static inline struct nic_swqe *ord_at(struct nic_qp *qp, __u32 pos)
{
	return sq_at(qp, qp->ord[pos & (qp->sq_size - 1)]);
}

static inline struct nic_rwqe *rq_at(struct nic_qp *qp, __u32 idx)
{
	return &qp->rq[idx & (qp->rq_size - 1)];
}

static inline void set_deadline(__u64 *deadline, __u64 t)
{
	if (!*deadline || t < *deadline)
		*deadline = t;
}

static __u32 npkts_of(const struct nic_qp *qp, __u64 len)
{
	return len ? (len + qp->mtu - 1) / qp->mtu : 1;
}

static __u64 min_u64(__u64 a, __u64 b)
{
	return a < b ? a : b;
}

/* Device access to bytes [off, off + len) of the message an SGL describes. */
int nic_sgl_dma(struct nic_qp *qp, const struct nic_sge *sge, int nsge, __u64 off, void *buf,
		__u64 len, int dir)
{
	__u64 pos = 0, done = 0;
	int i, r;

	for (i = 0; i < nsge && done < len; pos += sge[i].length, i++) {
		struct nic_mr *mr;
		__u64 s, n;

		if (pos + sge[i].length <= off + done)
			continue;
		mr = nic_mr_lookup(qp->nic, sge[i].lkey);
		if (!mr || mr->pd != qp->pd ||
		    (dir == DMA_WRITE && !(mr->access & NIC_ACCESS_LOCAL_WRITE)))
			return -EINVAL;
		s = off + done - pos;
		n = min_u64(sge[i].length - s, len - done);
		r = nic_mr_dma(mr, sge[i].addr + s, (char *)buf + done, n, dir);
		if (r)
			return r;
		done += n;
	}
	return done == len ? 0 : -EINVAL;
}

/* ---- completions and errors ------------------------------------------------- */

static const enum nic_wc_opcode wc_op[] = {
	[NIC_WR_SEND] = NIC_WC_SEND,
	[NIC_WR_RDMA_WRITE] = NIC_WC_RDMA_WRITE,
	[NIC_WR_RDMA_READ] = NIC_WC_RDMA_READ,
};

static void qp_set_error(struct nic_qp *qp);

/*
 * A completion of this QP was lost to a full CQ: the QP cannot report
 * completions any more, so it goes to the error state (hardware's Local
 * Work Queue Catastrophic Error), once.
 */
static void qp_cq_overrun(struct nic_qp *qp)
{
	if (qp->state == QPS_ERR)
		return;
	qp_set_error(qp);
	nic_event(qp->nic, NIC_EVENT_QP_FATAL, qp, NULL);
}

static void push_send_wc(struct nic_qp *qp, struct nic_swqe *w)
{
	struct nic_wc wc = {
		.wr_id = w->wr_id,
		.status = w->status,
		.opcode = wc_op[w->opcode],
		.byte_len = (__u32)w->len,
		.qp_num = qp->qpn,
	};

	if ((w->status != NIC_WC_SUCCESS || (w->flags & NIC_SEND_SIGNALED)) &&
	    nic_cq_push(qp->scq, &wc))
		qp_cq_overrun(qp);
}

static void push_recv_wc(struct nic_qp *qp, __u64 wr_id, enum nic_wc_status st, __u32 len)
{
	struct nic_wc wc = {
		.wr_id = wr_id,
		.status = st,
		.opcode = NIC_WC_RECV,
		.byte_len = len,
		.qp_num = qp->qpn,
	};

	if (st != NIC_WC_SUCCESS && st != NIC_WC_WR_FLUSH_ERR)
		qp->err_in_wc = true;
	if (nic_cq_push(qp->rcq, &wc))
		qp_cq_overrun(qp);
}

/*
 * Report finished WQEs in the order they finish (PSN order), then free the
 * send queue slots up to the oldest WQE not reported yet.
 */
static int sq_retire(struct nic_qp *qp)
{
	__u32 head = atomic_load_explicit(&qp->sq_head, memory_order_relaxed);
	int n = 0;

	for (; qp->ord_head != qp->ord_tail && ord_at(qp, qp->ord_head)->done; qp->ord_head++) {
		struct nic_swqe *w = ord_at(qp, qp->ord_head);

		push_send_wc(qp, w);
		w->retired = true;
		n++;
	}
	while (head != qp->sq_next && sq_at(qp, head)->retired)
		head++;
	atomic_store_explicit(&qp->sq_head, head, memory_order_release);
	return n;
}

/* Error state: every WR not yet done completes with WR_FLUSH_ERR. */
static int qp_flush(struct nic_qp *qp)
{
	__u32 prod = atomic_load_explicit(&qp->sq_prod, memory_order_acquire);
	__u32 head = atomic_load_explicit(&qp->sq_head, memory_order_relaxed);
	int n = 0;

	for (; head != prod; head++) {
		struct nic_swqe *w = sq_at(qp, head);

		if (w->retired)
			continue;
		if (!w->done) {
			w->done = true;
			w->status = NIC_WC_WR_FLUSH_ERR;
		}
		push_send_wc(qp, w);
		n++;
	}
	atomic_store_explicit(&qp->sq_head, head, memory_order_release);
	qp->sq_next = head;
	qp->ord_head = qp->ord_tail = qp->tx_pos = 0;

	prod = atomic_load_explicit(&qp->rq_prod, memory_order_acquire);
	head = atomic_load_explicit(&qp->rq_head, memory_order_relaxed);
	for (; head != prod; head++, n++)
		push_recv_wc(qp, rq_at(qp, head)->wr_id, NIC_WC_WR_FLUSH_ERR, 0);
	atomic_store_explicit(&qp->rq_head, head, memory_order_release);
	return n;
}

static void qp_set_error(struct nic_qp *qp)
{
	qp->state = QPS_ERR;
	qp->npr = 0;
	qp->rd_head = qp->rd_tail = 0;
}

static void wqe_fail(struct nic_qp *qp, struct nic_swqe *w, enum nic_wc_status st)
{
	w->done = true;
	w->status = st;
	qp_set_error(qp);
}

/* ---- packets ----------------------------------------------------------------- */

static struct nic_pkt *pkt_begin(struct nic_qp *qp, __u8 op, __u32 psn)
{
	struct nic_pkt *pkt = nic_wire_tx_begin(qp);

	if (!pkt)
		return NULL;
	memset(pkt, 0, sizeof(*pkt));
	pkt->op = op;
	pkt->psn = psn;
	return pkt;
}

static bool send_ack(struct nic_qp *qp, int syn, __u32 psn)
{
	struct nic_pkt *pkt = pkt_begin(qp, PKT_ACK, psn);

	if (!pkt)
		return false;
	pkt->syndrome = syn;
	if (syn == SYN_RNR_NAK)
		pkt->rnr_us = qp->attr.rnr_timer_us;
	nic_wire_tx_commit(qp, pkt);
	return true;
}

/* ---- requester ----------------------------------------------------------------- */

/* Find the unfinished WQE holding psn and resume transmission there. */
static void req_rewind(struct nic_qp *qp, __u32 psn)
{
	__u32 pos;

	for (pos = qp->ord_head; pos != qp->ord_tail; pos++) {
		struct nic_swqe *w = ord_at(qp, pos);

		if (w->done || psn_diff(psn, w->first_psn + w->npkts) >= 0)
			continue;
		qp->tx_pos = pos;
		if (w->opcode == NIC_WR_RDMA_READ || psn_diff(psn, w->first_psn) < 0)
			qp->tx_pkt = 0;
		else
			qp->tx_pkt = psn - w->first_psn;
		return;
	}
	qp->tx_pos = qp->ord_tail;
	qp->tx_pkt = 0;
}

/*
 * When the retransmission timer armed now expires: timeout_us doubled per
 * retry so far (up to x16), or 0 (no timer) for NIC_TIMEOUT_NONE.
 */
static __u64 req_timer_deadline(const struct nic_qp *qp, __u64 now)
{
	if (qp->attr.timeout_us == NIC_TIMEOUT_NONE)
		return 0;
	return now + ((__u64)qp->attr.timeout_us * 1000ULL << (qp->retries < 4 ? qp->retries : 4));
}

static void req_progress(struct nic_qp *qp, __u64 now)
{
	qp->retries = 0;
	qp->rnr_retries = 0;
	qp->timer_at = psn_diff(qp->tx_high, qp->una) > 0 ? req_timer_deadline(qp, now) : 0;
}

/* Everything up to and including psn reached the responder. */
static void req_ack_upto(struct nic_qp *qp, __u32 psn, __u64 now)
{
	__u32 una = psn + 1, pos;

	if (psn_diff(una, qp->una) <= 0 || psn_diff(una, qp->tx_high) > 0)
		return;
	for (pos = qp->ord_head; pos != qp->ord_tail; pos++) {
		struct nic_swqe *w = ord_at(qp, pos);

		if (w->done)
			continue;
		if (w->opcode == NIC_WR_RDMA_READ) {
			if (psn_diff(psn, w->first_psn) >= 0) {
				/* acked past a READ whose responses did not all come: lost */
				una = w->first_psn + w->rd_got;
				req_rewind(qp, w->first_psn);
			}
			break;
		}
		if (psn_diff(psn, w->first_psn + w->npkts - 1) < 0)
			break;
		w->done = true;
		w->status = NIC_WC_SUCCESS;
	}
	if (psn_diff(una, qp->una) > 0) {
		qp->una = una;
		req_progress(qp, now);
	}
}

static struct nic_swqe *req_wqe_of(struct nic_qp *qp, __u32 psn)
{
	__u32 pos;

	for (pos = qp->ord_head; pos != qp->ord_tail; pos++) {
		struct nic_swqe *w = ord_at(qp, pos);

		if (!w->done && psn_diff(psn, w->first_psn) >= 0 &&
		    psn_diff(psn, w->first_psn + w->npkts) < 0)
			return w;
	}
	return NULL;
}

static void req_handle_ack(struct nic_qp *qp, const struct nic_pkt *pkt, __u64 now)
{
	static const enum nic_wc_status fatal[] = {
		[SYN_NAK_INV_REQ] = NIC_WC_REM_INV_REQ_ERR,
		[SYN_NAK_REM_ACCESS] = NIC_WC_REM_ACCESS_ERR,
		[SYN_NAK_REM_OP] = NIC_WC_REM_OP_ERR,
	};
	struct nic_swqe *w;
	__u32 psn = pkt->psn;

	if (pkt->syndrome == SYN_ACK) {
		req_ack_upto(qp, psn, now);
		return;
	}
	/* a NAK names the responder's expected PSN: everything before it arrived */
	if (psn_diff(psn, qp->una) < 0 || psn_diff(psn, qp->tx_high) >= 0)
		return;
	req_ack_upto(qp, psn - 1, now);
	switch (pkt->syndrome) {
	case SYN_NAK_SEQ:
		req_rewind(qp, psn);
		break;
	case SYN_RNR_NAK:
		qp->nic->stats.rnr_nak_rx++;
		if (qp->attr.rnr_retry < 7 && ++qp->rnr_retries > qp->attr.rnr_retry) {
			w = req_wqe_of(qp, psn);
			if (w)
				wqe_fail(qp, w, NIC_WC_RNR_RETRY_EXC_ERR);
			break;
		}
		req_rewind(qp, psn);
		qp->rnr_until = now + pkt->rnr_us * 1000ULL;
		qp->timer_at = 0;
		break;
	case SYN_NAK_INV_REQ:
	case SYN_NAK_REM_ACCESS:
	case SYN_NAK_REM_OP:
		w = req_wqe_of(qp, psn);
		if (w)
			wqe_fail(qp, w, fatal[pkt->syndrome]);
		else
			qp_set_error(qp);
		break;
	}
}

static void req_handle_read_resp(struct nic_qp *qp, const struct nic_pkt *pkt, __u64 now)
{
	struct nic_swqe *w = NULL;
	__u32 pos;
	__u64 off;
	int r;

	for (pos = qp->ord_head; pos != qp->ord_tail; pos++) {
		if (!ord_at(qp, pos)->done && ord_at(qp, pos)->opcode == NIC_WR_RDMA_READ) {
			w = ord_at(qp, pos);
			break;
		}
	}
	if (!w || qp->rd_fault)
		return;
	if (pkt->psn != w->first_psn + w->rd_got) {
		/* a gap: ask again from the first missing response, once per gap */
		if (psn_diff(pkt->psn, w->first_psn + w->rd_got) > 0 &&
		    qp->rd_reask != w->first_psn + w->rd_got) {
			qp->rd_reask = w->first_psn + w->rd_got;
			req_rewind(qp, w->first_psn);
		}
		return;
	}
	off = (__u64)w->rd_got * qp->mtu;
	if (pkt->len != min_u64(qp->mtu, w->len - off) || pkt->offset != off)
		return;
	req_ack_upto(qp, w->first_psn - 1, now);
	r = nic_sgl_dma(qp, w->sge, w->num_sge, off, (void *)pkt->data, pkt->len, DMA_WRITE);
	if (r == -EFAULT) {
		/* a local page went away after the WR started: ask, then re-read */
		r = nic_fault_sgl(qp, w->sge, w->num_sge, off, w->len - off, DMA_WRITE);
		if (r == -EAGAIN) {
			/* what landed may be gone with the page: read it all again */
			w->rd_got = 0;
			qp->rd_fault = true;
			qp->rd_fault_gen = qp->fault_gen;
			qp->timer_at = 0;
			return;
		}
		if (!r)
			return; /* present again already: the retransmission lands */
	}
	if (r) {
		wqe_fail(qp, w, NIC_WC_LOC_PROT_ERR);
		return;
	}
	w->rd_got++;
	if (psn_diff(pkt->psn + 1, qp->una) > 0)
		qp->una = pkt->psn + 1;
	req_progress(qp, now);
	if (w->rd_got == w->npkts) {
		w->done = true;
		w->status = NIC_WC_SUCCESS;
	}
}

static int reads_in_flight(struct nic_qp *qp)
{
	__u32 pos;
	int n = 0;

	for (pos = qp->ord_head; pos != qp->ord_tail; pos++)
		if (!ord_at(qp, pos)->done && ord_at(qp, pos)->opcode == NIC_WR_RDMA_READ)
			n++;
	return n;
}

/*
 * Give WQE idx its PSNs once all its local pages are present. Returns 0
 * when started, -EAGAIN when it waits for a page request, else the WQE
 * failed.
 */
static int req_start(struct nic_qp *qp, __u32 idx)
{
	struct nic_swqe *w = sq_at(qp, idx);
	int dir = w->opcode == NIC_WR_RDMA_READ ? DMA_WRITE : DMA_READ;
	__u32 prod;
	int r;

	r = nic_fault_sgl(qp, w->sge, w->num_sge, 0, w->len, dir);
	if (r == -EAGAIN) {
		if (!w->stall_ns) {
			qp->nic->stats.requester_stalls++;
			w->stall_ns = qp->miss_ns;
		}
		w->stalled = true;
		w->stall_gen = qp->fault_gen;
		return r;
	}
	if (r) {
		wqe_fail(qp, w, NIC_WC_LOC_PROT_ERR);
		return r;
	}
	if (w->stall_ns) {
		struct nic_stats *st = &qp->nic->stats;

		st->stall_ns_last = nic_now_ns() - w->stall_ns;
		st->stall_ns_total += st->stall_ns_last;
		st->stalls_resumed++;
	}
	w->stalled = false;
	w->started = true;
	w->first_psn = qp->next_psn;
	w->npkts = npkts_of(qp, w->len);
	w->rd_got = 0;
	w->done = false;
	w->status = NIC_WC_SUCCESS;
	qp->next_psn += w->npkts;
	qp->ord[qp->ord_tail++ & (qp->sq_size - 1)] = idx;
	prod = atomic_load_explicit(&qp->sq_prod, memory_order_acquire);
	while (qp->sq_next != prod && sq_at(qp, qp->sq_next)->started)
		qp->sq_next++;
	return 0;
}

static bool ranges_overlap(__u64 a, __u64 alen, __u64 b, __u64 blen)
{
	return alen && blen && a < b + blen && b < a + alen;
}

/* Do a and b touch common memory, one of them writing it (relaxed ordering)? */
static bool wqe_conflict(const struct nic_swqe *a, const struct nic_swqe *b)
{
	bool a_read = a->opcode == NIC_WR_RDMA_READ, b_read = b->opcode == NIC_WR_RDMA_READ;
	int i, j;

	/* SENDs consume the peer's receive queue in posting order */
	if (a->opcode == NIC_WR_SEND && b->opcode == NIC_WR_SEND)
		return true;
	/* at the peer: a WRITE's target against the other's remote range */
	if (a->opcode != NIC_WR_SEND && b->opcode != NIC_WR_SEND && (!a_read || !b_read) &&
	    ranges_overlap(a->remote_addr, a->len, b->remote_addr, b->len))
		return true;
	/* here: a READ's target against the other's buffers */
	if (!a_read && !b_read)
		return false;
	for (i = 0; i < a->num_sge; i++)
		for (j = 0; j < b->num_sge; j++)
			if (ranges_overlap(a->sge[i].addr, a->sge[i].length, b->sge[j].addr,
					   b->sge[j].length))
				return true;
	return false;
}

/*
 * May WQE idx start, as far as earlier WQEs are concerned? A fenced one
 * waits until every earlier WQE has completed; with relaxed ordering, any
 * WQE waits until the earlier ones it conflicts with have completed.
 */
static bool wqe_may_start(struct nic_qp *qp, __u32 idx)
{
	bool relaxed = qp->attr.flags & NIC_QP_RELAXED_ORDERING;
	struct nic_swqe *w = sq_at(qp, idx);
	__u32 i = atomic_load_explicit(&qp->sq_head, memory_order_relaxed);

	if (!relaxed && !(w->flags & NIC_SEND_FENCE))
		return true;
	for (; i != idx; i++) {
		struct nic_swqe *e = sq_at(qp, i);

		if (e->done)
			continue;
		if ((w->flags & NIC_SEND_FENCE) || wqe_conflict(e, w))
			return false;
	}
	return true;
}

/*
 * Start the next WQE that can start. In order, that is the oldest WQE not
 * started; relaxed ordering looks past WQEs that wait (for a page, for an
 * earlier WQE they conflict with, at a fence) at up to NIC_REORDER_MAX of
 * them. The send window and the READ limit stop the search: they are
 * not what relaxed ordering gets around. Returns 0 when a WQE started,
 * -EAGAIN when none can, else the error of a WQE that failed.
 */
static int req_start_next(struct nic_qp *qp)
{
	__u32 prod = atomic_load_explicit(&qp->sq_prod, memory_order_acquire);
	bool relaxed = qp->attr.flags & NIC_QP_RELAXED_ORDERING;
	__u32 idx, looked = 0;
	int r;

	for (idx = qp->sq_next; idx != prod && looked < NIC_REORDER_MAX; idx++) {
		struct nic_swqe *w = sq_at(qp, idx);

		if (w->started)
			continue; /* overtook the WQEs before it */
		looked++;
		if (psn_diff(qp->next_psn, qp->una) >= NIC_WINDOW ||
		    (w->opcode == NIC_WR_RDMA_READ && reads_in_flight(qp) >= NIC_MAX_RD))
			return -EAGAIN;
		if ((!w->stalled || w->stall_gen != qp->fault_gen) && wqe_may_start(qp, idx)) {
			r = req_start(qp, idx);
			if (r != -EAGAIN)
				return r;
		}
		if (!relaxed)
			break;
	}
	return -EAGAIN;
}

/* Build the packet at (tx_pos, tx_pkt). */
static int req_send_one(struct nic_qp *qp, struct nic_swqe *w, struct nic_pkt *pkt)
{
	__u64 off = (__u64)qp->tx_pkt * qp->mtu;
	int r;

	if (w->opcode == NIC_WR_RDMA_READ) {
		/* a READ asked again resumes after the responses that arrived */
		pkt->op = PKT_READ_REQ;
		pkt->psn = w->first_psn + w->rd_got;
		pkt->rkey = w->rkey;
		pkt->vaddr = w->remote_addr;
		pkt->msg_len = w->len;
		pkt->offset = (__u64)w->rd_got * qp->mtu;
		return 0;
	}
	pkt->op = w->opcode == NIC_WR_SEND ? PKT_SEND : PKT_WRITE;
	pkt->len = min_u64(qp->mtu, w->len - off);
	pkt->msg_len = w->len;
	pkt->offset = off;
	pkt->rkey = w->rkey;
	pkt->vaddr = w->remote_addr + off;
	r = nic_sgl_dma(qp, w->sge, w->num_sge, off, pkt->data, pkt->len, DMA_READ);
	if (r != -EFAULT)
		return r;
	/* a page went away since the WQE started: stall here until it is back */
	r = nic_fault_sgl(qp, w->sge, w->num_sge, off, w->len - off, DMA_READ);
	if (r == -EAGAIN) {
		qp->tx_fault = true;
		qp->fault_pos = qp->tx_pos;
		qp->tx_fault_gen = qp->fault_gen;
		qp->nic->stats.requester_stalls++;
		return r;
	}
	return r ? r : -EBUSY;
}

static int req_tx(struct nic_qp *qp, __u64 now, __u64 *deadline)
{
	int sent = 0;

	if (qp->rnr_until) {
		if (now < qp->rnr_until) {
			set_deadline(deadline, qp->rnr_until);
			return 0;
		}
		qp->rnr_until = 0;
	}
	if (qp->rd_fault) {
		if (qp->fault_gen == qp->rd_fault_gen)
			return 0;
		qp->rd_fault = false;
		req_rewind(qp, qp->una);
	}
	while (sent < NIC_BUDGET && qp->state == QPS_RTS) {
		struct nic_swqe *w;
		struct nic_pkt *pkt;
		__u32 psn;
		int r;

		if ((int)(qp->tx_pos - qp->ord_head) < 0) {
			qp->tx_pos = qp->ord_head;
			qp->tx_pkt = 0;
		}
		if (qp->tx_fault && qp->tx_pos == qp->fault_pos &&
		    qp->fault_gen == qp->tx_fault_gen)
			break;
		if (qp->tx_pos == qp->ord_tail) {
			r = req_start_next(qp);
			if (r == -EAGAIN)
				break;
			if (r)
				return sent + 1;
			qp->tx_pkt = 0;
		}
		w = ord_at(qp, qp->tx_pos);
		if (w->done) {
			qp->tx_pos++;
			qp->tx_pkt = 0;
			continue;
		}
		psn = w->first_psn + qp->tx_pkt;
		if (w->opcode != NIC_WR_RDMA_READ && psn_diff(psn, qp->una) < 0) {
			qp->tx_pkt = qp->una - w->first_psn; /* acked meanwhile */
			if (qp->tx_pkt >= w->npkts) {
				qp->tx_pos++;
				qp->tx_pkt = 0;
			}
			continue;
		}
		if (psn_diff(psn, qp->una) >= NIC_WINDOW)
			break;
		pkt = pkt_begin(qp, 0, psn);
		if (!pkt) {
			set_deadline(deadline, now + 50000);
			break;
		}
		r = req_send_one(qp, w, pkt);
		if (r == -EBUSY)
			continue; /* the page came back between the two checks */
		if (r == -EAGAIN)
			break;
		if (r) {
			wqe_fail(qp, w, NIC_WC_LOC_PROT_ERR);
			return sent + 1;
		}
		nic_wire_tx_commit(qp, pkt);
		sent++;
		if (qp->tx_fault && qp->tx_pos == qp->fault_pos)
			qp->tx_fault = false;
		if (psn_diff(psn + 1, qp->tx_high) > 0)
			qp->tx_high = psn + 1;
		else
			qp->nic->stats.retransmits++;
		if (!qp->timer_at)
			qp->timer_at = req_timer_deadline(qp, now);
		if (w->opcode == NIC_WR_RDMA_READ) {
			if (psn_diff(w->first_psn + w->npkts, qp->tx_high) > 0)
				qp->tx_high = w->first_psn + w->npkts;
			qp->tx_pkt = w->npkts;
		} else {
			qp->tx_pkt++;
		}
		if (qp->tx_pkt >= w->npkts) {
			qp->tx_pos++;
			qp->tx_pkt = 0;
		}
	}
	return sent;
}

static void req_timer(struct nic_qp *qp, __u64 now, __u64 *deadline)
{
	struct nic_swqe *w;

	if (!qp->timer_at || qp->state != QPS_RTS)
		return;
	if (psn_diff(qp->tx_high, qp->una) <= 0 || qp->rd_fault || qp->rnr_until) {
		qp->timer_at = 0;
		return;
	}
	if (now < qp->timer_at) {
		set_deadline(deadline, qp->timer_at);
		return;
	}
	qp->nic->stats.timeouts++;
	if (++qp->retries > qp->attr.retry_cnt) {
		w = req_wqe_of(qp, qp->una);
		if (w)
			wqe_fail(qp, w, NIC_WC_RETRY_EXC_ERR);
		else
			qp_set_error(qp);
		return;
	}
	req_rewind(qp, qp->una);
	qp->timer_at = req_timer_deadline(qp, now);
	if (qp->timer_at)
		set_deadline(deadline, qp->timer_at);
}

/* ---- responder ------------------------------------------------------------------- */

/* Returns 0 (accepted), or the syndrome of the NAK to answer with. */
static int resp_send(struct nic_qp *qp, const struct nic_pkt *pkt)
{
	__u32 head = atomic_load_explicit(&qp->rq_head, memory_order_relaxed);
	struct nic_rwqe *rw;
	__u64 cap = 0;
	int i, r;

	if (head == atomic_load_explicit(&qp->rq_prod, memory_order_acquire))
		return SYN_RNR_NAK; /* no receive buffer: the classic RNR */
	rw = rq_at(qp, head);
	for (i = 0; i < rw->num_sge; i++)
		cap += rw->sge[i].length;
	if (pkt->msg_len > cap || pkt->offset + pkt->len > pkt->msg_len) {
		push_recv_wc(qp, rw->wr_id, NIC_WC_LOC_LEN_ERR, 0);
		atomic_store_explicit(&qp->rq_head, head + 1, memory_order_release);
		return SYN_NAK_INV_REQ;
	}
	r = nic_sgl_dma(qp, rw->sge, rw->num_sge, pkt->offset, (void *)pkt->data, pkt->len,
			DMA_WRITE);
	if (r == -EFAULT) {
		r = nic_fault_sgl(qp, rw->sge, rw->num_sge, pkt->offset, pkt->msg_len - pkt->offset,
				  DMA_WRITE);
		if (!r || r == -EAGAIN)
			return SYN_RNR_NAK;
		push_recv_wc(qp, rw->wr_id, NIC_WC_LOC_ACCESS_ERR, 0);
		atomic_store_explicit(&qp->rq_head, head + 1, memory_order_release);
		return SYN_NAK_REM_ACCESS;
	}
	if (r) {
		push_recv_wc(qp, rw->wr_id, NIC_WC_LOC_PROT_ERR, 0);
		atomic_store_explicit(&qp->rq_head, head + 1, memory_order_release);
		return SYN_NAK_REM_OP;
	}
	if (pkt->offset + pkt->len == pkt->msg_len) {
		push_recv_wc(qp, rw->wr_id, NIC_WC_SUCCESS, (__u32)pkt->msg_len);
		atomic_store_explicit(&qp->rq_head, head + 1, memory_order_release);
	}
	return 0;
}

/*
 * The MR an rkey names, if this QP may access [vaddr, vaddr + len) with
 * access: for an implicit MR, its child holding the range (*miss set if
 * there is none yet but there may be: answer with an RNR NAK).
 */
static struct nic_mr *resp_mr(struct nic_qp *qp, __u32 rkey, __u64 vaddr, __u64 len, int access,
			      bool *miss)
{
	struct nic_mr *mr = nic_mr_lookup(qp->nic, rkey);

	if (mr && mr->implicit)
		mr = mr->pd == qp->pd && (mr->access & access) ?
			     nic_mr_child(mr, vaddr, len, miss) :
			     NULL;

	if (!mr || mr->pd != qp->pd || !(mr->access & access) || !mr_contains(mr, vaddr, len))
		return NULL;
	return mr;
}

static int resp_write(struct nic_qp *qp, const struct nic_pkt *pkt)
{
	__u64 msg_start = pkt->vaddr - pkt->offset;
	struct nic_mr *mr;
	bool miss = false;
	int r;

	if (pkt->offset > pkt->vaddr || pkt->offset + pkt->len > pkt->msg_len)
		return SYN_NAK_INV_REQ;
	mr = resp_mr(qp, pkt->rkey, msg_start, pkt->msg_len, NIC_ACCESS_REMOTE_WRITE, &miss);
	if (!mr)
		return miss ? SYN_RNR_NAK : SYN_NAK_REM_ACCESS;
	r = nic_mr_dma(mr, pkt->vaddr, (void *)pkt->data, pkt->len, DMA_WRITE);
	if (r == -EFAULT) {
		r = nic_fault_range(qp, mr, pkt->vaddr, pkt->msg_len - pkt->offset, DMA_WRITE);
		return !r || r == -EAGAIN ? SYN_RNR_NAK : SYN_NAK_REM_ACCESS;
	}
	return r ? SYN_NAK_REM_ACCESS : 0;
}

/* A READ asked again while we still stream it: restart it where asked. */
static bool resp_read_queued(struct nic_qp *qp, __u32 first_psn, __u32 from)
{
	__u32 i;

	for (i = qp->rd_head; i != qp->rd_tail; i++) {
		struct nic_rd_job *job = &qp->rd[i % NIC_MAX_RD];

		if (job->first_psn == first_psn) {
			if (from < job->sent)
				job->sent = from;
			return true;
		}
	}
	return false;
}

/* Returns 0 (queued), -1 (dropped silently), or a NAK syndrome. */
static int resp_read(struct nic_qp *qp, const struct nic_pkt *pkt, bool dup)
{
	struct nic_mr *mr;
	struct nic_rd_job *job;
	bool miss = false;
	int r;

	__u32 from = pkt->offset / qp->mtu;

	/* from the message's packets: at its end there is nothing to resume */
	if (pkt->offset % qp->mtu || pkt->offset > pkt->msg_len ||
	    from >= npkts_of(qp, pkt->msg_len))
		return dup ? -1 : SYN_NAK_INV_REQ;
	if (dup && resp_read_queued(qp, pkt->psn - from, from))
		return -1;
	mr = resp_mr(qp, pkt->rkey, pkt->vaddr, pkt->msg_len, NIC_ACCESS_REMOTE_READ, &miss);
	if (!mr)
		return dup ? -1 : miss ? SYN_RNR_NAK : SYN_NAK_REM_ACCESS;
	r = nic_fault_range(qp, mr, pkt->vaddr + pkt->offset, pkt->msg_len - pkt->offset, DMA_READ);
	if (r)
		return dup ? -1 : r == -EAGAIN ? SYN_RNR_NAK : SYN_NAK_REM_ACCESS;
	if (qp->rd_tail - qp->rd_head >= NIC_MAX_RD)
		return -1;
	job = &qp->rd[qp->rd_tail++ % NIC_MAX_RD];
	job->rkey = pkt->rkey;
	job->vaddr = pkt->vaddr;
	job->len = pkt->msg_len;
	job->first_psn = pkt->psn - from;
	job->npkts = npkts_of(qp, pkt->msg_len);
	job->sent = from;
	return 0;
}

/*
 * The responder refuses a request for good: NAK, error state, and, when no
 * receive completion reported why (a WRITE or READ consumes no receive
 * WQE), the asynchronous event hardware gives.
 */
static void resp_fatal(struct nic_qp *qp, int syn)
{
	send_ack(qp, syn, qp->epsn);
	qp_set_error(qp);
	if (!qp->err_in_wc)
		nic_event(qp->nic,
			  syn == SYN_NAK_REM_ACCESS ? NIC_EVENT_QP_ACCESS_ERR :
			  syn == SYN_NAK_INV_REQ    ? NIC_EVENT_QP_REQ_ERR :
						      NIC_EVENT_QP_FATAL,
			  qp, NULL);
}

/* The responder accepted a request: the first one establishes the connection. */
static void resp_accepted(struct nic_qp *qp)
{
	if (!qp->comm_est) {
		qp->comm_est = true;
		nic_event(qp->nic, NIC_EVENT_COMM_EST, qp, NULL);
	}
}

static void resp_handle(struct nic_qp *qp, const struct nic_pkt *pkt)
{
	int d = psn_diff(pkt->psn, qp->epsn);
	int r;

	if (d < 0) {
		/* duplicate: the ACK was lost or a rewind resent it */
		if (pkt->op == PKT_READ_REQ)
			resp_read(qp, pkt, true);
		else
			qp->need_ack = true;
		return;
	}
	if (d > 0) {
		/*
		 * A gap: NAK it once, then again every 32 packets past it in
		 * case the NAK was lost. After an RNR NAK stay silent: the
		 * requester is waiting for its timer.
		 */
		if (!qp->nak_state || (qp->nak_syn == SYN_NAK_SEQ && ++qp->ooo % 32 == 0)) {
			qp->nak_state = true;
			qp->nak_syn = SYN_NAK_SEQ;
			qp->pend_nak = SYN_NAK_SEQ;
			qp->pend_nak_psn = qp->epsn;
			qp->nic->stats.seq_nak_tx++;
		}
		return;
	}
	switch (pkt->op) {
	case PKT_SEND:
		r = resp_send(qp, pkt);
		break;
	case PKT_WRITE:
		r = resp_write(qp, pkt);
		break;
	case PKT_READ_REQ:
		r = resp_read(qp, pkt, false);
		if (r == -1)
			return;
		if (!r) {
			resp_accepted(qp);
			qp->epsn += npkts_of(qp, pkt->msg_len) - pkt->offset / qp->mtu;
			qp->nak_state = false;
			qp->pend_nak = 0;
			return;
		}
		break;
	default:
		r = SYN_NAK_INV_REQ;
		break;
	}
	if (!r) {
		resp_accepted(qp);
		qp->epsn++;
		qp->nak_state = false;
		qp->pend_nak = 0;
		qp->need_ack = true;
		return;
	}
	if (SYN_FATAL(r)) {
		resp_fatal(qp, r);
		return;
	}
	/* RNR: drop everything after epsn until the requester comes back */
	qp->nic->stats.rnr_nak_tx++;
	qp->nak_state = true;
	qp->nak_syn = r;
	qp->pend_nak = r;
	qp->pend_nak_psn = qp->epsn;
}

/* Stream READ responses, then the ACK or NAK that follows them. */
static int resp_tx(struct nic_qp *qp, __u64 now, __u64 *deadline)
{
	int sent = 0;

	if (qp->rd_stall) {
		if (qp->fault_gen == qp->rd_stall_gen)
			return 0;
		qp->rd_stall = false;
	}
	while (qp->rd_head != qp->rd_tail && sent < NIC_BUDGET) {
		struct nic_rd_job *job = &qp->rd[qp->rd_head % NIC_MAX_RD];
		__u64 off = (__u64)job->sent * qp->mtu;
		__u64 n = min_u64(qp->mtu, job->len - off);
		struct nic_mr *mr =
			resp_mr(qp, job->rkey, job->vaddr, job->len, NIC_ACCESS_REMOTE_READ, NULL);
		struct nic_pkt *pkt;
		int r;

		if (!mr) {
			/* deregistered while we were reading it */
			send_ack(qp, SYN_NAK_REM_ACCESS, job->first_psn);
			qp_set_error(qp);
			nic_event(qp->nic, NIC_EVENT_QP_ACCESS_ERR, qp, NULL);
			return sent + 1;
		}
		pkt = pkt_begin(qp, PKT_READ_RESP, job->first_psn + job->sent);
		if (!pkt) {
			set_deadline(deadline, now + 50000);
			return sent;
		}
		r = nic_mr_dma(mr, job->vaddr + off, pkt->data, n, DMA_READ);
		if (r == -EFAULT) {
			r = nic_fault_range(qp, mr, job->vaddr + off, job->len - off, DMA_READ);
			if (r == -EAGAIN) {
				qp->rd_stall = true;
				qp->rd_stall_gen = qp->fault_gen;
				return sent;
			}
			if (!r)
				continue;
		}
		if (r) {
			send_ack(qp, SYN_NAK_REM_ACCESS, job->first_psn);
			qp_set_error(qp);
			nic_event(qp->nic, NIC_EVENT_QP_ACCESS_ERR, qp, NULL);
			return sent + 1;
		}
		pkt->len = n;
		pkt->msg_len = job->len;
		pkt->offset = off;
		nic_wire_tx_commit(qp, pkt);
		sent++;
		if (++job->sent == job->npkts)
			qp->rd_head++;
	}
	if (qp->rd_head != qp->rd_tail)
		return sent;
	if (qp->pend_nak) {
		if (!send_ack(qp, qp->pend_nak, qp->pend_nak_psn)) {
			set_deadline(deadline, now + 50000);
			return sent;
		}
		qp->pend_nak = 0;
		qp->need_ack = false;
		sent++;
	} else if (qp->need_ack) {
		if (!send_ack(qp, SYN_ACK, qp->epsn - 1)) {
			set_deadline(deadline, now + 50000);
			return sent;
		}
		qp->need_ack = false;
		sent++;
	}
	return sent;
}

/* ---- one pass ---------------------------------------------------------------------- */

static int qp_rx(struct nic_qp *qp, __u64 now)
{
	int n;

	for (n = 0; n < NIC_BUDGET; n++) {
		struct nic_pkt *pkt = nic_wire_rx_peek(qp);

		if (!pkt)
			break;
		if (qp->state == QPS_RTS) {
			if (pkt->op == PKT_ACK)
				req_handle_ack(qp, pkt, now);
			else if (pkt->op == PKT_READ_RESP)
				req_handle_read_resp(qp, pkt, now);
			else
				resp_handle(qp, pkt);
		}
		nic_wire_rx_release(qp);
	}
	return n;
}

int nic_qp_poll(struct nic_qp *qp, __u64 now, __u64 *deadline)
{
	int work;

	if (qp->state == QPS_INIT)
		return 0;
	work = qp_rx(qp, now);
	if (qp->state == QPS_RTS)
		work += resp_tx(qp, now, deadline);
	if (qp->state == QPS_RTS)
		work += req_tx(qp, now, deadline);
	if (qp->state == QPS_RTS)
		req_timer(qp, now, deadline);
	work += nic_qp_reissue_prs(qp, now, deadline);
	work += sq_retire(qp);
	if (qp->state == QPS_ERR)
		work += qp_flush(qp);
	return work;
}
