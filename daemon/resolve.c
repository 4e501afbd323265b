// SPDX-License-Identifier: GPL-2.0
/*
 * The fault resolver.
 *
 * Handlers drain every ready userfaultfd into one batch; resolve_flush()
 * then sorts it, drops duplicate pages, and cuts it into runs of contiguous
 * pages of one region. A file-backed run whose pages are all in the page
 * cache is copied straight from npfd's own read-only mapping of the file
 * (one copy, no I/O, no io_uring worker: tmpfs reads, and any read that
 * cannot be done without blocking, go to an iou-wrk thread). The other
 * file-backed runs are read with io_uring into a registered staging buffer
 * (never into registered memory: npfd would fault on itself), one read per
 * run, all submitted together. Every run is then installed with one ranged
 * UFFDIO_COPY or UFFDIO_ZEROPAGE in DONTWAKE mode and woken with one
 * UFFDIO_WAKE.
 *
 * Fault-around, the built-in decision for a CPU fault no policy decides
 * for: like the kernel's (mm/memory.c do_fault_around()), the pages of the
 * fault's aligned block (fault-around-kib, 64 KiB by default) that are
 * cheap -- in the page cache, or zeros -- and not installed yet are
 * installed with it, in the same ranged ioctl. A page that is present is
 * never overwritten (UFFDIO_COPY refuses it: EEXIST, skipped).
 *
 * Every queued fault is woken whatever happens to its page: a fault that is
 * never woken is a thread hung forever. The only exception is EAGAIN (an mm
 * event is pending on the fd): such faults are kept and retried after the
 * event has been read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
#include "busypoll.h"
#include "collect.h"
#include "log.h"
#include "mmcall.h"
#include "moved.h"
#include "policy.h"
#include "region.h"
#include "resolve.h"
#include "runs.h"
#include "util.h"

#ifndef UFFDIO_POISON /* Debian's linux-libc-dev (6.1) predates it; the kernel has it (6.6+) */
struct uffdio_poison {
	struct uffdio_range range;
	__u64 mode;
	__s64 updated;
};
#define UFFDIO_POISON _IOWR(UFFDIO, 0x08, struct uffdio_poison)
#endif

#define MSGS_PER_READ 64

static struct fault *faults;
static size_t nfaults, faults_cap;
static struct run *runs;
static size_t runs_cap;

static struct io_uring io_ring;
static char *staging;
static const char *zeros; /* MAX_RUN_PAGES pages that read as zeros */
static char *bounce;	  /* MAX_RUN_PAGES pages: a direct copy that failed is read here */
static unsigned int fault_around_pages = 16;
static unsigned int staging_pages;
static __u64 batch_gen;
static struct resolve_hooks hooks;
__u64 resolve_faults_resolved, resolve_batches;

void resolve_set_hooks(const struct resolve_hooks *h)
{
	hooks = *h;
}

int resolve_init(unsigned int pages)
{
	struct iovec iov;
	int err;

	staging_pages = pages;
	staging = mmap(NULL, (size_t)pages * NPF_PAGE_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (staging == MAP_FAILED) {
		pr_err("cannot allocate %u staging pages: %s", pages, strerror(errno));
		return -errno;
	}
	zeros = mmap(NULL, MAX_RUN_PAGES * NPF_PAGE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
		     -1, 0);
	bounce = mmap(NULL, MAX_RUN_PAGES * NPF_PAGE_SIZE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (zeros == MAP_FAILED || bounce == MAP_FAILED) {
		pr_err("cannot map the zero source and the bounce buffer: %s", strerror(errno));
		return -errno;
	}
	err = io_uring_queue_init(MAX_RUN_PAGES, &io_ring, 0);
	if (err) {
		pr_err("cannot create the I/O io_uring: %s", strerror(-err));
		return err;
	}
	iov.iov_base = staging;
	iov.iov_len = (size_t)pages * NPF_PAGE_SIZE;
	err = io_uring_register_buffers(&io_ring, &iov, 1);
	if (err) {
		pr_err("cannot register the staging buffer with io_uring: %s", strerror(-err));
		return err;
	}
	return 0;
}

void resolve_retire_sources(void)
{
	struct iovec iov = {.iov_len = (size_t)staging_pages * NPF_PAGE_SIZE};
	int err;

	io_uring_unregister_buffers(&io_ring);
	staging = buffer_renew(staging, iov.iov_len);
	bounce = buffer_renew(bounce, MAX_RUN_PAGES * NPF_PAGE_SIZE);
	iov.iov_base = staging;
	err = io_uring_register_buffers(&io_ring, &iov, 1);
	if (err)
		pr_err("cannot register the new staging buffer with io_uring: %s", strerror(-err));
}

void resolve_exit(void)
{
	io_uring_queue_exit(&io_ring);
	free(faults);
	free(runs);
}

static int queue_fault(struct npfd_mm *mm, __u64 addr, __u32 tid, __u64 t, bool write, bool cached)
{
	if (nfaults == faults_cap) {
		size_t cap = faults_cap ? faults_cap * 2 : 1024;
		struct fault *f = realloc(faults, cap * sizeof(*f));

		if (!f)
			return -ENOMEM;
		faults = f;
		faults_cap = cap;
	}
	faults[nfaults++] = (struct fault){.mm = mm,
					   .page = addr & ~(NPF_PAGE_SIZE - 1),
					   .tid = tid,
					   .raised = t,
					   .write = write,
					   .cached = cached};
	return 0;
}

/* A page a device needs (device.c): resolved like a CPU fault, nobody to wake. */
int resolve_queue(struct npfd_mm *mm, __u64 addr, __u64 raised_ns, bool write)
{
	return queue_fault(mm, addr, 0, raised_ns, write, false);
}

bool resolve_pending(void)
{
	return nfaults != 0;
}

void resolve_forget_mm(struct npfd_mm *mm)
{
	size_t i, j = 0;

	for (i = 0; i < nfaults; i++)
		if (faults[i].mm != mm)
			faults[j++] = faults[i];
	nfaults = j;
}

static void prefetch(struct npfd_mm *mm, struct npfd_region *r, __u64 page, __u64 raised)
{
	/* a hole's page is not r's: another mapping's, or region's (holes.h) */
	if (!region_page_installed(r, page) && !holes_contain(&r->holes, page))
		queue_fault(mm, page, 0, raised, false, false);
}

/* fault-around-kib (live): rounded down to a power of two pages, as the kernel does. */
void resolve_set_fault_around(unsigned int kib)
{
	unsigned int pages = kib / (NPF_PAGE_SIZE / 1024);

	fault_around_pages = pages ? 1U << (31 - __builtin_clz(pages)) : 0;
}

/*
 * npfd's read-only mapping of r's file, made at the first need, or NULL.
 * npfd never reads it itself: only UFFDIO_COPY does, in the kernel, where
 * a page past a file truncated meanwhile is an EFAULT (install_bounced()
 * takes over), not a SIGBUS that would kill npfd.
 */
static const char *region_map(struct npfd_region *r)
{
	void *p;

	if (r->map || r->map_failed || r->backing != NPF_BACKING_FILE)
		return r->map;
	p = mmap(NULL, r->length, PROT_READ, MAP_SHARED, r->file_fd, (off_t)r->file_offset);
	if (p == MAP_FAILED) {
		pr_warn("region %u: cannot map its backing file (%s): every page is read with io_uring",
			r->id, strerror(errno));
		r->map_failed = true;
		return NULL;
	}
	r->map = p;
	r->map_offset = r->file_offset;
	r->map_length = r->length;
	return r->map;
}

/* The file page behind page of r in npfd's mapping, if npages of it are mapped. */
static const char *map_page(struct npfd_region *r, __u64 page, __u64 npages)
{
	__u64 off = r->file_offset + (page - r->start);

	if (!region_map(r) || off < r->map_offset ||
	    off - r->map_offset + npages * NPF_PAGE_SIZE > r->map_length)
		return NULL;
	return r->map + (off - r->map_offset);
}

/*
 * The built-in decision for a CPU fault of r at page: fault-around. Pages
 * of the aligned block that are not installed and cost no I/O -- zeros,
 * or file pages in the page cache (mincore() of npfd's mapping) -- are
 * queued with the fault; the flush installs them with it, one ioctl.
 * Returns whether page itself is in the page cache (file-backed).
 */
static bool fault_around(struct npfd_mm *mm, struct npfd_region *r, __u64 page, __u64 t)
{
	unsigned int n = r->fault_around >= 0 ? (unsigned int)r->fault_around : fault_around_pages;
	unsigned char vec[NPF_FAULT_AROUND_MAX_KIB / 4];
	bool file = r->backing == NPF_BACKING_FILE, here = false;
	__u64 lo, hi, p;
	const char *src = NULL;

	if (n <= 1 || n > sizeof(vec))
		return false;
	lo = page & ~((__u64)n * NPF_PAGE_SIZE - 1);
	hi = lo + (__u64)n * NPF_PAGE_SIZE;
	if (lo < r->start)
		lo = r->start;
	if (hi > r->start + r->length)
		hi = r->start + r->length;
	if (file) {
		src = map_page(r, lo, (hi - lo) >> NPF_PAGE_SHIFT);
		if (!src || mincore((void *)src, hi - lo, vec))
			return false;
	}
	for (p = lo; p < hi; p += NPF_PAGE_SIZE) {
		bool cached = file && (vec[(p - lo) >> NPF_PAGE_SHIFT] & 1);

		if (p == page) {
			here = cached;
			continue;
		}
		if ((file && !cached) || region_page_installed(r, p) || holes_contain(&r->holes, p))
			continue;
		queue_fault(mm, p, 0, t, false, cached);
	}
	return here;
}

/* Execute a policy's decision for a fault of r at [rec->addr, rec->addr + len). */
static void apply_decision(struct npfd_mm *mm, struct npfd_region *r,
			   const struct npf_fault_record *rec)
{
	struct npf_policy_decision d = policy_clamp(rec, r);
	__u64 first = rec->addr & ~(NPF_PAGE_SIZE - 1), i;

	for (i = 1; i <= d.before; i++)
		prefetch(mm, r, first - i * NPF_PAGE_SIZE, rec->ts_ns);
	for (i = 1; i <= d.after; i++)
		prefetch(mm, r, first + i * NPF_PAGE_SIZE, rec->ts_ns);
	for (i = 1; i <= d.stride_count; i++) {
		__s64 off = (__s64)i * d.stride * (__s64)NPF_PAGE_SIZE;
		__u64 p = first + (__u64)off;

		if (p < r->start || p >= r->start + r->length)
			break;
		prefetch(mm, r, p, rec->ts_ns);
	}
	if ((d.flags & NPF_DECIDE_RECORD) && hooks.record)
		hooks.record(r, first);
}

/*
 * A CPU fault read from the userfaultfd: queue it, with what its policy
 * decided, and -- no policy decided, or it asked for it too
 * (NPF_DECIDE_BUILTIN) -- the pages fault-around adds.
 */
static void cpu_fault(struct npfd_mm *mm, __u64 addr, __u32 tid, __u64 t, bool write)
{
	__u64 page = addr & ~(NPF_PAGE_SIZE - 1);
	struct npf_fault_record rec, dec;
	bool known = tid && collect_fault_take(tid, page, &rec), cached = false;
	struct npfd_region *r = mm_find_region(mm, page);
	__u64 raised = known && rec.ts_ns <= t ? rec.ts_ns : t;
	bool decided = r &&
		       policy_decide_cpu(r, tid, addr, write, raised, known ? &rec : NULL, &dec);

	if (decided)
		apply_decision(mm, r, &dec);
	if (r && (!decided || dec.decision.flags & NPF_DECIDE_BUILTIN))
		cached = fault_around(mm, r, page, t);
	if (queue_fault(mm, page, tid, raised, write, cached))
		pr_err("out of memory queueing a fault");
}

void resolve_uffd_ready(void *arg)
{
	struct npfd_mm *mm = arg;
	struct uffd_msg msgs[MSGS_PER_READ];

	while (!mm->dead) {
		ssize_t n = read(mm->uffd, msgs, sizeof(msgs));
		__u64 t = now_ns();
		ssize_t i;

		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				pr_warn("pid %d: reading the userfaultfd failed: %s", mm->tgid,
					strerror(errno));
			return;
		}
		if (n > 0)
			busypoll_note_hot(mm, t);
		for (i = 0; i < n / (ssize_t)sizeof(msgs[0]); i++) {
			struct uffd_msg *m = &msgs[i];

			switch (m->event) {
			case UFFD_EVENT_PAGEFAULT:
				if (m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) {
					if (hooks.wp_fault)
						hooks.wp_fault(mm, m->arg.pagefault.address);
					break;
				}
				cpu_fault(mm, m->arg.pagefault.address, m->arg.pagefault.feat.ptid,
					  t, m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WRITE);
				break;
			case UFFD_EVENT_REMAP:
				mm_remapped(mm, m->arg.remap.from, m->arg.remap.to,
					    m->arg.remap.len);
				break;
			case UFFD_EVENT_REMOVE:
				mm_range_removed(mm, m->arg.remove.start, m->arg.remove.end);
				break;
			case UFFD_EVENT_UNMAP:
				mm_unmapped(mm, m->arg.remove.start, m->arg.remove.end);
				break;
			default:
				pr_warn("pid %d: unknown userfaultfd event %u", mm->tgid, m->event);
			}
		}
		if (n < (ssize_t)sizeof(msgs))
			return; /* a short read: the queue is drained, save the EAGAIN read */
	}
}

/*
 * The run's first npages are installed: mark them, and tell the hooks,
 * clean (write-protected from a copy) as the caller says, except the
 * pages the install skipped because they were there already: another
 * thread's write fault may have installed them writable and written them
 * since, so they keep the state eviction knows them in (told clean, an
 * eviction dropped such a page unwritten and its refault read zeros:
 * evict_race, evict_stress). Pages with no mapping (a hole in the
 * region) are neither.
 */
static void report_installed(const struct run *rn, __u32 npages, bool clean)
{
	__u32 i = 0;

	while (i < npages) {
		bool skip = run_was_skipped(rn, i), gone = run_was_absent(rn, i);
		__u64 start = rn->start + ((__u64)i << NPF_PAGE_SHIFT);
		__u32 j = i + 1;

		while (j < npages && run_was_skipped(rn, j) == skip &&
		       run_was_absent(rn, j) == gone)
			j++;
		if (gone) {
			i = j;
			continue;
		}
		region_mark_installed(rn->region, start, j - i);
		/* a skipped page may be called dirty (a write run), never clean */
		if (skip && clean) {
			if (hooks.present)
				hooks.present(rn->region, start, j - i);
		} else if (hooks.installed) {
			hooks.installed(rn->region, start, j - i, clean);
		}
		i = j;
	}
}

/*
 * An mm event stopped the run (EAGAIN) after its first rn->done bytes: those
 * pages are installed, and its retry will find them there (EEXIST, taken
 * for another thread's): they are told installed now.
 */
static void report_partial(const struct run *rn)
{
	struct run part = *rn;

	part.npages = (__u32)(rn->done >> NPF_PAGE_SHIFT);
	if (!part.npages || !rn->region || rn->unservable)
		return;
	report_installed(&part, part.npages, !rn->write && rn->region->install_clean);
}

/*
 * Install [start, start + len) from src (or zeros). Pages that exist already
 * (EEXIST: another thread's fault, or a retried run) are skipped.
 */
int resolve_install(struct run *rn, const char *src)
{
	__u64 len = (__u64)rn->npages * NPF_PAGE_SIZE;
	bool first = true, one = false; /* one: a page at a time, past a hole */

	while (rn->done < len) {
		__u64 left = one ? NPF_PAGE_SIZE : len - rn->done;
		/*
		 * The first ioctl wakes what it fills: when it covers the run,
		 * that is the run's one wake-up and no UFFDIO_WAKE is needed.
		 * Later ioctls (after a partial fill) defer the wake to wake().
		 */
		__u64 mode = first ? 0 : UFFDIO_COPY_MODE_DONTWAKE;
		/*
		 * A budgeted region's read fault: installed clean, its first
		 * write is seen. So is a write's, when a zap may still drop a
		 * page of the run: that write waits for it.
		 */
		bool wp = src && rn->region && rn->region->install_clean &&
			  (!rn->write || (hooks.zap_may_run && hooks.zap_may_run(rn)));
		__s64 res;
		int rc;

		if (src) {
			struct uffdio_copy c = {.dst = rn->start + rn->done,
						.src = (__u64)(uintptr_t)(src + rn->done),
						.len = left,
						.mode = mode | (wp ? UFFDIO_COPY_MODE_WP : 0)};
			rc = (int)mmcall_ioctl_now(rn->mm->tgid, rn->mm->uffd, UFFDIO_COPY, &c);
			res = c.copy;
		} else {
			struct uffdio_zeropage z = {.range = {rn->start + rn->done, left},
						    .mode = mode};
			rc = (int)mmcall_ioctl_now(rn->mm->tgid, rn->mm->uffd, UFFDIO_ZEROPAGE, &z);
			res = z.zeropage;
		}
		if (rc == 0) {
			rn->woken = first;
			rn->done += left;
			first = false;
			continue;
		}
		first = false;
		if (res > 0) { /* partial: carry on after what was done */
			rn->done += (__u64)res;
			continue;
		}
		if (res == -EEXIST) {
			run_skipped(rn, (__u32)(rn->done >> NPF_PAGE_SHIFT));
			rn->done += NPF_PAGE_SIZE;
			continue;
		}
		/*
		 * No mapping at the first page, or the range crosses a hole
		 * (the kernel wants one mapping under the whole range): a page
		 * at a time from here, the unmapped ones left out. Failed
		 * whole, a fault-around run over a hole a munmap or a partial
		 * mremap left never installed its faulting page: the fault came
		 * back for good, npfd at 100% CPU (tests/evict_mremap_part).
		 */
		if (res == -ENOENT && !one) {
			one = true;
			continue;
		}
		if (res == -ENOENT) {
			run_absent(rn, (__u32)(rn->done >> NPF_PAGE_SHIFT));
			rn->done += NPF_PAGE_SIZE;
			continue;
		}
		return res < 0 ? (int)res : -errno;
	}
	return 0;
}

/*
 * [start, start + npages) of the run has no data (its backing read failed):
 * poison it, so that the access fails with SIGBUS rather than faulting again
 * forever (npfd at 100% CPU) or reading zeros. Pages that are present
 * already (EEXIST) keep their data.
 */
static int poison(struct run *rn, __u64 start, __u64 npages)
{
	__u64 len = npages * NPF_PAGE_SIZE, done = 0;

	while (done < len) {
		struct uffdio_poison p = {.range = {start + done, len - done}, .mode = 0};

		if (!mmcall_ioctl_now(rn->mm->tgid, rn->mm->uffd, UFFDIO_POISON, &p))
			return 0;
		if (p.updated > 0) {
			done += (__u64)p.updated;
			continue;
		}
		if (p.updated == -EEXIST) {
			done += NPF_PAGE_SIZE;
			continue;
		}
		return p.updated < 0 ? (int)p.updated : -errno;
	}
	return 0;
}

static void wake(struct run *rn);

/* Serve what the failed read did fill, poison the rest, wake every waiter. */
static int fail_run(struct run *rn, const char *src)
{
	struct run head = *rn;
	int ret = 0;

	head.npages = rn->valid_pages;
	head.done = 0;
	if (head.npages && !resolve_install(&head, src)) {
		region_mark_installed(rn->region, head.start, head.npages);
		if (hooks.installed)
			hooks.installed(rn->region, head.start, head.npages, false);
	} else {
		head.npages = 0;
	}
	rn->valid_pages = head.npages;
	ret = poison(rn, rn->start + (__u64)head.npages * NPF_PAGE_SIZE, rn->npages - head.npages);
	if (ret == -EAGAIN)
		return ret;
	if (ret && ret != -ESRCH && ret != -ENOENT)
		pr_warn_rl("pid %d: cannot poison 0x%llx+%u pages: %s", rn->mm->tgid,
			   (unsigned long long)rn->start, rn->npages, strerror(-ret));
	wake(rn);
	rn->woken = true;
	rn->region->faults_failed += rn->nfaults;
	collect_count_failed(rn->nfaults);
	return 0;
}

static void wake(struct run *rn)
{
	struct uffdio_range range = {.start = rn->start, .len = (__u64)rn->npages * NPF_PAGE_SIZE};

	if (ioctl(rn->mm->uffd, UFFDIO_WAKE, &range) && errno != ESRCH)
		pr_warn("pid %d: UFFDIO_WAKE 0x%llx failed: %s", rn->mm->tgid,
			(unsigned long long)rn->start, strerror(errno));
}

/*
 * The file ended (or failed) got bytes into run rn, read into buf: the
 * file was at least as long as the region when it was registered, so it
 * was truncated since. The pages the file still covers are served (the
 * last one with zeros after the file's end, as a mapping of the file
 * reads); the others have no data, and zeros would be a silent
 * corruption: fail_run() poisons them.
 */
static void run_ends_early(struct run *rn, char *buf, size_t got, __u64 off)
{
	size_t valid = (got + NPF_PAGE_SIZE - 1) / NPF_PAGE_SIZE;

	pr_warn_rl(
		"region %u: the backing file ends at offset %llu, inside the region (truncated after registration?)",
		rn->region->id, (unsigned long long)off);
	memset(buf + got, 0, valid * NPF_PAGE_SIZE - got);
	rn->unservable = true;
	rn->valid_pages = (__u32)valid;
}

/* Read every file-backed run of runs[0..n) into staging, one SQE per run. */
static void read_runs(struct run *rs, size_t n)
{
	struct io_uring_cqe *cqe;
	unsigned int inflight = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		struct run *rn = &rs[i];
		struct io_uring_sqe *sqe;

		if (!rn->region || rn->region->backing != NPF_BACKING_FILE || rn->direct)
			continue;
		sqe = io_uring_get_sqe(&io_ring);
		if (!sqe) {
			io_uring_submit(&io_ring);
			sqe = io_uring_get_sqe(&io_ring);
		}
		io_uring_prep_read_fixed(sqe, rn->region->file_fd,
					 staging + (size_t)rn->staging * NPF_PAGE_SIZE,
					 rn->npages * NPF_PAGE_SIZE,
					 rn->region->file_offset + (rn->start - rn->region->start),
					 0);
		io_uring_sqe_set_data64(sqe, i);
		inflight++;
	}
	if (!inflight)
		return;
	io_uring_submit_and_wait(&io_ring, inflight);
	while (inflight) {
		struct run *rn;
		size_t want, got;

		if (io_uring_wait_cqe(&io_ring, &cqe))
			break;
		rn = &rs[io_uring_cqe_get_data64(cqe)];
		want = (size_t)rn->npages * NPF_PAGE_SIZE;
		got = cqe->res > 0 ? (size_t)cqe->res : 0;
		if (cqe->res < 0) {
			pr_warn_rl("region %u: reading the backing file at offset %llu failed: %s",
				   rn->region->id,
				   (unsigned long long)(rn->region->file_offset +
							(rn->start - rn->region->start)),
				   strerror(-cqe->res));
			rn->status = cqe->res;
			rn->unservable = true;
		}
		/*
		 * Short read: finish with pread. The file was at least as long as
		 * the region when it was registered, so an end of file now means
		 * it was truncated since: those pages have no data, and zeros
		 * would be a silent corruption.
		 */
		while (cqe->res >= 0 && got < want) {
			char *dst = staging + (size_t)rn->staging * NPF_PAGE_SIZE;
			__u64 off = rn->region->file_offset + (rn->start - rn->region->start) + got;
			ssize_t r = pread(rn->region->file_fd, dst + got, want - got, (off_t)off);

			if (r <= 0) {
				rn->status = r < 0 ? -errno : -ENODATA;
				run_ends_early(rn, dst, got, off);
				break;
			}
			got += (size_t)r;
		}
		if (rn->region->stats && cqe->res > 0)
			rn->region->stats->bytes_read += (__u64)cqe->res;
		io_uring_cqe_seen(&io_ring, cqe);
		inflight--;
	}
}

static unsigned int log2_bucket(__u64 ns)
{
	unsigned int b = ns ? 63 - (unsigned int)__builtin_clzll(ns) : 0;

	return b < NPF_LAT_BUCKETS ? b : NPF_LAT_BUCKETS - 1;
}

static void account(struct run *rn, __u64 t_done)
{
	struct npfd_region *r = rn->region;
	__u32 i;

	resolve_faults_resolved += rn->nfaults;
	if (!r || !r->stats)
		return;
	for (i = rn->first; i < rn->first + rn->nfaults; i++)
		if (faults[i].tid)
			r->stats->uffd_faults++;
	if (rn->unservable) {
		r->stats->pages_copied += rn->valid_pages;
		return;
	}
	if (r->backing == NPF_BACKING_FILE)
		r->stats->pages_copied += rn->npages;
	else
		r->stats->pages_zeroed += rn->npages;
	if (r->last_batch != batch_gen) {
		r->last_batch = batch_gen;
		r->stats->batches++;
	}
	for (i = rn->first; i < rn->first + rn->nfaults; i++) {
		__u64 lat = t_done > faults[i].raised ? t_done - faults[i].raised : 0;

		r->latency->slot[log2_bucket(lat)]++;
		r->stats->latency_sum_ns += lat;
	}
}

/*
 * A file-backed run all of whose pages are in the page cache: npfd's
 * mapping of it, to copy from. Pages queued by fault-around were seen
 * there a moment ago; for the others, one mincore() tells.
 */
static const char *run_in_cache(const struct run *rn)
{
	unsigned char vec[MAX_RUN_PAGES];
	const char *src = map_page(rn->region, rn->start, rn->npages);
	__u32 i;

	if (!src)
		return NULL;
	for (i = rn->first; i < rn->first + rn->nfaults; i++)
		if (!faults[i].cached)
			break;
	if (i == rn->first + rn->nfaults)
		return src;
	if (mincore((void *)src, (size_t)rn->npages * NPF_PAGE_SIZE, vec))
		return NULL;
	for (i = 0; i < rn->npages; i++)
		if (!(vec[i] & 1))
			return NULL;
	return src;
}

/*
 * A copy from npfd's mapping failed (EFAULT: the file was truncated
 * under it): read the run with pread; where the file ends, the rest is
 * poisoned, as a staged run's would be.
 */
static int install_bounced(struct run *rn)
{
	size_t len = (size_t)rn->npages * NPF_PAGE_SIZE, got = 0;
	__u64 off = rn->region->file_offset + (rn->start - rn->region->start);

	while (got < len) {
		ssize_t n = pread(rn->region->file_fd, bounce + got, len - got, (off_t)(off + got));

		if (n <= 0) {
			run_ends_early(rn, bounce, got, off + got);
			return n < 0 ? -errno : -ENODATA;
		}
		got += (size_t)n;
	}
	return resolve_install(rn, bounce);
}

void resolve_flush(void)
{
	size_t pos = 0, kept = 0;

	if (!nfaults)
		return;
	batch_gen++;
	resolve_batches++;
	nfaults = faults_dedupe(faults, nfaults);

	while (pos < nfaults) {
		size_t nruns, next, i;
		__u64 t;

		nruns = runs_make(faults, nfaults, pos, staging_pages, run_in_cache, &runs,
				  &runs_cap, &next);
		if (!nruns)
			break;
		read_runs(runs, nruns);
		for (i = 0; i < nruns; i++) {
			struct run *rn = &runs[i];
			const char *src = NULL;

			if (rn->status)
				continue;
			if (rn->direct) {
				rn->status = resolve_install(rn, rn->direct);
				if (rn->status == -EFAULT)
					rn->status = install_bounced(rn);
				if (!rn->status && rn->region->stats)
					rn->region->stats->bytes_read +=
						(__u64)rn->npages * NPF_PAGE_SIZE;
				continue;
			}
			if (!rn->region &&
			    moved_waits(rn->mm, rn->start, (__u64)rn->npages * NPF_PAGE_SIZE)) {
				/* a part moved out of a region: its pages are on their way (moved.c) */
				rn->status = -EAGAIN;
				continue;
			}
			if (!rn->region && rn->mm->adopting) {
				/*
				 * Maybe a region not adopted yet (a file's page: not
				 * zeros, even for a write): its adoption wakes it.
				 */
				rn->status = -EINPROGRESS;
				continue;
			}
			if (hooks.hold && rn->region && hooks.hold(rn->region, rn->npages)) {
				rn->status = -EAGAIN; /* at its ceiling or budget: after eviction */
				continue;
			}
			if (hooks.stored && hooks.stored(rn)) {
				/* pages eviction put in the swap store come back from there */
				rn->status = hooks.install_stored(rn);
				continue;
			}
			if (rn->region && rn->region->backing == NPF_BACKING_FILE)
				src = staging + (size_t)rn->staging * NPF_PAGE_SIZE;
			else if (rn->write || (rn->region && rn->region->install_clean))
				/*
				 * UFFDIO_ZEROPAGE maps the shared zero page read-only:
				 * the write that follows would take a second fault
				 * (copy-on-write). Install writable zeroed pages instead.
				 */
				src = zeros;
			else if (!rn->region)
				pr_warn_rl(
					"pid %d: fault at 0x%llx is outside every region: zero-filled",
					rn->mm->tgid, (unsigned long long)rn->start);
			rn->status = resolve_install(rn, src);
		}
		t = now_ns();
		for (i = 0; i < nruns; i++) {
			struct run *rn = &runs[i];
			/* where the run's data is, for fail_run() to serve what there is */
			const char *have =
				rn->direct ? bounce : staging + (size_t)rn->staging * NPF_PAGE_SIZE;
			__u32 k;

			if (rn->unservable && fail_run(rn, have) == -EAGAIN)
				rn->status = -EAGAIN;
			if (rn->status == -EAGAIN) {
				/*
				 * An mm event is pending on the fd: keep these faults
				 * for the next flush, after the event has been read.
				 * kept <= rn->first, so compacting in place is safe.
				 */
				report_partial(rn);
				for (k = rn->first; k < rn->first + rn->nfaults; k++)
					faults[kept++] = faults[k];
				continue;
			}
			if (rn->status == -ESRCH || rn->status == -EINPROGRESS)
				continue; /* the process is gone, or waits for an adoption */
			if (rn->status && rn->status != -ENOENT && !rn->unservable)
				pr_warn_rl("pid %d: installing 0x%llx+%u pages failed: %s",
					   rn->mm->tgid, (unsigned long long)rn->start, rn->npages,
					   strerror(-rn->status));
			if (!rn->woken)
				wake(rn);
			if (!rn->status && !rn->unservable && rn->region)
				report_installed(rn, rn->npages,
						 !rn->write && rn->region->install_clean);
			account(rn, t);
		}
		pos = next;
	}
	nfaults = kept;
}
