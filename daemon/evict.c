// SPDX-License-Identifier: GPL-2.0
/*
 * Budgets and eviction: npfd takes pages away from a region that has more
 * installed than its budget, so that registered memory can exceed what the
 * machine has (seed 000 §2, Table 5; seed 004 on eviction).
 *
 * A budget is per region (npfctl region set ID budget SIZE) or per client
 * (client-budget-mib in npfd.conf: all of a client's regions together).
 * Over budget-high-pct of it npfd evicts down to budget-low-pct, one batch
 * of up to EVICT_BATCH pages at a time, chosen by CLOCK over the pages npfd
 * installed: a page installed or faulted since the hand last passed, or
 * whose device entry has its ACCESSED bit set (the NIC sets it; the sweep
 * clears it), gets a second chance. CPU accesses to present pages are not
 * visible to npfd here (no soft-dirty, no accessed bit in PAGEMAP_SCAN):
 * only faults and the devices' bits age a page.
 *
 * One batch, in this order, so that neither the device nor the CPU ever
 * sees a page half evicted and no write is lost:
 *
 *   1. devices clear their IO page table entries and post invalidations
 *              (device.c); nothing maps them again while the batch runs
 *              (npfd_region.evicting); wait for every device's acknowledgement
 *              (no DMA in flight), or give up after EVICT_ACK_TIMEOUT_NS
 *              and keep the pages;
 *   2. freeze  UFFDIO_WRITEPROTECT the victims: a CPU write now waits in a
 *              write-protect fault that npfd answers only when the batch is
 *              over. Only after the acknowledgement: the software NIC's DMA
 *              is a CPU write, and a DMA in flight frozen here would hold
 *              up the acknowledgement the batch waits for;
 *   3. read    /proc/PID/pagemap says the page is present, and
 *              /proc/PID/mem copies it (mm_mem_rw(); a present page never faults,
 *              and the process cannot drop it meanwhile: its MADV_DONTNEED
 *              waits for npfd to read the REMOVE event);
 *   4. write   dirty pages -- all but those installed write-protected from
 *              their backing copy and not written since -- go to the
 *              region's file at file_offset, or to npfd's swap store
 *              (swapstore.c), in one batched io_uring submission; clean
 *              pages are dropped;
 *   5. zap     MADV_DONTNEED in the client's own address space, through the
 *              client's SQPOLL io_uring that libnpf handed over
 *              (NPF_MSG_EVICT_RING): process_madvise() lets another process
 *              only PAGEOUT/COLD/WILLNEED (tests/evict_mechanism.c
 *              measured it), and PAGEOUT needs swap and leaves a swap entry
 *              the kernel, not npfd, would fault in;
 *   6. check   pagemap again: a page that is gone is evicted; one still
 *              there (the zap failed) is kept. The frozen writers are woken:
 *              a write to an evicted page faults again (missing) and npfd
 *              reads the page back (evict_install_stored()) before it lands.
 *
 * The write-protect bit doubles as dirty tracking: read faults of a
 * budgeted region are installed write-protected (UFFDIO_COPY_MODE_WP), and
 * the first write of such a page is a write-protect fault npfd answers by
 * marking it dirty and unprotecting it.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
#include "bitmap.h"
#include "device.h"
#include "evict.h"
#include "log.h"
#include "mmcall.h"
#include "objects.h"
#include "policy.h"
#include "region.h"
#include "resolve.h"
#include "runs.h"
#include "swapstore.h"
#include "util.h"
#include "wait.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define EVICT_BATCH 256 /* pages: the per-batch round trips (ack, zap) dominate */
#define EVICT_ACK_TIMEOUT_NS (2ULL * 1000 * 1000 * 1000)
#define EVICT_ZAP_TIMEOUT_NS (2ULL * 1000 * 1000 * 1000)
#define EVICT_HOLD_SLACK EVICT_BATCH /* pages over the high watermark before faults wait */
#define EVICT_HOLD_NS (500ULL * 1000 * 1000)
/*
 * After a pick that found no victim (every installed page late, say: the
 * client is stopped with its zaps), the region rests this long: a pick
 * looks at up to EVICT_SCAN_MAX positions (2.5 ms), and without the rest
 * it would look again after every event npfd handles, for every client.
 */
#define EVICT_REPICK_NS (50ULL * 1000 * 1000)
/*
 * A page a device asked for is no victim until the device has used it (its
 * ACCESSED bit), or for this long after the answer. Taken before, a work
 * request larger than the budget never ran: its first pages were evicted
 * while the NIC still waited for its last ones, and it asked again, for
 * good (ib_write_bw --odp, 4 MiB messages under a 1 MiB budget: not one of
 * 5 in 200 s).
 */
#define EVICT_DEVICE_GRACE_MS 1000
#define ZAP_TAG 0x4e50460000000000ULL /* "NPF" in the top bytes of our SQEs' user_data */
/* How long after adopting an address space a REMOVE may be an earlier npfd's zap. */
#define OLD_ZAP_WINDOW_NS (10ULL * 1000 * 1000 * 1000)

/* An unregister refused for a zap in flight stops eviction of its region this long (libnpf asks again for 2 s). */
#define EVICT_LEAVING_NS (3ULL * 1000 * 1000 * 1000)
#define EVICT_PUT_BACK_STEP 256 /* pages an unregister request puts back (evict_put_back()) */

/* Per region, once it has a budget (its own or its client's). */
struct evict_region {
	__u64 npages;
	__u64 budget;	      /* its own, in pages; 0: none */
	__u64 hand;	      /* CLOCK */
	struct bitmap *clean; /* installed write-protected, equal to its backing copy */
	struct bitmap *ref;   /* referenced since the hand passed */
	struct bitmap *busy;  /* in the batch being evicted (npfd_region.evicting points here) */
	struct bitmap
		*late; /* its zap outlived its batch (zap_late()): frozen and busy until it runs */
	struct bitmap *
		dev_wait; /* mapped for a device's page request, not used by it yet (device_yet_to_use()) */
	__u8 *installs; /* per page: times installed since the budget came (at most 255) */
	__u32 *touched; /* per page: start_ms() of its last install or write fault, 0: none */
	__u64 cut; /* pages cut off its start: installs and touched point that far into their memory */
	struct bitmap *stored; /* anonymous: its page is in the region's swap store */
	struct bitmap *
		old_frozen; /* write-protected when an adoption's earlier zaps may run (old_frozen_scan()) */
	__u64 store_base; /* the store's page index of page 0: pages a munmap cut off before */
	bool wp;	  /* registered for write-protect faults too */
	bool writable;	  /* file-backed: npfd may write its file */
	bool draining;	  /* went over the high watermark: evicting until the low one */
	/*
	 * ns: its process is unregistering it until then (libnpf asks again
	 * for 2 s): no batch picks it, its faults wait for none.
	 */
	__u64 leaving_until;
	/*
	 * Where the unregister's put-back goes on at its next step (pages
	 * before it went back at earlier ones): each step walking from page 0
	 * again made a put-back of n pages cost n^2 / step. Taken only while
	 * the region is leaving (no batch has evicted a page before it since);
	 * a client that stopped asking starts again from 0.
	 */
	__u64 put_back_next;
	__u64 hold_since; /* ns: faults of the region wait for eviction (evict_hold()), or 0 */
	__u64 pick_after; /* ns: its last pick found no victim; not looked at again before */
	__u64 hold_count; /* installed pages when evict_hold() last looked */
};

/* The client's SQPOLL ring, through which npfd drops its pages. */
struct evict_ring {
	struct io_uring ring;
	int fd;
	bool draining;	/* the client's budget: as evict_region.draining */
	__u32 last_id;	/* the client's region that gave last: its regions give in turn */
	__u32 old_zaps; /* an earlier npfd's zaps still in flight when the ring was adopted */
	/*
	 * What they may drop: the ranges of the earlier npfds' zaps among the
	 * ring's last NPF_EVICT_RING_ENTRIES submissions, where every zap in
	 * flight is (zap_more()); old_known false: more in flight than that,
	 * so not all known.
	 */
	__u64 old_range[NPF_EVICT_RING_ENTRIES][2];
	unsigned int n_old_ranges;
	bool old_known;
	__u32 late_zaps; /* this npfd's zaps still in flight after their batch ended */
	/* unregisters answered once no zap is in flight (evict_region_gone()) */
	struct npfd_wait *waits;
	__u64 waits_deadline; /* or then, with a warning */
};

static struct evict_hooks hooks;
static struct {
	enum { B_IDLE, B_ACK, B_WRITE, B_ZAP } state;
	struct npfd_region *r; /* NULL once the region went (see batch_end()) */
	struct npfd_mm *mm;
	pid_t tgid;
	__u64 page[EVICT_BATCH];
	bool zapped[EVICT_BATCH];   /* read out and handed to the zap */
	bool removed[EVICT_BATCH];  /* the zap's REMOVE event came: the page went */
	bool dirty[EVICT_BATCH];    /* written back before the zap (else dropped clean) */
	bool unmapped[EVICT_BATCH]; /* the process unmapped it meanwhile: never touched again */
	bool dropped[EVICT_BATCH];  /* the process dropped it before its zap: kept, copy gone */
	unsigned int n;
	unsigned int writes;   /* write-back SQEs whose completion is awaited */
	unsigned int zaps;     /* zap SQEs whose completion is awaited */
	unsigned int zap_next; /* first victim not handed to the zap yet */
	__u64 deadline;
	__u64 gen;
	char *buf; /* the victims' data, EVICT_BATCH pages */
} b;

/*
 * Our zaps' user_data: ZAP_TAG, this npfd's epoch (random: an earlier
 * npfd's zaps still completing in an adopted ring are not taken for this
 * one's) and the batch.
 */
static __u16 zap_epoch;

static inline __u64 zap_tag(void)
{
	return ZAP_TAG | ((__u64)zap_epoch << 24) | (b.gen & 0xffffff);
}

/* A zap of this npfd's, of any batch? */
static inline bool zap_ours(__u64 user_data)
{
	return (user_data & ~0xffffffULL) == (ZAP_TAG | ((__u64)zap_epoch << 24));
}

static struct io_uring wb_ring; /* write-back */
static bool wb_ready;
static __u64 client_budget; /* pages; 0: none */
static unsigned int high_pct = 100, low_pct = 90;

static inline __u64 page_index(const struct npfd_region *r, __u64 page)
{
	return (page - r->start) >> NPF_PAGE_SHIFT;
}

int evict_init(const char *swap_dir, const struct evict_hooks *h)
{
	hooks = *h;
	int err;

	if (getrandom(&zap_epoch, sizeof(zap_epoch), 0) != sizeof(zap_epoch))
		zap_epoch = (__u16)(getpid() ^ now_ns());
	b.buf = mmap(NULL, EVICT_BATCH * NPF_PAGE_SIZE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b.buf == MAP_FAILED) {
		b.buf = NULL;
		pr_err("eviction: cannot map its buffer: %s", strerror(errno));
		return -ENOMEM;
	}
	err = io_uring_queue_init(EVICT_BATCH, &wb_ring, 0);
	if (err) {
		pr_err("eviction: cannot create the write-back io_uring: %s", strerror(-err));
		return err;
	}
	wb_ready = true;
	/* Without a store, budgets of anonymous regions are refused with the reason. */
	if (swapstore_open(swap_dir))
		pr_warn("eviction: no swap store: anonymous regions cannot have a budget");
	return 0;
}

void evict_exit(void)
{
	if (wb_ready)
		io_uring_queue_exit(&wb_ring);
	wb_ready = false;
	swapstore_close();
	if (b.buf)
		munmap(b.buf, EVICT_BATCH * NPF_PAGE_SIZE);
	b.buf = NULL;
}

void evict_set_config(unsigned int client_budget_mib, unsigned int high, unsigned int low)
{
	client_budget = (__u64)client_budget_mib << (20 - NPF_PAGE_SHIFT);
	high_pct = high;
	low_pct = low < high ? low : high;
}

static void region_stats(struct npfd_region *r)
{
	struct evict_region *e = r->ev;
	struct npf_budget_info *bi = r->budget_info;

	if (!bi)
		return;
	bi->budget_pages = e ? e->budget : 0;
	bi->high_pages = bi->budget_pages * high_pct / 100;
	bi->low_pages = bi->budget_pages * low_pct / 100;
	bi->resident_pages = r->ninstalled;
}

/*
 * Registering the range again for write-protect faults too (the same
 * userfaultfd may widen its own registration) makes read faults
 * installable write-protected, the dirty tracking eviction needs. Not its
 * holes: a mapping the process made there is its own (registered, its
 * faults would come to npfd, which has no region there to serve them).
 */
static int region_wp(struct npfd_region *r, char *err, size_t errlen)
{
	struct uffdio_register reg = {.mode = UFFDIO_REGISTER_MODE_MISSING |
					      UFFDIO_REGISTER_MODE_WP};
	__u64 lo, pe, end = r->start + r->length;

	if (r->ev->wp)
		return 0;
	for (lo = r->start; holes_piece(&r->holes, &lo, end, &pe); lo = pe) {
		reg.range.start = lo;
		reg.range.len = pe - lo;
		if (mmcall_ioctl(r->mm->tgid, r->mm->uffd, UFFDIO_REGISTER, &reg, sizeof(reg)))
			return refuse(
				err, errlen, errno,
				"region %u: cannot register it for write-protect faults (%s): its writes could not be tracked during eviction",
				r->id, strerror(errno));
	}
	r->ev->wp = true;
	r->install_clean = true; /* resolve.c installs read faults write-protected now */
	return 0;
}

/* Milliseconds since npfd started (never 0: 0 means "not touched"). */
static __u32 start_ms(void)
{
	static __u64 t0;
	__u64 t = now_ns();

	if (!t0)
		t0 = t;
	return (__u32)((t - t0) / 1000000) + 1;
}

/*
 * May a zap of the npfd that served mm before this one adopted it still
 * run? While the ring says so (its zaps not completed when it was
 * adopted), or, until the process sends its ring, for a while after the
 * adoption: libnpf sends it right after its regions.
 */
static bool old_zaps_pending(const struct npfd_mm *mm)
{
	if (mm->evict_ring)
		return mm->evict_ring->old_zaps != 0;
	return mm->old_zaps_until && now_ns() < mm->old_zaps_until;
}

static void found_old_frozen(struct npfd_region *r, __u64 start, __u64 npages, void *arg)
{
	struct bitmap *map = arg;

	for (__u64 i = page_index(r, start), end = i + npages; i < end; i++)
		bitmap_set(map, i);
}

/*
 * The adopted ring tells which ranges the earlier npfds' zaps in flight
 * may drop (ring_take_over()): exactly the pages under them are possible
 * victims, whatever they are now.
 */
static void old_frozen_from_ranges(struct npfd_region *r, struct evict_region *e,
				   const struct evict_ring *er)
{
	bitmap_clear_all(e->old_frozen);
	for (unsigned int k = 0; k < er->n_old_ranges; k++) {
		__u64 lo = er->old_range[k][0], hi = lo + er->old_range[k][1];

		lo = lo > r->start ? lo & ~(NPF_PAGE_SIZE - 1) : r->start;
		hi = hi < r->start + r->length ? hi : r->start + r->length;
		for (__u64 p = lo; p < hi; p += NPF_PAGE_SIZE)
			bitmap_assign(e->old_frozen, page_index(r, p), true);
	}
}

static void found_present(struct npfd_region *r, __u64 start, __u64 npages, void *arg)
{
	struct bitmap *map = arg;

	for (__u64 i = page_index(r, start), end = i + npages; i < end; i++)
		bitmap_clear(map, i);
}

/*
 * r's page state is made while zaps of the npfd before this one may still
 * run. A page write-protected now may be one of its victims whose zap has
 * not run: frozen with its copy stored, or clean and dropped with no copy
 * at all (installed as zeros or from its file and never written since).
 * Taken again, it would have a second zap queued behind the first, which
 * drops a write made between the two (zap_may_be_queued()). So may a page
 * not present now: a victim the process dropped itself while no npfd ran
 * (its zap still to run), written after the adoption, lost that write to
 * the zap (tests/evict_adopt_dropped: 1 page of zeros); counted as one,
 * it is installed write-protected and its writes wait for the earlier
 * zaps (zap_may_run()). Only a page present and writable is surely no
 * victim: a victim is write-protected before its zap is queued. The
 * stored bits know only stored victims, and a file-backed region has
 * none. A REMOVE does not unmark a page: it may be the process's own
 * drop, the zap still to run. Unreadable: every page counts as one.
 */
static int old_frozen_scan(struct npfd_region *r, struct evict_region *e)
{
	const struct evict_ring *er = r->mm->evict_ring;
	int err;

	if (!e->old_frozen)
		e->old_frozen = bitmap_new(e->npages);
	if (!e->old_frozen)
		return -ENOMEM;
	if (er && er->old_known) {
		old_frozen_from_ranges(r, e, er);
		return 0;
	}
	bitmap_fill(e->old_frozen);
	err = region_scan_present(r, false, found_present, e->old_frozen);
	if (!err)
		err = region_scan_present(r, true, found_old_frozen, e->old_frozen);
	if (err) {
		pr_warn("region %u: cannot read which pages of pid %d are present and write-protected: %s (none is evicted until the earlier npfd's zaps are done)",
			r->id, r->mm->tgid, strerror(-err));
		bitmap_fill(e->old_frozen);
	}
	return 0;
}

static void ev_free(struct evict_region *e)
{
	bitmap_free(e->clean);
	bitmap_free(e->ref);
	bitmap_free(e->busy);
	bitmap_free(e->late);
	bitmap_free(e->dev_wait);
	free(e->installs - e->cut);
	free(e->touched - e->cut);
	bitmap_free(e->stored);
	bitmap_free(e->old_frozen);
	free(e);
}

static struct evict_region *region_ev(struct npfd_region *r, char *err, size_t errlen)
{
	struct evict_region *e = r->ev;
	__u64 n = r->length >> NPF_PAGE_SHIFT;

	if (e)
		return e;
	e = calloc(1, sizeof(*e));
	if (!e) {
		refuse(err, errlen, ENOMEM, "out of memory");
		return NULL;
	}
	e->npages = n;
	/* an adopted region's store may begin past its first page (npf_abi.h NPF_MSG_LAYOUT) */
	e->store_base = r->backing == NPF_BACKING_ANON ? r->file_offset >> NPF_PAGE_SHIFT : 0;
	e->clean = bitmap_new(n);
	e->ref = bitmap_new(n);
	e->busy = bitmap_new(n);
	e->late = bitmap_new(n);
	e->dev_wait = bitmap_new(n);
	e->installs = calloc(n ? n : 1, sizeof(*e->installs));
	e->touched = calloc(n ? n : 1, sizeof(*e->touched));
	if (r->backing == NPF_BACKING_ANON)
		e->stored = bitmap_new(n);
	if (!e->clean || !e->ref || !e->busy || !e->late || !e->dev_wait || !e->installs ||
	    !e->touched || (r->backing == NPF_BACKING_ANON && !e->stored)) {
		ev_free(e);
		refuse(err, errlen, ENOMEM, "out of memory for region %u's page state", r->id);
		return NULL;
	}
	if (old_zaps_pending(r->mm) && old_frozen_scan(r, e)) {
		ev_free(e);
		refuse(err, errlen, ENOMEM, "out of memory for region %u's page state", r->id);
		return NULL;
	}
	if (r->backing == NPF_BACKING_FILE) {
		int mode = fcntl(r->file_fd, F_GETFL);

		e->writable = mode >= 0 && (mode & O_ACCMODE) == O_RDWR;
	}
	r->ev = e;
	r->evicting = e->busy;
	return e;
}

/* Can npfd evict r's pages at all? 0, or -errno with the reason. */
static int evictable(struct npfd_region *r, char *err, size_t errlen)
{
	if (!r->mm->evict_ring)
		return refuse(
			err, errlen, EOPNOTSUPP,
			"region %u: pid %d gave npfd no eviction ring (libnpf older than eviction, or io_uring SQPOLL refused): its pages cannot be taken away",
			r->id, r->mm->tgid);
	if (!r->installed)
		return refuse(err, errlen, ENOMEM, "region %u has no page bitmap", r->id);
	if (r->backing == NPF_BACKING_FILE && r->ev && !r->ev->writable)
		return refuse(
			err, errlen, EBADF,
			"region %u: its backing file was opened read-only, so dirty pages could not be written back: register it with a descriptor opened O_RDWR",
			r->id);
	if (r->backing == NPF_BACKING_ANON && !swapstore_ready())
		return refuse(
			err, errlen, ENOSPC,
			"region %u: npfd has no swap store for anonymous pages (see its start-up log, swap-dir)",
			r->id);
	return 0;
}

int evict_region_set(struct npfd_client *c, const struct npf_region_set_req *req,
		     struct npf_budget_info *out, char *err, size_t errlen)
{
	struct npfd_region *r = region_find_id(req->region_id);
	struct evict_region *e;
	__u64 pages;
	int ret;

	if (req->key != NPF_SET_BUDGET)
		return refuse(err, errlen, EOPNOTSUPP, "unknown region setting %u (budget is %u)",
			      req->key, NPF_SET_BUDGET);
	if (!r)
		return refuse(err, errlen, ENOENT, "no region %u", req->region_id);
	if (!c->privileged && c->uid != r->mm->uid)
		return refuse(
			err, errlen, EPERM,
			"region %u belongs to another user: only its owner or root may set its budget",
			r->id);
	if (req->value % NPF_PAGE_SIZE)
		return refuse(err, errlen, EINVAL,
			      "budget %llu is not a multiple of the page size (%llu)",
			      (unsigned long long)req->value, NPF_PAGE_SIZE);
	pages = req->value >> NPF_PAGE_SHIFT;
	if (pages && pages * low_pct / 100 == 0)
		return refuse(err, errlen, EINVAL,
			      "budget %llu bytes is too small: its low watermark (%u%%) is no page",
			      (unsigned long long)req->value, low_pct);
	if (pages) {
		e = region_ev(r, err, errlen);
		if (!e)
			return -ENOMEM;
		ret = evictable(r, err, errlen);
		if (!ret)
			ret = region_wp(r, err, errlen);
		if (ret)
			return ret;
	} else if (!r->ev) {
		goto done;
	}
	r->ev->budget = pages;
	pr_info("region %u: budget %llu pages (high %llu, low %llu)", r->id,
		(unsigned long long)pages, (unsigned long long)(pages * high_pct / 100),
		(unsigned long long)(pages * low_pct / 100));
done:
	region_stats(r);
	if (r->budget_info)
		*out = *r->budget_info;
	else
		memset(out, 0, sizeof(*out));
	return 0;
}

void evict_budget_list(__u32 id, void (*emit)(const struct npf_budget_info *, void *), void *arg)
{
	struct npfd_mm *mm;
	struct npfd_region *r;

	list_for_each_entry(mm, &mms, node)
		list_for_each_entry(r, &mm->regions, node) {
			if ((id && r->id != id) || !r->budget_info)
				continue;
			region_stats(r);
			emit(r->budget_info, arg);
		}
}

/*
 * The ring's descriptor is the client's: fetch it with pidfd_getfd() and
 * check that it is what npfd will trust with MADV_DONTNEED -- an io_uring
 * whose submission thread belongs to the client (a ring without SQPOLL
 * would run npfd's madvise in npfd's own address space), of the size npfd
 * lays its queues out for.
 */
static int ring_check(int fd, pid_t tgid, char *err, size_t errlen)
{
	char path[64], buf[2048], *p;
	unsigned int sqmask = 0, cqmask = 0;
	int f, sq_tid = -1, tg = -1;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/thread-self/fd/%d", fd);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n < 0 || (buf[n] = '\0', strcmp(buf, "anon_inode:[io_uring]")))
		return refuse(err, errlen, EBADF, "descriptor is not an io_uring");
	snprintf(path, sizeof(path), "/proc/thread-self/fdinfo/%d", fd);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return refuse(err, errlen, errno, "cannot inspect the io_uring: %s",
			      strerror(errno));
	n = read(f, buf, sizeof(buf) - 1);
	close(f);
	if (n <= 0)
		return refuse(err, errlen, EIO, "cannot read the io_uring's fdinfo");
	buf[n] = '\0';
	if ((p = strstr(buf, "SqMask:")))
		sscanf(p, "SqMask:\t%x", &sqmask);
	if ((p = strstr(buf, "CqMask:")))
		sscanf(p, "CqMask:\t%x", &cqmask);
	if ((p = strstr(buf, "SqThread:")))
		sscanf(p, "SqThread:\t%d", &sq_tid);
	if (sqmask != NPF_EVICT_RING_ENTRIES - 1 || cqmask != 2 * NPF_EVICT_RING_ENTRIES - 1)
		return refuse(err, errlen, EINVAL,
			      "the io_uring has %u/%u entries, not %u/%u (NPF_EVICT_RING_ENTRIES)",
			      sqmask + 1, cqmask + 1, NPF_EVICT_RING_ENTRIES,
			      2 * NPF_EVICT_RING_ENTRIES);
	if (sq_tid <= 0)
		return refuse(
			err, errlen, EINVAL,
			"the io_uring has no submission thread (create it with IORING_SETUP_SQPOLL)");
	snprintf(path, sizeof(path), "/proc/%d/status", sq_tid);
	f = open(path, O_RDONLY | O_CLOEXEC);
	n = f >= 0 ? read(f, buf, sizeof(buf) - 1) : -1;
	if (f >= 0)
		close(f);
	if (n > 0) {
		buf[n] = '\0';
		if ((p = strstr(buf, "\nTgid:")))
			sscanf(p, "\nTgid:\t%d", &tg);
	}
	/*
	 * fdinfo gives the thread's pid in the initial pid namespace: an npfd
	 * in another one cannot look it up, so cannot tell whose it is.
	 */
	if (tg < 0)
		return refuse(
			err, errlen, EPERM,
			"cannot tell whose the io_uring's submission thread %d is (npfd runs in another pid namespace than the kernel's first): eviction needs npfd in the initial pid namespace",
			sq_tid);
	if (tg != tgid)
		return refuse(err, errlen, EPERM,
			      "the io_uring's submission thread is not pid %d's (it is %d's)", tgid,
			      tg);
	return 0;
}

/* io_uring's queue layout for NPF_EVICT_RING_ENTRIES, learnt once from a ring of npfd's own. */
static struct io_uring_params ring_layout;
static bool ring_layout_known;

/*
 * The ring's memory is the client's to write, its header included, and
 * liburing takes each queue's size and mask from the header when it maps
 * a ring: it would index the queues and unmap them (io_uring_queue_exit())
 * by what the client wrote there (tests/evict_refuse: a header saying 2^30
 * entries made npfd write past the mapping and die). So npfd gives the
 * mapped ring its own ring's sizes, and refuses a ring whose header says
 * anything else, or whose completion queue says more completions are
 * waiting than it can hold (the kernel keeps the rest in its overflow
 * list). The zaps in flight it says it has are believed: a lie there makes
 * the client's own writes to evicted pages wait.
 *
 * A ring an earlier npfd used goes on from where it stopped (liburing
 * starts a mapped ring at 0, and its first submission would make the
 * kernel run the stale entries again). Its zaps not completed yet (one
 * completion per entry: libnpf submits nothing) are awaited: *old.
 * Completions it did not reap (it was stopped, or killed, after they
 * came) are of zaps done: skipped, or ring_reap() would count them off
 * the zaps still in flight and end the wait for those early
 * (tests/evict_adopt_frozen lost pages so). One snapshot of the
 * completion tail decides both.
 */
static void old_zap_ranges(struct evict_ring *er, unsigned int sq_tail);

static int ring_take_over(struct evict_ring *er, char *err, size_t errlen)
{
	struct io_uring_sq *sq = &er->ring.sq;
	struct io_uring_cq *cq = &er->ring.cq;
	unsigned int cq_head, cq_tail, sq_tail;

	sq->ring_entries = ring_layout.sq_entries;
	sq->ring_mask = ring_layout.sq_entries - 1;
	cq->ring_entries = ring_layout.cq_entries;
	cq->ring_mask = ring_layout.cq_entries - 1;
	if (*sq->kring_entries != sq->ring_entries || *sq->kring_mask != sq->ring_mask ||
	    *cq->kring_entries != cq->ring_entries || *cq->kring_mask != cq->ring_mask)
		return refuse(
			err, errlen, EINVAL,
			"the io_uring's header says %u and %u entries (masks 0x%x, 0x%x), not %u and %u: it was written over",
			*sq->kring_entries, *cq->kring_entries, *sq->kring_mask, *cq->kring_mask,
			sq->ring_entries, cq->ring_entries);
	cq_head = __atomic_load_n(cq->khead, __ATOMIC_ACQUIRE);
	cq_tail = __atomic_load_n(cq->ktail, __ATOMIC_ACQUIRE);
	sq_tail = __atomic_load_n(sq->ktail, __ATOMIC_ACQUIRE);
	if (cq_tail - cq_head > cq->ring_entries)
		return refuse(
			err, errlen, EINVAL,
			"the io_uring's completion queue says %u completions are waiting, more than it holds (%u): it was written over",
			cq_tail - cq_head, cq->ring_entries);
	sq->sqe_head = sq->sqe_tail = sq_tail;
	__atomic_store_n(cq->khead, cq_tail, __ATOMIC_RELEASE);
	er->old_zaps = sq_tail - cq_tail;
	old_zap_ranges(er, sq_tail);
	return 0;
}

/*
 * The ranges the earlier npfds' zaps still in flight may drop. An npfd
 * keeps at most NPF_EVICT_RING_ENTRIES zaps in flight in a ring, its
 * predecessors' counted (zap_more()), so each of them is among the last
 * that many submitted, whose entries no later submission has written
 * over -- libnpf gives the ring one io-wq worker, so zaps complete in
 * the order they were submitted: their zaps' ranges are a superset (some
 * of those zaps are done). The client can write the entries: a lie makes its own writes wait, or
 * exposes them to its own zaps -- as a lie about the count does.
 */
static void old_zap_ranges(struct evict_ring *er, unsigned int sq_tail)
{
	const struct io_uring_sq *sq = &er->ring.sq;
	unsigned int n = sq->ring_entries, k;

	er->n_old_ranges = 0;
	er->old_known = er->old_zaps <= n;
	if (!er->old_zaps || !er->old_known)
		return;
	/* the last n whatever the tail's wraps: a fresh ring's unused entries are zeros, no-ops */
	for (k = sq_tail - n; k != sq_tail; k++) {
		const struct io_uring_sqe *sqe =
			&sq->sqes[sq->array[k & sq->ring_mask] & sq->ring_mask];

		if (sqe->opcode != IORING_OP_MADVISE ||
		    (sqe->user_data & 0xffffff0000000000ULL) != ZAP_TAG)
			continue;
		er->old_range[er->n_old_ranges][0] = sqe->addr;
		er->old_range[er->n_old_ranges][1] = sqe->len;
		er->n_old_ranges++;
	}
	/* fewer zaps there than in flight: entries written over (an earlier rule, or a lie) */
	if (er->n_old_ranges < er->old_zaps)
		er->old_known = false;
}

static void unfreeze(struct npfd_mm *mm, struct npfd_region *r, __u64 page);
static void adopt_frozen(struct npfd_region *r);
static bool old_victim(const struct npfd_region *r, __u64 i, bool old_zaps);

/*
 * The ring came: until now (since the adoption) every page that might be
 * an earlier npfd's victim counted as one (old_frozen_scan() by pagemap);
 * now the ranges of its zaps in flight are known, and only their pages
 * count. A page held meanwhile (a write to it waited, evict_wp_fault())
 * that no such zap can reach goes on now.
 */
static void old_zaps_known(struct npfd_mm *mm)
{
	const struct evict_ring *er = mm->evict_ring;
	char err[NPF_ERRMSG_LEN];
	struct npfd_region *r;
	__u64 i, let_go = 0;

	if (!er->old_zaps)
		return; /* late_settle() lets every held page go */
	list_for_each_entry(r, &mm->regions, node) {
		struct evict_region *e = r->ev;
		bool under = false;

		for (unsigned int k = 0; k < er->n_old_ranges; k++)
			under |= er->old_range[k][0] < r->start + r->length &&
				 er->old_range[k][0] + er->old_range[k][1] > r->start;
		if (!er->old_known) {
			adopt_frozen(r); /* as at the adoption, if not done then */
			continue;
		}
		if (!e && !under)
			continue;
		/* page state for its possible victims, their installs write-protected */
		if (!e || !e->old_frozen) {
			if ((!e && !region_ev(r, err, sizeof(err))) ||
			    (e && old_frozen_scan(r, e))) {
				pr_warn("region %u: no page state for the earlier npfd's zaps",
					r->id);
				continue;
			}
			e = r->ev;
		} else {
			old_frozen_from_ranges(r, e, er);
		}
		if (under && region_wp(r, err, sizeof(err)))
			pr_warn("region %u: %s", r->id, err);
		for (i = bitmap_next(e->late, 0, e->npages); i < e->npages;
		     i = bitmap_next(e->late, i + 1, e->npages)) {
			if (old_victim(r, i, true))
				continue;
			bitmap_assign(e->late, i, false);
			bitmap_assign(e->busy, i, false);
			unfreeze(mm, r, r->start + i * NPF_PAGE_SIZE);
			let_go++;
		}
	}
	if (let_go)
		pr_info("pid %d: %llu pages held for the earlier npfd's zaps are out of their reach: let go",
			mm->tgid, (unsigned long long)let_go);
}

int evict_ring_adopt(struct npfd_client *c, const struct npf_evict_ring_req *req, char *err,
		     size_t errlen)
{
	struct npfd_mm *mm = c->mm;
	struct evict_ring *er;
	struct io_uring_params p;
	int pidfd, fd, ret;

	if (req->flags)
		return refuse(err, errlen, EINVAL, "unknown flags 0x%x", req->flags);
	if (!mm || mm->tgid != c->pid)
		return refuse(
			err, errlen, ENOENT,
			"this connection has registered no region: send the ring after the first");
	if (mm->evict_ring)
		return refuse(err, errlen, EEXIST, "pid %d already gave npfd its eviction ring",
			      c->pid);
	if (req->fd < 0)
		return refuse(err, errlen, EBADF, "descriptor number %d", req->fd);
	if (!ring_layout_known) {
		struct io_uring probe;

		memset(&ring_layout, 0, sizeof(ring_layout));
		ret = io_uring_queue_init_params(NPF_EVICT_RING_ENTRIES, &probe, &ring_layout);
		if (ret)
			return refuse(err, errlen, -ret, "cannot learn the io_uring layout: %s",
				      strerror(-ret));
		io_uring_queue_exit(&probe);
		ring_layout_known = true;
	}
	pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
	if (pidfd < 0)
		return refuse(err, errlen, errno, "cannot open pid %d: %s", c->pid,
			      strerror(errno));
	/* the kernel takes the process's exec_update_lock: on mmcall.c's thread */
	fd = mmcall_getfd(c->pid, pidfd, req->fd);
	ret = fd < 0 ? -errno : 0;
	close(pidfd);
	if (ret)
		return refuse(err, errlen, -ret, "cannot fetch descriptor %d of pid %d: %s%s",
			      req->fd, c->pid, strerror(-ret),
			      ret == -EPERM ? " (npfd needs CAP_SYS_PTRACE for pidfd_getfd)" : "");
	ret = ring_check(fd, c->pid, err, errlen);
	er = ret ? NULL : calloc(1, sizeof(*er));
	if (!ret && !er)
		ret = refuse(err, errlen, ENOMEM, "out of memory");
	if (!ret) {
		p = ring_layout;
		p.flags |= IORING_SETUP_SQPOLL;
		ret = io_uring_queue_mmap(fd, &p, &er->ring);
		if (ret) {
			ret = refuse(err, errlen, -ret, "cannot map the io_uring: %s",
				     strerror(-ret));
		} else if ((ret = ring_take_over(er, err, errlen))) {
			io_uring_queue_exit(&er->ring); /* by npfd's sizes; closes fd */
			fd = -1;
		}
	}
	if (ret) {
		free(er);
		mmcall_close(c->pid, fd); /* whatever the client named: a FUSE file's close waits */
		return ret;
	}
	/*
	 * The SQ index array is the submitter's to fill, and libnpf never
	 * mapped the ring: identity, as liburing sets it up for its own rings.
	 */
	for (unsigned int i = 0; i < er->ring.sq.ring_entries; i++)
		er->ring.sq.array[i] = i;
	if (er->old_zaps)
		pr_info("pid %d: %u zaps of the earlier npfd are still in flight%s", c->pid,
			er->old_zaps,
			er->old_known ?
				"" :
				" (more than a ring holds: which pages they drop is not known)");
	er->fd = fd;
	mm->evict_ring = er;
	old_zaps_known(mm);
	pr_info("pid %d: eviction ring adopted", c->pid);
	/* Its regions registered before the ring came may have a budget waiting. */
	{
		struct npfd_region *r;

		list_for_each_entry(r, &mm->regions, node) {
			if (hooks.region_evictable)
				hooks.region_evictable(r);
			evict_region_registered(r);
		}
	}
	return 0;
}

/*
 * What an unregister of one of mm's regions waits for: zaps in flight in
 * its ring (this npfd's late ones, an earlier npfd's), and a batch of mm's
 * that has not ended (one still writing its victims out ends without
 * zapping; one zapping puts back what it zapped): once answered, the
 * process may unmap the range and map something else there.
 */
static bool batch_or_zaps(const struct npfd_mm *mm)
{
	const struct evict_ring *er = mm->evict_ring;

	return er && ((b.state != B_IDLE && b.mm == mm) || er->late_zaps || er->old_zaps);
}

/* unregisters waiting in rings' lists: they are answered soon after the last zap */
static unsigned int nr_waits;

static void ring_answer_waits(struct evict_ring *er)
{
	while (er->waits) {
		struct npfd_wait *w = er->waits;

		nr_waits--;
		er->waits = w->next;
		w->next = NULL;
		wait_done(w);
	}
}

/* Unregisters of mm's regions that waited for its zaps: answered once they are done. */
static void ring_check_waits(struct npfd_mm *mm)
{
	struct evict_ring *er = mm->evict_ring;

	if (!er->waits)
		return;
	if (batch_or_zaps(mm) && now_ns() < er->waits_deadline)
		return;
	if (batch_or_zaps(mm))
		pr_warn("pid %d: answering an unregister with zaps still in flight after %llu s: a mapping made at its addresses now may lose pages",
			mm->tgid, (unsigned long long)(EVICT_ZAP_TIMEOUT_NS / 1000000000ULL));
	ring_answer_waits(er);
}

static void ring_free(struct evict_ring *er)
{
	if (!er)
		return;
	ring_answer_waits(er);		/* the process is gone: nothing can be mapped any more */
	io_uring_queue_exit(&er->ring); /* unmaps and closes er->fd */
	free(er);
}

/* A new region: the client's budget applies to it (npfd.conf), so it is prepared now. */
void evict_region_registered(struct npfd_region *r)
{
	char err[NPF_ERRMSG_LEN];

	if (!client_budget || (r->ev && r->ev->wp) || !r->mm->evict_ring)
		return; /* an adopted region may have r->ev already: its stored pages */
	if (!region_ev(r, err, sizeof(err)) || evictable(r, err, sizeof(err)) ||
	    region_wp(r, err, sizeof(err)))
		pr_warn("region %u: the client budget cannot apply: %s", r->id, err);
}

/* The store's byte offset of the region's page i. */
static inline __u64 store_offset(const struct evict_region *e, __u64 i)
{
	return (e->store_base + i) << NPF_PAGE_SHIFT;
}

/* Pages [first, last] of r are not stored any more: holes in the store. */
static void free_slots(struct npfd_region *r, __u64 first, __u64 last)
{
	struct evict_region *e = r->ev;
	__u64 i;

	if (!e || !e->stored || first >= e->npages)
		return;
	last = last < e->npages - 1 ? last : e->npages - 1;
	for (i = bitmap_next(e->stored, first, last + 1); i <= last;
	     i = bitmap_next(e->stored, i + 1, last + 1)) {
		swapstore_punch(r->store_fd, store_offset(e, i));
		bitmap_assign(e->stored, i, false);
		if (r->budget_info)
			r->budget_info->stored_pages--;
	}
}

/*
 * The region's store, made when it was registered or adopted
 * (evict_store_reader()), or else with its first stored page: named, so
 * that the next npfd finds it if this one dies.
 */
static int store_open(struct npfd_region *r)
{
	if (r->store_fd < 0)
		r->store_fd = swapstore_create(r->mm->tgid, r->id, r->store_name);
	return r->store_fd < 0 ? r->store_fd : 0;
}

int evict_store_reader(struct npfd_region *r)
{
	char path[32];
	int fd;

	if (!r || r->backing != NPF_BACKING_ANON || !swapstore_ready() || store_open(r))
		return -1;
	/* a new open of the same file, read-only: the process cannot write through it */
	snprintf(path, sizeof(path), "/proc/thread-self/fd/%d", r->store_fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		pr_warn_rl("region %u: cannot open its swap store %s read-only for pid %d: %s",
			   r->id, r->store_name, r->mm->tgid, strerror(errno));
	return fd;
}

/* Pages stored and not in the process now: only the store holds them. */
/*
 * Pages r's store may hold a copy of: those of its range now (a cut at its
 * top leaves the bitmaps as long as they were, and a copy past the end
 * may be kept while an earlier npfd's zaps may run: it is not r's).
 */
static __u64 store_pages(const struct npfd_region *r)
{
	__u64 n = r->length >> NPF_PAGE_SHIFT;

	return r->ev && r->ev->stored ? (n < r->ev->npages ? n : r->ev->npages) : 0;
}

/* Is page i of r one only its store holds (stored, not there, not in a hole)? */
static bool stored_only_at(const struct npfd_region *r, __u64 i)
{
	__u64 page = r->start + i * NPF_PAGE_SIZE;

	return bitmap_test(r->ev->stored, i) && !region_page_installed(r, page) &&
	       !holes_contain(&r->holes, page);
}

__u64 evict_stored_only(const struct npfd_region *r)
{
	__u64 i, n = 0, npages = store_pages(r);

	/* store_pages() is 0 without a store: r->ev->stored is read only with one */
	for (i = npages ? bitmap_next(r->ev->stored, 0, npages) : 0; i < npages;
	     i = bitmap_next(r->ev->stored, i + 1, npages))
		n += stored_only_at(r, i);
	return n;
}

bool evict_put_back_under_way(const struct npfd_region *r)
{
	/* its client asked within EVICT_LEAVING_NS: no batch took a page since */
	return r->ev && r->ev->put_back_next && r->ev->leaving_until > now_ns();
}

void evict_region_gone(struct npfd_region *r, bool stopping, struct npfd_wait *w)
{
	struct evict_region *e = r->ev;
	struct evict_ring *er = r->mm->evict_ring;
	__u64 left;

	if (b.state != B_IDLE && b.r == r)
		b.r = NULL; /* no more zaps; batch_end() puts zapped pages back if it can */
	/*
	 * A zap the client's ring has taken runs at whatever is mapped at its
	 * address when it runs (the kernel looks the address up again after
	 * npfd reads its REMOVE). A client that unmaps the range once it has
	 * the answer, and maps something else there, must not meet one: the
	 * answer waits for the ring's zaps (and batch_end()'s put-backs).
	 */
	if (w && batch_or_zaps(r->mm)) {
		if (!er->waits)
			er->waits_deadline = now_ns() + EVICT_ZAP_TIMEOUT_NS;
		w->next = er->waits;
		er->waits = w;
		w->pending++;
		nr_waits++;
	}
	/*
	 * npfd stops with pages only the store holds (evict_stop() could not
	 * put them back): the store stays for the next npfd, which the
	 * process asks to adopt the region. Otherwise it goes (the process's
	 * read-only descriptor of it keeps what it holds readable).
	 */
	left = e && stopping ? evict_stored_only(r) : 0;
	if (left)
		pr_warn("region %u: %llu evicted pages stay in the swap store %s for the next npfd",
			r->id, (unsigned long long)left, r->store_name);
	else if (r->store_fd >= 0)
		swapstore_remove(r->store_name);
	if (r->store_fd >= 0)
		close(r->store_fd);
	r->store_fd = -1;
	r->store_name[0] = '\0';
	if (!e)
		return;
	ev_free(e);
	r->ev = NULL;
	r->evicting = NULL;
	r->install_clean = false;
}

/*
 * The pages r's store (r->store_fd) holds, from its first data at data
 * on: stored (SEEK_DATA / SEEK_HOLE say where). How many were not yet.
 */
/*
 * Pages [i, end) of r have data in its store: stored, but in a hole of
 * the region (check_adopted() found them) no copy is the region's. Such
 * copies are a part's that libnpf put back after the earlier npfd died
 * (its store is read-only to the process): punched, not counted.
 */
static __u64 store_scan_run(struct npfd_region *r, struct evict_region *e, __u64 i, __u64 end)
{
	__u64 found = 0, at = r->start + (i << NPF_PAGE_SHIFT),
	      hi = r->start + (end << NPF_PAGE_SHIFT);
	__u64 lo, pe;

	for (lo = at; lo < hi; lo = pe) {
		if (!holes_piece(&r->holes, &lo, hi, &pe))
			lo = pe = hi;
		if (lo > at)
			swapstore_punch_range(r->store_fd, store_offset(e, page_index(r, at)),
					      lo - at);
		for (i = page_index(r, lo); i < page_index(r, pe); i++)
			if (!bitmap_test(e->stored, i)) {
				bitmap_assign(e->stored, i, true);
				found++;
			}
		at = pe;
	}
	return found;
}

static __u64 store_scan(struct npfd_region *r, struct evict_region *e, off_t data)
{
	__u64 found = 0;
	off_t hole;

	for (; data >= 0; data = lseek(r->store_fd, hole, SEEK_DATA)) {
		__u64 i, end;

		hole = lseek(r->store_fd, data, SEEK_HOLE);
		if (hole < 0)
			break;
		/* store pages, from its base on (before it: pages cut off the region) */
		i = (__u64)data >> NPF_PAGE_SHIFT;
		i = i > e->store_base ? i - e->store_base : 0;
		end = ((__u64)hole + NPF_PAGE_SIZE - 1) >> NPF_PAGE_SHIFT;
		end = end > e->store_base ? end - e->store_base : 0;
		end = end < e->npages ? end : e->npages;
		found += store_scan_run(r, e, i, end);
	}
	if (r->budget_info)
		r->budget_info->stored_pages += found;
	return found;
}

static void count_pages(struct npfd_region *r, __u64 start, __u64 npages, void *arg)
{
	(void)r;
	(void)start;
	*(__u64 *)arg += npages;
}

/*
 * Pages the earlier npfd write-protected may be its victims, their zaps
 * still to run. They need this npfd's page state now, whatever the store
 * holds (a region whose victims were all clean has none), and the region's
 * installs write-protected again (region_wp(): the kernel kept its
 * write-protect registration). Without the state, a write to such a page
 * was let through at once; without region_wp(), a page the process
 * dropped itself and faulted in again was installed writable, its write
 * unseen: either way the zap then dropped the write (tests/
 * evict_adopt_frozen, a page it dropped before writing: zeros).
 */
static void adopt_frozen(struct npfd_region *r)
{
	char err[NPF_ERRMSG_LEN];
	__u64 frozen = 0;

	/* unreadable: as if some were (old_frozen_scan() then counts every page) */
	if (!old_zaps_pending(r->mm) ||
	    (!region_scan_present(r, true, count_pages, &frozen) && !frozen))
		return;
	if (!region_ev(r, err, sizeof(err)) || region_wp(r, err, sizeof(err)))
		pr_warn("region %u: %llu pages the earlier npfd write-protected: %s", r->id,
			(unsigned long long)frozen, err);
}

/*
 * Find the store the earlier npfd left, and which pages it holds: the
 * data in it (SEEK_DATA / SEEK_HOLE). A page both there and in the process
 * (the earlier npfd died before a refault punched its hole, or kept a
 * clean copy) is served from the process: a stored page is read only on a
 * missing fault, and every page starts dirty here (e->clean all clear),
 * so the copy is written again before the page is dropped.
 */
void evict_region_adopted(struct npfd_region *r, __u32 old_id)
{
	char name[SWAPSTORE_NAME_LEN], err[NPF_ERRMSG_LEN];
	struct evict_region *e;
	__u64 found;
	off_t data;
	bool evicted;
	int fd;

	if (!r->mm->evict_ring && !r->mm->old_zaps_until)
		r->mm->old_zaps_until = now_ns() + OLD_ZAP_WINDOW_NS;
	adopt_frozen(r);
	if (r->backing != NPF_BACKING_ANON || !swapstore_ready())
		return;
	fd = swapstore_find(r->mm->tgid, old_id, name);
	if (fd < 0)
		return;
	/*
	 * Nothing evicted (the store is made at the registration): no
	 * per-page state until a budget comes. A 64 TiB region's is 80 GiB
	 * of counters (tests/restart_sparse).
	 */
	data = lseek(fd, (off_t)r->file_offset, SEEK_DATA); /* the store's base (region_ev()) */
	evicted = data >= 0;
	e = evicted ? region_ev(r, err, sizeof(err)) : NULL;
	if (evicted && !e) {
		/* the file stays: an npfd with memory to spare may adopt it */
		pr_err("region %u: %s: its evicted pages in the swap store %s cannot be read back",
		       r->id, err, name);
		close(fd);
		return;
	}
	if (old_id != r->id)
		swapstore_rename(name, r->mm->tgid, r->id);
	r->store_fd = fd;
	memcpy(r->store_name, name, sizeof(name));
	if (!evicted)
		return;
	found = store_scan(r, e, data);
	pr_info("region %u: %llu evicted pages found in the swap store %s", r->id,
		(unsigned long long)found, r->store_name);
}

/* ---- fork() of a client (npf_abi.h NPF_MSG_FORK_PREPARE) ---- */

/*
 * Store pages copied for a fork at one request (NPF_MSG_FORK_PREPARE is
 * asked again until all are): about 5 ms of npfd's loop on this machine,
 * however much the process evicted (tests/adv_fork).
 */
#define FORK_COPY_STEP 4096

/* What a client's fork() keeps for its child: copies of its stores, as they were. */
struct evict_fork {
	__u8 token[NPF_FORK_TOKEN_LEN];
	bool ready;	 /* every copy made: the token was answered */
	unsigned int at; /* the copy being made */
	__u64 next;	 /* its region's next page to look at */
	unsigned int n;
	struct fork_copy {
		__u32 region_id; /* the parent's region */
		__u64 start, length;
		int fd; /* -1 once the child took it */
	} copy[];
};

static void fork_free(struct npfd_mm *mm)
{
	struct evict_fork *f = mm->fork;

	mm->fork_hold_until = 0;
	mm->fork = NULL;
	for (unsigned int i = 0; f && i < f->n; i++)
		if (f->copy[i].fd >= 0)
			close(f->copy[i].fd);
	free(f);
}

unsigned int evict_fork_fds(const struct npfd_mm *mm)
{
	unsigned int n = 0;

	for (unsigned int i = 0; mm->fork && i < mm->fork->n; i++)
		n += mm->fork->copy[i].fd >= 0;
	return n;
}

/* Does mm's fork still hold its eviction? Past NPF_FORK_HOLD_MS it ends by itself. */
static bool fork_holds(struct npfd_mm *mm, __u64 now)
{
	if (!mm->fork_hold_until)
		return false;
	if (now < mm->fork_hold_until)
		return true;
	pr_warn("pid %d: no end of its fork() in %d s: evicting its pages again", mm->tgid,
		NPF_FORK_HOLD_MS / 1000);
	fork_free(mm);
	return false;
}

/*
 * Copy up to FORK_COPY_STEP more of the pages mm's stores hold (the data
 * SEEK_DATA finds, of pages stored). 1: every copy is made, 0: more to do,
 * or -errno.
 */
static int fork_copy_step(struct npfd_mm *mm)
{
	struct evict_fork *f = mm->fork;
	__u64 left = FORK_COPY_STEP;

	while (f->at < f->n && left) {
		struct fork_copy *cp = &f->copy[f->at];
		struct npfd_region *r = region_find_id(cp->region_id);
		struct evict_region *e = r && r->mm == mm && r->start == cp->start ? r->ev : NULL;
		off_t data = -1, hole;
		__u64 i, end;

		if (e && e->stored && r->store_fd >= 0 && f->next < e->npages)
			data = lseek(r->store_fd, (off_t)store_offset(e, f->next), SEEK_DATA);
		/* gone meanwhile (its child does not have it either), or nothing more stored */
		if (data < 0 || (__u64)data / NPF_PAGE_SIZE - e->store_base >= e->npages) {
			f->at++;
			f->next = 0;
			continue;
		}
		hole = lseek(r->store_fd, data, SEEK_HOLE);
		i = (__u64)data / NPF_PAGE_SIZE - e->store_base;
		end = hole < 0 ? i + 1 :
				 ((__u64)hole + NPF_PAGE_SIZE - 1) / NPF_PAGE_SIZE - e->store_base;
		if (end > e->npages)
			end = e->npages;
		if (end - i > left)
			end = i + left;
		left -= end - i;
		f->next = end;
		for (__u64 n; i < end; i += n) {
			loff_t from = (loff_t)store_offset(e, i),
			       to = (loff_t)(i << NPF_PAGE_SHIFT);
			bool stored = bitmap_test(e->stored, i);
			size_t len;

			for (n = 1; i + n < end && bitmap_test(e->stored, i + n) == stored; n++)
				;
			for (len = stored ? (size_t)(n << NPF_PAGE_SHIFT) : 0; len;) {
				ssize_t got =
					copy_file_range(r->store_fd, &from, cp->fd, &to, len, 0);

				if (got <= 0)
					return got ? -errno : -EIO;
				len -= (size_t)got;
			}
		}
	}
	return f->at >= f->n;
}

/* A new fork of mm: eviction held, the copies' files made, none filled yet. */
static int fork_start(struct npfd_mm *mm, char *err, size_t errlen)
{
	struct npfd_region *r;
	struct evict_fork *f;
	unsigned int n = 0;

	fork_free(mm);
	/* from now on no batch of mm starts (over_budget()) */
	mm->fork_hold_until = now_ns() + NPF_FORK_HOLD_MS * 1000000ULL;
	/*
	 * A batch whose victims' copies are not all in the store yet must
	 * end first: its zap may run before the fork. One that is zapping
	 * has written them (B_ZAP), and a page it has not zapped yet the
	 * child gets with the process's memory.
	 */
	if ((b.state == B_ACK || b.state == B_WRITE) && b.mm == mm)
		return refuse(err, errlen, EAGAIN,
			      "an eviction of this process is under way: ask again");
	list_for_each_entry(r, &mm->regions, node)
		n += r->ev && r->ev->stored && r->store_fd >= 0;
	f = calloc(1, sizeof(*f) + n * sizeof(f->copy[0]));
	if (!f || getrandom(f->token, sizeof(f->token), 0) != sizeof(f->token)) {
		free(f);
		mm->fork_hold_until = 0;
		return refuse(err, errlen, ENOMEM, "out of memory");
	}
	mm->fork = f;
	list_for_each_entry(r, &mm->regions, node) {
		struct fork_copy *cp = &f->copy[f->n];
		char name[SWAPSTORE_NAME_LEN];

		if (!r->ev || !r->ev->stored || r->store_fd < 0)
			continue;
		*cp = (struct fork_copy){
			.region_id = r->id, .start = r->start, .length = r->length, .fd = -1};
		f->n++;
		cp->fd = swapstore_create(0, r->id, name);
		if (cp->fd < 0) {
			fork_free(mm);
			return refuse(err, errlen, -cp->fd,
				      "cannot make a copy of region %u's store: %s", r->id,
				      strerror(-cp->fd));
		}
	}
	return 0;
}

int evict_fork_prepare(struct npfd_client *c, struct npf_fork_info *out, char *err, size_t errlen)
{
	struct npfd_mm *mm = c->mm;
	int ret;

	if (!mm)
		return refuse(err, errlen, ENOENT,
			      "no region registered: nothing to keep for a child");
	/* asked again while its copies are made: go on with them */
	if (!mm->fork || mm->fork->ready) {
		ret = fork_start(mm, err, errlen);
		if (ret)
			return ret;
	}
	ret = fork_copy_step(mm);
	if (ret < 0) {
		fork_free(mm);
		return refuse(err, errlen, -ret, "cannot copy the evicted pages for the child: %s",
			      strerror(-ret));
	}
	if (!ret)
		return refuse(err, errlen, EAGAIN,
			      "copying the evicted pages for the child: ask again");
	mm->fork->ready = true;
	pr_debug("pid %d forks: copies of %u regions' stores made", mm->tgid, mm->fork->n);
	memcpy(out->token, mm->fork->token, sizeof(out->token));
	out->regions = mm->fork->n;
	return 0;
}

/* Equal tokens, in a time that does not tell how much of one matched. */
static bool token_equal(const __u8 *a, const __u8 *b)
{
	__u8 d = 0;

	for (size_t i = 0; i < NPF_FORK_TOKEN_LEN; i++)
		d |= a[i] ^ b[i];
	return !d;
}

int evict_fork_done(struct npfd_client *c, const struct npf_fork_req *req, char *err, size_t errlen)
{
	if (!c->mm || !c->mm->fork || !c->mm->fork->ready ||
	    !token_equal(c->mm->fork->token, req->token))
		return refuse(err, errlen, ENOENT, "no fork() of this process under way");
	fork_free(c->mm);
	return 0;
}

int evict_fork_find(const struct npfd_client *c, const struct npf_region_forked_req *req,
		    struct fork_copy **copy, struct npfd_mm **parent, char *err, size_t errlen)
{
	struct npfd_mm *mm;

	*copy = NULL;
	*parent = NULL;
	if (req->pad)
		return refuse(err, errlen, EINVAL, "a forked region's request has padding set");
	list_for_each_entry(mm, &mms, node)
		if (!mm->dead && mm->fork && mm->fork->ready &&
		    token_equal(mm->fork->token, req->token))
			break;
	if (&mm->node == &mms)
		return refuse(
			err, errlen, ENOENT,
			"no fork() under way with this token (the parent's fork ended, or npfd restarted)");
	if (mm->uid != c->uid || mm == c->mm || mm->tgid == c->pid)
		return refuse(err, errlen, EPERM,
			      "the fork() of pid %d is not this process's (pid %d, uid %u)",
			      mm->tgid, c->pid, c->uid);
	*parent = mm;
	for (unsigned int i = 0; i < mm->fork->n; i++) {
		struct fork_copy *cp = &mm->fork->copy[i];

		if (cp->region_id != req->parent_region_id)
			continue;
		if (cp->start != req->region.start || cp->length != req->region.length ||
		    req->region.backing != NPF_BACKING_ANON)
			return refuse(
				err, errlen, EINVAL,
				"region %u of the parent was 0x%llx-0x%llx (anonymous): the child's copy is the same",
				cp->region_id, (unsigned long long)cp->start,
				(unsigned long long)(cp->start + cp->length));
		if (cp->fd < 0)
			return refuse(err, errlen, EBUSY, "region %u's copy was taken already",
				      cp->region_id);
		*copy = cp;
	}
	return 0; /* not there: nothing of it was stored at the fork */
}

void evict_fork_take(struct npfd_region *r, struct fork_copy *copy)
{
	char err[NPF_ERRMSG_LEN];
	struct evict_region *e;
	__u64 found;

	if (!copy)
		return; /* what the fork copied is counted: region_register() marked it present */
	e = region_ev(r, err, sizeof(err));
	if (!e) {
		pr_err("region %u: %s: the evicted pages it had at the fork read as zeros", r->id,
		       err);
		return;
	}
	if (r->store_fd >= 0) {
		swapstore_remove(r->store_name);
		close(r->store_fd);
	}
	r->store_fd = copy->fd;
	copy->fd = -1;
	swapstore_link(r->store_fd, r->mm->tgid, r->id, r->store_name);
	found = store_scan(r, e, lseek(r->store_fd, 0, SEEK_DATA));
	pr_info("region %u: %llu evicted pages of region %u at the fork", r->id,
		(unsigned long long)found, copy->region_id);
}

void evict_mm_gone(struct npfd_mm *mm)
{
	fork_free(mm);
	if (b.state != B_IDLE && b.mm == mm) {
		/*
		 * The process is gone: nothing to put back, nobody to wake.
		 * Writes in flight still read the batch's buffer: the batch
		 * ends when they are done.
		 */
		if (b.state != B_WRITE)
			b.state = B_IDLE;
		b.r = NULL;
		b.mm = NULL;
	}
	ring_free(mm->evict_ring);
	mm->evict_ring = NULL;
}

void evict_installed(struct npfd_region *r, __u64 start, __u64 npages, bool wp)
{
	struct evict_region *e = r->ev;
	__u64 i, first;

	if (!e)
		return;
	first = page_index(r, start);
	for (i = first; i < first + npages && i < e->npages; i++) {
		bitmap_assign(e->clean, i, wp && e->wp);
		bitmap_assign(e->ref, i, true);
		if (e->installs[i] < 255)
			e->installs[i]++;
		e->touched[i] = start_ms();
	}
}

/* Pages found there already by an install: referenced; clean or not, as they were. */
void evict_present(struct npfd_region *r, __u64 start, __u64 npages)
{
	struct evict_region *e = r->ev;
	__u64 i, first;

	if (!e)
		return;
	first = page_index(r, start);
	for (i = first; i < first + npages && i < e->npages; i++)
		bitmap_assign(e->ref, i, true);
}

void evict_device_wanted(struct npfd_region *r, __u64 start, __u64 npages)
{
	struct evict_region *e = r->ev;
	__u32 now = start_ms();
	__u64 i, first;

	if (!e)
		return;
	first = page_index(r, start);
	for (i = first; i < first + npages && i < e->npages; i++) {
		/*
		 * The grace runs from the first ask: renewed at every one, a
		 * client that asked again each 0.9 s and never used its pages
		 * kept them out of eviction for good (review).
		 */
		if (bitmap_test(e->dev_wait, i))
			continue;
		bitmap_assign(e->dev_wait, i, true);
		e->touched[i] = now;
	}
}

/*
 * Does a device still have to use page i of r, which it asked for
 * (EVICT_DEVICE_GRACE_MS)? dev_referenced: its ACCESSED bit, just read.
 */
static bool device_yet_to_use(struct evict_region *e, __u64 i, bool dev_referenced, __u32 now)
{
	if (!bitmap_test(e->dev_wait, i))
		return false;
	if (!dev_referenced && now - e->touched[i] < EVICT_DEVICE_GRACE_MS)
		return true;
	bitmap_assign(e->dev_wait, i, false);
	return false;
}

static bool in_batch(const struct npfd_region *r, __u64 page, unsigned int *at)
{
	unsigned int i;

	if (b.state == B_IDLE || b.r != r)
		return false;
	for (i = 0; i < b.n; i++)
		if (b.page[i] == page) {
			if (at)
				*at = i;
			return true;
		}
	return false;
}

/*
 * May page i be a victim of the npfd before this one, its zap still to
 * run, while old_zaps (old_zaps_pending())? Stored (not all stored pages
 * are: a few wait for nothing, for as long as the earlier zaps take), or
 * old_frozen: under one of its zaps in the adopted ring, once that is
 * known (old_zaps_known()), and until then counted as one when the page
 * state was made (old_frozen_scan(): write-protected, or not present).
 */
static bool old_victim(const struct npfd_region *r, __u64 i, bool old_zaps)
{
	return old_zaps && (bitmap_test(r->ev->stored, i) || bitmap_test(r->ev->old_frozen, i));
}

/*
 * May a zap of npfd's still run on this page of r, whatever REMOVE came?
 * Its zap is submitted (in the batch, below zap_next) or outlived its
 * batch (busy outside the batch: late, or gone with the zap not known to
 * be done). A REMOVE does not prove the zap ran: it may be the process's
 * own MADV_DONTNEED of the page. Such a page faulted in again is installed
 * write-protected and its writes wait (evict_wp_fault()), or the zap, when
 * it runs, would drop the write.
 */
static bool zap_may_run(const struct npfd_region *r, __u64 page)
{
	__u64 i = page_index(r, page);
	unsigned int at;

	if (!r->ev)
		return false;
	if (old_victim(r, i, old_zaps_pending(r->mm)))
		return true;
	if (!bitmap_test(r->ev->busy, i))
		return false;
	if (in_batch(r, page, &at))
		return b.zapped[at] && at < b.zap_next;
	return true;
}

static void wake_pages(struct npfd_mm *mm, __u64 start, __u64 npages)
{
	struct uffdio_range range = {.start = start, .len = npages * NPF_PAGE_SIZE};

	if (npages && ioctl(mm->uffd, UFFDIO_WAKE, &range) && errno != ESRCH)
		pr_warn_rl("pid %d: UFFDIO_WAKE 0x%llx+%llu pages failed: %s", mm->tgid,
			   (unsigned long long)start, (unsigned long long)npages, strerror(errno));
}

static void wake_page(struct npfd_mm *mm, __u64 page)
{
	wake_pages(mm, page, 1);
}

/*
 * A write-protect fault. On a page of the batch the writer waits until the
 * batch is over (batch_end() wakes it): its write lands on the page if it
 * stayed, or on the page read back if it went. Otherwise the page was
 * installed clean: it is dirty now, and writable again.
 */
void evict_wp_fault(struct npfd_mm *mm, __u64 addr)
{
	__u64 page = addr & ~(NPF_PAGE_SIZE - 1);
	struct npfd_region *r = mm_find_region(mm, page);
	struct uffdio_writeprotect wp = {.range = {.start = page, .len = NPF_PAGE_SIZE}, .mode = 0};

	/*
	 * Frozen by the batch: answered at its end. Before the freeze (the
	 * batch waits for the devices) the page may be a clean one a device's
	 * DMA writes: it must go on, or the acknowledgement never comes.
	 */
	if (r && (b.state == B_WRITE || b.state == B_ZAP) && in_batch(r, page, NULL))
		return;
	/* a zap may still run on it (late, or gone): the write waits, or the zap would destroy it */
	if (r && r->ev && bitmap_test(r->ev->busy, page_index(r, page)) && !in_batch(r, page, NULL))
		return;
	/*
	 * Write-protected, with the earlier npfd's zaps still to run: it may
	 * be one of its victims, its zap not run yet (npfd was killed in
	 * between) -- frozen with its copy stored, or write-protected clean
	 * and dropped as such, with no copy at all (a page installed as zeros
	 * and not written since). Let through now, the write would be
	 * destroyed by that zap and the page read back without it: from its
	 * copy (tests/evict_crash_storm), or as zeros (evict_adopt_frozen,
	 * rarely: a victim never stored). So it waits as a late page does:
	 * the zap's REMOVE evicts it, or late_settle() lets it go once no
	 * earlier zap can run.
	 */
	if (r && r->ev && old_victim(r, page_index(r, page), old_zaps_pending(mm))) {
		bitmap_assign(r->ev->late, page_index(r, page), true);
		bitmap_assign(r->ev->busy, page_index(r, page), true);
		mm->late_unsettled = true;
		return;
	}
	if (r && r->ev) {
		__u64 i = page_index(r, page);

		bitmap_assign(r->ev->clean, i, false);
		r->ev->touched[i] = start_ms();
		bitmap_assign(r->ev->ref, page_index(r, page), true);
	}
	/*
	 * EAGAIN: an mm event waits to be read. Woken anyway, the writer
	 * faults again and comes back here once the event has been read.
	 */
	/*
	 * On the loop itself: the fault path (a hand-over to mmcall.c's
	 * thread cost a write fault several times its time). If it is late,
	 * the loop goes on on another thread and this one ends in the call:
	 * the process is given up, the rest of its events with it.
	 */
	if (mmcall_ioctl_now(mm->tgid, mm->uffd, UFFDIO_WRITEPROTECT, &wp) && errno != ESRCH) {
		if (errno != EAGAIN && errno != ENOENT)
			pr_warn_rl("pid %d: cannot unprotect 0x%llx after its write fault: %s",
				   mm->tgid, (unsigned long long)page, strerror(errno));
		wake_page(mm, page);
	}
}

/*
 * Is a REMOVE of [start, end) surely the process's own drop? A zap's
 * covers pages of one run of victims and nothing else (the kernel cuts it
 * at mapping boundaries, never widens it), and every such page is busy
 * (late ones too) until its zap is known done. A REMOVE that reaches a
 * page outside the region, or one not busy, is no zap of this
 * npfd's; while an earlier npfd's zaps may run, nothing can be told.
 */
static bool remove_is_own(const struct npfd_region *r, __u64 start, __u64 end, bool old_zap)
{
	if (start < r->start || end > r->start + r->length)
		return true;
	/*
	 * An earlier npfd's runs are not all known: old_frozen_scan() finds
	 * the pages present and write-protected, and a run may hold one the
	 * process dropped itself since (neither then), or one the kernel
	 * swapped out.
	 */
	if (old_zap)
		return false;
	for (__u64 p = start; p < end; p += NPF_PAGE_SIZE) {
		__u64 i = page_index(r, p);

		if (!bitmap_test(r->ev->busy, i)) /* a late page is busy too */
			return true;
	}
	return false;
}

void evict_range_removed(struct npfd_region *r, __u64 start, __u64 end)
{
	__u64 lo = start > r->start ? start : r->start;
	__u64 hi = end < r->start + r->length ? end : r->start + r->length;
	bool old_zap = old_zaps_pending(r->mm);
	bool own;
	__u64 first, last, nl, ns, nc;
	unsigned int at;

	if (!r->ev || lo >= hi)
		return;
	/*
	 * The process dropped these pages itself: their next touch reads
	 * zeros (anonymous) or the file, not what npfd stored. The batch's
	 * own zap comes here too: its pages keep their slots. So may a zap of
	 * the npfd that served the process before this one adopted it, still
	 * in flight in its ring: until those are done (or a while after the
	 * adoption, if the process sends no ring) stored pages are kept -- a
	 * page the process itself drops then would read its stored copy, not
	 * zeros, but no evicted page is lost. Unless the REMOVE is surely the
	 * process's (remove_is_own()): then every copy it covers goes, and a
	 * zap still to run drops what a fault installs meanwhile -- zeros,
	 * write-protected, its writes waiting (zap_may_run()).
	 */
	own = remove_is_own(r, start, end, old_zap);
	/* no device waits for a page that went: its next install is no request's */
	for (__u64 i = bitmap_next(r->ev->dev_wait, page_index(r, lo), page_index(r, hi));
	     i < page_index(r, hi); i = bitmap_next(r->ev->dev_wait, i + 1, page_index(r, hi)))
		bitmap_assign(r->ev->dev_wait, i, false);
	/* the batch's pages there */
	for (at = 0; b.state != B_IDLE && b.r == r && at < b.n; at++) {
		__u64 i = page_index(r, b.page[at]);

		if (b.page[at] < lo || b.page[at] >= hi)
			continue;
		if (b.zapped[at] && at < b.zap_next) {
			if (!own) {
				b.removed[at] = true; /* its zap's, or the process's own */
				continue;
			}
			/* its zap still runs, and its REMOVE says it went */
			free_slots(r, i, i);
			bitmap_assign(r->ev->clean, i, false);
			continue;
		}
		/*
		 * Its zap is not submitted: the process dropped the page
		 * itself. It reads zeros now, and what it writes next must
		 * stay: no zap for it, no copy (a write of the copy still in
		 * flight is punched again at the batch's end). Taken for the
		 * zap's, the copy came back and the zap, submitted later,
		 * dropped the write (tests/evict_drop_own).
		 */
		b.zapped[at] = false;
		b.dropped[at] = true;
		free_slots(r, i, i);
		bitmap_assign(r->ev->clean, i, false);
	}
	/*
	 * The others there that have any state of eviction (late, stored,
	 * clean), found in the bitmaps: a page with none has nothing to drop,
	 * and a drop over a huge region walks no page of it.
	 */
	first = page_index(r, lo);
	last = page_index(r, hi);
	nl = bitmap_next(r->ev->late, first, last);
	ns = bitmap_next(r->ev->stored, first, last);
	nc = bitmap_next(r->ev->clean, first, last);
	for (;;) {
		__u64 i = nl < ns ? nl : ns;

		i = nc < i ? nc : i;
		if (i >= last)
			break;
		if (nl == i)
			nl = bitmap_next(r->ev->late, i + 1, last);
		if (ns == i)
			ns = bitmap_next(r->ev->stored, i + 1, last);
		if (nc == i)
			nc = bitmap_next(r->ev->clean, i + 1, last);
		/* a batch's page is busy: only those are looked for in it (done above) */
		if (bitmap_test(r->ev->busy, i) && in_batch(r, r->start + i * NPF_PAGE_SIZE, NULL))
			continue;
		if (bitmap_test(r->ev->late, i) && own) {
			/* its late zap still runs: its REMOVE ends the lateness */
			free_slots(r, i, i);
			bitmap_assign(r->ev->clean, i, false);
			continue;
		}
		if (bitmap_test(r->ev->late, i)) {
			/*
			 * Its late zap ran, or the process dropped the page
			 * itself and the zap is still to run: either way it
			 * is gone and its copy is the one to read, but it
			 * stays busy (zap_may_run()) until late_settle() finds
			 * no zap left to run. Its writers wait until then.
			 */
			bitmap_assign(r->ev->late, i, false);
			bitmap_assign(r->ev->clean, i, false);
			if (r->budget_info)
				r->budget_info->evicted_pages++;
			continue;
		}
		if (old_zap && bitmap_test(r->ev->stored, i) && !own)
			continue;
		free_slots(r, i, i);
		bitmap_assign(r->ev->clean, i, false);
	}
}

/*
 * The process unmaps [start, end) (or moves it away): the batch's pages
 * there are not zapped, put back or unprotected any more, whatever the
 * region's fate: the next mmap may put another mapping at those addresses,
 * and a zap or a put-back would destroy or overwrite its data (tests/
 * evict_unmap_remap). Not covered: a zap already submitted to the
 * client's ring that its SQPOLL thread has not run yet (see docs/design.md).
 */
void evict_range_unmapped(struct npfd_mm *mm, __u64 start, __u64 end)
{
	struct npfd_region *r;
	unsigned int k;

	/*
	 * Late zaps there are not waited for: nothing to unfreeze afterwards.
	 * A writer waiting on a late page is woken: it faults again on what
	 * is there now (nothing, another mapping, or the page moved away).
	 */
	list_for_each_entry(r, &mm->regions, node) {
		__u64 lo = start > r->start ? start : r->start, re = r->start + r->length;
		__u64 last = page_index(r, end < re ? end : re), i;

		if (!r->ev || lo >= re || end <= r->start)
			continue;
		for (i = bitmap_next(r->ev->late, page_index(r, lo), last); i < last;
		     i = bitmap_next(r->ev->late, i + 1, last)) {
			bitmap_assign(r->ev->late, i, false);
			wake_page(mm, r->start + i * NPF_PAGE_SIZE);
		}
	}

	if (b.state == B_IDLE || b.mm != mm)
		return;
	for (k = 0; k < b.n; k++)
		if (b.page[k] >= start && b.page[k] < end)
			b.unmapped[k] = true;
}

/*
 * r changed under its batch (a cut of its first `shift` pages, or a move
 * by delta bytes; r->start is still the old one): the batch is abandoned,
 * and batch_end() will find no region. Its submitted zaps may still run:
 * those pages stay busy, and late until their REMOVE comes, as batch_end()
 * leaves them when a batch runs out of time (its zaps go to late_zaps;
 * late pages settle only once it has ended). Unmarked, their zap's REMOVE
 * was taken for the process's own drop and punched their copies
 * (tests/evict_cut_zapping). The others leave the batch: not busy,
 * unprotected, their writers woken -- a write to a frozen victim waits for
 * the batch, and batch_end() without a region touches none of them.
 */
static void unfreeze(struct npfd_mm *mm, struct npfd_region *r, __u64 page);
static void write_reap(bool wait);

static void batch_abandon(struct npfd_region *r, __u64 shift, __u64 delta)
{
	struct evict_region *e = r->ev;

	/* counted while the batch has its region (write_reap() counts through b.r) */
	if (b.state == B_WRITE)
		write_reap(true);
	for (unsigned int k = 0; k < b.n; k++) {
		__u64 i = page_index(r, b.page[k]);

		if (i < shift)
			continue; /* cut off: its state shifts out */
		if (b.zapped[k] && k < b.zap_next && !b.unmapped[k]) {
			bitmap_assign(e->late, i, !b.removed[k]);
			r->mm->late_unsettled = true;
			/* gone: batch_end() without a region counts nothing (a late one counts at its REMOVE) */
			if (b.removed[k] && r->budget_info) {
				r->budget_info->evicted_pages++;
				r->budget_info->dropped_clean += !b.dirty[k];
			}
			continue;
		}
		bitmap_assign(e->busy, i, false);
		if (b.unmapped[k])
			continue;
		bitmap_assign(e->clean, i, false);
		unfreeze(r->mm, NULL, b.page[k] + delta);
		/* a writer frozen before a move waits at the old address: it faults again at the new */
		if (delta)
			wake_page(r->mm, b.page[k]);
	}
	b.r = NULL;
}

/* mremap moved r whole: a batch of it is abandoned (its pages' addresses changed). */
void evict_region_moved(struct npfd_region *r, __u64 delta)
{
	if (r->ev && b.state != B_IDLE && b.r == r)
		batch_abandon(r, 0, delta);
}

struct bitmap *evict_part_leaving(struct npfd_region *r, __u64 lo, __u64 hi, __u64 *off0)
{
	struct evict_region *e = r->ev;
	__u64 first = page_index(r, lo), n = (hi - lo) >> NPF_PAGE_SHIFT, j, found = 0;
	struct bitmap *map;

	if (!e)
		return NULL;
	/* a copy (in the store or the file) is not all there before its write completes */
	for (j = 0; b.state == B_WRITE && j < b.n; j++)
		if (b.r == r && b.page[j] >= lo && b.page[j] < hi) {
			write_reap(true);
			break;
		}
	/* the copies are the part's now: batch_end() must not punch them as late writes */
	for (j = 0; b.state != B_IDLE && b.r == r && j < b.n; j++)
		if (b.page[j] >= lo && b.page[j] < hi)
			b.dirty[j] = false;
	/* the stored pages found by the bitmap: a huge part went bit by bit (2.4 s for 8 TiB, review) */
	j = bitmap_next(e->stored, first, first + n) - first;
	if (!e->stored || r->store_fd < 0 || j >= n)
		return NULL;
	map = bitmap_new(n);
	if (!map)
		return NULL;
	for (; j < n; j = bitmap_next(e->stored, first + j + 1, first + n) - first) {
		bitmap_assign(map, j, true);
		bitmap_assign(e->stored, first + j, false);
		found++;
	}
	if (r->budget_info)
		r->budget_info->stored_pages -= found;
	*off0 = store_offset(e, first);
	return map;
}

/* The first shift pages of r were unmapped (fewer than it has: a whole region goes with region_remove()). */
void evict_region_cut(struct npfd_region *r, __u64 shift)
{
	struct evict_region *e = r->ev;

	if (!e || !shift || shift >= e->npages)
		return;
	if (b.state != B_IDLE && b.r == r)
		batch_abandon(r, shift, 0);
	free_slots(r, 0, shift - 1);
	e->put_back_next = 0;
	e->store_base += shift; /* the stored pages stay where they are in the store */
	/*
	 * Per-page counts are not moved: they are read from the new first page
	 * on. A huge region's arrays are mostly memory never touched, and
	 * moving them made it npfd's: a client that touched the last page of
	 * a 1 TiB budgeted region made each cut of its first page cost 2.7 s
	 * and 1.25 GiB (review).
	 */
	e->installs += shift;
	e->touched += shift;
	e->cut += shift;
	bitmap_shift_down(e->clean, shift);
	bitmap_shift_down(e->ref, shift);
	bitmap_shift_down(e->stored, shift);
	bitmap_shift_down(e->late, shift);
	bitmap_shift_down(e->old_frozen, shift);
	bitmap_shift_down(e->busy, shift);
	bitmap_shift_down(e->dev_wait, shift);
	/* the region is shorter: so is the CLOCK's round, and the counts' memory */
	e->npages -= shift;
	e->hand = 0;
}

bool evict_run_stored(const struct run *rn)
{
	const struct npfd_region *r = rn->region;
	__u64 i, first;

	if (!r || !r->ev || !r->ev->stored)
		return false;
	first = page_index(r, rn->start);
	for (i = first; i < first + rn->npages && i < r->ev->npages; i++)
		if (bitmap_test(r->ev->stored, i))
			return true;
	return false;
}

/* May a zap still drop a page of run rn (its write waits for it)? */
bool evict_run_zap_may_run(const struct run *rn)
{
	for (__u32 k = 0; rn->region && k < rn->npages; k++)
		if (zap_may_run(rn->region, rn->start + (__u64)k * NPF_PAGE_SIZE))
			return true;
	return false;
}

/*
 * Install an anonymous run some of whose pages are in the swap store:
 * those read back from it, the others zeros; write-protected (clean) for a
 * read fault, the stored copy kept so that a clean page can go again
 * unwritten. Stored pages next to each other are next to each other in the
 * store: one read each such span, and one UFFDIO_COPY the run
 * (resolve_install(), which wakes what it fills). A page at a time, a
 * put-back went at 115-218k pages/s (bench/unregister.c).
 */
static char *stored_buf; /* evict_install_stored()'s source, MAX_RUN_PAGES pages */

void evict_retire_sources(void)
{
	if (stored_buf)
		stored_buf = buffer_renew(stored_buf, MAX_RUN_PAGES * NPF_PAGE_SIZE);
}

int evict_install_stored(struct run *rn)
{
	struct npfd_region *r = rn->region;
	char *buf;
	struct evict_region *e = r->ev;
	__u64 first = page_index(r, rn->start);
	__u32 k, j;
	int ret;

	if (rn->npages > MAX_RUN_PAGES)
		return -E2BIG; /* runs_make() makes none longer */
	if (!stored_buf) {
		buf = mmap(NULL, MAX_RUN_PAGES * NPF_PAGE_SIZE, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (buf == MAP_FAILED)
			return -ENOMEM;
		stored_buf = buf;
	}
	buf = stored_buf;
	for (k = 0; k < rn->npages; k = j) {
		bool stored = bitmap_test(e->stored, first + k);
		size_t off = (size_t)k * NPF_PAGE_SIZE, want;
		ssize_t n;

		for (j = k + 1; j < rn->npages && bitmap_test(e->stored, first + j) == stored; j++)
			;
		want = (size_t)(j - k) * NPF_PAGE_SIZE;
		if (!stored) {
			memset(buf + off, 0, want);
			continue;
		}
		n = pread(r->store_fd, buf + off, want, (off_t)store_offset(e, first + k));
		if (n != (ssize_t)want) {
			pr_warn_rl(
				"region %u: reading pages 0x%llx+%u back from the swap store failed: %s",
				r->id, (unsigned long long)(rn->start + off), j - k,
				n < 0 ? strerror(errno) : "short read");
			ret = n < 0 ? -errno : -EIO;
			/* the pages before it go in (a short read's too); the resolver poisons the rest */
			k += n > 0 ? (__u32)(n / NPF_PAGE_SIZE) : 0;
			if (k) {
				struct run head = *rn;

				head.npages = k;
				if (resolve_install(&head, buf) == -EAGAIN)
					ret = -EAGAIN; /* again once the event is read */
				memcpy(rn->skipped, head.skipped, sizeof(rn->skipped));
				memcpy(rn->absent, head.absent, sizeof(rn->absent));
				rn->done = head.done;
			}
			if (ret != -EAGAIN) {
				rn->unservable = true;
				rn->valid_pages = 0;
			}
			return ret;
		}
	}
	ret = resolve_install(rn, buf);
	if (ret == -EAGAIN ? !rn->done : ret)
		return ret;
	for (k = 0; r->budget_info && (__u64)k * NPF_PAGE_SIZE < rn->done; k++)
		r->budget_info->refaults += bitmap_test(e->stored, first + k) &&
					    !run_was_skipped(rn, k) && !run_was_absent(rn, k);
	return ret;
}

/* ---- choosing victims ---- */

static __u64 region_budget(const struct npfd_region *r)
{
	return r->ev ? r->ev->budget : 0;
}

/* Installed pages of mm's regions that eviction may take (the client's budget counts them). */
static __u64 client_installed(const struct npfd_mm *mm)
{
	const struct npfd_region *q;
	__u64 n = 0;

	list_for_each_entry(q, &mm->regions, node)
		if (q->ev && q->ev->wp)
			n += q->ninstalled;
	return n;
}

/*
 * Has eviction just found nothing to take in any region of mm (each one's
 * last pick empty, or its last batch given up: they rest EVICT_REPICK_NS)?
 * Then no room is coming soon, and holding a fault would only wait out
 * EVICT_HOLD_NS: every installed page a device asked for and has not used
 * yet (EVICT_DEVICE_GRACE_MS) is no victim, and a NIC's next run waited
 * 500 ms each time (perftest_budget at 1 MiB: most of its run time).
 */
static bool eviction_resting(const struct npfd_mm *mm, __u64 now)
{
	const struct npfd_region *q;

	list_for_each_entry(q, &mm->regions, node)
		if (q->ev && q->ev->wp && q->ninstalled && q->ev->pick_after <= now)
			return false;
	return true;
}

/*
 * Hold a fault of r back while r, or its client, is over its high
 * watermark and would be EVICT_HOLD_SLACK pages over it with this run:
 * eviction is making room, and a writer faster than eviction would
 * otherwise run far over the budget (tests/evict_hard.c). Not for ever:
 * when the count has not gone down for EVICT_HOLD_NS, eviction cannot
 * make room (a device that does not acknowledge, a full store, every page
 * referenced), and faults go through until it goes down again; nor when
 * eviction has just found nothing to take (the region's last pick, for
 * its own budget; every region's, eviction_resting(), for its client's).
 * Only over the high watermark: eviction starts only once that is crossed,
 * so a run of more than the slack held below it waited for an eviction
 * that had not started, and could only time out (perftest_budget at
 * 2 MiB: the client settled at the low or the high watermark, and the
 * NIC's next run of 257 pages or more waited the full EVICT_HOLD_NS,
 * every message: 0.02x the run without a budget).
 * From below, one run may go over the watermark; the next is held.
 */
bool evict_hold(const struct npfd_region *r, __u64 npages)
{
	struct evict_region *e = r->ev;
	__u64 count = 0, now = now_ns(), high;

	if (!e || !e->wp || e->leaving_until > now || !r->mm->evict_ring || r->mm->dead)
		return false;
	/* its own budget: only its own pick can make room (a region under its budget is never picked) */
	high = e->budget * high_pct / 100;
	if (e->budget && r->ninstalled > high && r->ninstalled + npages > high + EVICT_HOLD_SLACK &&
	    e->pick_after <= now)
		count = r->ninstalled;
	if (!count && client_budget) {
		__u64 total = client_installed(r->mm);

		high = client_budget * high_pct / 100;
		if (total > high && total + npages > high + EVICT_HOLD_SLACK &&
		    !eviction_resting(r->mm, now))
			count = total;
	}
	if (!count) {
		e->hold_since = 0;
		return false;
	}
	if (!e->hold_since || count < e->hold_count)
		e->hold_since = now; /* eviction made room: wait for it again */
	e->hold_count = count;
	if (now - e->hold_since < EVICT_HOLD_NS)
		return true;
	pr_warn_rl(
		"region %u: eviction made no room for %llu ms: its faults go on over the budget (%llu pages installed)",
		r->id, (unsigned long long)(EVICT_HOLD_NS / 1000000), (unsigned long long)count);
	return false;
}

static struct npf_evict_batch policy_batch; /* what an eviction policy sees */
/* npfd's own copy of the candidates (the policy may write over its batch) */
static __u64 policy_cand[NPF_EVICT_MAX_CANDS];
static bool policy_cand_dev[NPF_EVICT_MAX_CANDS];

static int by_score(const void *a, const void *b2)
{
	__u64 x = *(const __u64 *)a, y = *(const __u64 *)b2;

	return x < y ? -1 : x > y;
}

/*
 * An eviction policy chooses (policy.c, bpf/npf_evict_policy.h): the hand
 * passes over up to NPF_EVICT_MAX_CANDS installed pages, each handed to
 * the policy with what npfd knows of it, and the want lowest-scored go.
 * Returns 0 when the policy failed (pick() then runs CLOCK from where the
 * hand was, with the references this pass read put back).
 */
/*
 * Page positions one pick looks at, at most (about 2.5 ms): a turn of the
 * hand over a sparse region of 2^32 pages (16 TiB, 64 installed) was one
 * call, in which npfd answered no other client for over 5 s
 * (tests/evict_refuse). The hand goes on from where it stopped at the
 * next tick; a region of up to 2^19 pages (2 GiB) still gets its two
 * turns in one pick.
 */
#define EVICT_SCAN_MAX (1U << 20)

/*
 * May page i not be a victim now? A page whose zap is still to run
 * (late, or in this batch: busy), or that may be a victim of the npfd
 * before this one whose zap is still to run (old_victim()): a second zap
 * queued behind the first would drop a write made between the two -- the
 * first zap's REMOVE evicts the page, its writer reads it back (its copy,
 * or zeros) and writes, and the second destroys that write
 * (tests/evict_adopt_frozen, the gated kills).
 */
static bool zap_may_be_queued(const struct npfd_region *r, __u64 i, bool old_zaps)
{
	return bitmap_test(r->ev->busy, i) || old_victim(r, i, old_zaps);
}

static unsigned int pick_by_policy(struct npfd_region *r, unsigned int want)
{
	struct evict_region *e = r->ev;
	struct npf_evict_batch *pb = &policy_batch;
	__u64 hand = e->hand, scanned, last = 0;
	__u64 *order = policy_cand;
	static __u64 key[NPF_EVICT_MAX_CANDS];
	unsigned int n = 0, k, got = 0;
	__u32 now = start_ms();
	bool old_zaps = old_zaps_pending(r->mm);

	for (scanned = 0;
	     scanned < e->npages && scanned < EVICT_SCAN_MAX && n < NPF_EVICT_MAX_CANDS;
	     scanned++) {
		__u64 i = (hand + scanned) % e->npages, page = r->start + i * NPF_PAGE_SIZE;
		__u32 flags = 0;

		if (!region_page_installed(r, page) || zap_may_be_queued(r, i, old_zaps))
			continue;
		if (bitmap_test(e->ref, i))
			flags |= NPF_EVICT_REF;
		if (device_page_referenced(r, page)) /* reading it clears it */
			flags |= NPF_EVICT_DEV;
		if (device_yet_to_use(e, i, flags & NPF_EVICT_DEV, now))
			continue;
		if (!bitmap_test(e->clean, i))
			flags |= NPF_EVICT_DIRTY;
		order[n] = i;
		policy_cand_dev[n] = flags & NPF_EVICT_DEV;
		pb->cand[n] = (struct npf_evict_cand){
			.page = i,
			.flags = flags,
			.score = n,
			.installs = e->installs[i],
			.idle_ms = e->touched[i] ? now - e->touched[i] : NPF_EVICT_IDLE_UNKNOWN};
		n++;
	}
	if (!n) {
		e->hand = (hand + scanned) % e->npages; /* nothing installed there */
		return 0;
	}
	pb->region_id = r->id;
	pb->n = n;
	pb->want = want;
	pb->region_pages = e->npages;
	pb->now_ns = now_ns();
	if (policy_evict_decide(r, pb) <= 0) {
		/* a device's bit read here is a reference CLOCK must see */
		for (k = 0; k < n; k++)
			if (policy_cand_dev[k])
				bitmap_assign(e->ref, order[k], true);
		return 0;
	}
	for (k = 0; k < n; k++)
		key[k] = (__u64)pb->cand[k].score << 32 | k;
	qsort(key, n, sizeof(key[0]), by_score);
	for (k = 0; k < n && got < want && (__u32)(key[k] >> 32) != NPF_EVICT_KEEP; k++)
		got++;
	/* the victims in hand order: neighbours make one device invalidation, one freeze */
	for (k = 0; k < got; k++)
		key[k] = (__u32)key[k];
	qsort(key, got, sizeof(key[0]), by_score);
	b.n = 0;
	for (k = 0; k < got; k++) {
		__u64 i = order[key[k]];

		b.page[b.n] = r->start + i * NPF_PAGE_SIZE;
		b.zapped[b.n] = false;
		b.dirty[b.n] = false;
		b.removed[b.n] = false;
		b.n++;
		last = key[k];
	}
	/* the sweep passed every candidate; the hand goes on after the last victim */
	for (k = 0; k < n; k++)
		bitmap_assign(e->ref, order[k], false);
	e->hand = (order[last] + 1) % e->npages;
	return b.n;
}

/*
 * CLOCK over r's installed pages: take up to want pages not referenced
 * since the hand last passed (by a fault, an install, or a device's
 * ACCESSED bit, cleared as the hand passes). An eviction policy, if one
 * applies to r, chooses instead (pick_by_policy()).
 */
static unsigned int pick(struct npfd_region *r, unsigned int want)
{
	struct evict_region *e = r->ev;
	__u64 scanned = 0;
	bool old_zaps = old_zaps_pending(r->mm), dev;
	__u32 now = start_ms();

	b.n = 0;
	if (policy_evict_applies(r) && pick_by_policy(r, want))
		return b.n;
	b.n = 0;
	/* two turns at most: the first may only clear reference bits */
	while (b.n < want && scanned < 2 * e->npages && scanned < EVICT_SCAN_MAX) {
		__u64 i = e->hand, page = r->start + i * NPF_PAGE_SIZE;
		unsigned int k;

		e->hand = (e->hand + 1) % e->npages;
		scanned++;
		if (!region_page_installed(r, page) || zap_may_be_queued(r, i, old_zaps))
			continue;
		for (k = 0; k < b.n && b.page[k] != page; k++)
			;
		if (k < b.n)
			break; /* the hand came round to this batch's first pick */
		dev = device_page_referenced(r, page);
		if (device_yet_to_use(e, i, dev, now))
			continue;
		if (dev || bitmap_test(e->ref, i)) {
			bitmap_assign(e->ref, i, false);
			continue;
		}
		b.page[b.n] = page;
		b.zapped[b.n] = false;
		b.dirty[b.n] = false;
		b.removed[b.n] = false;
		b.n++;
	}
	return b.n;
}

/*
 * The next region to evict from -- round robin by id among those over
 * their budget (their own, or their client's: then the client's regions
 * that have pages give in turn, each by its CLOCK) -- and how many pages it
 * should give. In turn, not the largest first: a region whose working set
 * shrank keeps its unused pages as long as it is not the largest, and a
 * region that grew would be held at an equal share (seed 000 Fig. 7's two
 * instances swapping working sets; tests/evict_client_shift.c). In turn,
 * the shrunk region's unreferenced pages go while the grown one's get
 * their second chance.
 */
static __u32 last_victim_id;

/* Does region id come before other, counting from the one after last? */
static bool before_from(__u32 last, __u32 id, __u32 other)
{
	return id - last - 1 < other - last - 1;
}

static bool comes_before(__u32 id, __u32 other)
{
	return before_from(last_victim_id, id, other);
}

static void candidate(struct npfd_region *r, __u64 excess, struct npfd_region **best, __u64 *most)
{
	if (!excess || (*best && !comes_before(r->id, (*best)->id)))
		return;
	*best = r;
	*most = excess;
}

static struct npfd_region *over_budget(unsigned int *want)
{
	struct npfd_mm *mm;
	struct npfd_region *r, *best = NULL;
	__u64 most = 0, now = now_ns();

	list_for_each_entry(mm, &mms, node) {
		struct npfd_region *turn = NULL; /* the client's region whose turn it is */
		__u64 total = 0, tres = 0, res;
		bool resting;

		if (mm->dead || !mm->evict_ring || fork_holds(mm, now))
			continue;
		/*
		 * Its ring holds as many zaps in flight as zap_more() allows
		 * (a stopped client): a batch would freeze and write its
		 * victims, then wait 2 s with no zap, and the other clients'
		 * eviction with it.
		 */
		if ((__u64)mm->evict_ring->late_zaps + mm->evict_ring->old_zaps >=
		    NPF_EVICT_RING_ENTRIES)
			continue;
		list_for_each_entry(r, &mm->regions, node) {
			__u64 bud = region_budget(r);
			struct evict_region *e = r->ev;

			if (!e || !e->wp || e->leaving_until > now)
				continue;
			res = r->ninstalled;
			total += res;
			resting = e->pick_after > now;
			if (res && !resting &&
			    (!turn || before_from(mm->evict_ring->last_id, r->id, turn->id))) {
				tres = res;
				turn = r;
			}
			/* hysteresis: from over the high watermark down to the low one */
			if (bud && res > bud * high_pct / 100)
				e->draining = true;
			if (!bud || res <= bud * low_pct / 100)
				e->draining = false;
			if (e->draining && !resting)
				candidate(r, res - bud * low_pct / 100, &best, &most);
		}
		if (client_budget && total > client_budget * high_pct / 100)
			mm->evict_ring->draining = true;
		if (!client_budget || total <= client_budget * low_pct / 100)
			mm->evict_ring->draining = false;
		if (mm->evict_ring->draining && turn) {
			__u64 excess = total - client_budget * low_pct / 100;

			candidate(turn, excess < tres ? excess : tres, &best, &most);
		}
	}
	if (best) {
		last_victim_id = best->id;
		best->mm->evict_ring->last_id = best->id;
	}
	*want = most > EVICT_BATCH ? EVICT_BATCH : (unsigned int)most;
	return best;
}

/* ---- one batch ---- */

/* A frozen page stays: writable again (its frozen writer goes on), dirty from now on. */
static void unfreeze(struct npfd_mm *mm, struct npfd_region *r, __u64 page)
{
	struct uffdio_writeprotect wp = {.range = {.start = page, .len = NPF_PAGE_SIZE}, .mode = 0};

	if (r && r->ev)
		bitmap_assign(r->ev->clean, page_index(r, page), false);
	if (mmcall_ioctl(mm->tgid, mm->uffd, UFFDIO_WRITEPROTECT, &wp, sizeof(wp)) &&
	    errno != ENOENT && errno != ESRCH)
		wake_page(mm, page);
}

/*
 * A page the process dropped while its copy was being written (B_WRITE):
 * its slot was punched then (evict_range_removed()), and the write may
 * have landed after. Not stored: a hole again.
 */
static void unstore_late_write(struct npfd_region *r, __u64 page)
{
	__u64 i = page_index(r, page);

	if (r->ev->stored && !bitmap_test(r->ev->stored, i) && r->store_fd >= 0)
		swapstore_punch(r->store_fd, store_offset(r->ev, i));
}

static void keep(unsigned int i)
{
	unfreeze(b.mm, b.r, b.page[i]);
}

#define PM_PRESENT (1ULL << 63) /* pagemap: the page is in RAM */

/*
 * The pagemap entries of the batch's pages that want[] names (the others:
 * present), in one call into the process (mmcall.h: one hand-over for the
 * batch, not one per page). Unknown is taken for still there (kept).
 */
static void batch_pagemap(const bool *want, __u64 *ent)
{
	__u64 pages[EVICT_BATCH], got[EVICT_BATCH];
	unsigned int idx[EVICT_BATCH], i, n = 0;

	for (i = 0; i < b.n; i++) {
		ent[i] = PM_PRESENT;
		if (want[i]) {
			idx[n] = i;
			pages[n++] = b.page[i];
		}
	}
	if (!n || !b.mm)
		return;
	mm_pagemap_read_pages(b.mm, pages, n, got, PM_PRESENT);
	for (i = 0; i < n; i++)
		ent[idx[i]] = got[i];
}

/*
 * The batch is over. Each victim either went (not present any more:
 * evicted) or stayed (kept, unprotected); every frozen writer is woken.
 * Pages whose region went meanwhile were dropped by a zap already on its
 * way: their data is put back through /proc/PID/mem (mm_mem_rw(); the range
 * is no longer registered, so the write faults in an ordinary page).
 */
static void batch_end(void)
{
	struct npfd_region *r = b.r;
	unsigned int i, gone = 0, late = 0, late_gone = 0;
	/* the batch ran out of time with zaps submitted and not done */
	bool zaps_pending = b.zaps && b.mm && b.mm->evict_ring && r && r->ev;
	bool want[EVICT_BATCH];
	__u64 ent[EVICT_BATCH];

	/* where pagemap decides: zapped, and no REMOVE said it went */
	for (i = 0; i < b.n; i++)
		want[i] = b.zapped[i] && !b.removed[i] && !b.unmapped[i];
	batch_pagemap(want, ent);
	for (i = 0; i < b.n; i++) {
		__u64 page = b.page[i];

		/*
		 * The address may hold another mapping now: nothing to put back
		 * or unprotect. Its slot was punched at the unmap
		 * (evict_range_removed()); a write of its copy that landed after
		 * is punched again (a cut region's batch was abandoned after its
		 * writes: batch_abandon()).
		 */
		if (b.unmapped[i]) {
			if (r && r->ev && b.dirty[i] && page_index(r, page) < r->ev->npages)
				unstore_late_write(r, page);
			/* a writer frozen there before the unmap or move: it faults again, on what is there now */
			wake_page(b.mm, page);
			continue;
		}
		if (!r) {
			/* below zap_next: handed to the ring (the others were never zapped) */
			if (b.zapped[i] && i < b.zap_next && b.mm && !(ent[i] & PM_PRESENT) &&
			    !mm_find_region(b.mm, page) && mm_alive(b.mm)) {
				/* EIO, EFAULT: the process unmapped it too (or gave it to a userfaultfd of its own) */
				if (mm_mem_rw(b.mm, page, b.buf + (size_t)i * NPF_PAGE_SIZE,
					      NPF_PAGE_SIZE, true) != NPF_PAGE_SIZE &&
				    errno != EIO && errno != EFAULT && errno != ESRCH)
					pr_warn_rl(
						"pid %d: cannot put back page 0x%llx of a region unregistered during its eviction: %s",
						b.tgid, (unsigned long long)page, strerror(errno));
			}
			continue;
		}
		/*
		 * Its zap may still run (the client's SQPOLL thread has not
		 * run it: the client is stopped, say), and would destroy a
		 * write let through now. So the page stays frozen and busy,
		 * with its stored copy, until it does: its REMOVE evicts it
		 * (evict_range_removed()); if it fails instead, late_settle()
		 * lets the page go once the ring's late zaps are all done.
		 * Whatever pagemap says now: a page being migrated (compaction)
		 * reads not present for a moment, and taken for gone it would
		 * be unfrozen and written before its zap ran, and that zap's
		 * REMOVE, taken for the process's own drop, would punch its
		 * stored copy (the page would read zeros).
		 */
		if (zaps_pending && i < b.zap_next && b.zapped[i] && !b.removed[i]) {
			bitmap_assign(r->ev->late, page_index(r, page), true);
			late++;
			continue;
		}
		/*
		 * Gone, but its REMOVE may have been the process's own drop
		 * and its zap still to run: busy (not woken) until
		 * late_settle() finds the zaps done (zap_may_run()).
		 */
		if (zaps_pending && i < b.zap_next && b.zapped[i]) {
			if (!b.dirty[i] && r->budget_info)
				r->budget_info->dropped_clean++;
			gone++;
			late_gone++;
			continue;
		}
		/*
		 * Gone: the REMOVE event of the zap forgot it (it may be back
		 * already, read from its copy by a fault that came after the
		 * zap: that install set its state), or pagemap says so.
		 */
		if (b.removed[i] || (b.zapped[i] && !(ent[i] & PM_PRESENT))) {
			if (!b.removed[i]) {
				__u64 k = page_index(r, page);

				bitmap_assign(r->ev->clean, k, false);
				bitmap_assign(r->ev->ref, k, false);
				region_forget_installed(r, page, page + NPF_PAGE_SIZE);
			}
			if (!b.dirty[i] && r->budget_info)
				r->budget_info->dropped_clean++;
			wake_page(b.mm, page);
			gone++;
			continue;
		}
		if (b.zapped[i] && r->budget_info)
			r->budget_info->aborted++;
		if (b.dropped[i])
			unstore_late_write(r, page);
		keep(i);
	}
	if (r && r->budget_info)
		r->budget_info->evicted_pages += gone;
	if (r)
		region_stats(r);
	pr_debug("eviction batch %llu: %u of %u pages evicted", (unsigned long long)b.gen, gone,
		 b.n);
	/* devices may map these pages again (kept) or fetch them (gone) */
	for (i = 0; r && r->ev && i < b.n; i++) {
		__u64 k = page_index(r, b.page[i]);
		bool zap_left = zaps_pending && !b.unmapped[i] && i < b.zap_next && b.zapped[i];

		if (!zap_left)
			bitmap_clear(r->ev->busy, k);
	}
	/* counted until they complete: late pages and unregisters wait for them */
	if (b.zaps && b.mm && b.mm->evict_ring)
		b.mm->evict_ring->late_zaps += b.zaps;
	if (late_gone)
		b.mm->late_unsettled = true;
	if (late) {
		b.mm->late_unsettled = true; /* late_settle() once its zaps are all done */
		pr_warn_rl(
			"pid %d: eviction batch %llu ended with %u zaps not run after %llu s: their %u pages stay frozen until they do",
			b.tgid, (unsigned long long)b.gen, b.zaps,
			(unsigned long long)(EVICT_ZAP_TIMEOUT_NS / 1000000000ULL), late);
	}
	b.state = B_IDLE;
	b.n = 0;
	b.r = NULL;
	b.mm = NULL;
}

static void batch_abort(const char *why)
{
	unsigned int i;

	pr_warn_rl("region %u: eviction batch of %u pages abandoned: %s", b.r ? b.r->id : 0, b.n,
		   why);
	/*
	 * What failed would most likely fail again at once: the region rests
	 * as after a pick that found nothing (a /proc file npfd may not open
	 * made it give up a thousand batches a second, one CPU's worth).
	 */
	if (b.r && b.r->ev)
		b.r->ev->pick_after = now_ns() + EVICT_REPICK_NS;
	for (i = 0; i < b.n; i++) {
		b.zapped[i] = false;
		if (b.r && b.r->budget_info)
			b.r->budget_info->aborted++;
	}
	batch_end();
}

static void batch_start(struct npfd_region *r, unsigned int want)
{
	unsigned int i;

	if (!pick(r, want)) {
		r->ev->pick_after = now_ns() + EVICT_REPICK_NS;
		return;
	}
	b.r = r;
	b.mm = r->mm;
	b.tgid = r->mm->tgid;
	b.gen++;
	memset(b.unmapped, 0, sizeof(b.unmapped));
	memset(b.dropped, 0, sizeof(b.dropped));
	b.zaps = 0;
	b.zap_next = 0; /* batch_end(): the pages below it were handed to the ring */
	b.state = B_ACK;
	b.deadline = now_ns() + EVICT_ACK_TIMEOUT_NS;
	for (i = 0; i < b.n; i++) {
		__u64 k = page_index(r, b.page[i]);

		bitmap_set(r->ev->busy, k);
	}
	/* 1. devices: entries cleared, invalidations posted, one per run */
	for (i = 0; i < b.n;) {
		unsigned int j = i + 1;

		while (j < b.n && b.page[j] == b.page[j - 1] + NPF_PAGE_SIZE)
			j++;
		device_pages_evicted(r, b.page[i], b.page[j - 1] + NPF_PAGE_SIZE);
		i = j;
	}
}

/*
 * The batch ends at its first n pages: the others were never frozen, and
 * are not its victims any more. Left marked busy, they would never be
 * picked again, nor mapped for a device (region_page_evicting()): a
 * freeze refused for a moment (EAGAIN, a REMOVE waiting to be read) left
 * 1450 of 2048 pages so, and the region stuck over its budget for good
 * (tests/evict_adopt_frozen).
 */
static void batch_truncate(unsigned int n)
{
	for (unsigned int i = n; i < b.n; i++)
		bitmap_assign(b.r->ev->busy, page_index(b.r, b.page[i]), false);
	b.n = n;
}

/*
 * 2. The devices acknowledged: freeze the victims (a CPU write now waits
 * for the batch's end). Not before: a device's DMA in flight is a CPU
 * write in the software NIC, and it would wait here for the batch whose
 * acknowledgement it holds up. Returns false if nothing is left.
 */
static bool freeze(void)
{
	unsigned int i;

	for (i = 0; i < b.n;) {
		unsigned int j = i + 1;
		struct uffdio_writeprotect wp = {.mode = UFFDIO_WRITEPROTECT_MODE_WP};

		while (j < b.n && b.page[j] == b.page[j - 1] + NPF_PAGE_SIZE)
			j++;
		wp.range.start = b.page[i];
		wp.range.len = (__u64)(j - i) * NPF_PAGE_SIZE;
		if (mmcall_ioctl(b.mm->tgid, b.mm->uffd, UFFDIO_WRITEPROTECT, &wp, sizeof(wp))) {
			if (errno != ESRCH && errno != EAGAIN)
				pr_warn_rl(
					"region %u: cannot write-protect 0x%llx+%llu for eviction: %s",
					b.r->id, (unsigned long long)wp.range.start,
					(unsigned long long)wp.range.len, strerror(errno));
			batch_truncate(i); /* the batch goes on with the pages frozen so far */
			break;
		}
		i = j;
	}
	return b.n != 0;
}

/*
 * 4. Write the dirty victims back: one io_uring submission, not waited
 * for -- a write can take long when the kernel throttles dirty pages, and
 * npfd must go on reading userfaultfd events meanwhile (the client's zap
 * of an earlier batch, its faults). Returns the writes in flight.
 */
static unsigned int write_back(struct npfd_region *r, const bool *dirty)
{
	struct evict_region *e = r->ev;
	unsigned int i, nw = 0;

	for (i = 0; i < b.n; i++) {
		struct io_uring_sqe *sqe;
		__u64 off;
		int fd;

		if (!b.zapped[i] || !dirty[i])
			continue;
		if (r->backing == NPF_BACKING_FILE) {
			fd = r->file_fd;
			off = r->file_offset + (b.page[i] - r->start);
		} else {
			__u64 k = page_index(r, b.page[i]);

			if (!bitmap_test(e->stored, k)) {
				if (store_open(r)) {
					b.zapped[i] = false; /* no store: it stays */
					continue;
				}
				bitmap_assign(e->stored, k, true);
				if (r->budget_info)
					r->budget_info->stored_pages++;
			}
			fd = r->store_fd;
			off = store_offset(e, k);
		}
		sqe = io_uring_get_sqe(&wb_ring);
		io_uring_prep_write(sqe, fd, b.buf + (size_t)i * NPF_PAGE_SIZE, NPF_PAGE_SIZE, off);
		io_uring_sqe_set_data64(sqe, i);
		nw++;
	}
	if (!nw)
		return 0;
	io_uring_submit(&wb_ring);
	if (r->budget_info)
		r->budget_info->write_batches++;
	return nw;
}

/* 4b. The writes' completions; a page whose write failed stays. */
static void write_reap(bool wait)
{
	struct io_uring_cqe *cqe;

	while (b.writes &&
	       !(wait ? io_uring_wait_cqe(&wb_ring, &cqe) : io_uring_peek_cqe(&wb_ring, &cqe))) {
		unsigned int i = (unsigned int)io_uring_cqe_get_data64(cqe);

		b.writes--;
		if (i < b.n && cqe->res != (int)NPF_PAGE_SIZE) {
			pr_warn_rl("pid %d: writing page 0x%llx back failed: %s: it stays", b.tgid,
				   (unsigned long long)b.page[i],
				   cqe->res < 0 ? strerror(-cqe->res) : "short write");
			b.zapped[i] = false;
		} else if (i < b.n && b.r && b.r->budget_info) {
			b.r->budget_info->written_pages++;
		}
		io_uring_cqe_seen(&wb_ring, cqe);
	}
}

/* 5. Hand the read-out victims to the client's ring: MADV_DONTNEED, one SQE per run. */
/*
 * The client's ring has NPF_EVICT_RING_ENTRIES slots: runs are submitted as
 * slots free up (zap_more() again from evict_tick()), from b.zap_next on.
 */
static void zap_more(void)
{
	struct io_uring *ring = &b.mm->evict_ring->ring;
	unsigned int i = b.zap_next, queued = 0;

	while (i < b.n) {
		unsigned int j = i + 1;
		struct io_uring_sqe *sqe;

		if (!b.zapped[i] || b.unmapped[i]) {
			i++;
			continue;
		}
		while (j < b.n && b.zapped[j] && !b.unmapped[j] &&
		       b.page[j] == b.page[j - 1] + NPF_PAGE_SIZE)
			j++;
		/*
		 * At most a ring's worth in flight, late and earlier npfds' ones
		 * counted: the CQ ring holds twice that, and the next npfd finds
		 * every zap in flight among the ring's last entries
		 * (old_zap_ranges()).
		 */
		sqe = b.zaps + b.mm->evict_ring->late_zaps + b.mm->evict_ring->old_zaps <
				      NPF_EVICT_RING_ENTRIES ?
			      io_uring_get_sqe(ring) :
			      NULL;
		if (!sqe)
			break;
		io_uring_prep_madvise(sqe, (void *)(uintptr_t)b.page[i],
				      (off_t)(j - i) * NPF_PAGE_SIZE, MADV_DONTNEED);
		io_uring_sqe_set_data64(sqe, zap_tag());
		b.zaps++;
		queued++;
		i = j;
	}
	b.zap_next = i;
	if (queued)
		io_uring_submit(ring);
}

static void zap(void)
{
	b.zaps = 0;
	b.zap_next = 0;
	b.state = B_ZAP;
	b.deadline = now_ns() + EVICT_ZAP_TIMEOUT_NS;
	zap_more();
}

/* 3. Acknowledged: read the victims out, write the dirty ones, zap. */
static void read_out(void)
{
	struct npfd_region *r = b.r;
	struct mmcall_read rd[EVICT_BATCH];
	unsigned int i, j, k, p, n = 0;
	bool want[EVICT_BATCH];
	__u64 ent[EVICT_BATCH];
	bool any = false;

	/* the process dropped it itself: nothing to save (faulted in since: kept) */
	for (i = 0; i < b.n; i++)
		want[i] = !b.dropped[i];
	batch_pagemap(want, ent);
	/*
	 * Runs of victims next to each other, one read each, all in one call
	 * (mm_mem_readv(): never held by a userfaultfd of the process's own).
	 * A page that could not be read is kept; a run that failed does not
	 * stop the next.
	 */
	for (i = 0; i < b.n; i = j) {
		if (b.dropped[i] || !(ent[i] & PM_PRESENT)) {
			j = i + 1;
			continue;
		}
		for (j = i + 1; j < b.n && b.page[j] == b.page[j - 1] + NPF_PAGE_SIZE &&
				!b.dropped[j] && (ent[j] & PM_PRESENT);
		     j++)
			;
		rd[n++] = (struct mmcall_read){.off = b.page[i],
					       .len = (size_t)(j - i) * NPF_PAGE_SIZE,
					       .dst = b.buf + (size_t)i * NPF_PAGE_SIZE};
	}
	if (n && !mm_alive(b.mm)) {
		batch_abort("the process exited");
		return;
	}
	if (n && mm_mem_readv(b.mm, rd, n)) {
		batch_abort(strerror(errno));
		return;
	}
	for (k = 0; k < n; k++) {
		ssize_t got = rd[k].got;

		i = (unsigned int)(((char *)rd[k].dst - b.buf) / NPF_PAGE_SIZE);
		j = i + (unsigned int)(rd[k].len / NPF_PAGE_SIZE);
		if (got < 0 && rd[k].err != EIO && rd[k].err != EFAULT) {
			if (!any) {
				batch_abort(strerror(rd[k].err));
				return;
			}
			break;
		}
		/* the pages the read reached (it stops at the first that failed) */
		for (p = i; got > 0 && p < j && (__u64)got >= (p - i + 1) * NPF_PAGE_SIZE; p++) {
			/* clean: installed write-protected from a copy that is still there */
			b.zapped[p] = true;
			b.dirty[p] = !bitmap_test(r->ev->clean, page_index(r, b.page[p]));
			any = true;
		}
	}
	/* no victim could be read (another userfaultfd's, say): as after an empty pick */
	if (!any && r->ev)
		r->ev->pick_after = now_ns() + EVICT_REPICK_NS;
	b.writes = write_back(r, b.dirty);
	if (b.writes) {
		b.state = B_WRITE;
		return;
	}
	zap();
	if (!b.zaps && b.zap_next >= b.n)
		batch_end();
}

/*
 * No zap can run any more (this npfd's late ones are done, and an earlier
 * npfd's): a page still marked late was not zapped (its zap failed, or it
 * was no earlier npfd's victim): it stays, writable again. A page busy and
 * not late is gone (a REMOVE came: its zap's or the process's, and now the
 * zap has run too): its writers go on.
 */
static void late_settle(struct npfd_mm *mm)
{
	struct npfd_region *r;
	__u64 i;

	list_for_each_entry(r, &mm->regions, node) {
		struct evict_region *e = r->ev;

		for (i = e ? bitmap_next(e->busy, 0, e->npages) : 0; e && i < e->npages;
		     i = bitmap_next(e->busy, i + 1, e->npages)) {
			__u64 page = r->start + i * NPF_PAGE_SIZE;

			if (in_batch(r, page, NULL))
				continue;
			bitmap_assign(e->busy, i, false);
			if (!bitmap_test(e->late, i)) {
				wake_page(mm, page); /* gone (zap_may_run()): its writers go on */
				continue;
			}
			bitmap_assign(e->late, i, false);
			unfreeze(mm, r, page);
			if (r->budget_info)
				r->budget_info->aborted++;
		}
	}
}

/*
 * 5b. Completions in a client's ring (libnpf submits nothing to it): this
 * batch's zaps, late ones of batches that ran out of time, and an earlier
 * npfd's.
 */
static void ring_reap(struct npfd_mm *mm)
{
	struct evict_ring *er = mm->evict_ring;
	struct io_uring_cq *cq = &er->ring.cq;
	unsigned int head = __atomic_load_n(cq->khead, __ATOMIC_ACQUIRE);
	unsigned int tail = __atomic_load_n(cq->ktail, __ATOMIC_ACQUIRE);

	/*
	 * Not io_uring_peek_cqe(): its loop takes as many completions as the
	 * ring's tails say, and the client can write them (up to 2^32 a
	 * call: npfd spun in it, tests/evict_refuse). The queue holds
	 * ring_entries at most; more waiting means the client wrote over it,
	 * and what it says is skipped.
	 */
	if (tail - head > cq->ring_entries) {
		pr_warn_rl(
			"pid %d: its eviction ring says %u completions are waiting, more than it holds (%u): skipped",
			mm->tgid, tail - head, cq->ring_entries);
		__atomic_store_n(cq->khead, tail, __ATOMIC_RELEASE);
		return;
	}
	for (; head != tail; head++) {
		const struct io_uring_cqe *cqe = &cq->cqes[head & cq->ring_mask];
		__u64 tag = cqe->user_data;
		int res = cqe->res;

		/* ENOMEM: the process unmapped the range meanwhile */
		if (zap_ours(tag) && res < 0 && res != -ENOMEM)
			pr_warn_rl("pid %d: the eviction's MADV_DONTNEED failed: %s", mm->tgid,
				   strerror(-res));
		if (b.state == B_ZAP && b.mm == mm && tag == zap_tag())
			b.zaps--;
		else if (zap_ours(tag) && er->late_zaps)
			er->late_zaps--;
		else if (!zap_ours(tag) && er->old_zaps)
			er->old_zaps--; /* old_zaps_pending() says when they are all done */
	}
	__atomic_store_n(cq->khead, tail, __ATOMIC_RELEASE);
}

bool evict_busy(void)
{
	return b.state != B_IDLE || nr_waits;
}

/* One step of the batch under way, or a new one. */
static void tick_batch(void)
{
	struct npfd_region *r;
	unsigned int want;

	switch (b.state) {
	case B_IDLE:
		r = over_budget(&want);
		if (r && want)
			batch_start(r, want);
		return;
	case B_ACK:
		if (!b.r) {
			b.n = 0;
			batch_end();
		} else if (device_region_quiet(b.r)) {
			if (freeze())
				read_out();
			else
				batch_end();
		} else if (now_ns() > b.deadline) {
			batch_abort("a device did not acknowledge its invalidation within 2 s");
		}
		return;
	case B_WRITE:
		write_reap(false);
		if (b.writes)
			return;
		if (!b.r || !b.mm) {
			batch_end();
			return;
		}
		zap();
		if (!b.zaps && b.zap_next >= b.n)
			batch_end();
		return;
	case B_ZAP:
		if (b.mm && b.mm->evict_ring) {
			ring_reap(b.mm);
			if (b.r && b.zap_next < b.n)
				zap_more();
		} else {
			b.zaps = 0;
			b.zap_next = b.n;
		}
		/* a region gone meanwhile gets no more zaps: the batch ends with its last */
		if ((!b.zaps && (b.zap_next >= b.n || !b.r)) || now_ns() > b.deadline)
			batch_end(); /* pagemap, not the completions, says what went */
		return;
	}
}

void evict_tick(void)
{
	struct npfd_mm *mm;

	list_for_each_entry(mm, &mms, node)
		if (mm->evict_ring && !mm->dead &&
		    (mm->evict_ring->late_zaps || mm->evict_ring->old_zaps))
			ring_reap(mm);
	tick_batch();
	list_for_each_entry(mm, &mms, node) {
		if (mm->dead)
			continue;
		if (mm->evict_ring)
			ring_check_waits(mm);
		/* a batch abandoned by a cut (evict_region_cut()) counts its zaps at its end */
		if (mm->late_unsettled && !old_zaps_pending(mm) &&
		    !(mm->evict_ring && mm->evict_ring->late_zaps) &&
		    !(b.state != B_IDLE && b.mm == mm && !b.r)) {
			mm->late_unsettled = false;
			late_settle(mm);
		}
	}
}

/*
 * r's pages that only its store holds, installed as a fault would install
 * them, `most` at most; how many went back, and in *failed 0, the -errno
 * of the first that could not, or -EINPROGRESS if `most` went back and
 * more are left.
 */
static __u64 put_back_stored(struct npfd_region *r, __u64 from, __u64 most, int *failed)
{
	__u64 i, k, back = 0, tried = 0, npages = store_pages(r);
	int ret;

	*failed = 0;
	/* store_pages() is 0 without a store: r->ev->stored is read only with one */
	for (i = npages ? bitmap_next(r->ev->stored, from, npages) : 0; i < npages;
	     i = bitmap_next(r->ev->stored, i, npages)) {
		struct run rn = {.mm = r->mm,
				 .region = r,
				 .start = r->start + i * NPF_PAGE_SIZE,
				 .write = true};

		/*
		 * `most` counts the pages tried, not those that went back: a
		 * store that cannot give them, or a range the process
		 * unregistered itself (ENOENT), would make one request read
		 * the whole store (review: minutes of npfd for everyone).
		 */
		if (tried >= most) {
			*failed = -EINPROGRESS;
			r->ev->put_back_next = i;
			break;
		}
		/* a copy in a hole is not the page there: another mapping's, or region's */
		if (!stored_only_at(r, i)) {
			i++;
			continue;
		}
		/* the pages only the store holds from here: a fault's run at most, the step's rest */
		while (rn.npages < MAX_RUN_PAGES && rn.npages < most - tried &&
		       i + rn.npages < npages && stored_only_at(r, i + rn.npages))
			rn.npages++;
		tried += rn.npages;
		ret = evict_install_stored(&rn);
		if (ret == -ESRCH)
			break; /* the process is gone: there is nothing to put them back into */
		wake_pages(r->mm, rn.start, rn.npages);
		/*
		 * There now, as if a fault had installed them (one there
		 * already, EEXIST, as a page written since): if the unregister
		 * is refused, counted. Not one with no mapping (ENOENT).
		 */
		for (k = 0; k < rn.done >> NPF_PAGE_SHIFT; k++) {
			__u64 page = rn.start + k * NPF_PAGE_SIZE;

			if (run_was_absent(&rn, (__u32)k))
				continue;
			region_mark_installed(r, page, 1);
			evict_installed(r, page, 1, false);
			back++;
		}
		if (ret == -EAGAIN) {
			*failed = ret; /* an mm event unread: none goes in until npfd has read it */
			r->ev->put_back_next = i + (rn.done >> NPF_PAGE_SHIFT);
			break;
		}
		if (ret) {
			/* the store cannot give it (EIO, say): no retry makes it come back */
			pr_warn_rl("region %u: evicted page 0x%llx cannot go back: %s", r->id,
				   (unsigned long long)(rn.start + rn.done), strerror(-ret));
			i += (rn.done >> NPF_PAGE_SHIFT) + 1; /* the others after it go on */
			continue;
		}
		i += rn.npages;
	}
	return back;
}

/*
 * May a zap in flight still drop a page of r? The batch under way on r,
 * a late zap of an earlier batch (busy pages), or an earlier npfd's (its
 * victims, until its zaps are done).
 */
static bool zaps_may_take(const struct npfd_region *r)
{
	const struct evict_region *e = r->ev;
	__u64 n = e ? e->npages : 0;

	if (b.state != B_IDLE && b.r == r)
		return true;
	/* zap_may_be_queued() of any page: busy, or an earlier npfd's victim (old_victim()) */
	return e && (bitmap_next(e->busy, 0, n) < n ||
		     (old_zaps_pending(r->mm) &&
		      (bitmap_next(e->stored, 0, n) < n || bitmap_next(e->old_frozen, 0, n) < n)));
}

/*
 * npfd stops: the pages only its swap store holds go back to their
 * processes now, installed as a fault would install them, so that a
 * process whose npfd does not come back (libnpf's fallback serves zeros:
 * it cannot read npfd's store) loses nothing. A store whose pages all went
 * back is deleted with its region; one that could not is left for the
 * next npfd (evict_region_gone()). File-backed regions' pages are in their
 * files already.
 */
void evict_stop(void)
{
	struct npfd_mm *mm;
	struct npfd_region *r;
	__u64 back = 0;
	int failed;

	if (b.state == B_WRITE) {
		write_reap(true);
		for (unsigned int i = 0; i < b.n; i++)
			b.zapped[i] = false; /* not zapped: they stay */
		batch_end();
	}
	if (b.state == B_ZAP && b.mm)
		batch_end();
	/*
	 * Nothing stays write-protected behind npfd: a write would wait for
	 * an npfd that is gone (libnpf's fallback unprotects too, for an npfd
	 * that was killed).
	 */
	list_for_each_entry(mm, &mms, node)
		list_for_each_entry(r, &mm->regions, node) {
			struct uffdio_writeprotect wp = {0};
			__u64 lo, pe, end = r->start + r->length;

			/* not its holes: a mapping there that is not registered fails it (ENOENT) */
			for (lo = r->start;
			     r->ev && r->ev->wp && holes_piece(&r->holes, &lo, end, &pe); lo = pe) {
				wp.range.start = lo;
				wp.range.len = pe - lo;
				if (mmcall_ioctl(mm->tgid, mm->uffd, UFFDIO_WRITEPROTECT, &wp,
						 sizeof(wp)) &&
				    errno != ESRCH)
					pr_warn("region %u: cannot unprotect it before stopping: %s",
						r->id, strerror(errno));
			}
		}
	list_for_each_entry(mm, &mms, node)
		list_for_each_entry(r, &mm->regions, node)
			back += put_back_stored(r, 0, UINT64_MAX, &failed);
	if (back)
		pr_info("put %llu evicted pages back before stopping", (unsigned long long)back);
}

/*
 * Unregistered, a region is its process's memory again, served by the
 * kernel, and the process may go on using it (a registration cache
 * deregisters buffers that are still in use): a page only the swap store
 * holds would read zeros from then on. Before, every evicted page of an
 * unregistered region did (tests/evict_region_hole: 775 of 775).
 */
int evict_put_back(struct npfd_region *r)
{
	int failed;
	__u64 back, from;

	/*
	 * Its copy is what such a page has once the zap ran, and the store
	 * goes with the region: the unregister waits until no zap can run,
	 * and no new batch comes meanwhile (a region over its budget would
	 * get one after the other, and its unregister never).
	 */
	from = evict_put_back_under_way(r) ? r->ev->put_back_next : 0;
	if (r->ev)
		r->ev->leaving_until = now_ns() + EVICT_LEAVING_NS;
	if (zaps_may_take(r))
		return -EAGAIN;
	/*
	 * A step at a time: the others' faults wait while npfd puts pages
	 * back (one request put 65306 pages back in 918 ms, every other
	 * client's fault waiting behind it). The client asks again.
	 */
	back = put_back_stored(r, from, EVICT_PUT_BACK_STEP, &failed);
	if (!failed && r->ev)
		r->ev->put_back_next = 0;
	/* a step of many: not a line of the log each */
	if (back && failed == -EINPROGRESS)
		pr_debug(
			"region %u: put %llu evicted pages back before unregistering it (more to go: the client asks again)",
			r->id, (unsigned long long)back);
	else if (back)
		pr_info("region %u: put %llu evicted pages back before unregistering it%s", r->id,
			(unsigned long long)back, from ? " (its last step)" : "");
	return failed;
}
