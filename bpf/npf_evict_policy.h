/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Writing an npf eviction policy.
 *
 * An eviction policy chooses which of a region's installed pages npfd
 * takes away when the region (or its client) is over its budget. It is one
 * BPF program in SEC("tracepoint") that npfd runs itself, once per batch
 * (BPF_PROG_TEST_RUN; it is never attached). The batch -- the candidates
 * in CLOCK hand order and what npfd knows of each -- is in the map
 * npf_evict_batch (npf_evict_batch_get()): each candidate's page index, its
 * flags (referenced since the last sweep, a device's ACCESSED bit, dirty),
 * how many times npfd installed it (above 1: it was evicted and faulted
 * back: a page the budget is too small for) and how long since it was last
 * installed or written. The policy scores candidates
 * (npf_evict_cand(b, i)->score: lower goes first, NPF_EVICT_KEEP stays; npfd fills in
 * the candidate's position, so a candidate left alone goes in hand order)
 * and ends with `return npf_evict_done(b);`.
 *
 *	#include "npf_evict_policy.h"
 *	NPF_EVICT_POLICY("mine");
 *
 *	static long score(__u32 i, void *data)
 *	{
 *		struct npf_evict_cand *c = npf_evict_cand(*(struct npf_evict_batch **)data, i);
 *
 *		if (!c)
 *			return 1;
 *		if (c->page < 64)
 *			c->score = NPF_EVICT_KEEP;
 *		return 0;
 *	}
 *
 *	SEC("tracepoint")
 *	int mine(void *unused)
 *	{
 *		struct npf_evict_batch *b = npf_evict_batch_get();
 *
 *		if (!b)
 *			return 0;
 *		bpf_loop(NPF_EVICT_MAX_CANDS, score, &b, 0);
 *		return npf_evict_done(b);
 *	}
 *
 * What a policy decides is only advice: a policy that fails, does not call
 * npf_evict_done(), or keeps every candidate makes npfd choose that batch
 * by CLOCK, and count it. Eviction never waits on a policy.
 */
#ifndef NPF_EVICT_POLICY_H
#define NPF_EVICT_POLICY_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "npf_abi.h"

/* npfd's map: it gives every eviction policy the same one. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct npf_evict_batch);
} npf_evict_batch SEC(".maps");

#define NPF_EVICT_POLICY(pname)                                                                    \
	char LICENSE[] SEC("license") = "Dual BSD/GPL";                                            \
	struct npf_policy_info __npf_policy_info SEC(NPF_POLICY_SECTION)                           \
		__attribute__((used)) = {.magic = NPF_POLICY_MAGIC,                                \
					 .abi_version = NPF_POLICY_ABI_VERSION,                    \
					 .name = pname,                                            \
					 .kind = NPF_POLICY_KIND_EVICT}

static __always_inline struct npf_evict_batch *npf_evict_batch_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&npf_evict_batch, &zero);
}

/*
 * Candidate i of the batch, NULL past the last. The mask tells the
 * verifier what the check already says (NPF_EVICT_MAX_CANDS is a power of
 * two): the compiler may test i against b->n only, and would drop a mask
 * it can prove useless, hence the empty asm that hides i from it.
 */
static __always_inline struct npf_evict_cand *npf_evict_cand(struct npf_evict_batch *b, __u32 i)
{
	if (i >= b->n || i >= NPF_EVICT_MAX_CANDS)
		return NULL;
	asm volatile("" : "+r"(i));
	return &b->cand[i & (NPF_EVICT_MAX_CANDS - 1)];
}

/* The scores are the policy's answer. */
static __always_inline int npf_evict_done(struct npf_evict_batch *b)
{
	b->done = b->seq;
	return 0;
}

#endif
