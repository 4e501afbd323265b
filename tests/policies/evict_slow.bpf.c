// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* An eviction policy that spins for milliseconds each batch (tests/evict_policy.c): the watchdog's prey. */
#include "npf_evict_policy.h"

NPF_EVICT_POLICY("evict-slow");

static long spin(__u32 i, void *data)
{
	*(__u64 *)data += i;
	return 0;
}

SEC("tracepoint")
int evict_slow(void *unused)
{
	struct npf_evict_batch *b = npf_evict_batch_get();
	__u64 sum = 0;

	if (!b)
		return 0;
	bpf_loop(1 << 21, spin, &sum, 0);
	b->pad = (__u32)sum; /* keep the loop */
	return npf_evict_done(b);
}
