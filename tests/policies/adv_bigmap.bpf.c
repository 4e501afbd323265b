// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A policy that asks for a 1 GiB map (tests/adv_policy.c): npfd must refuse it. */
#include "npf_policy.h"

NPF_POLICY("bigmap");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 262144);
	__type(key, __u32);
	__type(value, char[4096]);
} huge SEC(".maps");

SEC("tracepoint")
int bigmap(void *unused)
{
	struct npf_policy_ctx *ctx = npf_policy_ctx();
	__u32 zero = 0;
	char *v;

	if (!ctx)
		return 0;
	v = bpf_map_lookup_elem(&huge, &zero);
	if (v)
		v[0]++;
	return npf_policy_submit(ctx);
}
