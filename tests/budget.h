/* SPDX-License-Identifier: GPL-2.0 */
/* A region's budget and what eviction did, as npfd reports it (the eviction tests). */
#ifndef NPF_TEST_BUDGET_H
#define NPF_TEST_BUDGET_H

#include "harness.h"
#include "npf.h"

static inline struct npf_budget_info th_budget(struct npf_client *c, int id)
{
	struct npf_budget_info *bi, out;
	size_t n;

	TH_ASSERT(!npf_client__budget_list(c, (__u32)id, &bi, &n) && n == 1, "budget list: %s",
		  npf_client__errmsg(c));
	out = *bi;
	free(bi);
	return out;
}

#endif
