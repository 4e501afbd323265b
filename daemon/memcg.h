/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Memory cgroup limits (memcg.c): a client in a cgroup v1 memory cgroup with
 * a limit gets budgets that keep its regions' resident pages below it.
 */
#ifndef NPFD_MEMCG_H
#define NPFD_MEMCG_H

#include <stdbool.h>
#include <linux/types.h>

struct npfd_region;

/* r registered (or its client's eviction ring came): fit its client's regions to its limit. */
void memcg_region_registered(struct npfd_region *r);
/* r goes: its pages no longer count in its cgroup's ceiling. */
void memcg_region_gone(const struct npfd_region *r);

/*
 * A run of npages of r is about to be installed: hold it back (served after
 * eviction) because r has as many pages as its cgroup limit allows?
 */
bool memcg_hold(const struct npfd_region *r, __u64 npages);
/*
 * Is there room for npages more pages of mm's process under its memory
 * cgroup's limits (always, without a limit)? If not, the room there is,
 * in pages, in *room.
 */
bool memcg_room(const struct npfd_mm *mm, __u64 npages, __u64 *room);

#endif
