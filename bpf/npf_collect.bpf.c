// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * npf fault collectors.
 *
 * - exceptions:page_fault_user: CPU faults, filtered in the kernel to the
 *   (tgid, range) pairs npfd registered. A process npf does not know costs
 *   one hash lookup and nothing else.
 * - iommu:io_page_fault: real device DMA faults (never fires on a machine
 *   without an IOMMU, but attached and counted).
 * - uprobe on the software NIC's npf_nic_fault_report(): its page request
 *   groups, attached by npfd per process when a device region is attached.
 *
 * - npf_cpu_policy (syscall program): not attached anywhere. npfd runs it
 *   itself (BPF_PROG_TEST_RUN) for the CPU faults it reads from a
 *   userfaultfd, to run the fault's policy: so loading a policy attaches
 *   nothing machine-wide.
 *
 * The tracepoint is attached only with --trace-cpu-faults (observation:
 * a BPF count and the trap-time stamp), since it runs on every page fault
 * of every process on the machine.
 *
 * Records go to npfd over a ring buffer. A CPU fault's record needs no
 * wakeup: npfd reads the ring every time its userfaultfd wakes it, so the
 * hot path pays for no extra context switch (unless the ring is filling
 * up). A device's record wakes npfd unless npfd is polling the ring
 * (npf_ring_wakeup(), npf_shared_maps.h).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "npf_abi.h"
#include "npf_nic_abi.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by npfd before load. */
const volatile __u32 npf_ringbuf_wakeup_bytes = 64 * 1024;
/*
 * The inode of npfd's pid namespace (/proc/self/ns/pid), set by npfd before
 * load when that is not the machine's initial one (npfd in a container, or
 * under a systemd in its own namespace): npfd names processes by their pids
 * there, bpf_get_current_pid_tgid() by the initial namespace's. 0: the two
 * agree.
 */
const volatile __u32 npf_pidns_ino = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct npf_info);
} npf_info SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, struct npf_proc_ranges);
} npf_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NPF_MAX_REGIONS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32); /* slot */
	__type(value, struct npf_region_stats);
} npf_region_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NPF_MAX_REGIONS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32); /* slot */
	__type(value, struct npf_latency_hist);
} npf_latency SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct npf_global_stats);
} npf_global SEC(".maps");

/* Budgets and eviction (npfd's evict.c writes it; no program touches it): pinned for readers. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NPF_MAX_REGIONS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32); /* slot */
	__type(value, struct npf_budget_info);
} npf_budget SEC(".maps");

#include "npf_shared_maps.h"

/*
 * Policies (policies/, bpf/npf_policy.h) are reached by tail call: slot 0
 * is the global policy, slot 1 + region slot a region's own. A tail call
 * needs the caller's program type, so npfd loads each policy twice: as a
 * syscall program for CPU faults (npf_cpu_policy's tail calls), as a
 * kprobe program for the NIC's uprobe. The fault travels in the policy's
 * npf_policy_scratch map: for the syscall copy npfd binds that name to
 * npf_policy_scratch_cpu, so that a device fault's collector preempting
 * npfd's run on the same CPU cannot overwrite the fault it decides on.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, NPF_MAX_REGIONS + 1);
	__type(key, __u32);
	__type(value, __u32);
} npf_policy_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct npf_policy_ctx);
} npf_policy_scratch_cpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, NPF_MAX_REGIONS + 1);
	__type(key, __u32);
	__type(value, __u32);
} npf_policy_kp SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct npf_policy_conf);
} npf_policy_conf SEC(".maps");

static __always_inline struct npf_policy_ctx *policy_ctx(void)
{
	__u32 zero = 0;
	struct npf_policy_ctx *pc = bpf_map_lookup_elem(&npf_policy_scratch, &zero);

	if (pc)
		__builtin_memset(pc, 0, sizeof(*pc));
	return pc;
}

/*
 * The number of struct pid p in npfd's pid namespace, as the kernel's
 * pid_nr_ns() finds it: p->numbers[level] for the level of npfd's
 * namespace, if p reaches that deep and that entry is npfd's namespace.
 * The levels are scanned from p's own (a client in npfd's namespace: the
 * first) down. 0 when npfd cannot see p.
 */
static __always_inline __u32 pid_in_npfd_ns(struct pid *p)
{
	unsigned int level, k, i;
	struct upid up;

	if (!p)
		return 0;
	level = BPF_CORE_READ(p, level);
	for (k = 0; k < 33; k++) { /* MAX_PID_NS_LEVEL is 32 */
		if (k > level)
			break;
		i = level - k;
		if (bpf_probe_read_kernel(&up, sizeof(up), &p->numbers[i]))
			return 0;
		if (up.ns && BPF_CORE_READ(up.ns, ns.inum) == npf_pidns_ino)
			return (__u32)up.nr;
	}
	return 0;
}

/*
 * The current thread's tgid << 32 | tid as npfd names them (npf_procs'
 * keys, records' tgid and tid); 0 when npfd's namespace cannot see it.
 */
static __always_inline __u64 current_ids(void)
{
	struct task_struct *t;
	__u32 tgid, tid;

	if (!npf_pidns_ino)
		return bpf_get_current_pid_tgid();
	t = (struct task_struct *)bpf_get_current_task();
	tgid = pid_in_npfd_ns(BPF_CORE_READ(t, group_leader, thread_pid));
	tid = pid_in_npfd_ns(BPF_CORE_READ(t, thread_pid));
	return tgid && tid ? (__u64)tgid << 32 | tid : 0;
}

/* Is there a policy to call? Without one a fault is submitted once, with the built-in decision. */
static __always_inline bool policies_enabled(void)
{
	__u32 zero = 0;
	struct npf_policy_conf *c = bpf_map_lookup_elem(&npf_policy_conf, &zero);

	return c && c->enabled && c->installed;
}

static __always_inline struct npf_global_stats *global_stats(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&npf_global, &zero);
}

static __always_inline void submit_record(struct npf_fault_record *src)
{
	struct npf_fault_record *rec;
	__u64 flags;

	rec = bpf_ringbuf_reserve(&npf_events, sizeof(*rec), 0);
	if (!rec) {
		struct npf_global_stats *g = global_stats();

		if (g)
			__sync_fetch_and_add(&g->records_dropped, 1);
		return;
	}
	*rec = *src;
	flags = npf_ring_wakeup(rec);
	if (bpf_ringbuf_query(&npf_events, BPF_RB_AVAIL_DATA) >= npf_ringbuf_wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(rec, flags);
}

/* The tracepoint has no raw struct in BTF: this mirrors its tracefs format. */
struct page_fault_user_args {
	struct trace_entry ent;
	unsigned long address;
	unsigned long ip;
	unsigned long error_code;
};

/* x86 page fault error code bits (arch/x86/include/asm/trap_pf.h). */
#define X86_PF_PROT 0x1
#define X86_PF_WRITE 0x2
#define X86_PF_INSTR 0x10

/* The registered range of process pr holding addr, or NULL. */
static __always_inline const struct npf_range *find_range(struct npf_proc_ranges *pr, __u64 addr)
{
	__u32 i, nr = pr->nr;

	for (i = 0; i < NPF_MAX_RANGES_PER_PROC; i++) {
		if (i >= nr)
			break;
		if (addr >= pr->r[i].start && addr < pr->r[i].end)
			return &pr->r[i];
	}
	return NULL;
}

static __always_inline struct npf_region_stats *range_stats(const struct npf_range *r)
{
	__u32 slot = r->slot;

	return bpf_map_lookup_elem(&npf_region_stats, &slot);
}

static __always_inline void count_filter_miss(void)
{
	struct npf_global_stats *g = global_stats();

	if (g)
		__sync_fetch_and_add(&g->filter_misses, 1);
}

static __always_inline void fill_region(struct npf_policy_ctx *pc, const struct npf_range *r)
{
	pc->rec.region_id = r->region_id;
	pc->region_start = r->start;
	pc->region_length = r->end - r->start;
	pc->region_slot = r->slot;
}

/*
 * Observation only (--trace-cpu-faults): count the fault and stamp its
 * trap time for npfd. Policies are npf_cpu_policy's business.
 */
SEC("tp/exceptions/page_fault_user")
int npf_cpu_fault(struct page_fault_user_args *ctx)
{
	__u64 id = current_ids();
	__u32 tgid = id >> 32;
	struct npf_proc_ranges *pr;
	const struct npf_range *r;
	struct npf_region_stats *st;
	struct npf_fault_record rec = {};

	pr = bpf_map_lookup_elem(&npf_procs, &tgid);
	if (!pr)
		return 0;
	r = find_range(pr, ctx->address);
	if (!r) {
		count_filter_miss();
		return 0;
	}
	st = range_stats(r);
	if (st)
		__sync_fetch_and_add(&st->cpu_faults, 1);

	rec.version = NPF_RECORD_VERSION;
	rec.source = NPF_SRC_CPU;
	rec.access = (ctx->error_code & X86_PF_WRITE) ? NPF_ACCESS_WRITE : NPF_ACCESS_READ;
	if (ctx->error_code & X86_PF_INSTR)
		rec.access |= NPF_ACCESS_EXEC;
	if (ctx->error_code & X86_PF_PROT)
		rec.access |= NPF_ACCESS_PROT;
	rec.tgid = tgid;
	rec.tid = (__u32)id;
	rec.region_id = r->region_id;
	rec.addr = ctx->address;
	rec.len = NPF_PAGE_SIZE;
	rec.ts_ns = bpf_ktime_get_ns();
	rec.cookie = ctx->ip;
	rec.npages = 1;
	submit_record(&rec);
	return 0;
}

/*
 * Run the policy of a CPU fault npfd read from a userfaultfd. npfd calls
 * it with BPF_PROG_TEST_RUN, the fault in the context (struct
 * npf_cpu_policy_args); the policy submits its decision to npf_events,
 * where npfd reads it at once. Returns with nothing submitted when no
 * policy is in the fault's slot or the global one: npfd then applies the
 * built-in decision.
 *
 * A raw tracepoint program that is never attached: of the program types
 * BPF_PROG_TEST_RUN runs, syscall programs must be sleepable and a
 * sleepable program may not use a prog array; a raw tracepoint's test run
 * takes up to 12 u64 arguments and runs with preemption off, on npfd's
 * CPU. npfd sets the type (libbpf's raw_tp sections want a target).
 */
SEC("tracepoint")
int npf_cpu_policy(struct npf_cpu_policy_args *in)
{
	__u32 zero = 0;
	struct npf_policy_ctx *pc = bpf_map_lookup_elem(&npf_policy_scratch_cpu, &zero);
	__u64 ids, tids;

	if (!pc)
		return 0;
	ids = in->region_id_slot;
	tids = in->tgid_tid;
	__builtin_memset(pc, 0, sizeof(*pc));
	pc->rec.version = NPF_RECORD_VERSION;
	pc->rec.source = NPF_SRC_CPU;
	pc->rec.access = (__u8)in->access;
	pc->rec.tgid = (__u32)(tids >> 32);
	pc->rec.tid = (__u32)tids;
	pc->rec.region_id = (__u32)(ids >> 32);
	pc->rec.addr = in->addr;
	pc->rec.len = NPF_PAGE_SIZE;
	pc->rec.ts_ns = in->ts_ns;
	pc->rec.cookie = in->cookie;
	pc->rec.npages = 1;
	pc->region_start = in->region_start;
	pc->region_length = in->region_length;
	pc->region_slot = (__u32)ids;
	pc->ctx_version = NPF_POLICY_CTX_VERSION;
	if (pc->region_slot >= NPF_MAX_REGIONS)
		return 0;
	bpf_tail_call(in, &npf_policy_cpu, 1 + pc->region_slot);
	bpf_tail_call(in, &npf_policy_cpu, 0);
	return 0;
}

/*
 * A page request group of the software NIC: npf_nic_fault_report(req)'s
 * first argument, read from the NIC's process. The NIC waits for the
 * answer, so the record wakes npfd at once (if npfd is not polling).
 */
SEC("uprobe")
int BPF_KPROBE(npf_nic_fault, const struct npf_page_request *ureq)
{
	__u64 id = current_ids();
	__u32 tgid = id >> 32;
	struct npf_page_request req;
	struct npf_proc_ranges *pr;
	const struct npf_range *r;
	struct npf_region_stats *st;
	struct npf_policy_ctx *pc;

	/* The probe is on the executable: keep reports of processes npfd serves only. */
	pr = bpf_map_lookup_elem(&npf_procs, &tgid);
	if (!pr)
		return 0;
	if (bpf_probe_read_user(&req, sizeof(req), ureq) || req.magic != NPF_IOPT_MAGIC)
		return 0;
	pc = policy_ctx();
	if (!pc)
		return 0;
	pc->ctx_version = NPF_POLICY_CTX_VERSION;
	pc->rec.version = NPF_RECORD_VERSION;
	pc->rec.source = NPF_SRC_DEVICE;
	pc->rec.access = (__u8)req.access;
	pc->rec.tgid = tgid;
	pc->rec.tid = (__u32)id;
	pc->rec.addr = req.addr;
	pc->rec.len = req.len;
	pc->rec.ts_ns = bpf_ktime_get_ns();
	pc->rec.cookie = req.cookie;
	pc->rec.device_id = req.mr_id;
	pc->rec.npages = req.npages;
	r = find_range(pr, req.addr);
	if (r) {
		st = range_stats(r);
		if (st)
			__sync_fetch_and_add(&st->device_faults, 1);
		fill_region(pc, r);
		if (policies_enabled()) {
			/*
			 * The request must reach npfd even if the policy never
			 * submits: a copy goes first, superseded by the policy's.
			 */
			pc->rec.decision.flags = NPF_DECIDE_AWAIT_POLICY;
			submit_record(&pc->rec);
			pc->rec.decision.flags = 0;
			bpf_tail_call(ctx, &npf_policy_kp, 1 + pc->region_slot);
			bpf_tail_call(ctx, &npf_policy_kp, 0);
		}
	}
	submit_record(&pc->rec);
	return 0;
}

struct io_page_fault_args {
	struct trace_entry ent;
	__u32 device_loc;
	__u32 driver_loc;
	__u64 iova;
	int flags;
};

/* IOMMU fault flags (include/linux/iommu.h): IOMMU_FAULT_WRITE. */
#define IOMMU_FAULT_WRITE 0x1

SEC("tp/iommu/io_page_fault")
int npf_iommu_fault(struct io_page_fault_args *ctx)
{
	struct npf_global_stats *g = global_stats();
	struct npf_fault_record rec = {};

	if (g)
		__sync_fetch_and_add(&g->iommu_faults, 1);

	/*
	 * The tracepoint names the device, not the process: npfd attributes
	 * the IOVA to a region through its device backends.
	 */
	rec.version = NPF_RECORD_VERSION;
	rec.source = NPF_SRC_DEVICE;
	rec.access = (ctx->flags & IOMMU_FAULT_WRITE) ? NPF_ACCESS_WRITE : NPF_ACCESS_READ;
	rec.addr = ctx->iova;
	rec.len = NPF_PAGE_SIZE;
	rec.ts_ns = bpf_ktime_get_ns();
	submit_record(&rec);
	return 0;
}
