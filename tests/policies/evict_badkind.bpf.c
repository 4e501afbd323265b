// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A policy of a kind npfd does not know (tests/evict_policy.c: refused). */
#include "npf_evict_policy.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";
struct npf_policy_info __npf_policy_info SEC(NPF_POLICY_SECTION)
	__attribute__((used)) = {.magic = NPF_POLICY_MAGIC,
				 .abi_version = NPF_POLICY_ABI_VERSION,
				 .name = "badkind",
				 .kind = 9};

SEC("tracepoint")
int badkind(void *unused)
{
	struct npf_evict_batch *b = npf_evict_batch_get();

	return b ? npf_evict_done(b) : 0;
}
