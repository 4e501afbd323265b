// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* An eviction policy that keeps pages [0, 128) of every region (tests/evict_policy.c). */
#include "npf_evict_policy.h"

NPF_EVICT_POLICY("evict-head");

static long score(__u32 i, void *data)
{
	struct npf_evict_cand *c = npf_evict_cand(*(struct npf_evict_batch **)data, i);

	if (!c)
		return 1;
	if (c->page < 128)
		c->score = NPF_EVICT_KEEP;
	return 0;
}

SEC("tracepoint")
int evict_head(void *unused)
{
	struct npf_evict_batch *b = npf_evict_batch_get();

	if (!b)
		return 0;
	bpf_loop(NPF_EVICT_MAX_CANDS, score, &b, 0); /* its context: on the stack */
	return npf_evict_done(b);
}
