// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wsreplay: record a region's fault working set, replay it next time.
 * Every fault is marked NPF_DECIDE_RECORD: npfd appends its page to the
 * region's record (one file per owner and region name under npfd's
 * --ws-dir, UID.NAME.ws). When the same user registers a region of that
 * name again while wsreplay is loaded in the global slot, npfd prefetches the recorded pages at once, before the
 * program faults on them. Use it for programs that start the same way
 * every time (a server warming its index, a model loading its weights).
 */
#include "npf_policy.h"

NPF_POLICY("wsreplay");

SEC("tracepoint")
int wsreplay(void *unused)
{
	struct npf_policy_ctx *ctx = npf_policy_ctx();

	if (!ctx)
		return 0;
	ctx->rec.decision.flags |= NPF_DECIDE_RECORD;
	return npf_policy_submit(ctx);
}
