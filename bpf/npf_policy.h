/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Writing an npf fault policy.
 *
 * A policy is one BPF program in SEC("tracepoint") that the fault
 * collectors reach by tail call. It reads the fault from npf_policy_ctx(),
 * fills ctx->rec.decision (pages to fetch before/after, flags), and ends
 * with `return npf_policy_submit(ctx);`. It must not look at its own
 * program context: npfd loads the same code as a tracepoint program (CPU
 * faults) and as a kprobe program (the NIC's page requests). It may keep
 * state in maps of its own; npfd shares them between the two loads.
 *
 *	#include "npf_policy.h"
 *	NPF_POLICY("mine");
 *
 *	SEC("tracepoint")
 *	int mine(void *unused)
 *	{
 *		struct npf_policy_ctx *ctx = npf_policy_ctx();
 *
 *		if (!ctx)
 *			return 0;
 *		ctx->rec.decision.after = 15;
 *		return npf_policy_submit(ctx);
 *	}
 *
 * npfd clamps a decision that reaches outside the region or past
 * NPF_POLICY_MAX_PREFETCH pages and counts it (npfctl policy list).
 * For a CPU fault a policy's decision replaces npfd's built-in one
 * (fault-around); NPF_DECIDE_BUILTIN in decision.flags asks for both.
 */
#ifndef NPF_POLICY_H
#define NPF_POLICY_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "npf_abi.h"

/* Shared with the collectors: npfd gives these the collectors' maps. */
#include "npf_shared_maps.h"

/* Set by npfd before load: stamps every decision with the policy's id. */
const volatile __u32 npf_policy_id SEC(".rodata.npf") = 0;

#define NPF_POLICY(pname)                                                                          \
	char LICENSE[] SEC("license") = "Dual BSD/GPL";                                            \
	struct npf_policy_info __npf_policy_info SEC(NPF_POLICY_SECTION) __attribute__((used)) = { \
		.magic = NPF_POLICY_MAGIC, .abi_version = NPF_POLICY_ABI_VERSION, .name = pname}

static __always_inline struct npf_policy_ctx *npf_policy_ctx(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&npf_policy_scratch, &zero);
}

static __always_inline __u64 npf_fault_page(const struct npf_policy_ctx *ctx)
{
	return ctx->rec.addr >> NPF_PAGE_SHIFT;
}

/*
 * A key for per-thread state: the fault's region and thread, so that N
 * threads scanning N parts of a region each keep their own stream. The
 * thread is known for every fault from ctx_version 2 on; before, 0.
 */
struct npf_stream_key {
	__u32 region_id;
	__u32 tid;
};

static __always_inline struct npf_stream_key npf_stream(const struct npf_policy_ctx *ctx)
{
	struct npf_stream_key k = {.region_id = ctx->rec.region_id};

	if (ctx->ctx_version >= 2)
		k.tid = ctx->rec.tid;
	return k;
}

/* Streams a policy keeps at most: the least recently used goes (LRU hash). */
#define NPF_MAX_STREAMS 16384

/* Page index of the fault within its region. */
static __always_inline __u64 npf_region_page(const struct npf_policy_ctx *ctx)
{
	return (ctx->rec.addr - ctx->region_start) >> NPF_PAGE_SHIFT;
}

static __always_inline __u64 npf_region_pages(const struct npf_policy_ctx *ctx)
{
	return ctx->region_length >> NPF_PAGE_SHIFT;
}

/* Hand the fault and the decision to npfd. */
static __always_inline int npf_policy_submit(struct npf_policy_ctx *ctx)
{
	struct npf_fault_record *rec = bpf_ringbuf_reserve(&npf_events, sizeof(*rec), 0);

	if (!rec)
		return 0;
	__builtin_memcpy(rec, &ctx->rec, sizeof(*rec));
	rec->decision.policy_id = (__u16)npf_policy_id;
	rec->decision.flags &= ~NPF_DECIDE_AWAIT_POLICY;
	bpf_ringbuf_submit(rec, npf_ring_wakeup(rec));
	return 0;
}

#endif
