// SPDX-License-Identifier: GPL-2.0
/*
 * mm watch: keep the devices' view of memory true while the kernel moves
 * and frees pages on its own (reclaim and swap-out, migration and
 * compaction, THP collapse, KSM merging). A kernel driver hears of these
 * through MMU notifiers; npfd hears of them through bpf/npf_mm.bpf.c, on mm
 * tracepoints that identify a page by its frame number (PFN) only.
 *
 *   device entry set present -> mmwatch_mapped(): read the page's PFN in
 *     /proc/PID/pagemap, add PFN -> (region, address) to npf_mm_pfns, read
 *     the PFN again (a frame freed between the two reads was never seen by
 *     the BPF side: its entry is invalidated at once)
 *   kernel frees/moves the frame -> tracepoint -> BPF: the PFN is tracked:
 *     delete it, send {pfn, region, address, event}
 *   record -> region_invalidate() -> the devices' entries of that page
 *     (device_range_removed()): cleared with a version bump, the NIC told;
 *     its next access faults and npfd maps the page where it is now (and
 *     tracks that frame)
 *
 * The BPF programs are attached only while some device is attached: the
 * page-free tracepoint fires for every page the machine frees, and npfd
 * makes it pay a hash lookup only when it has something to protect.
 * docs/design.md ("mm tracepoints") says which event is seen how, and what
 * is not.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "log.h"
#include "loop.h"
#include "mmwatch.h"
#include "region.h"
#include "util.h"
#include "npf_mm.skel.h"

#define PM_PRESENT (1ULL << 63)
#define PM_SWAP (1ULL << 62)
#define PM_EXCLUSIVE (1ULL << 56) /* mapped by this page alone */
#define PM_PFN_MASK ((1ULL << 55) - 1)
#define CHUNK 512

static struct npf_mm_bpf *skel;
static const char *pin_dir; /* npfd's --bpffs */
static struct ring_buffer *rb;
static int rb_src = -1;
static unsigned int nr_devices;
static __u64 lost_seen;
static bool pfn_warned, full_warned;
static __u64 untracked;	 /* entries mapped whose frame npfd could not track */
static __u64 raced;	 /* frames freed before the BPF side could see them */
static __u64 sweeps;	 /* regions swept for pages unmapped but not yet freed */
static __u64 superseded; /* records for pages discarded or mapped again since */
static __u64 handled[NPF_MM_NR_EVENTS];

void mmwatch_set_pin_dir(const char *dir)
{
	pin_dir = dir;
}

/*
 * The ring's positions and data, mapped read-only (the kernel's layout of a
 * BPF ring buffer: consumer page, producer page, data mapped twice), to see
 * a committed record npfd was not woken for (mmwatch_tick).
 */
static const volatile unsigned long *ring_cons, *ring_prod;
static const char *ring_data;
static size_t ring_size, ring_prod_len;
static unsigned long stall_pos = ~0UL;
static __u64 stall_since, stalls;
static __u64 rereads; /* records committed as a read of the ring stopped, read at once */
/*
 * The shared zero page (UFFDIO_ZEROPAGE maps it for read faults): never
 * freed nor moved, mapped by any number of pages; not tracked.
 */
static __u64 zero_pfn;

/*
 * Swap-in on the device's behalf. device.c maps a page npfd once installed
 * without looking where it is now; after a swap-out it is in swap, has no
 * frame to track, and a later move of the frame it gets when it comes back
 * would go unseen. So npfd brings it back itself: a read of /proc/PID/mem
 * over it, through an io_uring (the read may block in a swap-in: an io-wq
 * worker waits, not npfd's loop; a page with no entry at all fails the read
 * at once instead of waiting in a userfaultfd, see mm_mem_rw()), and tracks
 * its frame when the read completes.
 */
#define SWAPIN_MAX 64
#define SWAPIN_TRIES 3
struct swapin {
	__u32 region_id;
	__u64 va, n;
	unsigned int tries;
};
static struct io_uring swapin_ring;
static bool swapin_ok;
static int swapin_efd = -1, swapin_src = -1;
static char *swapin_buf; /* CHUNK pages that every read overwrites */
static unsigned int swapin_inflight;
static __u64 swapins;
/* Waiting for a slot: a FIFO of what did not fit in flight. */
#define SWAPIN_QUEUE 4096
static struct swapin queued[SWAPIN_QUEUE];
static unsigned int queue_head, queue_len;
static struct swapin slots[SWAPIN_MAX]; /* in flight: n != 0 */

/* Is page va of region_id waiting for a swap-in read (queued or in flight)? */
static bool swapin_covers(__u32 region_id, __u64 va)
{
	unsigned int i;

	for (i = 0; i < SWAPIN_MAX; i++)
		if (slots[i].n && slots[i].region_id == region_id && va >= slots[i].va &&
		    va < slots[i].va + slots[i].n * NPF_PAGE_SIZE)
			return true;
	for (i = 0; i < queue_len; i++) {
		const struct swapin *q = &queued[(queue_head + i) % SWAPIN_QUEUE];

		if (q->region_id == region_id && va >= q->va && va < q->va + q->n * NPF_PAGE_SIZE)
			return true;
	}
	return false;
}

static void track(struct npfd_region *r, __u64 va, __u64 n, unsigned int tries);

/*
 * Entries set present during one pass of the loop, tracked at its end
 * (mmwatch_flush): a device's page request for a thousand pages that exist
 * sets them one by one, and their frames are then read and tracked in a
 * few runs rather than a thousand times three system calls.
 */
struct mapped {
	__u32 region_id;
	__u64 va, n;
};
static struct mapped *mapped;
static size_t nmapped, mapped_cap;

/*
 * Frames that several device pages map (KSM merged them): npf_mm_pfns has
 * room for one page per frame, so it marks the frame NPF_MM_SHARED and
 * npfd keeps every page of it here. A chained hash on the frame number.
 */
struct sharer {
	struct sharer *next;
	__u64 pfn, va;
	__u32 region_id;
};
#define SHARED_BUCKETS 4096
static struct sharer *shared[SHARED_BUCKETS];
static __u64 nshared;

static void sharer_add(__u64 pfn, __u32 region_id, __u64 va)
{
	struct sharer **b = &shared[pfn % SHARED_BUCKETS], *s;

	for (s = *b; s; s = s->next)
		if (s->pfn == pfn && s->region_id == region_id && s->va == va)
			return;
	s = malloc(sizeof(*s));
	if (!s) {
		untracked++; /* the frame's free still invalidates the page tracked in BPF */
		return;
	}
	*s = (struct sharer){.next = *b, .pfn = pfn, .va = va, .region_id = region_id};
	*b = s;
	nshared++;
}

/*
 * A frame this page may share with others (not exclusively mapped: KSM, or
 * a fork's copy-on-write): if the map has another page for it, the frame
 * becomes shared and every page of it is kept in the list.
 */
static void track_shared(int fd, __u64 pfn, __u32 region_id, __u64 va)
{
	struct npf_mm_page old, val = {.addr = va, .region_id = region_id};

	if (bpf_map_lookup_elem(fd, &pfn, &old)) {
		if (bpf_map_update_elem(fd, &pfn, &val, BPF_ANY))
			untracked++;
		return;
	}
	if (old.region_id == region_id && old.addr == va)
		return; /* this very page: tracked already */
	if (!(old.flags & NPF_MM_SHARED)) {
		sharer_add(pfn, old.region_id, old.addr);
		old.flags |= NPF_MM_SHARED;
		bpf_map_update_elem(fd, &pfn, &old, BPF_ANY);
	}
	sharer_add(pfn, region_id, va);
}

static bool sharer_has(__u64 pfn, __u32 region_id, __u64 va)
{
	struct sharer *s;

	for (s = shared[pfn % SHARED_BUCKETS]; s; s = s->next)
		if (s->pfn == pfn && s->region_id == region_id && s->va == va)
			return true;
	return false;
}

static void sharers_clear(void)
{
	struct sharer *s, *next;
	size_t i;

	for (i = 0; i < SHARED_BUCKETS; i++) {
		for (s = shared[i]; s; s = next) {
			next = s->next;
			free(s);
		}
		shared[i] = NULL;
	}
	nshared = 0;
}

static const char *const event_name[NPF_MM_NR_EVENTS] = {
	[NPF_MM_PAGE_FREE] = "page freed",
	[NPF_MM_SWAP_WRITE] = "swap-out",
	[NPF_MM_KSM_MERGE] = "KSM merge",
};

/*
 * The pages of one drain of the ring, invalidated together: one ranged
 * invalidation per run of contiguous pages rather than one per page (the
 * NIC's invalidation ring holds NPF_NIC_RING_SIZE requests; a swap-out of
 * a whole region is a thousand records in a burst).
 */
struct doomed {
	__u32 region_id;
	__u64 addr;
	__u64 pfn; /* the frame the record was for; 0: invalidate whatever */
};
static struct doomed *doomed;
static size_t ndoomed, doomed_cap;

static int doomed_cmp(const void *a, const void *b)
{
	const struct doomed *x = a, *y = b;

	if (x->region_id != y->region_id)
		return x->region_id < y->region_id ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void invalidate_range(__u32 region_id, __u64 addr, __u64 end)
{
	struct npfd_region *r = region_find_id(region_id);

	/* A region since unregistered: its devices were invalidated then. */
	if (r && addr >= r->start && end - r->start <= r->length) {
		pr_debug("mm watch: region %u: invalidating 0x%llx-0x%llx", region_id,
			 (unsigned long long)addr, (unsigned long long)end);
		region_invalidate(r, addr, end);
	}
}

static void doom(__u32 region_id, __u64 addr, __u64 pfn);
static bool swapin_covers(__u32 region_id, __u64 va);

/*
 * Reclaim can unmap a page and not free its frame at once (a clean page
 * still in the swap cache with a transient reference, say): no tracepoint
 * says so, and the frame's free, when it comes, is late for a device write
 * (the kernel took the page's dirty state at the unmap). So when records
 * arrive for a region, npfd also sweeps it: every page of it now in swap is
 * invalidated with them (a no-op for entries already clear), except pages
 * npfd is itself reading back from swap. (Pages discarded outright are
 * userfaultfd's: REMOVE and UNMAP events invalidate them.)
 */
static void sweep(__u32 region_id)
{
	struct npfd_region *r = region_find_id(region_id);
	__u64 ent[CHUNK], va, n, i;

	if (!r || r->mm->tgid <= 0)
		return;
	for (va = r->start; va < r->start + r->length; va += n * NPF_PAGE_SIZE) {
		n = (r->start + r->length - va) >> NPF_PAGE_SHIFT;
		if (n > CHUNK)
			n = CHUNK;
		if (!mm_pagemap_read(r->mm, va, ent, n))
			return;
		for (i = 0; i < n; i++)
			if (!(ent[i] & PM_PRESENT) && (ent[i] & PM_SWAP) &&
			    !swapin_covers(region_id, va + i * NPF_PAGE_SIZE))
				doom(region_id, va + i * NPF_PAGE_SIZE, 0);
	}
	sweeps++;
}

/*
 * Does the record for frame d->pfn still concern the device's entry of its
 * page? Not when the page was discarded (no frame, not in swap: the
 * userfaultfd REMOVE or UNMAP that discarded it invalidated the entry), nor
 * when npfd has tracked the page's present frame for it since the record
 * was sent (the BPF side deleted the reported frame's entry when it sent
 * it, so an entry now means the device entry was set present again after
 * the discard: for a new frame, or for the same frame reused at once).
 * Otherwise (swapped, merged, migrated: the entry still names the old
 * frame) it does. win caches one pagemap read of up to CHUNK pages.
 */
struct pm_window {
	__u32 region_id;
	__u64 va, n;
	__u64 ent[CHUNK];
};

static bool still_mapped_for(const struct doomed *d, struct pm_window *win)
{
	struct npfd_region *r = region_find_id(d->region_id);
	struct npf_mm_page v;
	__u64 e, q;

	if (!r || !d->pfn)
		return true;
	if (win->region_id != d->region_id || d->addr < win->va ||
	    d->addr >= win->va + win->n * NPF_PAGE_SIZE) {
		win->region_id = d->region_id;
		win->va = d->addr;
		win->n = (r->start + r->length - d->addr) >> NPF_PAGE_SHIFT;
		if (win->n > CHUNK)
			win->n = CHUNK;
		if (r->mm->tgid <= 0 || !mm_pagemap_read_now(r->mm, win->va, win->ent, win->n)) {
			win->n = 0;
			return true;
		}
	}
	e = win->ent[(d->addr - win->va) >> NPF_PAGE_SHIFT];
	if (!(e & (PM_PRESENT | PM_SWAP)))
		return false;
	q = e & PM_PFN_MASK;
	/* Mapped again since, by npfd (the zero page), or tracked again for this page. */
	if ((e & PM_PRESENT) && q == zero_pfn)
		return false;
	if ((e & PM_PRESENT) && sharer_has(q, d->region_id, d->addr))
		return false;
	if ((e & PM_PRESENT) && !bpf_map_lookup_elem(bpf_map__fd(skel->maps.npf_mm_pfns), &q, &v) &&
	    !(v.flags & NPF_MM_SHARED) && v.region_id == d->region_id && v.addr == d->addr)
		return false;
	pr_debug("mm watch: region %u page 0x%llx: frame 0x%llx gone, pagemap 0x%llx: invalidating",
		 d->region_id, (unsigned long long)d->addr, (unsigned long long)d->pfn,
		 (unsigned long long)e);
	return true;
}

static void invalidate_doomed(void)
{
	struct pm_window win = {.n = 0};
	size_t i, j, n0;

	if (!ndoomed)
		return;
	mmwatch_flush(); /* entries set present in this pass: their frames tracked first */
	qsort(doomed, ndoomed, sizeof(*doomed), doomed_cmp);
	for (i = j = 0; i < ndoomed; i++)
		if (still_mapped_for(&doomed[i], &win))
			doomed[j++] = doomed[i];
		else
			superseded++;
	ndoomed = n0 = j;
	for (i = 0; i < n0; i++)
		if (!i || doomed[i].region_id != doomed[i - 1].region_id)
			sweep(doomed[i].region_id);
	if (ndoomed != n0)
		qsort(doomed, ndoomed, sizeof(*doomed), doomed_cmp);
	for (i = 0; i < ndoomed; i = j) {
		for (j = i + 1; j < ndoomed && doomed[j].region_id == doomed[i].region_id &&
				doomed[j].addr <= doomed[j - 1].addr + NPF_PAGE_SIZE;
		     j++)
			;
		invalidate_range(doomed[i].region_id, doomed[i].addr,
				 doomed[j - 1].addr + NPF_PAGE_SIZE);
	}
	ndoomed = 0;
}

/* Records were lost (ring full): any tracked frame may have moved. */
static void invalidate_everything(void)
{
	struct npfd_mm *mm;
	struct npfd_region *r;

	pr_warn("mm watch: %llu records lost (ring buffer full): invalidating every device entry",
		(unsigned long long)lost_seen);
	list_for_each_entry(mm, &mms, node)
		list_for_each_entry(r, &mm->regions, node)
			region_invalidate(r, r->start, r->start + r->length);
}

static void doom(__u32 region_id, __u64 addr, __u64 pfn)
{
	if (ndoomed == doomed_cap) {
		size_t cap = doomed_cap ? doomed_cap * 2 : 1024;
		struct doomed *n = realloc(doomed, cap * sizeof(*n));

		if (!n) { /* no room to batch: this one alone */
			invalidate_range(region_id, addr, addr + NPF_PAGE_SIZE);
			return;
		}
		doomed = n;
		doomed_cap = cap;
	}
	doomed[ndoomed++] = (struct doomed){.region_id = region_id, .addr = addr, .pfn = pfn};
}

static int handle_record(void *ctx, void *data, size_t len)
{
	const struct npf_mm_record *rec = data;

	if (len < sizeof(*rec))
		return 0;
	if (rec->event < NPF_MM_NR_EVENTS)
		handled[rec->event]++;
	pr_debug("mm watch: %s: pfn 0x%llx was region %u page 0x%llx: invalidated",
		 rec->event < NPF_MM_NR_EVENTS ? event_name[rec->event] : "?",
		 (unsigned long long)rec->pfn, rec->region_id, (unsigned long long)rec->addr);
	doom(rec->region_id, rec->addr, rec->pfn);
	if (rec->flags & NPF_MM_SHARED) {
		struct sharer **pp = &shared[rec->pfn % SHARED_BUCKETS], *sh;

		while ((sh = *pp)) {
			if (sh->pfn != rec->pfn) {
				pp = &sh->next;
				continue;
			}
			doom(sh->region_id, sh->va, rec->pfn);
			*pp = sh->next;
			free(sh);
			nshared--;
		}
	}
	return 0;
}

static void check_lost(void)
{
	__u32 zero = 0;
	struct npf_mm_stats st;

	if (!skel || bpf_map_lookup_elem(bpf_map__fd(skel->maps.npf_mm_stats), &zero, &st))
		return;
	if (st.lost != lost_seen) {
		lost_seen = st.lost;
		invalidate_everything();
	}
}

static __u64 now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000 + (__u64)ts.tv_nsec / 1000000;
}

/* Is a committed record waiting at the consumer position? */
static bool ring_record_waiting(unsigned long *pos)
{
	unsigned long c, p;
	__u32 len;

	if (!ring_cons)
		return false;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	c = *ring_cons;
	p = *ring_prod;
	if (c == p)
		return false;
	len = __atomic_load_n((const __u32 *)(ring_data + (c & (ring_size - 1))), __ATOMIC_ACQUIRE);
	*pos = c;
	return !(len & BPF_RINGBUF_BUSY_BIT);
}

/*
 * The ring wakes npfd only for a record committed at the position npfd has
 * consumed to (adaptive notification). libbpf's ring_buffer__consume()
 * stores that position and then reads the next record's header with no
 * full barrier between: a record committed just then can read the old
 * position (no wakeup) while the consume sees it still busy (not read).
 * Nothing wakes npfd for it, nor for any record after it, since the
 * position it consumed to never moves again. So after each read: a full
 * fence, and read again while a committed record waits; a record still
 * busy after the fence sees the stored position when it commits, and
 * wakes npfd.
 */
static void mm_ring_ready(void *arg)
{
	unsigned long pos;

	if (!rb)
		return;
	ring_buffer__consume(rb);
	while (ring_record_waiting(&pos)) {
		rereads++;
		ring_buffer__consume(rb);
	}
	invalidate_doomed();
	check_lost();
	/* Invalidations are posted; wake whoever waits (device_flush runs after the loop). */
}

static void swapin_start(struct npfd_region *r, __u64 va, __u64 n, unsigned int tries)
{
	struct io_uring_sqe *sqe;
	struct swapin *s;
	int fd;

	if (!swapin_ok || tries >= SWAPIN_TRIES) {
		untracked += n;
		return;
	}
	if (swapin_inflight == SWAPIN_MAX || !(sqe = io_uring_get_sqe(&swapin_ring))) {
		if (queue_len == SWAPIN_QUEUE) {
			untracked += n;
			return;
		}
		queued[(queue_head + queue_len++) % SWAPIN_QUEUE] =
			(struct swapin){.region_id = r->id, .va = va, .n = n, .tries = tries};
		return;
	}
	for (s = slots; s->n; s++) /* a free one exists: fewer than SWAPIN_MAX in flight */
		;
	fd = mm_mem_fd(r->mm);
	if (fd < 0) {
		io_uring_prep_nop(sqe); /* the sqe is taken: give it something harmless */
		io_uring_sqe_set_data(sqe, NULL);
		io_uring_submit(&swapin_ring);
		untracked += n;
		return;
	}
	s->region_id = r->id;
	s->va = va;
	s->n = n;
	s->tries = tries + 1;
	/* the ring holds the file for the read: mm may go (and close it) meanwhile */
	io_uring_prep_read(sqe, fd, swapin_buf, (unsigned int)(n * NPF_PAGE_SIZE), va);
	io_uring_sqe_set_data(sqe, s);
	if (io_uring_submit(&swapin_ring) != 1) {
		s->n = 0;
		untracked += n;
		return;
	}
	swapin_inflight++;
}

static void swapin_done(void *arg)
{
	struct io_uring_cqe *cqe;
	__u64 v;

	while (read(swapin_efd, &v, sizeof(v)) > 0)
		;
	while (!io_uring_peek_cqe(&swapin_ring, &cqe)) {
		struct swapin *slot = io_uring_cqe_get_data(cqe), done;
		struct npfd_region *r;
		int res = cqe->res;

		io_uring_cqe_seen(&swapin_ring, cqe);
		if (!slot)
			continue; /* the nop of a failed open */
		done = *slot;
		slot->n = 0;
		swapin_inflight--;
		pr_debug("mm watch: swap-in read of region %u 0x%llx+%llu pages: %d",
			 done.region_id, (unsigned long long)done.va, (unsigned long long)done.n,
			 res);
		r = region_find_id(done.region_id);
		if (skel && r && r->mm->tgid > 0) {
			swapins += done.n;
			track(r, done.va, done.n, done.tries);
		}
	}
	while (queue_len && swapin_inflight < SWAPIN_MAX) {
		struct swapin q = queued[queue_head];
		struct npfd_region *r = region_find_id(q.region_id);

		queue_head = (queue_head + 1) % SWAPIN_QUEUE;
		queue_len--;
		if (skel && r && r->mm->tgid > 0)
			swapin_start(r, q.va, q.n, q.tries);
	}
}

static void swapin_init(void)
{
	swapin_buf = mmap(NULL, CHUNK * NPF_PAGE_SIZE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (swapin_buf == MAP_FAILED) {
		swapin_buf = NULL;
		goto fail;
	}
	if (io_uring_queue_init(SWAPIN_MAX, &swapin_ring, 0))
		goto fail;
	swapin_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (swapin_efd < 0 || io_uring_register_eventfd(&swapin_ring, swapin_efd)) {
		io_uring_queue_exit(&swapin_ring);
		goto fail;
	}
	swapin_src = source_add(swapin_efd, POLLIN, swapin_done, NULL);
	if (swapin_src < 0) {
		io_uring_queue_exit(&swapin_ring);
		goto fail;
	}
	swapin_ok = true;
	return;
fail:
	pr_warn("mm watch: cannot set up swap-in reads (%s): pages a device maps while they are in swap stay untracked",
		strerror(errno));
	if (swapin_efd >= 0)
		close(swapin_efd);
	swapin_efd = -1;
	if (swapin_buf)
		munmap(swapin_buf, CHUNK * NPF_PAGE_SIZE);
	swapin_buf = NULL;
}

/*
 * Once per loop pass (the loop wakes at least every 200 ms): a committed
 * record left waiting at the same position for over 100 ms means its
 * wakeup was lost, whatever lost it (mm_ring_ready closes the one race
 * known); after one lost wakeup none comes again, so count it, say so,
 * and read the ring. Costs a fence and three loads per pass.
 */
void mmwatch_tick(void)
{
	unsigned long pos;
	__u64 now;

	/*
	 * Left by a pass that stopped in the middle (the loop moved to
	 * another thread, mmcall.h): the others' entries go now, not at the
	 * next record.
	 */
	invalidate_doomed();
	if (!rb || !ring_record_waiting(&pos)) {
		stall_pos = ~0UL;
		return;
	}
	now = now_ms();
	if (pos != stall_pos) {
		stall_pos = pos;
		stall_since = now;
		return;
	}
	if (now - stall_since < 100)
		return;
	stalls++;
	pr_warn("mm watch: records waited %llu ms in the ring with no wakeup: reading them now",
		(unsigned long long)(now - stall_since));
	stall_pos = ~0UL;
	mm_ring_ready(NULL);
}

/* With the watch: reads in flight are cancelled (io_uring_queue_exit), their descriptors closed. */
static void swapin_exit(void)
{
	unsigned int i;

	if (!swapin_ok)
		return;
	source_del(swapin_src);
	io_uring_queue_exit(&swapin_ring);
	close(swapin_efd);
	swapin_efd = -1;
	munmap(swapin_buf, CHUNK * NPF_PAGE_SIZE);
	swapin_buf = NULL;
	for (i = 0; i < SWAPIN_MAX; i++)
		slots[i].n = 0;
	swapin_inflight = 0;
	queue_len = 0;
	swapin_ok = false;
}

/* npf_mm_pfns pinned beside npfd's other maps: which frames are watched, for bpftool and tests. */
static char pin_path[PATH_MAX];

static void unload(void)
{
	if (pin_path[0])
		unlink(pin_path);
	pin_path[0] = 0;
	nmapped = 0;
	swapin_exit(); /* npfd without devices holds no descriptor for the watch */
	sharers_clear();
	if (rb_src >= 0)
		source_del(rb_src);
	rb_src = -1;
	ring_buffer__free(rb);
	rb = NULL;
	if (ring_cons)
		munmap((void *)ring_cons, (size_t)sysconf(_SC_PAGESIZE));
	if (ring_prod)
		munmap((void *)ring_prod, ring_prod_len);
	ring_cons = ring_prod = NULL;
	ring_data = NULL;
	stall_pos = ~0UL;
	npf_mm_bpf__destroy(skel);
	skel = NULL;
	lost_seen = 0;
}

/* The zero page's frame: what a read of a never-written anonymous page maps. */
static void learn_zero_pfn(void)
{
	volatile char *z = mmap(NULL, NPF_PAGE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	__u64 ent = 0;
	int fd;

	if (z == MAP_FAILED)
		return;
	(void)*z;
	fd = open("/proc/thread-self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd >= 0 &&
	    pread(fd, &ent, sizeof(ent), (off_t)((uintptr_t)z >> NPF_PAGE_SHIFT) * 8) ==
		    sizeof(ent) &&
	    (ent & PM_PRESENT))
		zero_pfn = ent & PM_PFN_MASK;
	if (fd >= 0)
		close(fd);
	munmap((void *)z, NPF_PAGE_SIZE);
}

static int load(void)
{
	int err;

	skel = npf_mm_bpf__open();
	if (!skel)
		return -errno;
	err = npf_mm_bpf__load(skel);
	if (!err)
		err = npf_mm_bpf__attach(skel);
	if (err)
		goto fail;
	rb = ring_buffer__new(bpf_map__fd(skel->maps.npf_mm_events), handle_record, NULL, NULL);
	if (!rb) {
		err = -errno;
		goto fail;
	}
	rb_src = source_add(ring_buffer__epoll_fd(rb), POLLIN, mm_ring_ready, NULL);
	if (rb_src < 0) {
		err = rb_src;
		goto fail;
	}
	{
		int fd = bpf_map__fd(skel->maps.npf_mm_events);
		long pg = sysconf(_SC_PAGESIZE);
		void *c, *p;

		ring_size = bpf_map__max_entries(skel->maps.npf_mm_events);
		ring_prod_len = (size_t)pg + 2 * ring_size;
		c = mmap(NULL, (size_t)pg, PROT_READ, MAP_SHARED, fd, 0);
		p = mmap(NULL, ring_prod_len, PROT_READ, MAP_SHARED, fd, pg);
		if (c == MAP_FAILED || p == MAP_FAILED) {
			/* The ring still works on wakeups; only the stall check is off. */
			pr_warn("mm watch: cannot map the ring's positions (%s): a lost wakeup goes unnoticed",
				strerror(errno));
			if (c != MAP_FAILED)
				munmap(c, (size_t)pg);
			if (p != MAP_FAILED)
				munmap(p, ring_prod_len);
		} else {
			ring_cons = c;
			ring_prod = p;
			ring_data = (const char *)p + pg;
		}
	}
	if (!swapin_ok)
		swapin_init();
	if (!zero_pfn)
		learn_zero_pfn();
	if (pin_dir) {
		snprintf(pin_path, sizeof(pin_path), "%s/npf_mm_pfns", pin_dir);
		unlink(pin_path); /* left by an npfd that was killed */
		if (bpf_map__pin(skel->maps.npf_mm_pfns, pin_path)) {
			pr_warn("mm watch: cannot pin npf_mm_pfns at %s: %s", pin_path,
				strerror(errno));
			pin_path[0] = 0;
		}
	}
	return 0;
fail:
	unload();
	return err;
}

/* A device was attached: watch the mm tracepoints while any device is. */
void mmwatch_device_attached(void)
{
	int err;

	if (nr_devices++)
		return;
	err = load();
	if (err) {
		/* The device still works; the kernel's moves go unseen. Say it each time. */
		pr_err("mm watch: cannot load or attach bpf/npf_mm.bpf.c (%s): devices will not hear of pages the kernel reclaims, migrates or merges; check that tracefs is mounted and the tracepoints kmem:mm_page_free, vmscan:mm_vmscan_write_folio and ksm:ksm_merge_with_ksm_page exist",
		       strerror(-err));
		return;
	}
	pr_info("mm watch attached (kmem:mm_page_free, vmscan:mm_vmscan_write_folio, ksm:ksm_merge_with_ksm_page)");
}

/* A device was detached or retired: the last one takes the watch down. */
void mmwatch_device_detached(void)
{
	if (!nr_devices || --nr_devices)
		return;
	if (skel) {
		__u64 before = handled[NPF_MM_PAGE_FREE] + handled[NPF_MM_SWAP_WRITE] +
			       handled[NPF_MM_KSM_MERGE];

		mm_ring_ready(NULL);
		/* Records read only now sat in the ring without waking npfd. */
		pr_info("mm watch detached: %llu page frees, %llu swap-outs, %llu KSM merges reported (%llu of them for pages discarded or mapped again since; %llu read only at detach; %llu read again as a read stopped, %llu after a lost wakeup); %llu sweeps; %llu pages swapped in to be tracked, %llu mapped untracked, %llu raced",
			(unsigned long long)handled[NPF_MM_PAGE_FREE],
			(unsigned long long)handled[NPF_MM_SWAP_WRITE],
			(unsigned long long)handled[NPF_MM_KSM_MERGE],
			(unsigned long long)superseded,
			(unsigned long long)(handled[NPF_MM_PAGE_FREE] +
					     handled[NPF_MM_SWAP_WRITE] +
					     handled[NPF_MM_KSM_MERGE] - before),
			(unsigned long long)rereads, (unsigned long long)stalls,
			(unsigned long long)sweeps, (unsigned long long)swapins,
			(unsigned long long)untracked, (unsigned long long)raced);
	}
	unload();
}

/*
 * Track the frames of [va, va + n pages) of region r, whose device entries
 * npfd has just set present. Call it after setting them: a frame freed
 * after the first pagemap read but before the map update is caught by the
 * second read (its page then has another frame, or none) and invalidated.
 */
static void track(struct npfd_region *r, __u64 va, __u64 n, unsigned int tries)
{
	__u64 ent[CHUNK], again[CHUNK], keys[CHUNK];
	struct npf_mm_page vals[CHUNK];
	__u32 count, i, k = 0, run = 0;
	int fd = bpf_map__fd(skel->maps.npf_mm_pfns);
	DECLARE_LIBBPF_OPTS(bpf_map_batch_opts, opts);

	if (!mm_pagemap_read_now(r->mm, va, ent, n)) {
		pr_warn("region %u: cannot read /proc/%d/pagemap (%s): 0x%llx+%llu pages mapped untracked",
			r->id, r->mm->tgid, strerror(errno), (unsigned long long)va,
			(unsigned long long)n);
		untracked += n;
		return;
	}
	for (i = 0; i <= n; i++) {
		/* Runs of pages in swap: read them back in, track them then. */
		if (i < n && !(ent[i] & PM_PRESENT) && (ent[i] & PM_SWAP)) {
			run++;
			continue;
		}
		if (run)
			swapin_start(r, va + (i - run) * NPF_PAGE_SIZE, run, tries);
		run = 0;
		if (i == n)
			break;
		if (!(ent[i] & PM_PRESENT)) {
			untracked++; /* gone since it was mapped: its removal invalidates it */
			continue;
		}
		if (!(ent[i] & PM_PFN_MASK)) {
			if (!pfn_warned)
				pr_err("mm watch: /proc/%d/pagemap shows no frame numbers (npfd needs CAP_SYS_ADMIN): the kernel's page moves go unseen",
				       r->mm->tgid);
			pfn_warned = true;
			untracked++;
			continue;
		}
		if ((ent[i] & PM_PFN_MASK) == zero_pfn)
			continue;
		if (!(ent[i] & PM_EXCLUSIVE)) {
			track_shared(fd, ent[i] & PM_PFN_MASK, r->id, va + i * NPF_PAGE_SIZE);
			continue;
		}
		keys[k] = ent[i] & PM_PFN_MASK;
		vals[k] = (struct npf_mm_page){.addr = va + i * NPF_PAGE_SIZE, .region_id = r->id};
		k++;
	}
	if (!k)
		return;
	count = k;
	if (bpf_map_update_batch(fd, keys, vals, &count, &opts) && count < k) {
		if (!full_warned)
			pr_warn("mm watch: tracking %u frames failed after %u (%s): those entries stay mapped untracked",
				k, count, strerror(errno));
		full_warned = true;
		untracked += k - count;
	}
	if (!mm_pagemap_read_now(r->mm, va, again, n))
		return;
	for (i = 0; i < n; i++)
		/* Discarded meanwhile (no frame, not in swap): userfaultfd's REMOVE says so. */
		if ((ent[i] & PM_PRESENT) && (again[i] & (PM_PRESENT | PM_SWAP)) &&
		    (again[i] & (PM_PRESENT | PM_PFN_MASK)) !=
			    (ent[i] & (PM_PRESENT | PM_PFN_MASK))) {
			raced++;
			pr_debug(
				"mm watch: region %u page 0x%llx: frame 0x%llx became 0x%llx while tracked: invalidating",
				r->id, (unsigned long long)(va + i * NPF_PAGE_SIZE),
				(unsigned long long)ent[i], (unsigned long long)again[i]);
			region_invalidate(r, va + i * NPF_PAGE_SIZE, va + (i + 1) * NPF_PAGE_SIZE);
		}
}

void mmwatch_mapped(struct npfd_region *r, __u64 va, __u64 npages)
{
	struct mapped *last = nmapped ? &mapped[nmapped - 1] : NULL;

	if (!skel || !r || !npages)
		return;
	if (last && last->region_id == r->id && last->va + last->n * NPF_PAGE_SIZE == va) {
		last->n += npages;
		return;
	}
	if (nmapped == mapped_cap) {
		size_t cap = mapped_cap ? mapped_cap * 2 : 256;
		struct mapped *m = realloc(mapped, cap * sizeof(*m));

		if (!m) {
			mmwatch_flush(); /* no room to wait: track what waits now */
			if (!mapped_cap) {
				untracked += npages;
				return;
			}
		} else {
			mapped = m;
			mapped_cap = cap;
		}
	}
	mapped[nmapped++] = (struct mapped){.region_id = r->id, .va = va, .n = npages};
}

void mmwatch_flush(void)
{
	size_t i;

	for (i = 0; i < nmapped; i++) {
		struct npfd_region *r = region_find_id(mapped[i].region_id);
		__u64 va = mapped[i].va, left = mapped[i].n, n;

		for (; r && skel && left; left -= n, va += n * NPF_PAGE_SIZE) {
			n = left < CHUNK ? left : CHUNK;
			track(r, va, n, 0);
		}
	}
	nmapped = 0;
}

void mmwatch_close(void)
{
	unload();
	free(doomed);
	doomed = NULL;
	ndoomed = doomed_cap = 0;
	free(mapped);
	mapped = NULL;
	nmapped = mapped_cap = 0;
	nr_devices = 0;
}
