/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The maps the fault collectors and the policies both use, declared once:
 * the collectors create them, and npfd hands their fds to every policy
 * object it loads (bpf_map__reuse_fd), so the definitions must agree.
 */
#ifndef NPF_SHARED_MAPS_H
#define NPF_SHARED_MAPS_H

/* Fault records to npfd. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} npf_events SEC(".maps");

/* The fault a policy decides on (struct npf_policy_ctx), one per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct npf_policy_ctx);
} npf_policy_scratch SEC(".maps");

#endif
