/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The key-value instance the overcommit benchmarks share (kv_overcommit:
 * seed 000 Table 5 shape; kv_hotswap: its Fig. 7 shape). A server NIC and a
 * client NIC joined by the software NIC's wires; the server's store is an
 * array of 4 KiB items, item k carrying its key k + 1 in its first word
 * (0: never set). A GET is an RDMA READ of the item from the client, a SET
 * an RDMA WRITE of it. Two ways to hold the store:
 *
 *   static   the server pins (mlock, every IO page table entry set) its
 *            share: only the store's first share / 4 KiB items can be
 *            cached; a GET of any other is a miss that still costs a round
 *            trip (a 64-byte READ of item 0);
 *   npf      the server registers its whole store with npfd, unpinned:
 *            every item can be cached; pages beyond a budget are evicted
 *            and fault back in through the NIC's page request.
 */
#ifndef NPF_BENCH_KV_H
#define NPF_BENCH_KV_H

#include "bench_nic.h"

#define KV_ITEM 4096UL
#define KV_MISS UINT64_MAX /* kv_get(): the server cannot hold the item */

struct kv {
	struct bn_pair p; /* A is the client (it posts the WRs), B the server */
	struct bn_mem srv, buf;
	struct npf_client *c; /* npf: the server's connection to npfd */
	uint64_t cached;      /* items the server can hold: the store's first ones */
};

/* xorshift64: the keys asked for, cheap and the same in every run. */
static inline uint64_t kv_rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * Open an instance with a store of store bytes. npf (c, a connection to
 * npfd): registered with npfd (a budget of share bytes of its own unless
 * share is 0: then only the client's budget, npfd.conf's client-budget-mib,
 * applies to it, together with the connection's other regions); static (c
 * NULL): share bytes pinned (at most the store). 0, or -1 with the reason
 * in err.
 */
static inline int kv_open(struct kv *kv, struct npf_client *c, uint64_t store, uint64_t share,
			  char *err, size_t errlen)
{
	*kv = (struct kv){.c = c};
	bn_pair_open(&kv->p, 1);
	bn_mem_static(&kv->buf, &kv->p.a, KV_ITEM);
	if (c) {
		bn_mem_register(&kv->srv, kv->c, store, -1, "kv");
		if (share && npf_client__region_set(kv->c, (__u32)kv->srv.region, NPF_SET_BUDGET,
						    share, NULL)) {
			snprintf(err, errlen, "budget of region %d: %s", kv->srv.region,
				 npf_client__errmsg(kv->c));
			return -1;
		}
		bn_mem_attach(&kv->srv, &kv->p.b);
		kv->cached = store / KV_ITEM;
	} else {
		if (share > store)
			share = store;
		bn_mem_static(&kv->srv, &kv->p.b, share);
		memset(kv->srv.buf, 0, share); /* no item set yet */
		kv->cached = share / KV_ITEM;
	}
	return 0;
}

/* GET item k: the key it carries (0: never set), or KV_MISS when the server cannot hold it. */
static inline uint64_t kv_get(struct kv *kv, uint64_t k)
{
	if (k >= kv->cached) {
		bn_op(&kv->p, 0, NIC_WR_RDMA_READ, kv->buf.buf, 64, kv->buf.mr, kv->srv.buf,
		      kv->srv.mr);
		return KV_MISS;
	}
	bn_op(&kv->p, 0, NIC_WR_RDMA_READ, kv->buf.buf, KV_ITEM, kv->buf.mr,
	      kv->srv.buf + k * KV_ITEM, kv->srv.mr);
	return *(uint64_t *)kv->buf.buf;
}

/* SET item k (k < kv->cached) from the client: an RDMA WRITE of the item carrying key k + 1. */
static inline void kv_set(struct kv *kv, uint64_t k)
{
	*(uint64_t *)kv->buf.buf = k + 1;
	bn_op(&kv->p, 0, NIC_WR_RDMA_WRITE, kv->buf.buf, KV_ITEM, kv->buf.mr,
	      kv->srv.buf + k * KV_ITEM, kv->srv.mr);
}

static inline void kv_close(struct kv *kv)
{
	bn_pair_close(&kv->p, kv->c);
}

#endif /* NPF_BENCH_KV_H */
