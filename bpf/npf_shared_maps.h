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

/* npfd's reading of npf_events (struct npf_ring_ctl); mmapped by npfd. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct npf_ring_ctl);
} npf_ring_ctl SEC(".maps");

/*
 * The wakeup flags for a record reserved in npf_events. A device waits for
 * its answer: wake npfd, unless npfd is polling the ring. A CPU fault
 * wakes npfd through its userfaultfd: no wakeup (wake_bytes aside).
 *
 * No record may be left unseen by an npfd that goes to sleep: npfd clears
 * npfd_polling, then (after a full barrier) looks at the ring before it
 * sleeps; here the reservation has advanced the ring's producer position
 * before the flag is read, with a full barrier between the two. So either
 * npfd sees the record, or this program sees the flag cleared. The barrier
 * is a 64-bit atomic add, which the x86-64 JIT emits as a `lock add` (a
 * full barrier there; npf's collectors are x86-64 only). A fetching atomic
 * would say so on every architecture, but needs -mcpu=v3 from every
 * policy's build.
 */
static __always_inline __u64 npf_ring_wakeup(const struct npf_fault_record *rec)
{
	__u32 zero = 0;
	struct npf_ring_ctl *ctl;

	if (rec->source != NPF_SRC_DEVICE)
		return BPF_RB_NO_WAKEUP;
	ctl = bpf_map_lookup_elem(&npf_ring_ctl, &zero);
	if (!ctl)
		return BPF_RB_FORCE_WAKEUP;
	__sync_fetch_and_add(&ctl->barrier, 1);
	return *(volatile __u32 *)&ctl->npfd_polling ? BPF_RB_NO_WAKEUP : BPF_RB_FORCE_WAKEUP;
}

#endif
