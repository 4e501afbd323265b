/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The software RNIC <-> npfd interface: the IO page table and the queues
 * that carry page request responses and invalidations. Everything here
 * lives in one shared memory object (a memfd) per memory region: the NIC
 * creates it, npfd maps it. Page *requests* do not travel here: the NIC
 * reports them through npf_nic_fault_report() (nic/), a function an
 * uprobe turns into a fault record on npfd's BPF ring buffer, so every
 * device fault passes through BPF exactly like an IOMMU fault would.
 *
 * No libc includes: usable from BPF (next to vmlinux.h) and userspace.
 */
#ifndef NPF_NIC_ABI_H
#define NPF_NIC_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define NPF_IOPT_MAGIC 0x54504f49 /* "IOPT" */
#define NPF_IOPT_VERSION 2

/*
 * IO page table entry, one per 4 KiB page of the memory region.
 * Only npfd sets PRESENT; the NIC sets ACCESSED/DIRTY when it touches a
 * present page and never writes the other bits. The version is bumped by
 * npfd on every change of PRESENT, so a NIC that read an entry, did DMA,
 * and reads the same version again knows the mapping did not change under it.
 */
#define NPF_PTE_PRESENT (1ULL << 0)
#define NPF_PTE_READ (1ULL << 1)
#define NPF_PTE_WRITE (1ULL << 2)
#define NPF_PTE_ACCESSED (1ULL << 3)
#define NPF_PTE_DIRTY (1ULL << 4)
#define NPF_PTE_VERSION_SHIFT 32

#define NPF_NIC_RING_SIZE 256 /* entries in each ring; a power of two */

/* Page request status, in responses. */
enum npf_pr_status {
	NPF_PR_SUCCESS = 0,
	NPF_PR_INVALID = 1, /* address not in a registered region: the WR fails */
};

/*
 * A page request group, as the NIC builds it for one work request and
 * passes to npf_nic_fault_report() (the BPF uprobe reads it from the NIC's
 * memory with bpf_probe_read_user).
 */
struct npf_page_request {
	__u32 magic;  /* NPF_IOPT_MAGIC */
	__u32 mr_id;  /* npfd's device attachment id of the memory region */
	__u64 addr;   /* first missing page (virtual address in the MR owner) */
	__u64 len;    /* bytes from addr to the end of the last missing page */
	__u64 cookie; /* echoed in the response: (qp number << 32) | sequence */
	__u32 npages; /* missing pages within [addr, addr + len) */
	__u32 access; /* NPF_ACCESS_READ / NPF_ACCESS_WRITE (npf_abi.h) */
};

struct npf_page_response {
	__u64 cookie;
	__u32 status; /* enum npf_pr_status */
	__u32 pad;
};

/* Invalidation: npfd asks, the NIC acknowledges once no DMA to the pages is in flight. */
struct npf_inval_request {
	__u64 seq;
	__u64 first_page; /* index into the IO page table */
	__u64 npages;
};

/*
 * Single-producer single-consumer rings: head is written by the consumer,
 * tail by the producer; each sits on its own cache line. `tail` words are
 * also futex words: the consumer may FUTEX_WAIT on them (shared futex).
 */
struct npf_resp_ring {
	__u32 head;
	/*
	 * The NIC is (about to be) asleep on the rings' tails: a producer
	 * stores its tail, issues a full barrier, and FUTEX_WAKEs only if
	 * this is set. The NIC sets it (full barrier) before it reads the
	 * tails it will sleep on, so no post goes unnoticed.
	 */
	__u32 nic_sleeping;
	__u32 pad0[14];
	__u32 tail;
	__u32 pad1[15];
	struct npf_page_response ent[NPF_NIC_RING_SIZE];
};

struct npf_inval_ring {
	__u32 head;
	__u32 pad0[15];
	__u32 tail;
	__u32 pad1[15];
	struct npf_inval_request ent[NPF_NIC_RING_SIZE];
	__u64 acked_seq; /* NIC: the highest seq whose pages have no DMA in flight */
	__u32 pad2[14];
};

/*
 * Layout of the shared object: this header, then npages __u64 entries
 * (the IO page table) starting at pte_offset.
 */
struct npf_iopt_header {
	__u32 magic;   /* NPF_IOPT_MAGIC */
	__u32 version; /* NPF_IOPT_VERSION */
	__u64 start;   /* virtual address of page 0 in the MR owner's mm */
	__u64 npages;
	__u64 pte_offset; /* bytes from the start of the object to entry 0 */
	__u32 owner_tgid;
	__u32 pad[9];
	struct npf_resp_ring resp;   /* npfd -> NIC */
	struct npf_inval_ring inval; /* npfd -> NIC, acked through acked_seq */
};

#endif /* NPF_NIC_ABI_H */
