// SPDX-License-Identifier: GPL-2.0
/*
 * Memory cgroup limits: a client whose registered regions are larger than
 * its cgroup v1 memory limit keeps running through npfd's eviction instead
 * of being OOM-killed.
 *
 * Why npfd has to know: a page npfd installs with UFFDIO_COPY is charged to
 * the client's memory cgroup (the kernel charges the faulting mm's memcg).
 * When the charge fails and nothing in the cgroup can be reclaimed (anonymous
 * memory, no swap), the kernel's OOM killer kills a task of that cgroup --
 * the client -- from inside npfd's ioctl. A budget set by the operator
 * (npfd.conf's client-budget-mib, npfctl region set) cannot follow each
 * client's cgroup, so npfd derives one itself, when a region registers or
 * the client's eviction ring comes (evict_region_registered() calls here):
 *
 *   room   = the least (limit - usage) of the client's cgroup and every
 *            ancestor that has a limit (a parent's limit binds its children)
 *   budget = what its npf clients' regions hold now + room - headroom
 *
 * headroom (a quarter of the tightest limit, at least MEMCG_HEADROOM_MIN)
 * is for the client's own growth outside its regions and for the pages
 * writers install while eviction catches up. A budget alone once held no
 * fault back, and a writer outran eviction (measured: a 32 MiB cgroup, a
 * 16 MiB budget, one thread writing 128 MiB: 31 MiB used at the peak; with
 * an 8 MiB headroom the client was OOM-killed); evict_hold() now holds
 * faults a batch over the high watermark, but gives up when eviction makes
 * no room for 500 ms or has just found nothing to take, and the cgroup
 * counts pages the bitmap does not. So the npf
 * clients of a limited cgroup also have a ceiling together -- their budget
 * plus half the headroom -- and npfd holds the faults of their regions while
 * they have that many pages installed (memcg_hold(), called by the
 * resolver): they are served once eviction has made room. The cgroup's
 * usage then stays below its limit by half the headroom, less what the
 * client grows outside its regions.
 *
 * Every npf client in the same cgroup shares that room (what they hold is
 * part of the usage): the budget is divided among all their regions by
 * length and set as each region's budget (evict.c's mechanism, as npfctl
 * region set would), recomputed whenever one of them registers. A smaller
 * budget the operator set on a region is kept. Not done: clients in
 * different cgroups under one limited ancestor each count the ancestor's
 * whole room; a limit changed later or a client that leaves is seen only
 * at the next registration. Two clients in one 32 MiB cgroup, each
 * registering twice the limit, had one OOM-killed in 4 of 20 runs: the
 * first client's region got no ceiling when the second client's ring came
 * first (see ceiling_set()); 0 of 40 since.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "evict.h"
#include "log.h"
#include "memcg.h"
#include "objects.h"
#include "region.h"
#include "util.h"

#define MEMCG_HEADROOM_MIN (4ULL << 20)
#define MEMCG_WAIT_NS (200ULL * 1000 * 1000)
/*
 * Faults held at the ceiling go on once the group's installed count has
 * not gone down for this long: eviction cannot make room (a region whose
 * pages it cannot take), and waiting longer would not help.
 */
#define MEMCG_STUCK_NS (2ULL * 1000 * 1000 * 1000)
#define MEMCG_CUT_SLACK 64ULL	     /* pages below the usage mark a lowered budget aims at */
#define MEMCG_MIN_SHARE 16ULL	     /* pages: a region's budget is never below this */
#define MEMCG_UNLIMITED (1ULL << 62) /* v1 shows "no limit" as LONG_MAX rounded to pages */

/*
 * Regions whose budget npfd derived from a limit, sorted by id (for
 * ceiling_find()): their ceiling, in pages. An entry goes with its region
 * (memcg_region_gone()): kept, it counted whatever region got the id
 * next -- another user's, adopted under that id, whose pages then held
 * the cgroup's faults for good (review).
 */
struct ceiling {
	__u32 id;
	__u32 group; /* index in groups[]: the regions of one cgroup's npf clients */
};
static struct ceiling *ceilings;
static size_t nceilings, ceilings_cap;

/*
 * One cgroup's npf clients: together they may have pages installed up to
 * their budget plus half the headroom. Held by the group, not per region:
 * a client whose share shrank when another came may still be over it while
 * the newcomer fills its own (measured: OOM-killed with per-region ceilings).
 */
struct group {
	char *dir;
	__u64 pages, budget;
	int usage_fd;	  /* memory.usage_in_bytes of the level whose room is least */
	__u64 usage_mark; /* bytes: over it, faults wait too (see memcg_hold()) */
	__u64 over_since; /* ns: the cgroup's usage went over usage_mark, or 0 */
	__u64 last_cut;	  /* ns: the budget was last lowered to the usage */
	/*
	 * Runs let through since the installed count was last seen to change:
	 * a flush installs its runs only after deciding on all of them.
	 */
	__u64 seen, approved;
	/*
	 * ns at the ceiling with no room made since, and the count last seen:
	 * any room made holds faults again (the lowest count instead let every
	 * fault by until the count fell below it, review).
	 */
	__u64 full_since, full_last;
};
static struct group *groups;
static size_t ngroups;

static char mount_dir[PATH_MAX];  /* the cgroup v1 memory hierarchy's mount point */
static char mount_root[PATH_MAX]; /* the cgroup it shows, as /proc/PID/cgroup names it */
static int mount_state;		  /* 0: not looked yet, 1: found, -1: none */

/* Does the comma-separated list have the word? */
static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, word, n) && (p[n] == ',' || p[n] == '\0' || p[n] == '\n'))
			return true;
	return false;
}

/* Find the memory hierarchy in npfd's own mount table (once). */
static bool find_mount(void)
{
	char line[4096];
	FILE *f;

	if (mount_state)
		return mount_state > 0;
	mount_state = -1;
	f = fopen("/proc/thread-self/mountinfo", "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char root[PATH_MAX], dir[PATH_MAX], *sep = strstr(line, " - ");
		char fstype[64], src[256], opts[1024];

		if (!sep || sscanf(line, "%*s %*s %*s %4095s %4095s", root, dir) != 2 ||
		    sscanf(sep + 3, "%63s %255s %1023s", fstype, src, opts) != 3)
			continue;
		/* octal escapes (a space in the path): not worth decoding here */
		if (strcmp(fstype, "cgroup") || !has_word(opts, "memory") || strchr(dir, '\\') ||
		    strchr(root, '\\'))
			continue;
		snprintf(mount_dir, sizeof(mount_dir), "%s", dir);
		snprintf(mount_root, sizeof(mount_root), "%s", strcmp(root, "/") ? root : "");
		mount_state = 1;
		break;
	}
	fclose(f);
	if (mount_state < 0)
		pr_info("memory cgroups: no cgroup v1 memory hierarchy mounted: client budgets do not follow cgroup limits");
	return mount_state > 0;
}

/* The directory of pid's memory cgroup, or -errno (not visible to npfd). */
static int client_dir(pid_t pid, char *out, size_t outlen)
{
	char path[64], line[4096];
	int ret = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *ctl = strchr(line, ':'), *cg = ctl ? strchr(ctl + 1, ':') : NULL;
		size_t rl = strlen(mount_root);

		if (!cg)
			continue;
		*cg++ = '\0';
		cg[strcspn(cg, "\n")] = '\0';
		if (!has_word(ctl + 1, "memory"))
			continue;
		/* a cgroup outside what npfd's mount shows (another cgroup namespace's view) */
		if (strncmp(cg, mount_root, rl) || (cg[rl] != '/' && cg[rl] != '\0') ||
		    strstr(cg, "/../")) {
			ret = -EXDEV;
			break;
		}
		ret = snprintf(out, outlen, "%s%s", mount_dir, cg + rl) < (int)outlen ?
			      0 :
			      -ENAMETOOLONG;
		break;
	}
	fclose(f);
	return ret;
}

static int read_u64(const char *dir, const char *name, __u64 *v)
{
	char path[PATH_MAX + 64];
	unsigned long long x;
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	ok = fscanf(f, "%llu", &x) == 1;
	fclose(f);
	*v = x;
	return ok ? 0 : -EINVAL;
}

/*
 * From the client's cgroup up to the hierarchy's root: the tightest limit
 * and the least room under any limit. false if no level has a limit.
 */
static bool cgroup_room(char *dir, __u64 *limit, __u64 *room, char *tight, size_t tightlen)
{
	size_t top = strlen(mount_dir);
	bool any = false;

	*limit = *room = UINT64_MAX;
	for (;;) {
		__u64 l, u;
		char *slash;

		if (!read_u64(dir, "memory.limit_in_bytes", &l) &&
		    !read_u64(dir, "memory.usage_in_bytes", &u) && l < MEMCG_UNLIMITED) {
			any = true;
			if (l < *limit)
				*limit = l;
			if ((u < l ? l - u : 0) < *room) {
				*room = u < l ? l - u : 0;
				snprintf(tight, tightlen, "%s", dir);
			}
		}
		slash = strrchr(dir, '/');
		if (strlen(dir) <= top || !slash || slash < dir + top)
			break;
		*slash = '\0';
	}
	return any;
}

static struct ceiling *ceiling_find(__u32 id)
{
	size_t lo = 0, hi = nceilings;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ceilings[mid].id == id)
			return &ceilings[mid];
		if (ceilings[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* The group of the cgroup at dir, made if new; -1 when out of memory. */
static int group_of(const char *dir)
{
	struct group *g;
	size_t i;

	for (i = 0; i < ngroups; i++)
		if (!strcmp(groups[i].dir, dir))
			return (int)i;
	g = realloc(groups, (ngroups + 1) * sizeof(*g));
	if (!g)
		return -1;
	groups = g;
	groups[ngroups] = (struct group){.dir = strdup(dir), .usage_fd = -1};
	if (!groups[ngroups].dir)
		return -1;
	return (int)ngroups++;
}

static void ceiling_set(__u32 id, __u32 group)
{
	struct ceiling *c = ceiling_find(id);
	size_t pos;

	if (c) {
		c->group = group;
		return;
	}
	if (nceilings == ceilings_cap) {
		size_t cap = ceilings_cap ? ceilings_cap * 2 : 16;
		struct ceiling *n = realloc(ceilings, cap * sizeof(*n));

		if (!n) {
			pr_warn("region %u: out of memory for its cgroup ceiling: its faults are not held back",
				id);
			return;
		}
		ceilings = n;
		ceilings_cap = cap;
	}
	/*
	 * Sorted by id, inserted in place: ceilings are set when a client's
	 * eviction ring comes, and a region registered earlier may get its
	 * ring later (two clients of one cgroup, the second one's ring first).
	 * Appending only when ids grew left such a region without a ceiling:
	 * its faults were never held and its pages not counted in the group's
	 * (the clients OOM-killed in 4 of 20 runs: tests/evict_cgroup_two).
	 */
	for (pos = nceilings; pos && ceilings[pos - 1].id > id; pos--)
		;
	memmove(&ceilings[pos + 1], &ceilings[pos], (nceilings - pos) * sizeof(*ceilings));
	ceilings[pos] = (struct ceiling){.id = id, .group = group};
	nceilings++;
}

void memcg_region_gone(const struct npfd_region *r)
{
	struct ceiling *c = nceilings ? ceiling_find(r->id) : NULL;
	size_t pos;

	if (!c)
		return;
	pos = (size_t)(c - ceilings);
	memmove(&ceilings[pos], &ceilings[pos + 1], (nceilings - pos - 1) * sizeof(*ceilings));
	nceilings--;
}

/*
 * Set the budget of group gi's npf clients to budget pages together: each
 * region's share by its length, through evict.c as npfctl region set would.
 */
static void group_budget(int gi, __u64 budget)
{
	/* npfd itself sets the budget, as root would with npfctl region set */
	static struct npfd_client self = {.privileged = true, .pidfd = -1};
	__u64 total = 0;
	size_t i;

	for (i = 0; i < nceilings; i++) {
		const struct npfd_region *q;

		if (ceilings[i].group == (__u32)gi && (q = region_find_id(ceilings[i].id)))
			total += q->length >> NPF_PAGE_SHIFT;
	}
	groups[gi].budget = budget;
	if (!total)
		return;
	for (i = 0; i < nceilings; i++) {
		struct npf_region_set_req req = {.region_id = ceilings[i].id,
						 .key = NPF_SET_BUDGET};
		struct npf_budget_info bi;
		char err[NPF_ERRMSG_LEN];
		const struct npfd_region *q;
		__u64 share;

		if (ceilings[i].group != (__u32)gi || !(q = region_find_id(ceilings[i].id)))
			continue;
		share = (__u64)((unsigned __int128)budget * (q->length >> NPF_PAGE_SHIFT) / total);
		req.value = (share < MEMCG_MIN_SHARE ? MEMCG_MIN_SHARE : share) << NPF_PAGE_SHIFT;
		if (evict_region_set(&self, &req, &bi, err, sizeof(err)))
			pr_warn_rl("region %u: cannot lower its budget to its cgroup's usage: %s",
				   q->id, err);
	}
}

bool memcg_hold(const struct npfd_region *r, __u64 npages)
{
	const struct ceiling *c = nceilings ? ceiling_find(r->id) : NULL;
	struct group *g;
	__u64 n = 0;
	size_t i;

	if (!c)
		return false;
	g = &groups[c->group];
	/* every region of the group (entries of regions gone find nothing) */
	for (i = 0; i < nceilings; i++) {
		const struct npfd_region *q;

		if (ceilings[i].group == c->group && (q = region_find_id(ceilings[i].id)))
			n += q->ninstalled;
	}
	if (n != g->seen) {
		g->seen = n;
		g->approved = 0;
	}
	/* one run may go over (a run larger than the room left would wait for ever) */
	if (n + g->approved >= g->pages) {
		__u64 t = now_ns();

		if (!g->full_since || n < g->full_last)
			g->full_since = t; /* eviction made room since the last look: wait on */
		g->full_last = n;
		if (t - g->full_since < MEMCG_STUCK_NS)
			return true;
		pr_warn_rl(
			"cgroup %s: its npf clients' %llu pages did not go down for %llu s: faults go on over its ceiling",
			g->dir, (unsigned long long)n,
			(unsigned long long)(MEMCG_STUCK_NS / 1000000000ULL));
	} else {
		g->full_since = 0;
	}
	/*
	 * The cgroup's own count too: it has pages npfd's installed bitmap
	 * no longer counts (evicted, not yet freed by the client's zap) or
	 * does not count yet (measured: 1300 pages more than the bitmap,
	 * OOM-killed). Over the mark, faults wait while the group is over its
	 * budget (eviction is under way), else for MEMCG_WAIT_NS at most:
	 * what fills the cgroup then may not be npf's, and waiting for ever
	 * would not help.
	 */
	if (g->usage_fd >= 0) {
		char buf[32];
		ssize_t len = pread(g->usage_fd, buf, sizeof(buf) - 1, 0);

		buf[len > 0 ? len : 0] = '\0';
		if (len > 0 && strtoull(buf, NULL, 10) >= g->usage_mark) {
			__u64 usage = strtoull(buf, NULL, 10), t = now_ns();
			__u64 excess =
				((usage - g->usage_mark) >> NPF_PAGE_SHIFT) + MEMCG_CUT_SLACK;

			if (!g->over_since)
				g->over_since = t;
			/* what the bitmap misses is taken from the budget: eviction makes room */
			if (n + g->approved < g->budget && n > excess &&
			    t - g->last_cut > MEMCG_WAIT_NS / 4) {
				g->last_cut = t;
				group_budget(c->group, n - excess);
			}
			if (n + g->approved >= g->budget || t - g->over_since < MEMCG_WAIT_NS)
				return true;
		} else {
			g->over_since = 0;
		}
	}
	g->approved += npages;
	return false;
}

/* Is mm an npf client whose budget can follow a limit, in the cgroup at dir? */
static bool in_cgroup(const struct npfd_mm *mm, const char *dir)
{
	char d[PATH_MAX];

	return !mm->dead && mm->tgid && mm->evict_ring && !client_dir(mm->tgid, d, sizeof(d)) &&
	       !strcmp(d, dir);
}

/* The page cache charged to the cgroup at dir (memory.stat), which reclaim can take back. */
static __u64 file_bytes(const char *dir)
{
	char path[PATH_MAX + 16], key[64];
	unsigned long long v;
	__u64 sum = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/memory.stat", dir);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fscanf(f, "%63s %llu", key, &v) == 2)
		if (!strcmp(key, "total_inactive_file") || !strcmp(key, "total_active_file"))
			sum += v;
	fclose(f);
	return sum;
}

bool memcg_room(const struct npfd_mm *mm, __u64 npages, __u64 *room)
{
	char dir[PATH_MAX], tight[PATH_MAX] = "";
	__u64 limit, bytes;

	*room = UINT64_MAX;
	if (!mm->tgid || !find_mount() || client_dir(mm->tgid, dir, sizeof(dir)) ||
	    !cgroup_room(dir, &limit, &bytes, tight, sizeof(tight)))
		return true;
	bytes += file_bytes(tight);
	if (bytes > limit)
		bytes = limit;
	*room = bytes >> NPF_PAGE_SHIFT;
	return npages <= *room;
}

void memcg_region_registered(struct npfd_region *r)
{
	/* npfd itself sets the budget, as root would with npfctl region set */
	static struct npfd_client self = {.privileged = true, .pidfd = -1};
	struct npfd_mm *mm = r->mm, *m;
	struct npfd_region *q;
	char dir[PATH_MAX], top[PATH_MAX], tight[PATH_MAX] = "", path[PATH_MAX + 32];
	char err[NPF_ERRMSG_LEN];
	__u64 limit, room, headroom, held = 0, total = 0, budget;
	unsigned int clients = 0;
	int ret, gi;

	if (!mm->tgid || !mm->evict_ring || !find_mount())
		return; /* without the ring no budget can apply (evict.c says why) */
	ret = client_dir(mm->tgid, dir, sizeof(dir));
	if (ret) {
		pr_warn_rl(
			"pid %d: cannot find its memory cgroup under %s: %s: its budget does not follow a cgroup limit",
			mm->tgid, mount_dir, strerror(-ret));
		return;
	}
	snprintf(top, sizeof(top), "%s", dir);
	if (!cgroup_room(top, &limit, &room, tight, sizeof(tight)))
		return; /* no limit: nothing to keep below */
	/*
	 * Every npf client of the same cgroup shares its room: what they hold
	 * is part of its usage, so the room they may fill together is what
	 * they hold plus what is free, divided by the size registered.
	 */
	list_for_each_entry(m, &mms, node) {
		if (m != mm && !in_cgroup(m, dir))
			continue;
		clients++;
		list_for_each_entry(q, &m->regions, node) {
			held += q->ninstalled;
			total += q->length >> NPF_PAGE_SHIFT;
		}
	}
	headroom = limit / 4 > MEMCG_HEADROOM_MIN ? limit / 4 : MEMCG_HEADROOM_MIN;
	budget = held + (room > headroom ? (room - headroom) >> NPF_PAGE_SHIFT : 0);
	pr_info("pid %d: memory cgroup limit %llu MiB, %llu MiB free under it, %llu pages held by its %u npf client(s): budget %llu pages for their regions",
		mm->tgid, (unsigned long long)(limit >> 20), (unsigned long long)(room >> 20),
		(unsigned long long)held, clients, (unsigned long long)budget);
	gi = group_of(dir);
	if (!total || gi < 0)
		return;
	groups[gi].pages = budget + (headroom / 2 >> NPF_PAGE_SHIFT);
	groups[gi].budget = budget;
	groups[gi].usage_mark = limit - headroom / 2;
	if (groups[gi].usage_fd >= 0)
		close(groups[gi].usage_fd);
	snprintf(path, sizeof(path), "%s/memory.usage_in_bytes", tight);
	groups[gi].usage_fd = open(path, O_RDONLY | O_CLOEXEC);
	list_for_each_entry(m, &mms, node) {
		if (m != mm && !in_cgroup(m, dir))
			continue;
		list_for_each_entry(q, &m->regions, node) {
			struct npf_region_set_req req = {.region_id = q->id, .key = NPF_SET_BUDGET};
			struct npf_budget_info bi;
			__u64 pages = q->length >> NPF_PAGE_SHIFT;
			__u64 share = (__u64)((unsigned __int128)budget * pages / total);
			__u64 now = q->budget_info ? q->budget_info->budget_pages : 0;

			if (share < MEMCG_MIN_SHARE)
				share = MEMCG_MIN_SHARE;
			/* the operator's tighter budget stays; a share of ours follows the room */
			if (now && now <= share && !ceiling_find(q->id))
				continue;
			req.value = share << NPF_PAGE_SHIFT;
			if (evict_region_set(&self, &req, &bi, err, sizeof(err))) {
				pr_warn("region %u: cannot hold it below pid %d's memory cgroup limit (%llu MiB): %s",
					q->id, m->tgid, (unsigned long long)(limit >> 20), err);
				continue;
			}
			ceiling_set(q->id, (__u32)gi);
		}
	}
}
