// SPDX-License-Identifier: GPL-2.0
/*
 * Parts of regions moved away by mremap() (moved.h): their pages only npfd
 * held, put at the new place.
 *
 * Not at once: the kernel refuses UFFDIO_COPY (EAGAIN) while an mm event
 * of the address space is not complete, and the REMAP event is complete
 * only once the process's mremap() has woken up after npfd read it. So a
 * part is put back from the event loop, a bounded step at a time, and the
 * faults in its range wait (resolve.c keeps them) until it is all back.
 * The store's slots or the file's pages it reads are its own: eviction
 * handed them over (evict_part_leaving()) before the region's cut or hole
 * would have punched them.
 *
 * Each part is one range, with an entry in its process's layout journal
 * (layout.h) while it is not all back: if npfd dies or stops first, the
 * process puts back the rest itself (libnpf). What that could meet in a
 * part's gaps: part_cut().
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
#include "bitmap.h"
#include "layout.h"
#include "list.h"
#include "log.h"
#include "loop.h"
#include "mmcall.h"
#include "moved.h"
#include "swapstore.h"
#include "util.h"

/*
 * Pages put back per loop pass, all parts together (each in turn): ~2 ms
 * of npfd's loop. Per part, a process that made a thousand parts (a
 * thousand mremaps of slices of a file-backed region) held every other
 * client 0.3 s per pass (review).
 */
#define MOVED_STEP_PAGES 1024
#define MOVED_STOP_NS (2ULL * 1000 * 1000 * 1000) /* npfd stops: the time left to finish */

struct part {
	struct list_head node;
	struct npfd_mm *mm;
	__u32 region_id;
	__u64 dst, npages;
	int fd;
	__u64 off0;
	/* map_lists_wanted: a set bit is a page to put back; else (a file's part) a set bit is one not to (unmapped since) */
	struct bitmap *map;
	bool map_lists_wanted;
	bool punch;
	__u64 next; /* the first page not looked at */
	/*
	 * A file's part: pages from data_end on are to be looked for with
	 * SEEK_DATA (those in the file's holes and past its end read zeros,
	 * which the kernel gives once the part is the process's own).
	 */
	__u64 data_end;
	__u64 put, failed;
	int slot; /* its layout journal entry, or -1 (none free) */
};

static struct list_head parts = LIST_HEAD_INIT(parts);

static bool map_bit(const struct part *pt, __u64 j)
{
	return bitmap_test(pt->map, j);
}

static bool wanted(const struct part *pt, __u64 j)
{
	return pt->map_lists_wanted ? map_bit(pt, j) : !map_bit(pt, j);
}

/* Its journal entry says where it is and what is left to put back (npf_abi.h NPF_LAYOUT_PART). */
static void part_journal(const struct part *pt)
{
	struct npf_layout_entry e = {.region_id = pt->region_id,
				     .flags = NPF_LAYOUT_PART,
				     .start = pt->dst,
				     .length = pt->npages << NPF_PAGE_SHIFT,
				     .offset = pt->off0};

	layout_write(pt->mm, pt->slot, &e);
}

/*
 * clear: its journal entry too. Not when npfd stops or gives the process
 * up: the range stays registered and the process puts the rest back.
 */
static void part_free(struct part *pt, bool clear)
{
	layout_part_slot_put(pt->mm, pt->slot, clear);
	list_del_init(&pt->node);
	if (pt->fd >= 0)
		close(pt->fd);
	bitmap_free(pt->map);
	free(pt);
}

/* All back: the kernel serves the range now (the unregister wakes whoever waits there). */
static void part_done(struct part *pt)
{
	struct uffdio_range range = {.start = pt->dst, .len = pt->npages << NPF_PAGE_SHIFT};

	/* ENOMEM: the mm is gone, or a mapping could not be split (then it stays registered) */
	if (pt->npages &&
	    mmcall_ioctl(pt->mm->tgid, pt->mm->uffd, UFFDIO_UNREGISTER, &range, sizeof(range)) &&
	    errno != ENOENT && errno != ESRCH && errno != EINVAL)
		pr_warn("pid %d: cannot unregister the part of region %u moved to 0x%llx: %s",
			pt->mm->tgid, pt->region_id, (unsigned long long)pt->dst, strerror(errno));
	if (pt->failed)
		pr_err("pid %d: %llu pages of the part of region %u moved to 0x%llx could not be put back",
		       pt->mm->tgid, (unsigned long long)pt->failed, pt->region_id,
		       (unsigned long long)pt->dst);
	pr_info("pid %d: the part of region %u moved to 0x%llx (%llu pages) is the process's own now: %llu pages put back",
		pt->mm->tgid, pt->region_id, (unsigned long long)pt->dst,
		(unsigned long long)pt->npages, (unsigned long long)pt->put);
	part_free(pt, true);
}

static char *page_buf; /* put_page()'s source */

static char *part_page(void)
{
	void *p;

	if (!page_buf) {
		p = mmap(NULL, NPF_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
		page_buf = p == MAP_FAILED ? NULL : p;
	}
	return page_buf;
}

void moved_retire_sources(void)
{
	if (page_buf)
		page_buf = buffer_renew(page_buf, NPF_PAGE_SIZE);
}

/* Page j back at its place: 0 (or nothing to put there), -EAGAIN (later), or another -errno. */
static int put_page(struct part *pt, __u64 j)
{
	char *page = part_page();
	__u64 off = pt->off0 + (j << NPF_PAGE_SHIFT);
	struct uffdio_copy c = {.dst = pt->dst + (j << NPF_PAGE_SHIFT),
				.src = (__u64)(uintptr_t)page,
				.len = NPF_PAGE_SIZE};
	ssize_t got;
	int err;

	if (!page)
		return -ENOMEM;
	got = pread(pt->fd, page, NPF_PAGE_SIZE, (off_t)off);
	if (got <= 0)
		return got < 0 ? -errno : 0; /* past the end of the file: zeros */
	if (got < (ssize_t)NPF_PAGE_SIZE)
		memset(page + got, 0, NPF_PAGE_SIZE - (size_t)got);
	if (!mmcall_ioctl_now(pt->mm->tgid, pt->mm->uffd, UFFDIO_COPY, &c)) {
		pt->put++;
	} else {
		/* refused before it started (an mm event pending): c.copy may not say so */
		err = c.copy < 0 ? (int)-c.copy : errno;
		if (err == EAGAIN)
			return -EAGAIN;
		/* EEXIST: there already (it moved present); ENOENT: unmapped since */
		if (err != EEXIST && err != ENOENT)
			return -err;
	}
	if (pt->punch)
		swapstore_punch(pt->fd, off);
	return 0;
}

/*
 * A file's part: the next page at or after pt->next with data in the file
 * (SEEK_DATA, and SEEK_HOLE for where that data ends); pt->npages if none.
 * A file that cannot say (a block device) has data everywhere.
 */
static __u64 next_data(struct part *pt)
{
	off_t off = (off_t)(pt->off0 + (pt->next << NPF_PAGE_SHIFT)), data, hole;

	if (pt->next < pt->data_end)
		return pt->next;
	data = lseek(pt->fd, off, SEEK_DATA);
	if (data < 0 && errno == ENXIO)
		return pt->npages; /* no data after off: the rest reads zeros */
	if (data < 0) {
		pt->data_end = pt->npages; /* it cannot say: all of it is data */
		return pt->next;
	}
	hole = lseek(pt->fd, data, SEEK_HOLE);
	pt->data_end = hole < 0 ? pt->npages :
				  ((__u64)hole - pt->off0 + NPF_PAGE_SIZE - 1) >> NPF_PAGE_SHIFT;
	return ((__u64)data - pt->off0) >> NPF_PAGE_SHIFT;
}

#define LOOK_MORE UINT64_MAX

/*
 * The next page of pt to put back, at or after pt->next: pt->npages if
 * none, LOOK_MORE if *look pages were looked at first (pt->next is where
 * to go on). Pages not wanted cost a look each, those the map skips a
 * word at a time less: a part's map may cover terabytes.
 */
static __u64 next_wanted(struct part *pt, __u64 *look)
{
	__u64 j, lim = pt->npages - pt->next > *look ? pt->next + *look : pt->npages;

	if (pt->map_lists_wanted) {
		j = bitmap_next(pt->map, pt->next, lim);
		*look -= (j - pt->next) / 64 + 1 < *look ? (j - pt->next) / 64 + 1 : *look;
		if (j < lim || lim == pt->npages)
			return j;
		pt->next = lim;
		return LOOK_MORE;
	}
	while (pt->next < pt->npages) {
		if (!*look)
			return LOOK_MORE;
		(*look)--;
		j = next_data(pt);
		if (j >= pt->npages)
			return pt->npages;
		pt->next = j;
		if (wanted(pt, j))
			return j;
		pt->next++;
	}
	return pt->npages;
}

/*
 * At most *budget pages of pt put back (taken off *budget), 64 pages
 * looked at per page. 1: more to do; 0: done; -EAGAIN: refused for now;
 * -ESRCH: the process is gone. A page present at the new place (or
 * swapped out by the kernel) is not replaced: UFFDIO_COPY fails EEXIST
 * there. A file's part reads such pages for nothing; pagemap would tell,
 * but it is region.c's, a layer above.
 */
static int part_step(struct part *pt, unsigned int *budget)
{
	__u64 look = (__u64)*budget * 64, j;
	int err;

	while (*budget) {
		j = next_wanted(pt, &look);
		if (j == LOOK_MORE) {
			*budget = 0; /* its turn is over: looked at as many pages as it could put */
			return 1;
		}
		pt->next = j;
		if (j >= pt->npages)
			break;
		err = put_page(pt, j);
		if (err == -EAGAIN || err == -ESRCH)
			return err;
		if (err && !pt->failed++)
			pr_err("pid %d: page 0x%llx moved out of region %u: cannot put its data back: %s",
			       pt->mm->tgid, (unsigned long long)(pt->dst + (j << NPF_PAGE_SHIFT)),
			       pt->region_id, strerror(-err));
		pt->next++;
		(*budget)--;
	}
	return pt->next < pt->npages;
}

static void part_run(struct part *pt, unsigned int *budget)
{
	int rc = part_step(pt, budget);

	if (rc == -ESRCH)
		part_free(pt, true); /* the process is gone */
	else if (!rc)
		part_done(pt);
}

/*
 * A store's part: the copies there of pages it will not put back (present
 * when they moved) go, so that the store holds a copy of exactly the pages
 * still to put back -- what libnpf reads, finishing the part after npfd's
 * death (npf_abi.h NPF_LAYOUT_PART). One punch per run of such pages.
 */
static void punch_unwanted(const struct part *pt)
{
	__u64 a = 0, j;

	while (a < pt->npages) {
		j = bitmap_next(pt->map, a, pt->npages);
		swapstore_punch_range(pt->fd, pt->off0 + (a << NPF_PAGE_SHIFT),
				      (j - a) << NPF_PAGE_SHIFT);
		a = j + 1;
	}
}

void moved_start(struct npfd_mm *mm, __u32 region_id, __u64 dst, __u64 npages, int fd, __u64 off0,
		 struct bitmap *wanted, bool punch)
{
	struct part *pt = calloc(1, sizeof(*pt));

	if (!pt) {
		pr_err("pid %d: out of memory: the part of region %u moved to 0x%llx reads zeros where npfd held its pages",
		       mm->tgid, region_id, (unsigned long long)dst);
		if (fd >= 0)
			close(fd);
		bitmap_free(wanted);
		return;
	}
	*pt = (struct part){.mm = mm,
			    .region_id = region_id,
			    .dst = dst,
			    .npages = npages,
			    .fd = fd,
			    .off0 = off0,
			    .map = wanted,
			    .map_lists_wanted = wanted != NULL,
			    .punch = punch,
			    /* nothing to put back: unregistered at once */
			    .next = fd >= 0 ? 0 : npages,
			    .slot = fd >= 0 ? layout_part_slot_take(mm) : -1};
	if (fd >= 0 && pt->slot < 0)
		pr_warn_rl(
			"pid %d: the part of region %u moved to 0x%llx has no entry in the layout journal (every one is taken): if npfd dies before it is all back, it reads zeros where it is not",
			mm->tgid, region_id, (unsigned long long)dst);
	if (punch && wanted)
		punch_unwanted(pt);
	part_journal(pt);
	list_add_tail(&pt->node, &parts);
	part_run(pt, &(unsigned int){MOVED_STEP_PAGES});
}

void moved_step(void)
{
	unsigned int budget = MOVED_STEP_PAGES;
	size_t n = 0;
	struct part *pt;

	list_for_each_entry(pt, &parts, node)
		n++;
	/* in turn, each part once: a pass that ran out begins the next where it stopped */
	while (n-- && budget && !list_empty(&parts)) {
		pt = list_entry(parts.next, struct part, node);
		list_del_init(&pt->node);
		list_add_tail(&pt->node, &parts);
		part_run(pt, &budget);
	}
}

unsigned int moved_fds(const struct npfd_mm *mm)
{
	const struct part *pt;
	unsigned int n = 0;

	list_for_each_entry(pt, &parts, node)
		n += pt->mm == mm && pt->fd >= 0;
	return n;
}

bool moved_pending(void)
{
	return !list_empty(&parts);
}

bool moved_waits(const struct npfd_mm *mm, __u64 addr, __u64 len)
{
	struct part *pt;

	list_for_each_entry(pt, &parts, node)
		if (pt->mm == mm && addr < pt->dst + (pt->npages << NPF_PAGE_SHIFT) &&
		    pt->dst < addr + len)
			return true;
	return false;
}

/*
 * Pages [lo, hi) of pt are no longer its to put back. punch: their copies
 * go too (the process dropped or unmapped them); else they went to
 * another part, which owns them now.
 */
static void part_forget(struct part *pt, __u64 lo, __u64 hi, bool punch)
{
	__u64 j;

	if (pt->map_lists_wanted) {
		/* the pages to put back there, found by the map: a part may be terabytes */
		for (j = bitmap_next(pt->map, lo, hi); j < hi;
		     j = bitmap_next(pt->map, j + 1, hi)) {
			bitmap_clear(pt->map, j);
			/*
			 * Its copy alone, not the range's: a slice moved away
			 * again owns the copies of its pages at the same
			 * offsets (part_split()), and the unmap of its old
			 * place comes here after the move. Punching the range
			 * read 4096 of 4096 pages of such a slice wrong
			 * (tests/evict_mremap_part, case 7). The store holds
			 * no copy of a page not wanted (punch_unwanted()).
			 */
			if (punch && pt->punch)
				swapstore_punch(pt->fd, pt->off0 + (j << NPF_PAGE_SHIFT));
		}
		return;
	}
	if (lo <= pt->next && hi == pt->npages) {
		pt->next = pt->npages; /* all it had left is gone: done at its next turn */
		return;
	}
	if (!pt->map && !(pt->map = bitmap_new(pt->npages))) {
		pr_err("pid %d: out of memory: pages the process unmapped or moved may be written by npfd",
		       pt->mm->tgid);
		return;
	}
	/* a file's part: its map lists the pages not to put back */
	bitmap_set_range(pt->map, lo, hi);
}

/*
 * Pages [lo, hi) of pt (not all of it) moved by delta bytes before pt had
 * put them back: they become a part of their own at the new place, with
 * what pt had left to put there (its copies, now the new part's), and pt
 * forgets them. Before, pt forgot them alone and they read zeros at the
 * new place (tests/evict_mremap_part, case 7). false: no memory or
 * descriptor for the new part.
 */
static bool part_split(struct part *pt, __u64 lo, __u64 hi, __u64 delta)
{
	struct part *np = calloc(1, sizeof(*np));
	__u64 j;

	if (!np)
		return false;
	*np = (struct part){.mm = pt->mm,
			    .region_id = pt->region_id,
			    .dst = pt->dst + (lo << NPF_PAGE_SHIFT) + delta,
			    .npages = hi - lo,
			    .fd = fcntl(pt->fd, F_DUPFD_CLOEXEC, 0),
			    .off0 = pt->off0 + (lo << NPF_PAGE_SHIFT),
			    .map_lists_wanted = pt->map_lists_wanted,
			    .punch = pt->punch,
			    /* the pages pt put back before the move moved present: not again */
			    .next = pt->next > lo ? (pt->next < hi ? pt->next : hi) - lo : 0,
			    .slot = -1};
	if (np->fd < 0 || (pt->map && !(np->map = bitmap_new(hi - lo)))) {
		if (np->fd >= 0)
			close(np->fd);
		free(np);
		return false;
	}
	for (j = bitmap_next(pt->map, lo, hi); j < hi; j = bitmap_next(pt->map, j + 1, hi))
		bitmap_set(np->map, j - lo);
	part_forget(pt, lo, hi, false);
	np->slot = layout_part_slot_take(np->mm);
	if (np->slot < 0)
		pr_warn_rl(
			"pid %d: a part moved to 0x%llx has no entry in the layout journal (every one is taken): if npfd dies before it is all back, it reads zeros where it is not",
			np->mm->tgid, (unsigned long long)np->dst);
	part_journal(np);
	/* at the tail, and never met again by the caller's walk: the ranges of one mremap never overlap */
	list_add_tail(&np->node, &parts);
	return true;
}

/*
 * Pages [lo, hi) of pt left it (unmapped or moved; the caller forgot them
 * or handed them over). Cut off at its top, pt ends at lo, and its journal
 * entry says so. A gap in its middle or at its start stays in its range:
 * splitting the rest off as a part of its own cost a descriptor per
 * munmap() of a page, which a process can make by the thousand while a
 * large part is put back, out of the descriptors npfd has for every
 * client. The entry then spans the gap. What libnpf, finishing pt after
 * npfd's death, could put there: of a store's part nothing of its own (the
 * gap's copies were punched at the unmap, or belong to the part moved away,
 * whose entry puts them at its own place), and of either kind only into
 * what is registered there -- no region (npfd refuses one over a part:
 * EBUSY), only a part the process moved into the gap itself. UFFDIO_COPY
 * fails (ENOENT) on anything else.
 */
static void part_cut(struct part *pt, __u64 lo, __u64 hi)
{
	if (hi < pt->npages)
		return;
	pt->npages = lo;
	if (pt->next > lo)
		pt->next = lo; /* nothing left: done at its next turn */
	if (pt->data_end > lo)
		pt->data_end = lo;
	part_journal(pt);
}

void moved_removed(struct npfd_mm *mm, __u64 start, __u64 end, bool unmapped)
{
	struct part *pt;

	list_for_each_entry(pt, &parts, node) {
		__u64 pend = pt->dst + (pt->npages << NPF_PAGE_SHIFT), lo, hi;

		if (pt->mm != mm || end <= pt->dst || start >= pend)
			continue;
		/* a file's page dropped reads its file again, as in a region */
		if (!pt->map_lists_wanted && !unmapped)
			continue;
		lo = ((start > pt->dst ? start : pt->dst) - pt->dst) >> NPF_PAGE_SHIFT;
		hi = end < pend ? (end - pt->dst + NPF_PAGE_SIZE - 1) >> NPF_PAGE_SHIFT :
				  pt->npages;
		part_forget(pt, lo, hi, true);
		if (unmapped)
			part_cut(pt, lo, hi);
	}
}

void moved_remapped(struct npfd_mm *mm, __u64 from, __u64 to, __u64 len)
{
	struct part *pt;

	list_for_each_entry(pt, &parts, node) {
		__u64 pend = pt->dst + (pt->npages << NPF_PAGE_SHIFT), lo, hi;

		if (pt->mm != mm || from + len <= pt->dst || from >= pend)
			continue;
		if (from <= pt->dst && pend <= from + len) {
			pt->dst += to - from;
			part_journal(pt);
			continue;
		}
		lo = ((from > pt->dst ? from : pt->dst) - pt->dst) >> NPF_PAGE_SHIFT;
		hi = from + len < pend ?
			     (from + len - pt->dst + NPF_PAGE_SIZE - 1) >> NPF_PAGE_SHIFT :
			     pt->npages;
		if (pt->fd < 0 || !part_split(pt, lo, hi, to - from)) {
			pr_err("pid %d: part of the range 0x%llx-0x%llx moved again before npfd put its pages back, and npfd cannot follow it: they read zeros there: %s",
			       mm->tgid, (unsigned long long)pt->dst, (unsigned long long)pend,
			       strerror(errno));
			part_forget(pt, lo, hi, true);
		}
		part_cut(pt, lo, hi);
	}
}

void moved_stop(void)
{
	struct part *pt, *tmp;

	/* EAGAIN for good: an mm event npfd will not read now */
	for (__u64 until = now_ns() + MOVED_STOP_NS; moved_pending() && now_ns() < until;
	     usleep(1000))
		moved_step();
	list_for_each_entry_safe(pt, tmp, &parts, node) {
		/* in the journal the process reads (libnpf): it puts back the rest itself */
		if (pt->slot >= 0 && pt->mm->layout_fd >= 0) {
			pr_warn("pid %d: npfd stops with the part of region %u moved to 0x%llx not all put back (page %llu of %llu): the process puts back the rest",
				pt->mm->tgid, pt->region_id, (unsigned long long)pt->dst,
				(unsigned long long)pt->next, (unsigned long long)pt->npages);
			part_free(pt, false);
			continue;
		}
		pr_err("pid %d: npfd stops with the part of region %u moved to 0x%llx not all put back: from page %llu of %llu on it reads zeros",
		       pt->mm->tgid, pt->region_id, (unsigned long long)pt->dst,
		       (unsigned long long)pt->next, (unsigned long long)pt->npages);
		part_done(
			pt); /* unregistered: the faults it held wake, and nothing waits for good */
	}
}

void moved_journal_all(struct npfd_mm *mm)
{
	struct part *pt;

	list_for_each_entry(pt, &parts, node)
		if (pt->mm == mm)
			part_journal(pt);
}

void moved_mm_gone(struct npfd_mm *mm)
{
	struct part *pt, *tmp;

	/* given up, or npfd stopping: the process puts back the rest (its entries stay) */
	list_for_each_entry_safe(pt, tmp, &parts, node)
		if (pt->mm == mm)
			part_free(pt, !(loop_stopping() || mm->given_up));
}
