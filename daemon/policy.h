/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Fault policies loaded at run time (policy.c): load, unload, list, and
 * the decision for a fault (run for a CPU fault, clamped for any); and
 * eviction policies, run by npfd for each eviction batch.
 */
#ifndef NPFD_POLICY_H
#define NPFD_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include "npf_abi.h"

struct npfd_client;
struct npfd_region;

int policy_load(struct npfd_client *c, const struct npf_policy_load_req *req, int fd,
		struct npf_policy_status *out, char *err, size_t errlen);
int policy_unload(struct npfd_client *c, const char *name, char *err, size_t errlen);
/* r is going: a policy loaded for it goes with it. */
void policy_region_gone(struct npfd_region *r);
/*
 * Each policy, and whether it is a region's choice of a loaded one (npfctl
 * policy use) rather than a loaded object, which any user may choose by name.
 */
void policy_list(void (*emit)(const struct npf_policy_status *, bool chosen, void *), void *arg);
void policy_health(void (*emit)(const struct npf_policy_health *, bool chosen, void *), void *arg);
/* Is a policy of that name loaded globally (not a region's own)? */
bool policy_loaded(const char *name);
bool policy_decide_cpu(struct npfd_region *r, __u32 tid, __u64 addr, bool write, __u64 raised,
		       const struct npf_fault_record *traced, struct npf_fault_record *out);
/* Eviction policies (evict.c): does one apply to r; run it over a batch. */
bool policy_evict_applies(const struct npfd_region *r);
int policy_evict_decide(const struct npfd_region *r, struct npf_evict_batch *bt);
struct npf_policy_decision policy_clamp(const struct npf_fault_record *rec,
					const struct npfd_region *r);

#endif
