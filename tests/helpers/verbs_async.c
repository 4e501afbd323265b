// SPDX-License-Identifier: GPL-2.0
/*
 * Run by tests/verbs_async.sh under npf-run: asynchronous events of npf
 * devices through Debian's libibverbs (ibv_get_async_event on the
 * context's async_fd, ibv_ack_async_event), npf0 and npf1 in one process.
 *  - COMM_EST: the first SEND a QP in RTR receives; none once in RTS, none
 *    for the requester;
 *  - QP_ACCESS_ERR: the peer WRITEs with a bad rkey: the responder QP goes
 *    to ERR with the event, the requester gets REM_ACCESS_ERR in its
 *    completion and no event; ibv_destroy_qp waits until the event read is
 *    acknowledged;
 *  - QP_REQ_ERR: a RoCEv2 packet with an opcode npf devices do not
 *    implement (an atomic), sent from the peer's address at the expected
 *    PSN: the QP goes to ERR with the event;
 *  - CQ_ERR and QP_FATAL: a QP whose completion overruns its CQ; a QP
 *    destroyed with its event unread: the event is discarded, not read
 *    later naming a freed QP.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "../harness.h"
#include "verbs_helper.h"

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	union ibv_gid gid;
	char *buf;
	struct ibv_mr *mr;
};

static const size_t BUF = 1 << 16;

static void ep_open(struct ep *e, const char *name)
{
	e->ctx = open_dev(name);
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	TH_ASSERT(e->pd && e->cq, "%s: PD or CQ: %s", name, strerror(errno));
	TH_ASSERT(!ibv_query_gid(e->ctx, 1, 0, &e->gid), "%s: ibv_query_gid failed", name);
	e->buf = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(e->buf != MAP_FAILED, "mmap");
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ);
	TH_ASSERT(e->mr, "%s: reg_mr: %s", name, strerror(errno));
}

static void rtr(struct ibv_qp *qp, const union ibv_gid *dgid, uint32_t dqpn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_4096,
		.dest_qp_num = dqpn,
		.rq_psn = 1000,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 1,
		.ah_attr = {.is_global = 1, .port_num = 1, .grh = {.dgid = *dgid, .hop_limit = 1}}};

	TH_ASSERT(!ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					 IBV_QP_MIN_RNR_TIMER),
		  "QP %u: RTR failed", qp->qp_num);
}

static void rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS,
				.sq_psn = 1000,
				.timeout = 14,
				.retry_cnt = 7,
				.rnr_retry = 7,
				.max_rd_atomic = 1};

	TH_ASSERT(!ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					 IBV_QP_MAX_QP_RD_ATOMIC),
		  "QP %u: RTS failed", qp->qp_num);
}

static struct ibv_wc wait_wc(struct ibv_cq *cq, double secs, const char *what)
{
	double end = now_s() + secs;
	struct ibv_wc wc;

	while (now_s() < end) {
		int n = ibv_poll_cq(cq, 1, &wc);

		TH_ASSERT(n >= 0, "%s: ibv_poll_cq failed", what);
		if (n)
			return wc;
		usleep(200);
	}
	th_fail("%s: no completion within %.0f s", what, secs);
}

static void post(struct ibv_qp *qp, enum ibv_wr_opcode op, struct ep *e, uint32_t len,
		 uint64_t raddr, uint32_t rkey, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf, .length = len, .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr.rdma = {.remote_addr = raddr, .rkey = rkey}},
			   *bad;

	TH_ASSERT(!ibv_post_send(qp, &wr, &bad), "ibv_post_send failed");
}

static void post_recv(struct ibv_qp *qp, struct ep *e, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf, .length = 4096, .lkey = e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;

	TH_ASSERT(!ibv_post_recv(qp, &wr, &bad), "ibv_post_recv failed");
}

/* The next asynchronous event within ms, through ibv_get_async_event; 0 if none came. */
static int get_event(struct ibv_context *ctx, int ms, struct ibv_async_event *ev)
{
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
	int r = poll(&p, 1, ms);

	TH_ASSERT(r >= 0, "poll on the async fd: %s", strerror(errno));
	if (!r)
		return 0;
	TH_ASSERT(!ibv_get_async_event(ctx, ev), "ibv_get_async_event failed: %s", strerror(errno));
	return 1;
}

static struct ibv_async_event expect_qp_event(struct ibv_context *ctx, enum ibv_event_type t,
					      struct ibv_qp *qp, const char *what, bool ack)
{
	struct ibv_async_event ev;

	TH_ASSERT(get_event(ctx, 10000, &ev), "%s: no asynchronous event within 10 s", what);
	TH_ASSERT(ev.event_type == t && ev.element.qp == qp,
		  "%s: event %s for %p, want %s for QP %u (%p)", what,
		  ibv_event_type_str(ev.event_type), (void *)ev.element.qp, ibv_event_type_str(t),
		  qp->qp_num, (void *)qp);
	printf("%s: %s on QP %u\n", what, ibv_event_type_str(t), qp->qp_num);
	if (ack)
		ibv_ack_async_event(&ev);
	return ev;
}

static void expect_none(struct ibv_context *ctx, int ms, const char *what)
{
	struct ibv_async_event ev;

	if (get_event(ctx, ms, &ev))
		th_fail("%s: unexpected event %s", what, ibv_event_type_str(ev.event_type));
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;

	TH_ASSERT(!ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi), "query_qp");
	return qa.qp_state;
}

static struct ibv_qp *destroy_target;
static volatile int destroy_ret = -1;

static void *destroy_thread(void *arg)
{
	destroy_ret = ibv_destroy_qp(destroy_target);
	return NULL;
}

/* ICRC of a RoCEv2 datagram (IBTA annex A17), as nic/nic_roce.c computes it. */
static uint32_t crc32_le(uint32_t crc, const uint8_t *p, size_t len)
{
	int j;

	while (len--) {
		crc ^= *p++;
		for (j = 0; j < 8; j++)
			crc = crc & 1 ? 0xedb88320 ^ (crc >> 1) : crc >> 1;
	}
	return crc;
}

static uint32_t icrc(const uint8_t *bth, size_t len, uint32_t sa, uint32_t da, uint16_t sp,
		     uint16_t dp)
{
	uint8_t ps[40];
	uint16_t tot = htons(28 + len), ulen = htons(8 + len);

	memset(ps, 0, sizeof(ps));
	ps[0] = 0x45;
	ps[1] = 0xff;
	memcpy(ps + 2, &tot, 2);
	ps[6] = 0x40;
	ps[8] = 0xff;
	ps[9] = 17;
	ps[10] = ps[11] = 0xff;
	memcpy(ps + 12, &sa, 4);
	memcpy(ps + 16, &da, 4);
	memcpy(ps + 20, &sp, 2);
	memcpy(ps + 22, &dp, 2);
	memcpy(ps + 24, &ulen, 2);
	ps[26] = ps[27] = 0xff;
	memcpy(ps + 28, bth, 12);
	ps[32] = 0xff;
	return ~crc32_le(crc32_le(0xdebb20e3, ps, sizeof(ps)), bth + 12, len - 12 - 4);
}

/* A CompareSwap request (opcode 0x13) to qpn at psn, from `from`'s address to `to`'s device. */
static void send_atomic(const union ibv_gid *from, const union ibv_gid *to, uint32_t qpn,
			uint32_t psn)
{
	struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
	socklen_t sl = sizeof(src);
	uint8_t pkt[12 + 28 + 4] = {0};
	uint32_t c;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	TH_ASSERT(fd >= 0, "socket");
	memcpy(&src.sin_addr, from->raw + 12, 4);
	memcpy(&dst.sin_addr, to->raw + 12, 4);
	dst.sin_port = htons(4791);
	TH_ASSERT(!bind(fd, (struct sockaddr *)&src, sizeof(src)), "bind: %s", strerror(errno));
	TH_ASSERT(!getsockname(fd, (struct sockaddr *)&src, &sl), "getsockname");
	pkt[0] = 0x13;
	pkt[2] = pkt[3] = 0xff;
	pkt[5] = qpn >> 16;
	pkt[6] = qpn >> 8;
	pkt[7] = qpn;
	pkt[8] = 0x80;
	pkt[9] = psn >> 16;
	pkt[10] = psn >> 8;
	pkt[11] = psn;
	c = icrc(pkt, sizeof(pkt), src.sin_addr.s_addr, dst.sin_addr.s_addr, src.sin_port,
		 dst.sin_port);
	pkt[sizeof(pkt) - 4] = c;
	pkt[sizeof(pkt) - 3] = c >> 8;
	pkt[sizeof(pkt) - 2] = c >> 16;
	pkt[sizeof(pkt) - 1] = c >> 24;
	TH_ASSERT(sendto(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&dst, sizeof(dst)) ==
			  sizeof(pkt),
		  "sendto: %s", strerror(errno));
	close(fd);
}

int main(void)
{
	struct ep a, b;
	struct ibv_qp *qa, *qb, *qa2, *qb2, *qa3, *qb3, *qa4, *qb4;
	struct ibv_cq *tiny;
	struct ibv_async_event ev;
	struct ibv_wc wc;
	pthread_t th;
	double t0;
	int i;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	ep_open(&a, "npf0");
	ep_open(&b, "npf1");

	/* COMM_EST: the first SEND b's QP receives in RTR */
	qa = new_qp(a.pd, a.cq);
	qb = new_qp(b.pd, b.cq);
	rtr(qb, &a.gid, qa->qp_num);
	rtr(qa, &b.gid, qb->qp_num);
	rts(qa);
	post_recv(qb, &b, 1);
	post_recv(qb, &b, 2);
	post(qa, IBV_WR_SEND, &a, 64, 0, 0, 10);
	wc = wait_wc(a.cq, 10, "SEND to a QP in RTR");
	TH_ASSERT(wc.status == IBV_WC_SUCCESS, "SEND to a QP in RTR: %s",
		  ibv_wc_status_str(wc.status));
	wc = wait_wc(b.cq, 10, "receive in RTR");
	TH_ASSERT(wc.status == IBV_WC_SUCCESS && wc.wr_id == 1, "receive in RTR: %s",
		  ibv_wc_status_str(wc.status));
	expect_qp_event(b.ctx, IBV_EVENT_COMM_EST, qb, "first SEND received in RTR", true);
	rts(qb);
	post(qa, IBV_WR_SEND, &a, 64, 0, 0, 11);
	wc = wait_wc(b.cq, 10, "receive in RTS");
	TH_ASSERT(wc.status == IBV_WC_SUCCESS && wc.wr_id == 2, "receive in RTS failed");
	wait_wc(a.cq, 10, "second SEND");
	expect_none(b.ctx, 300, "second SEND, QP in RTS");
	expect_none(a.ctx, 1, "requester of both SENDs");

	/* QP_ACCESS_ERR: a WRITE with a bad rkey; the requester's error is its completion */
	post(qa, IBV_WR_RDMA_WRITE, &a, 4096, (uintptr_t)b.buf, b.mr->rkey ^ 0x5a5a0000, 12);
	wc = wait_wc(a.cq, 10, "WRITE with a bad rkey");
	TH_ASSERT(wc.wr_id == 12 && wc.status == IBV_WC_REM_ACCESS_ERR,
		  "WRITE with a bad rkey: %s, want REM_ACCESS_ERR", ibv_wc_status_str(wc.status));
	ev = expect_qp_event(b.ctx, IBV_EVENT_QP_ACCESS_ERR, qb, "peer WRITE with a bad rkey",
			     false);
	TH_ASSERT(qp_state(qb) == IBV_QPS_ERR, "the responder is not in ERR");
	expect_none(a.ctx, 300, "requester of the bad WRITE (its error is in the completion)");
	/* destroy waits for the acknowledgement of the event it read */
	destroy_target = qb;
	TH_ASSERT(!pthread_create(&th, NULL, destroy_thread, NULL), "pthread_create");
	usleep(300000);
	TH_ASSERT(destroy_ret == -1,
		  "ibv_destroy_qp returned before the event read was acknowledged");
	ibv_ack_async_event(&ev);
	t0 = now_s();
	while (destroy_ret == -1 && now_s() < t0 + 5)
		usleep(1000);
	TH_ASSERT(destroy_ret == 0, "ibv_destroy_qp did not return after the acknowledgement (%d)",
		  destroy_ret);
	pthread_join(th, NULL);
	printf("destroy_qp waited for the acknowledgement\n");

	/* QP_REQ_ERR: an atomic (not implemented) at the expected PSN */
	qa2 = new_qp(a.pd, a.cq);
	qb2 = new_qp(b.pd, b.cq);
	rtr(qa2, &b.gid, qb2->qp_num);
	rts(qa2);
	send_atomic(&b.gid, &a.gid, qa2->qp_num, 1000);
	expect_qp_event(a.ctx, IBV_EVENT_QP_REQ_ERR, qa2, "atomic request", true);
	TH_ASSERT(qp_state(qa2) == IBV_QPS_ERR, "the responder of the atomic is not in ERR");

	/* CQ_ERR and QP_FATAL: three signaled WRITEs into a CQ of one entry, nobody polling */
	tiny = ibv_create_cq(a.ctx, 1, NULL, NULL, 0);
	TH_ASSERT(tiny, "create_cq(1)");
	qa3 = new_qp(a.pd, tiny);
	qb3 = new_qp(b.pd, b.cq);
	rtr(qa3, &b.gid, qb3->qp_num);
	rtr(qb3, &a.gid, qa3->qp_num);
	rts(qa3);
	rts(qb3);
	for (i = 0; i < 3; i++)
		post(qa3, IBV_WR_RDMA_WRITE, &a, 64, (uintptr_t)b.buf, b.mr->rkey, 20 + i);
	TH_ASSERT(get_event(a.ctx, 10000, &ev), "CQ overrun: no event within 10 s");
	TH_ASSERT(ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == tiny,
		  "CQ overrun: first event %s, want CQ_ERR on the CQ",
		  ibv_event_type_str(ev.event_type));
	ibv_ack_async_event(&ev);
	printf("CQ overrun: IBV_EVENT_CQ_ERR on the CQ\n");
	expect_qp_event(a.ctx, IBV_EVENT_QP_FATAL, qa3, "completion lost to a full CQ", true);
	TH_ASSERT(qp_state(qa3) == IBV_QPS_ERR, "the QP whose completion was lost is not in ERR");

	/* an event nobody read when its QP is destroyed: discarded, never read later */
	qa4 = new_qp(a.pd, a.cq);
	qb4 = new_qp(b.pd, b.cq);
	rtr(qa4, &b.gid, qb4->qp_num);
	rtr(qb4, &a.gid, qa4->qp_num);
	rts(qa4);
	rts(qb4);
	post(qa4, IBV_WR_RDMA_WRITE, &a, 64, (uintptr_t)b.buf, b.mr->rkey ^ 0x5a5a0000, 30);
	wc = wait_wc(a.cq, 10, "second WRITE with a bad rkey");
	TH_ASSERT(wc.status == IBV_WC_REM_ACCESS_ERR, "second bad WRITE: %s",
		  ibv_wc_status_str(wc.status));
	{
		struct pollfd p = {.fd = b.ctx->async_fd, .events = POLLIN};

		TH_ASSERT(poll(&p, 1, 5000) == 1, "QP_ACCESS_ERR never became readable");
	}
	TH_ASSERT(!ibv_destroy_qp(qb4), "destroy_qp with an unread event");
	expect_none(b.ctx, 300, "after destroying a QP with its event unread");
	printf("event unread at destroy: discarded\n");

	TH_ASSERT(!ibv_destroy_qp(qa3) && !ibv_destroy_cq(tiny), "destroy the overrun QP and CQ");
	TH_ASSERT(!ibv_destroy_qp(qa) && !ibv_destroy_qp(qa2) && !ibv_destroy_qp(qb2) &&
			  !ibv_destroy_qp(qb3) && !ibv_destroy_qp(qa4),
		  "destroy_qp");
	printf("ok\n");
	return 0;
}
