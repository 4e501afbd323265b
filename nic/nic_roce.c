// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * RoCEv2 on a NIC_WIRE_ROCE link: every packet is a UDP datagram to port
 * 4791 holding an InfiniBand transport packet -- BTH, then RETH (first
 * packet of an RDMA WRITE, RDMA READ request) or AETH (ACK/NAK, READ
 * responses), the payload padded to 4 bytes, and the ICRC -- with the
 * opcodes, QPNs and 24-bit PSNs of the IBTA RC transport, so that tshark
 * decodes each one as InfiniBand.
 *
 * The transport (nic_rc.c) works on struct nic_pkt, whose packets are
 * self-describing (each carries its message's length and its offset; each
 * WRITE packet its target). What IB leaves out is rebuilt here from the
 * QP's state as the packets before it left it, which is why datagrams are
 * decoded only when the transport takes them, in order:
 *  - SEND middle/last: offset from the PSN distance to the SEND's first
 *    packet; until the last packet the message length is unknown, so the
 *    receive buffer's size stands for it (what the responder may fault in);
 *  - WRITE middle/last: target, rkey and length from the WRITE's first
 *    packet (its RETH);
 *  - READ request asked again from a response PSN (RETH: the remaining
 *    range): matched to the READ it continues, so the responder restarts
 *    that one where asked;
 *  - READ responses: offset and length from the requester's READ WQE.
 * PSNs are 32-bit inside the NIC: 24-bit on the wire, widened against the
 * expected PSN (requests) or the oldest unacknowledged one (responses).
 * RNR NAK timers are IB's 5-bit codes (rounded up). The AETH's MSN is
 * always 0: the transport counts no messages.
 *
 * ICRC (IBTA annex A17): CRC-32 over 8 bytes of ones (the masked LRH), the
 * IPv4 header with TOS, TTL and checksum set to ones, the UDP header with
 * its checksum set to ones, the BTH with its resv8a byte set to ones, the
 * other headers, the payload and the pad. The datagram goes through a UDP
 * socket, so the IP header is not ours: both ends compute it over the
 * header an unfragmented datagram of an unconnected socket carries (ID 0,
 * DF), from the addresses and ports they know.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <zlib.h>
#include "nic_internal.h"

enum {
	IB_SEND_FIRST = 0x00,
	IB_SEND_MIDDLE = 0x01,
	IB_SEND_LAST = 0x02,
	IB_SEND_ONLY = 0x04,
	IB_WRITE_FIRST = 0x06,
	IB_WRITE_MIDDLE = 0x07,
	IB_WRITE_LAST = 0x08,
	IB_WRITE_ONLY = 0x0a,
	IB_READ_REQ = 0x0c,
	IB_READ_RESP_FIRST = 0x0d,
	IB_READ_RESP_MIDDLE = 0x0e,
	IB_READ_RESP_LAST = 0x0f,
	IB_READ_RESP_ONLY = 0x10,
	IB_ACK = 0x11,
};

#define BTH_LEN 12
#define RETH_LEN 16
#define AETH_LEN 4
#define ICRC_LEN 4

/* IB RNR NAK timer codes, in microseconds (code 0 is the longest, 655.36 ms) */
static const __u32 rnr_code_us[32] = {
	655360, 10,    20,    30,    40,    60,	    80,	    120,    160,    240,    320,
	480,	640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240,  15360,
	20480,	30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

__u32 nic_ib_rnr_timer_us(unsigned int code)
{
	return rnr_code_us[code & 0x1f];
}

static __u8 rnr_code(__u32 us)
{
	int c;

	for (c = 1; c < 32; c++)
		if (rnr_code_us[c] >= us)
			return c;
	return 0;
}

static void put32(__u8 *p, __u32 v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

static void put64(__u8 *p, __u64 v)
{
	put32(p, v >> 32);
	put32(p + 4, (__u32)v);
}

static __u32 get32(const __u8 *p)
{
	__u32 v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

static __u64 get64(const __u8 *p)
{
	return (__u64)get32(p) << 32 | get32(p + 4);
}

static __u32 get24(const __u8 *p)
{
	return (__u32)p[0] << 16 | (__u32)p[1] << 8 | p[2];
}

/* The 32-bit PSN near ref whose low 24 bits are psn24. */
static __u32 psn_widen(__u32 psn24, __u32 ref)
{
	__s32 d = (__s32)((psn24 - ref) << 8) >> 8;

	return ref + d;
}

/*
 * CRC-32 (IEEE, reflected) of buf continuing from crc, without the
 * pre- and post-inversion zlib's crc32() applies: ~crc32(~crc, ...).
 * zlib's is the word-at-a-time one, ~9x faster here than a byte-wise
 * table; the ICRC covers every byte of every packet, twice (sender and
 * receiver), and was the engine's largest cost (a quarter of all CPU
 * samples of an 8 MiB ib_write_lat, before memcpy).
 */
static __u32 crc32_le(__u32 crc, const void *buf, size_t len)
{
	return ~(__u32)crc32_z(~crc & 0xffffffffu, buf, len);
}

static size_t hdr_len(__u8 op)
{
	switch (op) {
	case IB_WRITE_FIRST:
	case IB_WRITE_ONLY:
	case IB_READ_REQ:
		return BTH_LEN + RETH_LEN;
	case IB_READ_RESP_FIRST:
	case IB_READ_RESP_LAST:
	case IB_READ_RESP_ONLY:
	case IB_ACK:
		return BTH_LEN + AETH_LEN;
	case IB_SEND_FIRST:
	case IB_SEND_MIDDLE:
	case IB_SEND_LAST:
	case IB_SEND_ONLY:
	case IB_WRITE_MIDDLE:
	case IB_WRITE_LAST:
	case IB_READ_RESP_MIDDLE:
		return BTH_LEN;
	}
	return 0;
}

/*
 * The ICRC of a datagram of len bytes (its last 4 bytes excluded) sent
 * from saddr:sport to daddr:dport (network order).
 */
__u32 nic_roce_icrc(const void *dgram, size_t len, __u32 saddr, __u32 daddr, __u16 sport,
		    __u16 dport)
{
	__u8 ps[20 + 8 + BTH_LEN];
	__u16 tot = htons(20 + 8 + len), ulen = htons(8 + len);
	__u32 crc;

	if (len < BTH_LEN + ICRC_LEN)
		return 0;
	memset(ps, 0, sizeof(ps));
	ps[0] = 0x45;
	ps[1] = 0xff; /* TOS, masked */
	memcpy(ps + 2, &tot, 2);
	ps[6] = 0x40; /* DF, ID 0 */
	ps[8] = 0xff; /* TTL, masked */
	ps[9] = IPPROTO_UDP;
	ps[10] = ps[11] = 0xff; /* checksum, masked */
	memcpy(ps + 12, &saddr, 4);
	memcpy(ps + 16, &daddr, 4);
	memcpy(ps + 20, &sport, 2);
	memcpy(ps + 22, &dport, 2);
	memcpy(ps + 24, &ulen, 2);
	ps[26] = ps[27] = 0xff; /* UDP checksum, masked */
	memcpy(ps + 28, dgram, BTH_LEN);
	ps[28 + 4] = 0xff;			    /* BTH resv8a, masked */
	crc = crc32_le(0xdebb20e3, ps, sizeof(ps)); /* seed: 8 bytes of ones done */
	crc = crc32_le(crc, (const __u8 *)dgram + BTH_LEN, len - BTH_LEN - ICRC_LEN);
	return ~crc;
}

/* The ICRC a datagram carries (little-endian, as the CRC's bytes come). */
__u32 nic_roce_icrc_of(const void *dgram, size_t len)
{
	const __u8 *p = (const __u8 *)dgram + len - ICRC_LEN;

	if (len < BTH_LEN + ICRC_LEN)
		return 1; /* never what nic_roce_icrc() gives such a datagram (0) */
	return (__u32)p[0] | (__u32)p[1] << 8 | (__u32)p[2] << 16 | (__u32)p[3] << 24;
}

__u32 nic_roce_dst_qpn(const void *dgram, size_t len)
{
	const __u8 *p = dgram;

	if (len < BTH_LEN + ICRC_LEN)
		return 0;
	return get24(p + 5);
}

static const __u8 syn_to_aeth[] = {
	[SYN_ACK] = 0x1f, /* ACK, credits invalid (no end-to-end flow control) */
	[SYN_RNR_NAK] = 0x20,	  [SYN_NAK_SEQ] = 0x60,
	[SYN_NAK_INV_REQ] = 0x61, [SYN_NAK_REM_ACCESS] = 0x62,
	[SYN_NAK_REM_OP] = 0x63,
};

ssize_t nic_roce_encode(struct nic_qp *qp, const struct nic_pkt *pkt, void *dgram)
{
	__u8 *p = dgram, op, pad;
	bool first = pkt->offset == 0, last = pkt->offset + pkt->len >= pkt->msg_len;
	size_t h, n;
	__u32 icrc;

	switch (pkt->op) {
	case PKT_SEND:
		op = first && last ? IB_SEND_ONLY :
		     first	   ? IB_SEND_FIRST :
		     last	   ? IB_SEND_LAST :
				     IB_SEND_MIDDLE;
		break;
	case PKT_WRITE:
		op = first && last ? IB_WRITE_ONLY :
		     first	   ? IB_WRITE_FIRST :
		     last	   ? IB_WRITE_LAST :
				     IB_WRITE_MIDDLE;
		break;
	case PKT_READ_REQ:
		op = IB_READ_REQ;
		break;
	case PKT_READ_RESP:
		op = first && last ? IB_READ_RESP_ONLY :
		     first	   ? IB_READ_RESP_FIRST :
		     last	   ? IB_READ_RESP_LAST :
				     IB_READ_RESP_MIDDLE;
		break;
	case PKT_ACK:
		op = IB_ACK;
		break;
	default:
		return -EINVAL;
	}
	h = hdr_len(op);
	n = op == IB_READ_REQ || op == IB_ACK ? 0 : pkt->len;
	pad = (4 - n % 4) % 4;
	memset(p, 0, h);
	p[0] = op;
	p[1] = pad << 4;    /* SE 0, M 0, PadCnt, TVer 0 */
	p[2] = p[3] = 0xff; /* default P_Key */
	put32(p + 4, pkt->dst_qpn & 0xffffff);
	put32(p + 8, pkt->psn & 0xffffff);
	if (op == IB_READ_REQ || op == IB_SEND_LAST || op == IB_SEND_ONLY || op == IB_WRITE_LAST ||
	    op == IB_WRITE_ONLY)
		p[8] |= 0x80; /* AckReq */
	if (h == BTH_LEN + RETH_LEN) {
		/* a READ asked again from a response PSN asks for the rest */
		__u64 skip = op == IB_READ_REQ ? pkt->offset : 0;

		put64(p + BTH_LEN, pkt->vaddr + skip);
		put32(p + BTH_LEN + 8, pkt->rkey);
		put32(p + BTH_LEN + 12, (__u32)(pkt->msg_len - skip));
	} else if (h == BTH_LEN + AETH_LEN) {
		__u8 syn = op == IB_ACK ? syn_to_aeth[pkt->syndrome] : 0x1f;

		if (op == IB_ACK && pkt->syndrome == SYN_RNR_NAK)
			syn |= rnr_code(pkt->rnr_us);
		put32(p + BTH_LEN, (__u32)syn << 24); /* MSN 0 */
	}
	memcpy(p + h, pkt->data, n);
	memset(p + h + n, 0, pad);
	icrc = nic_roce_icrc(p, h + n + pad + ICRC_LEN, qp->nic->udp_addr.s_addr,
			     qp->wire.peer.sin_addr.s_addr, qp->nic->roce_port,
			     qp->wire.peer.sin_port);
	p[h + n + pad] = icrc;
	p[h + n + pad + 1] = icrc >> 8;
	p[h + n + pad + 2] = icrc >> 16;
	p[h + n + pad + 3] = icrc >> 24;
	return h + n + pad + ICRC_LEN;
}

static __u32 npkts(const struct nic_qp *qp, __u64 len)
{
	return len ? (len + qp->mtu - 1) / qp->mtu : 1;
}

/* The READ the requester waits for responses of: the oldest unfinished one. */
static struct nic_swqe *pending_read(struct nic_qp *qp)
{
	__u32 pos;

	for (pos = qp->ord_head; pos != qp->ord_tail; pos++) {
		struct nic_swqe *w = &qp->sq[qp->ord[pos & (qp->sq_size - 1)] & (qp->sq_size - 1)];

		if (!w->done && w->opcode == NIC_WR_RDMA_READ)
			return w;
	}
	return NULL;
}

int nic_roce_decode(struct nic_qp *qp, const void *dgram, size_t len, struct nic_pkt *pkt)
{
	struct nic_wire *w = &qp->wire;
	const __u8 *p = dgram;
	__u8 op, pad, aeth = 0;
	size_t h, n;
	__u32 psn24, i;

	if (len < BTH_LEN + ICRC_LEN)
		return -EPROTO;
	op = p[0];
	pad = (p[1] >> 4) & 3;
	h = hdr_len(op);
	if (!h && op < 0x20 && !(p[1] & 0xf)) {
		/*
		 * An RC opcode this device does not implement (immediate
		 * data, atomics, ...): the responder refuses it at its
		 * expected PSN (NAK invalid request), as hardware does.
		 */
		memset(pkt, 0, sizeof(*pkt));
		pkt->magic = NIC_PKT_MAGIC;
		pkt->version = NIC_PKT_VERSION;
		pkt->dst_qpn = get24(p + 5);
		pkt->src_qpn = qp->peer_qpn;
		pkt->op = PKT_UNSUPPORTED;
		pkt->psn = psn_widen(get24(p + 9), qp->epsn);
		return 0;
	}
	if (!h || len < h + pad + ICRC_LEN || (p[1] & 0xf) != 0)
		return -EPROTO;
	n = len - h - pad - ICRC_LEN;
	if (n > qp->mtu || ((op == IB_READ_REQ || op == IB_ACK) && n))
		return -EPROTO;
	psn24 = get24(p + 9);
	memset(pkt, 0, sizeof(*pkt));
	pkt->magic = NIC_PKT_MAGIC;
	pkt->version = NIC_PKT_VERSION;
	pkt->dst_qpn = get24(p + 5);
	pkt->src_qpn = qp->peer_qpn;
	pkt->len = n;
	memcpy(pkt->data, p + h, n);
	if (h == BTH_LEN + AETH_LEN)
		aeth = p[BTH_LEN];

	switch (op) {
	case IB_ACK:
		pkt->op = PKT_ACK;
		pkt->psn = psn_widen(psn24, qp->una);
		switch (aeth >> 5) {
		case 0:
			pkt->syndrome = SYN_ACK;
			break;
		case 1:
			pkt->syndrome = SYN_RNR_NAK;
			pkt->rnr_us = rnr_code_us[aeth & 0x1f];
			break;
		case 3:
			if ((aeth & 0x1f) > 3)
				return -EPROTO;
			pkt->syndrome = SYN_NAK_SEQ + (aeth & 0x1f);
			break;
		default:
			return -EPROTO;
		}
		return 0;
	case IB_READ_RESP_FIRST:
	case IB_READ_RESP_MIDDLE:
	case IB_READ_RESP_LAST:
	case IB_READ_RESP_ONLY: {
		struct nic_swqe *rd = pending_read(qp);

		pkt->op = PKT_READ_RESP;
		pkt->psn = psn_widen(psn24, qp->una);
		if (!rd)
			return -EPROTO; /* a late duplicate: nothing waits for it */
		pkt->msg_len = rd->len;
		pkt->offset = (__u64)(__u32)(pkt->psn - rd->first_psn) * qp->mtu;
		return 0;
	}
	}

	/* requests: the responder takes them at its expected PSN */
	pkt->psn = psn_widen(psn24, qp->epsn);
	switch (op) {
	case IB_SEND_FIRST:
	case IB_SEND_ONLY:
	case IB_SEND_MIDDLE:
	case IB_SEND_LAST: {
		__u32 head = atomic_load_explicit(&qp->rq_head, memory_order_relaxed);
		__u64 cap = 0;

		pkt->op = PKT_SEND;
		if ((op == IB_SEND_FIRST || op == IB_SEND_ONLY) && pkt->psn == qp->epsn)
			w->rx_send_psn = pkt->psn;
		pkt->offset = op == IB_SEND_FIRST || op == IB_SEND_ONLY ?
				      0 :
				      (__u64)(__u32)(pkt->psn - w->rx_send_psn) * qp->mtu;
		if (op == IB_SEND_LAST || op == IB_SEND_ONLY) {
			pkt->msg_len = pkt->offset + n;
			return 0;
		}
		/* more to come: the receive buffer's size stands for the length */
		if (head != atomic_load_explicit(&qp->rq_prod, memory_order_acquire)) {
			struct nic_rwqe *rw = &qp->rq[head & (qp->rq_size - 1)];
			int k;

			for (k = 0; k < rw->num_sge; k++)
				cap += rw->sge[k].length;
		}
		pkt->msg_len = cap > pkt->offset + n ? cap : pkt->offset + n + 1;
		return 0;
	}
	case IB_WRITE_FIRST:
	case IB_WRITE_ONLY:
		pkt->op = PKT_WRITE;
		pkt->vaddr = get64(p + BTH_LEN);
		pkt->rkey = get32(p + BTH_LEN + 8);
		pkt->msg_len = get32(p + BTH_LEN + 12);
		if (pkt->psn == qp->epsn) {
			w->rx_write_psn = pkt->psn;
			w->rx_write_va = pkt->vaddr;
			w->rx_write_rkey = pkt->rkey;
			w->rx_write_len = pkt->msg_len;
		}
		return 0;
	case IB_WRITE_MIDDLE:
	case IB_WRITE_LAST:
		pkt->op = PKT_WRITE;
		pkt->offset = (__u64)(__u32)(pkt->psn - w->rx_write_psn) * qp->mtu;
		pkt->vaddr = w->rx_write_va + pkt->offset;
		pkt->rkey = w->rx_write_rkey;
		pkt->msg_len = w->rx_write_len;
		return 0;
	case IB_READ_REQ:
		pkt->op = PKT_READ_REQ;
		pkt->vaddr = get64(p + BTH_LEN);
		pkt->rkey = get32(p + BTH_LEN + 8);
		pkt->msg_len = get32(p + BTH_LEN + 12);
		/* the rest of a READ seen before: that READ, from this response on */
		for (i = 0; i < NIC_MAX_RD; i++) {
			__u32 d = pkt->psn - w->rx_reads[i].psn;

			if (w->rx_reads[i].npkts && d && d < w->rx_reads[i].npkts &&
			    pkt->vaddr == w->rx_reads[i].va + (__u64)d * qp->mtu &&
			    pkt->msg_len == w->rx_reads[i].len - (__u64)d * qp->mtu) {
				pkt->offset = (__u64)d * qp->mtu;
				pkt->vaddr = w->rx_reads[i].va;
				pkt->msg_len = w->rx_reads[i].len;
				return 0;
			}
		}
		i = w->rx_reads_next++ % NIC_MAX_RD;
		w->rx_reads[i].psn = pkt->psn;
		w->rx_reads[i].npkts = npkts(qp, pkt->msg_len);
		w->rx_reads[i].va = pkt->vaddr;
		w->rx_reads[i].len = pkt->msg_len;
		return 0;
	}
	return -EPROTO;
}
