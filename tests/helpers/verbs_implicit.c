// SPDX-License-Identifier: GPL-2.0
/*
 * Run by tests/verbs_implicit.sh under npf-run with a private npfd: a
 * peer's RDMA WRITE and READ through an implicit on-demand MR's rkey
 * (ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND)), npf0 -> npf1 in
 * one process. The WRITE lands in never-touched memory, the READ reads
 * memory the device never saw; bytes are checked. A WRITE through the rkey
 * into no mapping at all fails with REM_ACCESS_ERR. The script checks that
 * npf1's NIC raised page requests and npfd answered them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "../harness.h"
#include "verbs_helper.h"

#define MSG (1u << 20)

static void connect_qp(struct ibv_qp *qp, const union ibv_gid *dgid, uint32_t dqpn)
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
		  "RTR failed");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1000;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	TH_ASSERT(!ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					 IBV_QP_MAX_QP_RD_ATOMIC),
		  "RTS failed");
}

static struct ibv_wc rdma(struct ibv_qp *qp, struct ibv_cq *cq, enum ibv_wr_opcode op, void *buf,
			  uint32_t lkey, uint64_t raddr, uint32_t rkey, const char *what)
{
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = MSG, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr.rdma = {.remote_addr = raddr, .rkey = rkey}},
			   *bad;
	double end = now_s() + 30;
	struct ibv_wc wc;

	TH_ASSERT(!ibv_post_send(qp, &wr, &bad), "%s: ibv_post_send failed", what);
	while (now_s() < end) {
		int n = ibv_poll_cq(cq, 1, &wc);

		TH_ASSERT(n >= 0, "%s: poll_cq", what);
		if (n)
			return wc;
		usleep(100);
	}
	th_fail("%s: no completion within 30 s", what);
}

int main(void)
{
	struct ibv_context *ca = open_dev("npf0"), *cb = open_dev("npf1");
	struct ibv_pd *pa = ibv_alloc_pd(ca), *pb = ibv_alloc_pd(cb);
	struct ibv_cq *qa_cq = ibv_create_cq(ca, 16, NULL, NULL, 0);
	struct ibv_cq *qb_cq = ibv_create_cq(cb, 16, NULL, NULL, 0);
	struct ibv_qp *qa, *qb;
	union ibv_gid ga, gb;
	struct ibv_mr *amr, *imr;
	unsigned char *abuf, *wbuf, *rbuf;
	/* below mmap_min_addr: never mapped (a hole made with munmap fills up with allocations) */
	const uintptr_t hole = 0x1000;
	struct ibv_wc wc;
	size_t i;

	TH_ASSERT(pa && pb && qa_cq && qb_cq, "PD or CQ: %s", strerror(errno));
	TH_ASSERT(!ibv_query_gid(ca, 1, 0, &ga) && !ibv_query_gid(cb, 1, 0, &gb), "query_gid");
	abuf = mmap(NULL, 2 * MSG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	wbuf = mmap(NULL, 4 * MSG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	rbuf = mmap(NULL, MSG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(abuf != MAP_FAILED && wbuf != MAP_FAILED && rbuf != MAP_FAILED, "mmap");
	for (i = 0; i < MSG; i++) {
		abuf[i] = (unsigned char)(i * 7 + 3);
		rbuf[i] = (unsigned char)(i * 13 + 5); /* the CPU's, never the device's */
	}
	amr = ibv_reg_mr(pa, abuf, 2 * MSG, IBV_ACCESS_LOCAL_WRITE);
	imr = ibv_reg_mr(pb, NULL, SIZE_MAX,
			 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ);
	TH_ASSERT(amr && imr, "reg_mr: %s", strerror(errno));
	qa = new_qp(pa, qa_cq);
	qb = new_qp(pb, qb_cq);
	connect_qp(qa, &gb, qb->qp_num);
	connect_qp(qb, &ga, qa->qp_num);

	/* WRITE into never-touched memory through the implicit rkey */
	wc = rdma(qa, qa_cq, IBV_WR_RDMA_WRITE, abuf, amr->lkey, (uintptr_t)wbuf + 3 * 4096,
		  imr->rkey, "WRITE through the implicit rkey");
	TH_ASSERT(wc.status == IBV_WC_SUCCESS, "WRITE through the implicit rkey: %s",
		  ibv_wc_status_str(wc.status));
	TH_ASSERT(!memcmp(wbuf + 3 * 4096, abuf, MSG), "the WRITE's bytes did not land");
	for (i = 0; i < 3 * 4096; i++)
		TH_ASSERT(!wbuf[i], "the WRITE touched bytes before its target");
	printf("WRITE of %u bytes through the implicit rkey: bytes ok\n", MSG);

	/* READ memory the device never saw through the implicit rkey */
	wc = rdma(qa, qa_cq, IBV_WR_RDMA_READ, abuf + MSG, amr->lkey, (uintptr_t)rbuf, imr->rkey,
		  "READ through the implicit rkey");
	TH_ASSERT(wc.status == IBV_WC_SUCCESS, "READ through the implicit rkey: %s",
		  ibv_wc_status_str(wc.status));
	TH_ASSERT(!memcmp(abuf + MSG, rbuf, MSG), "the READ's bytes are wrong");
	printf("READ of %u bytes through the implicit rkey: bytes ok\n", MSG);

	/* a WRITE through it where nothing is mapped: refused as outside an MR */
	wc = rdma(qa, qa_cq, IBV_WR_RDMA_WRITE, abuf, amr->lkey, hole, imr->rkey,
		  "WRITE to no mapping");
	TH_ASSERT(wc.status == IBV_WC_REM_ACCESS_ERR,
		  "WRITE to no mapping: %s, want REM_ACCESS_ERR", ibv_wc_status_str(wc.status));
	printf("WRITE through the implicit rkey to no mapping: REM_ACCESS_ERR\n");

	TH_ASSERT(!ibv_destroy_qp(qa) && !ibv_destroy_qp(qb), "destroy_qp");
	TH_ASSERT(!ibv_dereg_mr(imr) && !ibv_dereg_mr(amr), "dereg_mr");
	TH_ASSERT(!ibv_destroy_cq(qa_cq) && !ibv_destroy_cq(qb_cq), "destroy_cq");
	TH_ASSERT(!ibv_dealloc_pd(pa) && !ibv_dealloc_pd(pb), "dealloc_pd");
	ibv_close_device(ca);
	ibv_close_device(cb);
	printf("ok\n");
	return 0;
}
