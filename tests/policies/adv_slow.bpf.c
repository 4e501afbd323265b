// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A policy whose every decision spins for milliseconds (tests/adv_policy.c): the watchdog's prey. */
#include "npf_policy.h"

NPF_POLICY("slow");

static long spin(__u32 i, void *data)
{
	*(__u64 *)data += i;
	return 0;
}

SEC("tracepoint")
int slow(void *unused)
{
	struct npf_policy_ctx *ctx = npf_policy_ctx();
	__u64 sum = 0;

	if (!ctx)
		return 0;
	bpf_loop(1 << 21, spin, &sum, 0);
	ctx->rec.decision.stride = (__s32)(sum & 1); /* keep the loop */
	return npf_policy_submit(ctx);
}
