// SPDX-License-Identifier: GPL-2.0
/*
 * A policy's decision clamped to what npfd will do (policy_clamp in
 * daemon/policy.c): never before the region's first page or past its last,
 * at most NPF_POLICY_MAX_PREFETCH pages either way, at most 64 strided
 * pages and none without a stride. What fits passes unchanged.
 */
#include "unit.h"
#include "objects.h"
#include "policy.h"

#define PGSZ NPF_PAGE_SIZE

static struct npf_policy_decision clamp(__u64 start, __u64 npages, __u64 addr, __u64 len,
					struct npf_policy_decision d)
{
	struct npfd_region r = {.start = start, .length = npages * PGSZ};
	struct npf_fault_record rec = {.addr = addr, .len = len, .decision = d};

	return policy_clamp(&rec, &r);
}

int main(void)
{
	const __u64 base = 0x7f0000000000ULL;
	struct npf_policy_decision d;

	/* fits: unchanged, including max_pages, flags and a negative stride */
	d = clamp(base, 4096, base + 100 * PGSZ, PGSZ,
		  (struct npf_policy_decision){.before = 10,
					       .after = 20,
					       .max_pages = 3,
					       .stride = -2,
					       .stride_count = 5,
					       .flags = 1});
	UT_EQ(d.before, 10, "before that fits");
	UT_EQ(d.after, 20, "after that fits");
	UT_EQ(d.max_pages, 3, "max_pages passes");
	UT_CHECK(d.stride == -2, "stride passes: got %d", d.stride);
	UT_EQ(d.stride_count, 5, "stride_count that fits");
	UT_EQ(d.flags, 1, "flags pass");

	/* the region's ends: the fault at page 3 of 10, one page long */
	d = clamp(base, 10, base + 3 * PGSZ + 17, 1,
		  (struct npf_policy_decision){.before = 100, .after = 100});
	UT_EQ(d.before, 3, "before stops at the region's first page");
	UT_EQ(d.after, 6, "after stops at the region's last page");

	/* a multi-page fault (a device request of pages 2..5 of 10) */
	d = clamp(base, 10, base + 2 * PGSZ, 4 * PGSZ,
		  (struct npf_policy_decision){.before = 100, .after = 100});
	UT_EQ(d.before, 2, "before, multi-page fault");
	UT_EQ(d.after, 4, "after counts from the fault's last page (5)");

	/* len 0 is one byte; the first and the last page of the region */
	d = clamp(base, 10, base, 0, (struct npf_policy_decision){.before = 1, .after = 100});
	UT_EQ(d.before, 0, "nothing before the first page");
	UT_EQ(d.after, 9, "after from the first page, len 0");
	d = clamp(base, 10, base + 9 * PGSZ + PGSZ - 1, 1,
		  (struct npf_policy_decision){.before = 100, .after = 1});
	UT_EQ(d.before, 9, "before from the last page");
	UT_EQ(d.after, 0, "nothing after the last page");

	/* the global limit, in a region large enough not to stop it */
	d = clamp(base, 1 << 20, base + (1 << 19) * PGSZ, PGSZ,
		  (struct npf_policy_decision){.before = 5000, .after = 0xffffffffu});
	UT_EQ(d.before, NPF_POLICY_MAX_PREFETCH, "before at most NPF_POLICY_MAX_PREFETCH");
	UT_EQ(d.after, NPF_POLICY_MAX_PREFETCH, "after at most NPF_POLICY_MAX_PREFETCH");
	d = clamp(base, 1 << 20, base + (1 << 19) * PGSZ, PGSZ,
		  (struct npf_policy_decision){.before = NPF_POLICY_MAX_PREFETCH,
					       .after = NPF_POLICY_MAX_PREFETCH});
	UT_EQ(d.before, NPF_POLICY_MAX_PREFETCH, "the limit itself passes (before)");
	UT_EQ(d.after, NPF_POLICY_MAX_PREFETCH, "the limit itself passes (after)");

	/* strides */
	d = clamp(base, 4096, base, PGSZ,
		  (struct npf_policy_decision){.stride = 3, .stride_count = 65});
	UT_EQ(d.stride_count, 64, "at most 64 strided pages");
	d = clamp(base, 4096, base, PGSZ,
		  (struct npf_policy_decision){.stride = 3, .stride_count = 64});
	UT_EQ(d.stride_count, 64, "64 strided pages pass");
	d = clamp(base, 4096, base, PGSZ,
		  (struct npf_policy_decision){.stride = 0, .stride_count = 8});
	UT_EQ(d.stride_count, 0, "no strided pages without a stride");
	d = clamp(base, 4096, base, PGSZ,
		  (struct npf_policy_decision){.stride = 0, .stride_count = 0xffffffffu});
	UT_EQ(d.stride_count, 0, "no strided pages without a stride, however many asked");
	return ut_done("policy decisions clamped to the region and the limits");
}
