// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pio (seed 004 §3.1, "page-in only"): answer a device's request once its
 * first missing page is in, and let the device fault again for the next.
 * The least memory brought in per fault and the most faults per transfer;
 * use it when transfers touch few of the pages they name, or to reproduce
 * the paper's PIO line. CPU faults: the faulting page only.
 */
#include "npf_policy.h"

NPF_POLICY("pio");

SEC("tracepoint")
int pio(void *unused)
{
	struct npf_policy_ctx *ctx = npf_policy_ctx();

	if (!ctx)
		return 0;
	if (ctx->rec.source == NPF_SRC_DEVICE)
		ctx->rec.decision.max_pages = 1;
	return npf_policy_submit(ctx);
}
