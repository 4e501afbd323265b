/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel moves or frees pages a device maps; npfd must invalidate
 * their IO page table entries (daemon/mmwatch.c). One fixture for the
 * tests/mm_dev_*.c programs, each of which provokes one kernel event:
 *
 *  B registers a region with a private npfd, attaches its NIC MR, fills
 *    it (CPU writes, or a backing file), and A RDMA READs all of it once:
 *    every entry is present. B snapshots its pages' frames (pagemap),
 *    provokes the event (ev->trigger) and learns which pages it moved
 *    (frame changed, gone to swap, or now shared by KSM). Checked:
 *    - after every READ, each page's frame is in npfd's watch list
 *      (npf_mm_pfns, pinned) for that page within 2 s;
 *    - every moved page's entry is cleared within 3 s (npfd heard of it);
 *    - A READs the region again: B's NIC made page requests for them
 *      (the next DMA faults), every byte A gets is right, and the moved
 *      pages' entries are present again;
 *    - with ev->rounds, all of it again: pages npfd mapped again after
 *      the first event are watched as well.
 *  A test whose event cannot be provoked here skips with the reason.
 */
#ifndef MM_FIXTURE_H
#define MM_FIXTURE_H

#include <sys/stat.h>
#include <bpf/bpf.h>
#include "nic_fixture.h"

#define MM_HUGE (2UL << 20)
#define MM_WAIT_S 3

struct mm_event {
	const char *name;
	__u64 len;		  /* region bytes (a multiple of 2 MiB) */
	bool file;		  /* region backed by a file instead of CPU writes */
	bool expect_none;	  /* the event must move no page of the region */
	int rounds;		  /* events provoked one after the other (0: 1) */
	__u64 (*key)(__u64 page); /* page i's content is fx_fill(seed = key(i)) */
	/*
	 * In B: provoke the event on [buf, buf + len) (fd: the backing file or -1),
	 * before: its pagemap entries just before; set moved[i] for each page
	 * it moved; return how many, or -1 to skip
	 * with the reason in mm_skip_reason.
	 */
	long (*trigger)(char *buf, __u64 len, int fd, const __u64 *before, __u8 *moved);
};

static char mm_skip_reason[256];
static char mm_pfns_pin[160]; /* npfd's npf_mm_pfns, pinned in its bpffs directory */

static inline __u64 mm_key_distinct(__u64 page)
{
	return 1000 + page;
}

static inline void mm_fill_page(char *p, const struct mm_event *ev, __u64 page)
{
	fx_fill(p, PG, ev->key(page));
}

/* pagemap entries of [buf, buf + n pages) of this process. */
static inline void mm_pagemap(const char *buf, __u64 n, __u64 *ent)
{
	int fd = open("/proc/self/pagemap", O_RDONLY);

	FX_ASSERT(fd >= 0, "open /proc/self/pagemap: %s", strerror(errno));
	FX_ASSERT(pread(fd, ent, n * 8, (off_t)((uintptr_t)buf / PG * 8)) == (ssize_t)(n * 8),
		  "read /proc/self/pagemap: %s", strerror(errno));
	close(fd);
}

#define MM_PRESENT (1ULL << 63)
#define MM_PFN(e) ((e) & ((1ULL << 55) - 1))

/* Pages resident before whose frame is now another, or none (swapped, dropped). */
static inline long mm_moved(const __u64 *before, const __u64 *after, __u64 n, __u8 *moved)
{
	long count = 0;
	__u64 i;

	for (i = 0; i < n; i++)
		if ((before[i] & MM_PRESENT) &&
		    (!(after[i] & MM_PRESENT) || MM_PFN(after[i]) != MM_PFN(before[i]))) {
			moved[i] = 1;
			count++;
		}
	return count;
}

static inline int mm_write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	ssize_t w;

	if (fd < 0)
		return -errno;
	w = write(fd, val, strlen(val));
	close(fd);
	return w == (ssize_t)strlen(val) ? 0 : -errno;
}

static inline int mm_read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t r;

	if (fd < 0)
		return -errno;
	r = read(fd, buf, len - 1);
	close(fd);
	if (r < 0)
		return -errno;
	buf[r] = 0;
	while (r && buf[r - 1] == '\n')
		buf[--r] = 0;
	return 0;
}

enum { MM_CMD_STOP = 0, MM_CMD_READ = 1 };

/* Every page of [buf, buf + n pages) resident, and its frame watched by npfd as that page. */
static inline void mm_expect_tracked(const char *buf, __u64 n, int region, const char *when)
{
	__u64 *ent = calloc(n, 8), i, missing, first = 0;
	int fd = bpf_obj_get(mm_pfns_pin);
	double end = th_now() + 2;

	FX_ASSERT(ent, "calloc");
	FX_ASSERT(fd >= 0, "npfd's watch list %s: %s (is the mm watch attached?)", mm_pfns_pin,
		  strerror(errno));
	do {
		missing = 0;
		mm_pagemap(buf, n, ent);
		for (i = 0; i < n; i++) {
			struct npf_mm_page v;
			__u64 pfn = MM_PFN(ent[i]);

			/* A frame several pages share (KSM): npfd keeps the list itself. */
			if (!(ent[i] & MM_PRESENT) || bpf_map_lookup_elem(fd, &pfn, &v) ||
			    (!(v.flags & NPF_MM_SHARED) &&
			     (v.addr != (uintptr_t)buf + i * PG || (int)v.region_id != region))) {
				if (!missing++)
					first = i;
			}
		}
		if (missing)
			usleep(2000);
	} while (missing && th_now() < end);
	close(fd);
	free(ent);
	FX_ASSERT(
		!missing,
		"B (%s): %llu of %llu pages are not watched by npfd for their frame (first: page %llu)",
		when, (unsigned long long)missing, (unsigned long long)n,
		(unsigned long long)first);
}

static const struct mm_event *mm_ev;

/* A's RDMA READ of B's whole region; every byte compared with what B wrote. */
static void mm_read_check(struct fx_ep *ep, struct nic_mr *mr, char *dst, struct fx_region *reg,
			  const char *when)
{
	char *want = malloc(PG);
	__u64 i, bad = 0;

	FX_ASSERT(want, "malloc");
	memset(dst, 0, reg->len);
	fx_stream(ep, NIC_WR_RDMA_READ, dst, reg->len / (256UL << 10), 256UL << 10, mr, reg->addr,
		  reg->rkey, 4);
	for (i = 0; i < reg->len / PG; i++) {
		mm_fill_page(want, mm_ev, i);
		if (memcmp(dst + i * PG, want, PG) && bad++ < 3)
			printf("A (%s): page %llu differs from what B wrote\n", when,
			       (unsigned long long)i);
	}
	free(want);
	FX_ASSERT(!bad, "A (%s): %llu of %llu pages read wrong", when, (unsigned long long)bad,
		  (unsigned long long)(reg->len / PG));
}

static int mm_side_a(int sock, void *arg)
{
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	__u32 cmd;
	char *dst;
	int region;

	fx_ep_open(&ep, NULL);
	dst = fx_alloc(mm_ev->len);
	region = fx_npf_register(c, dst, mm_ev->len, NULL);
	mr = fx_npf_mr(c, &ep, region, dst, mm_ev->len, NIC_ACCESS_LOCAL_WRITE, NULL);
	fx_qp(&ep, sock);
	fx_recv(sock, &reg, sizeof(reg));
	mm_read_check(&ep, mr, dst, &reg, "first READ");
	fx_sync(sock, 1);
	for (;;) {
		fx_recv(sock, &cmd, sizeof(cmd));
		if (cmd != MM_CMD_READ)
			break;
		mm_read_check(&ep, mr, dst, &reg, "READ after the event");
		printf("A: every byte read after the event is right\n");
		fx_sync(sock, 2);
	}
	fx_sync(sock, 3);
	fx_npf_close(c, &ep);
	return 0;
}

static __u64 mm_nic_page_requests(struct nic *nic)
{
	struct nic_stats st;

	nic_query_stats(nic, &st, sizeof(st));
	return st.page_requests;
}

/* One event on B's side: provoke it, see the entries go, have A read again. */
static void mm_round(int sock, struct npf_client *c, struct fx_ep *ep, struct fx_iopt *t, char *buf,
		     int fd, int region, __u64 *before, __u8 *moved, int round)
{
	const struct mm_event *ev = mm_ev;
	__u64 n = ev->len / PG, i, pr0, pr1, left, spurious = 0;
	long nmoved;
	double end;
	__u32 cmd;

	memset(moved, 0, n);
	mm_pagemap(buf, n, before);
	nmoved = ev->trigger(buf, ev->len, fd, before, moved);
	if (nmoved < 0) {
		cmd = MM_CMD_STOP;
		fx_send(sock, &cmd, sizeof(cmd));
		fx_sync(sock, 3);
		fx_npf_close(c, ep);
		fx_skip("%s", mm_skip_reason);
	}
	printf("B: round %d: %s moved %ld of %llu pages of the region\n", round + 1, ev->name,
	       nmoved, (unsigned long long)n);
	FX_ASSERT(ev->expect_none ? nmoved == 0 : nmoved > 0, "B: %s moved %ld pages, expected %s",
		  ev->name, nmoved, ev->expect_none ? "none" : "some");

	/* npfd must clear every moved page's entry on its own, without any DMA. */
	end = th_now() + MM_WAIT_S;
	do {
		left = 0;
		for (i = 0; i < n; i++)
			if (moved[i] &&
			    (__atomic_load_n(&t->pte[i], __ATOMIC_ACQUIRE) & NPF_PTE_PRESENT))
				left++;
		if (!left)
			break;
		usleep(1000);
	} while (th_now() < end);
	for (i = 0; i < n; i++)
		if (!moved[i] && !(__atomic_load_n(&t->pte[i], __ATOMIC_ACQUIRE) & NPF_PTE_PRESENT))
			spurious++;
	printf("B: %llu moved pages still mapped by the device after %d s; %llu unmoved pages invalidated\n",
	       (unsigned long long)left, MM_WAIT_S, (unsigned long long)spurious);
	if (left) {
		__u64 *now = calloc(n, 8), shown = 0;

		FX_ASSERT(now, "calloc");
		mm_pagemap(buf, n, now);
		for (i = 0; i < n && shown < 5; i++)
			if (moved[i] &&
			    (__atomic_load_n(&t->pte[i], __ATOMIC_ACQUIRE) & NPF_PTE_PRESENT)) {
				printf("B: page %llu: pagemap before 0x%llx, now 0x%llx; entry 0x%llx\n",
				       (unsigned long long)i, (unsigned long long)before[i],
				       (unsigned long long)now[i], (unsigned long long)t->pte[i]);
				shown++;
			}
		free(now);
	}
	FX_ASSERT(
		!left,
		"B: %llu of %ld pages the kernel moved (%s) are still present in the device's IO page table after %d s",
		(unsigned long long)left, nmoved, ev->name, MM_WAIT_S);
	if (ev->expect_none)
		FX_ASSERT(!spurious,
			  "B: %llu entries invalidated though %s moved no page of the region",
			  (unsigned long long)spurious, ev->name);

	pr0 = mm_nic_page_requests(ep->nic);
	cmd = MM_CMD_READ;
	fx_send(sock, &cmd, sizeof(cmd));
	fx_sync(sock, 2); /* A read everything again and found it right */
	pr1 = mm_nic_page_requests(ep->nic);
	printf("B: the READ after the event made %llu page requests\n",
	       (unsigned long long)(pr1 - pr0));
	if (nmoved || spurious)
		FX_ASSERT(pr1 > pr0, "B: the device read invalidated pages without a page request");
	for (i = 0; i < n; i++)
		FX_ASSERT(__atomic_load_n(&t->pte[i], __ATOMIC_ACQUIRE) & NPF_PTE_PRESENT,
			  "B: entry %llu is not present after A's READ after the event",
			  (unsigned long long)i);
	mm_expect_tracked(buf, n, region, "after the READ after the event");
}

static int mm_side_b(int sock, void *arg)
{
	NPF_OPTS(npf_region_opts, ro, .name = "mm-event");
	const struct mm_event *ev = mm_ev;
	__u64 n = ev->len / PG, i, *before;
	struct npf_client *c = fx_npf_connect();
	char path[] = "/tmp/npf-mm-XXXXXX", *buf, *raw;
	struct fx_ep ep = {0};
	struct fx_iopt t;
	struct fx_region reg;
	struct nic_mr *mr;
	__u8 *moved;
	__u32 cmd;
	int fd = -1, region, round;

	fx_ep_open(&ep, NULL);
	raw = fx_alloc(ev->len + MM_HUGE);
	buf = (char *)(((uintptr_t)raw + MM_HUGE - 1) & ~(MM_HUGE - 1));
	before = calloc(n, 8);
	moved = calloc(n, 1);
	FX_ASSERT(before && moved, "calloc");
	if (ev->file) {
		char *page = malloc(PG);

		FX_ASSERT(page, "malloc");
		fd = mkstemp(path);
		FX_ASSERT(fd >= 0, "mkstemp: %s", strerror(errno));
		unlink(path);
		for (i = 0; i < n; i++) {
			mm_fill_page(page, ev, i);
			FX_ASSERT(pwrite(fd, page, PG, (off_t)(i * PG)) == (ssize_t)PG,
				  "write file");
		}
		free(page);
		fsync(fd);
		ro.backing = NPF_BACKING_FILE;
		ro.backing_fd = fd;
	}
	region = fx_npf_register(c, buf, ev->len, &ro);
	mr = fx_npf_mr(c, &ep, region, buf, ev->len, NIC_ACCESS_REMOTE_READ, NULL);
	fx_iopt_map(&t, mr);
	if (!ev->file)
		for (i = 0; i < n; i++)
			mm_fill_page(buf + i * PG, ev, i);
	fx_qp(&ep, sock);
	reg = (struct fx_region){(uintptr_t)buf, ev->len, nic_mr_rkey(mr)};
	fx_send(sock, &reg, sizeof(reg));
	fx_sync(sock, 1); /* A has read everything once: every entry is present */
	mm_expect_tracked(buf, n, region, "after the first READ");
	for (i = 0; i < n; i++)
		FX_ASSERT(__atomic_load_n(&t.pte[i], __ATOMIC_ACQUIRE) & NPF_PTE_PRESENT,
			  "B: entry %llu is not present after A's first READ",
			  (unsigned long long)i);
	for (round = 0; round < (ev->rounds ? ev->rounds : 1); round++)
		mm_round(sock, c, &ep, &t, buf, fd, region, before, moved, round);
	cmd = MM_CMD_STOP;
	fx_send(sock, &cmd, sizeof(cmd));
	fx_sync(sock, 3);
	fx_npf_close(c, &ep);
	if (fd >= 0)
		close(fd);
	return 0;
}

static inline int mm_run(const struct mm_event *ev)
{
	static const char *const debug[] = {"-vv", NULL}; /* MM_DEBUG=1: npfd logs every record */
	struct th_npfd d;
	char line[512];
	FILE *f;
	int r;

	th_require_root();
	mm_ev = ev;
	th_npfd_start(&d, getenv("MM_DEBUG") ? debug : NULL);
	snprintf(mm_pfns_pin, sizeof(mm_pfns_pin), "%s/npf_mm_pfns", d.bpffs);
	fx_npfd_pid = d.pid;
	r = fx_pair(mm_side_a, mm_side_b, NULL, 60);
	if (!th_npfd_alive(&d)) {
		th_npfd_dump_log(&d);
		th_fail("npfd died during the test");
	}
	/* Which tracepoints reported the moves (npfd logs it when the watch goes down). */
	f = r == FX_SKIP ? NULL : fopen(d.log, "r"); /* a skip's reason stays the last line */
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "mm watch"))
			printf("npfd: %s", line);
	if (f)
		fclose(f);
	if (r == 1)
		th_npfd_dump_log(&d);
	th_npfd_stop(&d);
	if (!r)
		printf("PASS: %s: npfd invalidated the device entries of the moved pages; the next READ faulted and read the right bytes\n",
		       ev->name);
	return r;
}

#endif
