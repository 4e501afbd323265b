/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libnpf: register memory with npfd without pinning it.
 *
 * Conventions (as libbpf): opaque objects; npf_<object>__<verb>(); options
 * structs start with `size_t sz` (use NPF_OPTS to declare them); int
 * functions return 0 (or a non-negative value) on success and -errno on
 * failure; pointer functions return NULL and set errno. The library never
 * prints: install a callback with npf_set_print() to see its debug output.
 * When npfd refuses a request, npf_client__errmsg() returns npfd's reason.
 */
#ifndef NPF_H
#define NPF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdarg.h>
#include "npf_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NPF_API __attribute__((visibility("default")))

/* Declare and zero an options struct with its size filled in. */
#define NPF_OPTS(TYPE, NAME, ...)                                                                  \
	struct TYPE NAME = ({                                                                      \
		struct TYPE ___##NAME = {.sz = sizeof(struct TYPE), __VA_ARGS__};                  \
		___##NAME;                                                                         \
	})

enum npf_print_level {
	NPF_WARN,
	NPF_INFO,
	NPF_DEBUG,
};

typedef int (*npf_print_fn_t)(enum npf_print_level level, const char *fmt, va_list args);

/* Install a print callback (NULL silences); returns the previous one. */
NPF_API npf_print_fn_t npf_set_print(npf_print_fn_t fn);

struct npf_client;

/* What libnpf does with faults when npfd stays away (npf_client_opts.fallback). */
enum npf_fallback {
	NPF_FALLBACK_DEFAULT = 0, /* $NPF_FALLBACK ("serve" or "sigbus"), else SERVE */
	NPF_FALLBACK_SERVE = 1,	  /* serve them in-process: zeros, or pread of the backing file */
	NPF_FALLBACK_SIGBUS = 2,  /* send SIGBUS to the faulting thread, after a message */
};

/* What a fork() child gets of the regions (npf_client_opts.fork; libnpf(3), FORK). */
enum npf_fork {
	NPF_FORK_DEFAULT = 0, /* $NPF_FORK ("copy" or "dontfork"), else COPY */
	/*
	 * The child's copy of each region is what the region held at the
	 * fork, evicted pages included, and is registered by the child (its
	 * own client). Each fork() pays a copy of what npfd evicted.
	 */
	NPF_FORK_COPY = 1,
	/*
	 * The regions are MADV_DONTFORK: the child has none (a touch is
	 * SIGSEGV), as with rdma-core's ibv_fork_init(). For processes whose
	 * children exec or never touch the regions: their fork() costs
	 * nothing more.
	 */
	NPF_FORK_DONTFORK = 2,
};

struct npf_client_opts {
	size_t sz;
	const char *socket_path; /* NULL: $NPF_SOCKET, else NPF_DEFAULT_SOCKET */
	/*
	 * How long a call waits for npfd's answer before it fails with
	 * -ETIMEDOUT (npfd stopped, or hung). 0: $NPF_TIMEOUT_MS, else 5000;
	 * < 0: for ever.
	 */
	int timeout_ms;
	/*
	 * How long faults may wait for an npfd that died (or stopped serving)
	 * before libnpf handles them itself (fallback). 0: $NPF_FALLBACK_MS,
	 * else 5000; < 0: never (the faulting threads wait for npfd).
	 */
	int fallback_ms;
	__u32 fallback; /* enum npf_fallback */
	__u32 fork;	/* enum npf_fork */
};

/*
 * Connect to npfd. Fails with ECONNREFUSED/ENOENT when npfd is not running.
 * npfd drops every region of a client whose connection closes (including
 * when the process dies). If npfd dies or is restarted, the regions are
 * not lost: libnpf keeps this process's userfaultfd and what it registered,
 * reconnects in the background and hands them to the new npfd ("adopt");
 * faults that arrive meanwhile wait, and after fallback_ms are handled by
 * libnpf itself until npfd is back. See libnpf(3), RESTARTS.
 */
NPF_API struct npf_client *npf_client__connect(const struct npf_client_opts *opts);

/*
 * Unregister all regions (in the kernel first, so that a munmap() that
 * follows never waits for npfd), close the userfaultfd and the connection.
 * The end of the regions' use: pages npfd evicted are not put back (they
 * read zeros); npf_client__unregister() first a region whose memory the
 * process goes on using.
 */
NPF_API void npf_client__close(struct npf_client *client);

/* npfd's reason for the last refused request ("" if none). */
NPF_API const char *npf_client__errmsg(const struct npf_client *client);

struct npf_region_opts {
	size_t sz;
	__u32 backing;	      /* 0 or NPF_BACKING_ANON: first touch reads zeros (the default);
			     * NPF_BACKING_FILE: first touch reads backing_fd */
	int backing_fd;	      /* NPF_BACKING_FILE only: the file (npfd keeps its own reference) */
	__u64 file_offset;    /* NPF_BACKING_FILE only: where the region starts (page aligned) */
	const char *name;     /* shown by npfctl; truncated to NPF_NAME_LEN - 1 */
	int fault_around_kib; /* 0: npfd's fault-around-kib; NPF_FAULT_AROUND_EXACT: the
			       * faulting page only; else a power of two, 4 to 2048 KiB:
			       * a CPU fault also installs its aligned block's cheap pages */
};

#define NPF_FAULT_AROUND_EXACT (-1)

/*
 * Register [addr, addr + len) of this process's memory. The memory must be
 * mapped, private and anonymous, page aligned, and must not be touched yet
 * where the caller wants npfd to fill it. It is not pinned. On the first
 * call the library creates this process's userfaultfd and hands it to npfd.
 * Returns the region id (> 0) or -errno.
 */
NPF_API int npf_client__register(struct npf_client *client, void *addr, size_t len,
				 const struct npf_region_opts *opts);

/*
 * Unregister a region: npfd stops serving it; its pages stay as they are,
 * and pages npfd evicted (a region with a budget) are put back first
 * (npfd does it in steps, serving others between them; this call waits
 * until all are back). -ENOMEM: they do not fit under the process's memory cgroup limit, and
 * the region stays registered and served.
 * With a device attached, it returns once the device acknowledged that no
 * DMA to the pages is in flight; -ETIMEDOUT (unregistered, but the device
 * did not acknowledge within 2 s) or -ESHUTDOWN (npfd stopped first) mean
 * DMA may still reach them.
 */
NPF_API int npf_client__unregister(struct npf_client *client, __u32 region_id);

/*
 * Queries. On success *out is a malloc()ed array of *count items that the
 * caller frees with free(). region_id 0 in npf_client__stats means all.
 */
NPF_API int npf_client__status(struct npf_client *client, struct npf_status *out);
NPF_API int npf_client__region_list(struct npf_client *client, struct npf_region_info **out,
				    size_t *count);
NPF_API int npf_client__stats(struct npf_client *client, __u32 region_id,
			      struct npf_region_stats_full **out, size_t *count);

/*
 * Device memory regions. Attach a device MR's IO page table (for the
 * software NIC: nic_mr_iopt_fd(), see nic/npf_nic.h) to a registered
 * region that contains the MR; npfd then answers the device's page
 * requests for it. Returns the device id (> 0: give it to the device, e.g.
 * nic_mr_set_npf_id()) or -errno. The IO page table must be a memfd sealed
 * with F_SEAL_SHRINK (the software NIC's are). Detaching invalidates every
 * entry and waits until the device acknowledges that no DMA to the pages
 * is in flight (-ETIMEDOUT / -ESHUTDOWN as for unregistering).
 */
NPF_API int npf_client__attach_device(struct npf_client *client, __u32 region_id, int iopt_fd);
NPF_API int npf_client__detach_device(struct npf_client *client, __u32 device_id);
NPF_API int npf_client__device_list(struct npf_client *client, struct npf_device_info **out,
				    size_t *count);

/*
 * Fault policies (policies/NAME.bpf.c, bpf/npf_policy.h). Load the BPF object
 * in obj_fd for region_id (0: the global slot); name NULL keeps the name
 * the object carries. A policy of the same name is replaced atomically.
 * Returns the policy id (> 0) or -errno; a refusal says why (ABI version,
 * program type, the verifier's log) in npf_client__errmsg(). Loading code
 * needs root (or CAP_BPF and CAP_PERFMON); with obj_fd -1 the owner of
 * region_id chooses the loaded policy `name` for it instead.
 */
NPF_API int npf_client__policy_load(struct npf_client *client, int obj_fd, __u32 region_id,
				    const char *name, struct npf_policy_status *out);
NPF_API int npf_client__policy_unload(struct npf_client *client, const char *name);
NPF_API int npf_client__policy_list(struct npf_client *client, struct npf_policy_status **out,
				    size_t *count);
/*
 * The watchdog's view of each policy (state NPF_POLICY_WATCHDOG: disabled,
 * its decisions ran long), in npf_client__policy_list()'s order.
 */
NPF_API int npf_client__policy_health(struct npf_client *client, struct npf_policy_health **out,
				      size_t *count);
/* The kill switch: false gives every fault the built-in decision. */
NPF_API int npf_client__policy_enable(struct npf_client *client, bool enabled);

/*
 * Budgets (overcommit). Set a region's setting: key NPF_SET_BUDGET, value
 * the most bytes of it npfd keeps installed (a multiple of the page size;
 * 0: no budget of its own). Over npfd's budget-high-pct of it, npfd evicts
 * pages down to budget-low-pct: a later touch, by the CPU or a device,
 * reads them back. The region's owner or root may set it; *out (may be
 * NULL) gets the region's budget and eviction counters. Returns 0 or
 * -errno (EOPNOTSUPP: npfd cannot take this process's pages; the reason is
 * in npf_client__errmsg()).
 */
NPF_API int npf_client__region_set(struct npf_client *client, __u32 region_id, __u32 key,
				   __u64 value, struct npf_budget_info *out);
/* Budgets and eviction counters of one region (0: all), as npf_client__stats. */
NPF_API int npf_client__budget_list(struct npf_client *client, __u32 region_id,
				    struct npf_budget_info **out, size_t *count);

/* Percentile (0..100) of a log2(ns) histogram, in ns (bucket upper bound). */
NPF_API __u64 npf_latency_percentile(const struct npf_latency_hist *hist, double pct);

#ifdef __cplusplus
}
#endif

#endif /* NPF_H */
