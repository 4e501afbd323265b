// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A policy whose every decision spins for SPIN_NS (tests/adv_policy.c,
 * tests/adv_policy_nic.c): the watchdog's prey. Spun by the clock, not by
 * a count: 2^21 empty iterations took 10-15 ms on one machine and under
 * 10 ms on a faster one, where the device path's watchdog (10 ms) then saw
 * nothing slow and adv_policy_nic failed. Bounded by bpf_loop's most
 * iterations all the same.
 */
#include "npf_policy.h"

NPF_POLICY("slow");

#define SPIN_NS (25 * 1000 * 1000ULL) /* past both thresholds: 1 ms (CPU), 10 ms (device) */

struct spin_ctx {
	__u64 t0, sum;
};

static long spin(__u32 i, void *data)
{
	struct spin_ctx *s = data;

	s->sum += i;
	return bpf_ktime_get_ns() - s->t0 >= SPIN_NS; /* 1: stop */
}

SEC("tracepoint")
int slow(void *unused)
{
	struct npf_policy_ctx *ctx = npf_policy_ctx();
	struct spin_ctx s = {.t0 = bpf_ktime_get_ns()};

	if (!ctx)
		return 0;
	bpf_loop(1 << 23, spin, &s, 0);
	ctx->rec.decision.stride = (__s32)(s.sum & 1); /* keep the loop */
	return npf_policy_submit(ctx);
}
