// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* An eviction policy asking for a 1 GiB map of its own (tests/evict_policy.c: refused). */
#include "npf_evict_policy.h"

NPF_EVICT_POLICY("evict-bigmap");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 18);
	__type(key, __u32);
	__type(value, char[4096]);
} huge SEC(".maps");

SEC("tracepoint")
int evict_bigmap(void *unused)
{
	struct npf_evict_batch *b = npf_evict_batch_get();
	__u32 zero = 0;
	char *v = bpf_map_lookup_elem(&huge, &zero);

	if (!b || !v)
		return 0;
	b->cand[0].score = v[0];
	return npf_evict_done(b);
}
