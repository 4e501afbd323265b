/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The npf software RNIC: a verbs-shaped device that moves bytes between two
 * processes (shared memory on one host, UDP across network namespaces) over
 * a reliable-connection transport, and whose IOMMU takes page faults that
 * npfd resolves. See nic/README.md for the model.
 *
 * API conventions:
 *  - names follow ibverbs: nic_open/nic_close, nic_alloc_pd, nic_reg_mr,
 *    nic_create_cq, nic_create_qp, nic_post_send, nic_post_recv,
 *    nic_poll_cq; accessors are nic_<object>_<field>() (nic_mr_lkey()).
 *  - objects are opaque; options structs start with `size_t sz` (declare
 *    them with NIC_OPTS so that the size is filled in);
 *  - int functions return 0 (or a non-negative value) on success and
 *    -errno on failure; pointer functions return NULL and set errno;
 *  - the library never prints.
 *  - posting (nic_post_send/recv) and polling (nic_poll_cq) are lock-free
 *    and may run concurrently with the device; one thread at a time per
 *    QP for posting and per CQ for polling. Control calls (create, destroy,
 *    register, connect) take the device lock and may be called from any
 *    thread.
 */
#ifndef NPF_NIC_H
#define NPF_NIC_H

#include <stddef.h>
#include <linux/types.h>
#include "npf_nic_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Declare and zero an options struct with its size filled in. */
#define NIC_OPTS(TYPE, NAME, ...)                                                                  \
	struct TYPE NAME = ({                                                                      \
		struct TYPE ___##NAME = {.sz = sizeof(struct TYPE), __VA_ARGS__};                  \
		___##NAME;                                                                         \
	})

#define NIC_MAX_SGE 4
#define NIC_DEFAULT_MTU 4096
#define NIC_DEFAULT_MAX_PAGE_REQUESTS 4

struct nic;
struct nic_pd;
struct nic_mr;
struct nic_cq;
struct nic_qp;

/* ---- device ---------------------------------------------------------- */

enum nic_wire_type {
	NIC_WIRE_SHM = 1, /* peer on this host: one shared-memory ring per direction */
	NIC_WIRE_UDP = 2, /* peer anywhere IPv4 reaches (e.g. another netns) */
	/*
	 * One UDP socket per device, bound to udp_addr and port 4791 (or
	 * udp_port): every QP of the device sends from it and receives on it,
	 * and arriving packets are handed to the QP their destination QPN
	 * names -- a RoCEv2 device's addressing (one IP address per device).
	 */
	NIC_WIRE_ROCE = 3,
};

#define NIC_ROCE_PORT 4791

/*
 * Asynchronous events: what a device reports outside completions (ibverbs'
 * affiliated asynchronous events), for the errors a completion cannot
 * report and for a QP's first arrival.
 */
enum nic_event_type {
	/*
	 * The QP went to the error state because a completion could not be
	 * reported (its CQ overran: the CQ gets NIC_EVENT_CQ_ERR too).
	 */
	NIC_EVENT_QP_FATAL = 1,
	/*
	 * As responder, the QP refused an invalid request (an opcode it does
	 * not support, a malformed request) with no receive WQE to report it
	 * in: NAK invalid request sent, the QP in error.
	 */
	NIC_EVENT_QP_REQ_ERR,
	/*
	 * As responder, the QP refused a request that violated access (an
	 * rkey that names no MR of its PD, out of bounds, no permission, a
	 * page npfd said is invalid) with no receive WQE to report it in:
	 * NAK remote access error sent, the QP in error.
	 */
	NIC_EVENT_QP_ACCESS_ERR,
	/* The first request the QP accepted as responder (once per QP). */
	NIC_EVENT_COMM_EST,
	/* A completion was lost: the CQ was full (once per CQ). */
	NIC_EVENT_CQ_ERR,
	/*
	 * A peer's request named an implicit MR (nic_reg_mr_implicit) at
	 * [addr, addr + len), which no child of it covers: add one
	 * (nic_mr_add_child) or refuse the range (nic_mr_refuse). The
	 * request was answered with an RNR NAK meanwhile.
	 */
	NIC_EVENT_MR_MISS,
};

struct nic_event {
	enum nic_event_type type;
	struct nic_qp *qp; /* QP events */
	struct nic_cq *cq; /* NIC_EVENT_CQ_ERR */
	struct nic_mr *mr; /* NIC_EVENT_MR_MISS */
	__u64 addr, len;
};

/*
 * Called by the engine thread with the device lock held: it must not call
 * into the device (nothing but nic_qp_num()); queue the event and return.
 * Requester errors are not events: the failed WR's completion reports them.
 */
typedef void nic_event_fn(void *arg, const struct nic_event *ev);

struct nic_opts {
	size_t sz;
	enum nic_wire_type wire; /* 0: NIC_WIRE_SHM */
	const char *udp_addr;	 /* NIC_WIRE_UDP: local IPv4 address to bind (NULL: 127.0.0.1) */
	__u32 tx_drop_every; /* fault injection: lose 1 in N transmitted packets, pseudo-randomly */
	/*
	 * Fault injection: a slow device. Acknowledge npfd's invalidations
	 * this long after the engine first sees them (DMA goes on meanwhile:
	 * the cleared entries already stop it). Tests use it to tell a detach
	 * that waited for the acknowledgement from one that did not.
	 */
	__u32 inval_ack_delay_us;
	__u16 udp_port;		/* NIC_WIRE_ROCE: local port (host order; 0: NIC_ROCE_PORT) */
	nic_event_fn *event_fn; /* asynchronous events (NULL: none reported) */
	void *event_arg;
};

/*
 * Start a NIC in this process: its DMA engine thread (and, for UDP, a thread
 * that rings the engine's doorbell when packets arrive). Create threads
 * after fork(), not before.
 */
struct nic *nic_open(const struct nic_opts *opts);
void nic_close(struct nic *nic);

struct nic_stats {
	__u64 pkts_tx;
	__u64 pkts_rx;
	__u64 pkts_dropped; /* injected drops, malformed or unroutable packets */
	__u64 retransmits;  /* packets sent again (go-back-N) */
	__u64 timeouts;	    /* retransmission timer expiries */
	__u64 rnr_nak_tx;   /* RNR NAKs sent (responder not ready or faulting) */
	__u64 rnr_nak_rx;
	__u64 seq_nak_tx;
	__u64 page_requests;		/* npf_nic_fault_report() calls */
	__u64 page_requests_suppressed; /* missing pages already requested, not asked again */
	__u64 page_responses;
	__u64 requester_stalls;	      /* WRs that waited for a page response before sending */
	__u64 invalidations;	      /* inval ring entries acknowledged */
	__u64 cq_overruns;	      /* completions lost because a CQ was full */
	__u64 page_requests_reissued; /* reported again after NIC_PR_REISSUE_MS without an answer */
	/*
	 * Requester stalls that ended with the WR sent: the time from the
	 * miss (the WR found a page missing, just before its page request)
	 * to the queue pair resuming (the WR got its PSNs), summed, and the
	 * latest one -- a device's own view of its fault service time.
	 */
	__u64 stalls_resumed;
	__u64 stall_ns_total;
	__u64 stall_ns_last;
	/*
	 * Where a page request's time goes, summed over requests: inside
	 * npf_nic_fault_report() (the uprobe trap, npfd's BPF program, the
	 * ring buffer), then from its return until the engine consumed the
	 * answer (npfd's part, and the engine noticing).
	 */
	__u64 report_ns_total;
	__u64 answer_wait_ns_total;
};

/*
 * A page request that gets no answer for this long is reported again: a
 * report can be lost on its way (a full ring buffer in a fault storm, a
 * fault policy that fails), and the device must not wait forever.
 */
#define NIC_PR_REISSUE_MS 50

/* Copy the device counters (up to sz bytes of struct nic_stats). */
int nic_query_stats(struct nic *nic, struct nic_stats *stats, size_t sz);

/* ---- protection domain, memory regions -------------------------------- */

struct nic_pd *nic_alloc_pd(struct nic *nic);
int nic_dealloc_pd(struct nic_pd *pd); /* -EBUSY while MRs or QPs use it */

enum nic_access {
	NIC_ACCESS_LOCAL_WRITE = 1, /* RECV and RDMA READ may write it */
	NIC_ACCESS_REMOTE_WRITE = 2,
	NIC_ACCESS_REMOTE_READ = 4,
};

/*
 * Register [addr, addr + len) without pinning it. The IO page table covers
 * every page the range touches and starts with no entry present: until
 * npfd (or whoever holds nic_mr_iopt_fd()) marks pages present, every DMA
 * into the region raises a page request. The memory must stay mapped as
 * long as the MR exists.
 */
struct nic_mr *nic_reg_mr(struct nic_pd *pd, void *addr, size_t len, int access);

/*
 * Deregister: from the moment this returns the device never touches the
 * region again; WRs that still name its keys complete with an error
 * (LOC_PROT_ERR locally, REM_ACCESS_ERR for the remote requester).
 */
int nic_dereg_mr(struct nic_mr *mr);

/*
 * An implicit MR: one key for the whole address space (ibverbs' implicit
 * on-demand MR), whose memory the device reaches through child MRs the
 * application adds (ordinary MRs of the same PD, typically on-demand ones
 * npfd serves). A peer's WRITE or READ through its rkey is served by the
 * child that holds the whole range; when none does, the device raises
 * NIC_EVENT_MR_MISS and answers with an RNR NAK, so that the peer comes
 * back once a child is there -- or gets REM_ACCESS_ERR if the range was
 * refused. Local SGEs must name a child's lkey. Deregister the children
 * first or after: either way they stop being the parent's.
 */
struct nic_mr *nic_reg_mr_implicit(struct nic_pd *pd, int access);
int nic_mr_add_child(struct nic_mr *parent, struct nic_mr *child);
/* Requests for [addr, addr + len) through the implicit MR fail (REM_ACCESS_ERR) from now on. */
int nic_mr_refuse(struct nic_mr *parent, __u64 addr, __u64 len);

__u32 nic_mr_lkey(const struct nic_mr *mr);
__u32 nic_mr_rkey(const struct nic_mr *mr);

/*
 * The IO page table: a memfd laid out as struct npf_iopt_header followed by
 * the PTEs (npf_nic_abi.h), sealed against resizing. The fd stays owned by
 * the MR (dup it to keep it). Hand it to npfd.
 */
int nic_mr_iopt_fd(const struct nic_mr *mr);

/*
 * A pinning driver's registration: mark every page of the MR present (read
 * and write) in its IO page table, as a driver does once it has pinned the
 * memory and mapped it for DMA. The caller has made the memory resident and
 * keeps it so (mlock); npfd must not be attached to this MR.
 */
int nic_mr_map_pinned(struct nic_mr *mr);

/*
 * Prefetch (ibv_advise_mr): ask npfd for the pages of [addr, addr + len)
 * that are not present (for writing too with `write`), as the device would
 * on a fault, but with no QP waiting (the answer only counts). With
 * `resident_only`, only pages the process already has (mincore) are asked
 * for: they are mapped, nothing is read or zeroed. flush_ms >= 0: wait up
 * to that long until every page asked for is present (-ETIMEDOUT if they
 * are not: npfd slow, absent or refusing). An MR npfd does not serve (pinned) has every
 * page present already: 0 at once.
 */
int nic_mr_prefetch(struct nic_mr *mr, __u64 addr, __u64 len, int write, int resident_only,
		    int flush_ms);

/* The id npfd gave this MR's attachment: copied into every page request. */
int nic_mr_set_npf_id(struct nic_mr *mr, __u32 id);

/* ---- completion queues ------------------------------------------------ */

enum nic_wc_status {
	NIC_WC_SUCCESS = 0,
	NIC_WC_LOC_LEN_ERR, /* receive buffer too small for the SEND */
	NIC_WC_LOC_QP_OP_ERR,
	NIC_WC_LOC_PROT_ERR,	/* bad lkey, out of bounds, or npfd said INVALID */
	NIC_WC_WR_FLUSH_ERR,	/* QP in error: WR not executed */
	NIC_WC_LOC_ACCESS_ERR,	/* responder: incoming data hit an invalid local page */
	NIC_WC_REM_INV_REQ_ERR, /* responder refused the request (e.g. SEND too long) */
	NIC_WC_REM_ACCESS_ERR,	/* bad rkey, out of bounds, no permission, or remote INVALID */
	NIC_WC_REM_OP_ERR,
	NIC_WC_RETRY_EXC_ERR, /* no ACK after retry_cnt retransmissions */
	NIC_WC_RNR_RETRY_EXC_ERR,
};

enum nic_wc_opcode {
	NIC_WC_SEND,
	NIC_WC_RDMA_WRITE,
	NIC_WC_RDMA_READ,
	NIC_WC_RECV,
};

struct nic_wc {
	__u64 wr_id;
	enum nic_wc_status status;
	enum nic_wc_opcode opcode;
	__u32 byte_len; /* RECV: bytes received; RDMA READ: bytes read */
	__u32 qp_num;
};

const char *nic_wc_status_str(enum nic_wc_status status);

struct nic_cq *nic_create_cq(struct nic *nic, int cqe);
int nic_destroy_cq(struct nic_cq *cq); /* -EBUSY while a QP uses it */

/* Take up to n completions; returns how many (0 if none). */
int nic_poll_cq(struct nic_cq *cq, int n, struct nic_wc *wc);

/* Sleep until the CQ holds a completion: 0, or -ETIMEDOUT (timeout_ms < 0: forever). */
int nic_cq_wait(struct nic_cq *cq, int timeout_ms);

/*
 * Arm the CQ (ibv_req_notify_cq): the next completion written to it makes
 * the device write the 8 bytes of `cookie` to fd once (a pipe: what a
 * completion channel reads), then the CQ is disarmed. fd stays the
 * caller's; -1 disarms.
 */
int nic_cq_arm(struct nic_cq *cq, int fd, __u64 cookie);

/* ---- queue pairs (reliable connection) --------------------------------- */

enum nic_qp_flags {
	/*
	 * Relaxed ordering (seed 001 §3.3). By default a QP executes and
	 * completes its send WRs in the order they were posted (IB
	 * semantics): a WR that waits for a page holds up every later one.
	 * With this flag, a WR that does not conflict with any earlier WR
	 * still outstanding (started or not) may start, execute and complete
	 * before them, so completions can arrive out of posting order (tell
	 * them apart by wr_id). Two WRs conflict when they touch
	 * common memory and one of them writes it -- locally (a READ's
	 * target against another WR's local buffers) or at the peer (a
	 * WRITE's target against another RDMA WR's remote range) -- and any
	 * two SENDs conflict (they consume the peer's receive queue in
	 * order). A conflicting WR waits until the earlier one has completed.
	 * What the NIC cannot see needs NIC_SEND_FENCE: a SEND announcing
	 * data that earlier WRITEs put at the peer, for instance.
	 */
	NIC_QP_RELAXED_ORDERING = 1,
};

struct nic_qp_init_attr {
	size_t sz;
	struct nic_cq *send_cq;
	struct nic_cq *recv_cq;
	__u32 max_send_wr;	 /* default 256 */
	__u32 max_recv_wr;	 /* default 256 */
	int sq_sig_all;		 /* every send WR is signaled */
	__u32 max_page_requests; /* outstanding page requests (default 4) */
	__u32 rnr_timer_us;	 /* what our RNR NAKs ask the sender to wait (default 100) */
	/*
	 * retransmission timeout, doubled per retry up to x16 (default 10000;
	 * NIC_TIMEOUT_NONE: no timer, IB's "infinite" local ACK timeout)
	 */
	__u32 timeout_us;
	__u32 retry_cnt; /* retransmissions without progress before RETRY_EXC_ERR (default 7) */
	__u32 rnr_retry; /* RNR NAKs tolerated per WR; 7 = forever (default 7) */
	__u32 flags;	 /* enum nic_qp_flags */
};

#define NIC_TIMEOUT_NONE 0xffffffffu

struct nic_qp *nic_create_qp(struct nic_pd *pd, const struct nic_qp_init_attr *attr);

enum nic_qp_timer_mask {
	NIC_QP_TIMEOUT = 1,   /* attr->timeout_us */
	NIC_QP_RETRY_CNT = 2, /* attr->retry_cnt, 0 = no retransmission */
	NIC_QP_RNR_RETRY = 4, /* attr->rnr_retry, 0 = none, 7 = forever */
	NIC_QP_RNR_TIMER = 8, /* attr->rnr_timer_us */
};

/*
 * Change a QP's transport timers and retry limits, the fields of attr that
 * mask names (what ibv_modify_qp's timeout, retry_cnt, rnr_retry and
 * min_rnr_timer set; here 0 means 0, not the default). A timer already
 * running keeps its deadline; the next one armed uses the new value.
 */
int nic_qp_set_timers(struct nic_qp *qp, const struct nic_qp_init_attr *attr, unsigned int mask);

/* The wait an IB RNR NAK timer code (0..31, ibv_qp_attr's min_rnr_timer) stands for, in µs. */
__u32 nic_ib_rnr_timer_us(unsigned int code);
int nic_destroy_qp(struct nic_qp *qp);
__u32 nic_qp_num(const struct nic_qp *qp);

/*
 * What two QPs exchange out of band before they can talk (what an ibverbs
 * application sends over TCP: QPN, PSN and address). Plain data: may be
 * copied across processes as bytes.
 */
#define NIC_QP_INFO_MAGIC 0x4951504e /* "NPQI" */
struct nic_qp_info {
	__u32 magic;
	__u32 version; /* 1 */
	__u32 wire;    /* enum nic_wire_type */
	__u32 qpn;
	__u32 psn; /* first PSN this QP sends */
	__u32 mtu;
	__u32 udp_addr; /* network byte order */
	__u16 udp_port; /* network byte order */
	__u16 pad;
	char shm_name[64]; /* this QP's receive ring */
};

int nic_qp_local_info(const struct nic_qp *qp, struct nic_qp_info *info);

/*
 * Set the first PSN this QP sends, before it has sent anything (connected
 * or not): verbs applications choose it themselves (ibv_modify_qp's
 * sq_psn, at RTR -> RTS, after the QP could already receive).
 */
int nic_qp_set_psn(struct nic_qp *qp, __u32 psn);

/* Whether the QP has gone to the error state (an error completion). */
int nic_qp_in_error(const struct nic_qp *qp);

/* Connect to the remote QP described by info: the QP becomes ready to send. */
int nic_qp_connect(struct nic_qp *qp, const struct nic_qp_info *remote);

/*
 * Exchange nic_qp_info over a connected stream socket (unix or TCP) and
 * connect. Both peers call it; it blocks until the peer's info arrives.
 */
int nic_qp_connect_fd(struct nic_qp *qp, int sockfd);

struct nic_sge {
	__u64 addr;
	__u32 length;
	__u32 lkey;
};

enum nic_wr_opcode {
	NIC_WR_SEND,
	NIC_WR_RDMA_WRITE,
	NIC_WR_RDMA_READ,
};

enum nic_send_flags {
	NIC_SEND_SIGNALED = 1,
	/*
	 * Seed 001's order-before bit: the WR starts only once every earlier
	 * WR of its QP has completed, whatever the QP's ordering. With
	 * relaxed ordering, later WRs may still overtake it.
	 */
	NIC_SEND_FENCE = 2,
};

struct nic_send_wr {
	__u64 wr_id;
	struct nic_send_wr *next;
	struct nic_sge *sg_list;
	int num_sge;
	enum nic_wr_opcode opcode;
	unsigned int send_flags;
	__u64 remote_addr; /* RDMA WRITE / READ */
	__u32 rkey;
};

struct nic_recv_wr {
	__u64 wr_id;
	struct nic_recv_wr *next;
	struct nic_sge *sg_list;
	int num_sge;
};

/*
 * Post a chain of WRs. On failure returns -errno and points *bad_wr at the
 * first WR not posted (-ENOMEM: queue full; -EINVAL: bad WR or QP not
 * connected). Keys and bounds are checked when the device executes the WR
 * and reported as completions, as hardware does.
 */
int nic_post_send(struct nic_qp *qp, struct nic_send_wr *wr, struct nic_send_wr **bad_wr);
int nic_post_recv(struct nic_qp *qp, struct nic_recv_wr *wr, struct nic_recv_wr **bad_wr);

/* ---- the fault-report site --------------------------------------------- */

/*
 * Called once per page request group. It does nothing: its first
 * instruction is the 5-byte nop 0f 1f 44 00 00 so that npfd's BPF uprobe on
 * it is cheap; the uprobe reads *req (struct npf_page_request).
 */
void npf_nic_fault_report(const struct npf_page_request *req);

#ifdef __cplusplus
}
#endif

#endif /* NPF_NIC_H */
