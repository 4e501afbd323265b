// SPDX-License-Identifier: GPL-2.0
/*
 * A client that holds its own address space stalls nobody but itself.
 * npfd calls into its clients' address spaces: UFFDIO_REGISTER takes the
 * client's mmap_lock for writing, the freeze of an eviction batch
 * (UFFDIO_WRITEPROTECT) for reading, its reads of /proc/PID/{maps,smaps,
 * pagemap,mem} take it too. A client can keep that lock for as long as it
 * likes: one of its threads reads its own /proc/self/mem at an untouched
 * page of a file on a FUSE filesystem whose server never answers the READ
 * (the read holds the lock while FUSE waits), another calls mmap() (a
 * writer queued behind it: every later reader waits too). npfd has one
 * event loop: were it to wait there, every other client would wait with
 * it. So each such call goes to a worker with a deadline
 * (--mm-call-timeout-ms); a call that misses it fails, the client is given
 * up (libnpf's fallback serves it) until the call returns, and
 * mm_calls_late in the pinned npf_global map counts it. The fault path's
 * calls are made on the loop itself (a hand-over costs too much there):
 * one that misses the deadline moves the loop to a watchdog thread.
 *
 * Eight phases, each with an attacker (uid 65534 in the socket's group) on a
 * FUSE mount of its own, stuck for HOLD_S seconds:
 *  - LOCK: the attacker registers a region while its lock is held: npfd
 *    must answer (an error) within ANSWER_MS;
 *  - PASSIVE: the attacker sends nothing; a thread of it writes, round
 *    after round, a 2048-page region with a 64-page budget, so that npfd's
 *    next eviction batch freezes pages of the stuck address space;
 *  - WRITE: the attacker writes a page of a budgeted region that it has
 *    only read (installed write-protected): npfd's unprotect, on its
 *    loop, waits; the loop must go on on another thread;
 *  - UNREG: the attacker unregisters a budgeted region most of whose pages
 *    are in the swap store: npfd puts them back (UFFDIO_COPY takes the
 *    VMA's own lock, not the mmap_lock), answers at the deadline of the
 *    UFFDIO_UNREGISTER, which comes through once the lock is let go: every
 *    page holds its bytes, and the range is the process's own again;
 *  - EXEC: the attacker's execve() waits in the FLUSH of a close-on-exec
 *    FUSE file, holding its exec_update_lock (the kernel takes it for
 *    /proc/PID/stat, ns/user, exe and pidfd_getfd()): npfd must take a
 *    connection it made just before (its user namespace is asked of the
 *    pidfd) and refuse its eviction ring request (pidfd_getfd() on the
 *    worker, late) -- see phase_exec();
 *  - EXECNIC: the same, with a device attach instead of the ring: npfd's
 *    uprobe on the software NIC reads its maps and opens its executable
 *    (the exe link is followed under the lock too), on the worker;
 *  - PROBE: the attacker is no client, it only runs the test's executable
 *    while its lock is held; another process of its user attaches a
 *    device, and the kernel's uprobe attach waits for the lock of every
 *    process that maps the file (phase_probe());
 *  - CLOSE: the attacker passes its FUSE "hold" file as a device's IO page
 *    table: npfd's close of it sends a FLUSH nobody answers (phase_close()).
 * Meanwhile a victim (another client) connects, registers 64 pages, writes
 * and reads back every one (each a fault that npfd serves: its fallback is
 * a minute away) and unregisters, all within VICTIM_MS; npfd answers a
 * status request, and its mm_calls_late has grown by exactly one per stuck
 * attacker (not one per call retried). After the FUSE connection is
 * aborted, the PASSIVE attacker's writing thread goes on for a whole
 * round, and every page holds what was last written to it: nothing lost
 * across the give-up, the fallback and the re-adoption, which the attacker
 * then sees (its region listed again). The FUSE connection is aborted on every way
 * out (atexit, the alarm; its server is a child that dies with the test,
 * and /dev/fuse closing aborts it too): else the attacker and npfd would
 * stay in D state for ever. Nothing here reads the attacker's
 * /proc/PID/{cmdline,maps,...} while it is stuck: that would wait too.
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <stddef.h>
#include <linux/filter.h>
#include <linux/fuse.h>
#include <linux/magic.h>

#define FUSECTL_SUPER_MAGIC 0x65735543 /* fs/fuse/control.c: not in linux/magic.h */
#include <linux/seccomp.h>
#include <bpf/bpf.h>
#include "adv.h"
#include "budget.h" /* th_uffd_registered() */
#include "npf.h"
#include "npf_nic_abi.h"
#include "npf_nic.h"

#define PG 4096UL
#define HOLD_S 10	      /* how long an attacker keeps its address space stuck */
#define MM_CALL_TIMEOUT "300" /* npfd's --mm-call-timeout-ms */
#define ANSWER_MS 2000	      /* the stuck registration's refusal comes within this */
#define VICTIM_MS 3000	      /* the victim's whole run */
#define STATUS_MS 1000	      /* a status request while an attacker is stuck */
#define STUCK_MS 6000	      /* the attack takes (npfd stalls, or counts a late call) */
#define TEST_ALARM_S 120      /* this test's own bound (less if $NPF_TEST_ALARM says so) */
#define FIRST_PAGES 16UL      /* LOCK: the region registered before the lock is held */
#define BIG_PAGES 2048UL      /* PASSIVE: the budgeted region */
#define BUDGET_PAGES 64UL
#define WR_PAGES 16UL /* WRITE: a budgeted region read whole before the lock, then written */
#define VICTIM_PAGES 64UL
#define UR_PAGES 256UL /* UNREG: a region with a 64-page budget, most of it in the swap store */

enum { LOCK, PASSIVE, WRITE, UNREG, EXEC, EXECNIC, PROBE, CLOSE };
static const char *const phase_name[] = {"LOCK", "PASSIVE", "WRITE", "UNREG",
					 "EXEC", "EXECNIC", "PROBE", "CLOSE"};

static struct th_npfd d;
static pid_t test_pid;
/* the uprobe site npfd attaches to (EXECNIC, PROBE): linked in from libnpfnic.a */
void (*volatile nic_report_site)(const struct npf_page_request *) = npf_nic_fault_report;
static volatile sig_atomic_t npfd_stopped; /* EXEC*: SIGCONT it on every way out */

static uint64_t word(uint64_t gen, uint64_t p, uint64_t w)
{
	return ((gen << 40) + p * 512 + w) * 0x9e3779b97f4a7c15ULL + 11;
}

/*
 * ---- the FUSE filesystem: "file", whose READs are never answered, and
 * "hold", whose FLUSH (a close) is never answered ----
 */
#define FILE_INO 2
#define HOLD_INO 3

struct fuse_mnt {
	char dir[64];	     /* the mount point */
	char abort_path[96]; /* /sys/fs/fuse/connections/MINOR/abort */
	pid_t server;	     /* answers everything but READ */
	int reads;	     /* the server writes the pid of each READ, and of hold's FLUSH, here */
	volatile sig_atomic_t mounted;
};

static struct fuse_mnt fm;

static void fuse_reply(int fd, uint64_t unique, int err, const void *data, size_t len)
{
	char buf[512];
	struct fuse_out_header *oh = (struct fuse_out_header *)buf;

	oh->unique = unique;
	oh->error = err;
	oh->len = (uint32_t)(sizeof(*oh) + len);
	if (len)
		memcpy(oh + 1, data, len);
	if (write(fd, buf, oh->len) < 0)
		return; /* aborted: the server is done */
}

static void fuse_attr(struct fuse_attr *a, uint64_t ino)
{
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->nlink = 1;
	a->blksize = PG;
	a->mode = ino == FUSE_ROOT_ID ? S_IFDIR | 0755 : S_IFREG | 0644;
	a->size = ino == FUSE_ROOT_ID ? 0 : 1 << 20;
	a->blocks = a->size / 512;
}

static void __attribute__((noreturn)) fuse_serve(int fd, int reads)
{
	static char buf[1 << 17];

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		struct fuse_in_header *ih = (struct fuse_in_header *)buf;

		if (n < 0 && (errno == EINTR || errno == ENOENT))
			continue;
		if (n < (ssize_t)sizeof(*ih))
			_exit(0); /* ENODEV: the connection was aborted */
		switch (ih->opcode) {
		case FUSE_INIT: {
			struct fuse_init_in *in = (struct fuse_init_in *)(ih + 1);
			struct fuse_init_out o = {.major = FUSE_KERNEL_VERSION,
						  .minor = in->minor < 31 ? in->minor : 31,
						  .max_write = PG,
						  .max_background = 16,
						  .congestion_threshold = 12};

			fuse_reply(fd, ih->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_LOOKUP: {
			const char *name = (char *)(ih + 1);
			struct fuse_entry_out e = {.nodeid = !strcmp(name, "hold") ? HOLD_INO :
										     FILE_INO,
						   .generation = 1,
						   .entry_valid = 1000,
						   .attr_valid = 1000};

			if (ih->nodeid != FUSE_ROOT_ID ||
			    (strcmp(name, "file") && strcmp(name, "hold"))) {
				fuse_reply(fd, ih->unique, -ENOENT, NULL, 0);
				break;
			}
			fuse_attr(&e.attr, e.nodeid);
			fuse_reply(fd, ih->unique, 0, &e, sizeof(e));
			break;
		}
		case FUSE_GETATTR: {
			struct fuse_attr_out a = {.attr_valid = 1000};

			fuse_attr(&a.attr, ih->nodeid);
			fuse_reply(fd, ih->unique, 0, &a, sizeof(a));
			break;
		}
		case FUSE_OPEN:
		case FUSE_OPENDIR: {
			struct fuse_open_out o = {.fh = 1};

			fuse_reply(fd, ih->unique, 0, &o, sizeof(o));
			break;
		}
		case FUSE_FLUSH:
		case FUSE_READ:
			if (ih->opcode == FUSE_FLUSH && ih->nodeid != HOLD_INO) {
				fuse_reply(fd, ih->unique, 0, NULL, 0);
				break;
			}
			/* a READ, hold's FLUSH: never answered, the caller waits for the abort */
			if (write(reads, &ih->pid, sizeof(ih->pid)) < 0)
				_exit(1);
			break;
		case FUSE_STATFS: /* never answered: npfd must not ask (CLOSE) */
			break;
		case FUSE_RELEASE:
		case FUSE_RELEASEDIR:
			fuse_reply(fd, ih->unique, 0, NULL, 0);
			break;
		case FUSE_FORGET:
		case FUSE_BATCH_FORGET:
		case FUSE_INTERRUPT:
			break;
		default:
			fuse_reply(fd, ih->unique, -ENOSYS, NULL, 0);
		}
	}
}

static void fuse_check(void)
{
	struct statfs sfs;
	char fs[4096];

	if (access("/dev/fuse", R_OK | W_OK))
		th_skip("no /dev/fuse (%s): the attack needs a FUSE filesystem", strerror(errno));
	th_read_text("/proc/filesystems", fs, sizeof(fs));
	if (!strstr(fs, "\tfuse\n"))
		th_skip("the kernel has no fuse filesystem (/proc/filesystems)");
	if (access("/sys/fs/fuse/connections", F_OK))
		th_skip("no /sys/fs/fuse/connections (fusectl): a stuck FUSE read could not be "
			"aborted");
	/*
	 * The directory is there once fuse is loaded, its file system only if
	 * someone mounted it (systemd does; a machine without systemd at boot
	 * does not): every abort would fail.
	 */
	if (statfs("/sys/fs/fuse/connections", &sfs) || sfs.f_type != FUSECTL_SUPER_MAGIC) {
		if (mount("fusectl", "/sys/fs/fuse/connections", "fusectl", 0, NULL))
			th_skip("fusectl is not mounted at /sys/fs/fuse/connections and cannot be (%s): a stuck FUSE read could not be aborted",
				strerror(errno));
		printf("mounted fusectl at /sys/fs/fuse/connections (nothing had)\n");
	}
}

/* Mount a FUSE filesystem served by a child of ours (it dies with us: the mount is aborted). */
static void fuse_mount(struct fuse_mnt *m)
{
	char opts[128];
	struct stat st;
	int fd, reads[2];

	fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	TH_ASSERT(fd >= 0, "open /dev/fuse: %s", strerror(errno));
	snprintf(m->dir, sizeof(m->dir), "/tmp/npf-test-fuse-XXXXXX");
	TH_ASSERT(mkdtemp(m->dir), "mkdtemp: %s", strerror(errno));
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fd);
	if (mount("npftest", m->dir, "fuse", MS_NOSUID | MS_NODEV, opts)) {
		int e = errno;

		close(fd);
		rmdir(m->dir);
		if (e == ENODEV || e == EPERM)
			th_skip("cannot mount a FUSE filesystem: %s", strerror(e));
		th_fail("mount fuse on %s: %s", m->dir, strerror(e));
	}
	m->abort_path[0] = 0;
	m->mounted = 1;
	TH_ASSERT(!pipe(reads), "pipe: %s", strerror(errno));
	fflush(stdout);
	m->server = fork();
	TH_ASSERT(m->server >= 0, "fork: %s", strerror(errno));
	if (!m->server) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != test_pid)
			_exit(1);
		signal(SIGALRM, SIG_DFL);
		close(reads[0]);
		fuse_serve(fd, reads[1]);
	}
	th_child_started(m->server);
	close(fd); /* the server's is the only one: its death aborts the connection */
	close(reads[1]);
	m->reads = reads[0];
	TH_ASSERT(!stat(m->dir, &st), "stat %s: %s", m->dir, strerror(errno));
	snprintf(m->abort_path, sizeof(m->abort_path), "/sys/fs/fuse/connections/%u/abort",
		 minor(st.st_dev));
	TH_ASSERT(!access(m->abort_path, W_OK), "%s: %s", m->abort_path, strerror(errno));
}

/*
 * Abort the FUSE connection (every READ waiting fails), then detach the
 * mount. Async-signal-safe: also called from the alarm and at exit.
 */
static void fuse_release(struct fuse_mnt *m)
{
	int fd;

	if (!m->mounted || getpid() != test_pid)
		return;
	m->mounted = 0;
	fd = m->abort_path[0] ? open(m->abort_path, O_WRONLY | O_CLOEXEC) : -1;
	if (fd >= 0) {
		if (write(fd, "1", 1) < 0)
			(void)0; /* the server's death below aborts it as well */
		close(fd);
	}
	if (m->server > 0)
		kill(m->server, SIGKILL);
	umount2(m->dir, MNT_DETACH);
	rmdir(m->dir);
}

static void on_exit_release(void)
{
	if (getpid() != test_pid)
		return;
	if (npfd_stopped)
		kill(d.pid, SIGCONT);
	fuse_release(&fm);
	if (__atomic_load_n(&th_failed, __ATOMIC_RELAXED) && d.log[0]) {
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "echo '--- npfd log (tail):'; tail -n 30 %s", d.log);
		if (system(cmd) < 0)
			perror("system");
	}
}

static void on_alarm(int sig)
{
	if (npfd_stopped)
		kill(d.pid, SIGCONT);
	fuse_release(&fm);
	th_on_alarm(sig);
}

/* ---- reports from the children: one line each, through a pipe ---- */

static void __attribute__((format(printf, 2, 3))) say(int fd, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	/* no stdio, no malloc(): an attacker whose mmap_lock is held says things too */
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(fd, line, (size_t)n) < 0)
		_exit(1);
}

#define child_fail(fd, ...)                                                                        \
	do {                                                                                       \
		say(fd, "FAIL " __VA_ARGS__);                                                      \
		_exit(1);                                                                          \
	} while (0)

struct chan {
	const char *who;
	int fd;
	int eof;
	size_t len;
	char buf[4096];
	char last[512]; /* the last line read */
};

/* The child's next line within ms (printed), or NULL (timeout, or it closed the pipe). */
static char *chan_line(struct chan *ch, int ms)
{
	double end = th_now() + ms / 1e3;

	for (;;) {
		char *nl = memchr(ch->buf, '\n', ch->len);
		struct pollfd p = {.fd = ch->fd, .events = POLLIN};
		ssize_t n;
		int left;

		if (nl) {
			size_t len = (size_t)(nl - ch->buf);

			if (len >= sizeof(ch->last))
				len = sizeof(ch->last) - 1;
			memcpy(ch->last, ch->buf, len);
			ch->last[len] = 0;
			ch->len -= (size_t)(nl + 1 - ch->buf);
			memmove(ch->buf, nl + 1, ch->len);
			printf("  [%s] %s\n", ch->who, ch->last);
			return ch->last;
		}
		if (ch->eof || ch->len == sizeof(ch->buf))
			return NULL;
		left = (int)((end - th_now()) * 1e3);
		if (poll(&p, 1, left > 0 ? left : 0) != 1)
			return NULL;
		n = read(ch->fd, ch->buf + ch->len, sizeof(ch->buf) - ch->len);
		if (n <= 0) {
			ch->eof = 1;
			return NULL;
		}
		ch->len += (size_t)n;
	}
}

/* The value after `key` in the child's first line that begins with it, within ms. */
static char *chan_expect(struct chan *ch, const char *key, int ms)
{
	double end = th_now() + ms / 1e3;
	char *l;

	while ((l = chan_line(ch, (int)((end - th_now()) * 1e3)))) {
		if (!strncmp(l, "FAIL ", 5))
			th_fail("%s: %s", ch->who, l + 5);
		if (!strncmp(l, key, strlen(key)))
			return l + strlen(key);
	}
	th_fail("%s: no %s within %d ms (%s; its last report: \"%s\")", ch->who, key, ms,
		ch->eof ? "it closed its pipe: died?" : "timed out", ch->last);
}

/* Reap child pid within ms; returns its wait status. Kills it (and fails) if it does not end. */
static int reap(pid_t pid, const char *who, int ms)
{
	double t0 = th_now();
	int st;

	while (waitpid(pid, &st, WNOHANG) != pid) {
		if (th_now() - t0 > ms / 1e3) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			th_fail("%s (pid %d) did not exit within %d ms", who, pid, ms);
		}
		usleep(5000);
	}
	return st;
}

/* ---- npfd's status, on a connection of its own, with a bound ---- */

/* npf_global's mm_calls_late: npfd's calls into client address spaces that missed their deadline */
static __u64 mm_calls_late(void)
{
	struct npf_global_stats g;
	__u32 zero = 0;
	char pin[256];
	int mfd;

	snprintf(pin, sizeof(pin), "%s/%s", d.bpffs, NPF_MAP_GLOBAL);
	mfd = bpf_obj_get(pin);
	TH_ASSERT(mfd >= 0 && bpf_map_lookup_elem(mfd, &zero, &g) == 0, "read %s: %s", pin,
		  strerror(errno));
	close(mfd);
	return g.mm_calls_late;
}

/*
 * 1: npfd answered a status request within ms (and *late is
 * mm_calls_late); 0: no answer. Fails the test if npfd is gone.
 */
static int status_try(int ms, __u64 *late)
{
	struct npf_status stbuf, *st = &stbuf;
	static char buf[NPF_MSG_MAX];
	struct npf_msg_hdr *h = (struct npf_msg_hdr *)buf, q;
	struct npf_reply *r = (struct npf_reply *)(h + 1);
	int fd = adv_connect(d.sock);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;
	size_t have;

	memset(st, 0, sizeof(*st));
	TH_ASSERT(fd >= 0, "connect to npfd: %s (npfd died?)", strerror(errno));
	adv_hdr(&q, NPF_MSG_STATUS, sizeof(q));
	TH_ASSERT(adv_send(fd, &q, sizeof(q), NULL, 0) == sizeof(q), "send: %s", strerror(errno));
	if (poll(&p, 1, ms) != 1) {
		close(fd);
		return 0;
	}
	n = recv(fd, buf, sizeof(buf), 0);
	close(fd);
	TH_ASSERT(n >= (ssize_t)(sizeof(*h) + sizeof(*r)) && h->magic == NPF_PROTO_MAGIC &&
			  r->status == 0,
		  "bad status reply (%zd bytes): npfd died?", n);
	have = (size_t)n - sizeof(*h) - sizeof(*r);
	memcpy(st, r + 1, have < sizeof(*st) ? have : sizeof(*st));
	*late = mm_calls_late();
	return 1;
}

static __u64 late_now(const char *when)
{
	double t0 = th_now();
	__u64 late;

	TH_ASSERT(status_try(STATUS_MS, &late),
		  "npfd did not answer a status request within %d ms %s", STATUS_MS, when);
	printf("status %s: answered in %.0f ms, mm_calls_late %llu\n", when, (th_now() - t0) * 1e3,
	       (unsigned long long)late);
	return late;
}

/*
 * Once the attack is armed: until npfd's loop stops answering (before the
 * fix: it waits in the attacker's address space) or npfd counts a late
 * call (the fix). Neither within STUCK_MS: the attack did not take, and
 * the test would prove nothing.
 */
static void wait_stuck(__u64 late0)
{
	double t0 = th_now();
	__u64 late;

	for (;;) {
		if (!status_try(250, &late)) {
			printf("npfd does not answer a status request within 250 ms (%.0f ms after "
			       "the attack): its event loop waits in the attacker's address space\n",
			       (th_now() - t0) * 1e3);
			return;
		}
		if (late > late0) {
			printf("npfd counted a late call %.0f ms after the attack (mm_calls_late "
			       "%llu)\n",
			       (th_now() - t0) * 1e3, (unsigned long long)late);
			return;
		}
		TH_ASSERT(
			th_now() - t0 < STUCK_MS / 1e3,
			"the attack did not take: within %d ms npfd neither stalled nor counted a "
			"late call",
			STUCK_MS);
		usleep(20000);
	}
}

/* State letter of thread tid of process pid (R, S, D, ...), 0 if unknown. No mmap_lock. */
static char task_state(pid_t pid, pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/* ---- the victim: an ordinary client, started while an attacker is stuck ---- */

static void __attribute__((noreturn)) victim(int rep, int go)
{
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fallback_ms = 60000);
	struct npf_client *c;
	uint64_t *mem;
	double t0;
	char g;
	int id;

	if (read(go, &g, 1) != 1)
		child_fail(rep, "the test went away");
	t0 = th_now();
#define MS ((int)((th_now() - t0) * 1e3))
	c = npf_client__connect(&co);
	if (!c)
		child_fail(rep, "connect: %s (%d ms)", strerror(errno), MS);
	say(rep, "connected at %d ms", MS);
	mem = mmap(NULL, VICTIM_PAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		   0);
	if (mem == MAP_FAILED)
		child_fail(rep, "mmap: %s", strerror(errno));
	id = npf_client__register(c, mem, VICTIM_PAGES * PG, NULL);
	if (id < 0)
		child_fail(rep, "register: %s (%d ms)", npf_client__errmsg(c), MS);
	say(rep, "registered at %d ms", MS);
	for (uint64_t p = 0; p < VICTIM_PAGES; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			mem[p * PG / 8 + w] = word(5, p, w);
	say(rep, "wrote %lu pages at %d ms", VICTIM_PAGES, MS);
	for (uint64_t p = 0; p < VICTIM_PAGES; p++)
		for (uint64_t w = 0; w < PG / 8; w++)
			if (mem[p * PG / 8 + w] != word(5, p, w))
				child_fail(rep, "page %lu word %lu reads 0x%llx", p, w,
					   (unsigned long long)mem[p * PG / 8 + w]);
	say(rep, "read them back at %d ms", MS);
	if (npf_client__unregister(c, (__u32)id))
		child_fail(rep, "unregister: %s (%d ms)", npf_client__errmsg(c), MS);
	npf_client__close(c);
	say(rep, "DONE in %d ms", MS);
#undef MS
	_exit(0);
}

struct victim_run {
	struct chan ch;
	pid_t pid;
	int go;
};

/*
 * Fork a victim, which waits for victim_finish(): PROBE forks it before
 * the kernel holds every fork on the machine.
 */
static void victim_start(struct victim_run *v)
{
	int rep[2], go[2];

	TH_ASSERT(!pipe(rep) && !pipe(go), "pipe: %s", strerror(errno));
	fflush(stdout);
	v->pid = fork();
	TH_ASSERT(v->pid >= 0, "fork: %s", strerror(errno));
	if (!v->pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != test_pid)
			_exit(1);
		signal(SIGALRM, SIG_DFL);
		alarm(TEST_ALARM_S);
		close(rep[0]);
		close(go[1]);
		close(fm.reads);
		victim(rep[1], go[0]);
	}
	th_child_started(v->pid);
	close(rep[1]);
	close(go[0]);
	v->ch = (struct chan){.who = "victim", .fd = rep[0]};
	v->go = go[1];
}

/* Start the victim and run it to its end: it must be done within VICTIM_MS. */
static void victim_finish(struct victim_run *v)
{
	double t0 = th_now();

	printf("victim %d: connect, register %lu pages, write and read each, unregister, within "
	       "%d ms\n",
	       v->pid, VICTIM_PAGES, VICTIM_MS);
	TH_ASSERT(write(v->go, "g", 1) == 1, "write: %s", strerror(errno));
	for (;;) {
		char *l = chan_line(&v->ch, (int)((t0 + VICTIM_MS / 1e3 - th_now()) * 1e3));

		if (!l)
			th_fail("the victim did not finish within %d ms: it %s after \"%s\" -- "
				"another client's stuck address space stalls npfd for everyone",
				VICTIM_MS, v->ch.eof ? "died" : "stalled", v->ch.last);
		if (!strncmp(l, "FAIL ", 5))
			th_fail("victim: %s", l + 5);
		if (!strncmp(l, "DONE", 4))
			break;
	}
	TH_ASSERT(WIFEXITED(reap(v->pid, "the victim", 2000)), "the victim was killed");
	close(v->ch.fd);
	close(v->go);
}

static void run_victim(void)
{
	struct victim_run v;

	victim_start(&v);
	victim_finish(&v);
}

/* ---- the attacker (a child, uid 65534) ---- */

struct attack {
	int phase;
	int cmd; /* from the test: 'g' send the registration (LOCK), 'r' released */
	int wgo; /* from the test, to the writer thread: call mmap() now */
	int rep; /* to the test: report lines */
};

static struct attack at;
static char *fuse_page;
static int self_mem;
static char hold_buf[PG];
static volatile pid_t writer_tid;
static char *big;
static __u32 big_gen[BIG_PAGES]; /* the round that last wrote each page (0: none) */
static unsigned long rounds;	 /* the toucher's completed rounds */
static int toucher_stop;

/* Grow the main thread's stack now: growing it later takes the mmap_lock for writing. */
static void __attribute__((noinline)) grow_stack(void)
{
	volatile char pad[256 << 10];

	for (size_t i = 0; i < sizeof(pad); i += PG)
		pad[i] = 1;
}

static void *holder(void *arg)
{
	/* the page's READ is never answered: this holds the mmap_lock (read) meanwhile */
	ssize_t n = pread(self_mem, hold_buf, PG, (off_t)(uintptr_t)fuse_page);

	say(at.rep, "holder's read of the FUSE page returned %zd", n);
	return arg;
}

static void *writer(void *arg)
{
	char c;
	void *p;

	writer_tid = (pid_t)syscall(SYS_gettid);
	if (read(at.wgo, &c, 1) != 1)
		return arg;
	p = mmap(NULL, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); /* queued */
	say(at.rep, "writer's mmap() returned %s", p == MAP_FAILED ? "MAP_FAILED" : "a mapping");
	return arg;
}

/* Writes every page of the budgeted region, round after round; big_gen says what is where. */
static void *toucher(void *arg)
{
	for (__u32 r = 1; !__atomic_load_n(&toucher_stop, __ATOMIC_ACQUIRE); r++) {
		for (uint64_t p = 0; p < BIG_PAGES; p++) {
			uint64_t *pg = (uint64_t *)(big + p * PG);

			if (__atomic_load_n(&toucher_stop, __ATOMIC_ACQUIRE))
				return arg;
			for (uint64_t w = 0; w < PG / 8; w++)
				pg[w] = word(r, p, w);
			__atomic_store_n(&big_gen[p], r, __ATOMIC_RELEASE);
		}
		__atomic_store_n(&rounds, r, __ATOMIC_RELEASE);
	}
	return arg;
}

static int wait_rounds(unsigned long n, int ms)
{
	double t0 = th_now();

	while (__atomic_load_n(&rounds, __ATOMIC_ACQUIRE) < n)
		if (th_now() - t0 > ms / 1e3)
			return 0;
		else
			usleep(10000);
	return 1;
}

static char cmd_read(void)
{
	char c = 0;

	if (read(at.cmd, &c, 1) != 1)
		child_fail(at.rep, "the test went away");
	return c;
}

/* Within 10 s, libnpf is connected again and npfd lists the region at start. */
static void expect_adopted(struct npf_client *c, void *start)
{
	double t0 = th_now();

	for (;;) {
		struct npf_region_info *ri = NULL;
		size_t n = 0;
		int found = 0;

		if (!npf_client__region_list(c, &ri, &n))
			for (size_t i = 0; i < n; i++)
				found |= ri[i].start == (__u64)(uintptr_t)start;
		free(ri);
		if (found)
			break;
		if (th_now() - t0 > 10)
			child_fail(at.rep,
				   "npfd does not list the region at %p 10 s after the release "
				   "(libnpf not reconnected, or the region not adopted): %s",
				   start, npf_client__errmsg(c));
		usleep(20000);
	}
	say(at.rep, "ADOPTED: npfd lists the region again %.0f ms after the release",
	    (th_now() - t0) * 1e3);
}

static char *wr;
static char *ur; /* UNREG's region */
static int wp_go[2];

/*
 * WRITE: the first write to a page installed clean, a write-protect fault
 * npfd answers. Started before the lock is held (a thread's stack is an
 * mmap()), it writes when told.
 */
static void *wp_writer(void *arg)
{
	char go;

	if (read(wp_go[0], &go, 1) != 1)
		return arg;
	((volatile uint64_t *)wr)[0] = word(7, 0, 0);
	say(at.rep, "the write-protect fault was answered");
	return arg;
}

static void __attribute__((noreturn)) attacker(void)
{
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fallback_ms = 500,
		 .timeout_ms = 5000); /* an answer sooner than this is npfd's */
	pthread_t th_hold, th_write, th_touch, th_wp;
	struct npf_client *c;
	char *first = NULL, path[96];
	int ffd, id = 0;

	adv_become_attacker();
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* after the setuid(), which clears it */
	if (getppid() != test_pid)
		_exit(1);
	/* its own /proc/self/mem: the change of user made it root's */
	if (prctl(PR_SET_DUMPABLE, 1))
		child_fail(at.rep, "PR_SET_DUMPABLE: %s", strerror(errno));
	grow_stack();
	/* PROBE: no client of npfd, it only maps the test's executable (it runs it) */
	c = at.phase == PROBE ? NULL : npf_client__connect(&co);
	if (!c && at.phase != PROBE)
		child_fail(at.rep, "connect: %s", strerror(errno));
	if (at.phase == PROBE) {
	} else if (at.phase == LOCK) {
		first = mmap(NULL, 2 * FIRST_PAGES * PG, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		id = npf_client__register(c, first + FIRST_PAGES * PG, FIRST_PAGES * PG, NULL);
		if (id < 0)
			child_fail(at.rep, "register: %s", npf_client__errmsg(c));
	} else if (at.phase == WRITE) {
		/* a budget: read faults install pages write-protected, the first write is seen */
		wr = mmap(NULL, WR_PAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
		id = npf_client__register(c, wr, WR_PAGES * PG, NULL);
		if (id < 0 ||
		    npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, 4 * WR_PAGES * PG, NULL))
			child_fail(at.rep, "register, budget: %s", npf_client__errmsg(c));
		for (uint64_t p = 0; p < WR_PAGES; p++)
			if (((volatile uint64_t *)wr)[p * PG / 8])
				child_fail(at.rep, "page %lu of a fresh region is not zero", p);
		if (pipe(wp_go) || pthread_create(&th_wp, NULL, wp_writer, NULL))
			child_fail(at.rep, "pipe, pthread_create: %s", strerror(errno));
	} else if (at.phase == UNREG) {
		struct npf_budget_info *bi = NULL;
		size_t n = 0;

		ur = mmap(NULL, UR_PAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
		id = npf_client__register(c, ur, UR_PAGES * PG, NULL);
		if (id < 0 ||
		    npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, BUDGET_PAGES * PG, NULL))
			child_fail(at.rep, "register, budget: %s", npf_client__errmsg(c));
		for (uint64_t p = 0; p < UR_PAGES; p++)
			for (uint64_t w = 0; w < PG / 8; w++)
				((uint64_t *)ur)[p * PG / 8 + w] = word(11, p, w);
		for (double t0 = th_now();; usleep(20000)) {
			free(bi);
			bi = NULL;
			if (npf_client__budget_list(c, (__u32)id, &bi, &n) || n != 1)
				child_fail(at.rep, "budget list: %s", npf_client__errmsg(c));
			if (bi->stored_pages >= UR_PAGES / 2 &&
			    bi->resident_pages <= bi->high_pages)
				break;
			if (th_now() - t0 > 10)
				child_fail(at.rep,
					   "10 s after writing, %llu pages stored, %llu resident",
					   (unsigned long long)bi->stored_pages,
					   (unsigned long long)bi->resident_pages);
		}
		say(at.rep, "STORED: %llu of %lu pages in the swap store",
		    (unsigned long long)bi->stored_pages, UR_PAGES);
		free(bi);
	} else {
		struct npf_budget_info *bi = NULL;
		size_t n = 0;

		big = mmap(NULL, BIG_PAGES * PG, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		id = npf_client__register(c, big, BIG_PAGES * PG, NULL);
		if (id < 0)
			child_fail(at.rep, "register: %s", npf_client__errmsg(c));
		if (npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, BUDGET_PAGES * PG, NULL))
			child_fail(at.rep, "budget: %s", npf_client__errmsg(c));
		if (pthread_create(&th_touch, NULL, toucher, NULL))
			child_fail(at.rep, "pthread_create");
		if (!wait_rounds(2, 20000))
			child_fail(at.rep, "the toucher did not write the region twice in 20 s");
		if (npf_client__budget_list(c, (__u32)id, &bi, &n) || n != 1)
			child_fail(at.rep, "budget list: %s", npf_client__errmsg(c));
		if (!bi->evicted_pages)
			child_fail(at.rep, "npfd evicted nothing of the budgeted region");
		say(at.rep, "EVICTING: %lu rounds written, %llu pages evicted, %llu read back",
		    __atomic_load_n(&rounds, __ATOMIC_ACQUIRE),
		    (unsigned long long)bi->evicted_pages, (unsigned long long)bi->refaults);
		free(bi);
	}

	/* arm: the FUSE page, the writer (waits for the test's word), the holder */
	snprintf(path, sizeof(path), "%s/file", fm.dir);
	ffd = open(path, O_RDONLY | O_CLOEXEC);
	if (ffd < 0)
		child_fail(at.rep, "open %s: %s", path, strerror(errno));
	fuse_page = mmap(NULL, PG, PROT_READ, MAP_PRIVATE, ffd, 0);
	if (fuse_page == MAP_FAILED)
		child_fail(at.rep, "mmap %s: %s", path, strerror(errno));
	self_mem = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	if (self_mem < 0)
		child_fail(at.rep, "open /proc/self/mem: %s", strerror(errno));
	memset(hold_buf, 0, sizeof(hold_buf));
	if (pthread_create(&th_write, NULL, writer, NULL))
		child_fail(at.rep, "pthread_create");
	while (!writer_tid)
		usleep(1000);
	say(at.rep, "ARMED writer=%d", writer_tid);
	if (pthread_create(&th_hold, NULL, holder, NULL))
		child_fail(at.rep, "pthread_create");

	/* from here until the release, nothing that takes our own mmap_lock */
	if (at.phase == LOCK || at.phase == UNREG) {
		const bool reg = at.phase == LOCK;
		char buf[200];
		double t0;
		int rc;

		if (cmd_read() != 'g')
			child_fail(at.rep, "unexpected command");
		say(at.rep, "SENDING %s", reg ? "a registration" : "the unregistration");
		t0 = th_now();
		rc = reg ? npf_client__register(c, first, FIRST_PAGES * PG, NULL) :
			   npf_client__unregister(c, (__u32)id);
		snprintf(buf, sizeof(buf), "%s", rc < 0 ? npf_client__errmsg(c) : "");
		say(at.rep, "%s rc=%d ms=%d (%s)", reg ? "REGISTER" : "UNREGISTER", rc,
		    (int)((th_now() - t0) * 1e3), buf);
	} else if (at.phase == WRITE) {
		if (cmd_read() != 'g')
			child_fail(at.rep, "unexpected command");
		say(at.rep, "SENDING a write to a page installed clean");
		if (write(wp_go[1], "w", 1) != 1)
			child_fail(at.rep, "write: %s", strerror(errno));
	}
	if (cmd_read() != 'r')
		child_fail(at.rep, "unexpected command");
	pthread_join(th_hold, NULL);
	pthread_join(th_write, NULL);

	if (at.phase == LOCK) {
		/* the first region is served again (npfd, once it adopted it; or the fallback) */
		uint64_t *m = (uint64_t *)(first + FIRST_PAGES * PG);

		for (uint64_t i = 0; i < FIRST_PAGES * PG / 8; i++)
			m[i] = word(3, i / 512, i % 512);
		for (uint64_t i = 0; i < FIRST_PAGES * PG / 8; i++)
			if (m[i] != word(3, i / 512, i % 512))
				child_fail(at.rep, "first region: word %lu reads 0x%llx", i,
					   (unsigned long long)m[i]);
		say(at.rep, "first region written and read back after the release");
		/*
		 * The refused registration went through in the kernel once the
		 * lock was let go, after npfd had answered that it failed:
		 * npfd undid it, and the range is the process's own again.
		 */
		for (double t0 = th_now(); th_uffd_registered(first, PG); usleep(10000))
			if (th_now() - t0 > 2)
				child_fail(at.rep,
					   "the refused range 0x%lx is still registered with the "
					   "userfaultfd 2 s after the release",
					   (unsigned long)(uintptr_t)first);
		say(at.rep, "the refused range is not registered after the release");
		expect_adopted(c, first + FIRST_PAGES * PG);
	} else if (at.phase == UNREG) {
		/* every byte there: the stored pages were put back before the unregistration */
		for (uint64_t p = 0; p < UR_PAGES; p++)
			for (uint64_t w = 0; w < PG / 8; w++)
				if (((uint64_t *)ur)[p * PG / 8 + w] != word(11, p, w))
					child_fail(at.rep, "page %lu word %lu reads 0x%llx", p, w,
						   (unsigned long long)((
							   uint64_t *)ur)[p * PG / 8 + w]);
		say(at.rep, "VERIFIED: all %lu pages hold what was written", UR_PAGES);
		/* the late UFFDIO_UNREGISTER came through: the range is the process's own */
		for (double t0 = th_now(); th_uffd_registered(ur, PG); usleep(10000))
			if (th_now() - t0 > 2)
				child_fail(at.rep,
					   "the unregistered range is still registered with the "
					   "userfaultfd 2 s after the release");
		say(at.rep, "UNREGISTERED: the range is not registered after the release");
	} else if (at.phase == WRITE) {
		pthread_join(th_wp, NULL);
		for (uint64_t p = 0; p < WR_PAGES; p++)
			for (uint64_t w = 0; w < PG / 8; w++) {
				uint64_t want = !p && !w ? word(7, 0, 0) : 0;

				if (((uint64_t *)wr)[p * PG / 8 + w] != want)
					child_fail(at.rep,
						   "page %lu word %lu reads 0x%llx, not 0x%llx", p,
						   w,
						   (unsigned long long)((
							   uint64_t *)wr)[p * PG / 8 + w],
						   (unsigned long long)want);
			}
		say(at.rep, "VERIFIED: the write landed, the other pages read zeros");
		expect_adopted(c, wr);
	} else if (at.phase == PASSIVE) {
		unsigned long r0 = __atomic_load_n(&rounds, __ATOMIC_ACQUIRE), bad = 0,
			      first_bad = 0;
		uint64_t got = 0, want = 0, bw = 0;

		/* a whole round written after the release, then every page checked */
		if (!wait_rounds(r0 + 2, 20000))
			child_fail(at.rep,
				   "the toucher wrote no whole round within 20 s of the release "
				   "(at round %lu, from %lu): a fault is never served",
				   __atomic_load_n(&rounds, __ATOMIC_ACQUIRE), r0);
		__atomic_store_n(&toucher_stop, 1, __ATOMIC_RELEASE);
		pthread_join(th_touch, NULL);
		for (uint64_t p = 0; p < BIG_PAGES; p++) {
			const uint64_t *pg = (const uint64_t *)(big + p * PG);
			__u32 g = big_gen[p];

			for (uint64_t w = 0; w < PG / 8; w++)
				if (pg[w] != (g ? word(g, p, w) : 0)) {
					if (!bad++) {
						first_bad = p;
						bw = w;
						got = pg[w];
						want = g ? word(g, p, w) : 0;
					}
					break;
				}
		}
		if (bad)
			child_fail(at.rep,
				   "%lu of %lu pages lost a write: page %lu (round %u) word %lu "
				   "reads 0x%llx, expected 0x%llx",
				   bad, BIG_PAGES, first_bad, big_gen[first_bad], bw,
				   (unsigned long long)got, (unsigned long long)want);
		say(at.rep,
		    "VERIFIED: all %lu pages hold their last write (%lu rounds, %lu after "
		    "the release)",
		    BIG_PAGES, __atomic_load_n(&rounds, __ATOMIC_ACQUIRE),
		    __atomic_load_n(&rounds, __ATOMIC_ACQUIRE) - r0);
		expect_adopted(c, big);
	}
	say(at.rep, "DONE");
	_exit(0);
}

/*
 * EXEC: the attacker's execve() waits in the FLUSH of the close-on-exec
 * FUSE "hold" file, with the kernel's exec_update_lock of the process
 * held: /proc/PID/stat, ns/user, exe, fd/N and pidfd_getfd() of it wait
 * too. Before it execs it connects once more (npfd, stopped by the test,
 * accepts that connection only once the exec waits: a non-root peer's user
 * namespace is looked up then), and a child of its own (Q, a copy of its
 * descriptors) sends NPF_MSG_EVICT_RING on its connection when told: npfd
 * fetches that descriptor with pidfd_getfd().
 */
#define PROBE_NAME "memfd:npf-test-getfd" /* what Q asks npfd to fetch (survives the exec) */

/*
 * Does process pid hold a descriptor whose link names name (the attacker's probe memfd)? Asked of each of its
 * threads: once npfd's loop has moved (WRITE), its first thread is gone,
 * and /proc/PID/fd, which is that thread's, lists nothing.
 */
static bool holds_file(pid_t pid, const char *name)
{
	char path[64], fdpath[64 + 256 + 4], link[sizeof(fdpath) + 256], target[128];
	struct dirent *t, *e;
	bool found = false;
	DIR *tasks, *fds;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	tasks = opendir(path);
	TH_ASSERT(tasks, "opendir %s: %s", path, strerror(errno));
	while (!found && (t = readdir(tasks))) {
		if (t->d_name[0] == '.')
			continue;
		snprintf(fdpath, sizeof(fdpath), "%s/%s/fd", path, t->d_name);
		fds = opendir(fdpath);
		while (fds && !found && (e = readdir(fds))) {
			ssize_t n;

			snprintf(link, sizeof(link), "%s/%s", fdpath, e->d_name);
			n = readlink(link, target, sizeof(target) - 1);
			found = n > 0 && (target[n] = 0, strstr(target, name));
		}
		if (fds)
			closedir(fds);
	}
	closedir(tasks);
	return found;
}

static int npfd_connection(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -1;

	while (dir && (e = readdir(dir))) {
		struct sockaddr_un a;
		socklen_t len = sizeof(a);
		int fd = atoi(e->d_name);

		if (e->d_name[0] != '.' && !getpeername(fd, (struct sockaddr *)&a, &len) &&
		    a.sun_family == AF_UNIX && !strcmp(a.sun_path, d.sock))
			found = fd;
	}
	if (dir)
		closedir(dir);
	return found;
}

/* io_uring_setup() fails (ENOSYS): libnpf gives npfd no ring of its own, Q's request is the first */
static void no_io_uring(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		child_fail(at.rep, "seccomp: %s", strerror(errno));
}

/*
 * An attacker's start as a client: uid 65534, killed with the test, a
 * region of FIRST_PAGES pages registered through libnpf (*m, *id); its
 * connection to npfd, found among its descriptors (raw requests go on it).
 * no_ring: libnpf gives npfd no eviction ring (no_io_uring()). The
 * client in *cp if cp.
 */
static int attacker_client(uint64_t **m, int *id, bool no_ring, struct npf_client **cp)
{
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fallback_ms = 500,
		 .timeout_ms = 5000);
	struct npf_client *c;
	int conn;

	adv_become_attacker();
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* after the setuid(), which clears it */
	if (getppid() != test_pid)
		_exit(1);
	if (no_ring)
		no_io_uring();
	c = npf_client__connect(&co);
	if (!c)
		child_fail(at.rep, "connect: %s", strerror(errno));
	*m = mmap(NULL, FIRST_PAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		  0);
	*id = npf_client__register(c, *m, FIRST_PAGES * PG, NULL);
	if (*id < 0)
		child_fail(at.rep, "register: %s", npf_client__errmsg(c));
	conn = npfd_connection();
	if (conn < 0)
		child_fail(at.rep, "no connection to %s among the descriptors", d.sock);
	if (cp)
		*cp = c;
	return conn;
}

/*
 * Q's request on connection conn, sent when the test writes 'e' to at.wgo:
 * EXEC's ring request (probe, to be fetched by npfd), or a device attach
 * to region id at m (FIRST_PAGES pages) of process owner, with table as
 * its IO page table (-1: a right one is made), times times in a row.
 * Reports "REQUEST status=S ms=M (error)" for each, and exits.
 */
static void __attribute__((noreturn))
q_request(int conn, int id, uint64_t *m, pid_t owner, int probe, int table, int times)
{
	union {
		struct npf_msg_hdr h;
		struct {
			struct npf_msg_hdr h;
			struct npf_evict_ring_req r;
		} ring;
		struct {
			struct npf_msg_hdr h;
			struct npf_device_attach_req a;
		} attach;
	} req;
	static char buf[NPF_MSG_MAX];
	struct npf_reply *r = (struct npf_reply *)(buf + sizeof(struct npf_msg_hdr));
	struct pollfd p = {.fd = conn, .events = POLLIN};
	int iopt = -1;
	size_t len;
	char go = 0;
	double t0;
	ssize_t n;

	memset(&req, 0, sizeof(req));
	if (at.phase == EXEC) {
		adv_hdr(&req.h, NPF_MSG_EVICT_RING, len = sizeof(req.ring));
		req.ring.r.fd = probe;
	} else if (table >= 0) {
		iopt = table;
		adv_hdr(&req.h, NPF_MSG_DEVICE_ATTACH, len = sizeof(req.attach));
		req.attach.a.region_id = (__u32)id;
	} else {
		/* an IO page table for the region, as libnpfnic makes one */
		struct npf_iopt_header h = {.magic = NPF_IOPT_MAGIC,
					    .version = NPF_IOPT_VERSION,
					    .start = (__u64)(uintptr_t)m,
					    .npages = FIRST_PAGES,
					    .pte_offset = sizeof(h),
					    .owner_tgid = (__u32)owner};

		iopt = memfd_create("npf-test-iopt", MFD_ALLOW_SEALING | MFD_CLOEXEC);
		if (iopt < 0 || ftruncate(iopt, sizeof(h) + FIRST_PAGES * 8) ||
		    pwrite(iopt, &h, sizeof(h), 0) != sizeof(h) ||
		    fcntl(iopt, F_ADD_SEALS, F_SEAL_SHRINK))
			child_fail(at.rep, "Q: the IO page table: %s", strerror(errno));
		adv_hdr(&req.h, NPF_MSG_DEVICE_ATTACH, len = sizeof(req.attach));
		req.attach.a.region_id = (__u32)id;
	}
	if (read(at.wgo, &go, 1) != 1 || go != 'e')
		child_fail(at.rep, "Q: unexpected command");
	while (times--) {
		t0 = th_now();
		if (adv_send(conn, &req, len, iopt >= 0 ? &iopt : NULL, iopt >= 0) != (ssize_t)len)
			child_fail(at.rep, "Q: send: %s", strerror(errno));
		n = poll(&p, 1, 10000) == 1 ? recv(conn, buf, sizeof(buf), 0) : -1;
		if (n < (ssize_t)(sizeof(struct npf_msg_hdr) + sizeof(*r)))
			child_fail(at.rep, "Q: no answer to the request within 10 s (%zd)", n);
		say(at.rep, "REQUEST status=%d ms=%d (%s)", r->status, (int)((th_now() - t0) * 1e3),
		    r->error);
	}
	_exit(0);
}

static void __attribute__((noreturn)) exec_attacker(void)
{
	char path[96];
	int conn, hold, id, probe;
	uint64_t *m;
	pid_t q;

	conn = attacker_client(&m, &id, true, NULL);
	for (uint64_t i = 0; i < FIRST_PAGES * PG / 8; i++)
		m[i] = word(9, i / 512, i % 512);
	probe = memfd_create(PROBE_NAME + strlen("memfd:"), 0); /* kept across the exec */
	if (probe < 0)
		child_fail(at.rep, "memfd_create: %s", strerror(errno));
	/* Q: a raw clone (no libnpf fork handler runs), with a copy of the descriptors */
	q = (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
	if (q < 0)
		child_fail(at.rep, "clone: %s", strerror(errno));
	if (!q)
		q_request(conn, id, m, getppid(), probe, -1, 1);
	say(at.rep, "ARMED region %d, Q %d", id, q);
	if (cmd_read() != 'x')
		child_fail(at.rep, "unexpected command");
	if (adv_connect(d.sock) < 0)
		child_fail(at.rep, "connect: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/hold", fm.dir);
	hold = open(path, O_RDONLY | O_CLOEXEC);
	if (hold < 0)
		child_fail(at.rep, "open %s: %s", path, strerror(errno));
	say(at.rep, "EXECING");
	execlp("sleep", "sleep", "1", (char *)NULL);
	child_fail(at.rep, "exec sleep: %s", strerror(errno));
}

/* CLOSE's attacker: a client with a region; Q, its child, passes the FUSE hold file as a table */
static void __attribute__((noreturn)) close_attacker(void)
{
	struct npf_client *c;
	char path[96];
	int id, conn, hold, ffd;
	uint64_t *m;
	pid_t q;

	conn = attacker_client(&m, &id, false, &c);
	/* a backing file there: refused by its mount's type, before a STATFS nobody answers */
	snprintf(path, sizeof(path), "%s/file", fm.dir);
	ffd = open(path, O_RDONLY | O_CLOEXEC);
	if (ffd < 0)
		child_fail(at.rep, "open %s: %s", path, strerror(errno));
	{
		NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = ffd);
		void *m2 = mmap(NULL, FIRST_PAGES * PG, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		double t0 = th_now();
		int rc = npf_client__register(c, m2, FIRST_PAGES * PG, &o);

		say(at.rep, "BACKING rc=%d ms=%d (%s)", rc, (int)((th_now() - t0) * 1e3),
		    rc < 0 ? npf_client__errmsg(c) : "");
	}
	snprintf(path, sizeof(path), "%s/hold", fm.dir);
	hold = open(path, O_RDONLY | O_CLOEXEC);
	if (hold < 0)
		child_fail(at.rep, "open %s: %s", path, strerror(errno));
	/* Q, a raw clone (no libnpf fork handler), sends it; exits without closing it */
	q = (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
	if (q < 0)
		child_fail(at.rep, "clone: %s", strerror(errno));
	if (!q) {
		say(at.rep, "READY");
		q_request(conn, id, m, getppid(), -1, hold, 1);
	}
	if (cmd_read() != 'r')
		child_fail(at.rep, "unexpected command");
	say(at.rep, "DONE");
	_exit(0); /* its own close of hold: the connection is aborted by now */
}

/*
 * Start phase which's attacker, a child running body (it never returns):
 * the test's ends of its command pipes in *cmd and *go, its reports in ch.
 */
static pid_t attacker_start(int which, void (*body)(void), int *cmd, int *go, struct chan *ch)
{
	int c[2], g[2], rep[2];
	pid_t pid;

	TH_ASSERT(!pipe(c) && !pipe(g) && !pipe(rep), "pipe: %s", strerror(errno));
	fflush(stdout);
	at = (struct attack){.phase = which, .cmd = c[0], .wgo = g[0], .rep = rep[1]};
	pid = fork();
	TH_ASSERT(pid >= 0, "fork: %s", strerror(errno));
	if (!pid) {
		signal(SIGALRM, SIG_DFL);
		alarm(TEST_ALARM_S);
		close(c[1]);
		close(g[1]);
		close(rep[0]);
		close(fm.reads);
		body();
		_exit(1);
	}
	th_child_started(pid);
	close(c[0]);
	close(g[0]);
	close(rep[1]);
	*cmd = c[1];
	*go = g[1];
	ch->fd = rep[0];
	return pid;
}

static void attacker_end(int cmd, int go, struct chan *ch)
{
	close(cmd);
	close(go);
	close(ch->fd);
}

/*
 * The attacker pid's holder waits in FUSE (the server saw its READ); then
 * its writer (thread writer, told through wgo) queues its mmap() behind
 * it. When its mmap_lock was held so.
 */
static double lock_held(pid_t pid, pid_t writer, int wgo)
{
	struct pollfd p = {.fd = fm.reads, .events = POLLIN};
	pid_t reader;
	char state;

	TH_ASSERT(poll(&p, 1, 5000) == 1 && read(fm.reads, &reader, sizeof(reader)) == 4,
		  "the FUSE server saw no READ of the attacker's page within 5 s");
	TH_ASSERT(write(wgo, "w", 1) == 1, "write: %s", strerror(errno));
	for (double t0 = th_now(); (state = task_state(pid, writer)) != 'D'; usleep(5000))
		TH_ASSERT(th_now() - t0 < 3, "the attacker's mmap() did not wait within 3 s (%c)",
			  state ? state : '?');
	printf("attacker %d: its READ (thread %d) waits in FUSE, its mmap() (thread %d) is "
	       "queued behind it\n",
	       pid, reader, writer);
	return th_now();
}

/*
 * Kept stuck until HOLD_S s after t_stuck (what was asked meanwhile was not
 * served by its letting go), still stuck then; then the FUSE connection is
 * aborted, and the attacker told (cmd).
 */
static void release_held(pid_t pid, pid_t writer, double t_stuck, int cmd)
{
	char state;

	while (th_now() < t_stuck + HOLD_S)
		usleep(20000);
	state = task_state(pid, writer);
	TH_ASSERT(state == 'D', "the attacker's mmap() no longer waits before the release (%c)",
		  state ? state : '?');
	fuse_release(&fm);
	printf("released: the FUSE connection aborted after %.1f s\n", th_now() - t_stuck);
	reap(fm.server, "the FUSE server", 5000);
	close(fm.reads);
	TH_ASSERT(write(cmd, "r", 1) == 1, "write: %s", strerror(errno));
}

/* ---- one phase ---- */

static void phase(int which)
{
	struct chan ch = {.who = phase_name[which]};
	int cmd, wgo, st;
	double t_stuck, t_send = 0;
	__u64 late0, late1;
	char *l;
	pid_t pid, writer;

	printf("\n== %s: the attacker %s while its mmap_lock is held for %d s\n", phase_name[which],
	       which == LOCK  ? "registers a region" :
	       which == WRITE ? "writes a page installed clean (npfd unprotects it on its loop)" :
	       which == UNREG ? "unregisters a region whose pages are in the swap store" :
				"sends nothing, a thread writes over budget",
	       HOLD_S);
	fuse_mount(&fm);
	late0 = late_now("before");
	pid = attacker_start(which, attacker, &cmd, &wgo, &ch);
	if (which == PASSIVE)
		chan_expect(&ch, "EVICTING", 30000);
	if (which == UNREG)
		chan_expect(&ch, "STORED", 30000);
	writer = atoi(chan_expect(&ch, "ARMED writer=", 10000));

	t_stuck = lock_held(pid, writer, wgo);
	if (which == LOCK || which == WRITE || which == UNREG) {
		TH_ASSERT(write(cmd, "g", 1) == 1, "write: %s", strerror(errno));
		chan_expect(&ch, "SENDING", 2000);
		t_send = th_now();
	}
	wait_stuck(late0);

	run_victim();

	late1 = late_now("while the attacker is stuck");
	TH_ASSERT(late1 > late0, "mm_calls_late did not grow (%llu) while an attacker is stuck",
		  (unsigned long long)late1);
	if (which == LOCK) {
		int rc, ms;

		l = chan_expect(&ch, "REGISTER rc=",
				(int)((t_send + ANSWER_MS / 1e3 - th_now()) * 1e3) + 500);
		TH_ASSERT(sscanf(l, "%d ms=%d", &rc, &ms) == 2, "bad report: %s", l);
		TH_ASSERT(
			/* libnpf's own timeout is 5 s: an error sooner is npfd's answer */
			rc < 0 && ms <= ANSWER_MS,
			"the stuck registration: rc %d after %d ms; expected npfd's refusal within "
			"%d ms",
			rc, ms, ANSWER_MS);
	}

	if (which == UNREG) {
		int rc, ms;

		l = chan_expect(&ch, "UNREGISTER rc=",
				(int)((t_send + ANSWER_MS / 1e3 - th_now()) * 1e3) + 500);
		TH_ASSERT(sscanf(l, "%d ms=%d", &rc, &ms) == 2, "bad report: %s", l);
		/* its pages put back, its UFFDIO_UNREGISTER left to finish: done, for the client */
		TH_ASSERT(rc == 0 && ms <= ANSWER_MS,
			  "the unregistration: rc %d after %d ms; expected 0 within %d ms", rc, ms,
			  ANSWER_MS);
	}

	/* keep it stuck for HOLD_S s: the calls above were not served by its letting go */
	release_held(pid, writer, t_stuck, cmd);
	if (which == PASSIVE || which == WRITE || which == UNREG)
		chan_expect(&ch, "VERIFIED", 30000);
	chan_expect(&ch, which == UNREG ? "UNREGISTERED" : "ADOPTED", 15000);
	chan_expect(&ch, "DONE", 5000);
	st = reap(pid, "the attacker", 5000);
	TH_ASSERT(WIFEXITED(st) && !WEXITSTATUS(st), "the attacker ended with status 0x%x", st);
	attacker_end(cmd, wgo, &ch);
	late1 = late_now("after the release");
	TH_ASSERT(late1 == late0 + 1,
		  "mm_calls_late grew by %llu for one stuck attacker: expected 1 (each "
		  "stuck client once, not each call)",
		  (unsigned long long)(late1 - late0));
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
}

/*
 * EXEC: npfd is stopped while the attacker connects once more and starts
 * its execve(); once the FLUSH waits, npfd goes on. It must take that
 * connection, answer a status request and the ring request (a refusal,
 * after the deadline: one late call), and serve a victim, while the exec
 * waits; after the release the exec ends and npfd counts nothing more.
 */
static void phase_exec(int which)
{
	const char *what = which == EXEC ? "ring request" : "device attach";
	struct chan ch = {.who = phase_name[which]};
	int cmd, qgo, st, rc, ms;
	pid_t pid, flusher = 0;
	double t_stuck, t_send;
	__u64 late0, late1;
	char *l;

	printf("\n== %s: the attacker's execve() waits in a FUSE FLUSH for %d s (its "
	       "exec_update_lock held); npfd takes its connection, its %s\n",
	       phase_name[which], HOLD_S, what);
	fuse_mount(&fm);
	late0 = late_now("before");
	pid = attacker_start(which, exec_attacker, &cmd, &qgo, &ch);
	chan_expect(&ch, "ARMED", 10000);
	/* what tells, below, whether npfd kept it (read now: not once the exec waits) */
	TH_ASSERT(holds_file(pid, PROBE_NAME), "the attacker holds no %s", PROBE_NAME);

	TH_ASSERT(!kill(d.pid, SIGSTOP), "SIGSTOP npfd: %s", strerror(errno));
	npfd_stopped = 1;
	TH_ASSERT(write(cmd, "x", 1) == 1, "write: %s", strerror(errno));
	chan_expect(&ch, "EXECING", 5000);
	{
		struct pollfd p = {.fd = fm.reads, .events = POLLIN};

		TH_ASSERT(poll(&p, 1, 5000) == 1 && read(fm.reads, &flusher, sizeof(flusher)) == 4,
			  "the FUSE server saw no FLUSH of the attacker's hold file within 5 s");
	}
	TH_ASSERT(flusher == pid, "the FLUSH came from pid %d, not the attacker %d", flusher, pid);
	t_stuck = th_now();
	TH_ASSERT(!kill(d.pid, SIGCONT), "SIGCONT npfd: %s", strerror(errno));
	npfd_stopped = 0;
	printf("attacker %d: its execve() waits in the FLUSH; npfd goes on, with its connection "
	       "to take\n",
	       pid);

	/* the connection is taken first: an answer says the loop went past it */
	late_now("while its exec waits, after its connection");
	TH_ASSERT(write(qgo, "e", 1) == 1, "write: %s", strerror(errno));
	t_send = th_now();
	l = chan_expect(&ch, "REQUEST status=", ANSWER_MS + 500);
	TH_ASSERT(sscanf(l, "%d ms=%d", &rc, &ms) == 2, "bad report: %s", l);
	TH_ASSERT(rc < 0 && ms <= ANSWER_MS,
		  "the %s of a process whose exec waits: status %d after %d ms; "
		  "expected npfd's refusal within %d ms",
		  what, rc, ms, ANSWER_MS);
	printf("%s refused after %.0f ms\n", what, (th_now() - t_send) * 1e3);

	run_victim();

	late1 = late_now("while its exec waits");
	TH_ASSERT(late1 == late0 + 1,
		  "mm_calls_late grew by %llu: expected 1 (the %s's pidfd_getfd() or read of "
		  "its maps; its connection is taken without waiting)",
		  (unsigned long long)(late1 - late0), what);
	while (th_now() < t_stuck + HOLD_S)
		usleep(20000);
	fuse_release(&fm);
	printf("released: the FUSE connection aborted after %.1f s\n", th_now() - t_stuck);
	reap(fm.server, "the FUSE server", 5000);
	close(fm.reads);
	/* its exec goes on: sleep 1 */
	st = reap(pid, "the attacker's sleep", 5000);
	TH_ASSERT(WIFEXITED(st) && !WEXITSTATUS(st), "the attacker ended with status 0x%x", st);
	attacker_end(cmd, qgo, &ch);
	TH_ASSERT(late_now("after the release") == late1, "mm_calls_late grew after the release");
	/* the late pidfd_getfd() came through while the exec'd sleep ran: what it got is not kept */
	TH_ASSERT(!holds_file(d.pid, PROBE_NAME), "npfd keeps the attacker's %s, fetched late",
		  PROBE_NAME);
	if (which == EXEC)
		printf("npfd holds no %s: the late pidfd_getfd()'s descriptor was closed\n",
		       PROBE_NAME);
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
}

/*
 * PROBE: the attacker, no client of npfd, maps the test's executable (it
 * runs it) and holds its own mmap_lock; then Q, a client of the same
 * user, attaches a device. npfd's uprobe on that executable is its first
 * (no process of it has one), and the kernel's uprobe_register() takes
 * the mmap_lock of every process that maps the file: the attacker's.
 * npfd must refuse the attach at its deadline (the attach is made on its
 * worker), refuse Q's next at once while the first waits (not another
 * deadline), and serve a victim meanwhile. Q is not given up: any user
 * that maps the file holds the attach. The kernel holds its dup_mmap_sem
 * for as long as an attach waits, and no process on the machine can
 * fork() then: the victim and Q are forked before Q asks, and nothing
 * here forks until the release.
 */
static void phase_probe(void)
{
	struct chan ch = {.who = phase_name[PROBE]}, qch = {.who = "Q"};
	struct victim_run v;
	int cmd, wgo, qgo[2], qrep[2], st, rc, ms;
	__u64 late0, late1;
	pid_t pid, writer, q;
	double t_stuck;
	char *l;

	printf("\n== PROBE: a process that maps the test's executable holds its mmap_lock for %d "
	       "s; another of its user attaches a device (npfd's uprobe on that executable)\n",
	       HOLD_S);
	fuse_mount(&fm);
	late0 = late_now("before");
	pid = attacker_start(PROBE, attacker, &cmd, &wgo, &ch);
	writer = atoi(chan_expect(&ch, "ARMED writer=", 10000));
	t_stuck = lock_held(pid, writer, wgo);

	TH_ASSERT(!pipe(qgo) && !pipe(qrep), "pipe: %s", strerror(errno));
	fflush(stdout);
	q = fork();
	TH_ASSERT(q >= 0, "fork: %s", strerror(errno));
	if (!q) {
		uint64_t *m;
		int id, conn;

		signal(SIGALRM, SIG_DFL);
		alarm(TEST_ALARM_S);
		close(qgo[1]);
		close(qrep[0]);
		close(fm.reads);
		at = (struct attack){.phase = PROBE, .cmd = -1, .wgo = qgo[0], .rep = qrep[1]};
		conn = attacker_client(&m, &id, false, NULL);
		say(at.rep, "READY");
		q_request(conn, id, m, getpid(), -1, -1, 2);
	}
	th_child_started(q);
	close(qgo[0]);
	close(qrep[1]);
	qch.fd = qrep[0];
	chan_expect(&qch, "READY", 10000);
	victim_start(&v);

	TH_ASSERT(write(qgo[1], "e", 1) == 1, "write: %s", strerror(errno));
	l = chan_expect(&qch, "REQUEST status=", ANSWER_MS + 500);
	TH_ASSERT(sscanf(l, "%d ms=%d", &rc, &ms) == 2, "bad report: %s", l);
	TH_ASSERT(rc < 0 && ms <= ANSWER_MS,
		  "the device attach while a process that maps the executable is stuck: status "
		  "%d after %d ms; expected npfd's refusal within %d ms",
		  rc, ms, ANSWER_MS);
	printf("Q's device attach refused after %d ms\n", ms);
	/* the next waits no deadline more: refused at once while the first waits (EAGAIN) */
	l = chan_expect(&qch, "REQUEST status=", ANSWER_MS + 500);
	TH_ASSERT(sscanf(l, "%d ms=%d", &rc, &ms) == 2, "bad report: %s", l);
	TH_ASSERT(rc == -EAGAIN && ms < 100,
		  "a second attach while the first waits: status %d after %d ms; expected "
		  "-EAGAIN at once",
		  rc, ms);
	printf("Q's second attach refused at once (%d ms)\n", ms);
	victim_finish(&v);
	late1 = late_now("while the attach waits");
	TH_ASSERT(late1 == late0 + 1, "mm_calls_late grew by %llu: expected 1 (Q's attach)",
		  (unsigned long long)(late1 - late0));

	release_held(pid, writer, t_stuck, cmd);
	chan_expect(&ch, "DONE", 5000);
	st = reap(pid, "the attacker", 5000);
	TH_ASSERT(WIFEXITED(st) && !WEXITSTATUS(st), "the attacker ended with status 0x%x", st);
	attacker_end(cmd, wgo, &ch);
	st = reap(q, "Q", 5000);
	TH_ASSERT(WIFEXITED(st) && !WEXITSTATUS(st), "Q ended with status 0x%x", st);
	close(qgo[1]);
	close(qch.fd);
	/* the attach came through late, on npfd's abandoned worker: its link is gone with it */
	TH_ASSERT(late_now("after the release") == late1, "mm_calls_late grew after the release");
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
}

/* The process thread tid belongs to (a FUSE request names the thread), 0 if unknown. No lock. */
static pid_t tgid_of(pid_t tid)
{
	char path[64], buf[4096], *p;

	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	th_read_text(path, buf, sizeof(buf));
	p = strstr(buf, "\nTgid:");
	return p ? (pid_t)atoi(p + 6) : 0;
}

/*
 * CLOSE: first the attacker registers a region backed by its FUSE "file",
 * whose STATFS the server never answers: refused at once by its mount's
 * type (npfd may use this mount: root made it, allow_other, and its
 * fstatfs() would ask). Then it passes npfd a descriptor of its FUSE
 * "hold" file as a device's IO page table. npfd refuses it and closes it, and a
 * close of a file on FUSE sends its server a FLUSH and waits for the
 * answer, uninterruptibly: never answered here. The close must be made
 * off the loop (mmcall_close()): the refusal comes, a victim is served,
 * one late call is counted, and after the release npfd holds no
 * descriptor of the file.
 */
static void phase_close(void)
{
	struct chan ch = {.who = phase_name[CLOSE]};
	int cmd, go, st, rc, ms;
	__u64 late0, late1;
	double t_send;
	pid_t pid;
	char *l;

	printf("\n== CLOSE: the attacker passes a descriptor of a FUSE file whose FLUSH is "
	       "never answered\n");
	fuse_mount(&fm);
	late0 = late_now("before");
	pid = attacker_start(CLOSE, close_attacker, &cmd, &go, &ch);
	l = chan_expect(&ch, "BACKING rc=", ANSWER_MS + 5000);
	TH_ASSERT(sscanf(l, "%d ms=%d", &rc, &ms) == 2, "bad report: %s", l);
	TH_ASSERT(rc == -EXDEV && ms <= ANSWER_MS,
		  "a backing file on FUSE (its STATFS never answered): %d after %d ms; expected "
		  "-EXDEV within %d ms",
		  rc, ms, ANSWER_MS);
	chan_expect(&ch, "READY", 10000);
	TH_ASSERT(write(go, "e", 1) == 1, "write: %s", strerror(errno));
	t_send = th_now();
	l = chan_expect(&ch, "REQUEST status=", ANSWER_MS + 500);
	TH_ASSERT(sscanf(l, "%d ms=%d", &rc, &ms) == 2, "bad report: %s", l);
	TH_ASSERT(rc < 0, "a FUSE file taken for an IO page table: status %d", rc);
	/* Q's own close of it, as it exits, sends one too: npfd's is looked for */
	for (double t0 = th_now();;) {
		struct pollfd p = {.fd = fm.reads, .events = POLLIN};
		pid_t flusher = 0;

		TH_ASSERT(poll(&p, 1, 200) >= 0, "poll: %s", strerror(errno));
		if (p.revents && read(fm.reads, &flusher, sizeof(flusher)) == 4 &&
		    tgid_of(flusher) == d.pid)
			break;
		TH_ASSERT(th_now() - t0 < 5, "the FUSE server saw no FLUSH of npfd's within 5 s");
	}
	printf("npfd refused it after %d ms; its close waits in the FLUSH\n", ms);
	run_victim();
	late1 = late_now("while npfd's close waits");
	TH_ASSERT(late1 == late0 + 1, "mm_calls_late grew by %llu: expected 1 (the close)",
		  (unsigned long long)(late1 - late0));
	while (th_now() < t_send + HOLD_S)
		usleep(20000);
	fuse_release(&fm);
	printf("released: the FUSE connection aborted after %.1f s\n", th_now() - t_send);
	reap(fm.server, "the FUSE server", 5000);
	close(fm.reads);
	TH_ASSERT(write(cmd, "r", 1) == 1, "write: %s", strerror(errno));
	chan_expect(&ch, "DONE", 5000);
	st = reap(pid, "the attacker", 5000);
	TH_ASSERT(WIFEXITED(st) && !WEXITSTATUS(st), "the attacker ended with status 0x%x", st);
	attacker_end(cmd, go, &ch);
	TH_ASSERT(late_now("after the release") == late1, "mm_calls_late grew after the release");
	for (double t0 = th_now(); holds_file(d.pid, "/hold"); usleep(20000))
		TH_ASSERT(th_now() - t0 < 2,
			  "npfd still holds the hold file 2 s after the release");
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
}

/* $ADV_STUCK_PHASES (e.g. "UNREG,EXEC") runs only those, to look at one; all by default */
static bool phase_wanted(int which)
{
	const char *only = getenv("ADV_STUCK_PHASES");
	size_t len = strlen(phase_name[which]);

	if (!only)
		return true;
	for (const char *p = only; (p = strstr(p, phase_name[which])); p += len)
		if ((p == only || p[-1] == ',') && (p[len] == ',' || !p[len]))
			return true;
	return false;
}

int main(void)
{
	const char *extra[] = {"--mm-call-timeout-ms", MM_CALL_TIMEOUT, NULL};
	const char *a = getenv("NPF_TEST_ALARM");
	unsigned int secs = a ? (unsigned int)strtoul(a, NULL, 10) : 0;
	__u64 late_start, phases = 0;

	th_require_root();
	test_pid = getpid();
	/* the harness's alarm, but its handler aborts the FUSE connection first */
	if (!secs || secs > TEST_ALARM_S)
		secs = TEST_ALARM_S;
	th_alarm_len = snprintf(th_alarm_msg, sizeof(th_alarm_msg),
				"\nFAIL: the test did not finish within %u s (its alarm)\n", secs);
	signal(SIGALRM, on_alarm);
	alarm(secs);
	atexit(on_exit_release);
	fuse_check();
	/* the FUSE mounts are this test's alone, and go with its last process */
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		th_skip("no mount namespace of its own: %s", strerror(errno));
	th_npfd_start(&d, extra);
	adv_open_to_group(&d);
	printf("npfd %d, with --mm-call-timeout-ms %s\n", d.pid, MM_CALL_TIMEOUT);
	late_start = late_now("at the start");

	for (int which = LOCK; which <= CLOSE; which++) {
		if (!phase_wanted(which))
			continue;
		if (which == EXEC || which == EXECNIC)
			phase_exec(which);
		else if (which == PROBE)
			phase_probe();
		else if (which == CLOSE)
			phase_close();
		else
			phase(which);
		phases++;
	}

	TH_ASSERT(late_now("at the end") == late_start + phases,
		  "mm_calls_late: expected one per stuck attacker");
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
