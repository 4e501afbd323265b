/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Inside the software RNIC. One engine thread per device does all DMA and
 * runs the transport, holding nic->lock for each pass over its queues;
 * control calls take the same lock, so tables never change under a pass.
 * Posting and polling are single-producer/single-consumer rings shared
 * with the application without the lock.
 */
#ifndef NPF_NIC_INTERNAL_H
#define NPF_NIC_INTERNAL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "npf_abi.h"
#include "npf_nic.h"

#define NIC_MAX_MR 1024
#define NIC_MAX_QP 1024
#define NIC_QPN_BASE 0x100
#define NIC_MAX_PR 16	   /* hard cap on outstanding page requests per QP */
#define NIC_MAX_RD 8	   /* outstanding RDMA READs per QP (both directions) */
#define NIC_WINDOW 256	   /* unacknowledged packets per QP */
#define NIC_BUDGET 64	   /* packets per QP per engine pass, each direction */
#define NIC_REORDER_MAX 32 /* relaxed ordering: WQEs not started looked at for one to start */
#define NIC_SHM_SLOTS 256
#define NIC_PKT_MAGIC 0x544b504e /* "NPKT" */
#define NIC_PKT_VERSION 1

#define PAGE_SZ NPF_PAGE_SIZE
#define PAGE_SH NPF_PAGE_SHIFT

/* ---- wire format --------------------------------------------------------- */

enum nic_pkt_op {
	PKT_SEND = 1,
	PKT_WRITE,
	PKT_READ_REQ,
	PKT_READ_RESP,
	PKT_ACK,	 /* ACK or NAK, see syndrome */
	PKT_UNSUPPORTED, /* RoCE: a request opcode this device does not implement */
};

enum nic_syndrome {
	SYN_ACK = 0,
	SYN_RNR_NAK,
	SYN_NAK_SEQ,
	SYN_NAK_INV_REQ,
	SYN_NAK_REM_ACCESS,
	SYN_NAK_REM_OP,
};

/*
 * Every packet is self-describing (each WRITE packet carries its rkey and
 * target address, each SEND packet its offset in the message): a responder
 * can take any packet at its expected PSN without per-message state beyond
 * the receive WQE, which keeps go-back-N from the middle of a message simple.
 */
struct nic_pkt {
	__u32 magic;
	__u8 version;
	__u8 op;       /* enum nic_pkt_op */
	__u8 syndrome; /* PKT_ACK */
	__u8 pad;
	__u32 dst_qpn;
	__u32 src_qpn;
	__u32 psn;
	__u32 len;     /* payload bytes after this header */
	__u32 rkey;    /* WRITE, READ_REQ */
	__u32 rnr_us;  /* RNR NAK: how long to wait */
	__u64 vaddr;   /* WRITE: target of this payload; READ_REQ: start */
	__u64 msg_len; /* whole message (SEND, WRITE, READ) */
	__u64 offset;  /* this payload's offset in the message */
	__u8 data[];
};

/* ---- wire ---------------------------------------------------------------- */

struct nic_shm_ring {
	__u32 magic;
	__u32 nslots;
	__u32 slot_size;
	__u32 pad0[13];
	_Atomic __u32 head; /* consumer */
	__u32 pad1[15];
	_Atomic __u32 tail; /* producer; futex word */
	__u32 pad2[15];
	_Atomic __u32 sleeping; /* consumer is (about to be) asleep on tail */
	__u32 pad3[15];
};
#define NIC_SHM_RING_HDR 256

struct nic_wire {
	enum nic_wire_type type;
	/* shm */
	struct nic_shm_ring *rx, *tx;
	size_t rx_size, tx_size;
	/*
	 * Each ring's geometry as checked when it was mapped: the peer can
	 * write the header's words later, and the slot of index i is found
	 * with these, never with what the header says then.
	 */
	__u32 rx_nslots, rx_slot_size, tx_nslots, tx_slot_size;
	char rx_name[64];
	/* udp */
	int fd;
	struct sockaddr_in local, peer;
	void *txbuf, *rxbuf;
	size_t rxlen;
	bool rx_held;
	__u32 tx_count; /* loss injection: xorshift state */
	/* roce: datagrams the device's socket received for this QP, not yet taken */
	void *rxq;
	__u32 *rxq_len;
	__u32 rxq_head, rxq_tail;
	struct nic_pkt *rx_pkt; /* the head datagram decoded (it needs the QP's state then) */
	bool rx_decoded;
	/* roce decoder state: what later packets of a message leave out */
	__u32 rx_send_psn;  /* first PSN of the SEND being received */
	__u32 rx_write_psn; /* first PSN, target, rkey and length of the WRITE */
	__u64 rx_write_va, rx_write_len;
	__u32 rx_write_rkey;
	struct {
		__u32 psn, npkts;
		__u64 va, len;
	} rx_reads[NIC_MAX_RD]; /* READ requests seen */
	__u32 rx_reads_next;
};
#define NIC_ROCE_RXQ 256

/* ---- objects --------------------------------------------------------------- */

struct nic_pd {
	struct nic *nic;
	int refs;
};

struct nic_mr {
	struct nic *nic;
	struct nic_pd *pd;
	__u32 key;
	int access;
	__u64 addr, len; /* what was registered */
	__u64 start;	 /* page-aligned start of the IO page table */
	__u64 npages;
	__u32 npf_id;
	int iopt_fd;
	size_t iopt_size;
	struct npf_iopt_header *iopt;
	__u64 *pte;
	__u64 inval_seen_ns; /* opts.inval_ack_delay_us: when unacknowledged ones were first seen */
	/* implicit MRs (nic_reg_mr_implicit) and their children */
	bool implicit;
	struct nic_mr *parent; /* a child's implicit MR */
	struct nic_mr *children, *sibling;
	__u64 refused_addr, refused_len;    /* nic_mr_refuse() */
	__u64 miss_addr, miss_len, miss_ns; /* the last NIC_EVENT_MR_MISS */
};

struct nic_cq {
	struct nic *nic;
	int refs;
	__u32 size;	    /* power of two */
	_Atomic __u32 prod; /* engine; futex word */
	_Atomic __u32 cons; /* application */
	_Atomic __u32 waiters;
	struct nic_wc *ring;
	bool overran;	   /* NIC_EVENT_CQ_ERR reported */
	_Atomic int armed; /* nic_cq_arm(): write notify_cookie to notify_fd on the next push */
	int notify_fd;
	__u64 notify_cookie;
};

struct nic_swqe {
	/* from the application */
	__u64 wr_id;
	enum nic_wr_opcode opcode;
	unsigned int flags;
	int num_sge;
	struct nic_sge sge[NIC_MAX_SGE];
	__u64 remote_addr;
	__u32 rkey;
	/* engine */
	__u64 len;
	__u32 first_psn;
	__u32 npkts;
	__u32 rd_got; /* READ: response packets received */
	bool started; /* has its PSNs: in ord[] */
	bool done;
	bool retired;	 /* its completion was reported */
	bool stalled;	 /* waits for a page response before it can start */
	__u32 stall_gen; /* fault_gen when it stalled: retried once it changes */
	__u64 stall_ns;	 /* when it first found a page missing, 0 never */
	enum nic_wc_status status;
};

struct nic_rwqe {
	__u64 wr_id;
	int num_sge;
	struct nic_sge sge[NIC_MAX_SGE];
};

/* An outstanding page request: pages [first, last] of MR `key`. */
struct nic_pr {
	__u64 cookie;
	__u32 key;
	__u64 first, last;
	__u64 issued_ns;	     /* when it was last reported */
	__u64 reported_ns;	     /* when its first report returned */
	struct npf_page_request req; /* as reported: re-reported if no answer comes */
};

/* A READ the responder is streaming back. */
struct nic_rd_job {
	__u32 rkey;
	__u64 vaddr, len;
	__u32 first_psn, npkts, sent;
};

enum nic_qp_state {
	QPS_INIT,
	QPS_RTS,
	QPS_ERR,
};

struct nic_qp {
	struct nic *nic;
	struct nic_pd *pd;
	struct nic_cq *scq, *rcq;
	__u32 qpn, peer_qpn;
	enum nic_qp_state state;
	struct nic_qp_init_attr attr;
	__u32 mtu;
	struct nic_wire wire;
	pthread_mutex_t post_lock;

	/*
	 * Send queue: the application produces at sq_prod, the engine frees
	 * slots at sq_head. WQEs get PSNs when they start, in posting order
	 * unless relaxed ordering lets one start before an earlier one; ord[]
	 * lists the started WQEs not yet retired in PSN order, which is the
	 * order they are sent, resent, acknowledged and completed in.
	 */
	struct nic_swqe *sq;
	__u32 sq_size;
	_Atomic __u32 sq_prod;
	_Atomic __u32 sq_head;
	__u32 sq_next; /* first WQE without PSNs */
	__u32 *ord;    /* SQ indices, sq_size entries */
	__u32 ord_head, ord_tail;
	__u32 tx_pos;	 /* ord[] position being transmitted (ord_head <= tx_pos <= ord_tail) */
	__u32 tx_pkt;	 /* packet within it */
	__u32 next_psn;	 /* PSN for the next new WQE */
	__u32 una;	 /* oldest unacknowledged PSN */
	__u32 tx_high;	 /* one past the highest PSN ever sent */
	__u64 timer_at;	 /* retransmission deadline (ns), 0 = idle */
	__u64 rnr_until; /* no transmission before this (ns) */
	__u32 retries;
	__u32 rnr_retries;
	bool tx_fault; /* the started WQE at fault_pos lost a page: waits for a response */
	__u64 miss_ns; /* when the last page check found a page missing */
	__u32 fault_pos;
	__u32 tx_fault_gen;
	bool rd_fault; /* a READ response hit a missing page: re-read on answer */
	__u32 rd_fault_gen;
	__u32 rd_reask; /* READ response PSN last asked for again */

	/* receive queue */
	struct nic_rwqe *rq;
	__u32 rq_size;
	_Atomic __u32 rq_prod;
	_Atomic __u32 rq_head;

	/* responder */
	__u32 epsn;
	bool nak_state; /* a NAK for epsn went out: drop later PSNs silently */
	bool need_ack;
	int nak_syn;  /* the NAK that put us in nak_state */
	__u32 ooo;    /* packets past epsn seen in nak_state */
	int pend_nak; /* syndrome of a NAK to send after READ responses, 0 none */
	__u32 pend_nak_psn;
	struct nic_rd_job rd[NIC_MAX_RD];
	__u32 rd_head, rd_tail;
	bool rd_stall; /* READ responses wait for a page response */
	__u32 rd_stall_gen;

	/* page requests */
	struct nic_pr pr[NIC_MAX_PR];
	__u32 npr;
	__u32 pr_seq;
	__u32 fault_gen;      /* bumped by every answer */
	struct nic_pr failed; /* last INVALID answer (key 0: none) */

	/* asynchronous events */
	bool comm_est;	/* NIC_EVENT_COMM_EST reported */
	bool err_in_wc; /* the error that put the QP in error is in a completion */
};

struct nic {
	struct nic_opts opts;
	struct in_addr udp_addr;
	int roce_fd;	 /* NIC_WIRE_ROCE: the device's socket */
	__u16 roce_port; /* network order */
	void *roce_rxbuf, *roce_txbuf;
	struct nic_pkt *roce_pkt;     /* the packet being built, before encoding */
	size_t roce_held;	      /* bytes of a datagram in roce_rxbuf whose QP was full */
	struct sockaddr_in roce_from; /* its sender */
	pthread_mutex_t lock;
	pthread_t engine;
	pthread_t udp_thread;
	bool udp_thread_started;
	int epfd, stop_efd;
	_Atomic __u32 doorbell; /* futex word */
	_Atomic __u32 sleeping;
	_Atomic int stop;
	_Atomic int ctl_waiting;
	struct nic_mr *mr[NIC_MAX_MR];
	struct nic_qp *qp[NIC_MAX_QP];
	int mr_end, qp_end; /* one past the highest slot in use: passes scan no further */
	__u32 key_salt;
	struct nic_stats stats;
};

/* Every MR / QP of the device; under nic->lock. */
#define nic_for_each_mr(nic, i, m)                                                                 \
	for ((i) = 0; (i) < (nic)->mr_end; (i)++)                                                  \
		if (((m) = (nic)->mr[i]))
#define nic_for_each_qp(nic, i, q)                                                                 \
	for ((i) = 0; (i) < (nic)->qp_end; (i)++)                                                  \
		if (((q) = (nic)->qp[i]))

/* nic.c */
__u64 nic_now_ns(void);
void nic_doorbell(struct nic *nic);
void nic_ctl_lock(struct nic *nic);
struct nic_mr *nic_mr_lookup(struct nic *nic, __u32 key);
struct nic_qp *nic_qp_lookup(struct nic *nic, __u32 qpn);
struct nic_mr *nic_mr_child(struct nic_mr *parent, __u64 vaddr, __u64 len, bool *miss);
int nic_cq_push(struct nic_cq *cq, const struct nic_wc *wc);
void nic_event(struct nic *nic, enum nic_event_type type, struct nic_qp *qp, struct nic_cq *cq);
int nic_futex_wake(_Atomic __u32 *addr, bool shared);

/* nic_iommu.c: IO page table checks, page requests, responses, invalidations */
enum {
	DMA_READ = 0,  /* device reads memory */
	DMA_WRITE = 1, /* device writes memory */
};
static inline bool mr_contains(const struct nic_mr *mr, __u64 vaddr, __u64 len)
{
	return vaddr >= mr->addr && len <= mr->len && vaddr - mr->addr <= mr->len - len;
}

int nic_mr_dma(struct nic_mr *mr, __u64 vaddr, void *buf, __u64 len, int dir);
int nic_fault_range(struct nic_qp *qp, struct nic_mr *mr, __u64 vaddr, __u64 len, int dir);
int nic_fault_sgl(struct nic_qp *qp, const struct nic_sge *sge, int nsge, __u64 off, __u64 len,
		  int dir);
int nic_poll_mr(struct nic *nic, struct nic_mr *mr, __u64 now, __u64 *deadline);
int nic_qp_reissue_prs(struct nic_qp *qp, __u64 now, __u64 *deadline);
void nic_qp_drop_prs(struct nic_qp *qp, __u32 key);

/* nic_wire.c */
int nic_wire_init(struct nic *nic, struct nic_qp *qp);
int nic_wire_connect(struct nic_qp *qp, const struct nic_qp_info *remote);
void nic_wire_fini(struct nic *nic, struct nic_qp *qp);
struct nic_pkt *nic_wire_tx_begin(struct nic_qp *qp);
void nic_wire_tx_commit(struct nic_qp *qp, struct nic_pkt *pkt);
struct nic_pkt *nic_wire_rx_peek(struct nic_qp *qp);
void nic_wire_rx_release(struct nic_qp *qp);
int nic_udp_thread_start(struct nic *nic);
int nic_roce_open(struct nic *nic);
void nic_roce_close(struct nic *nic);
int nic_roce_rx(struct nic *nic);
/* nic_roce.c: the packets' form on a NIC_WIRE_ROCE link */
#define NIC_ROCE_DGRAM_MAX (sizeof(struct nic_pkt) + NIC_DEFAULT_MTU + 64)
__u32 nic_roce_dst_qpn(const void *dgram, size_t len);
ssize_t nic_roce_encode(struct nic_qp *qp, const struct nic_pkt *pkt, void *dgram);
int nic_roce_decode(struct nic_qp *qp, const void *dgram, size_t len, struct nic_pkt *pkt);
__u32 nic_roce_icrc_of(const void *dgram, size_t len);
__u32 nic_roce_icrc(const void *dgram, size_t len, __u32 saddr, __u32 daddr, __u16 sport,
		    __u16 dport);
void nic_udp_thread_stop(struct nic *nic);

/* nic_rc.c */
int nic_qp_poll(struct nic_qp *qp, __u64 now, __u64 *deadline);
int nic_sgl_dma(struct nic_qp *qp, const struct nic_sge *sge, int nsge, __u64 off, void *buf,
		__u64 len, int dir);

static inline int psn_diff(__u32 a, __u32 b)
{
	return (int)(a - b);
}

#endif /* NPF_NIC_INTERNAL_H */
