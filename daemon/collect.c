// SPDX-License-Identifier: GPL-2.0
/*
 * The BPF side of npfd: load the collectors, pin their maps under the bpffs
 * directory, keep the in-kernel fault filter (npf_procs) in step with the
 * region table, give regions their stats slots, and read fault records.
 *
 * Stats and latency maps are BPF_F_MMAPABLE arrays: npfd writes its counters
 * with plain stores into the mapping (it is their only writer), the BPF
 * programs add theirs atomically, and `bpftool map dump pinned` shows both.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <dirent.h>
#include <stdlib.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "collect.h"
#include "log.h"
#include "loop.h"
#include "mmcall.h"
#include "objects.h"
#include "util.h"
#include "npf_collect.skel.h"

#define BPF_FS_MAGIC 0xcafe4a11
#define TRACEFS_MAGIC 0x74726163

static struct npf_collect_bpf *skel;
static struct ring_buffer *rb;
static struct npf_region_stats *stats_map;
static struct npf_latency_hist *latency_map;
static struct npf_budget_info *budget_map;
static struct npf_global_stats *global_map;
static struct npf_ring_ctl *ring_ctl;
/* the ring buffer's positions, mapped read-only: is a record waiting? */
static const volatile unsigned long *ring_consumer_pos, *ring_producer_pos;
static char pin_dir[PATH_MAX];
static __u8 slot_used[NPF_MAX_REGIONS];

/*
 * The latest CPU fault record per thread: a thread blocked in a fault has
 * exactly one outstanding, so the resolver can learn when its fault was
 * raised. Direct-mapped by tid; a collision costs one latency sample.
 */
#define TS_TABLE 8192
static struct npf_fault_record last_fault[TS_TABLE];
/* The decision of the last policy npfd ran for a CPU fault (collect_policy_run_cpu()). */
static struct npf_fault_record cpu_decided;

static struct collect_hooks hooks;

void collect_set_hooks(const struct collect_hooks *h)
{
	hooks = *h;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[1024];
	size_t n;

	if (level == LIBBPF_DEBUG && log_level < LOG_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	if (n && line[n - 1] == '\n')
		line[n - 1] = '\0';
	log_msg(level == LIBBPF_WARN ? LOG_WARN : LOG_DEBUG, "%s", line);
	return 0;
}

static bool fs_is(const char *path, long magic)
{
	struct statfs st;

	return statfs(path, &st) == 0 && st.f_type == magic;
}

/* bpffs and tracefs are mounted by systemd on a normal boot; not always here. */
static int ensure_filesystems(const char *bpffs)
{
	if (!fs_is("/sys/fs/bpf", BPF_FS_MAGIC) &&
	    mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700")) {
		pr_err("cannot mount bpffs on /sys/fs/bpf: %s", strerror(errno));
		return -errno;
	}
	if (mkdir_p(bpffs, 0700)) {
		pr_err("cannot create pin directory %s: %s", bpffs, strerror(errno));
		return -errno;
	}
	if (!fs_is(bpffs, BPF_FS_MAGIC)) {
		pr_err("%s is not on a bpf filesystem: maps cannot be pinned there (use --bpffs under /sys/fs/bpf)",
		       bpffs);
		return -EINVAL;
	}
	if (access("/sys/kernel/tracing/events", F_OK) &&
	    access("/sys/kernel/debug/tracing/events", F_OK) &&
	    mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL)) {
		pr_err("cannot mount tracefs on /sys/kernel/tracing (needed to attach tracepoints): %s",
		       strerror(errno));
		return -errno;
	}
	return 0;
}

static void *map_mmap(struct bpf_map *map)
{
	size_t sz = (size_t)bpf_map__value_size(map) * bpf_map__max_entries(map);
	void *p;

	sz = (sz + 4095) & ~4095UL;
	p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(map), 0);
	if (p == MAP_FAILED) {
		pr_err("cannot mmap BPF map %s: %s", bpf_map__name(map), strerror(errno));
		return NULL;
	}
	return p;
}

static int handle_record(void *ctx, void *data, size_t size)
{
	const struct npf_fault_record *rec = data;

	if (size < sizeof(*rec) || rec->version != NPF_RECORD_VERSION)
		return 0;
	if (rec->source == NPF_SRC_DEVICE && rec->device_id && hooks.device_record)
		hooks.device_record(rec);
	if (rec->source == NPF_SRC_CPU && rec->decision.policy_id)
		cpu_decided = *rec; /* collect_policy_run_cpu() waits for it */
	else if (rec->source == NPF_SRC_CPU && rec->tid)
		last_fault[rec->tid % TS_TABLE] = *rec;
	pr_debug("fault record: src=%u tgid=%u tid=%u region=%u addr=0x%llx access=%#x",
		 rec->source, rec->tgid, rec->tid, rec->region_id, (unsigned long long)rec->addr,
		 rec->access);
	return 0;
}

static bool cpu_traced(void);

/*
 * The CPU fault record (raise time, policy decision) of thread tid at page,
 * taken out of the table. The tracepoint fires before the fault reaches the
 * userfaultfd, so the record is in the ring by the time npfd reads the
 * message; if it was submitted after the last drain, drain again.
 */
bool collect_fault_take(__u32 tid, __u64 page, struct npf_fault_record *out)
{
	struct npf_fault_record *f = &last_fault[tid % TS_TABLE];
	int tries;

	if (!cpu_traced())
		return false; /* no record comes: npfd's read time stands for the raise */
	for (tries = 0; tries < 2; tries++) {
		if (f->tid == tid && (f->addr & ~(NPF_PAGE_SIZE - 1)) == page) {
			*out = *f;
			f->tid = 0;
			return true;
		}
		collect_drain();
	}
	return false;
}

static void ringbuf_ready(void *arg)
{
	collect_drain();
}

void collect_drain(void)
{
	if (rb)
		ring_buffer__consume(rb);
	if (hooks.drained)
		hooks.drained();
}

/*
 * npfd polls the ring (on): device records stop waking it. Turning it off,
 * a record may have been submitted without a wakeup just before: returns
 * true if a record waits (reserved, perhaps not yet committed), and npfd
 * must not sleep. With the barrier in npf_ring_wakeup() no record falls
 * between the two (npf_shared_maps.h).
 */
bool collect_ring_polling(bool on)
{
	if (!ring_ctl)
		return false;
	if (on) {
		if (!ring_ctl->npfd_polling)
			__atomic_store_n(&ring_ctl->npfd_polling, 1, __ATOMIC_RELAXED);
		return false;
	}
	if (ring_ctl->npfd_polling)
		__atomic_store_n(&ring_ctl->npfd_polling, 0, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return *ring_producer_pos != *ring_consumer_pos;
}

/* The ring's consumer and producer pages (the kernel's layout of a BPF ring buffer). */
static int map_ring_positions(int fd)
{
	long pg = sysconf(_SC_PAGESIZE);
	void *c = mmap(NULL, (size_t)pg, PROT_READ, MAP_SHARED, fd, 0);
	void *p = mmap(NULL, (size_t)pg, PROT_READ, MAP_SHARED, fd, pg);

	if (c == MAP_FAILED || p == MAP_FAILED) {
		pr_err("cannot map the fault ring buffer's positions: %s", strerror(errno));
		return -errno;
	}
	ring_consumer_pos = c;
	ring_producer_pos = p;
	return 0;
}

#define NPINNED 11
static struct bpf_map *pinned_maps[NPINNED];

/* Does process pid hold a descriptor of BPF map map_id? (/proc/PID/fdinfo says) */
static bool holds_map(pid_t pid, __u32 map_id)
{
	char path[64], line[128];
	struct dirent *e;
	bool found = false;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo", pid);
	dir = opendir(path);
	if (!dir)
		return false;
	while (!found && (e = readdir(dir))) {
		char file[sizeof(path) + 300];
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
		f = fopen(file, "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned int id;

			if (sscanf(line, "map_id: %u", &id) == 1) {
				found = id == map_id;
				break;
			}
		}
		fclose(f);
	}
	closedir(dir);
	return found;
}

/*
 * The npfd whose maps are pinned in pin_dir, if it still runs: the pid in
 * the pinned npf_info, alive and holding that very map (a pid reused by
 * another process, or by another npfd, holds no descriptor of it). 0 when
 * the pins are stale or absent.
 */
static pid_t live_owner(void)
{
	char path[PATH_MAX + 64];
	struct bpf_map_info mi = {};
	__u32 len = sizeof(mi), zero = 0;
	struct npf_info info;
	pid_t pid = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, NPF_MAP_INFO);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return 0;
	if (!bpf_obj_get_info_by_fd(fd, &mi, &len) && mi.value_size >= sizeof(info) &&
	    !bpf_map_lookup_elem(fd, &zero, &info) && info.magic == NPF_INFO_MAGIC &&
	    info.npfd_pid && (pid_t)info.npfd_pid != getpid() &&
	    process_alive((pid_t)info.npfd_pid) && holds_map((pid_t)info.npfd_pid, mi.id))
		pid = (pid_t)info.npfd_pid;
	close(fd);
	return pid;
}

static int pin_dir_fd = -1; /* held with flock() while npfd runs */

static int pin_maps(void)
{
	pid_t owner;
	int i, err;

	/*
	 * Two npfds starting together: the lock decides. One that died
	 * released it; an npfd that predates the lock is found by live_owner().
	 */
	pin_dir_fd = open(pin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pin_dir_fd >= 0 && flock(pin_dir_fd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK) {
		owner = live_owner();
		pr_err("pin directory %s is in use by another npfd%s%.0d%s: refusing to replace its maps (stop it, or give this npfd another --bpffs)",
		       pin_dir, owner ? " (pid " : "", owner, owner ? ")" : "");
		close(pin_dir_fd);
		pin_dir_fd = -1;
		return -EBUSY;
	}
	owner = live_owner();
	if (owner) {
		pr_err("pin directory %s belongs to a running npfd (pid %d): refusing to replace its maps (stop it, or give this npfd another --bpffs)",
		       pin_dir, owner);
		return -EBUSY;
	}

	pinned_maps[0] = skel->maps.npf_info;
	pinned_maps[1] = skel->maps.npf_procs;
	pinned_maps[2] = skel->maps.npf_region_stats;
	pinned_maps[3] = skel->maps.npf_latency;
	pinned_maps[4] = skel->maps.npf_events;
	pinned_maps[5] = skel->maps.npf_global;
	pinned_maps[6] = skel->maps.npf_policy_cpu;
	pinned_maps[7] = skel->maps.npf_policy_kp;
	pinned_maps[8] = skel->maps.npf_policy_conf;
	pinned_maps[9] = skel->maps.npf_policy_scratch;
	pinned_maps[10] = skel->maps.npf_budget;
	for (i = 0; i < NPINNED; i++) {
		char path[PATH_MAX + 64];

		snprintf(path, sizeof(path), "%s/%s", pin_dir, bpf_map__name(pinned_maps[i]));
		/* A map left by an npfd that died is stale: its npfd is gone. */
		if (unlink(path) == 0)
			pr_info("removed stale pinned map %s", path);
		err = bpf_map__pin(pinned_maps[i], path);
		if (err) {
			pr_err("cannot pin map %s at %s: %s", bpf_map__name(pinned_maps[i]), path,
			       strerror(-err));
			return err;
		}
	}
	return 0;
}

static void unpin_maps(void)
{
	int i;

	for (i = 0; i < NPINNED; i++)
		if (pinned_maps[i])
			bpf_map__unpin(pinned_maps[i], NULL);
	rmdir(pin_dir); /* only if empty: other pins there are not ours */
	if (pin_dir_fd >= 0)
		close(pin_dir_fd);
	pin_dir_fd = -1;
}

/* The initial pid namespace's inode (PROC_PID_INIT_INO, include/linux/proc_ns.h). */
#define PID_NS_INIT_INO 0xEFFFFFFCU

/*
 * npfd names processes by the pids of its own pid namespace (SO_PEERCRED,
 * /proc); in a namespace of its own (a container, a systemd in a namespace)
 * those are not the kernel's initial-namespace pids the collectors see, and
 * a device's page requests would find no process: tell the collectors
 * which namespace to number them in (bpf/npf_collect.bpf.c, current_ids()).
 */
static void set_pidns(struct npf_collect_bpf *s)
{
	struct stat st;

	if (stat("/proc/thread-self/ns/pid", &st)) {
		pr_warn("cannot read npfd's pid namespace (/proc/self/ns/pid: %s): assuming the machine's; in another one devices' page requests would go unanswered",
			strerror(errno));
		return;
	}
	if (st.st_ino == PID_NS_INIT_INO)
		return;
	s->rodata->npf_pidns_ino = (__u32)st.st_ino;
	pr_info("npfd runs in pid namespace %llu: the collectors name processes by its pids",
		(unsigned long long)st.st_ino);
}

int collect_open(const char *bpffs)
{
	struct npf_info info = {
		.magic = NPF_INFO_MAGIC,
		.maps_version = NPF_MAPS_VERSION,
		.record_version = NPF_RECORD_VERSION,
		.npfd_pid = (__u32)getpid(),
	};
	__u32 zero = 0;
	int err;

	libbpf_set_print(libbpf_print);
	snprintf(pin_dir, sizeof(pin_dir), "%s", bpffs);
	err = ensure_filesystems(bpffs);
	if (err)
		return err;

	skel = npf_collect_bpf__open();
	if (!skel) {
		pr_err("cannot open the BPF collectors: %s", strerror(errno));
		return -errno;
	}
	set_pidns(skel);
	/* Not attached: npfd runs it (bpf/npf_collect.bpf.c says why it is in SEC("tracepoint")). */
	bpf_program__set_type(skel->progs.npf_cpu_policy, BPF_PROG_TYPE_RAW_TRACEPOINT);
	bpf_program__set_autoattach(skel->progs.npf_cpu_policy, false);
	err = npf_collect_bpf__load(skel);
	if (err) {
		pr_err("cannot load the BPF collectors: %s (npfd needs CAP_BPF and CAP_PERFMON, or root)",
		       strerror(-err));
		return err;
	}
	err = pin_maps();
	if (err)
		return err;
	bpf_map_update_elem(bpf_map__fd(skel->maps.npf_info), &zero, &info, BPF_ANY);
	collect_policy_enable(true);

	/* The CPU fault collector is attached when something needs it: cpu_trace_update(). */
	skel->links.npf_iommu_fault = bpf_program__attach(skel->progs.npf_iommu_fault);
	if (!skel->links.npf_iommu_fault)
		pr_warn("cannot attach to tracepoint iommu:io_page_fault (%s): IOMMU faults will not be counted",
			strerror(errno));

	stats_map = map_mmap(skel->maps.npf_region_stats);
	latency_map = map_mmap(skel->maps.npf_latency);
	budget_map = map_mmap(skel->maps.npf_budget);
	global_map = map_mmap(skel->maps.npf_global);
	ring_ctl = map_mmap(skel->maps.npf_ring_ctl);
	if (!stats_map || !latency_map || !budget_map || !global_map || !ring_ctl)
		return -ENOMEM;
	err = map_ring_positions(bpf_map__fd(skel->maps.npf_events));
	if (err)
		return err;

	rb = ring_buffer__new(bpf_map__fd(skel->maps.npf_events), handle_record, NULL, NULL);
	if (!rb) {
		err = -errno;
		pr_err("cannot open the fault ring buffer: %s", strerror(-err));
		return err;
	}
	err = source_add(ring_buffer__epoll_fd(rb), POLLIN, ringbuf_ready, NULL);
	if (err < 0)
		return err;
	pr_info("BPF collectors attached; maps pinned under %s", pin_dir);
	return 0;
}

/*
 * Attaches that missed their deadline, and those of them that have
 * returned since: while one waits, the next would wait the same (for the
 * same lock, or for the kernel's dup_mmap_sem it holds), so it is refused
 * at once. The client that asked is not to blame (any user that maps the
 * file holds the attach), so it is not given up either: mmcall_run() is
 * asked for nobody (tgid 0).
 */
static unsigned int attaches_late;
static _Atomic unsigned int attaches_late_returned;

static bool attach_waiting(void)
{
	return attaches_late != atomic_load(&attaches_late_returned);
}

void collect_close(void)
{
	ring_buffer__free(rb);
	rb = NULL;
	unpin_maps();
	/*
	 * An attach that missed its deadline may still be in libbpf, on its
	 * abandoned thread, with the skeleton's program: the skeleton is left
	 * to the exit then (its links and maps go with npfd's descriptors).
	 */
	if (attach_waiting()) {
		pr_warn("a late uprobe attach is still waiting: the BPF objects are left to npfd's exit");
		return;
	}
	npf_collect_bpf__destroy(skel);
	skel = NULL;
}

/*
 * Device page requests come from the software NIC's npf_nic_fault_report(),
 * linked into the application's executable or its verbs provider (a
 * libnpf* shared library). One uprobe per file,
 * shared by every served process that runs it: on this kernel each uprobe
 * link on a file runs for every process that hits the site, whatever pid
 * it was opened for, so one link per process made each report arrive once
 * per attached process. The BPF program keeps only reports of processes
 * npfd serves (npf_procs).
 */
struct nic_probe {
	struct list_head node;
	dev_t dev;
	ino_t ino;
	struct bpf_link *link;
	unsigned int refs;
};

static struct list_head nic_probes = LIST_HEAD_INIT(nic_probes);

/*
 * The files that may hold npf_nic_fault_report: the executable (a program
 * linked with libnpfnic.a), then any executable mapping of a shared library
 * named libnpf* (the libibverbs provider, verbs/, loaded with dlopen), by
 * its /proc/PID/map_files link, which names the very file mapped whatever
 * mount namespace the process runs in. Its maps are read, and its
 * map_files opened, on mmcall.c's thread: both take its mmap_lock.
 */
static int nic_probe_candidates(pid_t tgid, char (*path)[96], int max)
{
	char line[512];
	int n = 0;
	FILE *f;

	snprintf(path[n++], sizeof(path[0]), "/proc/%d/exe", tgid);
	snprintf(line, sizeof(line), "/proc/%d/maps", tgid);
	f = mmcall_fopen(tgid, line);
	if (!f)
		return n;
	while (n < max && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perm[8], *file = strchr(line, '/'), *base;

		if (!file || sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) != 3 || perm[2] != 'x')
			continue;
		file[strcspn(file, "\n")] = 0;
		base = strrchr(file, '/') + 1;
		if (strncmp(base, "libnpf", 6))
			continue;
		snprintf(path[n++], sizeof(path[0]), "/proc/%d/map_files/%lx-%lx", tgid, lo, hi);
	}
	fclose(f);
	return n;
}

/*
 * The uprobe's attach, made on mmcall.c's thread (mmcall_run()): libbpf
 * reads the file's ELF symbols (a file on the client's FUSE mount is
 * read by its server, when it likes), and the kernel's uprobe_register()
 * takes the mmap_lock of every process that maps the file -- any user's
 * that holds its own lock (tests/adv_stuck_mm, phase PROBE). fd is the
 * job's own descriptor of the file.
 */
struct nic_attach {
	struct bpf_program *prog;
	struct bpf_link *link;
};

static long nic_attach(int fd, void *arg)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = "npf_nic_fault_report");
	struct nic_attach *a = arg;
	char path[64];

	/* thread-self: once the loop has moved (mmcall_watch()), npfd's first thread is gone, and /proc/self/fd with it */
	snprintf(path, sizeof(path), "/proc/thread-self/fd/%d", fd);
	a->link = bpf_program__attach_uprobe_opts(a->prog, -1, path, 0, &opts);
	return a->link ? 0 : -1;
}

/* Late: nobody has the link. Its destroy waits for the same locks, on the same abandoned thread. */
static void nic_attach_late(void *arg, long ret)
{
	struct nic_attach *a = arg;

	if (!ret)
		bpf_link__destroy(a->link);
	atomic_fetch_add(&attaches_late_returned, 1);
}

static void *nic_detach(void *link)
{
	bpf_link__destroy(link);
	return NULL;
}

/*
 * The uprobe's end: uprobe_unregister() takes the mmap_lock of every
 * process that maps the file, as the attach did, so it is made on a
 * thread of its own, which nobody waits for (inline if none can start).
 */
static void nic_link_destroy(struct bpf_link *link)
{
	if (thread_start_detached(nic_detach, link, 0))
		bpf_link__destroy(link);
}

/* fd's device and inode in st (nothing else), from what the kernel has cached: 0 or -1 (errno). */
static int file_id(int fd, struct stat *st)
{
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_INO, &sx))
		return -1;
	st->st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	st->st_ino = sx.stx_ino;
	return 0;
}

int collect_nic_uprobe(struct npfd_mm *mm, char *err, size_t errlen)
{
	struct nic_attach a = {.prog = skel->progs.npf_nic_fault};
	char cand[8][96], exe[96];
	struct nic_probe *p;
	struct stat st;
	int i, n, e = ENOENT, fd = -1;

	if (mm->nic_probe)
		return 0;
	n = nic_probe_candidates(mm->tgid, cand, 8);
	memcpy(exe, cand[0], sizeof(exe));
	for (i = 0; i < n; i++) {
		if (fd >= 0)
			mmcall_close(mm->tgid, fd);
		/*
		 * Each by a descriptor opened on mmcall.c's thread: the
		 * probe's path lookups then never meet the process's locks
		 * (its exe link is followed under its exec_update_lock, a
		 * library's map_files link under its mmap_lock).
		 */
		fd = mmcall_open(mm->tgid, cand[i], O_RDONLY);
		/* not fstat(): on FUSE its GETATTR is the server's to answer; DONT_SYNC asks nobody */
		if (fd >= 0 && file_id(fd, &st)) {
			e = errno;
			mmcall_close(mm->tgid, fd);
			fd = -1;
			errno = e;
		}
		if (fd < 0 && !i)
			return refuse(err, errlen, errno,
				      "cannot find the executable of pid %d: %s", mm->tgid,
				      strerror(errno));
		if (fd < 0)
			continue;
		list_for_each_entry(p, &nic_probes, node)
			if (p->dev == st.st_dev && p->ino == st.st_ino)
				goto found;
		p = calloc(1, sizeof(*p));
		if (!p) {
			if (fd >= 0)
				mmcall_close(mm->tgid, fd);
			return refuse(err, errlen, ENOMEM, "out of memory");
		}
		if (attach_waiting()) {
			free(p);
			mmcall_close(mm->tgid, fd);
			return refuse(
				err, errlen, EAGAIN,
				"an earlier attach of the page request uprobe still waits for the mmap_lock of a process that maps its file: try again later");
		}
		if (!mmcall_run(0, fd, nic_attach, nic_attach_late, &a, sizeof(a))) {
			p->link = a.link;
			break;
		}
		e = errno;
		free(p);
		p = NULL;
		if (e == ETIMEDOUT) {
			attaches_late++;
			break; /* the next file's attach would wait the same */
		}
	}
	if (!p && fd >= 0)
		mmcall_close(mm->tgid, fd);
	if (!p && e == ETIMEDOUT)
		return refuse(
			err, errlen, e,
			"the page request uprobe's attach to %s or a libnpf* library it maps did not finish within mm-call-timeout-ms: the kernel waits for the mmap_lock of every process that maps the file, and one holds it",
			exe);
	if (!p)
		return refuse(
			err, errlen, e,
			"cannot attach the page request uprobe to npf_nic_fault_report in %s or a libnpf* library it maps: %s (is the software NIC linked into the program?)",
			exe, strerror(e));
	p->dev = st.st_dev;
	p->ino = st.st_ino;
	list_add_tail(&p->node, &nic_probes);
found:
	if (fd >= 0)
		mmcall_close(mm->tgid, fd);
	p->refs++;
	mm->nic_probe = p;
	return 0;
}

void collect_nic_uprobe_put(struct npfd_mm *mm)
{
	struct nic_probe *p = mm->nic_probe;

	if (!p)
		return;
	mm->nic_probe = NULL;
	if (--p->refs)
		return;
	nic_link_destroy(p->link);
	list_del_init(&p->node);
	free(p);
}

/*
 * The collectors' maps a policy object shares (bpf/npf_policy.h), by name;
 * cpu: for the copy npf_cpu_policy calls, which has a scratch of its own.
 */
int collect_shared_map_fd(const char *name, bool cpu)
{
	if (!strcmp(name, NPF_MAP_POLICY_SCRATCH))
		return bpf_map__fd(cpu ? skel->maps.npf_policy_scratch_cpu :
					 skel->maps.npf_policy_scratch);
	if (!strcmp(name, NPF_MAP_EVENTS))
		return bpf_map__fd(skel->maps.npf_events);
	if (!strcmp(name, NPF_MAP_RING_CTL))
		return bpf_map__fd(skel->maps.npf_ring_ctl);
	return -1;
}

static __u8 policy_slot_used[NPF_MAX_REGIONS + 1];
static __u32 policy_slots_used;
static bool policies_on;
static bool cpu_trace_always;

/*
 * The CPU fault collector (exceptions:page_fault_user) runs on every page
 * fault of every process on the machine, and what that costs is the
 * tracepoint's and the program dispatch's, whatever the program does:
 * ~50-80 ns a fault here, 5% of a 1 us fault (bench/README.md,
 * observe_overhead). userfaultfd already brings npfd every CPU fault of a
 * registered region, and npfd runs their policies itself
 * (collect_policy_run_cpu()); the tracepoint adds only observation -- the
 * BPF count and the trap-time stamp -- so it is attached with
 * --trace-cpu-faults only.
 */
static void cpu_trace_update(void)
{
	bool want = cpu_trace_always;

	if (want == !!skel->links.npf_cpu_fault)
		return;
	if (!want) {
		bpf_link__destroy(skel->links.npf_cpu_fault);
		skel->links.npf_cpu_fault = NULL;
		pr_info("CPU fault tracepoint detached (--trace-cpu-faults off)");
		return;
	}
	skel->links.npf_cpu_fault = bpf_program__attach(skel->progs.npf_cpu_fault);
	if (!skel->links.npf_cpu_fault)
		pr_err("cannot attach to tracepoint exceptions:page_fault_user: %s (policies will not see CPU faults)",
		       strerror(errno));
	else
		pr_info("CPU fault tracepoint attached (--trace-cpu-faults)");
}

void collect_cpu_trace_always(bool always)
{
	cpu_trace_always = always;
	cpu_trace_update();
}

/* Does BPF see CPU faults right now (is there a record to wait for)? */
static bool cpu_traced(void)
{
	return skel && skel->links.npf_cpu_fault;
}

static void policy_conf_write(void)
{
	struct npf_policy_conf conf = {.enabled = policies_on, .installed = policy_slots_used};
	__u32 zero = 0;

	bpf_map_update_elem(bpf_map__fd(skel->maps.npf_policy_conf), &zero, &conf, BPF_ANY);
}

/* Point slot at the two copies of a policy (-1, -1: empty the slot). */
int collect_policy_install(__u32 slot, int cpu_fd, int kp_fd)
{
	int cpu = bpf_map__fd(skel->maps.npf_policy_cpu),
	    kp = bpf_map__fd(skel->maps.npf_policy_kp);
	bool used = cpu_fd >= 0;

	if (slot > NPF_MAX_REGIONS)
		return -EINVAL;
	if (!used) {
		bpf_map_delete_elem(cpu, &slot);
		bpf_map_delete_elem(kp, &slot);
	} else if (bpf_map_update_elem(cpu, &slot, &cpu_fd, BPF_ANY) ||
		   bpf_map_update_elem(kp, &slot, &kp_fd, BPF_ANY)) {
		return -errno;
	}
	if (policy_slot_used[slot] != used) {
		policy_slot_used[slot] = used;
		policy_slots_used += used ? 1 : -1;
		policy_conf_write();
	}
	return 0;
}

/*
 * Run the policy of a CPU fault (args, filled by policy_decide_cpu()) with
 * npf_cpu_policy and BPF_PROG_TEST_RUN, on npfd's own CPU time: the
 * policy's record is in the ring buffer when the run returns. Returns true
 * with the policy's record in *out, false when no policy decided (none in
 * the fault's slot or the global one, the kill switch, or a policy that
 * did not submit): the built-in decision applies.
 */
bool collect_policy_run_cpu(const struct npf_cpu_policy_args *args, struct npf_fault_record *out)
{
	LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = args, .ctx_size_in = sizeof(*args));
	__u32 slot = (__u32)args->region_id_slot;
	int err;

	/* Nothing in the region's slot or the global one: spare the system call. */
	if (!policies_on || slot >= NPF_MAX_REGIONS ||
	    (!policy_slot_used[0] && !policy_slot_used[1 + slot]))
		return false;
	cpu_decided.decision.policy_id = 0;
	err = bpf_prog_test_run_opts(bpf_program__fd(skel->progs.npf_cpu_policy), &run);
	if (err) {
		static bool said;

		if (!said)
			pr_warn("running CPU fault policies failed: %s (built-in decisions instead)",
				strerror(-err));
		said = true;
		return false;
	}
	collect_drain();
	if (!cpu_decided.decision.policy_id || cpu_decided.addr != args->addr ||
	    cpu_decided.ts_ns != args->ts_ns)
		return false;
	*out = cpu_decided;
	return true;
}

void collect_policy_enable(bool on)
{
	policies_on = on;
	policy_conf_write();
}

bool collect_policy_enabled(void)
{
	struct npf_policy_conf conf = {};
	__u32 zero = 0;

	bpf_map_lookup_elem(bpf_map__fd(skel->maps.npf_policy_conf), &zero, &conf);
	return conf.enabled;
}

/* Faults npfd could not serve: npfd is the only writer of this counter. */
void collect_count_failed(__u64 n)
{
	if (global_map)
		global_map->faults_failed += n;
}

/* Calls into client address spaces that missed their deadline (mmcall.h), since start. */
void collect_set_mm_calls_late(__u64 n)
{
	if (global_map)
		global_map->mm_calls_late = n;
}

const struct npf_global_stats *collect_global(void)
{
	static const struct npf_global_stats none;

	return global_map ? global_map : &none;
}

int collect_slot_alloc(struct npfd_region *r)
{
	__u32 i;

	for (i = 0; i < NPF_MAX_REGIONS; i++) {
		if (slot_used[i])
			continue;
		slot_used[i] = 1;
		r->slot = i;
		r->stats = &stats_map[i];
		r->latency = &latency_map[i];
		r->budget_info = &budget_map[i];
		memset(r->stats, 0, sizeof(*r->stats));
		memset(r->latency, 0, sizeof(*r->latency));
		memset(r->budget_info, 0, sizeof(*r->budget_info));
		r->budget_info->tgid = (__u32)r->mm->tgid;
		r->budget_info->region_id = r->id;
		r->stats->tgid = (__u32)r->mm->tgid;
		r->stats->start = r->start;
		r->stats->length = r->length;
		/* Last: a non-zero id tells map readers the slot is in use. */
		__atomic_store_n(&r->stats->region_id, r->id, __ATOMIC_RELEASE);
		return 0;
	}
	return -ENOSPC;
}

void collect_slot_free(struct npfd_region *r)
{
	if (!r->stats)
		return;
	memset(r->stats, 0, sizeof(*r->stats));
	memset(r->latency, 0, sizeof(*r->latency));
	memset(r->budget_info, 0, sizeof(*r->budget_info));
	slot_used[r->slot] = 0;
	r->stats = NULL;
	r->latency = NULL;
	r->budget_info = NULL;
}

int collect_filter_update(pid_t tgid, struct npfd_mm *mm)
{
	struct npf_proc_ranges pr = {};
	struct npfd_region *r;
	__u32 key = (__u32)tgid;

	if (!tgid)
		return 0;
	list_for_each_entry(r, &mm->regions, node) {
		__u32 k = pr.nr;

		if (pr.nr == NPF_MAX_RANGES_PER_PROC)
			return -E2BIG;
		/*
		 * Shortest first: the BPF programs take the first range an
		 * address is in, and a region inside another's range is in a
		 * hole of it (region.c), so it must come first.
		 */
		for (; k > 0 && pr.r[k - 1].end - pr.r[k - 1].start > r->length; k--)
			pr.r[k] = pr.r[k - 1];
		pr.r[k].start = r->start;
		pr.r[k].end = r->start + r->length;
		pr.r[k].slot = r->slot;
		pr.r[k].region_id = r->id;
		pr.nr++;
		if (r->stats)
			r->stats->tgid = key;
	}
	if (!pr.nr) {
		collect_filter_remove(tgid);
		return 0;
	}
	if (bpf_map_update_elem(bpf_map__fd(skel->maps.npf_procs), &key, &pr, BPF_ANY))
		return -errno;
	return 0;
}

void collect_filter_remove(pid_t tgid)
{
	__u32 key = (__u32)tgid;

	if (tgid)
		bpf_map_delete_elem(bpf_map__fd(skel->maps.npf_procs), &key);
}
