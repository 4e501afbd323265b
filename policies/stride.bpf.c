// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * stride: detects a constant stride between a thread's faults in a region
 * (a column of a row-major matrix, every Nth record of a table) and, once
 * the same stride is seen twice in a row, fetches the next 8 pages along
 * it. Each thread is a stream of its own. Use it for strided scans; a unit
 * stride is seq's job.
 */
#include "npf_policy.h"

NPF_POLICY("stride");

#define STRIDE_AHEAD 8

struct stride_state {
	__u64 last_page;
	__s64 stride;
	__u32 hits;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NPF_MAX_STREAMS);
	__type(key, struct npf_stream_key);
	__type(value, struct stride_state);
} stride_state SEC(".maps");

SEC("tracepoint")
int stride(void *unused)
{
	struct npf_policy_ctx *ctx = npf_policy_ctx();
	struct stride_state *st, fresh = {};
	__u64 page;
	struct npf_stream_key id;
	__s64 d;

	if (!ctx)
		return 0;
	id = npf_stream(ctx);
	page = npf_fault_page(ctx);
	st = bpf_map_lookup_elem(&stride_state, &id);
	if (!st) {
		fresh.last_page = page;
		bpf_map_update_elem(&stride_state, &id, &fresh, BPF_ANY);
		return npf_policy_submit(ctx);
	}
	d = (__s64)(page - st->last_page);
	if (d != 0 && d == st->stride) {
		if (st->hits < 2)
			st->hits++;
	} else {
		st->stride = d;
		st->hits = 0;
	}
	st->last_page = page;
	if (st->hits >= 1 && d > -(1 << 20) && d < (1 << 20) && d != 1) {
		ctx->rec.decision.stride = (__s32)d;
		ctx->rec.decision.stride_count = STRIDE_AHEAD;
	}
	return npf_policy_submit(ctx);
}
