/* SPDX-License-Identifier: GPL-2.0 */
/*
 * npfd internals (docs/design.md follows a fault through them). The files:
 *
 *   main.c      start-up and shutdown: options, configuration, signals
 *               (SIGHUP reloads), sd_notify, the order things open in
 *   config.c    options and npfd.conf: parse, check, print (config.h)
 *   loop.c      one io_uring event loop: control socket, client sockets,
 *               every userfaultfd, the BPF ring buffer, child pidfds
 *   control.c   the control socket: clients connect, one reply per request
 *   region.c    regions and the address spaces (userfaultfds) they live
 *               in: validates a registration, registers the range with the
 *               client's userfaultfd, follows fork
 *   collect.c   BPF collectors: load, pin maps, fault filter, ring buffer,
 *               the NIC's page-request uprobe, the policy prog arrays
 *   resolve.c   drain userfaultfd messages and mm events, batch, read file
 *               pages with io_uring into staging buffers, install, wake
 *   device.c    device memory regions (the software NIC's IO page tables):
 *               page requests, responses, invalidations
 *   policy.c    fault policies loaded at run time; wsreplay's records
 *   log.c       logging with sd-daemon priorities (log.h)
 *   util.c      small helpers more than one file needs
 *   list.h      the intrusive doubly linked list
 */
#ifndef NPFD_H
#define NPFD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "npf_abi.h"
#include "list.h"
#include "log.h"

struct npfd_client;
struct npfd_mm;
struct nic_probe;

struct npfd_region {
	struct list_head node; /* in npfd_mm.regions */
	struct npfd_mm *mm;
	__u32 id;
	__u32 slot; /* index into the stats and latency maps */
	__u64 start;
	__u64 length;
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
	__u64 last_batch;    /* resolver flush that last counted this region */
	__u8 *installed;     /* bitmap: pages npfd installed (prefetch skips them) */
	int ws_fd;	     /* working-set record being written (wsreplay), or -1 */
	bool ws_replayed;    /* this run replayed a record: append to it */
	bool ws_failed;	     /* recording failed once: do not retry every fault */
	__u64 faults_failed; /* faults npfd could not serve (poisoned), for the log */
};

/* One userfaultfd, i.e. one address space npfd serves. */
struct npfd_mm {
	struct list_head node; /* in npfd.mms */
	int uffd;
	ino_t uffd_ino;
	pid_t tgid;		   /* 0: forked child not yet seen faulting */
	uid_t uid;		   /* of the client that registered it: per-uid limits */
	int pidfd;		   /* forked children: tells npfd when the child exits */
	struct npfd_client *owner; /* control connection that answers for it, or NULL */
	struct list_head regions;
	__u32 nr_regions;
	bool forked;
	bool dead;     /* torn down; freed at the end of the loop iteration */
	bool adopting; /* more regions are being adopted: faults outside them wait */
	int src;       /* event-loop source id of uffd */
	int pid_src;
	struct nic_probe *nic_probe; /* the uprobe on its executable's npf_nic_fault_report() */
	int pagemap_fd;		     /* /proc/PID/pagemap, opened for device requests */
};

/*
 * A control request whose answer waits for devices to acknowledge their
 * invalidation (unregister, detach; seed 000 Fig. 2): npfd posts the
 * invalidations, goes on serving, and answers when the last device has
 * acknowledged or its deadline has passed (device.c). Nothing waits inside
 * a handler.
 */
struct npfd_wait {
	struct npfd_client *client; /* to answer; NULL once it went */
	struct npf_msg_hdr req;	    /* the request, for the reply's type and seq */
	unsigned int pending;	    /* devices whose acknowledgement is awaited */
	bool deferred;		    /* the handler returned: wait_done() answers */
	int status;		    /* 0, or the first failure (-errno) */
	char err[NPF_ERRMSG_LEN];   /* its reason */
};

struct npfd_client {
	struct list_head node; /* in npfd.clients */
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
};

struct npfd_options {
	const char *socket_path;
	const char *bpffs;
	const char *config;
	bool foreground;
	unsigned int staging_pages;
	unsigned int poll_us;
};

struct npfd {
	struct npfd_options opt;
	struct list_head clients;
	struct list_head mms;
	__u32 nr_clients;
	__u32 nr_regions;
	__u32 next_region_id;
	__u32 next_device_id;
	__u64 start_ns;
	__u64 faults_resolved;
	__u64 batches;
	__u64 bad_messages;
	int listen_fd;
	int listen_src;
	volatile int stop;
};

extern struct npfd npfd;

__u64 now_ns(void);
/* main.c: region and device ids, never reused across restarts (see ids_open()) */
__u32 id_alloc(__u32 *counter);
void id_taken(__u32 *counter, __u32 id);
/* util.c */
int mkdir_p(const char *path, mode_t mode);
int refuse(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* loop.c: readiness sources. A handler drains its fd until EAGAIN. */
typedef void (*source_fn)(void *arg);
int loop_init(void);
int source_add(int fd, unsigned int poll_mask, source_fn fn, void *arg);
void source_del(int id);
int loop_run(void);

/* collect.c */
int collect_open(const char *bpffs);
void collect_close(void);
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
int collect_nic_uprobe(struct npfd_mm *mm, char *err, size_t errlen);
void collect_nic_uprobe_put(struct npfd_mm *mm);

/* region.c */
struct npfd_mm *mm_new(int uffd, ino_t ino, pid_t tgid, struct npfd_client *owner);
void mm_destroy(struct npfd_mm *mm, bool unregister_ranges);
struct npfd_region *mm_find_region(struct npfd_mm *mm, __u64 addr);
struct npfd_region *region_find_id(__u32 id);
int region_register(struct npfd_client *c, const struct npf_region_req *req, int *fds, int nfds,
		    __u32 adopt_id, struct npf_region_info *out, char *err, size_t errlen);
int region_unregister(struct npfd_client *c, __u32 id, struct npfd_wait *w, char *err,
		      size_t errlen);
void region_remove(struct npfd_region *r, bool unregister_range);
void region_info(const struct npfd_region *r, struct npf_region_info *out);
void mm_forked(struct npfd_mm *parent, int child_uffd);
void mm_learn_tgid(struct npfd_mm *mm, pid_t tid);

/* resolve.c */
int resolve_init(unsigned int staging_pages);
void resolve_exit(void);
void resolve_uffd_ready(void *arg);
void resolve_flush(void);
void resolve_forget_mm(struct npfd_mm *mm);
int resolve_queue(struct npfd_mm *mm, __u64 addr, __u64 raised_ns, bool write);
bool resolve_pending(void);
void resolve_set_poll(unsigned int us);
bool resolve_polling(void);
void resolve_poll_hot(void);
bool resolve_poll_quiet(void);
void resolve_note_device(void);
bool region_page_installed(const struct npfd_region *r, __u64 page);
void resolve_set_fault_around(unsigned int kib);
void resolve_region_gone(struct npfd_region *r);

/* device.c: device memory regions (the software NIC's IO page tables) */
int device_attach(struct npfd_client *c, const struct npf_device_attach_req *req, __u32 adopt_id,
		  int fd, struct npf_device_info *out, char *err, size_t errlen);
int device_detach(struct npfd_client *c, __u32 id, struct npfd_wait *w, char *err, size_t errlen);
void device_region_gone(struct npfd_region *r, bool process_alive, struct npfd_wait *w);
void device_retire_stop(void);
void device_mm_gone(struct npfd_mm *mm);
void device_range_removed(struct npfd_region *r, __u64 start, __u64 end);
void device_pages_installed(struct npfd_region *r, __u64 start, __u64 npages);
void device_record(const struct npf_fault_record *rec);
void device_await_expire(void);
bool device_awaiting(void);
void device_flush(void);
void device_list(void (*emit)(const struct npf_device_info *, void *), void *arg);
bool process_alive(pid_t pid);

/* policy.c: fault policies loaded at run time */
int policy_load(struct npfd_client *c, const struct npf_policy_load_req *req, int fd,
		struct npf_policy_status *out, char *err, size_t errlen);
int policy_unload(struct npfd_client *c, const char *name, char *err, size_t errlen);
void policy_region_gone(struct npfd_region *r);
void policy_list(void (*emit)(const struct npf_policy_status *, void *), void *arg);
void policy_health(void (*emit)(const struct npf_policy_health *, void *), void *arg);
bool policy_loaded(const char *name);
void policy_set_ws_dir(const char *dir);
void policy_region_registered(struct npfd_region *r);
void ws_record(struct npfd_region *r, __u64 page);
bool policy_decide_cpu(struct npfd_region *r, __u32 tid, __u64 addr, bool write, __u64 raised,
		       const struct npf_fault_record *traced, struct npf_fault_record *out);
struct npf_policy_decision policy_clamp(const struct npf_fault_record *rec,
					const struct npfd_region *r);

/* control.c */
/*
 * Per-uid limits: what one user of the socket may make npfd hold, so that
 * one user cannot lock the others out (root is not limited). Descriptors
 * are the connection sockets, userfaultfds, backing files and pidfds npfd
 * holds for the user.
 */
#define NPFD_UID_MAX_CONNECTIONS 64
#define NPFD_UID_MAX_REGIONS 256
#define NPFD_UID_MAX_FDS 288
int uid_limit_check(uid_t uid, unsigned int more_regions, unsigned int more_fds, char *err,
		    size_t errlen);
int control_open(const char *path);
void control_close(void);
void client_drop(struct npfd_client *c);
void wait_fail(struct npfd_wait *w, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void wait_done(struct npfd_wait *w);
void control_flush(void);

#endif
