// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The packets' form on a NIC_WIRE_ROCE link (one UDP socket per device,
 * packets demultiplexed by destination QPN).
 */
#include <errno.h>
#include <string.h>
#include "nic_internal.h"

__u32 nic_roce_dst_qpn(const void *dgram, size_t len)
{
	const struct nic_pkt *pkt = dgram;

	if (len < sizeof(*pkt) || pkt->magic != NIC_PKT_MAGIC)
		return 0;
	return pkt->dst_qpn;
}

ssize_t nic_roce_encode(struct nic_qp *qp, const struct nic_pkt *pkt, void *dgram)
{
	memcpy(dgram, pkt, sizeof(*pkt) + pkt->len);
	return sizeof(*pkt) + pkt->len;
}

int nic_roce_decode(struct nic_qp *qp, const void *dgram, size_t len, struct nic_pkt *pkt)
{
	const struct nic_pkt *in = dgram;

	if (len < sizeof(*in) || in->version != NIC_PKT_VERSION || in->len > qp->mtu ||
	    len < sizeof(*in) + in->len || in->src_qpn != qp->peer_qpn)
		return -EPROTO;
	memcpy(pkt, in, sizeof(*in) + in->len);
	return 0;
}
