// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pia (seed 004 §3.1, "page-in all"): bring in everything to the end of
 * the transfer at the first fault. For a device that is every page its
 * request names (answered together); for a CPU fault, the rest of the
 * region up to NPF_POLICY_MAX_PREFETCH pages. Use it for large sequential
 * transfers and scans, where each further fault would only cost more.
 */
#include "npf_policy.h"

NPF_POLICY("pia");

SEC("tracepoint")
int pia(void *unused)
{
	struct npf_policy_ctx *ctx = npf_policy_ctx();
	__u64 left;

	if (!ctx)
		return 0;
	if (ctx->rec.source == NPF_SRC_CPU) {
		left = npf_region_pages(ctx) - npf_region_page(ctx) - 1;
		ctx->rec.decision.after = (__u32)(left < NPF_POLICY_MAX_PREFETCH - 1 ?
							  left :
							  NPF_POLICY_MAX_PREFETCH - 1);
	}
	return npf_policy_submit(ctx);
}
