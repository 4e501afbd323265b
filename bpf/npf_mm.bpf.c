// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * npf mm watch: the kernel frees and moves page frames on its own (reclaim
 * and swap-out, migration and compaction, THP collapse, KSM merging). A
 * kernel driver hears of it through MMU notifiers; npfd hears of it here,
 * from mm tracepoints, and invalidates the IO page table entries of the
 * frames a device maps (docs/design.md, "mm tracepoints").
 *
 * npf_mm_pfns holds exactly the frames npfd has mapped for a device (npfd
 * fills it from /proc/PID/pagemap when it sets an entry present). A
 * tracepoint hit on any other frame costs one hash lookup. A hit deletes the
 * entry (the frame is the device's no more) and sends one record; if the
 * ring is full the loss is counted and npfd invalidates everything.
 *
 * Only frame numbers identify a page here: these tracepoints carry no
 * address of a process, and npfd's regions are private anonymous memory.
 * A frame several device pages map (KSM) is marked NPF_MM_SHARED; npfd
 * keeps their list.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "npf_abi.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1 << 20); /* 4 GiB of device-mapped pages; beyond, npfd warns */
	__type(key, __u64);	      /* pfn */
	__type(value, struct npf_mm_page);
} npf_mm_pfns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} npf_mm_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct npf_mm_stats);
} npf_mm_stats SEC(".maps");

static __always_inline void report(__u64 pfn, __u32 event)
{
	struct npf_mm_page *p = bpf_map_lookup_elem(&npf_mm_pfns, &pfn);
	struct npf_mm_record *rec;
	struct npf_mm_stats *st;
	__u32 zero = 0;

	if (!p)
		return;
	st = bpf_map_lookup_elem(&npf_mm_stats, &zero);
	rec = bpf_ringbuf_reserve(&npf_mm_events, sizeof(*rec), 0);
	if (!rec) {
		/* Keep the entry: npfd sees the loss and invalidates everything. */
		if (st)
			__sync_fetch_and_add(&st->lost, 1);
		return;
	}
	rec->pfn = pfn;
	rec->addr = p->addr;
	rec->region_id = p->region_id;
	rec->event = event;
	rec->flags = p->flags;
	bpf_map_delete_elem(&npf_mm_pfns, &pfn);
	if (st && event < NPF_MM_NR_EVENTS)
		__sync_fetch_and_add(&st->hits[event], 1);
	bpf_ringbuf_submit(rec, 0);
}

struct free_ctx {
	__u64 pfn;
};

static long free_one(__u64 i, struct free_ctx *c)
{
	report(c->pfn + i, NPF_MM_PAGE_FREE);
	return 0;
}

/*
 * Every frame returned to the page allocator passes here, whatever freed it:
 * the backstop that makes a moved or reclaimed page visible even where the
 * event's own tracepoint says nothing usable (migration, THP collapse).
 */
SEC("tp/kmem/mm_page_free")
int npf_mm_page_free(struct trace_event_raw_mm_page_free *ctx)
{
	struct free_ctx c = {.pfn = ctx->pfn};
	__u32 order = ctx->order;

	if (!order) {
		report(c.pfn, NPF_MM_PAGE_FREE);
		return 0;
	}
	if (order > 10) /* MAX_PAGE_ORDER on x86 */
		order = 10;
	bpf_loop(1U << order, free_one, &c, 0);
	return 0;
}

/* Swap-out: written to swap, already unmapped; freed after the write. */
SEC("tp/vmscan/mm_vmscan_write_folio")
int npf_mm_swap_write(struct trace_event_raw_mm_vmscan_write_folio *ctx)
{
	report(ctx->pfn, NPF_MM_SWAP_WRITE);
	return 0;
}

/*
 * KSM: each merge reports the frame that becomes (or already is) the
 * shared KSM page and stays in place, write protected: a device write to
 * it would change every sharer's copy. The frames merged into it are
 * freed (mm_page_free). ksm:ksm_merge_one_page reports the same frames
 * here and is not needed (tests/mm_dev_ksm passes without it, fails
 * without this one).
 */
SEC("tp/ksm/ksm_merge_with_ksm_page")
int npf_mm_ksm_merge(struct trace_event_raw_ksm_merge_with_ksm_page *ctx)
{
	report(ctx->pfn, NPF_MM_KSM_MERGE);
	return 0;
}
