/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One side of an RDMA pair on the software NIC with npf memory, for the tests
 * that open their sides themselves (nic_npfd_write, evict_nic, evict_stress):
 * the objects, one signaled RDMA WRITE, and waiting for a completion.
 * Include after harness.h, npf.h and npf_nic.h.
 */
#ifndef NIC_SIDE_H
#define NIC_SIDE_H

struct side {
	struct npf_client *npf;
	struct nic *nic;
	struct nic_pd *pd;
	struct nic_cq *cq;
	struct nic_qp *qp;
	struct nic_mr *mr;
	char *mem;
	int region, device;
};

/* One signaled RDMA WRITE of [mem + off, + len) to raddr + off. */
static inline void side_post_write(struct side *s, uint64_t off, __u32 len, __u64 raddr, __u32 rkey,
				   uint64_t id)
{
	struct nic_sge sge = {.addr = (__u64)(uintptr_t)(s->mem + off),
			      .length = len,
			      .lkey = nic_mr_lkey(s->mr)};
	struct nic_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = NIC_WR_RDMA_WRITE,
				 .send_flags = NIC_SEND_SIGNALED,
				 .remote_addr = raddr + off,
				 .rkey = rkey};
	struct nic_send_wr *bad;
	int err = nic_post_send(s->qp, &wr, &bad);

	TH_ASSERT(err == 0, "post write %llu: %s", (unsigned long long)id, strerror(-err));
}

/* The next completion, within 60 s; it must be a success. */
static inline void side_wait_one(struct side *s, uint64_t id)
{
	struct nic_wc wc;

	for (;;) {
		TH_ASSERT(nic_cq_wait(s->cq, 60000) == 0, "no completion for WR %llu within 60 s",
			  (unsigned long long)id);
		if (nic_poll_cq(s->cq, 1, &wc) == 1)
			break;
	}
	TH_ASSERT(wc.status == NIC_WC_SUCCESS, "WR %llu completed with %s",
		  (unsigned long long)wc.wr_id, nic_wc_status_str(wc.status));
}

#endif
