// SPDX-License-Identifier: GPL-2.0
/*
 * Hostile budget and eviction-ring requests are refused, each with its
 * errno, and leave npfd holding no descriptor they brought:
 *  - a budget that is not a page multiple, too small for a low watermark,
 *    with an unknown key, for a region that does not exist, for a
 *    file-backed region whose descriptor is read-only (dirty pages could
 *    not be written back), for another user's region;
 *  - an eviction ring that is no descriptor, not an io_uring, an io_uring
 *    without a submission thread (npfd's MADV_DONTNEED would run in its
 *    own address space), of the wrong size, whose thread is another
 *    process's, with unknown flags, or sent twice;
 *  - an unprivileged client's ring whose memory it wrote over: a header
 *    that says 2^30 entries (refused; liburing would have npfd index and
 *    unmap by it), a completion queue that says 2^32 - 1 completions wait
 *    (refused at the adoption; after it, skipped: npfd still answers
 *    another request while the client keeps writing so);
 *  - a budget on a sparse 16 TiB region with 64 pages installed: each
 *    look of the eviction's hand is bounded, so npfd still answers another
 *    request, and spends little CPU, while it cannot find its victims;
 *  - the same region with every installed page late (the client holds
 *    its zaps behind a gate of its own): a pick that finds no victim is
 *    not tried again after every event npfd handles, so a request paced
 *    at a millisecond costs npfd little CPU.
 */
#include <grp.h>
#include <linux/io_uring.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <dirent.h>
#include "harness.h"
#include "adv.h"
#include "budget.h"
#include "npf.h"

#define PG 4096UL

static int ring(unsigned int entries, bool sqpoll)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof(p));
	if (sqpoll) {
		p.flags = IORING_SETUP_SQPOLL;
		p.sq_thread_idle = 1;
	}
	return (int)syscall(__NR_io_uring_setup, entries, &p);
}

/* A raw connection with one registered anonymous region and no eviction ring. */
static int raw_client(const char *sock, char **mem)
{
	struct {
		struct npf_msg_hdr h;
		struct npf_region_req r;
	} m;
	char err[NPF_ERRMSG_LEN];
	int fd = adv_connect(sock), uffd = adv_uffd();

	TH_ASSERT(fd >= 0, "raw client: %s", strerror(errno));
	*mem = mmap(NULL, 64 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(&m, 0, sizeof(m));
	adv_hdr(&m.h, NPF_MSG_REGION_REGISTER, sizeof(m));
	m.r = (struct npf_region_req){
		.start = (__u64)(uintptr_t)*mem, .length = 64 * PG, .backing = NPF_BACKING_ANON};
	TH_ASSERT(adv_send(fd, &m, sizeof(m), &uffd, 1) == (ssize_t)sizeof(m), "send");
	TH_ASSERT(adv_reply(fd, err, sizeof(err), NULL, 0, 5000) == 0, "raw register: %s", err);
	close(uffd);
	return fd;
}

static int send_ring(int fd, __s32 ring_fd, __u32 flags, char *err)
{
	struct {
		struct npf_msg_hdr h;
		struct npf_evict_ring_req r;
	} m = {.r = {.fd = ring_fd, .flags = flags}};

	adv_hdr(&m.h, NPF_MSG_EVICT_RING, sizeof(m));
	TH_ASSERT(adv_send(fd, &m, sizeof(m), NULL, 0) == (ssize_t)sizeof(m), "send");
	return adv_reply(fd, err, NPF_ERRMSG_LEN, NULL, 0, 5000);
}

static void expect(int got, int want, const char *what, const char *why)
{
	printf("%-44s -> %d (%s)\n", what, got, why);
	TH_ASSERT(got == want, "%s: got %d (%s), want %d", what, got, why, want);
}

static const char *sock_path;
static __u32 victim_region;

/* As nobody: set the budget of root's region. */
static void attacker(void *arg)
{
	struct {
		struct npf_msg_hdr h;
		struct npf_region_set_req r;
	} m = {.r = {.region_id = victim_region, .key = NPF_SET_BUDGET, .value = 64 * PG}};
	char err[NPF_ERRMSG_LEN];
	int fd = adv_connect(sock_path);

	(void)arg;
	TH_ASSERT(fd >= 0, "attacker connect: %s", strerror(errno));
	adv_hdr(&m.h, NPF_MSG_REGION_SET, sizeof(m));
	TH_ASSERT(adv_send(fd, &m, sizeof(m), NULL, 0) == (ssize_t)sizeof(m), "send");
	expect(adv_reply(fd, err, sizeof(err), NULL, 0, 5000), -EPERM, "another user's region",
	       err);
	/* a short body */
	adv_hdr(&m.h, NPF_MSG_REGION_SET, sizeof(m) - 4);
	TH_ASSERT(adv_send(fd, &m, sizeof(m) - 4, NULL, 0) == (ssize_t)sizeof(m) - 4, "send");
	expect(adv_reply(fd, err, sizeof(err), NULL, 0, 5000), -EBADMSG, "a short request", err);
	expect(send_ring(fd, 3, 0, err), -ENOENT, "a ring before any region", err);
	close(fd);
}

/* The ring's header and queue words, mapped writable as its owner may. */
struct ring_words {
	unsigned int *sq_entries, *sq_mask, *cq_entries, *cq_mask, *sq_tail, *cq_head, *cq_tail;
};

static int scribble_ring(struct ring_words *w)
{
	struct io_uring_params p;
	char *m;
	int fd;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SQPOLL;
	p.sq_thread_idle = 1;
	fd = (int)syscall(__NR_io_uring_setup, NPF_EVICT_RING_ENTRIES, &p);
	TH_ASSERT(fd >= 0, "io_uring_setup as the attacker: %s", strerror(errno));
	TH_ASSERT(p.features & IORING_FEAT_SINGLE_MMAP, "io_uring without IORING_FEAT_SINGLE_MMAP");
	m = mmap(NULL, p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe),
		 PROT_READ | PROT_WRITE, MAP_SHARED, fd, IORING_OFF_SQ_RING);
	TH_ASSERT(m != MAP_FAILED, "map the ring: %s", strerror(errno));
	*w = (struct ring_words){(unsigned int *)(m + p.sq_off.ring_entries),
				 (unsigned int *)(m + p.sq_off.ring_mask),
				 (unsigned int *)(m + p.cq_off.ring_entries),
				 (unsigned int *)(m + p.cq_off.ring_mask),
				 (unsigned int *)(m + p.sq_off.tail),
				 (unsigned int *)(m + p.cq_off.head),
				 (unsigned int *)(m + p.cq_off.tail)};
	return fd;
}

static atomic_bool scribbling;

/* The completion tail, kept 2^32 - 1 ahead of whatever head npfd stores. */
static void *cq_scribbler(void *arg)
{
	struct ring_words *w = arg;

	while (atomic_load(&scribbling))
		__atomic_store_n(w->cq_tail, __atomic_load_n(w->cq_head, __ATOMIC_ACQUIRE) - 1,
				 __ATOMIC_RELEASE);
	return NULL;
}

static pid_t npfd_pid;

/* CPU time npfd has used (utime + stime of /proc/PID/stat), in ms. */
static long npfd_cpu_ms(void)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", npfd_pid);
	th_read_text(path, buf, sizeof(buf));
	p = strrchr(buf, ')');
	TH_ASSERT(p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			      &st) == 2,
		  "cannot read npfd's CPU time from %s", path);
	return (long)((ut + st) * 1000 / (unsigned long)sysconf(_SC_CLK_TCK));
}

static char *sparse_mem;

/* The 64 pages at the sparse region's start, read again (those evicted fault back in). */
static void *sparse_toucher(void *arg)
{
	(void)arg;
	for (int p = 0; p < 64; p++)
		(void)*(volatile char *)(sparse_mem + (size_t)p * PG);
	return NULL;
}

/*
 * As nobody: a budget of 16 pages on a 16 TiB region whose 64 installed
 * pages are all at its start. Once the first batch has evicted some, they
 * are read again: the next batch's hand, past them, has a turn of 2^32
 * positions to go before it comes round to them.
 */
static void sparse_budget(void *arg)
{
	const size_t len = 1ULL << 44;
	/*
	 * The budget's answer waits for its per-page state (16 GiB of
	 * counters, untouched): under AddressSanitizer that took over 5 s.
	 */
	NPF_OPTS(npf_client_opts, co, .socket_path = sock_path, .timeout_ms = 60000);
	struct npf_client *c = npf_client__connect(&co);
	struct npf_budget_info *bi;
	pthread_t th;
	int id, probe;
	size_t n;
	char *pm;
	long cpu;

	(void)arg;
	sparse_mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (sparse_mem == MAP_FAILED) {
		printf("sparse budget part skipped: mmap 16 TiB: %s\n", strerror(errno));
		return;
	}
	TH_ASSERT(c, "connect: %s", strerror(errno));
	id = npf_client__register(c, sparse_mem, len, NULL);
	TH_ASSERT(id > 0, "register 16 TiB: %s", npf_client__errmsg(c));
	for (int p = 0; p < 64; p++)
		sparse_mem[(size_t)p * PG] = 1;
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, 16 * PG, NULL),
		  "budget: %s", npf_client__errmsg(c));
	for (double t0 = th_now();; usleep(10000)) {
		TH_ASSERT(!npf_client__budget_list(c, (__u32)id, &bi, &n) && n == 1,
			  "budget list: %s", npf_client__errmsg(c));
		n = bi->evicted_pages;
		free(bi);
		if (n >= 48)
			break;
		TH_ASSERT(th_now() - t0 < 10, "only %zu of 48 pages evicted in 10 s", n);
	}
	cpu = npfd_cpu_ms();
	TH_ASSERT(!pthread_create(&th, NULL, sparse_toucher, NULL), "pthread_create");
	sleep(1);
	probe = raw_client(sock_path, &pm); /* its answer must come, within 5 s */
	cpu = npfd_cpu_ms() - cpu;
	printf("%-44s -> answered; npfd used %ld ms of CPU in 1 s\n",
	       "a request while a 16 TiB region refaults", cpu);
	TH_ASSERT(cpu < 500, "npfd spent %ld ms of CPU in 1 s looking for victims", cpu);
	pthread_join(th, NULL);
	close(probe);
	npf_client__close(c);
	munmap(sparse_mem, len);
}

/*
 * As nobody: the sparse region's installed pages all late -- frozen by
 * batches whose zaps the client holds (th_gate_close()) and that ran out
 * of time -- so that no pick finds a victim. A pick looks at 2^20
 * positions (2.5 ms): tried again after every event npfd handles, every
 * other request would pay for it (mutate entry repick-every-event).
 */
static void late_budget(void *arg)
{
	const size_t len = 1ULL << 44;
	NPF_OPTS(npf_client_opts, co, .socket_path = sock_path, .timeout_ms = 60000);
	struct npf_client *c = npf_client__connect(&co);
	struct npf_budget_info bi;
	struct npf_status st;
	struct th_gate g;
	int id, asked = 0;
	double t0;
	char *mem;
	long cpu;

	(void)arg;
	/* its own pagemap (th_frozen_pages()): the change of user cleared it */
	TH_ASSERT(!prctl(PR_SET_DUMPABLE, 1), "PR_SET_DUMPABLE: %s", strerror(errno));
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		   -1, 0);
	if (mem == MAP_FAILED) {
		printf("late budget part skipped: mmap 16 TiB: %s\n", strerror(errno));
		return;
	}
	TH_ASSERT(c, "connect: %s", strerror(errno));
	id = npf_client__register(c, mem, len, NULL);
	TH_ASSERT(id > 0, "register 16 TiB: %s", npf_client__errmsg(c));
	for (int p = 0; p < 64; p++)
		mem[(size_t)p * PG] = 1;
	th_gate_close(&g, th_evict_ring_fd());
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, 16 * PG, NULL),
		  "budget: %s", npf_client__errmsg(c));
	for (t0 = th_now();; usleep(10000)) {
		bi = th_budget(c, id);
		if (bi.resident_pages &&
		    th_frozen_pages(getpid(), mem, 1024, NULL) >= bi.resident_pages)
			break;
		TH_ASSERT(th_now() - t0 < 20,
			  "npfd did not freeze the %llu installed pages in 20 s",
			  (unsigned long long)bi.resident_pages);
	}
	sleep(3); /* the last batch runs out of time (2 s): every page late */
	cpu = npfd_cpu_ms();
	for (t0 = th_now(); th_now() - t0 < 1; asked++, usleep(1000))
		TH_ASSERT(!npf_client__status(c, &st), "status: %s", npf_client__errmsg(c));
	cpu = npfd_cpu_ms() - cpu;
	printf("%-44s -> %d answered; npfd used %ld ms of CPU in 1 s\n",
	       "requests while no installed page can go", asked, cpu);
	TH_ASSERT(cpu < 500, "npfd spent %ld ms of CPU in 1 s looking for victims", cpu);
	th_gate_open(&g);
	npf_client__close(c);
	munmap(mem, len);
}

/* As nobody: rings whose memory the attacker wrote over. */
static void ring_scribbler(void *arg)
{
	char err[NPF_ERRMSG_LEN], *mem, *mem2;
	struct ring_words w;
	pthread_t th;
	int fd = raw_client(sock_path, &mem), r, probe;
	long cpu;

	(void)arg;
	r = scribble_ring(&w);
	*w.sq_entries = 1U << 30;
	*w.sq_mask = (1U << 30) - 1;
	expect(send_ring(fd, r, 0, err), -EINVAL, "ring whose header says 2^30 entries", err);
	*w.sq_entries = NPF_EVICT_RING_ENTRIES;
	*w.sq_mask = NPF_EVICT_RING_ENTRIES - 1;
	*w.cq_tail = *w.cq_head - 1;
	expect(send_ring(fd, r, 0, err), -EINVAL, "ring saying 2^32 - 1 completions wait", err);
	/*
	 * Accepted with one zap "in flight" (submission tail 0, completion
	 * head and tail 2^32 - 1), so that npfd looks at its completions
	 * every tick; then the completion tail is written over.
	 */
	*w.cq_head = *w.cq_tail = ~0U;
	expect(send_ring(fd, r, 0, err), 0, "the same ring, its words put right", err);
	atomic_store(&scribbling, true);
	TH_ASSERT(!pthread_create(&th, NULL, cq_scribbler, &w), "pthread_create");
	cpu = npfd_cpu_ms();
	sleep(1);
	/*
	 * npfd skips what the ring says each time it looks: it neither
	 * spins on it (up to 2^32 completions a look: ~4 s of CPU each) nor
	 * keeps another client waiting.
	 */
	cpu = npfd_cpu_ms() - cpu;
	probe = raw_client(sock_path, &mem2); /* its answer must come, within 5 s */
	printf("%-44s -> answered; npfd used %ld ms of CPU in 1 s\n",
	       "a request while the completion tail lies", cpu);
	TH_ASSERT(cpu < 500, "npfd spent %ld ms of CPU in 1 s on a ring's lies", cpu);
	atomic_store(&scribbling, false);
	pthread_join(th, NULL);
	close(probe);
	close(fd);
	close(r);
}

int main(void)
{
	char path[64] = "/tmp/npf-evict-ro-XXXXXX", err[NPF_ERRMSG_LEN], *mem, *rmem;
	struct th_npfd d;
	struct npf_client *c;
	int id, fid, fd, rofd, raw, before, r_nosq, r_big, r_good, sv[2], st;
	pid_t child;

	th_npfd_start(&d, NULL);
	adv_open_to_group(&d);
	sock_path = d.sock;
	/* the attackers are forks of this process: none of them has root's regions */
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock, .fork = NPF_FORK_DONTFORK);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = mmap(NULL, 256 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	id = npf_client__register(c, mem, 128 * PG, NULL);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	fd = mkstemp(path);
	TH_ASSERT(fd >= 0 && !ftruncate(fd, 64 * PG), "mkstemp: %s", strerror(errno));
	rofd = open(path, O_RDONLY);
	unlink(path);
	NPF_OPTS(npf_region_opts, fo, .backing = NPF_BACKING_FILE, .backing_fd = rofd);
	fid = npf_client__register(c, mem + 128 * PG, 64 * PG, &fo);
	TH_ASSERT(fid > 0, "register the file region: %s", npf_client__errmsg(c));

	expect(npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, 64 * PG + 1, NULL), -EINVAL,
	       "budget not a page multiple", npf_client__errmsg(c));
	expect(npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, PG, NULL), -EINVAL,
	       "budget of one page (no low watermark)", npf_client__errmsg(c));
	expect(npf_client__region_set(c, (__u32)id, 99, 64 * PG, NULL), -EOPNOTSUPP,
	       "unknown setting", npf_client__errmsg(c));
	expect(npf_client__region_set(c, 99999, NPF_SET_BUDGET, 64 * PG, NULL), -ENOENT,
	       "no such region", npf_client__errmsg(c));
	expect(npf_client__region_set(c, (__u32)fid, NPF_SET_BUDGET, 16 * PG, NULL), -EBADF,
	       "read-only backing file", npf_client__errmsg(c));
	victim_region = (__u32)id;
	TH_ASSERT(adv_run_as_attacker(attacker, NULL, 20) == 0, "attacker side failed");
	expect(npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, 64 * PG, NULL), 0,
	       "a good budget", npf_client__errmsg(c));

	/* Rings, from a raw client (libnpf would send its own). */
	before = adv_count_fds(d.pid);
	raw = raw_client(d.sock, &rmem);
	r_nosq = ring(NPF_EVICT_RING_ENTRIES, false);
	r_big = ring(2 * NPF_EVICT_RING_ENTRIES, true);
	r_good = ring(NPF_EVICT_RING_ENTRIES, true);
	TH_ASSERT(r_nosq >= 0 && r_big >= 0 && r_good >= 0, "io_uring_setup: %s", strerror(errno));
	expect(send_ring(raw, -1, 0, err), -EBADF, "ring descriptor -1", err);
	expect(send_ring(raw, 1000, 0, err), -EBADF, "ring descriptor not open", err);
	expect(send_ring(raw, raw, 0, err), -EBADF, "ring that is a socket", err);
	expect(send_ring(raw, r_nosq, 0, err), -EINVAL, "ring without SQPOLL", err);
	expect(send_ring(raw, r_big, 0, err), -EINVAL, "ring of the wrong size", err);
	expect(send_ring(raw, r_good, 1, err), -EINVAL, "ring with unknown flags", err);
	expect(send_ring(raw, r_good, 0, err), 0, "a good ring", err);
	expect(send_ring(raw, r_good, 0, err), -EEXIST, "the ring again", err);
	close(raw);
	close(r_nosq);
	close(r_big);
	/* npfd drops the raw client's region and ring: its descriptors are back where they were */
	for (int i = 0; i < 100 && adv_count_fds(d.pid) != before; i++)
		usleep(20000);
	if (adv_count_fds(d.pid) != before) {
		char cmd[96];

		snprintf(cmd, sizeof(cmd), "ls -l /proc/%d/fd", d.pid);
		if (system(cmd))
			printf("(cannot list them)\n");
		th_fail("npfd holds %d descriptors, %d before the rings", adv_count_fds(d.pid),
			before);
	}
	/*
	 * A ring whose thread is this process's, sent by a child that inherited it
	 * (after the count: npfd keeps a forked child's copy of c's regions).
	 */
	TH_ASSERT(!socketpair(AF_UNIX, SOCK_STREAM, 0, sv), "socketpair");
	child = fork();
	if (child == 0) {
		char *cm;
		int cfd = raw_client(d.sock, &cm), e = send_ring(cfd, r_good, 0, err);

		printf("%-44s -> %d (%s)\n", "another process's ring", e, err);
		_exit(e == -EPERM ? 0 : 1);
	}
	waitpid(child, &st, 0);
	TH_ASSERT(WIFEXITED(st) && !WEXITSTATUS(st), "another process's ring was not refused");
	close(r_good);
	npfd_pid = d.pid;
	TH_ASSERT(adv_run_as_attacker(ring_scribbler, NULL, 30) == 0,
		  "npfd took a ring's words as the attacker wrote them");
	TH_ASSERT(adv_run_as_attacker(sparse_budget, NULL, 60) == 0,
		  "a budget on a sparse region held npfd");
	TH_ASSERT(adv_run_as_attacker(late_budget, NULL, 60) == 0,
		  "a budget with no page that can go held npfd");
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
	npf_client__close(c);
	close(fd);
	close(rofd);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
