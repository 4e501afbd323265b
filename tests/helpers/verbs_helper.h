/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the verbs test helpers share: open an npf device by name, an RC QP
 * in INIT, a monotonic clock. Included after ../harness.h.
 */
#ifndef VERBS_HELPER_H
#define VERBS_HELPER_H

#include <errno.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

static inline struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *c = NULL;
	int i;

	TH_ASSERT(l, "ibv_get_device_list: %s", strerror(errno));
	for (i = 0; l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			c = ibv_open_device(l[i]);
	ibv_free_device_list(l);
	TH_ASSERT(c, "cannot open %s: %s", name, strerror(errno));
	return c;
}

/* An RC QP on cq, moved to INIT with remote READ and WRITE allowed. */
static inline struct ibv_qp *new_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	TH_ASSERT(qp, "ibv_create_qp: %s", strerror(errno));
	TH_ASSERT(!ibv_modify_qp(qp, &a,
				 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS),
		  "modify_qp to INIT failed");
	return qp;
}

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif
