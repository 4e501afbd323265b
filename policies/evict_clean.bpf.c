// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * evict-clean: an eviction policy that takes the cheapest pages first.
 * A clean page (installed from its backing copy, not written since) is
 * dropped without a write; a dirty one costs a write-back now and a read
 * later. Order: clean and unreferenced, dirty and unreferenced, clean and
 * referenced, dirty and referenced (referenced: faulted, installed, or
 * accessed by a device since the last sweep); hand order within each.
 * Where CLOCK would write back a dirty page next to a clean one, this
 * drops the clean one and keeps the dirty one for later.
 *
 *	npfctl policy load /usr/lib/npf/policies/evict_clean.bpf.o [region ID]
 */
#include "npf_evict_policy.h"

NPF_EVICT_POLICY("evict-clean");

static long score(__u32 i, void *data)
{
	struct npf_evict_cand *c = npf_evict_cand(*(struct npf_evict_batch **)data, i);
	__u32 class;

	if (!c)
		return 1;
	class = (c->flags & (NPF_EVICT_REF | NPF_EVICT_DEV) ? 2 : 0) +
		(c->flags & NPF_EVICT_DIRTY ? 1 : 0);
	c->score = class * NPF_EVICT_MAX_CANDS + i;
	return 0;
}

SEC("tracepoint")
int evict_clean(void *unused)
{
	struct npf_evict_batch *b = npf_evict_batch_get();

	if (!b)
		return 0;
	bpf_loop(NPF_EVICT_MAX_CANDS, score, &b, 0); /* its context: on the stack */
	return npf_evict_done(b);
}
