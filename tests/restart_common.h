/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by the restart tests (tests/restart_*.c): an npfd that is killed
 * and started again on the same socket and pin directory, and a CPU
 * workload whose every touched byte is checked.
 *
 * The workload: a file-backed and an anonymous region, never touched before
 * registration; each thread owns the pages p with p % RS_THREADS == its
 * index, so it knows what each should hold: a file page its words
 * (rs_word()), an anonymous page zeros on first touch and, once the thread
 * has written its mark there, the mark. It also knows which of its pages
 * are absent (never touched, or dropped since): a touch of one is a fault
 * npfd must serve, counted in faults[] -- each such touch that returns
 * with the right bytes is a fault served.
 */
#ifndef NPF_TEST_RESTART_COMMON_H
#define NPF_TEST_RESTART_COMMON_H

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include "npf.h"

#define RS_THREADS 3

struct rs_npfd {
	pid_t pid;
	char dir[32];
	char sock[100];
	char bpffs[128];
	char log[128];
	char swap[48];	    /* its swap store directory: the stores outlive a killed npfd */
	const char *option; /* one more command-line option for npfd, or NULL */
	int starts;
};

/* Start npfd (again) on the same socket and pins; the log is appended to. */
static inline void rs_npfd_start(struct rs_npfd *d)
{
	char bin[256];
	double t0;

	th_require_root();
	if (!d->dir[0]) {
		snprintf(d->dir, sizeof(d->dir), "/tmp/npf-test-XXXXXX");
		TH_ASSERT(mkdtemp(d->dir), "mkdtemp: %s", strerror(errno));
		snprintf(d->sock, sizeof(d->sock), "%s/npfd.sock", d->dir);
		snprintf(d->log, sizeof(d->log), "%s/npfd.log", d->dir);
		snprintf(d->swap, sizeof(d->swap), "%s/swap", d->dir);
		snprintf(d->bpffs, sizeof(d->bpffs), "/sys/fs/bpf/npf-test-%d", getpid());
		setenv("NPF_SOCKET", d->sock, 1);
	}
	snprintf(bin, sizeof(bin), "%s/npfd", th_bin_dir());
	fflush(stdout);
	/*
	 * vfork, not fork: this process is an npf client, and libnpf's
	 * pthread_atfork() handlers would register the child's copies of its
	 * regions (the child only runs npfd). vfork runs no handlers and copies
	 * no mm.
	 */
	d->pid = vfork();
	TH_ASSERT(d->pid >= 0, "vfork: %s", strerror(errno));
	if (!d->pid) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 1);
		}
		execl(bin, bin, "--foreground", "--config", "/dev/null", "--socket", d->sock,
		      "--bpffs", d->bpffs, "--swap-dir", d->swap, d->option, (char *)NULL);
		_exit(127);
	}
	th_child_started(d->pid);
	d->starts++;
	for (t0 = th_now(); th_now() - t0 < 20; usleep(2000)) {
		TH_ASSERT(waitpid(d->pid, NULL, WNOHANG) == 0, "npfd exited during start-up");
		if (th_connectable(d->sock))
			return;
	}
	th_fail("npfd did not open %s within 20 s", d->sock);
}

static inline void rs_npfd_kill(struct rs_npfd *d, int sig)
{
	kill(d->pid, sig);
	waitpid(d->pid, NULL, 0);
	d->pid = 0;
}

/* SIGSTOP npfd and wait until it is stopped ('T' in /proc/PID/stat). */
static inline void rs_npfd_stop_signal(struct rs_npfd *d)
{
	char path[64], buf[512], *p;
	int i;

	TH_ASSERT(!kill(d->pid, SIGSTOP), "SIGSTOP npfd: %s", strerror(errno));
	snprintf(path, sizeof(path), "/proc/%d/stat", d->pid);
	for (i = 0; i < 5000; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = 0;
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2] == 'T')
			return;
		usleep(1000);
	}
	th_fail("npfd did not stop");
}

static inline void rs_npfd_dump_log(struct rs_npfd *d)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "echo '--- npfd log (last 150 lines):'; tail -n 150 %s", d->log);
	if (system(cmd) < 0)
		perror("system");
}

/*
 * fn(arg) in a thread that must end within secs: a touch that waits for
 * good fails the test (with npfd's log) instead of hanging it.
 */
static inline void rs_run_within(struct rs_npfd *d, void *(*fn)(void *), void *arg, int secs,
				 const char *what)
{
	struct timespec until;
	pthread_t th;

	TH_ASSERT(!pthread_create(&th, NULL, fn, arg), "pthread_create");
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += secs;
	if (pthread_timedjoin_np(th, NULL, &until)) {
		rs_npfd_dump_log(d);
		th_fail("%s: a read still waits after %d s", what, secs);
	}
}

static inline void rs_npfd_cleanup(struct rs_npfd *d)
{
	char cmd[256];

	if (d->pid > 0)
		rs_npfd_kill(d, SIGTERM);
	snprintf(cmd, sizeof(cmd), "rm -rf %s; rm -rf %s", d->dir, d->bpffs);
	if (system(cmd) < 0)
		perror("system");
}

/* ---- what libnpf says (npf_set_print): counted, and kept for a failure ---- */

static int rs_reconnects, rs_fallbacks, rs_handbacks, rs_sigbus;
static char rs_last_warn[512];

static inline int rs_print(enum npf_print_level level, const char *fmt, va_list ap)
{
	char buf[512];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	if (strstr(buf, "reconnected to npfd"))
		__atomic_fetch_add(&rs_reconnects, 1, __ATOMIC_RELAXED);
	if (strstr(buf, "until npfd is back"))
		__atomic_fetch_add(&rs_fallbacks, 1, __ATOMIC_RELAXED);
	if (strstr(buf, "serves this process's faults again"))
		__atomic_fetch_add(&rs_handbacks, 1, __ATOMIC_RELAXED);
	if (strstr(buf, "SIGBUS to thread"))
		__atomic_fetch_add(&rs_sigbus, 1, __ATOMIC_RELAXED);
	if (level == NPF_WARN)
		snprintf(rs_last_warn, sizeof(rs_last_warn), "%s", buf);
	if (getenv("RS_VERBOSE") || level == NPF_WARN)
		fputs(buf, stdout);
	return 0;
}

/* ---- the CPU workload ---- */

#define RS_SALT 0x9e3779b97f4a7c15ULL

struct rs_work {
	uint64_t len; /* of each region */
	char *file_mem, *anon_mem;
	uint8_t *anon_marked;		      /* per page: the owner wrote its mark */
	uint8_t *file_present, *anon_present; /* per page: touched and not dropped since */
	volatile int stop;
	uint64_t touches[RS_THREADS];
	uint64_t faults[RS_THREADS]; /* touches of absent pages: faults served */
	int file_fd;
	pthread_t th[RS_THREADS];
};

static inline uint64_t rs_word(uint64_t page, uint64_t w)
{
	return page * 512 + w + RS_SALT;
}

static inline void rs_make_file(struct rs_work *w, const char *dir)
{
	char path[128];
	uint64_t *buf = malloc(1 << 20), c, i;
	int fd;

	snprintf(path, sizeof(path), "%s/backing", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	TH_ASSERT(fd >= 0 && buf, "create %s: %s", path, strerror(errno));
	for (c = 0; c < w->len >> 20; c++) {
		for (i = 0; i < (1 << 20) / 8; i++)
			buf[i] = rs_word((c << 20) / 4096 + i / 512, i % 512);
		TH_ASSERT(pwrite(fd, buf, 1 << 20, (off_t)(c << 20)) == 1 << 20, "write %s", path);
	}
	free(buf);
	w->file_fd = fd;
}

struct rs_thread_arg {
	struct rs_work *w;
	unsigned int idx;
};

static inline void *rs_thread(void *arg)
{
	struct rs_thread_arg *a = arg;
	struct rs_work *w = a->w;
	uint64_t pages = w->len / 4096, seed = a->idx * 7919 + 17;
	unsigned int me = a->idx;

	while (!w->stop) {
		const uint64_t *pg;
		uint64_t p, i, mark;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		p = (seed >> 33) % pages;
		p -= p % RS_THREADS;
		p += me;
		if (p >= pages)
			continue;
		pg = (const uint64_t *)(w->file_mem + p * 4096);
		if (!w->file_present[p]) {
			__atomic_fetch_add(&w->faults[me], 1, __ATOMIC_RELAXED);
			w->file_present[p] = 1;
		}
		/*
		 * Half the touches write first (the file's own word back): a write
		 * fault must be served from the file too, never with zeros.
		 */
		if (seed & (1ULL << 40))
			*(volatile uint64_t *)pg = rs_word(p, 0);
		for (i = 0; i < 512; i++)
			if (pg[i] != rs_word(p, i))
				th_fail("file region page %llu word %llu: read 0x%llx, want 0x%llx (a file page replaced?)",
					(unsigned long long)p, (unsigned long long)i,
					(unsigned long long)pg[i],
					(unsigned long long)rs_word(p, i));
		/* drop it now and then: its next touch faults again (a REMOVE event first) */
		if (!(seed & (3ULL << 20))) {
			TH_ASSERT(!madvise((char *)pg, 4096, MADV_DONTNEED), "madvise: %s",
				  strerror(errno));
			w->file_present[p] = 0;
		}

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		p = (seed >> 33) % pages;
		p -= p % RS_THREADS;
		p += me;
		if (p >= pages)
			continue;
		mark = w->anon_marked[p] ? ~rs_word(p, 0) : 0;
		pg = (const uint64_t *)(w->anon_mem + p * 4096);
		if (!w->anon_present[p]) {
			__atomic_fetch_add(&w->faults[me], 1, __ATOMIC_RELAXED);
			w->anon_present[p] = 1;
		}
		for (i = 0; i < 512; i++)
			if (pg[i] != (mark ? mark + i : 0))
				th_fail("anonymous region page %llu word %llu: read 0x%llx, want 0x%llx",
					(unsigned long long)p, (unsigned long long)i,
					(unsigned long long)pg[i],
					(unsigned long long)(mark ? mark + i : 0));
		if (!mark) {
			uint64_t *wp = (uint64_t *)(w->anon_mem + p * 4096);

			for (i = 0; i < 512; i++)
				wp[i] = ~rs_word(p, 0) + i;
			w->anon_marked[p] = 1;
		} else if (!(seed & (3ULL << 20))) {
			TH_ASSERT(!madvise((char *)pg, 4096, MADV_DONTNEED), "madvise: %s",
				  strerror(errno));
			w->anon_marked[p] = 0;
			w->anon_present[p] = 0;
		}
		__atomic_fetch_add(&w->touches[me], 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static inline uint64_t rs_sum(const uint64_t *v)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < RS_THREADS; i++)
		n += __atomic_load_n(&v[i], __ATOMIC_RELAXED);
	return n;
}

static inline uint64_t rs_touches(struct rs_work *w)
{
	return rs_sum(w->touches);
}

/* Faults the workload made (touches of absent pages), each served with the right bytes. */
static inline uint64_t rs_faults(struct rs_work *w)
{
	return rs_sum(w->faults);
}

/* Map and register both regions (len bytes each) through c, then start the threads. */
static inline void rs_work_start(struct rs_work *w, struct npf_client *c, const char *dir,
				 uint64_t len)
{
	static struct rs_thread_arg args[RS_THREADS];
	int i, id;

	w->len = len;
	rs_make_file(w, dir);
	w->file_mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	w->anon_mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	w->anon_marked = calloc(len / 4096, 1);
	w->file_present = calloc(len / 4096, 1);
	w->anon_present = calloc(len / 4096, 1);
	TH_ASSERT(w->file_mem != MAP_FAILED && w->anon_mem != MAP_FAILED && w->anon_marked &&
			  w->file_present && w->anon_present,
		  "mmap: %s", strerror(errno));
	/*
	 * The anonymous region first: libnpf hands regions to a new npfd in
	 * this order, so the file region's faults may reach npfd before the
	 * file region is adopted -- and must not be zero-filled.
	 */
	{
		NPF_OPTS(npf_region_opts, o, .name = "rs-anon");
		id = npf_client__register(c, w->anon_mem, len, &o);
		TH_ASSERT(id > 0, "register the anonymous region: %s", npf_client__errmsg(c));
	}
	{
		NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = w->file_fd,
			 .name = "rs-file");
		id = npf_client__register(c, w->file_mem, len, &o);
		TH_ASSERT(id > 0, "register the file region: %s", npf_client__errmsg(c));
	}
	/* the library keeps its own reference: the caller's may go */
	close(w->file_fd);
	w->file_fd = -1;
	for (i = 0; i < RS_THREADS; i++) {
		args[i] = (struct rs_thread_arg){w, (unsigned int)i};
		TH_ASSERT(!pthread_create(&w->th[i], NULL, rs_thread, &args[i]), "pthread_create");
	}
}

/* Stop the threads; each must finish its touch within secs (none is stuck in a fault). */
static inline void rs_work_stop(struct rs_work *w, double secs)
{
	struct timespec ts;
	int i;

	w->stop = 1;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)secs;
	for (i = 0; i < RS_THREADS; i++)
		TH_ASSERT(!pthread_timedjoin_np(w->th[i], NULL, &ts),
			  "workload thread %d is stuck (in a fault nobody serves?)", i);
}

static inline void rs_work_free(struct rs_work *w)
{
	free(w->anon_marked);
	free(w->file_present);
	free(w->anon_present);
	w->anon_marked = w->file_present = w->anon_present = NULL;
}

static inline bool rs_wait_count(struct rs_work *w, uint64_t (*count)(struct rs_work *),
				 uint64_t more, double secs)
{
	uint64_t want = count(w) + more;
	double t0 = th_now();

	while (count(w) < want)
		if (th_now() - t0 > secs)
			return false;
		else
			usleep(1000);
	return true;
}

/* Wait until the workload has made `more` touches, at most secs; false if it did not. */
static inline bool rs_progress(struct rs_work *w, uint64_t more, double secs)
{
	return rs_wait_count(w, rs_touches, more, secs);
}

/* Wait until `more` of the workload's faults were served, at most secs. */
static inline bool rs_fault_progress(struct rs_work *w, uint64_t more, double secs)
{
	return rs_wait_count(w, rs_faults, more, secs);
}

#endif
