/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * npf shared ABI: every layout that crosses a process or kernel boundary.
 *
 * This header is included by BPF programs (next to vmlinux.h) and by
 * userspace (npfd, libnpf, npfctl, tests), so it must not include libc
 * headers. Each layout carries a magic or a version; bump the version when
 * a layout changes and keep old readers failing loudly, not silently.
 */
#ifndef NPF_ABI_H
#define NPF_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define NPF_PAGE_SIZE 4096ULL
#define NPF_PAGE_SHIFT 12

/* Limits shared by npfd and the BPF collectors. */
#define NPF_MAX_REGIONS 1024	   /* stats slots; region ids are not slots */
#define NPF_MAX_RANGES_PER_PROC 32 /* bounded loop in the fault filter */
#define NPF_LAT_BUCKETS 32	   /* log2(ns) buckets: [2^i, 2^(i+1)) ns */
#define NPF_NAME_LEN 32
#define NPF_ERRMSG_LEN 256

/* ------------------------------------------------------------------ */
/* Fault records: BPF ring buffer -> npfd                              */
/* ------------------------------------------------------------------ */

#define NPF_RECORD_VERSION 1

enum npf_fault_source {
	NPF_SRC_CPU = 1,    /* exceptions:page_fault_user in a registered range */
	NPF_SRC_DEVICE = 2, /* iommu:io_page_fault or a NIC page request */
	NPF_SRC_MM = 3,	    /* an mm event observed on a registered range */
};

/* Access bits, decoded from the x86 page fault error code. */
#define NPF_ACCESS_READ 0x1
#define NPF_ACCESS_WRITE 0x2
#define NPF_ACCESS_EXEC 0x4
#define NPF_ACCESS_PROT 0x8 /* page was present: a protection fault */

struct npf_fault_record {
	__u16 version; /* NPF_RECORD_VERSION */
	__u8 source;   /* enum npf_fault_source */
	__u8 access;   /* NPF_ACCESS_* */
	__u32 tgid;
	__u32 tid;
	__u32 region_id; /* 0: not attributed to a region */
	__u64 addr;	 /* faulting virtual address (or IOVA for IOMMU faults) */
	__u64 len;	 /* bytes covered by the record */
	__u64 ts_ns;	 /* CLOCK_MONOTONIC when the fault was raised */
	__u64 cookie;	 /* device: page request cookie; cpu: faulting ip */
	__u32 device_id; /* device: npfd's attachment id of the memory region; else 0 */
	__u32 npages;	 /* device: missing pages the request names; cpu: 1 */
	struct npf_policy_decision {
		__u32 before;	 /* pages to fetch below the fault's first page */
		__u32 after;	 /* pages to fetch above the fault's last page */
		__u32 max_pages; /* device requests: answer after this many pages (0: all) */
		__s32 stride;	 /* also fetch stride_count pages at fault + stride * i (pages) */
		__u32 stride_count;
		__u16 policy_id; /* npfd's id of the policy that decided (0: built-in) */
		__u16 flags;	 /* NPF_DECIDE_* */
	} decision;
};

/* ------------------------------------------------------------------ */
/* Fault policies: BPF programs reached by tail call from the collectors */
/* ------------------------------------------------------------------ */

/* 2: eviction candidates carry installs and idle_ms (struct npf_evict_cand grew) */
#define NPF_POLICY_ABI_VERSION 2
#define NPF_POLICY_MAGIC 0x4c4f504e /* "NPOL" */
#define NPF_POLICY_SECTION ".npf_policy"
#define NPF_POLICY_MAX_PREFETCH 1024 /* pages; npfd clamps larger decisions and counts them */

#define NPF_DECIDE_RECORD 0x1 /* append the fault to the region's working-set record */
/*
 * CPU faults: also apply npfd's built-in decision (fault-around: the
 * cheap pages of the fault's aligned block), e.g. a readahead policy that
 * sees no stream. Without it a policy's decision is all npfd does.
 */
#define NPF_DECIDE_BUILTIN 0x2
/*
 * Set by the collector, never by a policy: a device request submitted
 * before the policy runs. The policy's record supersedes it; if none comes
 * (a policy that fails), npfd answers it with the built-in decision, so a
 * broken policy cannot leave a device waiting.
 */
#define NPF_DECIDE_AWAIT_POLICY 0x8000

/*
 * Every policy object carries this in section NPF_POLICY_SECTION (use
 * NPF_POLICY() from bpf/npf_policy.h): npfd refuses an object without it or
 * with another ABI version.
 */
struct npf_policy_info {
	__u32 magic;	   /* NPF_POLICY_MAGIC */
	__u32 abi_version; /* NPF_POLICY_ABI_VERSION */
	char name[32];
	/*
	 * enum npf_policy_kind. Objects built before it ended at name: a
	 * section that short is a fault policy.
	 */
	__u32 kind;
	__u32 pad;
};

enum npf_policy_kind {
	NPF_POLICY_KIND_FAULT = 0, /* decides what a fault fetches (bpf/npf_policy.h) */
	NPF_POLICY_KIND_EVICT = 1, /* chooses eviction victims (bpf/npf_evict_policy.h) */
};

/*
 * An eviction policy's batch: npfd_evict_batch[0], an array map npfd owns
 * and shares with every eviction policy. For each batch of a region over
 * its budget, npfd fills it with up to NPF_EVICT_MAX_CANDS of the region's
 * installed pages in CLOCK hand order, what it knows of each (flags), and
 * a default score (the candidate's position: hand order), runs the policy
 * once (BPF_PROG_TEST_RUN, on npfd's time), and evicts the `want`
 * lowest-scored candidates not scored NPF_EVICT_KEEP. The policy proves it
 * ran by copying seq into done. A policy that fails, does not answer, or
 * keeps every candidate makes npfd choose that batch by CLOCK (counted as
 * the policy's `clamped` in npfctl policy list).
 */
#define NPF_MAP_EVICT_BATCH "npf_evict_batch"
#define NPF_EVICT_MAX_CANDS 2048
#define NPF_EVICT_KEEP 0xffffffffu /* a score: this candidate stays */
#define NPF_EVICT_REF 0x1	   /* faulted, installed or found there since the last sweep */
#define NPF_EVICT_DEV 0x2	   /* a device's IO page table entry had its ACCESSED bit */
#define NPF_EVICT_DIRTY 0x4	   /* evicting it writes it back (not clean) */

#define NPF_EVICT_IDLE_UNKNOWN 0xffffffffu /* idle_ms of a page npfd never saw faulted */

struct npf_evict_cand {
	__u64 page;	/* index of the page in its region */
	__u32 flags;	/* NPF_EVICT_REF | NPF_EVICT_DEV | NPF_EVICT_DIRTY */
	__u32 score;	/* the policy's: lower goes first; NPF_EVICT_KEEP stays */
	__u32 installs; /* times npfd installed it (its fault, or around a neighbour's)
			 * since the region's eviction began, at most 255: above 1, it
			 * was evicted and came back */
	__u32 idle_ms;	/* since its last install or write fault, or NPF_EVICT_IDLE_UNKNOWN */
};

struct npf_evict_batch {
	__u64 seq;  /* this run's number */
	__u64 done; /* the policy's answer: seq */
	__u32 region_id;
	__u32 n;    /* candidates in cand[] */
	__u32 want; /* pages npfd evicts in this batch at most */
	__u32 pad;
	__u64 region_pages;
	__u64 now_ns; /* CLOCK_MONOTONIC when the batch was filled */
	struct npf_evict_cand cand[NPF_EVICT_MAX_CANDS];
};

/*
 * What a policy sees: npf_policy_scratch[0] (per CPU) while it runs.
 * ctx_version (was padding, 0) says what else is there:
 *   2: rec.tid is the faulting thread for every fault (CPU faults: the
 *      userfaultfd message's thread id), so a policy may keep one stream
 *      per thread (policies/seq.bpf.c).
 */
#define NPF_POLICY_CTX_VERSION 2
struct npf_policy_ctx {
	struct npf_fault_record rec; /* the fault; rec.decision is the policy's to fill */
	__u64 region_start;
	__u64 region_length;
	__u32 region_slot;
	__u32 ctx_version; /* NPF_POLICY_CTX_VERSION of the npfd that filled it */
};

#define NPF_MAP_POLICY_SCRATCH "npf_policy_scratch"
/*
 * CPU faults: npfd runs npf_cpu_policy, which tail-calls slot 1 + region
 * slot, then slot 0 (global). No tracepoint is involved.
 */
#define NPF_MAP_POLICY_CPU "npf_policy_cpu"

/* npf_cpu_policy's context: a raw tracepoint's u64 arguments, filled by npfd. */
struct npf_cpu_policy_args {
	__u64 addr;
	__u64 ts_ns;
	__u64 cookie;
	__u64 region_start;
	__u64 region_length;
	__u64 tgid_tid;	      /* tgid << 32 | tid */
	__u64 region_id_slot; /* region id << 32 | region slot */
	__u64 access;	      /* NPF_ACCESS_* */
};
#define NPF_MAP_POLICY_KP "npf_policy_kp" /* the same, for device faults (uprobe) */
#define NPF_MAP_POLICY_CONF "npf_policy_conf"

/* npf_policy_conf[0] */
struct npf_policy_conf {
	__u32 enabled;	 /* 0: the kill switch: every fault gets the built-in decision */
	__u32 installed; /* slots holding a policy; 0: the collectors skip the tail calls */
};

/*
 * npf_ring_ctl[0]: how records reach npfd. While npfd busy-polls the ring
 * buffer it sets npfd_polling, and device records are submitted without a
 * wakeup: waking costs the faulting thread an interrupt (irq_work) and
 * npfd is reading anyway. Shared with policies, which submit records too.
 */
#define NPF_MAP_RING_CTL "npf_ring_ctl"
struct npf_ring_ctl {
	__u32 npfd_polling;
	__u32 pad;
	__u64 barrier; /* target of the collectors' atomic barrier (a count nobody reads) */
};

/* ------------------------------------------------------------------ */
/* Pinned maps under the bpffs directory (default /sys/fs/bpf/npf)     */
/* ------------------------------------------------------------------ */

#define NPF_MAP_INFO "npf_info"
#define NPF_MAP_PROCS "npf_procs"
#define NPF_MAP_STATS "npf_region_stats"
#define NPF_MAP_LATENCY "npf_latency"
#define NPF_MAP_EVENTS "npf_events"
#define NPF_MAP_GLOBAL "npf_global"
#define NPF_MAP_BUDGET "npf_budget" /* struct npf_budget_info per stats slot */

#define NPF_INFO_MAGIC 0x4e504649 /* "NPFI" */
#define NPF_MAPS_VERSION 1

/* npf_info[0]: lets a reader of the pinned maps check their layout. */
struct npf_info {
	__u32 magic;	    /* NPF_INFO_MAGIC */
	__u32 maps_version; /* NPF_MAPS_VERSION */
	__u32 record_version;
	__u32 npfd_pid;
};

/* One registered range of a process, as the fault filter sees it. */
struct npf_range {
	__u64 start;
	__u64 end; /* exclusive */
	__u32 slot;
	__u32 region_id;
};

/* npf_procs[tgid]: the registered ranges of one process. */
struct npf_proc_ranges {
	__u32 nr;
	__u32 pad;
	struct npf_range r[NPF_MAX_RANGES_PER_PROC];
};

/*
 * npf_region_stats[slot]: per-region counters. The BPF collectors add to
 * the *_faults fields they observe; npfd (the single writer of the other
 * fields) updates the rest through an mmap of the map, so counting costs
 * no syscall on the fault path.
 */
struct npf_region_stats {
	__u32 region_id; /* 0: slot unused */
	__u32 tgid;
	__u64 start;
	__u64 length;
	__u64 cpu_faults;     /* BPF: page_fault_user hits in the range */
	__u64 device_faults;  /* BPF: device page requests for the range */
	__u64 uffd_faults;    /* npfd: userfaultfd fault messages */
	__u64 pages_zeroed;   /* npfd: pages installed zero-filled */
	__u64 pages_copied;   /* npfd: pages installed from the backing file */
	__u64 bytes_read;     /* npfd: bytes read from the backing file */
	__u64 batches;	      /* npfd: resolver batches that touched the region */
	__u64 mm_events;      /* npfd: REMOVE/UNMAP/REMAP/FORK events */
	__u64 latency_sum_ns; /* npfd: sum of fault service times */
};

/* npf_latency[slot]: fault service time (raise -> page installed), log2(ns). */
struct npf_latency_hist {
	__u64 slot[NPF_LAT_BUCKETS];
};

/* npf_global[0]: counters that belong to no region. */
struct npf_global_stats {
	__u64 iommu_faults;    /* iommu:io_page_fault, any device */
	__u64 records_dropped; /* ring buffer full */
	__u64 filter_misses;   /* fault of a watched process outside its ranges */
	__u64 faults_failed;   /* npfd: faults it could not serve (the backing file's read
				  * failed or ended): the page was poisoned, the access got
				  * SIGBUS. Not in npf_status (libnpf's ABI): bpftool shows it */
	__u64 mm_calls_late;   /* npfd: calls into a client's address space that missed
				  * mm-call-timeout-ms (its process given up meanwhile) */
};

/*
 * mm watch (bpf/npf_mm.bpf.c -> daemon/mmwatch.c): the kernel freed or moved
 * a page frame that a device maps. npf_mm_pfns maps each such frame (PFN)
 * to the region page npfd mapped it for; a hit deletes the entry and sends
 * one record.
 */
enum npf_mm_event {
	NPF_MM_PAGE_FREE = 0,  /* kmem:mm_page_free: reclaim, migration, collapse, KSM */
	NPF_MM_SWAP_WRITE = 1, /* vmscan:mm_vmscan_write_folio: swap-out written */
	NPF_MM_KSM_MERGE = 2,  /* ksm:ksm_merge_with_ksm_page */
	NPF_MM_NR_EVENTS = 3,
};

#define NPF_MM_SHARED 1 /* several device pages map the frame (KSM): npfd keeps the list */

struct npf_mm_page {
	__u64 addr;	 /* the page's address in the region's process */
	__u32 region_id; /* npf_region_info.id */
	__u32 flags;	 /* NPF_MM_SHARED: addr and region_id are one of them */
};

struct npf_mm_record {
	__u64 pfn;
	__u64 addr;
	__u32 region_id;
	__u16 event; /* enum npf_mm_event */
	__u16 flags; /* npf_mm_page.flags */
};

/* npf_mm_stats[0] */
struct npf_mm_stats {
	__u64 hits[NPF_MM_NR_EVENTS]; /* tracked frames reported, per event */
	__u64 lost;		      /* ring full: npfd must invalidate everything */
};

/* ------------------------------------------------------------------ */
/* Control protocol: libnpf/npfctl <-> npfd, SOCK_SEQPACKET            */
/* ------------------------------------------------------------------ */

#define NPF_PROTO_MAGIC 0x3146504e /* "NPF1" little endian */
#define NPF_PROTO_VERSION 1
#define NPF_REQ_MAX 4096	 /* largest request npfd accepts */
#define NPF_MSG_MAX (512 * 1024) /* largest reply npfd sends */
#define NPF_DEFAULT_SOCKET "/run/npf/npfd.sock"
#define NPF_DEFAULT_BPFFS "/sys/fs/bpf/npf"

enum npf_msg_type {
	NPF_MSG_STATUS = 1,	       /* -> npf_status */
	NPF_MSG_REGION_REGISTER = 2,   /* npf_region_req + fds -> npf_region_info */
	NPF_MSG_REGION_UNREGISTER = 3, /* npf_region_id_req -> nothing */
	NPF_MSG_REGION_LIST = 4,       /* -> npf_region_info[] */
	NPF_MSG_STATS = 5,	       /* npf_region_id_req (0: all) -> npf_region_stats_full[] */
	NPF_MSG_DEVICE_ATTACH = 6, /* npf_device_attach_req + IO page table fd -> npf_device_info */
	NPF_MSG_DEVICE_DETACH = 7, /* npf_device_id_req -> nothing (after invalidation) */
	NPF_MSG_DEVICE_LIST = 8,   /* -> npf_device_info[] */
	NPF_MSG_POLICY_LOAD = 9,   /* npf_policy_load_req + BPF object fd -> npf_policy_status */
	NPF_MSG_POLICY_UNLOAD = 10, /* npf_policy_name_req -> nothing */
	NPF_MSG_POLICY_LIST = 11,   /* -> npf_policy_status[] */
	NPF_MSG_POLICY_ENABLE = 12, /* npf_policy_enable_req: the kill switch -> nothing */
	/*
	 * Added in protocol version 1 without a bump (an npfd that predates
	 * them answers EOPNOTSUPP): a client whose npfd died and came back
	 * hands its regions and devices to the new npfd.
	 */
	NPF_MSG_REGION_ADOPT = 13,  /* npf_region_adopt_req + fds as REGISTER -> npf_region_info */
	NPF_MSG_DEVICE_ADOPT = 14,  /* npf_device_adopt_req + IO page table fd -> npf_device_info */
	NPF_MSG_POLICY_HEALTH = 16, /* -> npf_policy_health[] (the watchdog's view) */
	/* Overcommit (added in version 1 too): budgets and eviction. */
	NPF_MSG_REGION_SET = 17,  /* npf_region_set_req -> npf_budget_info */
	NPF_MSG_BUDGET_LIST = 18, /* npf_region_id_req (0: all) -> npf_budget_info[] */
	NPF_MSG_EVICT_RING = 19,  /* npf_evict_ring_req -> nothing (libnpf sends it) */
	/* fork() of a client (added in version 1 too; libnpf sends them, see below) */
	NPF_MSG_FORK_PREPARE = 20,  /* nothing -> npf_fork_info */
	NPF_MSG_FORK_DONE = 21,	    /* npf_fork_req -> nothing */
	NPF_MSG_REGION_FORKED = 22, /* npf_region_forked_req + fds as REGISTER -> npf_region_info */
	/* The layout journal (added in version 1 too; libnpf asks for it, see below) */
	NPF_MSG_LAYOUT = 23,	/* nothing -> npf_layout_info + the journal, read-only */
	NPF_MSG_REPLY = 0x8000, /* OR-ed into the request type */
};

struct npf_msg_hdr {
	__u32 magic;   /* NPF_PROTO_MAGIC */
	__u16 version; /* NPF_PROTO_VERSION */
	__u16 type;    /* enum npf_msg_type */
	__u32 len;     /* whole message, header included */
	__u32 seq;     /* echoed in the reply */
};

/* Every reply: the header, then this, then `count` payload items. */
struct npf_reply {
	__s32 status;		    /* 0 or -errno */
	__u32 count;		    /* payload items that follow */
	char error[NPF_ERRMSG_LEN]; /* NUL-terminated reason when status < 0 */
};

enum npf_backing {
	NPF_BACKING_ANON = 1, /* first touch reads zeros */
	NPF_BACKING_FILE = 2, /* first touch reads the file at file_offset */
};

/*
 * Register [start, start + length) of the sender's own memory. SCM_RIGHTS
 * carries the sender's userfaultfd (after UFFDIO_API) and, for
 * NPF_BACKING_FILE, the backing file. npfd registers the range with the
 * userfaultfd itself, so its table and the kernel's always agree.
 */
struct npf_region_req {
	__u64 start;
	__u64 length;
	__u64 file_offset;
	__u32 backing; /* enum npf_backing */
	__u32 flags;   /* NPF_REGION_*; npfd refuses others */
	char name[NPF_NAME_LEN];
	/* Added after the first version (NPF_REGION_REQ_SIZE_V1 bytes, still accepted). */
	__u32 fault_around_kib; /* with NPF_REGION_FAULT_AROUND: see below */
	__u32 pad;		/* 0 */
};

#define NPF_REGION_REQ_SIZE_V1 64 /* a request without fault_around_kib: npfd's setting */
/*
 * The region's own fault-around: a CPU fault that no policy decides for
 * also installs the other pages of its aligned fault_around_kib block (a
 * power of two, at most NPF_FAULT_AROUND_MAX_KIB) that are cheap: already
 * in the page cache (file-backed) or zeros (anonymous). 0: the faulting
 * page only. Without the flag, npfd's fault-around-kib applies.
 */
#define NPF_REGION_FAULT_AROUND 0x1
#define NPF_FAULT_AROUND_MAX_KIB 2048
/*
 * In the reply to a register or an adopt (npf_region_info.flags): a
 * read-only descriptor of the anonymous region's swap store comes with it.
 * Page i of the region as registered (or adopted) is at byte
 * npf_region_info.file_offset + i * 4096 (0 when registered; see
 * NPF_MSG_LAYOUT); a page is stored iff that range is not a hole. The process reads its
 * evicted pages there if npfd dies and does not come back (libnpf's
 * fallback).
 */
#define NPF_REGION_STORE_FD 0x100

/*
 * The layout journal (NPF_MSG_LAYOUT): where the process's regions are
 * now. npfd follows the mm events that move a region (mremap) or cut it
 * (munmap of an end), reading them from the userfaultfd, so the process
 * never sees them; if npfd dies, the process hands its regions to the
 * next npfd (NPF_MSG_REGION_ADOPT) and serves them itself meanwhile as
 * the journal says, not as they were registered. A memfd npfd writes, one
 * entry per slot (NPF_LAYOUT_ENTRIES of them), each entry with one
 * pwrite() (never torn by npfd's death); the process gets it read-only.
 * An adopt names a region as its entry says: start, length, and in
 * region.file_offset its offset -- for an anonymous region the swap
 * store's byte offset of its first page (a cut region's first pages were
 * cut off the store's beginning).
 */
struct npf_layout_entry {
	__u32 region_id; /* npfd's id; 0: a free slot */
	__u32 flags;	 /* NPF_LAYOUT_PART, or 0: a region */
	__u64 start;
	__u64 length;
	__u64 offset; /* file-backed: the file offset of start; anonymous: the store's */
};

/*
 * The journal's slots: the first NPF_MAX_RANGES_PER_PROC are the regions',
 * the others the parts' (an npfd before parts were journaled had only the
 * regions' slots: a reader that reads those alone reads no part).
 */
#define NPF_LAYOUT_ENTRIES 256
/*
 * An entry of a part of region region_id that mremap() moved away, whose
 * pages npfd is still putting at their new place, [start, start + length):
 * the page at start + i pages is at byte offset + i pages of the region's
 * swap store (anonymous) or file (file-backed) -- in the store, a page is
 * to be put back iff it holds data there; from the file, every page that
 * holds data. The range stays registered with the userfaultfd, and its
 * faults wait, until the part is all back; then npfd unregisters it and
 * clears the entry. Not cleared when npfd stops or dies: the process puts
 * back what is left itself (libnpf: its fallback serves the range, and it
 * finishes the part before it hands its regions to the next npfd).
 */
#define NPF_LAYOUT_PART 0x1

struct npf_layout_info {
	__u32 entries;	  /* slots in the journal */
	__u32 entry_size; /* sizeof(struct npf_layout_entry) */
};

/*
 * Adopt a region registered with an earlier npfd (one that died or was
 * restarted): the same userfaultfd, the range already registered with it in
 * the kernel, pages already installed left as they are. npfd checks it as a
 * registration, keeps region_id when it is free (else answers another), and
 * wakes the range's threads: a fault the earlier npfd read but never served
 * is raised again.
 */
struct npf_region_adopt_req {
	struct npf_region_req region;
	__u32 region_id; /* the id the earlier npfd gave */
	__u32 flags;	 /* NPF_ADOPT_* */
};

/*
 * fork() of a client whose pages npfd evicts. The child's copy of a
 * region is not registered with any userfaultfd (the kernel drops the
 * registration of a child without UFFD_FEATURE_EVENT_FORK), so the pages
 * that were evicted at the fork would read as zeros in it. libnpf, from
 * pthread_atfork() handlers:
 * - the parent, before fork(), sends NPF_MSG_FORK_PREPARE. npfd starts no
 *   eviction of the process (an eviction under way must end first:
 *   EAGAIN, ask again), copies what its swap stores hold and answers a
 *   token, a random secret;
 * - the child registers each region anew with NPF_MSG_REGION_FORKED,
 *   naming the parent's region and the token, with a userfaultfd of its
 *   own: its region starts with the copy of the parent's stored pages;
 * - the parent, after fork(), sends NPF_MSG_FORK_DONE: eviction goes on,
 *   and copies not taken are dropped. npfd also drops them when the
 *   parent's connection closes, and goes on evicting by itself after
 *   NPF_FORK_HOLD_MS.
 * A child must be of the same user as the parent.
 */
#define NPF_FORK_TOKEN_LEN 16
#define NPF_FORK_HOLD_MS 30000

struct npf_fork_info {
	__u8 token[NPF_FORK_TOKEN_LEN];
	__u32 regions; /* regions of which a copy of stored pages was made */
	__u32 pad;
};

struct npf_fork_req {
	__u8 token[NPF_FORK_TOKEN_LEN];
};

struct npf_region_forked_req {
	struct npf_region_req region; /* the child's copy: the same range as the parent's */
	__u32 parent_region_id;	      /* the parent's region (npfd's id) */
	__u32 pad;		      /* 0 */
	__u8 token[NPF_FORK_TOKEN_LEN];
};

/*
 * More regions of this userfaultfd follow: until the last one (without the
 * flag), a fault outside every adopted region is left waiting for its
 * region's adoption (which wakes it) instead of being zero-filled -- it may
 * be a file's page.
 */
#define NPF_ADOPT_MORE 0x1

struct npf_region_id_req {
	__u32 region_id;
	__u32 pad;
};

struct npf_region_info {
	__u32 region_id;
	__u32 tgid;
	__u64 start;
	__u64 length;
	__u64 file_offset;
	__u32 backing;
	__u32 flags;
	char name[NPF_NAME_LEN];
};

/*
 * Attach a device memory region (the software NIC's MR) to a registered
 * region: SCM_RIGHTS carries the MR's IO page table (a memfd laid out as
 * struct npf_iopt_header, npf_nic_abi.h). npfd maps it, answers the
 * device's page requests for it and alone sets its entries present.
 */
struct npf_device_attach_req {
	__u32 region_id; /* the registered region that contains the MR */
	__u32 flags;	 /* none defined yet: must be 0 */
};

/*
 * Adopt a device attached through an earlier npfd: the device (the NIC's
 * MR) puts device_id in its page requests, so npfd keeps it or refuses
 * (EEXIST) rather than answer another.
 */
struct npf_device_adopt_req {
	__u32 region_id; /* the region's id, as the adopting npfd answered it */
	__u32 device_id; /* the id the earlier npfd gave */
};

struct npf_device_id_req {
	__u32 device_id;
	__u32 pad;
};

struct npf_device_info {
	__u32 device_id; /* put it in every page request (npf_page_request.mr_id) */
	__u32 region_id;
	__u32 tgid;
	__u32 requests_waiting; /* page request groups not answered yet (was pad, 0) */
	__u64 start;		/* first byte of the MR's page table coverage */
	__u64 npages;
	__u64 page_requests; /* page request groups answered */
	__u64 pages_mapped;  /* entries npfd set present */
	__u64 invalidations; /* ranges invalidated and acknowledged */
	__u64 fault_ns_sum;  /* sum over answered groups of (answered - raised) */
};

/*
 * Load a policy object (SCM_RIGHTS: the ELF file, opened by the sender)
 * into the slot of one region, or the global slot. A policy of the same
 * name is replaced atomically: a fault sees the old or the new one.
 */
struct npf_policy_load_req {
	__u32 region_id; /* 0: the global slot (regions without a policy of their own) */
	__u32 flags;	 /* none defined yet: must be 0 */
	char name[32];	 /* "": the name the object carries */
};

struct npf_policy_name_req {
	char name[32];
};

struct npf_policy_enable_req {
	__u32 enabled;
	__u32 pad;
};

struct npf_policy_status {
	__u32 policy_id;
	__u32 abi_version;
	char name[32];
	__u32 region_id;   /* 0: global */
	__u32 enabled;	   /* the kill switch, as it is now */
	__u64 invocations; /* decisions npfd received from it */
	__u64 clamped;	   /* decisions out of bounds, clamped by npfd */
	__u64 pages_prefetched;
};

/* NPF_MSG_POLICY_HEALTH: one per npf_policy_status, in the same order. */
struct npf_policy_health {
	__u32 policy_id;
	__u32 region_id;
	__u32 state; /* enum npf_policy_state */
	__u32 pad;
	__u64 slow_decisions; /* decisions that took NPF_POLICY_SLOW_NS or more */
	char name[32];
};

/*
 * A policy whose decisions keep running long (NPF_POLICY_WATCHDOG_RUN slow
 * decisions in a row: a CPU fault's policy run in npfd taking
 * NPF_POLICY_SLOW_NS or more, a device request's decision reaching npfd
 * NPF_POLICY_SLOW_DEVICE_NS or more after the request) is taken out of its
 * slots by npfd's watchdog: it stays listed, in state NPF_POLICY_WATCHDOG,
 * until it is unloaded or loaded again.
 */
#define NPF_POLICY_SLOW_NS (1000 * 1000ULL)
#define NPF_POLICY_SLOW_DEVICE_NS (10 * 1000 * 1000ULL)
#define NPF_POLICY_WATCHDOG_RUN 32
/* Bytes of maps a policy may create (key + value per entry, per CPU where it applies). */
#define NPF_POLICY_MAX_MAP_BYTES (16 << 20)

enum npf_policy_state {
	NPF_POLICY_ACTIVE = 0,
	NPF_POLICY_WATCHDOG = 1, /* disabled by the watchdog: its decisions ran long */
};

/*
 * NPF_MSG_POLICY_LOAD without a descriptor: choose the loaded policy named
 * req.name for region req.region_id. Loading code (with the object's
 * descriptor) is for privileged peers only (root, or CAP_BPF and
 * CAP_PERFMON, or CAP_SYS_ADMIN); choosing is for the region's owner too.
 */

struct npf_region_stats_full {
	struct npf_region_stats stats;
	struct npf_latency_hist latency;
};

/*
 * Budgets (NPF_MSG_REGION_SET): the most pages of a region npfd keeps
 * installed. Over high_pct of the budget npfd evicts down to low_pct:
 * each page's device entries are invalidated and acknowledged first, its
 * CPU writes are frozen (userfaultfd write-protect) while it is read out,
 * dirty pages are written back (a file-backed region's to its file, an
 * anonymous one's to npfd's swap store), and a later fault, CPU or device,
 * reads it back. Only the region's owner (or root) may set it.
 */
enum npf_region_set_key {
	NPF_SET_BUDGET = 1, /* value: bytes, a multiple of the page size; 0: no budget */
};

struct npf_region_set_req {
	__u32 region_id;
	__u32 key;   /* enum npf_region_set_key */
	__u64 value; /* see the key */
};

/*
 * libnpf hands npfd a way to take pages out of its process: an io_uring
 * with a submission-queue thread (IORING_SETUP_SQPOLL, NPF_EVICT_RING_ENTRIES
 * entries), by its descriptor number in the client, which npfd fetches
 * with pidfd_getfd() (io_uring descriptors cannot travel over SCM_RIGHTS).
 * The ring's thread runs in the client's address space, so the
 * MADV_DONTNEED npfd submits there drops the client's page, which
 * process_madvise() does not allow another process to do.
 */
#define NPF_EVICT_RING_ENTRIES 16
struct npf_evict_ring_req {
	__s32 fd;    /* the ring's descriptor number in the sender */
	__u32 flags; /* none defined yet: must be 0 */
};

/*
 * A region's budget and what eviction did, in NPF_MSG_BUDGET_LIST replies
 * and in the pinned map npf_budget (per stats slot, npfd writes it).
 */
struct npf_budget_info {
	__u32 region_id; /* 0: slot unused */
	__u32 tgid;
	__u64 budget_pages;   /* 0: none of its own (the client's budget, if any, applies) */
	__u64 high_pages;     /* over this many installed pages... */
	__u64 low_pages;      /* ...npfd evicts down to this many */
	__u64 resident_pages; /* pages there: installed by npfd, or there at the registration */
	__u64 evicted_pages;  /* pages taken away */
	__u64 dropped_clean;  /* of those: clean, nothing written */
	__u64 written_pages;  /* of those: written back (file or swap store) */
	__u64 write_batches;  /* io_uring submissions that carried them */
	__u64 refaults;	      /* pages read back from the swap store */
	__u64 aborted;	      /* victims kept: an acknowledgement, write-back or zap failed */
	__u64 stored_pages;   /* pages of it in the swap store now */
};

struct npf_status {
	__u32 npfd_pid;
	__u32 proto_version;
	__u32 clients;
	__u32 regions;
	__u64 uptime_ns;
	__u64 faults_resolved; /* all regions, since start */
	__u64 batches;
	__u64 iommu_faults;
	__u64 records_dropped;
	__u64 bad_messages;  /* requests refused as malformed */
	__u64 filter_misses; /* faults of served processes outside their regions (BPF) */
	char bpffs[64];
};

#endif /* NPF_ABI_H */
