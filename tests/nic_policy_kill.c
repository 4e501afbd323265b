// SPDX-License-Identifier: GPL-2.0
/*
 * The policy kill switch on the device-fault path. B's region has the pi4
 * policy (page in the 16 KiB block around a fault); A RDMA-WRITEs one page
 * into the middle of a block of never-touched pages, three times:
 *  1. policy on: B's NIC raises one page request and npfd installs the
 *     whole block -- 4 IO page table entries present, 4 pages zero-filled
 *     and resident in B (pagemap), the policy's decision counted;
 *  2. `npfctl policy disable` (npf_client__policy_enable(false)): the same
 *     write into another block gets the built-in decision in BPF -- only
 *     the written page present and installed, the block's other 3 pages
 *     neither, the policy credited with no decision;
 *  3. enabled again: the block again.
 * The written bytes land each time. Effects are counted (entries, pages,
 * counters), never messages: a kill switch that does not reach the
 * uprobe's check (bpf/npf_collect.bpf.c) fails part 2.
 */
#include "nic_fixture.h"

#define NPG 64UL
#define BLOCK 4UL /* pi4's block, pages */
#define POLICY "kill-pi4"

struct counts {
	__u64 zeroed, mapped, device_faults, decisions;
};

static struct counts counts(struct npf_client *c, int region, int dev)
{
	struct npf_region_stats rs = fx_region_stats(c, region);
	struct npf_device_info di = fx_device_info(c, dev);
	struct npf_policy_status *ps;
	struct counts k = {rs.pages_zeroed, di.pages_mapped, rs.device_faults, 0};
	size_t n, i;

	FX_ASSERT(!npf_client__policy_list(c, &ps, &n), "policy list: %s", npf_client__errmsg(c));
	for (i = 0; i < n; i++)
		if (!strcmp(ps[i].name, POLICY))
			k.decisions = ps[i].invocations;
	free(ps);
	return k;
}

/* Is page pg of buf resident in this process (pagemap bit 63)? Never touches it. */
static bool resident(const char *buf, __u64 pg)
{
	__u64 ent = 0, va = (uintptr_t)buf + pg * PG;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	FX_ASSERT(fd >= 0 && pread(fd, &ent, 8, (off_t)(va / PG * 8)) == 8, "pagemap: %s",
		  strerror(errno));
	close(fd);
	return ent >> 63;
}

/* Which of the region's pages have a present entry / are resident, as a bit mask. */
static __u64 present_mask(const struct fx_iopt *t)
{
	__u64 m = 0, i;

	for (i = 0; i < NPG; i++)
		if (__atomic_load_n(&t->pte[i], __ATOMIC_ACQUIRE) & NPF_PTE_PRESENT)
			m |= 1ULL << i;
	return m;
}

static __u64 resident_mask(const char *buf)
{
	__u64 m = 0, i;

	for (i = 0; i < NPG; i++)
		if (resident(buf, i))
			m |= 1ULL << i;
	return m;
}

/*
 * After A's write into page pg completed: the entries present must become
 * exactly `want` (npfd may install a prefetched page just after answering:
 * wait for it, up to 5 s), and stay so (200 ms more: a page the policy
 * should not have fetched has had time to come).
 */
static void expect_present(const struct fx_iopt *t, const char *buf, __u64 want, const char *what)
{
	double end = th_now() + 5;
	__u64 got;

	while ((got = present_mask(t)) != want && th_now() < end)
		usleep(1000);
	usleep(200 * 1000);
	got = present_mask(t);
	FX_ASSERT(got == want, "%s: IO page table entries present %#llx, expected %#llx", what,
		  (unsigned long long)got, (unsigned long long)want);
	got = resident_mask(buf);
	FX_ASSERT(got == want, "%s: pages resident in B %#llx, expected %#llx", what,
		  (unsigned long long)got, (unsigned long long)want);
}

static void load_pi4(struct npf_client *c, int region)
{
	char path[512];
	int fd, r;

	snprintf(path, sizeof(path), "%s/../policies/pi4.bpf.o", th_bin_dir());
	fd = open(path, O_RDONLY | O_CLOEXEC);
	FX_ASSERT(fd >= 0, "open %s: %s (make builds the policies)", path, strerror(errno));
	r = npf_client__policy_load(c, fd, (__u32)region, POLICY, NULL);
	close(fd);
	FX_ASSERT(r >= 0, "load pi4 for region %d: %s (%s)", region, strerror(-r),
		  npf_client__errmsg(c));
}

static int side_b(int sock, void *arg)
{
	int acc = NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE;
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct fx_iopt iopt;
	struct counts k0, k1;
	struct nic_mr *mr;
	__u64 want = 0, sum;
	char *raw, *buf;
	int region, dev, part, r;

	(void)arg;
	fx_ep_open(&ep, NULL);
	/* pi4's blocks are of the address: align the buffer to a block */
	raw = fx_alloc(NPG * PG + BLOCK * PG);
	buf = (char *)(((uintptr_t)raw + BLOCK * PG - 1) & ~(BLOCK * PG - 1));
	region = fx_npf_register(c, buf, NPG * PG, NULL);
	mr = fx_npf_mr(c, &ep, region, buf, NPG * PG, acc, &dev);
	fx_iopt_map(&iopt, mr);
	load_pi4(c, region);
	fx_qp(&ep, sock);
	reg = (struct fx_region){(uintptr_t)buf, NPG * PG, nic_mr_rkey(mr)};
	fx_send(sock, &reg, sizeof(reg));
	FX_ASSERT(present_mask(&iopt) == 0 && resident_mask(buf) == 0,
		  "pages present before any write");

	for (part = 1; part <= 3; part++) {
		/* part p writes page 1 of block 2p-1: pages 4..7, 12..15, 20..23 */
		__u64 block = 2 * part - 1, pg = block * BLOCK + 1;
		bool on = part != 2;
		__u64 adds = on ? BLOCK : 1;

		r = npf_client__policy_enable(c, on);
		FX_ASSERT(!r, "kill switch %s: %s", on ? "on" : "off", npf_client__errmsg(c));
		k0 = counts(c, region, dev);
		fx_sync(sock, part);		  /* A writes page pg */
		fx_recv(sock, &sum, sizeof(sum)); /* its completion came */
		want |= on ? 0xfULL << (block * BLOCK) : 1ULL << pg;
		expect_present(&iopt, buf, want, on ? "policy on" : "policy disabled");
		k1 = counts(c, region, dev);
		printf("%d: policy %s: a 1-page WRITE into page %llu: %llu device fault(s), %llu "
		       "page(s) zero-filled, %llu entries mapped, %llu policy decision(s)\n",
		       part, on ? "on" : "disabled", (unsigned long long)pg,
		       (unsigned long long)(k1.device_faults - k0.device_faults),
		       (unsigned long long)(k1.zeroed - k0.zeroed),
		       (unsigned long long)(k1.mapped - k0.mapped),
		       (unsigned long long)(k1.decisions - k0.decisions));
		FX_ASSERT(k1.device_faults > k0.device_faults, "%d: BPF counted no device fault",
			  part);
		FX_ASSERT(k1.zeroed - k0.zeroed == adds && k1.mapped - k0.mapped == adds,
			  "%d: npfd zero-filled %llu pages and mapped %llu entries, expected %llu "
			  "(policy %s)",
			  part, (unsigned long long)(k1.zeroed - k0.zeroed),
			  (unsigned long long)(k1.mapped - k0.mapped), (unsigned long long)adds,
			  on ? "on" : "disabled");
		if (on)
			FX_ASSERT(k1.decisions > k0.decisions,
				  "%d: the policy is on and made no decision", part);
		else
			FX_ASSERT(k1.decisions == k0.decisions,
				  "%d: the kill switch is off and the policy made %llu decision(s)",
				  part, (unsigned long long)(k1.decisions - k0.decisions));
		FX_ASSERT(fx_sum(buf + pg * PG, PG) == sum, "%d: the written page differs", part);
	}
	fx_sync(sock, 9);
	npf_client__policy_unload(c, POLICY);
	fx_npf_close(c, &ep);
	return 0;
}

static int side_a(int sock, void *arg)
{
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct fx_iopt t;
	struct nic_mr *mr;
	char *src;
	int part;

	(void)arg;
	fx_ep_open(&ep, NULL);
	src = fx_alloc(PG);
	mr = nic_reg_mr(ep.pd, src, PG, NIC_ACCESS_LOCAL_WRITE);
	FX_ASSERT(mr, "nic_reg_mr: %s", strerror(errno));
	fx_iopt_map(&t, mr);
	nic_test_mark_present(&t, (uintptr_t)src, PG); /* A's source never faults */
	fx_qp(&ep, sock);
	fx_recv(sock, &reg, sizeof(reg));
	for (part = 1; part <= 3; part++) {
		__u64 pg = (2 * part - 1) * BLOCK + 1, sum;

		fx_fill(src, PG, (__u64)part);
		sum = fx_sum(src, PG);
		fx_sync(sock, part);
		FX_ASSERT(!fx_post(ep.qp, NIC_WR_RDMA_WRITE, part, src, PG, mr, reg.addr + pg * PG,
				   reg.rkey),
			  "post");
		fx_expect_wc(ep.cq, part, NIC_WC_SUCCESS);
		fx_send(sock, &sum, sizeof(sum));
	}
	fx_sync(sock, 9);
	nic_close(ep.nic);
	return 0;
}

int main(void)
{
	int r;

	th_require_root();
	r = fx_pair_npfd(side_a, side_b, NULL, 60);
	if (!r)
		printf("PASS: the kill switch gives device faults the built-in decision, and back\n");
	return r;
}
