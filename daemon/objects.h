/* SPDX-License-Identifier: GPL-2.0 */
/*
 * npfd's objects, the data every layer reads: the address space it serves
 * (npfd_mm, one per userfaultfd), the regions registered in it, and the
 * control connection (npfd_client) that answers for them. Types only: the
 * functions on regions and address spaces are in region.h; connections are
 * made and dropped by control.c (regions, devices and policies read who
 * asked: pid, uid, privilege, address space).
 */
#ifndef NPFD_OBJECTS_H
#define NPFD_OBJECTS_H

#include <stdbool.h>
#include <sys/types.h>
#include "npf_abi.h"
#include "list.h"
#include "holes.h"

struct npfd_wait;
struct npfd_client;
struct npfd_mm;
struct nic_probe;
struct evict_region;
struct bitmap;
struct evict_ring;
struct evict_fork;

/* A swap store's file name (swapstore.c): BOOT.PID.START.REGION */
#define SWAPSTORE_NAME_LEN 96
/* The layout journal's slots for moved parts (layout.h): what the regions' leave. */
#define LAYOUT_PART_SLOTS (NPF_LAYOUT_ENTRIES - NPF_MAX_RANGES_PER_PROC)

struct npfd_region {
	struct list_head node; /* in npfd_mm.regions */
	struct npfd_mm *mm;
	__u32 id;
	__u32 slot; /* index into the stats and latency maps */
	__u64 start;
	__u64 length;
	struct holes holes; /* parts of [start, start + length) unmapped from its middle (region.c) */
	__u64 file_offset;
	__u32 backing;
	int file_fd; /* NPF_BACKING_FILE: npfd's own descriptor */
	/*
	 * NPF_BACKING_FILE: npfd's read-only mapping of the file from
	 * map_offset (resolve.c: page-cache pages are copied from it).
	 */
	const char *map;
	__u64 map_offset, map_length;
	bool map_failed;  /* could not map it: every read goes through io_uring */
	int fault_around; /* pages a CPU fault brings in (aligned block); -1: npfd's setting */
	char name[NPF_NAME_LEN];
	struct npf_region_stats *stats; /* mmap of npf_region_stats[slot] */
	struct npf_latency_hist *latency;
	__u64 last_batch;	  /* resolver flush that last counted this region */
	struct bitmap *installed; /* pages npfd installed (region.c; prefetch skips them) */
	__u64 ninstalled;	  /* bits set in installed */
	int ws_fd;		  /* working-set record being written (wsstore.c), or -1 */
	bool ws_replayed;	  /* this run replayed a record: append to it */
	bool ws_failed;		  /* recording failed once: do not retry every fault */
	__u64 faults_failed;	  /* faults npfd could not serve (poisoned), for the log */
	/* Budgets and eviction (evict.c sets these; the layers below only read them). */
	struct npf_budget_info *budget_info; /* mmap of npf_budget[slot] */
	struct evict_region *ev;	     /* its budget and page state, or NULL */
	bool install_clean; /* read faults are installed write-protected: their first write is seen */
	struct bitmap *evicting; /* pages of the batch being evicted, never mapped for a device */
	/*
	 * Anonymous: its swap store (evict.c, swapstore.c), made when it is
	 * registered so that its process can be handed a read-only descriptor
	 * (libnpf's fallback reads it if npfd dies). -1 / "": none; "" with a
	 * descriptor: unnamed (not yet given its name, swapstore_link()).
	 */
	int store_fd;
	char store_name[SWAPSTORE_NAME_LEN];
	int layout_slot; /* its entry in its mm's layout journal (region.c) */
};

/* One userfaultfd, i.e. one address space npfd serves. */
struct npfd_mm {
	struct list_head node; /* in region.c's list of address spaces (mms) */
	int uffd;
	ino_t uffd_ino;
	pid_t tgid;
	uid_t uid;		   /* of the client that registered it: per-uid limits */
	struct npfd_client *owner; /* control connection that answers for it, or NULL */
	struct list_head regions;
	__u32 nr_regions;
	bool dead; /* torn down; freed at the end of the loop iteration */
	/*
	 * Given up while its process runs (a call into it missed its
	 * deadline, mmcall.h): torn down as when npfd stops.
	 */
	bool given_up;
	bool adopting;		     /* more regions are being adopted: faults outside them wait */
	int src;		     /* event-loop source id of uffd */
	struct nic_probe *nic_probe; /* the uprobe on its executable's npf_nic_fault_report() */
	int pagemap_fd;		     /* /proc/PID/pagemap, opened for device requests */
	int mem_fd;		     /* /proc/PID/mem, opened for eviction (mm_mem_rw()) */
	int pidfd;		     /* the process, taken at its registration (mm_alive()) */
	struct evict_ring *evict_ring; /* the client's ring that drops its pages (evict.c) */
	__u64 old_zaps_until; /* adopted, no ring yet: an earlier zap may run until then (evict.c) */
	bool late_unsettled; /* pages held for zaps still to run wait for late_settle() (evict.c) */
	/* a fork() under way: no eviction until then, copies of its stores for the child (evict.c) */
	__u64 fork_hold_until;
	struct evict_fork *fork;
	/* the layout journal (npf_abi.h NPF_MSG_LAYOUT), or -1; its slots in use (layout.h) */
	int layout_fd;
	__u32 layout_slots;					/* the regions' */
	__u64 layout_part_slots[(LAYOUT_PART_SLOTS + 63) / 64]; /* the moved parts' */
};

struct npfd_client {
	struct list_head node; /* in control.c's list of clients */
	int fd;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	struct npfd_mm *mm; /* the client's own address space, once it registers */
	int src;
	bool dead;
	/* Its request being answered later: the requests behind it wait (answers stay in order). */
	struct npfd_wait *wait;
	struct list_head resume; /* in control.c's list of clients to read again */
	bool privileged;	 /* root, or CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN) at connect */
	int pidfd;		 /* the process that connected (requests once it exited: refused) */
};

#endif
