// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A broken eviction policy: it keeps every page (tests/evict_policy.c: npfd falls back to CLOCK). */
#include "npf_evict_policy.h"

NPF_EVICT_POLICY("evict-keepall");

static long score(__u32 i, void *data)
{
	struct npf_evict_cand *c = npf_evict_cand(*(struct npf_evict_batch **)data, i);

	if (!c)
		return 1;
	c->score = NPF_EVICT_KEEP;
	return 0;
}

SEC("tracepoint")
int evict_keepall(void *unused)
{
	struct npf_evict_batch *b = npf_evict_batch_get();

	if (!b)
		return 0;
	bpf_loop(NPF_EVICT_MAX_CANDS, score, &b, 0); /* its context: on the stack */
	return npf_evict_done(b);
}
