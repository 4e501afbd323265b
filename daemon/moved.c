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
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
#include "list.h"
#include "log.h"
#include "moved.h"
#include "swapstore.h"
#include "util.h"

#define MOVED_STEP_PAGES 1024 /* put back per part per loop pass: ~2 ms of npfd's loop */
#define MOVED_STOP_NS (2ULL * 1000 * 1000 * 1000) /* npfd stops: the time left to finish */

struct part {
	struct list_head node;
	struct npfd_mm *mm;
	__u32 region_id;
	__u64 dst, npages;
	int fd;
	__u64 off0;
	/* map_lists_wanted: a set bit is a page to put back; else (a file's part) a set bit is one not to (unmapped since) */
	__u8 *map;
	bool map_lists_wanted;
	bool punch;
	__u64 next; /* the first page not looked at */
	__u64 put, failed;
};

static struct list_head parts = LIST_HEAD_INIT(parts);

static bool map_bit(const struct part *pt, __u64 j)
{
	return pt->map && (pt->map[j / 8] >> (j % 8)) & 1;
}

static bool wanted(const struct part *pt, __u64 j)
{
	return pt->map_lists_wanted ? map_bit(pt, j) : !map_bit(pt, j);
}

static void part_free(struct part *pt)
{
	list_del_init(&pt->node);
	if (pt->fd >= 0)
		close(pt->fd);
	free(pt->map);
	free(pt);
}

/* All back: the kernel serves the range now (the unregister wakes whoever waits there). */
static void part_done(struct part *pt)
{
	struct uffdio_range range = {.start = pt->dst, .len = pt->npages << NPF_PAGE_SHIFT};

	/* ENOMEM: the mm is gone, or a mapping could not be split (then it stays registered) */
	if (ioctl(pt->mm->uffd, UFFDIO_UNREGISTER, &range) && errno != ENOENT && errno != ESRCH &&
	    errno != EINVAL)
		pr_warn("pid %d: cannot unregister the part of region %u moved to 0x%llx: %s",
			pt->mm->tgid, pt->region_id, (unsigned long long)pt->dst, strerror(errno));
	if (pt->failed)
		pr_err("pid %d: %llu pages of the part of region %u moved to 0x%llx could not be put back",
		       pt->mm->tgid, (unsigned long long)pt->failed, pt->region_id,
		       (unsigned long long)pt->dst);
	pr_info("pid %d: the part of region %u moved to 0x%llx (%llu pages) is the process's own now: %llu pages put back",
		pt->mm->tgid, pt->region_id, (unsigned long long)pt->dst,
		(unsigned long long)pt->npages, (unsigned long long)pt->put);
	part_free(pt);
}

/* Page j back at its place: 0 (or nothing to put there), -EAGAIN (later), or another -errno. */
static int put_page(struct part *pt, __u64 j)
{
	static char page[NPF_PAGE_SIZE] __attribute__((aligned(NPF_PAGE_SIZE)));
	__u64 off = pt->off0 + (j << NPF_PAGE_SHIFT);
	struct uffdio_copy c = {.dst = pt->dst + (j << NPF_PAGE_SHIFT),
				.src = (__u64)(uintptr_t)page,
				.len = NPF_PAGE_SIZE};
	ssize_t got = pread(pt->fd, page, NPF_PAGE_SIZE, (off_t)off);
	int err;

	if (got <= 0)
		return got < 0 ? -errno : 0; /* past the end of the file: zeros */
	if (got < (ssize_t)NPF_PAGE_SIZE)
		memset(page + got, 0, NPF_PAGE_SIZE - (size_t)got);
	if (!ioctl(pt->mm->uffd, UFFDIO_COPY, &c)) {
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
 * 1: more to do; 0: done; -EAGAIN: refused for now; -ESRCH: the process
 * is gone. A page present at the new place (or swapped out by the kernel)
 * is not replaced: UFFDIO_COPY fails EEXIST there. A file's part reads
 * such pages for nothing; pagemap would tell, but it is region.c's, a
 * layer above.
 */
static int part_step(struct part *pt)
{
	unsigned int budget = MOVED_STEP_PAGES;

	while (pt->next < pt->npages && budget) {
		__u64 j = pt->next;
		int err;

		if (pt->map_lists_wanted && !(j % 8) && !pt->map[j / 8] && pt->npages - j >= 8) {
			pt->next += 8; /* a byte of nothing to do */
			continue;
		}
		if (!wanted(pt, j)) {
			pt->next++;
			continue;
		}
		err = put_page(pt, j);
		if (err == -EAGAIN || err == -ESRCH)
			return err;
		if (err && !pt->failed++)
			pr_err("pid %d: page 0x%llx moved out of region %u: cannot put its data back: %s",
			       pt->mm->tgid, (unsigned long long)(pt->dst + (j << NPF_PAGE_SHIFT)),
			       pt->region_id, strerror(-err));
		pt->next++;
		budget--;
	}
	return pt->next < pt->npages;
}

static void part_run(struct part *pt)
{
	int rc = part_step(pt);

	if (rc == -ESRCH)
		part_free(pt); /* the process is gone */
	else if (!rc)
		part_done(pt);
}

void moved_start(struct npfd_mm *mm, __u32 region_id, __u64 dst, __u64 npages, int fd, __u64 off0,
		 __u8 *wanted, bool punch)
{
	struct part *pt = calloc(1, sizeof(*pt));

	if (!pt) {
		pr_err("pid %d: out of memory: the part of region %u moved to 0x%llx reads zeros where npfd held its pages",
		       mm->tgid, region_id, (unsigned long long)dst);
		if (fd >= 0)
			close(fd);
		free(wanted);
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
			    .next = fd >= 0 ? 0 : npages};
	list_add_tail(&pt->node, &parts);
	part_run(pt);
}

void moved_step(void)
{
	struct part *pt, *tmp;

	list_for_each_entry_safe(pt, tmp, &parts, node)
		part_run(pt);
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

void moved_removed(struct npfd_mm *mm, __u64 start, __u64 end, bool unmapped)
{
	struct part *pt;

	list_for_each_entry(pt, &parts, node) {
		__u64 pend = pt->dst + (pt->npages << NPF_PAGE_SHIFT), j;

		if (pt->mm != mm || end <= pt->dst || start >= pend)
			continue;
		/* a file's page dropped reads its file again, as in a region */
		if (!pt->map_lists_wanted && !unmapped)
			continue;
		if (!pt->map && !(pt->map = calloc(pt->npages / 8 + 1, 1))) {
			pr_err("pid %d: out of memory: pages the process unmapped may be written by npfd",
			       mm->tgid);
			continue;
		}
		for (j = ((start > pt->dst ? start : pt->dst) - pt->dst) >> NPF_PAGE_SHIFT;
		     j < pt->npages && pt->dst + (j << NPF_PAGE_SHIFT) < end; j++) {
			if (pt->map_lists_wanted && map_bit(pt, j)) {
				pt->map[j / 8] &= (__u8) ~(1 << (j % 8));
				if (pt->punch)
					swapstore_punch(pt->fd, pt->off0 + (j << NPF_PAGE_SHIFT));
			} else if (!pt->map_lists_wanted)
				pt->map[j / 8] |= (__u8)(1 << (j % 8));
		}
	}
}

void moved_remapped(struct npfd_mm *mm, __u64 from, __u64 to, __u64 len)
{
	struct part *pt;

	list_for_each_entry(pt, &parts, node) {
		__u64 pend = pt->dst + (pt->npages << NPF_PAGE_SHIFT);

		if (pt->mm != mm || from + len <= pt->dst || from >= pend)
			continue;
		if (from <= pt->dst && pend <= from + len) {
			pt->dst += to - from;
			continue;
		}
		pr_err("pid %d: part of the range 0x%llx-0x%llx moved again before npfd put its pages back: they read zeros there",
		       mm->tgid, (unsigned long long)pt->dst, (unsigned long long)pend);
		moved_removed(mm, from, from + len, true);
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
		pr_err("pid %d: npfd stops with the part of region %u moved to 0x%llx not all put back: from page %llu of %llu on it reads zeros",
		       pt->mm->tgid, pt->region_id, (unsigned long long)pt->dst,
		       (unsigned long long)pt->next, (unsigned long long)pt->npages);
		part_done(
			pt); /* unregistered: the faults it held wake, and nothing waits for good */
	}
}

void moved_mm_gone(struct npfd_mm *mm)
{
	struct part *pt, *tmp;

	list_for_each_entry_safe(pt, tmp, &parts, node)
		if (pt->mm == mm)
			part_free(pt);
}
