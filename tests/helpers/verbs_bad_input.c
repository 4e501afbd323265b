// SPDX-License-Identifier: GPL-2.0
/*
 * Run by tests/verbs_bad_input.sh under npf-run with a private npfd
 * ($NPFD_PID): plain libibverbs calls on npf devices npf0 and npf1 in one
 * process, with bad input. Each case must end with a clear error or an
 * error completion as hardware gives them, within a bounded time:
 *  - modify_qp with an attribute npf devices do not know: refused, the QP
 *    still works;
 *  - INIT -> RTR without a GID (a LID only): refused;
 *  - timeout or retry_cnt out of range: EINVAL;
 *  - a QP connected to a GID nobody owns: its SEND completes with
 *    RETRY_EXC_ERR after the timeout and retry_cnt the QP was given (not
 *    before, not much after), the next WR with WR_FLUSH_ERR, and query_qp
 *    says ERR;
 *  - an on-demand MR deregistered while the peer's WRITE into it waits for
 *    a page (npfd held with SIGSTOP): dereg returns once npfd resumes, and
 *    the WRITE completes (successfully if npfd served it first, else with
 *    REM_ACCESS_ERR), nothing hangs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include "../harness.h"
#include "verbs_helper.h"

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;
	char *buf;
	struct ibv_mr *mr;
};

static const size_t BUF = 1 << 20;

static void ep_open(struct ep *e, const char *name)
{
	e->ctx = open_dev(name);
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	TH_ASSERT(e->pd && e->cq, "%s: PD or CQ: %s", name, strerror(errno));
	TH_ASSERT(!ibv_query_gid(e->ctx, 1, 0, &e->gid), "%s: ibv_query_gid failed", name);
	e->qp = new_qp(e->pd, e->cq);
	e->buf = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(e->buf != MAP_FAILED, "mmap");
}

/* RTR then RTS; timeout (IB code: 4.096 µs << timeout) and retry_cnt as given */
static int rtr_rts_t(struct ibv_qp *qp, const union ibv_gid *dgid, uint32_t dqpn, uint8_t timeout,
		     uint8_t retry_cnt)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_4096,
		.dest_qp_num = dqpn,
		.rq_psn = 1000,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 1,
		.ah_attr = {.is_global = 1, .port_num = 1, .grh = {.dgid = *dgid, .hop_limit = 1}}};
	int r = ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER);

	if (r)
		return r;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1000;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int rtr_rts(struct ibv_qp *qp, const union ibv_gid *dgid, uint32_t dqpn)
{
	return rtr_rts_t(qp, dgid, dqpn, 14, 7); /* what perftest and ibv_rc_pingpong set */
}

/* The next completion on cq within secs, or fail. */
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
	th_fail("%s: no completion within %.0f s (something hangs)", what, secs);
}

static void post(struct ibv_qp *qp, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
		 uint64_t raddr, uint32_t rkey, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr.rdma = {.remote_addr = raddr, .rkey = rkey}},
			   *bad;

	TH_ASSERT(!ibv_post_send(qp, &wr, &bad), "ibv_post_send failed");
}

/* The RoCEv2 GID of an IPv4 address: ::ffff:a.b.c.d */
static int inet_pton_gid(const char *ip, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = gid->raw[11] = 0xff;
	return inet_pton(AF_INET, ip, gid->raw + 12) == 1;
}

static struct ibv_mr *dereg_target;
static int dereg_ret = -1;

static void *dereg_thread(void *arg)
{
	dereg_ret = ibv_dereg_mr(dereg_target);
	return NULL;
}

int main(void)
{
	struct ep a, b;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_wc wc;
	struct ibv_qp *lost;
	union ibv_gid nobody;
	const char *pid_s = getenv("NPFD_PID"), *nob = getenv("NOBODY_GID_ADDR");
	pid_t npfd = pid_s ? atoi(pid_s) : 0;
	pthread_t th;
	uint32_t dead_rkey;
	double t0, t;
	int r;

	TH_ASSERT(npfd > 0 && nob, "run me from tests/verbs_bad_input.sh");
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	ep_open(&a, "npf0");
	ep_open(&b, "npf1");

	/* an attribute npf devices do not know: refused, the QP unchanged */
	memset(&qa, 0, sizeof(qa));
	r = ibv_modify_qp(a.qp, &qa, IBV_QP_ALT_PATH);
	TH_ASSERT(r == EOPNOTSUPP, "modify_qp(IBV_QP_ALT_PATH) returned %d, want EOPNOTSUPP", r);
	TH_ASSERT(!ibv_query_qp(a.qp, &qa, IBV_QP_STATE, &qi) && qa.qp_state == IBV_QPS_INIT,
		  "the refused modify_qp changed the QP's state");
	printf("unknown attribute: EOPNOTSUPP, QP still INIT\n");

	/* out of IB's ranges: retry_cnt and rnr_retry are 3 bits, timeout 5 */
	memset(&qa, 0, sizeof(qa));
	qa.retry_cnt = 8;
	r = ibv_modify_qp(a.qp, &qa, IBV_QP_RETRY_CNT);
	TH_ASSERT(r == EINVAL, "modify_qp(retry_cnt 8) returned %d, want EINVAL", r);
	qa.retry_cnt = 0;
	qa.timeout = 32;
	r = ibv_modify_qp(a.qp, &qa, IBV_QP_TIMEOUT);
	TH_ASSERT(r == EINVAL, "modify_qp(timeout 32) returned %d, want EINVAL", r);
	printf("retry_cnt 8, timeout 32: EINVAL\n");

	/* RTR with a LID only: npf devices are IP addresses */
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTR;
	qa.path_mtu = IBV_MTU_1024;
	qa.dest_qp_num = b.qp->qp_num;
	qa.ah_attr.dlid = 1;
	qa.ah_attr.port_num = 1;
	r = ibv_modify_qp(a.qp, &qa,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN);
	TH_ASSERT(r == EINVAL, "RTR without a GID returned %d, want EINVAL", r);
	printf("RTR without a GID: EINVAL\n");

	/* the pair works after all that */
	TH_ASSERT(!rtr_rts(a.qp, &b.gid, b.qp->qp_num) && !rtr_rts(b.qp, &a.gid, a.qp->qp_num),
		  "connecting npf0 and npf1 failed");
	a.mr = ibv_reg_mr(a.pd, a.buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	TH_ASSERT(a.mr, "pinned reg_mr: %s", strerror(errno));
	memset(a.buf, 0x5a, BUF);
	b.mr = ibv_reg_mr(b.pd, b.buf, BUF,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ON_DEMAND);
	TH_ASSERT(b.mr, "on-demand reg_mr: %s", strerror(errno));
	post(a.qp, IBV_WR_RDMA_WRITE, a.buf, 4096, a.mr->lkey, (uintptr_t)b.buf, b.mr->rkey, 1);
	wc = wait_wc(a.cq, 10, "first WRITE");
	TH_ASSERT(wc.status == IBV_WC_SUCCESS, "first WRITE: %s", ibv_wc_status_str(wc.status));
	TH_ASSERT(b.buf[100] == 0x5a, "the WRITE did not land");
	printf("npf0 -> npf1 WRITE into on-demand memory: ok\n");

	/*
	 * a GID nobody owns: retries run out, after the QP's own timeout and
	 * retry_cnt. timeout 8 (1 ms), 1 retry: the error comes within
	 * milliseconds (the NIC's own 10 ms, 7 retries, doubling, would take
	 * 0.8 s); timeout 18 (1.07 s), no retry: not before 1.07 s.
	 */
	TH_ASSERT(inet_pton_gid(nob, &nobody), "bad NOBODY_GID_ADDR");
	lost = new_qp(a.pd, a.cq);
	TH_ASSERT(!rtr_rts_t(lost, &nobody, 0x123, 18, 0),
		  "connecting to a GID nobody owns was refused");
	t0 = now_s();
	post(lost, IBV_WR_SEND, a.buf, 64, a.mr->lkey, 0, 0, 5);
	wc = wait_wc(a.cq, 30, "SEND to nobody, timeout 18, retry_cnt 0");
	t = now_s() - t0;
	TH_ASSERT(wc.wr_id == 5 && wc.status == IBV_WC_RETRY_EXC_ERR,
		  "SEND to nobody: wr %llu %s, want RETRY_EXC_ERR", (unsigned long long)wc.wr_id,
		  ibv_wc_status_str(wc.status));
	TH_ASSERT(t >= 1.07, "timeout 18 (1.07 s), retry_cnt 0: RETRY_EXC_ERR after %.3f s", t);
	printf("GID nobody owns, timeout 18, retry_cnt 0: RETRY_EXC_ERR after %.2f s\n", t);
	TH_ASSERT(!ibv_destroy_qp(lost), "destroy_qp");
	lost = new_qp(a.pd, a.cq);
	TH_ASSERT(!rtr_rts_t(lost, &nobody, 0x123, 8, 1),
		  "connecting to a GID nobody owns was refused");
	t0 = now_s();
	post(lost, IBV_WR_SEND, a.buf, 64, a.mr->lkey, 0, 0, 2);
	post(lost, IBV_WR_SEND, a.buf, 64, a.mr->lkey, 0, 0, 3);
	wc = wait_wc(a.cq, 30, "SEND to nobody");
	TH_ASSERT(wc.wr_id == 2 && wc.status == IBV_WC_RETRY_EXC_ERR,
		  "SEND to nobody: wr %llu %s, want RETRY_EXC_ERR", (unsigned long long)wc.wr_id,
		  ibv_wc_status_str(wc.status));
	wc = wait_wc(a.cq, 5, "WR behind it");
	TH_ASSERT(wc.wr_id == 3 && wc.status == IBV_WC_WR_FLUSH_ERR,
		  "the WR behind it: wr %llu %s, want WR_FLUSH_ERR", (unsigned long long)wc.wr_id,
		  ibv_wc_status_str(wc.status));
	TH_ASSERT(!ibv_query_qp(lost, &qa, IBV_QP_STATE, &qi) && qa.qp_state == IBV_QPS_ERR,
		  "the QP is not in ERR after RETRY_EXC_ERR");
	t = now_s() - t0;
	TH_ASSERT(t < 0.4, "timeout 8 (1 ms), retry_cnt 1: RETRY_EXC_ERR only after %.3f s", t);
	printf("GID nobody owns, timeout 8, retry_cnt 1: RETRY_EXC_ERR after %.3f s, then WR_FLUSH_ERR, QP in ERR\n",
	       t);
	TH_ASSERT(!ibv_destroy_qp(lost), "destroy_qp");

	/* dereg while the peer's WRITE waits for a page npfd does not serve yet */
	TH_ASSERT(!kill(npfd, SIGSTOP), "SIGSTOP npfd");
	post(a.qp, IBV_WR_RDMA_WRITE, a.buf, BUF, a.mr->lkey, (uintptr_t)b.buf, b.mr->rkey, 4);
	usleep(200000);
	TH_ASSERT(ibv_poll_cq(a.cq, 1, &wc) == 0, "the WRITE completed while npfd was stopped");
	dereg_target = b.mr;
	dead_rkey = b.mr->rkey;
	TH_ASSERT(!pthread_create(&th, NULL, dereg_thread, NULL), "pthread_create");
	usleep(200000);
	TH_ASSERT(!kill(npfd, SIGCONT), "SIGCONT npfd");
	t0 = now_s();
	while (dereg_ret == -1 && now_s() < t0 + 10)
		usleep(1000);
	TH_ASSERT(dereg_ret != -1, "dereg_mr did not return within 10 s of npfd resuming");
	pthread_join(th, NULL);
	TH_ASSERT(dereg_ret == 0, "dereg_mr while faulting returned %d", dereg_ret);
	wc = wait_wc(a.cq, 30, "WRITE into a deregistered MR");
	TH_ASSERT(wc.wr_id == 4 &&
			  (wc.status == IBV_WC_SUCCESS || wc.status == IBV_WC_REM_ACCESS_ERR),
		  "WRITE racing dereg: %s, want SUCCESS or REM_ACCESS_ERR",
		  ibv_wc_status_str(wc.status));
	printf("dereg while faulting: dereg returned 0, the WRITE completed: %s\n",
	       ibv_wc_status_str(wc.status));

	/* and a WRITE with the dead rkey fails as hardware fails it */
	if (wc.status == IBV_WC_SUCCESS) {
		post(a.qp, IBV_WR_RDMA_WRITE, a.buf, 4096, a.mr->lkey, (uintptr_t)b.buf, dead_rkey,
		     5);
		wc = wait_wc(a.cq, 30, "WRITE with a deregistered rkey");
		TH_ASSERT(wc.status == IBV_WC_REM_ACCESS_ERR,
			  "WRITE with a deregistered rkey: %s, want REM_ACCESS_ERR",
			  ibv_wc_status_str(wc.status));
	}
	printf("ok\n");
	return 0;
}
