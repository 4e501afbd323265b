// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * seq: adaptive readahead. Per region and thread (a stream: N threads
 * scanning N parts each keep their own) it remembers where the next fault
 * of a sequential reader would land (just past what it fetched last); a
 * fault there doubles the window (8, 16, ... 512 pages), a fault anywhere
 * else resets it to nothing and leaves that fault to npfd's built-in
 * fault-around. Use it for scans and streaming reads where the order is
 * not known in advance; random access costs it nothing extra.
 */
#include "npf_policy.h"

NPF_POLICY("seq");

#define SEQ_FIRST 8
#define SEQ_MAX 512
/*
 * npfd's default fault-around block, in pages: after a fault left to it,
 * a sequential reader's next fault lands anywhere up to the block's end
 * (at the next page if the file was not in the page cache).
 */
#define SEQ_AROUND 16

struct seq_state {
	__u64 next_page; /* where a sequential reader faults next ... */
	__u32 window;
	__u32 slack; /* ... or up to this many pages further */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NPF_MAX_STREAMS);
	__type(key, struct npf_stream_key);
	__type(value, struct seq_state);
} seq_state SEC(".maps");

SEC("tracepoint")
int seq(void *unused)
{
	struct npf_policy_ctx *ctx = npf_policy_ctx();
	struct seq_state *st, fresh = {};
	struct npf_stream_key id;
	__u64 page;

	if (!ctx)
		return 0;
	id = npf_stream(ctx);
	page = npf_fault_page(ctx) + (ctx->rec.len ? (ctx->rec.len - 1) >> NPF_PAGE_SHIFT : 0);
	st = bpf_map_lookup_elem(&seq_state, &id);
	if (!st) {
		bpf_map_update_elem(&seq_state, &id, &fresh, BPF_ANY);
		st = bpf_map_lookup_elem(&seq_state, &id);
		if (!st)
			return npf_policy_submit(ctx);
	}
	if (npf_fault_page(ctx) >= st->next_page &&
	    npf_fault_page(ctx) <= st->next_page + st->slack)
		st->window = st->window ? (st->window * 2 > SEQ_MAX ? SEQ_MAX : st->window * 2) :
					  SEQ_FIRST;
	else
		st->window = 0;
	ctx->rec.decision.after = st->window;
	st->next_page = page + st->window + 1;
	st->slack = 0;
	if (!st->window) {
		/* No stream (yet): npfd's fault-around serves this fault. */
		ctx->rec.decision.flags |= NPF_DECIDE_BUILTIN;
		st->slack = SEQ_AROUND - 1 - (__u32)(page & (SEQ_AROUND - 1));
	}
	return npf_policy_submit(ctx);
}
