// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * exact: fetch only the pages that faulted (for a device, every missing page
 * of its request, answered together). Use it when accesses are random, or
 * to measure what another policy buys: it is the built-in decision, made
 * explicit so that it can be loaded over another policy.
 */
#include "npf_policy.h"

NPF_POLICY("exact");

SEC("tracepoint")
int exact(void *unused)
{
	struct npf_policy_ctx *ctx = npf_policy_ctx();

	if (!ctx)
		return 0;
	return npf_policy_submit(ctx);
}
