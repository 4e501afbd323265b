// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pi4 (seed 004 §3.1): page in the whole 16 KiB block around the faulting
 * page. A middle ground between pio and pia for transfers of a few pages
 * with locality inside 16 KiB (small messages, headers next to payloads).
 * Device requests are answered once that block is in.
 */
#include "npf_policy.h"

NPF_POLICY("pi4");

SEC("tracepoint")
int pi4(void *unused)
{
	struct npf_policy_ctx *ctx = npf_policy_ctx();
	__u64 in_block;

	if (!ctx)
		return 0;
	in_block = npf_fault_page(ctx) & 3;
	ctx->rec.decision.before = (__u32)in_block;
	ctx->rec.decision.after = (__u32)(3 - in_block);
	if (ctx->rec.source == NPF_SRC_DEVICE)
		ctx->rec.decision.max_pages = 4;
	return npf_policy_submit(ctx);
}
