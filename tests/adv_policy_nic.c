// SPDX-License-Identifier: GPL-2.0
/*
 * The policy watchdog on the device-fault path (issue 10: "a watchdog that
 * disables a policy whose decisions run long"). A software-NIC target's
 * region has the policy 'adv_slow' (tests/policies/adv_slow.bpf.c: every
 * decision spins for milliseconds, run by the NIC's page-request uprobe);
 * an initiator RDMA WRITEs into it one page per work request, so each page
 * is one device fault decided by that policy. Checked:
 *  - the watchdog disables 'adv_slow' (its state, NPF_POLICY_WATCHDOG_RUN
 *    slow decisions or more), counted from the device's decisions alone
 *    (no CPU fault touches the region before the check);
 *  - every work request completes successfully, every byte written is
 *    there, every page request is answered: the device faults decided by
 *    the slow policy and those after it (the built-in decision) are served;
 *  - once disabled, the policy decides nothing more (its invocations stay
 *    the same over a second round of device faults).
 */
#include <sys/stat.h>
#include "adv.h"
#include "nic_fixture.h"

#define NPAGES 96 /* per round: more than NPF_POLICY_WATCHDOG_RUN */

static char obj[256];

static uint8_t pattern(uint64_t off)
{
	return (uint8_t)((off >> 12) * 29 + (off & 0xfff) * 5 + 3);
}

/* A QP that waits for a responder stalled in slow page requests (as restart_kill does). */
static void qp_open(struct fx_ep *ep, int sock)
{
	NIC_OPTS(nic_qp_init_attr, qa, .send_cq = ep->cq, .recv_cq = ep->cq, .max_send_wr = 1024,
		 .max_recv_wr = 1024, .timeout_us = 100000);
	int err;

	ep->qp = nic_create_qp(ep->pd, &qa);
	FX_ASSERT(ep->qp, "nic_create_qp: %s", strerror(errno));
	err = nic_qp_connect_fd(ep->qp, sock);
	FX_ASSERT(!err, "nic_qp_connect_fd: %s", strerror(-err));
}

static bool slow_health(struct npf_client *c, struct npf_policy_health *out)
{
	struct npf_policy_health *hs;
	size_t n, i;
	bool found = false;

	FX_ASSERT(!npf_client__policy_health(c, &hs, &n), "policy health: %s",
		  npf_client__errmsg(c));
	for (i = 0; i < n; i++)
		if (!strcmp(hs[i].name, "slow")) {
			*out = hs[i];
			found = true;
		}
	free(hs);
	return found;
}

static __u64 slow_invocations(struct npf_client *c)
{
	struct npf_policy_status *ps;
	size_t n, i;
	__u64 inv = 0;

	FX_ASSERT(!npf_client__policy_list(c, &ps, &n), "policy list: %s", npf_client__errmsg(c));
	for (i = 0; i < n; i++)
		if (!strcmp(ps[i].name, "slow"))
			inv += ps[i].invocations;
	free(ps);
	return inv;
}

static void check_bytes(const char *mem, const char *when)
{
	uint64_t off, bad = 0;

	for (off = 0; off < NPAGES * PG; off++)
		if ((uint8_t)mem[off] != pattern(off) && bad++ < 3)
			printf("%s: byte %llu is 0x%02x, want 0x%02x\n", when,
			       (unsigned long long)off, (uint8_t)mem[off], pattern(off));
	FX_ASSERT(!bad, "%s: %llu bytes differ: device faults not served", when,
		  (unsigned long long)bad);
}

static int target(int sock, void *arg)
{
	struct npf_client *c = fx_npf_connect();
	char *mem = fx_alloc(NPAGES * PG);
	struct npf_policy_status st;
	struct npf_policy_health h;
	struct nic_stats ns;
	struct fx_region r;
	struct fx_ep ep = {0};
	struct nic_mr *mr;
	int region, device, fd, rc;
	__u64 inv;

	region = fx_npf_register(c, mem, NPAGES * PG, NULL);
	fx_ep_open(&ep, NULL);
	qp_open(&ep, sock);
	mr = fx_npf_mr(c, &ep, region, mem, NPAGES * PG,
		       NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE, &device);
	fd = open(obj, O_RDONLY | O_CLOEXEC);
	FX_ASSERT(fd >= 0, "open %s: %s", obj, strerror(errno));
	rc = npf_client__policy_load(c, fd, (__u32)region, NULL, &st);
	FX_ASSERT(rc > 0, "load 'slow' for region %d: %s", region, npf_client__errmsg(c));
	close(fd);
	r = (struct fx_region){(__u64)(uintptr_t)mem, NPAGES * PG, nic_mr_rkey(mr), 0};
	fx_send(sock, &r, sizeof(r));

	/* round 1: the initiator's writes fault; 'slow' decides until the watchdog stops it */
	fx_sync(sock, 1);
	FX_ASSERT(slow_health(c, &h), "'slow' has no health entry");
	inv = slow_invocations(c);
	printf("after %d device faults: 'slow' state %u, %llu slow decisions, %llu decisions\n",
	       NPAGES, h.state, (unsigned long long)h.slow_decisions, (unsigned long long)inv);
	FX_ASSERT(
		h.state == NPF_POLICY_WATCHDOG,
		"the watchdog did not disable 'slow' on the device path (state %u, %llu slow decisions)",
		h.state, (unsigned long long)h.slow_decisions);
	FX_ASSERT(h.slow_decisions >= NPF_POLICY_WATCHDOG_RUN, "only %llu slow decisions",
		  (unsigned long long)h.slow_decisions);
	FX_ASSERT(inv > 0, "'slow' decided no device fault");
	check_bytes(mem, "round 1");

	/* round 2: the pages dropped, every write faults again: the built-in decision serves it */
	FX_ASSERT(!madvise(mem, NPAGES * PG, MADV_DONTNEED), "madvise: %s", strerror(errno));
	fx_sync(sock, 2);
	fx_sync(sock, 3);
	check_bytes(mem, "round 2");
	FX_ASSERT(slow_invocations(c) == inv,
		  "'slow' still decides after the watchdog: %llu -> %llu", (unsigned long long)inv,
		  (unsigned long long)slow_invocations(c));
	fx_expect_page_requests(c, "target", region, device);
	FX_ASSERT(!nic_query_stats(ep.nic, &ns, sizeof(ns)), "nic_query_stats");
	printf("target NIC: %llu page requests, %llu answers\n",
	       (unsigned long long)ns.page_requests, (unsigned long long)ns.page_responses);
	FX_ASSERT(ns.page_requests >= NPAGES && ns.page_responses >= ns.page_requests,
		  "%llu page requests, %llu answers", (unsigned long long)ns.page_requests,
		  (unsigned long long)ns.page_responses);
	fx_npf_close(c, &ep);
	return 0;
}

/* One page per work request, one at a time: each page is a device fault of its own. */
static void write_pages(struct fx_ep *ep, char *buf, struct nic_mr *mr, const struct fx_region *r)
{
	uint64_t i;

	for (i = 0; i < NPAGES; i++) {
		FX_ASSERT(!fx_post(ep->qp, NIC_WR_RDMA_WRITE, i, buf + i * PG, (__u32)PG, mr,
				   r->addr + i * PG, r->rkey),
			  "post WR %llu", (unsigned long long)i);
		fx_expect_wc(ep->cq, i, NIC_WC_SUCCESS);
	}
}

static int initiator(int sock, void *arg)
{
	char *buf = fx_alloc(NPAGES * PG);
	struct fx_ep ep = {0};
	struct fx_region r;
	struct nic_mr *mr;
	uint64_t off;

	for (off = 0; off < NPAGES * PG; off++)
		buf[off] = (char)pattern(off);
	fx_ep_open(&ep, NULL);
	qp_open(&ep, sock);
	/* its own memory is resident and not npf's: marked present, it never faults */
	mr = nic_reg_mr(ep.pd, buf, NPAGES * PG, NIC_ACCESS_LOCAL_WRITE);
	FX_ASSERT(mr, "nic_reg_mr: %s", strerror(errno));
	{
		struct fx_iopt t;

		fx_iopt_map(&t, mr);
		nic_test_mark_present(&t, (__u64)(uintptr_t)buf, NPAGES * PG);
	}
	fx_recv(sock, &r, sizeof(r));
	write_pages(&ep, buf, mr, &r);
	fx_sync(sock, 1);
	fx_sync(sock, 2);
	write_pages(&ep, buf, mr, &r);
	fx_sync(sock, 3);
	nic_close(ep.nic);
	return 0;
}

int main(void)
{
	char dir[] = "/tmp/npf-adv-policy-nic-XXXXXX";
	int rc;

	th_require_root();
	TH_ASSERT(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	adv_compile_policy("adv_slow", dir, obj, sizeof(obj));
	rc = fx_pair_npfd(initiator, target, NULL, 120);
	unlink(obj);
	rmdir(dir);
	if (!rc)
		printf("PASS: the watchdog disabled a slow policy on the device path; every device fault served\n");
	return rc;
}
