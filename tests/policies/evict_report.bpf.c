// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Chooses nothing (hand order): records what npfd told it of each
 * candidate -- installs and idle_ms -- in its map evrep_seen, by page,
 * for tests/evict_policy_faults.c to read.
 */
#include "npf_evict_policy.h"

NPF_EVICT_POLICY("evict-report");

struct seen {
	__u32 installs;
	__u32 idle_ms;
	__u64 batches; /* batches that had it as a candidate; 0: never seen */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct seen);
} evrep_seen SEC(".maps");

static long record(__u32 i, void *data)
{
	struct npf_evict_cand *c = npf_evict_cand(*(struct npf_evict_batch **)data, i);
	__u32 page;
	struct seen *s;

	if (!c)
		return 1;
	page = (__u32)c->page;
	s = bpf_map_lookup_elem(&evrep_seen, &page);
	if (s) {
		s->installs = c->installs;
		s->idle_ms = c->idle_ms;
		s->batches++;
	}
	return 0;
}

SEC("tracepoint")
int evict_report(void *unused)
{
	struct npf_evict_batch *b = npf_evict_batch_get();

	if (!b)
		return 0;
	bpf_loop(NPF_EVICT_MAX_CANDS, record, &b, 0);
	return npf_evict_done(b);
}
