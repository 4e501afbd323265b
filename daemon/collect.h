/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The BPF collectors (collect.c): loaded and pinned at start; the fault
 * filter, the regions' stats slots, the ring buffer of fault records, the
 * NIC's page-request uprobe and the policy prog arrays. Device fault
 * records are handed to the hook main.c sets; nothing above is called.
 */
#ifndef NPFD_COLLECT_H
#define NPFD_COLLECT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "npf_abi.h"

struct npfd_mm;
struct npfd_region;

struct collect_hooks {
	/* A device's page request read from the ring buffer. */
	void (*device_record)(const struct npf_fault_record *rec);
	/* The ring buffer was read (collect_drain()). */
	void (*drained)(void);
};

void collect_set_hooks(const struct collect_hooks *h);
int collect_open(const char *bpffs);
void collect_close(void);
/* Read every record in the ring buffer. */
void collect_drain(void);
bool collect_ring_polling(bool on);
void collect_cpu_trace_always(bool always);
int collect_slot_alloc(struct npfd_region *r);
void collect_slot_free(struct npfd_region *r);
int collect_filter_update(pid_t tgid, struct npfd_mm *mm);
void collect_filter_remove(pid_t tgid);
bool collect_fault_take(__u32 tid, __u64 page, struct npf_fault_record *out);
int collect_shared_map_fd(const char *name, bool cpu);
int collect_policy_install(__u32 slot, int cpu_fd, int kp_fd);
bool collect_policy_run_cpu(const struct npf_cpu_policy_args *args, struct npf_fault_record *out);
void collect_policy_enable(bool on);
bool collect_policy_enabled(void);
const struct npf_global_stats *collect_global(void);
void collect_count_failed(__u64 n);
void collect_set_mm_calls_late(__u64 n);
int collect_nic_uprobe(struct npfd_mm *mm, char *err, size_t errlen);
void collect_nic_uprobe_put(struct npfd_mm *mm);

#endif
