// SPDX-License-Identifier: GPL-2.0
/*
 * Regions and the address spaces (userfaultfds) they live in.
 *
 * A region is registered only after every check a client could fail has
 * passed, in the order a user would want to hear about them; each refusal
 * names the region, the problem and, where there is one, the fix. The range
 * is registered with the client's userfaultfd by npfd itself (the ioctl acts
 * on the fd's own mm), so npfd's table and the kernel's always agree.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/magic.h>
#include <linux/userfaultfd.h>
#include "bitmap.h"
#include "collect.h"
#include "ids.h"
#include "layout.h"
#include "log.h"
#include "loop.h"
#include "moved.h"
#include "mmcall.h"
#include "region.h"
#include "util.h"
#include "wire_check.h"

/* Events npfd must see to keep its table true to the address space. */
#define NPF_UFFD_REQUIRED_FEATURES                                                                 \
	(UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP)

struct list_head mms = LIST_HEAD_INIT(mms);
__u32 nr_regions;
static struct region_hooks hooks;

void region_set_hooks(const struct region_hooks *h)
{
	hooks = *h;
}

static void mm_ready(void *arg)
{
	hooks.uffd_ready(arg);
}

struct npfd_mm *mm_new(int uffd, ino_t ino, pid_t tgid, struct npfd_client *owner)
{
	struct npfd_mm *mm = calloc(1, sizeof(*mm));

	if (!mm)
		return NULL;
	mm->uffd = uffd;
	mm->uffd_ino = ino;
	mm->tgid = tgid;
	mm->owner = owner;
	mm->pagemap_fd = -1;
	mm->mem_fd = -1;
	mm->layout_fd = -1;
	/* the process is there now: it is on the other end of the request */
	mm->pidfd = (int)syscall(SYS_pidfd_open, tgid, 0);
	INIT_LIST_HEAD(&mm->regions);
	mm->src = source_add(uffd, POLLIN, mm_ready, mm);
	if (mm->src < 0) {
		if (mm->pidfd >= 0)
			close(mm->pidfd);
		free(mm);
		return NULL;
	}
	list_add_tail(&mm->node, &mms);
	return mm;
}

/* ---- the layout journal (npf_abi.h NPF_MSG_LAYOUT) ---- */

_Static_assert(NPF_MAX_RANGES_PER_PROC <= 32, "a region's journal slot is a bit of a __u32");

/* r was registered, moved or cut: its process reads where it is now. */
static void layout_put(struct npfd_region *r)
{
	struct npf_layout_entry e = {.region_id = r->id,
				     .start = r->start,
				     .length = r->length,
				     .offset = r->file_offset};

	layout_write(r->mm, r->layout_slot, &e);
}

int mm_layout_reader(struct npfd_mm *mm, char *err, size_t errlen)
{
	struct npfd_region *r;
	char path[32];
	int fd;

	if (mm->layout_fd < 0) {
		fd = (int)syscall(SYS_memfd_create, "npf-layout", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		/*
		 * Read-only for the process, whose /proc/PID/fd link could open
		 * it again for writing were its mode to allow it; sealed, so
		 * that it can neither shrink it under npfd nor seal npfd out.
		 */
		if (fd < 0 || ftruncate(fd, (off_t)LAYOUT_SIZE) || fchmod(fd, 0444) ||
		    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
			int e = errno;

			if (fd >= 0)
				close(fd);
			return refuse(err, errlen, e, "cannot make a layout journal: %s",
				      strerror(e));
		}
		mm->layout_fd = fd;
		list_for_each_entry(r, &mm->regions, node)
			layout_put(r);
		moved_journal_all(mm);
	}
	snprintf(path, sizeof(path), "/proc/thread-self/fd/%d", mm->layout_fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return refuse(err, errlen, errno, "cannot open the layout journal read-only: %s",
			      strerror(errno));
	return fd;
}

/*
 * Unregister [start, end) but its holes (a region registered there stays
 * registered). Also wakes any thread still waiting there. ENOMEM means
 * the mm is gone (the process exited): nothing left to undo. Other
 * failures are logged for region id (0: a refused registration, quiet).
 */
static void unregister_pieces(pid_t tgid, int uffd, __u64 start, __u64 end,
			      const struct holes *holes, __u32 id)
{
	__u64 lo, pe;

	/* a stuck process's are made once it is served again, before anything else */
	for (lo = start; holes_piece(holes, &lo, end, &pe); lo = pe)
		if (mmcall_unregister(tgid, uffd, lo, pe - lo) && id && errno != ENOENT &&
		    errno != ESRCH && errno != EINVAL && errno != ENOMEM)
			pr_warn("region %u: UFFDIO_UNREGISTER failed: %s", id, strerror(errno));
}

/*
 * Take r out of service and free it. Its devices are retired first (their
 * entries cleared, the invalidation posted): w, if any, is answered when
 * they acknowledge. Nothing here waits, so nothing can free r meanwhile.
 */
static void region_drop(struct npfd_region *r, bool unregister_range, struct npfd_wait *w)
{
	struct npfd_mm *mm = r->mm;
	/* given up (mmcall.h): as when npfd stops, for this process alone */
	bool stopping = loop_stopping() || mm->given_up;

	if (unregister_range)
		unregister_pieces(mm->tgid, mm->uffd, r->start, r->start + r->length, &r->holes,
				  r->id);
	/*
	 * What is above hears of it while r is still whole (main.c:
	 * region_going(): its devices first, no DMA may reach the pages once
	 * they are not served). Whether its process still runs matters only
	 * when the range was unregistered and npfd is not stopping.
	 */
	if (hooks.going)
		hooks.going(r, stopping, !stopping && unregister_range && mm_alive(mm), w);
	/* npfd stopping: the entry stays, for the process to hand the region to the next one */
	if (!stopping)
		layout_write(mm, r->layout_slot, &(struct npf_layout_entry){0});
	mm->layout_slots &= ~(1U << r->layout_slot);
	list_del_init(&r->node);
	mm->nr_regions--;
	nr_regions--;
	collect_slot_free(r);
	if (mm->tgid && collect_filter_update(mm->tgid, mm))
		pr_warn("region %u: cannot update the fault filter of pid %d", r->id, mm->tgid);
	/* given up: a late install from the file may still read it (mmcall.h) */
	if (r->map && mm->given_up)
		buffer_retire((void *)r->map, r->map_length);
	else if (r->map)
		munmap((void *)r->map, r->map_length);
	if (r->file_fd >= 0)
		close(r->file_fd);
	pr_debug("region %u removed", r->id);
	holes_free(&r->holes);
	bitmap_free(r->installed);
	free(r);
}

void region_remove(struct npfd_region *r, bool unregister_range)
{
	region_drop(r, unregister_range, NULL);
}

void mm_destroy(struct npfd_mm *mm, bool unregister_ranges)
{
	struct npfd_region *r, *tmp;

	if (mm->dead)
		return;
	mm->dead = true;
	if (hooks.mm_going)
		hooks.mm_going(mm);
	list_for_each_entry_safe(r, tmp, &mm->regions, node)
		region_remove(r, unregister_ranges);
	if (hooks.mm_gone)
		hooks.mm_gone(mm);
	moved_mm_gone(mm);
	collect_filter_remove(mm->tgid);
	collect_nic_uprobe_put(mm);
	source_del(mm->src);
	if (mm->pagemap_fd >= 0)
		close(mm->pagemap_fd);
	if (mm->mem_fd >= 0)
		close(mm->mem_fd);
	if (mm->layout_fd >= 0)
		close(mm->layout_fd);
	if (mm->pidfd >= 0)
		close(mm->pidfd);
	/*
	 * Closing the last reference wakes every thread still blocked on it,
	 * and takes the process's mmap_lock, which a client may hold as long
	 * as it likes: off the loop.
	 */
	mmcall_close(mm->tgid, mm->uffd);
	if (mm->owner && mm->owner->mm == mm)
		mm->owner->mm = NULL;
	list_del_init(&mm->node);
	free(mm);
}

struct npfd_region *mm_find_region(struct npfd_mm *mm, __u64 addr)
{
	struct npfd_region *r;

	/* a part moved into a hole a region keeps is not the region's (moved.c) */
	if (moved_waits(mm, addr, NPF_PAGE_SIZE))
		return NULL;
	list_for_each_entry(r, &mm->regions, node)
		if (addr >= r->start && addr - r->start < r->length &&
		    !holes_contain(&r->holes, addr))
			return r;
	return NULL;
}

struct npfd_region *region_find_id(__u32 id)
{
	struct npfd_mm *mm;
	struct npfd_region *r;

	list_for_each_entry(mm, &mms, node)
		list_for_each_entry(r, &mm->regions, node)
			if (r->id == id)
				return r;
	return NULL;
}

void region_info(const struct npfd_region *r, struct npf_region_info *out)
{
	memset(out, 0, sizeof(*out));
	out->region_id = r->id;
	out->tgid = (__u32)r->mm->tgid;
	out->start = r->start;
	out->length = r->length;
	out->file_offset = r->file_offset;
	out->backing = r->backing;
	memcpy(out->name, r->name, sizeof(out->name));
}

/* Is fd a userfaultfd, and with which features did its owner call UFFDIO_API? */
static int uffd_features(int fd, __u64 *features)
{
	char path[64], buf[512];
	unsigned long long api, feat;
	ssize_t n;
	char *p;
	int f;

	snprintf(path, sizeof(path), "/proc/thread-self/fd/%d", fd);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	if (strcmp(buf, "anon_inode:[userfaultfd]"))
		return -ENOTTY;
	snprintf(path, sizeof(path), "/proc/thread-self/fdinfo/%d", fd);
	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -errno;
	n = read(f, buf, sizeof(buf) - 1);
	close(f);
	if (n < 0)
		return -EIO;
	buf[n] = '\0';
	p = strstr(buf, "API:\t");
	if (!p || sscanf(p, "API:\t%llx:%llx", &api, &feat) != 2)
		return -EIO;
	*features = api ? feat : 0;
	return api ? 0 : -EBADFD;
}

/*
 * Did registering [start, end) through the passed userfaultfd mark pid's own
 * VMAs ("um" in smaps VmFlags: userfaultfd missing)? A userfaultfd acts on
 * the mm that created it, so this proves the fd is pid's and not another
 * process's handed over to it. VMAs wholly in holes were not registered.
 * 1 yes, 0 no, -errno: smaps could not be read.
 */
static int registered_in(pid_t pid, __u64 start, __u64 end, const struct holes *holes)
{
	char path[64], *line = NULL;
	bool in_range = false, ok = true;
	size_t cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	f = mmcall_fopen(pid, path);
	if (!f)
		return -errno;
	/*
	 * Whole lines (getline): a mapping's file name is the client's, and
	 * one longer than a fixed buffer went on in a "line" of its own, which
	 * could read as a VMA or as its flags (review).
	 */
	while (ok && getline(&line, &cap, f) > 0) {
		unsigned long long lo, hi;

		/* Only a VMA header line parses as "lo-hi". */
		if (sscanf(line, "%llx-%llx", &lo, &hi) == 2) {
			in_range =
				hi > start && lo < end &&
				!holes_cover(holes, lo > start ? lo : start, hi < end ? hi : end);
			continue;
		}
		if (in_range && !strncmp(line, "VmFlags:", 8))
			ok = strstr(line, " um") != NULL;
	}
	free(line);
	fclose(f);
	return ok ? 1 : 0;
}

/*
 * Is the mapping lo-hi (a line of /proc/PID/maps or smaps: permissions,
 * inode, name) private anonymous memory, the only kind npf serves? If not,
 * what it is, in what.
 */
static bool private_anon(unsigned long long lo, unsigned long long hi, const char *perms,
			 unsigned long long ino, const char *name, char *what, size_t whatlen)
{
	while (*name == ' ')
		name++;
	if (ino == 0 && perms[3] == 'p' && (!*name || !strcmp(name, "[heap]")))
		return true;
	snprintf(what, whatlen, "0x%llx-0x%llx is not private anonymous memory (%s mapping%s%s)",
		 lo, hi, perms[3] == 's' ? "a shared" : "a private", *name ? " of " : "", name);
	return false;
}

/*
 * Is [start, end) entirely private anonymous memory of pid? Returns 0, or
 * -ENOMEM (a hole) or -EACCES (a mapping npf cannot serve), with `what`
 * describing the offending mapping.
 */
static int check_mapped_anon(pid_t pid, __u64 start, __u64 end, char *what, size_t whatlen)
{
	char path[64], *line = NULL;
	__u64 covered = start;
	size_t cap = 0;
	FILE *f;
	int ret = -ENOMEM;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = mmcall_fopen(pid, path);
	if (!f) {
		snprintf(what, whatlen, "cannot read %s: %s", path, strerror(errno));
		return -ESRCH;
	}
	snprintf(what, whatlen, "nothing is mapped at 0x%llx", (unsigned long long)start);
	/* whole lines: a file name longer than a buffer must not read as a mapping (above) */
	while (getline(&line, &cap, f) > 0) {
		unsigned long long lo, hi, ino;
		char perms[8], name[256] = "";

		if (sscanf(line, "%llx-%llx %7s %*s %*s %llu %255[^\n]", &lo, &hi, perms, &ino,
			   name) < 4)
			continue;
		if (hi <= covered || lo >= end)
			continue;
		if (lo > covered) {
			snprintf(what, whatlen, "nothing is mapped at 0x%llx", covered);
			break;
		}
		if (!private_anon(lo, hi, perms, ino, name, what, whatlen)) {
			ret = -EACCES;
			break;
		}
		covered = hi;
		if (covered >= end) {
			ret = 0;
			break;
		}
	}
	free(line);
	fclose(f);
	return ret;
}

/*
 * An adopted range [start, end) of pid: the parts still registered with a
 * userfaultfd ("um" in smaps VmFlags) must be private anonymous memory;
 * the rest are holes -- unmapped from the region's middle while the
 * earlier npfd served it (the layout journal has no holes), maybe with a
 * mapping of the process's own there since -- and go to *holes. Another
 * region of the process inside [start, end) looks registered here: the
 * caller makes it a hole (adopted_nesting()). A region never starts or
 * ends with a hole (mm_unmapped()): one that does is refused. 0, or
 * -ENOENT / -EACCES / -ENOSPC / -ESRCH with what was wrong in what.
 */
static int check_adopted(pid_t pid, __u64 start, __u64 end, struct holes *holes, char *what,
			 size_t whatlen)
{
	unsigned long long lo = 0, hi = 0, ino = 0;
	char path[64], *line = NULL, perms[8] = "", name[256] = "";
	size_t cap = 0;
	__u64 covered = start;
	int ret = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	f = mmcall_fopen(pid, path);
	if (!f) {
		snprintf(what, whatlen, "cannot read %s: %s", path, strerror(errno));
		return -ESRCH;
	}
	/* whole lines: a long file name must not split one into a line that reads as a VMA */
	while (!ret && covered < end && getline(&line, &cap, f) > 0) {
		unsigned long long l, h, i;
		char p[8], n[256] = "";

		/* a VMA's header line, then its fields; VmFlags comes last */
		if (sscanf(line, "%llx-%llx %7s %*s %*s %llu %255[^\n]", &l, &h, p, &i, n) >= 4) {
			lo = l, hi = h, ino = i;
			memcpy(perms, p, sizeof(perms));
			memcpy(name, n, sizeof(name));
			continue;
		}
		if (strncmp(line, "VmFlags:", 8) || hi <= covered || lo >= end ||
		    !strstr(line, " um"))
			continue;
		if (lo > covered) {
			if (covered == start) {
				ret = -ENOENT;
				break;
			}
			ret = holes_add(holes, covered, lo);
		}
		if (!ret && !private_anon(lo, hi, perms, ino, name, what, whatlen))
			ret = -EACCES;
		covered = hi;
	}
	free(line);
	fclose(f);
	if (!ret && covered < end)
		ret = -ENOENT;
	if (ret == -ENOENT)
		snprintf(
			what, whatlen,
			"0x%llx is no longer registered with a userfaultfd: unmapped or unregistered while npfd was away",
			(unsigned long long)(covered == start ? start : covered));
	else if (ret == -ENOSPC || ret == -ENOMEM)
		snprintf(what, whatlen, "it has more holes than npfd keeps (%d)", HOLES_MAX);
	if (ret)
		holes_free(holes);
	return ret;
}

/* Is [start, end) strictly inside r's range (neither end on r's), where only a hole of r can be? */
static bool inside(__u64 start, __u64 end, const struct npfd_region *r)
{
	return start > r->start && end < r->start + r->length;
}

static int region_hole_add(struct npfd_region *r, __u64 lo, __u64 hi);
static void region_dropped(struct npfd_region *r, __u64 start, __u64 end);

/*
 * Adopted r and the process's other regions: one inside another's range
 * is in a hole of it that the earlier npfd kept and the layout journal
 * does not hold (check_adopted() sees the inner one registered), in
 * whichever order libnpf hands them over. What the outer one counted
 * there is dropped: those pages are the inner one's. 0, or -ENOSPC.
 */
static int adopted_nesting(struct npfd_region *r)
{
	__u64 re = r->start + r->length, lo, pe;
	struct npfd_region *it;

	list_for_each_entry(it, &r->mm->regions, node) {
		__u64 ie = it->start + it->length;
		struct npfd_region *outer = it, *inner = r;

		if (it == r)
			continue;
		if (inside(it->start, ie, r))
			outer = r, inner = it;
		else if (!inside(r->start, re, it))
			continue;
		if (holes_cover(&outer->holes, inner->start, inner->start + inner->length))
			continue;
		lo = inner->start;
		for (; holes_piece(&outer->holes, &lo, inner->start + inner->length, &pe); lo = pe)
			region_dropped(outer, lo, pe);
		if (region_hole_add(outer, inner->start, inner->start + inner->length))
			return -ENOSPC;
		collect_filter_update(r->mm->tgid, r->mm);
	}
	return 0;
}

static bool overlaps(const struct npfd_region *r, __u64 start, __u64 len)
{
	return start < r->start + r->length && r->start < start + len;
}

/*
 * Check the userfaultfd a request carries. The connection adopts it only
 * once a region registered through it has been proven to be the sender's
 * own memory (registered_in()).
 */
static int check_uffd(struct npfd_client *c, int uffd, ino_t *ino, char *err, size_t errlen)
{
	__u64 features = 0;
	struct stat st;
	int ret;

	ret = uffd_features(uffd, &features);
	if (ret == -ENOTTY)
		return refuse(err, errlen, EBADF,
			      "the descriptor passed as the userfaultfd is not a userfaultfd");
	if (ret == -EBADFD)
		return refuse(err, errlen, EINVAL,
			      "the userfaultfd has not been initialised with UFFDIO_API");
	if (ret)
		return refuse(err, errlen, -ret, "cannot inspect the userfaultfd: %s",
			      strerror(-ret));
	if ((features & NPF_UFFD_REQUIRED_FEATURES) != NPF_UFFD_REQUIRED_FEATURES)
		return refuse(
			err, errlen, EINVAL,
			"the userfaultfd lacks features npfd needs (EVENT_REMAP, EVENT_REMOVE, EVENT_UNMAP): got 0x%llx",
			(unsigned long long)features);
	/* a child's copies register themselves (npf_abi.h NPF_MSG_FORK_PREPARE) */
	if (features & UFFD_FEATURE_EVENT_FORK)
		return refuse(
			err, errlen, EINVAL,
			"the userfaultfd follows fork() (EVENT_FORK), which npfd does not: a forked child registers its copies of the regions itself (NPF_MSG_REGION_FORKED)");
	if (fstat(uffd, &st))
		return refuse(err, errlen, errno, "cannot stat the userfaultfd: %s",
			      strerror(errno));
	if (c->mm && c->mm->uffd_ino != st.st_ino)
		return refuse(
			err, errlen, EINVAL,
			"this connection already registered regions with another userfaultfd; use one per connection");
	*ino = st.st_ino;
	return 0;
}

/*
 * An adopting client whose userfaultfd this npfd already serves through
 * another connection (libnpf gave up on a connection to a stopped npfd and
 * made a new one): the address space moves to the new connection, so that
 * the old one's end does not unregister ranges the client still uses.
 */
static struct npfd_mm *mm_hand_over(struct npfd_client *c, ino_t ino)
{
	struct npfd_mm *mm;

	list_for_each_entry(mm, &mms, node) {
		if (mm->dead || mm->uffd_ino != ino || mm->tgid != c->pid)
			continue;
		if (mm->owner && mm->owner != c && mm->owner->mm == mm)
			mm->owner->mm = NULL;
		mm->owner = c;
		c->mm = mm;
		pr_info("pid %d: its address space moves to its new connection", c->pid);
		return mm;
	}
	return NULL;
}

static int adopt_uffd(struct npfd_client *c, int uffd, ino_t ino, char *err, size_t errlen)
{
	if (fcntl(uffd, F_SETFL, O_NONBLOCK))
		return refuse(err, errlen, errno, "cannot make the userfaultfd non-blocking: %s",
			      strerror(errno));
	c->mm = mm_new(uffd, ino, c->pid, c);
	if (!c->mm)
		return refuse(err, errlen, ENOMEM, "out of memory or event sources");
	c->mm->uid = c->uid;
	return 0;
}

/*
 * Is fd a file npfd can read [off, off + len) of, now? A descriptor npfd
 * cannot read would make every fault of the region fail; refuse it here with
 * the reason rather than at the first touch. Block devices have no st_size:
 * their end is checked by a read of the region's last page.
 */
/* Is dev the device of a mount in npfd's own mount namespace? */
static bool mount_visible(dev_t dev)
{
	unsigned int major, minor;
	bool found = false;
	char *line = NULL;
	size_t cap = 0;
	FILE *f = fopen("/proc/thread-self/mountinfo", "re");

	/* whole lines: a mount point's path is a user's to choose, and may be long */
	while (f && !found && getline(&line, &cap, f) > 0)
		found = sscanf(line, "%*d %*d %u:%u", &major, &minor) == 2 &&
			makedev(major, minor) == dev;
	free(line);
	if (f)
		fclose(f);
	return found;
}

/*
 * Is fd on a FUSE mount of npfd's own mount namespace, by its mount's
 * type in mountinfo (which asks no server)? Such a mount may be one npfd
 * is allowed to use (a user's `allow_other` mount): then its fstat() and
 * fstatfs() below would send the server a GETATTR and a STATFS from the
 * loop. A mount of another namespace is not listed; one made in a user
 * namespace answers them at once without asking its server.
 */
static bool on_visible_fuse(int fd)
{
	char path[64], *line = NULL, *p;
	int mnt_id = -1, id;
	bool fuse = false;
	size_t cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/thread-self/fdinfo/%d", fd);
	f = fopen(path, "re");
	while (f && getline(&line, &cap, f) > 0)
		if (sscanf(line, "mnt_id: %d", &id) == 1)
			mnt_id = id;
	if (f)
		fclose(f);
	f = mnt_id < 0 ? NULL : fopen("/proc/thread-self/mountinfo", "re");
	/* whole lines: a mount point's path is a user's to choose, and may be long */
	while (f && getline(&line, &cap, f) > 0) {
		if (sscanf(line, "%d", &id) != 1 || id != mnt_id)
			continue;
		p = strstr(line, " - ");
		fuse = p && !strncmp(p + 3, "fuse", 4);
		break;
	}
	free(line);
	if (f)
		fclose(f);
	return fuse;
}

/*
 * npfd reads backing files from its event loop, so a read that never
 * completes stalls every client. A file system whose reads another
 * process answers (FUSE: any user may mount one in a user namespace of
 * its own) is refused; so is an overlay mounted where npfd cannot see it
 * (a user namespace's: its lower layer may be such a file system). Found
 * by an adversarial review.
 */
/* What check_backing_fs() asks of a file, on mmcall.c's worker. */
struct backing_fs {
	__s64 f_type;
	__u32 dev_major, dev_minor;
};

static long backing_fs_ask(int fd, void *arg)
{
	struct backing_fs *b = arg;
	struct statfs sfs;
	struct statx sx;

	/*
	 * Its device from what the kernel has cached (DONT_SYNC asks no
	 * server): on an overlay a user mounted over its own FUSE, an fstat()
	 * is made with the mounter's credentials, and sends GETATTR.
	 */
	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &sx) || fstatfs(fd, &sfs))
		return -1;
	b->f_type = (__s64)sfs.f_type;
	b->dev_major = sx.stx_dev_major;
	b->dev_minor = sx.stx_dev_minor;
	return 0;
}

/*
 * The file system of tgid's backing file. Asked on mmcall.c's worker: a
 * FUSE mount npfd may use that its mountinfo does not list (another mount
 * namespace's, or one unmounted lazily while the file stays open) answers
 * fstatfs() only when its server does (adversarial probe: the loop waited
 * 14 s, until the connection was aborted).
 */
static int check_backing_fs(pid_t tgid, int fd, char *err, size_t errlen)
{
	struct backing_fs b = {0};

	if (mmcall_run(tgid, fd, backing_fs_ask, NULL, &b, sizeof(b)))
		return refuse(
			err, errlen, errno, "cannot stat the backing file's file system: %s%s",
			strerror(errno),
			errno == ETIMEDOUT ? " (it did not answer within mm-call-timeout-ms)" : "");
	if (b.f_type == FUSE_SUPER_MAGIC)
		return refuse(
			err, errlen, EXDEV,
			"the backing file is on a FUSE file system, whose reads another process answers: npfd would wait for it with every other client");
	if (b.f_type == OVERLAYFS_SUPER_MAGIC && !mount_visible(makedev(b.dev_major, b.dev_minor)))
		return refuse(
			err, errlen, EXDEV,
			"the backing file is on an overlay mounted outside npfd's mount namespace: its layers could be a file system whose reads another process answers");
	return 0;
}

static int check_backing(pid_t tgid, int fd, __u64 off, __u64 len, char *err, size_t errlen)
{
	int mode = fcntl(fd, F_GETFL), ret;
	/* page-aligned, as an O_DIRECT descriptor needs its buffer (npfd is one thread) */
	static char page[NPF_PAGE_SIZE] __attribute__((aligned(NPF_PAGE_SIZE)));
	__u64 end;
	struct stat st;

	if (__builtin_add_overflow(off, len, &end) || end > (__u64)INT64_MAX)
		return refuse(err, errlen, EOVERFLOW,
			      "file offset %llu + length %llu is past the largest file offset",
			      (unsigned long long)off, (unsigned long long)len);
	if (mode < 0)
		return refuse(err, errlen, EBADF, "cannot inspect the backing file: %s",
			      strerror(errno));
	if (mode & O_PATH)
		return refuse(err, errlen, EBADF,
			      "the backing file was opened with O_PATH: open it O_RDONLY");
	if ((mode & O_ACCMODE) == O_WRONLY)
		return refuse(err, errlen, EBADF,
			      "the backing file is open write-only: open it O_RDONLY or O_RDWR");
	if (on_visible_fuse(fd))
		return refuse(
			err, errlen, EXDEV,
			"the backing file is on a FUSE file system, whose reads another process answers: npfd would wait for it with every other client");
	/* its file system first: an fstat() there could ask a server */
	ret = check_backing_fs(tgid, fd, err, errlen);
	if (ret)
		return ret;
	if (fstat(fd, &st))
		return refuse(err, errlen, errno, "cannot stat the backing file: %s",
			      strerror(errno));
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		return refuse(err, errlen, EINVAL,
			      "the backing descriptor is not a regular file or block device");
	if (S_ISREG(st.st_mode) && (__u64)st.st_size < end)
		return refuse(
			err, errlen, EINVAL,
			"the backing file is shorter than the region: %lld bytes, the region needs %llu (offset %llu + length %llu)",
			(long long)st.st_size, (unsigned long long)end, (unsigned long long)off,
			(unsigned long long)len);
	errno = 0;
	/* The whole last page: off and len are page-aligned, so O_DIRECT can read it too. */
	if (pread(fd, page, NPF_PAGE_SIZE, (off_t)(end - NPF_PAGE_SIZE)) != NPF_PAGE_SIZE)
		return refuse(
			err, errlen, EIO,
			"cannot read the backing file's last page of the region (offset %llu): %s",
			(unsigned long long)(end - NPF_PAGE_SIZE),
			errno ? strerror(errno) : "end of file");
	return 0;
}

bool mm_alive(const struct npfd_mm *mm)
{
	struct pollfd p = {.fd = mm->pidfd, .events = POLLIN};

	return mm->pidfd < 0 || poll(&p, 1, 0) == 0;
}

int mm_open_proc(const struct npfd_mm *mm, const char *file, int flags)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", mm->tgid, file);
	fd = mmcall_open(mm->tgid, path, flags);
	if (fd < 0 && errno == EACCES) {
		/* pagemap and mem are mode 0600, the process's owner's */
		pr_warn_rl(
			"cannot open %s: %s: npfd needs CAP_DAC_OVERRIDE and CAP_SYS_PTRACE for another user's process (to evict its pages, and to check them for its devices)",
			path, strerror(errno));
		errno = EACCES;
	}
	if (fd >= 0 && !mm_alive(mm)) {
		close(fd);
		errno = ESRCH;
		return -1;
	}
	return fd;
}

/* /proc/PID/pagemap, opened once: the descriptor stays with the process it was opened for */
static int mm_pagemap_fd(struct npfd_mm *mm)
{
	if (mm->pagemap_fd < 0)
		mm->pagemap_fd = mm_open_proc(mm, "pagemap", O_RDONLY);
	return mm->pagemap_fd;
}

bool mm_pagemap_read(struct npfd_mm *mm, __u64 va, __u64 *ent, __u64 n)
{
	int fd = mm_pagemap_fd(mm);

	return fd >= 0 && mmcall_pread(mm->tgid, fd, ent, n * sizeof(__u64),
				       (off_t)((va >> NPF_PAGE_SHIFT) * sizeof(__u64))) ==
				  (ssize_t)(n * sizeof(__u64));
}

bool mm_pagemap_read_now(struct npfd_mm *mm, __u64 va, __u64 *ent, __u64 n)
{
	int fd = mm_pagemap_fd(mm);

	return fd >= 0 && mmcall_pread_now(mm->tgid, fd, ent, n * sizeof(__u64),
					   (off_t)((va >> NPF_PAGE_SHIFT) * sizeof(__u64))) ==
				  (ssize_t)(n * sizeof(__u64));
}

bool mm_pagemap_read_pages(struct npfd_mm *mm, const __u64 *page, unsigned int n, __u64 *ent,
			   __u64 unknown)
{
	struct mmcall_read *rd = n ? malloc(n * sizeof(*rd)) : NULL;
	unsigned int i, j, k, nrd = 0;
	int fd = mm_pagemap_fd(mm);

	for (i = 0; i < n; i++)
		ent[i] = unknown;
	if (!rd || fd < 0) {
		free(rd);
		return false;
	}
	/* a read per run of adjacent pages */
	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && page[j] == page[j - 1] + NPF_PAGE_SIZE; j++)
			;
		rd[nrd++] = (struct mmcall_read){
			.off = (page[i] >> NPF_PAGE_SHIFT) * sizeof(__u64),
			.len = (j - i) * sizeof(__u64),
			.dst = &ent[i],
		};
	}
	if (mmcall_preadv(mm->tgid, fd, rd, nrd)) {
		free(rd);
		return false;
	}
	/* what a read did not cover stays unknown: mmcall_preadv() copied only what came */
	for (k = 0; k < nrd; k++) {
		__u64 *e = rd[k].dst, have = rd[k].got > 0 ? (__u64)rd[k].got / sizeof(__u64) : 0;

		for (i = (unsigned int)have; i < rd[k].len / sizeof(__u64); i++)
			e[i] = unknown;
	}
	free(rd);
	return true;
}

int mm_mem_readv(struct npfd_mm *mm, struct mmcall_read *rd, unsigned int n)
{
	unsigned int i;

	if (mm_mem_fd(mm) < 0)
		return -1;
	for (i = 0; i < n; i++)
		/* an address past the off_t range is no page of the process's */
		if (rd[i].off > (__u64)INT64_MAX || rd[i].len > (__u64)INT64_MAX - rd[i].off) {
			errno = EFAULT;
			return -1;
		}
	if (mmcall_preadv(mm->tgid, mm->mem_fd, rd, n))
		return -1;
	for (i = 0; i < n; i++)
		if (rd[i].got == 0 && rd[i].len) {
			rd[i].got = -1;
			rd[i].err = ESRCH; /* its mm is gone */
		}
	return 0;
}

int mm_mem_fd(struct npfd_mm *mm)
{
	if (mm->mem_fd < 0)
		mm->mem_fd = mm_open_proc(mm, "mem", O_RDWR);
	return mm->mem_fd;
}

/*
 * Not process_vm_readv()/process_vm_writev(): they fault a missing page in
 * the way a user fault would (FAULT_FLAG_ALLOW_RETRY), and a page the
 * process registered with a userfaultfd of its own that handles kernel
 * faults (vm.unprivileged_userfaultfd=1, or CAP_SYS_PTRACE) holds the
 * caller until the process answers: npfd, every client, for as long as it
 * likes. A victim is present when npfd reads it, but its mapping can be
 * replaced under npfd by another of its threads (munmap, mmap, register)
 * between the pagemap read and the copy. /proc/PID/mem faults through
 * access_remote_vm() without ALLOW_RETRY, and handle_userfault() fails
 * such a fault at once (SIGBUS: EIO here) instead of waiting
 * (tests/unit/mem_rw.c). The descriptor stays with the mm it was opened
 * for: a reused pid cannot redirect it (and once that mm is gone it reads
 * 0 bytes). It writes with FOLL_FORCE, as a debugger does: the put-back
 * can restore a page the process has since made read-only. It still waits
 * where any fault would: a file mapping on a FUSE server that does not
 * answer, the process's mmap_lock (mmcall.c bounds how long npfd waits).
 */
ssize_t mm_mem_rw(struct npfd_mm *mm, __u64 va, void *buf, size_t len, bool write)
{
	ssize_t n;

	if (mm_mem_fd(mm) < 0)
		return -1;
	/* an address past the off_t range is no page of the process's */
	if (va > (__u64)INT64_MAX || len > (__u64)INT64_MAX - va) {
		errno = EFAULT;
		return -1;
	}
	/* one call: it stops only at a page that failed, and a second would fail there too */
	n = write ? mmcall_pwrite(mm->tgid, mm->mem_fd, buf, len, (off_t)va) :
		    mmcall_pread(mm->tgid, mm->mem_fd, buf, len, (off_t)va);
	if (n == 0 && len) {
		errno = ESRCH; /* its mm is gone */
		return -1;
	}
	return n;
}

/* PAGEMAP_SCAN (Linux 6.7, linux/fs.h): Debian 12's headers predate it */
#ifndef PAGEMAP_SCAN
struct page_region {
	__u64 start;
	__u64 end;
	__u64 categories;
};

struct pm_scan_arg {
	__u64 size;
	__u64 flags;
	__u64 start;
	__u64 end;
	__u64 walk_end;
	__u64 vec;
	__u64 vec_len;
	__u64 max_pages;
	__u64 category_inverted;
	__u64 category_mask;
	__u64 category_anyof_mask;
	__u64 return_mask;
};

#define PAGE_IS_WRITTEN (1 << 1)
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_PFNZERO (1 << 5)
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif

/*
 * A scan's find [lo, hi) handed on without what lies in r's holes: pages
 * there are another mapping's, or another region's (adopted_holes()).
 */
static void found_outside_holes(struct npfd_region *r, __u64 lo, __u64 hi, region_scan_fn found,
				void *arg)
{
	__u64 pe;

	for (; holes_piece(&r->holes, &lo, hi, &pe); lo = pe)
		found(r, lo, (pe - lo) >> NPF_PAGE_SHIFT, arg);
}

/*
 * The pages of r that are present (and, wp_only, still write-protected by
 * its userfaultfd: not written since), handed to found() in ranges.
 * PAGEMAP_SCAN hands out the matching ranges and skips page tables that
 * were never filled, so a sparse region costs what it holds, not its
 * length (read through pagemap, 2^32 entries of a 16 TiB region are 32 GiB
 * of reads, minutes in which npfd answers nobody). -errno if the kernel
 * has no PAGEMAP_SCAN (ENOTTY) or it fails.
 */
static int scan_pagemap_scan(struct npfd_region *r, bool wp_only, bool not_zero,
			     region_scan_fn found, void *arg)
{
	struct page_region vec[256];
	__u64 want = PAGE_IS_PRESENT | (wp_only ? PAGE_IS_WRITTEN : 0);
	__u64 inverted = (wp_only ? PAGE_IS_WRITTEN : 0) | (not_zero ? PAGE_IS_PFNZERO : 0);
	struct pm_scan_arg a = {.size = sizeof(a),
				.start = r->start,
				.end = r->start + r->length,
				.vec = (__u64)(uintptr_t)vec,
				.vec_len = sizeof(vec) / sizeof(vec[0]),
				.category_inverted = inverted,
				.category_mask = want | (not_zero ? PAGE_IS_PFNZERO : 0),
				.return_mask = want};
	int fd = mm_pagemap_fd(r->mm);

	if (fd < 0)
		return -errno;
	while (a.start < a.end) {
		long n = mmcall_ioctl_out(r->mm->tgid, fd, PAGEMAP_SCAN, &a, sizeof(a),
					  offsetof(struct pm_scan_arg, vec), sizeof(vec)),
		     i;

		if (n < 0)
			return -errno;
		for (i = 0; i < n; i++) {
			__u64 lo = vec[i].start < r->start ? r->start : vec[i].start;
			__u64 hi = vec[i].end > a.end ? a.end : vec[i].end;

			if (lo < hi)
				found_outside_holes(r, lo, hi, found, arg);
		}
		if (a.walk_end <= a.start)
			return -EIO; /* no progress: never loop on it */
		a.start = a.walk_end;
	}
	return 0;
}

int region_scan_present(struct npfd_region *r, bool wp_only, region_scan_fn found, void *arg)
{
	__u64 ent[512], i, j, n, npages = r->length >> NPF_PAGE_SHIFT;
	int err = scan_pagemap_scan(r, wp_only, false, found, arg);

	if (!err)
		return 0;
	if (err != -ENOTTY && err != -EINVAL)
		pr_warn("region %u: PAGEMAP_SCAN of pid %d failed: %s (its pagemap is read instead)",
			r->id, r->mm->tgid, strerror(-err));
	/* entry by entry: bit 63 present, bit 57 write-protected by a userfaultfd */
	for (i = 0; i < npages; i += n) {
		n = npages - i < 512 ? npages - i : 512;
		errno = 0;
		if (!mm_pagemap_read(r->mm, r->start + i * NPF_PAGE_SIZE, ent, n))
			return errno ? -errno : -EIO; /* a short read sets none */
		for (j = 0; j < n; j++)
			if (ent[j] >> 63 && (!wp_only || (ent[j] >> 57 & 1)))
				found_outside_holes(r, r->start + (i + j) * NPF_PAGE_SIZE,
						    r->start + (i + j + 1) * NPF_PAGE_SIZE, found,
						    arg);
	}
	return 0;
}

static void found_present(struct npfd_region *r, __u64 start, __u64 npages, void *arg)
{
	region_mark_installed(r, start, npages);
	*(__u64 *)arg += npages;
}

/*
 * The pages a region has when it is registered are installed as far as
 * npfd is concerned: they count against a budget and eviction may take
 * them. The process wrote them before it registered (a buffer filled, then
 * registered: perftest's, a key-value store's), an earlier npfd installed
 * them (adoption), or the fork copied them (a forked child's region). Left
 * out, they were resident for good: under a budget of 1 MiB ib_write_bw
 * --odp kept all 8 MiB of its buffer, 0 counted. A fresh registration is
 * looked at with PAGEMAP_SCAN only, and its pages that map the kernel's
 * zero page (read, never written) are not counted: evicted as dirty, they
 * wrote 4 KiB of zeros each, into a file-backed region's file over its data
 * (review). Read entry by entry (a kernel before
 * 6.7), a huge region's pagemap would hold npfd for seconds at every
 * register (adoption pays that once, and must).
 */
static void mark_present(struct npfd_region *r, bool adopted)
{
	bool had_fd = r->mm->pagemap_fd >= 0;
	__u64 found = 0;
	int err = adopted ? region_scan_present(r, false, found_present, &found) :
			    scan_pagemap_scan(r, false, true, found_present, &found);

	/*
	 * The pagemap stays open only for a process that needs it later
	 * (eviction, devices, adoption): held, it is one more descriptor
	 * against the user's limit (tests/adv_limits).
	 */
	if (!adopted && !had_fd && r->mm->pagemap_fd >= 0) {
		close(r->mm->pagemap_fd);
		r->mm->pagemap_fd = -1;
	}

	if (err) {
		pr_warn_rl(
			"region %u: cannot read which pages pid %d has: %s (those it has now count as not resident until they fault again)",
			r->id, r->mm->tgid, strerror(-err));
		return;
	}
	pr_debug("region %u: %llu pages present at its %s", r->id, (unsigned long long)found,
		 adopted ? "adoption" : "registration");
}

/*
 * Register a region, or (adopt_id != 0) adopt one an earlier npfd served:
 * the same checks, but the range must still be registered with the
 * client's userfaultfd in the kernel (UFFDIO_REGISTER of a range already
 * registered with the same userfaultfd is allowed and changes nothing, so
 * installed pages stay), the earlier id is kept when it is free, and the
 * range's waiting threads are woken: faults the earlier npfd read and never
 * served are raised again and served here.
 */
int region_register(struct npfd_client *c, const struct npf_region_req *req, int *fds, int nfds,
		    __u32 adopt_id, const struct holes *inherit, struct npf_region_info *out,
		    char *err, size_t errlen)
{
	__u64 start = req->start, len = req->length, end = start + len;
	struct uffdio_register reg = {};
	struct uffdio_range range;
	struct npfd_region *r, *it;
	struct holes holes = {0};
	char what[384];
	int ret, want_fds, uffd;
	ino_t ino = 0;
	__u64 lo, pe;

	ret = wire_check_region_req(req, nfds, err, errlen);
	if (ret)
		return ret;
	want_fds = req->backing == NPF_BACKING_FILE ? 2 : 1;

	ret = check_uffd(c, fds[0], &ino, err, errlen);
	if (ret < 0)
		return ret;
	/*
	 * What npfd would hold for the user: the region, its file or (anonymous)
	 * its swap store, the first userfaultfd and the process's pidfd.
	 */
	ret = hooks.uid_limit ? hooks.uid_limit(c->uid, 1, (c->mm ? 0 : 2) + 1, err, errlen) : 0;
	if (ret)
		return ret;
	if (adopt_id && !c->mm)
		mm_hand_over(c, ino);
	uffd = c->mm ? c->mm->uffd : fds[0];

	if (c->mm)
		list_for_each_entry(it, &c->mm->regions, node) {
			if (adopt_id && it->start == start && it->length == len &&
			    it->backing == req->backing) {
				region_info(it, out); /* handed over with its mm */
				return 0;
			}
			/* in a hole of it: not it's (holes.h) */
			if (!overlaps(it, start, len) || holes_cover(&it->holes, start, end))
				continue;
			/* adopting, one inside the other: a hole this npfd has not heard of */
			if (adopt_id && (inside(start, end, it) ||
					 (it->start > start && it->start + it->length < end)))
				continue;
			return refuse(err, errlen, EEXIST,
				      "region 0x%llx-0x%llx overlaps region %u (0x%llx-0x%llx)",
				      (unsigned long long)start, (unsigned long long)end, it->id,
				      (unsigned long long)it->start,
				      (unsigned long long)(it->start + it->length));
		}
	if (c->mm && c->mm->nr_regions >= NPF_MAX_RANGES_PER_PROC)
		return refuse(err, errlen, ENOSPC, "a process may register at most %d regions",
			      NPF_MAX_RANGES_PER_PROC);
	if (nr_regions >= NPF_MAX_REGIONS)
		return refuse(err, errlen, ENOSPC, "npfd serves at most %d regions",
			      NPF_MAX_REGIONS);

	if (moved_waits(c->mm, start, len))
		return refuse(
			err, errlen, EBUSY,
			"0x%llx-0x%llx: a part of a region moved there by mremap() is being put back; try again",
			(unsigned long long)start, (unsigned long long)end);
	for (unsigned int k = 0; inherit && k < inherit->n; k++)
		if (holes_add(&holes, inherit->v[k].start, inherit->v[k].end)) {
			holes_free(&holes);
			return refuse(err, errlen, ENOMEM, "out of memory");
		}
	holes_clip(&holes, start, end);
	if (adopt_id) {
		ret = check_adopted(c->pid, start, end, &holes, what, sizeof(what));
	} else {
		/* mapped whole, but for the holes it inherits */
		ret = -ENOMEM;
		snprintf(what, sizeof(what), "nothing of it is outside its holes");
		for (lo = start; holes_piece(&holes, &lo, end, &pe); lo = pe)
			if ((ret = check_mapped_anon(c->pid, lo, pe, what, sizeof(what))))
				break;
		if (ret)
			holes_free(&holes);
	}
	if (ret == -ENOENT)
		return refuse(err, errlen, ENOENT, "region %u (0x%llx-0x%llx): %s", adopt_id,
			      (unsigned long long)start, (unsigned long long)end, what);
	if (ret)
		return refuse(err, errlen,
			      ret == -ESRCH  ? ESRCH :
			      ret == -ENOSPC ? ENOSPC :
					       EFAULT,
			      "region 0x%llx-0x%llx of pid %d: %s", (unsigned long long)start,
			      (unsigned long long)end, c->pid, what);

	if (want_fds == 2) {
		ret = check_backing(c->pid, fds[1], req->file_offset, len, err, errlen);
		if (ret)
			goto out_holes;
	}

	/* an adopted region's holes are not registered: a mapping of the process's own may be there */
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	for (lo = start; holes_piece(&holes, &lo, end, &pe); lo = pe) {
		reg.range.start = lo;
		reg.range.len = pe - lo;
		/* adopted: registered already, and it stays so whatever happens here */
		if (adopt_id ? mmcall_ioctl(c->pid, uffd, UFFDIO_REGISTER, &reg, sizeof(reg)) :
			       mmcall_register(c->pid, uffd, &reg)) {
			int e = errno;

			ret = e == EBUSY ?
				      refuse(err, errlen, EBUSY,
					     "region 0x%llx-0x%llx is already registered with another userfaultfd",
					     (unsigned long long)start, (unsigned long long)end) :
				      refuse(err, errlen, e,
					     "UFFDIO_REGISTER of 0x%llx-0x%llx failed: %s",
					     (unsigned long long)start, (unsigned long long)end,
					     strerror(e));
			if (!adopt_id)
				unregister_pieces(c->pid, uffd, start, lo, &holes, 0);
			goto out_holes;
		}
	}
	/* one read of smaps for all the pieces */
	ret = registered_in(c->pid, start, end, &holes);
	if (ret <= 0) {
		if (!adopt_id)
			unregister_pieces(c->pid, uffd, start, end, &holes, 0);
		ret = ret < 0 ?
			      refuse(err, errlen, -ret, "cannot read /proc/%d/smaps: %s", c->pid,
				     strerror(-ret)) :
			      refuse(err, errlen, EPERM,
				     "the userfaultfd is not pid %d's own: it registered memory of another process",
				     c->pid);
		goto out_holes;
	}

	range.start = start;
	range.len = len;
	if (!c->mm) {
		ret = adopt_uffd(c, uffd, ino, err, errlen);
		if (ret) {
			/* an adopted range stays registered: its client serves it meanwhile */
			if (!adopt_id)
				unregister_pieces(c->pid, uffd, start, end, &holes, 0);
			goto out_holes;
		}
		fds[0] = -1; /* now owned by c->mm */
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		if (!adopt_id)
			unregister_pieces(c->pid, uffd, start, end, &holes, 0);
		ret = refuse(err, errlen, ENOMEM, "out of memory");
		goto out_holes;
	}
	r->mm = c->mm;
	r->holes = holes;
	holes = (struct holes){0};
	if (adopt_id && !region_find_id(adopt_id)) {
		id_taken(ID_REGION, adopt_id);
		r->id = adopt_id;
	} else {
		r->id = id_alloc(ID_REGION);
	}
	r->start = start;
	r->length = len;
	/*
	 * An anonymous region's offset is its swap store's byte offset of
	 * its first page (evict.c): 0 when registered, what the journal said
	 * when adopted (npf_abi.h NPF_MSG_LAYOUT).
	 */
	r->file_offset = want_fds == 2 || adopt_id ? req->file_offset : 0;
	r->backing = req->backing;
	r->file_fd = -1;
	r->store_fd = -1;
	memcpy(r->name, req->name, sizeof(r->name));
	r->name[sizeof(r->name) - 1] = '\0';
	if (want_fds == 2) {
		r->file_fd = fds[1];
		fds[1] = -1;
	}
	r->ws_fd = -1;
	r->fault_around = req->flags & NPF_REGION_FAULT_AROUND ?
				  (int)(req->fault_around_kib / (NPF_PAGE_SIZE / 1024)) :
				  -1;
	r->installed = bitmap_new(len >> NPF_PAGE_SHIFT);
	list_add_tail(&r->node, &c->mm->regions);
	c->mm->nr_regions++;
	nr_regions++;
	/* nr_regions <= NPF_MAX_RANGES_PER_PROC (above): a slot is free */
	r->layout_slot = __builtin_ctz(~c->mm->layout_slots);
	c->mm->layout_slots |= 1U << r->layout_slot;
	layout_put(r);
	if (!r->installed || collect_slot_alloc(r) || collect_filter_update(c->mm->tgid, c->mm)) {
		region_remove(r, !adopt_id);
		return refuse(err, errlen, ENOSPC, "cannot add the region to the BPF maps");
	}
	if (adopt_id && adopted_nesting(r)) {
		region_remove(r, false);
		return refuse(err, errlen, ENOSPC,
			      "region %u (0x%llx-0x%llx) has more holes than npfd keeps (%d)",
			      adopt_id, (unsigned long long)start, (unsigned long long)end,
			      HOLES_MAX);
	}
	mark_present(r, adopt_id);
	if (adopt_id && hooks.adopted)
		hooks.adopted(r, adopt_id);
	if (hooks.registered)
		hooks.registered(r);
	region_info(r, out);
	if (adopt_id) {
		/* EEXIST from the pages already there is benign: nothing is overwritten */
		if (ioctl(c->mm->uffd, UFFDIO_WAKE, &range) && errno != ESRCH)
			pr_warn("region %u: UFFDIO_WAKE after adopting failed: %s", r->id,
				strerror(errno));
	}
	pr_info("pid %d: region %u %s: 0x%llx-0x%llx %s%s%s%s", c->pid, r->id,
		adopt_id ? "adopted" : "registered", (unsigned long long)start,
		(unsigned long long)end,
		r->backing == NPF_BACKING_FILE ? "file-backed" : "anonymous", r->name[0] ? " " : "",
		r->name, r->holes.n ? " (with holes)" : "");
	return 0;

out_holes:
	holes_free(&holes);
	return ret;
}

int region_unregister(struct npfd_client *c, __u32 id, struct npfd_wait *w, char *err,
		      size_t errlen)
{
	struct npfd_region *r = region_find_id(id);
	int ret;

	if (!r)
		return refuse(err, errlen, ENOENT, "no region %u", id);
	if (!c->mm || r->mm != c->mm)
		return refuse(
			err, errlen, EPERM,
			"region %u belongs to another client (pid %d): only its owner may unregister it",
			id, r->mm->tgid);
	ret = hooks.put_back ? hooks.put_back(r, err, errlen) : 0;
	if (ret)
		return ret;
	pr_info("pid %d: region %u unregistered", c->pid, id);
	region_drop(r, true, w);
	return 0;
}

/*
 * Installed pages and mm events: which pages of a region npfd installed
 * (prefetch and fault-around skip them; devices map them without asking
 * the resolver), and what the address space did to the regions since
 * (munmap, mremap, MADV_DONTNEED: the userfaultfd's events, read by the
 * resolver with the faults and handed here).
 */

/* The pages [start, end) of r are gone or moved: devices must not keep them mapped. */
void region_invalidate(struct npfd_region *r, __u64 start, __u64 end)
{
	if (hooks.range_removed)
		hooks.range_removed(r, start, end);
}

/* Did npfd install page of r (and has it not left the address space since)? */
bool region_page_installed(const struct npfd_region *r, __u64 page)
{
	__u64 i = (page - r->start) >> NPF_PAGE_SHIFT;

	return page >= r->start && i < (r->length >> NPF_PAGE_SHIFT) &&
	       bitmap_test(r->installed, i);
}

void region_mark_installed(struct npfd_region *r, __u64 start, __u64 npages)
{
	__u64 i = (start - r->start) >> NPF_PAGE_SHIFT, end = i + npages;

	if (!r->installed)
		return;
	for (; i < end; i++) {
		r->ninstalled += !bitmap_test(r->installed, i);
		bitmap_set(r->installed, i);
	}
}

/* Pages of r that left the address space (munmap, MADV_DONTNEED): forget them. */
static void forget_installed(struct npfd_region *r, __u64 start, __u64 end)
{
	__u64 lo = start > r->start ? start : r->start, hi = r->start + r->length, i, n;

	if (end < hi)
		hi = end;
	if (!r->installed || !r->ninstalled || lo >= hi)
		return;
	/* the installed ones only: a drop over a huge region, nearly all of it never touched */
	n = (hi - r->start) >> NPF_PAGE_SHIFT;
	for (i = bitmap_next(r->installed, (lo - r->start) >> NPF_PAGE_SHIFT, n); i < n;
	     i = bitmap_next(r->installed, i + 1, n)) {
		bitmap_clear(r->installed, i);
		r->ninstalled--;
	}
}

/*
 * r loses its first `shift` pages: the installed marks of the others move
 * down with their indexes. Forgotten instead, the pages still present were
 * never counted or evicted again (tests/evict_cut_zapping: 270 pages
 * present with a budget of 16). The pages cut were dropped already
 * (mm_range_removed()).
 */
static void shift_installed(struct npfd_region *r, __u64 shift)
{
	/* none installed: nothing to move (nor a terabyte region's never-touched map to touch) */
	if (r->installed && r->ninstalled)
		bitmap_shift_down(r->installed, shift);
}

void region_forget_installed(struct npfd_region *r, __u64 start, __u64 end)
{
	forget_installed(r, start, end);
}

/* [start, end) of r left the address space (dropped, or moved away): its pages are gone. */
static void region_dropped(struct npfd_region *r, __u64 start, __u64 end)
{
	if (r->stats)
		r->stats->mm_events++;
	forget_installed(r, start, end);
	if (hooks.dropped)
		hooks.dropped(r, start, end);
	region_invalidate(r, start, end);
}

/*
 * [lo, hi), in r's middle, is not r's any more (holes.h). Past HOLES_MAX
 * the hole is not kept: its addresses stay r's, as before holes were kept
 * -- a region registered there is refused as overlapping r, and the next
 * npfd refuses to adopt r (its evicted pages are then lost).
 */
static int region_hole_add(struct npfd_region *r, __u64 lo, __u64 hi)
{
	int err = holes_add(&r->holes, lo, hi);

	if (err)
		pr_warn("pid %d: region %u keeps 0x%llx-0x%llx as its own, not as a hole: %s",
			r->mm->tgid, r->id, (unsigned long long)lo, (unsigned long long)hi,
			err == -ENOSPC ? "it has as many holes as npfd keeps" : strerror(-err));
	return err;
}

/* An mm event on [start, end) (UFFD_EVENT_REMOVE: MADV_DONTNEED): count it, and take the pages from the devices. */
void mm_range_removed(struct npfd_mm *mm, __u64 start, __u64 end)
{
	struct npfd_region *r;

	moved_removed(mm, start, end, false);
	list_for_each_entry(r, &mm->regions, node) {
		__u64 lo = start > r->start ? start : r->start, pe;
		__u64 hi = end < r->start + r->length ? end : r->start + r->length;

		/* not its holes: what is there now is another mapping's, or region's */
		for (; lo < hi && holes_piece(&r->holes, &lo, hi, &pe); lo = pe)
			region_dropped(r, lo, pe);
	}
}

/*
 * munmap: regions wholly inside go; regions cut at an end shrink; a region
 * unmapped in its middle keeps a hole there (holes.h). An unmapped range
 * that reaches a hole takes the hole with it: a region never starts or
 * ends with one.
 */
void mm_unmapped(struct npfd_mm *mm, __u64 start, __u64 end)
{
	struct npfd_region *r, *tmp;

	if (hooks.unmapping)
		hooks.unmapping(mm, start, end);
	moved_removed(mm, start, end, true);
	mm_range_removed(mm, start, end);
	list_for_each_entry_safe(r, tmp, &mm->regions, node) {
		__u64 rs = r->start, re = r->start + r->length, lo = start, hi = end;

		if (end <= rs || start >= re || holes_cover(&r->holes, start, end))
			continue;
		holes_widen(&r->holes, &lo, &hi);
		if (lo <= rs && hi >= re) {
			pr_info("pid %d unmapped region %u: dropping it", mm->tgid, r->id);
			region_remove(r, false);
			continue;
		}
		if (lo <= rs) {
			if (hooks.cut)
				hooks.cut(r, (hi - rs) >> NPF_PAGE_SHIFT);
			shift_installed(r, (hi - rs) >> NPF_PAGE_SHIFT);
			r->file_offset += hi - rs;
			r->start = hi;
		} else if (hi >= re) {
			/* cut at the top */
		} else {
			region_hole_add(r, lo, hi);
			continue;
		}
		r->length = (lo <= rs ? re : lo) - r->start;
		holes_clip(&r->holes, r->start, r->start + r->length);
		if (r->stats) {
			r->stats->start = r->start;
			r->stats->length = r->length;
		}
		layout_put(r);
		collect_filter_update(mm->tgid, mm);
	}
}

/*
 * Part [lo, hi) of r moved by delta bytes (a partial mremap: the kernel
 * moved its pages, and its userfaultfd registration with them). A region
 * is one range, so the part leaves it, but not its data: what only npfd
 * holds -- a page in eviction's store, or in a file-backed region a page
 * not read from its file yet -- goes to the new place (moved.c), before
 * any fault there is answered. Then the kernel serves the range as any
 * memory of the process. Taken for a drop, every evicted page of the part
 * read zeros at its new place (tests/evict_mremap_part). Left for the
 * kernel: anonymous pages never written (zeros either way), and a
 * file-backed region's pages past the end of its file (zeros, not SIGBUS).
 */
static void part_moved(struct npfd_region *r, __u64 lo, __u64 hi, __u64 delta)
{
	__u64 off0 = 0;
	struct bitmap *stored = hooks.part_leaving ? hooks.part_leaving(r, lo, hi, &off0) : NULL;
	int fd = -1;

	if (stored) {
		fd = fcntl(r->store_fd, F_DUPFD_CLOEXEC, 0);
	} else if (r->backing == NPF_BACKING_FILE) {
		fd = fcntl(r->file_fd, F_DUPFD_CLOEXEC, 0);
		off0 = r->file_offset + (lo - r->start);
	}
	if ((stored || r->backing == NPF_BACKING_FILE) && fd < 0)
		pr_err("pid %d: the part of region %u moved to 0x%llx reads zeros where npfd held its pages: %s",
		       r->mm->tgid, r->id, (unsigned long long)(lo + delta), strerror(errno));
	pr_warn("pid %d moved pages 0x%llx-0x%llx of region %u to 0x%llx: they leave the region",
		r->mm->tgid, (unsigned long long)lo, (unsigned long long)hi, r->id,
		(unsigned long long)(lo + delta));
	moved_start(r->mm, r->id, lo + delta, (hi - lo) >> NPF_PAGE_SHIFT, fd, off0,
		    fd >= 0 ? stored : NULL, stored != NULL);
	if (fd < 0)
		bitmap_free(stored);
}

/*
 * The source of a move, after it: MREMAP_DONTUNMAP leaves it mapped,
 * empty, and still registered with the userfaultfd, and no unmap event
 * follows. npfd takes it for gone all the same (the region or part went
 * with its memory), so its faults came to npfd for good, each
 * zero-filled as outside every region. Unregistered, it is the process's
 * own memory, as the kernel makes it: zeros at the next touch
 * (tests/evict_mremap). A plain move unmapped the source before its event
 * was sent: nothing is there (EINVAL). Made now or not at all: queued
 * for a stuck process (mmcall_unregister()), it could come after the
 * process mapped and registered something else there.
 */
static void source_unregister(struct npfd_mm *mm, __u64 from, __u64 len)
{
	struct uffdio_range range = {.start = from, .len = len};

	if (mmcall_ioctl(mm->tgid, mm->uffd, UFFDIO_UNREGISTER, &range, sizeof(range)) &&
	    errno != EINVAL && errno != ESRCH && errno != ENOMEM)
		pr_warn_rl("pid %d: cannot unregister 0x%llx-0x%llx, moved away: %s", mm->tgid,
			   (unsigned long long)from, (unsigned long long)(from + len),
			   strerror(errno));
}

/* mremap: a region that moved whole follows its memory; a part moved leaves its region. */
void mm_remapped(struct npfd_mm *mm, __u64 from, __u64 to, __u64 len)
{
	struct npfd_region *r;

	moved_remapped(mm, from, to, len); /* a part moved earlier, not all put back yet */
	list_for_each_entry(r, &mm->regions, node) {
		if (r->start < from || r->start + r->length > from + len)
			continue;
		/*
		 * Moved whole: its pages go with it, present or evicted (npfd
		 * keeps their state by index in the region, not by address),
		 * so nothing is dropped; the devices map them again at the new
		 * place. Taken for a drop, every evicted page read zeros after
		 * the move (tests/evict_mremap).
		 */
		if (r->stats)
			r->stats->mm_events++;
		region_invalidate(r, r->start, r->start + r->length);
		if (hooks.moved)
			hooks.moved(r, to - from);
		r->start = r->start - from + to;
		holes_shift(&r->holes, to - from);
		if (r->stats)
			r->stats->start = r->start;
		layout_put(r);
		pr_info("pid %d moved region %u to 0x%llx", mm->tgid, r->id,
			(unsigned long long)r->start);
	}
	/* the regions moved whole are at their new place by now: the two ranges never overlap */
	list_for_each_entry(r, &mm->regions, node) {
		__u64 lo = from > r->start ? from : r->start, pe;
		__u64 hi = from + len < r->start + r->length ? from + len : r->start + r->length;

		/* not its holes: what moved from there is another region's, or none */
		for (; lo < hi && holes_piece(&r->holes, &lo, hi, &pe); lo = pe)
			part_moved(r, lo, pe, to - from);
	}
	/* what is left at [from, from + len) is as if unmapped: regions there shrink */
	mm_unmapped(mm, from, from + len);
	collect_filter_update(mm->tgid, mm);
	source_unregister(mm, from, len);
}
