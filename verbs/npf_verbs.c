// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libnpfverbs-rdmav34.so: a libibverbs provider for the npf software RNIC
 * (nic/), so that unmodified rdma-core applications (ibv_rc_pingpong,
 * perftest) run over it, and memory they register with
 * IBV_ACCESS_ON_DEMAND is served by npfd without pinning.
 *
 * Each npf device is one IPv4 address (RoCEv2 GID ::ffff:a.b.c.d, read from
 * the sysfs tree npf-run generates); opening it starts a software NIC in
 * the process (nic_open, NIC_WIRE_ROCE: one UDP socket on that address,
 * port 4791, packets demultiplexed by destination QPN). Applications
 * exchange QPN/PSN/GID over their own socket as they do with hardware.
 *
 * Memory registration:
 *  - without IBV_ACCESS_ON_DEMAND, as a pinning driver: mlock the range,
 *    then every IO page table entry present (nic_mr_map_pinned);
 *  - with it: the range (page rounded) becomes an npf region of this
 *    process (npf_client__register, $NPF_SOCKET or npfd's default socket)
 *    and the MR's IO page table is attached to it as a device
 *    (npf_client__attach_device): nothing is pinned or populated; the NIC
 *    raises page requests that npfd resolves. MRs whose pages overlap share
 *    one region (npfd refuses overlapping regions).
 *
 * Completion channels need npf-run's write() interposer
 * (libnpfverbs-preload.so, see there).
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>
#include "verbs_abi.h"
#include "npf.h"
#include "npf_nic.h"

#define NPF_PAGE 4096UL
#define NPF_MAX_INLINE 256
#define NPF_VENDOR_ID 0x1af4 /* shown by ibv_devinfo; no hardware owns it here */
#define NPF_VENDOR_PART 0x4e50

#define npf_err(fmt, ...) fprintf(stderr, "npf verbs: " fmt "\n", ##__VA_ARGS__)

struct npf_vdev {
	struct verbs_device vdev;
	struct in_addr addr;
	union ibv_gid gid;
	__be64 guid;
};

struct npf_qp;
struct npf_cq;

struct npf_ctx {
	struct verbs_context vctx;
	struct nic *nic;
	int async_wr;
	struct npf_vdev *dev;
	/*
	 * Asynchronous events (see npf_nic_event): the QPs and CQs they may
	 * name, and the order of what is written to async_wr.
	 */
	pthread_mutex_t ev_lock;
	struct npf_qp *qps;
	struct npf_cq *cqs;
	unsigned long events_lost;
	/*
	 * Implicit MRs: ranges peers asked for that no child covers
	 * (NIC_EVENT_MR_MISS), for the thread that adds the children.
	 */
	pthread_mutex_t miss_lock;
	pthread_cond_t miss_cond;
	struct {
		struct nic_mr *mr;
		__u64 addr, len;
	} miss[16];
	unsigned int miss_head, miss_tail;
	bool miss_stop, miss_started;
	pthread_t miss_thread;
};

/* libibverbs' ibv_context is the last member of verbs_context, not the first */
static inline struct npf_ctx *npf_ctx_of(struct ibv_context *c)
{
	return (struct npf_ctx *)((char *)c - offsetof(struct npf_ctx, vctx.context));
}

struct npf_pd {
	struct ibv_pd ibpd;
	struct nic_pd *pd;
};

/* An npf region of this process, shared by the ODP MRs whose pages it holds. */
struct npf_region {
	struct npf_region *next;
	__u64 start, end; /* page aligned */
	int id;
	int refs;
};

struct npf_mr {
	struct verbs_mr vmr;
	struct npf_mr *next; /* npf_mrs, by lkey for ibv_advise_mr */
	struct nic_mr *mr;
	struct npf_region *region; /* ODP */
	int dev_id;		   /* ODP: npfd's device id */
	void *lock_addr;	   /* pinned: what was mlocked */
	size_t lock_len;
	/* implicit on-demand MR: no NIC MR of its own; children made at post time */
	bool implicit;
	int access;
	struct npf_mr *children;
};

/*
 * An implicit MR's key: NIC keys are (slot << 8) | salt with slot < 1024,
 * so keys with the top bit set are never theirs.
 */
#define NPF_IMPLICIT_KEY 0x80000000u

struct npf_cq {
	struct verbs_cq vcq;
	struct nic_cq *cq;
	int chan_wfd;
	struct npf_cq *next;   /* ctx->cqs */
	__u32 events_reported; /* asynchronous events written for it */
};

struct npf_qp {
	struct verbs_qp vqp;
	struct nic_qp *qp;
	struct npf_ctx *ctx;
	struct npf_qp *next;   /* ctx->qps */
	__u32 events_reported; /* asynchronous events written for it */
	struct ibv_qp_cap cap;
	int sq_sig_all;
	struct ibv_qp_attr attr; /* what was set, for query_qp */
	int attr_mask;
	/* inline data: copied at post time into a slot of a pinned buffer */
	char *inl;
	size_t inl_slots, inl_next;
	struct nic_mr *inl_mr;
};

/* ---- npfd: one connection and one region list per process -------------------- */

static pthread_mutex_t npf_lock = PTHREAD_MUTEX_INITIALIZER;
static struct npf_client *npf_client;
static struct npf_region *npf_regions;
static struct npf_mr *npf_mrs;

static struct npf_client *npf_get_client(void)
{
	if (!npf_client) {
		npf_client = npf_client__connect(NULL);
		if (!npf_client) {
			int e = errno;
			const char *s = getenv("NPF_SOCKET");

			npf_err("on-demand MR: cannot connect to npfd at %s: %s (start npfd, or set NPF_SOCKET)",
				s ? s : "its default socket", strerror(e));
			errno = e;
		}
	}
	return npf_client;
}

/* The region holding [start, end), registered if none does; NULL and errno on failure. */
static struct npf_region *npf_region_get(__u64 start, __u64 end)
{
	struct npf_region *r;
	int id;

	for (r = npf_regions; r; r = r->next) {
		if (start >= r->start && end <= r->end) {
			r->refs++;
			return r;
		}
		if (start < r->end && r->start < end) {
			npf_err("on-demand MR 0x%llx-0x%llx: its pages overlap npf region %d (0x%llx-0x%llx) without being inside it; register the larger buffer first",
				(unsigned long long)start, (unsigned long long)end, r->id,
				(unsigned long long)r->start, (unsigned long long)r->end);
			errno = EBUSY;
			return NULL;
		}
	}
	if (!npf_get_client())
		return NULL;
	{
		NPF_OPTS(npf_region_opts, o, .name = "ibv_reg_mr");

		id = npf_client__register(npf_client, (void *)(uintptr_t)start, end - start, &o);
	}
	if (id < 0) {
		npf_err("on-demand MR 0x%llx-0x%llx: npfd refused the region: %s (%s)",
			(unsigned long long)start, (unsigned long long)end,
			npf_client__errmsg(npf_client), strerror(-id));
		errno = -id;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		npf_client__unregister(npf_client, id);
		errno = ENOMEM;
		return NULL;
	}
	r->start = start;
	r->end = end;
	r->id = id;
	r->refs = 1;
	r->next = npf_regions;
	npf_regions = r;
	return r;
}

static void npf_region_put(struct npf_region *r)
{
	struct npf_region **pp;

	if (--r->refs)
		return;
	for (pp = &npf_regions; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	npf_client__unregister(npf_client, r->id);
	free(r);
}

/* ---- device ------------------------------------------------------------------ */

static int npf_query_device_ex(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct npf_ctx *ctx = npf_ctx_of(context);
	struct ibv_device_attr_ex a = {};
	struct ibv_device_attr *o = &a.orig_attr;

	if (input && input->comp_mask)
		return EINVAL;
	snprintf(o->fw_ver, sizeof(o->fw_ver), "npf-nic 1");
	o->node_guid = ctx->dev->guid;
	o->sys_image_guid = ctx->dev->guid;
	o->max_mr_size = 1ULL << 46;
	o->page_size_cap = NPF_PAGE;
	o->vendor_id = NPF_VENDOR_ID;
	o->vendor_part_id = NPF_VENDOR_PART;
	o->hw_ver = 1;
	o->max_qp = 1024;
	o->max_qp_wr = 32768;
	o->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN;
	o->max_sge = NIC_MAX_SGE;
	o->max_sge_rd = NIC_MAX_SGE;
	o->max_cq = 65536;
	o->max_cqe = 1 << 22;
	o->max_mr = 1024;
	o->max_pd = 65536;
	o->max_qp_rd_atom = 8;
	o->max_qp_init_rd_atom = 8;
	o->max_res_rd_atom = 8 * 1024;
	o->atomic_cap = IBV_ATOMIC_NONE;
	o->max_pkeys = 1;
	o->local_ca_ack_delay = 15;
	o->phys_port_cnt = 1;
	a.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	a.odp_caps.per_transport_caps.rc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
						    IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ;
	a.phys_port_cnt_ex = 1;
	memcpy(attr, &a, attr_size < sizeof(a) ? attr_size : sizeof(a));
	return 0;
}

static int npf_query_port(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr)
{
	if (port != 1)
		return EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->state = IBV_PORT_ACTIVE;
	attr->max_mtu = IBV_MTU_4096;
	attr->active_mtu = IBV_MTU_4096;
	attr->gid_tbl_len = 1;
	attr->port_cap_flags = IBV_PORT_CM_SUP;
	attr->max_msg_sz = 1U << 31;
	attr->pkey_tbl_len = 1;
	attr->active_width = 2;	 /* 4x */
	attr->active_speed = 32; /* EDR */
	attr->phys_state = 5;	 /* LinkUp */
	attr->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

/* ---- PD, MR ---------------------------------------------------------------------- */

static struct ibv_pd *npf_alloc_pd(struct ibv_context *context)
{
	struct npf_ctx *ctx = npf_ctx_of(context);
	struct npf_pd *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return NULL;
	pd->pd = nic_alloc_pd(ctx->nic);
	if (!pd->pd) {
		free(pd);
		return NULL;
	}
	return &pd->ibpd;
}

static int npf_dealloc_pd(struct ibv_pd *ibpd)
{
	struct npf_pd *pd = (struct npf_pd *)ibpd;
	int err = nic_dealloc_pd(pd->pd);

	if (err)
		return -err;
	free(pd);
	return 0;
}

static struct ibv_mr *npf_reg_mr(struct ibv_pd *ibpd, void *addr, size_t len, uint64_t hca_va,
				 int access);

static int npf_nic_access(int access)
{
	return ((access & IBV_ACCESS_LOCAL_WRITE) ? NIC_ACCESS_LOCAL_WRITE : 0) |
	       ((access & IBV_ACCESS_REMOTE_WRITE) ? NIC_ACCESS_REMOTE_WRITE : 0) |
	       ((access & IBV_ACCESS_REMOTE_READ) ? NIC_ACCESS_REMOTE_READ : 0);
}

static void *npf_miss_thread(void *arg);

/*
 * Implicit ODP (ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND)): the
 * whole address space, with nothing registered yet. Its memory is reached
 * through child MRs, each covering one private mapping (an ordinary
 * on-demand MR: an npf region attached to the NIC), made the first time
 * that mapping is used:
 *  - locally, a work request naming the implicit lkey gets, for each SGE,
 *    the child holding it (made at post time); the SGE carries its key;
 *  - remotely, the rkey is the NIC's implicit MR (nic_reg_mr_implicit): a
 *    peer's WRITE or READ that no child covers yet is RNR NAKed while the
 *    NIC asks for one (NIC_EVENT_MR_MISS); this context's miss thread makes
 *    it (npf_miss_thread), and the peer's retry finds it, then faults its
 *    pages through npfd like any on-demand MR. A range in no private
 *    mapping is refused: REM_ACCESS_ERR, as hardware gives outside an MR.
 */
static struct ibv_mr *npf_reg_implicit(struct ibv_pd *ibpd, int access)
{
	static _Atomic __u32 next;
	struct npf_ctx *ctx = npf_ctx_of(ibpd->context);
	struct npf_mr *m = calloc(1, sizeof(*m));
	int e;

	if (!m)
		return NULL;
	pthread_mutex_lock(&ctx->miss_lock);
	e = 0;
	if (!ctx->miss_started) {
		e = pthread_create(&ctx->miss_thread, NULL, npf_miss_thread, ctx);
		ctx->miss_started = !e;
	}
	pthread_mutex_unlock(&ctx->miss_lock);
	m->mr = e ? NULL : nic_reg_mr_implicit(((struct npf_pd *)ibpd)->pd, npf_nic_access(access));
	if (!m->mr) {
		e = e ? e : errno;
		npf_err("implicit MR: the device refused it: %s", strerror(e));
		free(m);
		errno = e;
		return NULL;
	}
	m->implicit = true;
	m->access = access;
	m->dev_id = -1;
	m->vmr.ibv_mr.context = ibpd->context;
	m->vmr.ibv_mr.pd = ibpd;
	m->vmr.ibv_mr.addr = NULL;
	m->vmr.ibv_mr.length = SIZE_MAX;
	m->vmr.ibv_mr.lkey = NPF_IMPLICIT_KEY | (atomic_fetch_add(&next, 1) & 0x7fffffff);
	m->vmr.ibv_mr.rkey = nic_mr_rkey(m->mr);
	m->vmr.ibv_mr.handle = m->vmr.ibv_mr.lkey;
	pthread_mutex_lock(&npf_lock);
	m->next = npf_mrs;
	npf_mrs = m;
	pthread_mutex_unlock(&npf_lock);
	return &m->vmr.ibv_mr;
}

/* The private anonymous mapping holding [addr, addr + len), from /proc/self/maps. */
static int npf_find_mapping(__u64 addr, __u64 len, __u64 *start, __u64 *end)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");
	int err = -EFAULT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, off;
		char perm[8];

		if (sscanf(line, "%lx-%lx %7s %lx", &lo, &hi, perm, &off) != 4)
			continue;
		if (addr < lo || addr >= hi)
			continue;
		if (addr + len > hi || perm[3] != 'p')
			break;
		*start = lo;
		*end = hi;
		err = 0;
		break;
	}
	fclose(f);
	return err;
}

static pthread_mutex_t npf_implicit_lock = PTHREAD_MUTEX_INITIALIZER;

/* The child of implicit MR m holding [addr, addr + len): its lkey, or 0. Under npf_implicit_lock. */
static __u32 npf_implicit_lkey_locked(struct npf_mr *m, __u64 addr, __u64 len)
{
	struct npf_mr *c, **pp;
	struct ibv_mr *mr;
	__u64 start, end;
	__u32 key = 0;

	for (c = m->children; c; c = c->next)
		if (addr >= (uintptr_t)c->vmr.ibv_mr.addr &&
		    addr + len <= (uintptr_t)c->vmr.ibv_mr.addr + c->vmr.ibv_mr.length) {
			key = c->vmr.ibv_mr.lkey;
			goto out;
		}
	if (npf_find_mapping(addr, len ? len : 1, &start, &end)) {
		npf_err("implicit MR: [0x%llx, +%llu) is not inside one private mapping",
			(unsigned long long)addr, (unsigned long long)len);
		goto out;
	}
	mr = npf_reg_mr(m->vmr.ibv_mr.pd, (void *)(uintptr_t)start, end - start, start, m->access);
	if (!mr)
		goto out;
	c = (struct npf_mr *)mr;
	/* children live on the implicit MR's list, not on npf_mrs */
	pthread_mutex_lock(&npf_lock);
	for (pp = &npf_mrs; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	pthread_mutex_unlock(&npf_lock);
	c->next = m->children;
	m->children = c;
	/* the NIC serves the implicit rkey through it from now on */
	nic_mr_add_child(m->mr, c->mr);
	key = c->vmr.ibv_mr.lkey;
out:
	return key;
}

static __u32 npf_implicit_lkey(struct npf_mr *m, __u64 addr, __u64 len)
{
	__u32 key;

	pthread_mutex_lock(&npf_implicit_lock);
	key = npf_implicit_lkey_locked(m, addr, len);
	pthread_mutex_unlock(&npf_implicit_lock);
	return key;
}

/*
 * A peer asked for [addr, addr + len) through an implicit MR's rkey and no
 * child holds it (NIC_EVENT_MR_MISS, queued by npf_nic_event): make the
 * child, or refuse the range. Registering with npfd cannot happen on the
 * NIC's engine thread (it holds the device lock), hence this thread.
 */
static void *npf_miss_thread(void *arg)
{
	struct npf_ctx *ctx = arg;

	pthread_mutex_lock(&ctx->miss_lock);
	while (!ctx->miss_stop) {
		struct nic_mr *nmr;
		struct npf_mr *m;
		__u64 addr, len;

		if (ctx->miss_head == ctx->miss_tail) {
			pthread_cond_wait(&ctx->miss_cond, &ctx->miss_lock);
			continue;
		}
		nmr = ctx->miss[ctx->miss_head % 16].mr;
		addr = ctx->miss[ctx->miss_head % 16].addr;
		len = ctx->miss[ctx->miss_head % 16].len;
		ctx->miss_head++;
		pthread_mutex_unlock(&ctx->miss_lock);
		/* the implicit MR may be gone: found under the lock its dereg takes */
		pthread_mutex_lock(&npf_implicit_lock);
		pthread_mutex_lock(&npf_lock);
		for (m = npf_mrs; m && !(m->implicit && m->mr == nmr); m = m->next)
			;
		pthread_mutex_unlock(&npf_lock);
		if (m && !npf_implicit_lkey_locked(m, addr, len))
			nic_mr_refuse(m->mr, addr, len);
		pthread_mutex_unlock(&npf_implicit_lock);
		pthread_mutex_lock(&ctx->miss_lock);
	}
	pthread_mutex_unlock(&ctx->miss_lock);
	return NULL;
}

static struct npf_mr *npf_mr_by_lkey(__u32 lkey)
{
	struct npf_mr *m;

	pthread_mutex_lock(&npf_lock);
	for (m = npf_mrs; m; m = m->next)
		if (m->vmr.ibv_mr.lkey == lkey)
			break;
	pthread_mutex_unlock(&npf_lock);
	return m;
}

/* An SGE's key as the NIC knows it (an implicit MR's child), or 0. */
static __u32 npf_sge_lkey(struct ibv_sge *sge)
{
	struct npf_mr *m;

	if (!(sge->lkey & NPF_IMPLICIT_KEY))
		return sge->lkey;
	m = npf_mr_by_lkey(sge->lkey);
	if (!m || !m->implicit)
		return sge->lkey; /* the NIC finds no such key: LOC_PROT_ERR, as hardware */
	return npf_implicit_lkey(m, sge->addr, sge->length);
}

static struct ibv_mr *npf_reg_mr(struct ibv_pd *ibpd, void *addr, size_t len, uint64_t hca_va,
				 int access)
{
	struct npf_pd *pd = (struct npf_pd *)ibpd;
	int nacc = 0, e;
	struct npf_mr *m;
	__u64 start, end;

	if (!addr && len == SIZE_MAX && (access & IBV_ACCESS_ON_DEMAND))
		return npf_reg_implicit(ibpd, access);
	if (!len || hca_va != (uintptr_t)addr || (uintptr_t)addr + len < (uintptr_t)addr) {
		errno = EINVAL;
		return NULL;
	}
	if (access & IBV_ACCESS_LOCAL_WRITE)
		nacc |= NIC_ACCESS_LOCAL_WRITE;
	if (access & IBV_ACCESS_REMOTE_WRITE)
		nacc |= NIC_ACCESS_REMOTE_WRITE;
	if (access & IBV_ACCESS_REMOTE_READ)
		nacc |= NIC_ACCESS_REMOTE_READ;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->dev_id = -1;
	m->mr = nic_reg_mr(pd->pd, addr, len, nacc);
	if (!m->mr)
		goto err_free;
	start = (uintptr_t)addr & ~(NPF_PAGE - 1);
	end = ((uintptr_t)addr + len + NPF_PAGE - 1) & ~(NPF_PAGE - 1);
	if (access & IBV_ACCESS_ON_DEMAND) {
		pthread_mutex_lock(&npf_lock);
		m->region = npf_region_get(start, end);
		if (m->region) {
			m->dev_id = npf_client__attach_device(npf_client, m->region->id,
							      nic_mr_iopt_fd(m->mr));
			if (m->dev_id < 0) {
				e = -m->dev_id;
				npf_err("on-demand MR %p+%zu: npfd refused to attach the device: %s (%s)",
					addr, len, npf_client__errmsg(npf_client), strerror(e));
				npf_region_put(m->region);
				m->region = NULL;
				errno = e;
			} else {
				nic_mr_set_npf_id(m->mr, m->dev_id);
			}
		}
		pthread_mutex_unlock(&npf_lock);
		if (!m->region)
			goto err_dereg;
	} else {
		/* a pinning driver: resident and locked, every IO PTE present */
		if (mlock((void *)(uintptr_t)start, end - start)) {
			e = errno;
			npf_err("MR %p+%zu: mlock failed: %s (raise RLIMIT_MEMLOCK, or register with IBV_ACCESS_ON_DEMAND)",
				addr, len, strerror(e));
			errno = e;
			goto err_dereg;
		}
		m->lock_addr = (void *)(uintptr_t)start;
		m->lock_len = end - start;
		nic_mr_map_pinned(m->mr);
	}
	m->vmr.ibv_mr.context = ibpd->context;
	m->vmr.ibv_mr.pd = ibpd;
	m->vmr.ibv_mr.addr = addr;
	m->vmr.ibv_mr.length = len;
	m->vmr.ibv_mr.lkey = nic_mr_lkey(m->mr);
	m->vmr.ibv_mr.rkey = nic_mr_rkey(m->mr);
	m->vmr.ibv_mr.handle = m->vmr.ibv_mr.lkey;
	pthread_mutex_lock(&npf_lock);
	m->next = npf_mrs;
	npf_mrs = m;
	pthread_mutex_unlock(&npf_lock);
	return &m->vmr.ibv_mr;

err_dereg:
	e = errno;
	nic_dereg_mr(m->mr);
	errno = e;
err_free:
	e = errno;
	free(m);
	errno = e;
	return NULL;
}

static int npf_dereg_mr(struct verbs_mr *vmr)
{
	struct npf_mr *m = (struct npf_mr *)vmr, **pp;
	int err;

	pthread_mutex_lock(&npf_lock);
	for (pp = &npf_mrs; *pp; pp = &(*pp)->next)
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	/*
	 * npfd first: detaching invalidates the MR's entries and waits for
	 * the NIC's acknowledgement, which the engine gives only while the
	 * MR is still registered with it.
	 */
	if (m->region) {
		npf_client__detach_device(npf_client, m->dev_id);
		npf_region_put(m->region);
		m->region = NULL;
	}
	pthread_mutex_unlock(&npf_lock);
	if (m->implicit) {
		/* the miss thread looks implicit MRs up under this lock */
		pthread_mutex_lock(&npf_implicit_lock);
		while (m->children) {
			struct npf_mr *c = m->children;

			m->children = c->next;
			pthread_mutex_lock(&npf_lock);
			c->next = npf_mrs;
			npf_mrs = c;
			pthread_mutex_unlock(&npf_lock);
			err = npf_dereg_mr(&c->vmr);
			if (err) {
				pthread_mutex_unlock(&npf_implicit_lock);
				return err;
			}
		}
		nic_dereg_mr(m->mr);
		pthread_mutex_unlock(&npf_implicit_lock);
		free(m);
		return 0;
	}
	/* the device never touches the range again once this returns */
	err = nic_dereg_mr(m->mr);
	if (err)
		return -err;
	if (m->lock_addr)
		munlock(m->lock_addr, m->lock_len);
	free(m);
	return 0;
}

static struct npf_mr *npf_mr_by_child(struct npf_mr *m, __u32 lkey)
{
	struct npf_mr *c;

	pthread_mutex_lock(&npf_implicit_lock);
	for (c = m->children; c && c->vmr.ibv_mr.lkey != lkey; c = c->next)
		;
	pthread_mutex_unlock(&npf_implicit_lock);
	return c;
}

/*
 * ibv_advise_mr: prefetch through npfd, as the device's own page requests
 * would (PREFETCH: readable; PREFETCH_WRITE: writable; PREFETCH_NO_FAULT:
 * only pages already resident). With IBV_ADVISE_MR_FLAG_FLUSH, return once
 * the pages are present (or ETIMEDOUT after NPF_ADVISE_FLUSH_MS).
 */
#define NPF_ADVISE_FLUSH_MS 10000

static int npf_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
			 struct ibv_sge *sg, uint32_t n)
{
	uint32_t i;

	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return EOPNOTSUPP;
	if (flags & ~IBV_ADVISE_MR_FLAG_FLUSH)
		return EINVAL;
	for (i = 0; i < n; i++) {
		struct npf_mr *m;
		int err;

		m = npf_mr_by_lkey(sg[i].lkey);
		if (m && m->implicit) {
			__u32 k = npf_implicit_lkey(m, sg[i].addr, sg[i].length);

			m = k ? npf_mr_by_child(m, k) : NULL;
		}
		if (!m || m->vmr.ibv_mr.pd != pd)
			return EINVAL;
		/* the MR cannot go away under us: deregistering it while advising is the caller's race */
		err = nic_mr_prefetch(
			m->mr, sg[i].addr, sg[i].length, advice != IBV_ADVISE_MR_ADVICE_PREFETCH,
			advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
			(flags & IBV_ADVISE_MR_FLAG_FLUSH) ? NPF_ADVISE_FLUSH_MS : -1);
		if (err)
			return -err;
	}
	return 0;
}

/* ---- asynchronous events ---------------------------------------------------------- */

/*
 * What ibv_get_async_event() reads from the context's async_fd: libibverbs
 * 44 read()s one struct ib_uverbs_async_event_desc (the kernel's format:
 * element, then event_type), takes element as the ibv_qp or ibv_cq
 * pointer, and calls the provider's async_event op (none here).
 * ibv_ack_async_event() counts acknowledgements in the QP or CQ
 * (events_completed, async_events_completed).
 *
 * async_fd is one end of an AF_UNIX SOCK_SEQPACKET pair: one record per
 * event, never torn, and the provider can take back events nobody read
 * yet (MSG_DONTWAIT) when their QP or CQ is destroyed, as the kernel
 * discards them; destroy then waits until every event that was read has
 * been acknowledged, as ibv_destroy_qp/cq do with kernel providers.
 *
 * The NIC reports (nic_event_fn, engine thread, device lock held):
 *  - a responder's fatal refusal with no receive completion to carry it:
 *    an invalid request (IBV_EVENT_QP_REQ_ERR), an access violation, e.g.
 *    a peer's WRITE or READ with a bad rkey (IBV_EVENT_QP_ACCESS_ERR);
 *  - a completion lost to a full CQ: IBV_EVENT_CQ_ERR on the CQ (once)
 *    and IBV_EVENT_QP_FATAL on the QP, which goes to the error state;
 *  - the first request a QP accepts: IBV_EVENT_COMM_EST, passed on only
 *    if the QP is still in RTR then (what hardware reports it for).
 * Requester errors (RETRY_EXC_ERR, RNR_RETRY_EXC_ERR, a NAK from the
 * peer, LOC_PROT_ERR) are reported by the failed WR's completion, not by
 * an event, as on hardware. IBV_EVENT_QP_LAST_WQE_REACHED and SRQ events
 * need an SRQ, which npf devices do not have.
 */
static void npf_nic_event(void *arg, const struct nic_event *ev)
{
	static const enum ibv_event_type type[] = {
		[NIC_EVENT_QP_FATAL] = IBV_EVENT_QP_FATAL,
		[NIC_EVENT_QP_REQ_ERR] = IBV_EVENT_QP_REQ_ERR,
		[NIC_EVENT_QP_ACCESS_ERR] = IBV_EVENT_QP_ACCESS_ERR,
		[NIC_EVENT_COMM_EST] = IBV_EVENT_COMM_EST,
		[NIC_EVENT_CQ_ERR] = IBV_EVENT_CQ_ERR,
	};
	struct npf_ctx *ctx = arg;
	struct ib_uverbs_async_event_desc d = {};
	__u32 *reported = NULL;

	/* (IBV_EVENT_CQ_ERR is 0: only the NIC's types index the table) */
	if (ev->type == NIC_EVENT_MR_MISS) {
		/* for the miss thread; a full queue drops it: the NIC asks again */
		pthread_mutex_lock(&ctx->miss_lock);
		if (ctx->miss_tail - ctx->miss_head < 16) {
			ctx->miss[ctx->miss_tail % 16].mr = ev->mr;
			ctx->miss[ctx->miss_tail % 16].addr = ev->addr;
			ctx->miss[ctx->miss_tail % 16].len = ev->len;
			ctx->miss_tail++;
			pthread_cond_signal(&ctx->miss_cond);
		}
		pthread_mutex_unlock(&ctx->miss_lock);
		return;
	}
	if (ev->type < NIC_EVENT_QP_FATAL || ev->type > NIC_EVENT_CQ_ERR)
		return;
	d.event_type = type[ev->type];
	pthread_mutex_lock(&ctx->ev_lock);
	if (ev->qp) {
		struct npf_qp *q;

		for (q = ctx->qps; q && q->qp != ev->qp; q = q->next)
			;
		if (q && (ev->type != NIC_EVENT_COMM_EST || q->attr.qp_state == IBV_QPS_RTR)) {
			d.element = (uintptr_t)&q->vqp.qp;
			reported = &q->events_reported;
		}
	} else if (ev->cq) {
		struct npf_cq *c;

		for (c = ctx->cqs; c && c->cq != ev->cq; c = c->next)
			;
		if (c) {
			d.element = (uintptr_t)&c->vcq.cq;
			reported = &c->events_reported;
		}
	}
	if (reported && ctx->async_wr >= 0) {
		/* never block the engine: a full socket loses the event (counted) */
		if (send(ctx->async_wr, &d, sizeof(d), MSG_DONTWAIT | MSG_NOSIGNAL) == sizeof(d))
			++*reported;
		else
			ctx->events_lost++;
	}
	pthread_mutex_unlock(&ctx->ev_lock);
}

/*
 * Take back the events nobody has read that name element; under ev_lock.
 * Returns how many there were. The others go back in their order.
 */
static __u32 npf_events_discard(struct npf_ctx *ctx, __u64 element)
{
	struct ib_uverbs_async_event_desc keep[64], d;
	__u32 dropped = 0, n = 0, i;

	for (;;) {
		ssize_t r = recv(ctx->vctx.context.async_fd, &d, sizeof(d), MSG_DONTWAIT);

		if (r != sizeof(d))
			break;
		if (d.element == element)
			dropped++;
		else if (n < sizeof(keep) / sizeof(keep[0]))
			keep[n++] = d;
		else
			ctx->events_lost++;
	}
	for (i = 0; i < n; i++)
		if (send(ctx->async_wr, &keep[i], sizeof(keep[i]), MSG_DONTWAIT | MSG_NOSIGNAL) !=
		    sizeof(keep[i]))
			ctx->events_lost++;
	return dropped;
}

/* ---- CQ ------------------------------------------------------------------------ */

static int (*preload_wfd)(int rfd);

static struct ibv_cq *npf_create_cq(struct ibv_context *context, int cqe,
				    struct ibv_comp_channel *channel, int comp_vector)
{
	struct npf_ctx *ctx = npf_ctx_of(context);
	struct npf_cq *cq;

	if (cqe <= 0 || cqe > (1 << 22)) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	cq->chan_wfd = -1;
	if (channel) {
		cq->chan_wfd = preload_wfd ? preload_wfd(channel->fd) : -1;
		if (cq->chan_wfd < 0) {
			npf_err("CQ: completion channel fd %d was not made by npf (run the program under npf-run)",
				channel->fd);
			free(cq);
			errno = EINVAL;
			return NULL;
		}
	}
	cq->cq = nic_create_cq(ctx->nic, cqe);
	if (!cq->cq) {
		free(cq);
		return NULL;
	}
	cq->vcq.cq.cqe = cqe;
	pthread_mutex_lock(&ctx->ev_lock);
	cq->next = ctx->cqs;
	ctx->cqs = cq;
	pthread_mutex_unlock(&ctx->ev_lock);
	return &cq->vcq.cq;
}

static int npf_destroy_cq(struct ibv_cq *ibcq)
{
	struct npf_cq *cq = (struct npf_cq *)ibcq, **pp;
	struct npf_ctx *ctx = npf_ctx_of(ibcq->context);
	__u32 read;
	int err;

	nic_cq_arm(cq->cq, -1, 0);
	err = nic_destroy_cq(cq->cq);
	if (err)
		return -err;
	pthread_mutex_lock(&ctx->ev_lock);
	for (pp = &ctx->cqs; *pp; pp = &(*pp)->next)
		if (*pp == cq) {
			*pp = cq->next;
			break;
		}
	read = cq->events_reported - npf_events_discard(ctx, (uintptr_t)ibcq);
	pthread_mutex_unlock(&ctx->ev_lock);
	/* what ibv_cmd_destroy_cq() does: every event read must be acknowledged */
	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->async_events_completed != read)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);
	free(cq);
	return 0;
}

static int npf_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct npf_cq *cq = (struct npf_cq *)ibcq;

	if (cq->chan_wfd < 0)
		return EINVAL;
	return -nic_cq_arm(cq->cq, cq->chan_wfd, (__u64)(uintptr_t)ibcq);
}

static const enum ibv_wc_status npf_wc_status[] = {
	[NIC_WC_SUCCESS] = IBV_WC_SUCCESS,
	[NIC_WC_LOC_LEN_ERR] = IBV_WC_LOC_LEN_ERR,
	[NIC_WC_LOC_QP_OP_ERR] = IBV_WC_LOC_QP_OP_ERR,
	[NIC_WC_LOC_PROT_ERR] = IBV_WC_LOC_PROT_ERR,
	[NIC_WC_WR_FLUSH_ERR] = IBV_WC_WR_FLUSH_ERR,
	[NIC_WC_LOC_ACCESS_ERR] = IBV_WC_LOC_ACCESS_ERR,
	[NIC_WC_REM_INV_REQ_ERR] = IBV_WC_REM_INV_REQ_ERR,
	[NIC_WC_REM_ACCESS_ERR] = IBV_WC_REM_ACCESS_ERR,
	[NIC_WC_REM_OP_ERR] = IBV_WC_REM_OP_ERR,
	[NIC_WC_RETRY_EXC_ERR] = IBV_WC_RETRY_EXC_ERR,
	[NIC_WC_RNR_RETRY_EXC_ERR] = IBV_WC_RNR_RETRY_EXC_ERR,
};

static const enum ibv_wc_opcode npf_wc_opcode[] = {
	[NIC_WC_SEND] = IBV_WC_SEND,
	[NIC_WC_RDMA_WRITE] = IBV_WC_RDMA_WRITE,
	[NIC_WC_RDMA_READ] = IBV_WC_RDMA_READ,
	[NIC_WC_RECV] = IBV_WC_RECV,
};

static int npf_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct npf_cq *cq = (struct npf_cq *)ibcq;
	struct nic_wc w[32];
	int got = 0;

	while (got < n) {
		int i, k = nic_poll_cq(cq->cq, n - got < 32 ? n - got : 32, w);

		for (i = 0; i < k; i++) {
			struct ibv_wc *o = &wc[got + i];

			memset(o, 0, sizeof(*o));
			o->wr_id = w[i].wr_id;
			o->status = (unsigned)w[i].status < sizeof(npf_wc_status) /
								    sizeof(npf_wc_status[0]) ?
					    npf_wc_status[w[i].status] :
					    IBV_WC_GENERAL_ERR;
			o->opcode = npf_wc_opcode[w[i].opcode & 3];
			o->byte_len = w[i].byte_len;
			o->qp_num = w[i].qp_num;
			o->vendor_err = o->status ? w[i].status : 0;
		}
		got += k;
		if (k < 32)
			break;
	}
	return got;
}

/* ---- QP -------------------------------------------------------------------------- */

static struct ibv_qp *npf_create_qp(struct ibv_pd *ibpd, struct ibv_qp_init_attr *ia)
{
	struct npf_pd *pd = (struct npf_pd *)ibpd;
	struct npf_qp *qp;
	size_t inl_len;

	if (ia->qp_type != IBV_QPT_RC) {
		errno = EOPNOTSUPP; /* npf devices do RC only (no UD, UC, XRC) */
		return NULL;
	}
	if (ia->srq || ia->cap.max_send_sge > NIC_MAX_SGE || ia->cap.max_recv_sge > NIC_MAX_SGE ||
	    ia->cap.max_send_wr > 32768 || ia->cap.max_recv_wr > 32768 ||
	    ia->cap.max_inline_data > NPF_MAX_INLINE || !ia->send_cq || !ia->recv_cq) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	qp->ctx = npf_ctx_of(ibpd->context);
	{
		NIC_OPTS(nic_qp_init_attr, a, .send_cq = ((struct npf_cq *)ia->send_cq)->cq,
			 .recv_cq = ((struct npf_cq *)ia->recv_cq)->cq,
			 /*
			  * twice what is asked: the device reports a WR's
			  * completion a moment before it frees its slot, and
			  * an application may post again as soon as it polls it
			  */
			 .max_send_wr = 2 * (ia->cap.max_send_wr ? ia->cap.max_send_wr : 1),
			 .max_recv_wr = 2 * (ia->cap.max_recv_wr ? ia->cap.max_recv_wr : 1),
			 .sq_sig_all = ia->sq_sig_all);

		qp->qp = nic_create_qp(pd->pd, &a);
	}
	if (!qp->qp)
		goto err_free;
	qp->sq_sig_all = ia->sq_sig_all;
	ia->cap.max_inline_data = NPF_MAX_INLINE;
	qp->cap = ia->cap;
	/* two slots per send WR: a slot is reused only after the SQ turned over */
	qp->inl_slots = 2 * (size_t)(ia->cap.max_send_wr ? ia->cap.max_send_wr : 1);
	inl_len = (qp->inl_slots * NPF_MAX_INLINE + NPF_PAGE - 1) & ~(NPF_PAGE - 1);
	qp->inl = mmap(NULL, inl_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | MAP_LOCKED, -1, 0);
	if (qp->inl == MAP_FAILED) {
		qp->inl = NULL;
		goto err_qp;
	}
	qp->inl_mr = nic_reg_mr(pd->pd, qp->inl, inl_len, NIC_ACCESS_LOCAL_WRITE);
	if (!qp->inl_mr)
		goto err_qp;
	nic_mr_map_pinned(qp->inl_mr);
	/* what ibv_cmd_create_qp() fills in for kernel providers */
	qp->vqp.qp.context = ibpd->context;
	qp->vqp.qp.qp_context = ia->qp_context;
	qp->vqp.qp.pd = ibpd;
	qp->vqp.qp.send_cq = ia->send_cq;
	qp->vqp.qp.recv_cq = ia->recv_cq;
	qp->vqp.qp.qp_type = IBV_QPT_RC;
	pthread_mutex_init(&qp->vqp.qp.mutex, NULL);
	pthread_cond_init(&qp->vqp.qp.cond, NULL);
	qp->vqp.qp.qp_num = nic_qp_num(qp->qp);
	qp->vqp.qp.handle = qp->vqp.qp.qp_num;
	qp->vqp.qp.state = IBV_QPS_RESET;
	qp->attr.qp_state = IBV_QPS_RESET;
	pthread_mutex_lock(&qp->ctx->ev_lock);
	qp->next = qp->ctx->qps;
	qp->ctx->qps = qp;
	pthread_mutex_unlock(&qp->ctx->ev_lock);
	return &qp->vqp.qp;

err_qp:
	if (qp->inl)
		munmap(qp->inl, inl_len);
	nic_destroy_qp(qp->qp);
err_free:
	free(qp);
	if (!errno)
		errno = ENOMEM;
	return NULL;
}

static int npf_destroy_qp(struct ibv_qp *ibqp)
{
	struct npf_qp *qp = (struct npf_qp *)ibqp, **pp;
	struct npf_ctx *ctx = qp->ctx;
	int err = nic_destroy_qp(qp->qp);
	__u32 read;

	if (err)
		return -err;
	pthread_mutex_lock(&ctx->ev_lock);
	for (pp = &ctx->qps; *pp; pp = &(*pp)->next)
		if (*pp == qp) {
			*pp = qp->next;
			break;
		}
	read = qp->events_reported - npf_events_discard(ctx, (uintptr_t)ibqp);
	pthread_mutex_unlock(&ctx->ev_lock);
	/* what ibv_cmd_destroy_qp() does: every event read must be acknowledged */
	pthread_mutex_lock(&ibqp->mutex);
	while (ibqp->events_completed != read)
		pthread_cond_wait(&ibqp->cond, &ibqp->mutex);
	pthread_mutex_unlock(&ibqp->mutex);
	nic_dereg_mr(qp->inl_mr);
	munmap(qp->inl, (qp->inl_slots * NPF_MAX_INLINE + NPF_PAGE - 1) & ~(NPF_PAGE - 1));
	free(qp);
	return 0;
}

/* The IPv4 address a RoCEv2 GID names (::ffff:a.b.c.d); 0 if it names none. */
static in_addr_t npf_gid_ipv4(const union ibv_gid *gid)
{
	static const __u8 v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	in_addr_t a;

	if (memcmp(gid->raw, v4mapped, sizeof(v4mapped)))
		return 0;
	memcpy(&a, gid->raw + 12, 4);
	return a;
}

#define NPF_QP_ATTR_KNOWN                                                                          \
	(IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT | \
	 IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |      \
	 IBV_QP_RQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN |          \
	 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_DEST_QPN)

/*
 * The transport timers as the application set them, as a hardware RNIC
 * applies them: the local ACK timeout (4.096 µs << timeout, 0 = infinite)
 * and retry_cnt of the requester, rnr_retry, and the RNR NAK timer
 * (min_rnr_timer) its responder asks senders to wait. Without this the NIC
 * kept its own 10 ms timeout, shorter than the 67 ms perftest and
 * ibv_rc_pingpong ask for (timeout 14): on a busy machine a receiver that
 * was not scheduled for 10 ms made the sender resend its whole window.
 */
static int npf_qp_set_timers(struct npf_qp *qp, const struct ibv_qp_attr *attr, int mask)
{
	struct nic_qp_init_attr a = {.sz = sizeof(a)};
	unsigned int m = 0;

	if (mask & IBV_QP_TIMEOUT) {
		__u64 us = ((__u64)4096 << attr->timeout) / 1000;

		a.timeout_us = !attr->timeout	      ? NIC_TIMEOUT_NONE :
			       us >= NIC_TIMEOUT_NONE ? NIC_TIMEOUT_NONE - 1 :
							(__u32)us;
		m |= NIC_QP_TIMEOUT;
	}
	if (mask & IBV_QP_RETRY_CNT) {
		a.retry_cnt = attr->retry_cnt;
		m |= NIC_QP_RETRY_CNT;
	}
	if (mask & IBV_QP_RNR_RETRY) {
		a.rnr_retry = attr->rnr_retry;
		m |= NIC_QP_RNR_RETRY;
	}
	if (mask & IBV_QP_MIN_RNR_TIMER) {
		a.rnr_timer_us = nic_ib_rnr_timer_us(attr->min_rnr_timer);
		m |= NIC_QP_RNR_TIMER;
	}
	return m ? -nic_qp_set_timers(qp->qp, &a, m) : 0;
}

static int npf_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct npf_qp *qp = (struct npf_qp *)ibqp;
	enum ibv_qp_state cur = qp->attr.qp_state, next;
	int err;

	if (mask & ~NPF_QP_ATTR_KNOWN) {
		npf_err("QP %u: modify_qp with attributes npf devices do not know (mask 0x%x)",
			ibqp->qp_num, mask & ~NPF_QP_ATTR_KNOWN);
		return EOPNOTSUPP;
	}
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (mask & IBV_QP_PORT && attr->port_num != 1)
		return EINVAL;
	if (mask & IBV_QP_PATH_MTU &&
	    (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096))
		return EINVAL;
	if ((mask & IBV_QP_TIMEOUT && attr->timeout > 31) ||
	    (mask & IBV_QP_RETRY_CNT && attr->retry_cnt > 7) ||
	    (mask & IBV_QP_RNR_RETRY && attr->rnr_retry > 7) ||
	    (mask & IBV_QP_MIN_RNR_TIMER && attr->min_rnr_timer > 31))
		return EINVAL;
	switch (next) {
	case IBV_QPS_RESET:
	case IBV_QPS_INIT:
		if (cur > IBV_QPS_INIT && next != cur)
			return EOPNOTSUPP; /* the device cannot reset a connected QP: destroy it */
		break;
	case IBV_QPS_RTR: {
		struct nic_qp_info remote = {
			.magic = NIC_QP_INFO_MAGIC, .version = 1, .wire = NIC_WIRE_ROCE};

		if (cur == IBV_QPS_RTR)
			break;
		if (cur != IBV_QPS_INIT || (mask & (IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN)) !=
						   (IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
			return EINVAL;
		if (!attr->ah_attr.is_global || !npf_gid_ipv4(&attr->ah_attr.grh.dgid)) {
			npf_err("QP %u: INIT->RTR needs the peer's RoCEv2 GID (ah_attr.is_global and grh.dgid ::ffff:a.b.c.d; ibv_rc_pingpong -g 0): npf devices are IP addresses, a LID names none",
				ibqp->qp_num);
			return EINVAL;
		}
		remote.qpn = attr->dest_qp_num;
		remote.psn = attr->rq_psn & 0xffffff;
		remote.mtu = 128u << ((mask & IBV_QP_PATH_MTU) ? attr->path_mtu : IBV_MTU_4096);
		remote.udp_addr = npf_gid_ipv4(&attr->ah_attr.grh.dgid);
		remote.udp_port = htons(NIC_ROCE_PORT);
		err = nic_qp_connect(qp->qp, &remote);
		if (err)
			return -err;
		break;
	}
	case IBV_QPS_RTS:
		if (cur == IBV_QPS_RTS)
			break;
		if (cur != IBV_QPS_RTR || !(mask & IBV_QP_SQ_PSN))
			return EINVAL;
		err = nic_qp_set_psn(qp->qp, attr->sq_psn & 0xffffff);
		if (err)
			return -err;
		break;
	case IBV_QPS_ERR:
	case IBV_QPS_SQD:
	case IBV_QPS_SQE:
	default:
		return EOPNOTSUPP;
	}
	err = npf_qp_set_timers(qp, attr, mask);
	if (err)
		return err;
	/* remember what was set */
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->attr.qp_access_flags = attr->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		qp->attr.pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->attr.port_num = attr->port_num;
	if (mask & IBV_QP_AV)
		qp->attr.ah_attr = attr->ah_attr;
	if (mask & IBV_QP_PATH_MTU)
		qp->attr.path_mtu = attr->path_mtu;
	if (mask & IBV_QP_TIMEOUT)
		qp->attr.timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		qp->attr.retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		qp->attr.rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_RQ_PSN)
		qp->attr.rq_psn = attr->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		qp->attr.sq_psn = attr->sq_psn;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->attr.max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		qp->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->attr.min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_DEST_QPN)
		qp->attr.dest_qp_num = attr->dest_qp_num;
	pthread_mutex_lock(&qp->ctx->ev_lock); /* npf_nic_event reads it (COMM_EST) */
	qp->attr.qp_state = next;
	pthread_mutex_unlock(&qp->ctx->ev_lock);
	ibqp->state = next;
	return 0;
}

static int npf_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
			struct ibv_qp_init_attr *init)
{
	struct npf_qp *qp = (struct npf_qp *)ibqp;

	*attr = qp->attr;
	if (nic_qp_in_error(qp->qp))
		attr->qp_state = IBV_QPS_ERR;
	attr->cur_qp_state = attr->qp_state;
	attr->cap = qp->cap;
	memset(init, 0, sizeof(*init));
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->cap = qp->cap;
	init->qp_type = IBV_QPT_RC;
	init->sq_sig_all = qp->sq_sig_all;
	return 0;
}

static int npf_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct npf_qp *qp = (struct npf_qp *)ibqp;

	if (qp->attr.qp_state != IBV_QPS_RTS) {
		*bad = wr;
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		struct nic_sge sge[NIC_MAX_SGE];
		struct nic_send_wr w = {.wr_id = wr->wr_id, .sg_list = sge, .num_sge = wr->num_sge};
		struct nic_send_wr *nbad;
		int i, err;

		switch (wr->opcode) {
		case IBV_WR_SEND:
			w.opcode = NIC_WR_SEND;
			break;
		case IBV_WR_RDMA_WRITE:
			w.opcode = NIC_WR_RDMA_WRITE;
			break;
		case IBV_WR_RDMA_READ:
			w.opcode = NIC_WR_RDMA_READ;
			break;
		default: /* immediate data, atomics, memory windows: not modelled */
			*bad = wr;
			return EOPNOTSUPP;
		}
		if (wr->num_sge < 0 || wr->num_sge > NIC_MAX_SGE) {
			*bad = wr;
			return EINVAL;
		}
		w.remote_addr = wr->wr.rdma.remote_addr;
		w.rkey = wr->wr.rdma.rkey;
		if (wr->send_flags & IBV_SEND_SIGNALED)
			w.send_flags |= NIC_SEND_SIGNALED;
		if (wr->send_flags & IBV_SEND_FENCE)
			w.send_flags |= NIC_SEND_FENCE;
		if ((wr->send_flags & IBV_SEND_INLINE) && w.opcode != NIC_WR_RDMA_READ) {
			char *slot = qp->inl + (qp->inl_next % qp->inl_slots) * NPF_MAX_INLINE;
			size_t len = 0;

			for (i = 0; i < wr->num_sge; i++) {
				if (wr->sg_list[i].length > NPF_MAX_INLINE - len) {
					*bad = wr;
					return EINVAL;
				}
				memcpy(slot + len, (void *)(uintptr_t)wr->sg_list[i].addr,
				       wr->sg_list[i].length);
				len += wr->sg_list[i].length;
			}
			sge[0] = (struct nic_sge){(uintptr_t)slot, (__u32)len,
						  nic_mr_lkey(qp->inl_mr)};
			w.num_sge = 1;
		} else {
			for (i = 0; i < wr->num_sge; i++)
				sge[i] = (struct nic_sge){wr->sg_list[i].addr,
							  wr->sg_list[i].length,
							  npf_sge_lkey(&wr->sg_list[i])};
		}
		err = nic_post_send(qp->qp, &w, &nbad);
		if (err) {
			*bad = wr;
			return -err;
		}
		if ((wr->send_flags & IBV_SEND_INLINE) && w.opcode != NIC_WR_RDMA_READ)
			qp->inl_next++;
	}
	return 0;
}

static int npf_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct npf_qp *qp = (struct npf_qp *)ibqp;

	if (qp->attr.qp_state == IBV_QPS_RESET) {
		*bad = wr;
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		struct nic_sge sge[NIC_MAX_SGE];
		struct nic_recv_wr w = {.wr_id = wr->wr_id, .sg_list = sge, .num_sge = wr->num_sge};
		struct nic_recv_wr *nbad;
		int i, err;

		if (wr->num_sge < 0 || wr->num_sge > NIC_MAX_SGE) {
			*bad = wr;
			return EINVAL;
		}
		for (i = 0; i < wr->num_sge; i++)
			sge[i] = (struct nic_sge){wr->sg_list[i].addr, wr->sg_list[i].length,
						  npf_sge_lkey(&wr->sg_list[i])};
		err = nic_post_recv(qp->qp, &w, &nbad);
		if (err) {
			*bad = wr;
			return -err;
		}
	}
	return 0;
}

/* ---- context ---------------------------------------------------------------------- */

static void npf_free_context(struct ibv_context *context)
{
	struct npf_ctx *ctx = npf_ctx_of(context);
	static void (*claim)(int, int);

	if (getenv("NPF_VERBS_STATS")) {
		struct nic_stats st;

		if (!nic_query_stats(ctx->nic, &st, sizeof(st)))
			fprintf(stderr,
				"npf verbs: %s: pkts tx %llu rx %llu dropped %llu retransmits %llu timeouts %llu rnr_nak tx %llu rx %llu page_requests %llu responses %llu stalls %llu\n",
				context->device->name, (unsigned long long)st.pkts_tx,
				(unsigned long long)st.pkts_rx, (unsigned long long)st.pkts_dropped,
				(unsigned long long)st.retransmits, (unsigned long long)st.timeouts,
				(unsigned long long)st.rnr_nak_tx,
				(unsigned long long)st.rnr_nak_rx,
				(unsigned long long)st.page_requests,
				(unsigned long long)st.page_responses,
				(unsigned long long)st.requester_stalls);
	}
	pthread_mutex_lock(&ctx->miss_lock);
	ctx->miss_stop = true;
	pthread_cond_signal(&ctx->miss_cond);
	pthread_mutex_unlock(&ctx->miss_lock);
	if (ctx->miss_started)
		pthread_join(ctx->miss_thread, NULL);
	nic_close(ctx->nic);
	if (ctx->events_lost)
		npf_err("%s: %lu asynchronous events lost (nobody read the async fd)",
			context->device->name, ctx->events_lost);
	if (!claim)
		claim = (void (*)(int, int))dlsym(RTLD_DEFAULT, "npf_verbs_preload_claim");
	if (claim)
		claim(context->cmd_fd, 0);
	if (ctx->async_wr >= 0)
		close(ctx->async_wr);
	verbs_uninit_context(&ctx->vctx);
	free(ctx);
}

static const struct verbs_context_ops npf_ctx_ops = {
	.advise_mr = npf_advise_mr,
	.alloc_pd = npf_alloc_pd,
	.create_cq = npf_create_cq,
	.create_qp = npf_create_qp,
	.dealloc_pd = npf_dealloc_pd,
	.dereg_mr = npf_dereg_mr,
	.destroy_cq = npf_destroy_cq,
	.destroy_qp = npf_destroy_qp,
	.free_context = npf_free_context,
	.modify_qp = npf_modify_qp,
	.poll_cq = npf_poll_cq,
	.post_recv = npf_post_recv,
	.post_send = npf_post_send,
	.query_device_ex = npf_query_device_ex,
	.query_port = npf_query_port,
	.query_qp = npf_query_qp,
	.reg_mr = npf_reg_mr,
	.req_notify_cq = npf_req_notify_cq,
};

static struct verbs_context *npf_alloc_context(struct ibv_device *ibdev, int cmd_fd,
					       void *private_data)
{
	struct npf_vdev *dev = (struct npf_vdev *)ibdev;
	void (*claim)(int, int);
	struct npf_ctx *ctx;
	char addr[INET_ADDRSTRLEN];
	int p[2], e;

	ctx = _verbs_init_and_alloc_context(ibdev, cmd_fd, sizeof(*ctx),
					    &((struct npf_ctx *)NULL)->vctx,
					    0 /* RDMA_DRIVER_UNKNOWN */);
	if (!ctx)
		return NULL;
	ctx->dev = dev;
	ctx->async_wr = -1;
	pthread_mutex_init(&ctx->ev_lock, NULL);
	pthread_mutex_init(&ctx->miss_lock, NULL);
	pthread_cond_init(&ctx->miss_cond, NULL);
	inet_ntop(AF_INET, &dev->addr, addr, sizeof(addr));
	{
		NIC_OPTS(nic_opts, o, .wire = NIC_WIRE_ROCE, .udp_addr = addr,
			 .event_fn = npf_nic_event, .event_arg = ctx);

		ctx->nic = nic_open(&o);
	}
	if (!ctx->nic) {
		e = errno;
		npf_err("%s: cannot start the device on %s:%d: %s%s", ibdev->name, addr,
			NIC_ROCE_PORT, strerror(e),
			e == EADDRINUSE ?
				" (another process has this device open: use another npf device)" :
			e == EADDRNOTAVAIL ? " (no interface has this address)" :
					     "");
		goto err_uninit;
	}
	/* async events: what ibv_get_async_event() reads (see npf_nic_event) */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p)) {
		e = errno;
		goto err_nic;
	}
	shutdown(p[0], SHUT_WR);
	ctx->vctx.context.async_fd = p[0];
	ctx->vctx.context.num_comp_vectors = 1;
	pthread_mutex_lock(&ctx->ev_lock);
	ctx->async_wr = p[1];
	pthread_mutex_unlock(&ctx->ev_lock);
	claim = (void (*)(int, int))dlsym(RTLD_DEFAULT, "npf_verbs_preload_claim");
	if (claim)
		claim(cmd_fd, 1);
	if (!preload_wfd)
		preload_wfd = (int (*)(int))dlsym(RTLD_DEFAULT, "npf_verbs_preload_channel_wfd");
	verbs_set_ops(&ctx->vctx, &npf_ctx_ops);
	return &ctx->vctx;

err_nic:
	nic_close(ctx->nic);
err_uninit:
	verbs_uninit_context(&ctx->vctx);
	free(ctx);
	errno = e;
	return NULL;
}

/* The device's address: its GID 0 in the sysfs tree (npf-run wrote it). */
static int npf_read_gid(struct verbs_sysfs_dev *sd, union ibv_gid *gid)
{
	char path[IBV_SYSFS_PATH_MAX + 32], buf[64];
	unsigned int w[8];
	ssize_t n;
	int fd, i;

	snprintf(path, sizeof(path), "%s/ports/1/gids/0", sd->ibdev_path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EINVAL;
	buf[n] = 0;
	if (sscanf(buf, "%x:%x:%x:%x:%x:%x:%x:%x", &w[0], &w[1], &w[2], &w[3], &w[4], &w[5], &w[6],
		   &w[7]) != 8)
		return -EINVAL;
	for (i = 0; i < 8; i++) {
		gid->raw[2 * i] = w[i] >> 8;
		gid->raw[2 * i + 1] = w[i] & 0xff;
	}
	return 0;
}

static struct verbs_device *npf_alloc_device(struct verbs_sysfs_dev *sd)
{
	struct npf_vdev *dev;
	in_addr_t a;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	if (npf_read_gid(sd, &dev->gid) || !(a = npf_gid_ipv4(&dev->gid))) {
		npf_err("%s: no RoCEv2 GID ::ffff:a.b.c.d in %s/ports/1/gids/0 (run the program under npf-run)",
			sd->ibdev_name, sd->ibdev_path);
		free(dev);
		return NULL;
	}
	dev->addr.s_addr = a;
	dev->guid = htobe64(0x02004e5000000000ULL | ntohl(a));
	return &dev->vdev;
}

static void npf_uninit_device(struct verbs_device *vdev)
{
	free(vdev);
}

static const struct verbs_match_ent npf_match[] = {
	{.u.modalias = "rdma_device:*Nnpf*", .kind = VERBS_MATCH_MODALIAS},
	{},
};

static const struct verbs_device_ops npf_dev_ops = {
	.name = "npf",
	.match_min_abi_version = 1,
	.match_max_abi_version = 1,
	.match_table = npf_match,
	.alloc_device = npf_alloc_device,
	.uninit_device = npf_uninit_device,
	.alloc_context = npf_alloc_context,
};

__attribute__((constructor)) static void npf_register(void)
{
	verbs_register_driver_34(&npf_dev_ops);
}
