// SPDX-License-Identifier: GPL-2.0
/*
 * Invalidation racing DMA, through the real npfd (stress). A streams RDMA
 * WRITEs into B's npf region; B drives npfd's two invalidation paths:
 *
 *  - MADV_DONTNEED of random pages (hundreds per round). npfd gets
 *    UFFD_EVENT_REMOVE and invalidates the device's entries without waiting
 *    (the kernel does not wait for it either); the NIC acknowledges, and
 *    refaults the pages through page requests. Checked: every WRITE of the
 *    stream succeeds, the NIC acknowledged every invalidation npfd posted
 *    (npfd's count per device == the number of DONTNEEDs == the NIC's
 *    acks), and the final WRITE's data lands intact.
 *
 *  - Detach mid-stream: npf_client__detach_device() returns only after the
 *    NIC acknowledged that no DMA to the region is in flight (B's NIC
 *    acknowledges ACK_DELAY_US late, so a detach that did not wait returns
 *    before the NIC's count moves: asserted). Right after
 *    it returns B makes the whole region PROT_NONE for 100 ms while A's
 *    stream keeps arriving (and being refused: the entries are cleared and
 *    npfd no longer maps them). A DMA landing after the acknowledgement
 *    would hit a protected page and kill B with SIGSEGV. Then B deregisters
 *    the MR, A's stream ends with REM_ACCESS_ERR and flushed WRs, and the
 *    next round attaches a new MR.
 *
 *  - The effect of one DONTNEED, quiet (no stream): the region written
 *    whole, every entry present; DONTNEED of QUIET_N pages clears exactly
 *    their entries (PRESENT gone, version + 1; the others untouched) and is
 *    acknowledged; A's next WRITE of the whole region refaults them through
 *    page requests, and no DMA reaches a dropped page behind npfd's back
 *    (the region's userfaultfd fault count does not move: B's CPU never
 *    touches it, so a uffd fault there is a DMA into a zapped page).
 *    Under the stream, such DMAs are bounded by the pages dropped.
 *
 * What this proves, with the real npfd: "no write lands in a page after its
 * invalidation was acknowledged" for the acknowledgement npfd waits for
 * (detach/unregister), and that npfd's DONTNEED invalidations are each
 * acknowledged and leave the NIC working. What it cannot prove: after a
 * DONTNEED npfd may re-map the page for the next page request at any time,
 * so a write after that ack is legitimate and not observable as a
 * violation; and between the kernel's zap and npfd's clearing of the entry
 * (npfd learns of the REMOVE as the zap begins) a DMA can still reach the
 * page: it then takes a CPU fault in the NIC's engine thread that npfd
 * serves (counted below as uffd faults: B's CPU never touches the region
 * during the stream, so every uffd fault there is such a DMA).
 */
#include <poll.h>
#include <sched.h>
#include "nic_fixture.h"

#define REG (256UL << 10)
#define NPG (REG / PG)
#define WR_LEN (16UL << 10)
#define ROUNDS 4
#define EVICTIONS 300
#define ACK_DELAY_US 2000
#define QUIET_FIRST 8
#define QUIET_N 4

static __u64 nic_acks(struct nic *nic)
{
	struct nic_stats st;

	nic_query_stats(nic, &st, sizeof(st));
	return st.invalidations;
}

static int side_b(int sock, void *arg)
{
	int acc = NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE;
	struct nic_opts slow = {.sz = sizeof(slow), .inval_ack_delay_us = ACK_DELAY_US};
	struct npf_client *c = fx_npf_connect();
	__u64 before[NPG], dropped = 0, uffd0;
	struct fx_iopt iopt;
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	struct nic_qp *qp;
	struct nic_stats s0, s1;
	struct npf_device_info di;
	struct npf_region_stats rs;
	char *buf;
	__u64 posted = 0, sum, e;
	unsigned int rnd = 1;
	int region, dev, round, err;
	double t0;
	char ch;

	fx_ep_open(&ep, &slow);
	buf = fx_alloc(REG);
	region = fx_npf_register(c, buf, REG, NULL);
	for (round = 0; round < ROUNDS; round++) {
		mr = fx_npf_mr(c, &ep, region, buf, REG, acc, &dev);
		qp = fx_qp(&ep, sock);
		reg = (struct fx_region){(uintptr_t)buf, REG, nic_mr_rkey(mr)};
		fx_send(sock, &reg, sizeof(reg));
		fx_sync(sock, 1); /* A is streaming */

		for (e = 0; e < EVICTIONS; e++) {
			__u64 first = rand_r(&rnd) % NPG, n = 1 + rand_r(&rnd) % 4, i;

			if (first + n > NPG)
				n = NPG - first;
			FX_ASSERT(!madvise(buf + first * PG, n * PG, MADV_DONTNEED),
				  "MADV_DONTNEED: %s", strerror(errno));
			dropped += n;
			for (i = 0; i < 50; i++)
				sched_yield(); /* let the NIC refault some */
		}
		/* every invalidation npfd posted for a DONTNEED is acknowledged */
		for (t0 = th_now(); nic_acks(ep.nic) < posted + EVICTIONS && th_now() - t0 < 10;)
			usleep(1000);
		di = fx_device_info(c, dev);
		posted += di.invalidations; /* this device's: one per DONTNEED, see below */
		for (t0 = th_now(); nic_acks(ep.nic) < posted && th_now() - t0 < 10;)
			usleep(1000);
		nic_query_stats(ep.nic, &s1, sizeof(s1));
		rs = fx_region_stats(c, region);
		printf("B round %d: the NIC raised %llu page requests in all, got %llu responses; npfd: BPF counted %llu device faults, answered %llu groups of this device\n",
		       round, (unsigned long long)s1.page_requests,
		       (unsigned long long)s1.page_responses, (unsigned long long)rs.device_faults,
		       (unsigned long long)di.page_requests);
		/*
		 * One per DONTNEED; the mm watch (a device is attached) may add
		 * a few for frames freed while a page was being refaulted, whose
		 * new frame it had not tracked yet (a known race: harmless, it
		 * costs a refault). A mm watch that invalidated on every freed
		 * frame would add hundreds here.
		 */
		FX_ASSERT(di.invalidations >= EVICTIONS &&
				  di.invalidations <= EVICTIONS + EVICTIONS / 20,
			  "round %d: npfd posted %llu invalidations for %d DONTNEEDs", round,
			  (unsigned long long)di.invalidations, EVICTIONS);
		FX_ASSERT(nic_acks(ep.nic) == posted, "round %d: the NIC acknowledged %llu of %llu",
			  round, (unsigned long long)nic_acks(ep.nic), (unsigned long long)posted);

		/* detach under the stream: npfd returns after the NIC's (late) ack */
		t0 = th_now();
		err = npf_client__detach_device(c, (__u32)dev);
		FX_ASSERT(!err, "detach: %s (%s)", strerror(-err), npf_client__errmsg(c));
		posted++;
		FX_ASSERT(
			nic_acks(ep.nic) == posted,
			"round %d: detach returned after %.2f ms, before the NIC acknowledged (%llu of %llu)",
			round, (th_now() - t0) * 1e3, (unsigned long long)nic_acks(ep.nic),
			(unsigned long long)posted);
		nic_query_stats(ep.nic, &s0, sizeof(s0));
		FX_ASSERT(!mprotect(buf, REG, PROT_NONE), "mprotect: %s", strerror(errno));
		usleep(100 * 1000); /* A's packets keep arriving: none may land */
		FX_ASSERT(!mprotect(buf, REG, PROT_READ | PROT_WRITE), "mprotect: %s",
			  strerror(errno));
		nic_query_stats(ep.nic, &s1, sizeof(s1));
		printf("B round %d: %d DONTNEEDs -> %llu npfd invalidations, all acked; %llu page "
		       "requests answered; after detach, 100 ms PROT_NONE: %llu packets received, "
		       "%llu RNR NAKs, no DMA\n",
		       round, EVICTIONS, (unsigned long long)di.invalidations,
		       (unsigned long long)di.page_requests,
		       (unsigned long long)(s1.pkts_rx - s0.pkts_rx),
		       (unsigned long long)(s1.rnr_nak_tx - s0.rnr_nak_tx));
		FX_ASSERT(!nic_dereg_mr(mr), "nic_dereg_mr");
		fx_recv(sock, &ch, 1); /* A's stream ended in error completions */
		FX_ASSERT(!nic_destroy_qp(qp), "nic_destroy_qp");
		fx_sync(sock, 2);
	}

	/* a last MR: the whole region written once more, checked */
	mr = fx_npf_mr(c, &ep, region, buf, REG, acc, &dev);
	qp = fx_qp(&ep, sock);
	reg = (struct fx_region){(uintptr_t)buf, REG, nic_mr_rkey(mr)};
	fx_send(sock, &reg, sizeof(reg));
	fx_recv(sock, &sum, sizeof(sum));
	FX_ASSERT(fx_sum(buf, REG) == sum, "final WRITE: checksum mismatch");
	fx_expect_page_requests(c, "B", region, dev);
	rs = fx_region_stats(c, region);
	printf("B: %llu mm events; %llu uffd faults (DMA that reached a page between the kernel's "
	       "zap and npfd's invalidation), %llu pages dropped\n",
	       (unsigned long long)rs.mm_events, (unsigned long long)rs.uffd_faults,
	       (unsigned long long)dropped);
	FX_ASSERT(rs.mm_events >= ROUNDS * EVICTIONS, "npfd saw %llu mm events, expected %d",
		  (unsigned long long)rs.mm_events, ROUNDS * EVICTIONS);
	/* each dropped page can be reached once before npfd clears its entry, no more */
	FX_ASSERT(rs.uffd_faults <= dropped, "%llu DMAs reached dropped pages, %llu were dropped",
		  (unsigned long long)rs.uffd_faults, (unsigned long long)dropped);

	/* quiet: one DONTNEED and its effect on the IO page table */
	fx_iopt_map(&iopt, mr);
	for (e = 0; e < NPG; e++) {
		before[e] = __atomic_load_n(&iopt.pte[e], __ATOMIC_ACQUIRE);
		FX_ASSERT(before[e] & NPF_PTE_PRESENT,
			  "entry %llu not present after the whole WRITE", (unsigned long long)e);
	}
	uffd0 = rs.uffd_faults;
	posted = nic_acks(ep.nic);
	FX_ASSERT(!madvise(buf + QUIET_FIRST * PG, QUIET_N * PG, MADV_DONTNEED),
		  "MADV_DONTNEED: %s", strerror(errno));
	for (t0 = th_now(); nic_acks(ep.nic) == posted && th_now() - t0 < 5;)
		usleep(200);
	FX_ASSERT(nic_acks(ep.nic) == posted + 1,
		  "the DONTNEED was not invalidated and acknowledged");
	for (e = 0; e < NPG; e++) {
		__u64 now = __atomic_load_n(&iopt.pte[e], __ATOMIC_ACQUIRE);
		bool in = e >= QUIET_FIRST && e < QUIET_FIRST + QUIET_N;

		FX_ASSERT(!(now & NPF_PTE_PRESENT) == in, "entry %llu %s after the DONTNEED",
			  (unsigned long long)e, in ? "still present" : "cleared");
		FX_ASSERT(now >> NPF_PTE_VERSION_SHIFT == (before[e] >> NPF_PTE_VERSION_SHIFT) + in,
			  "entry %llu: version %llu, was %llu", (unsigned long long)e,
			  (unsigned long long)(now >> NPF_PTE_VERSION_SHIFT),
			  (unsigned long long)(before[e] >> NPF_PTE_VERSION_SHIFT));
	}
	nic_query_stats(ep.nic, &s0, sizeof(s0));
	fx_sync(sock, 4); /* A writes the whole region again */
	fx_recv(sock, &sum, sizeof(sum));
	FX_ASSERT(fx_sum(buf, REG) == sum, "WRITE after the DONTNEED: checksum mismatch");
	nic_query_stats(ep.nic, &s1, sizeof(s1));
	rs = fx_region_stats(c, region);
	printf("B: quiet DONTNEED of %d pages: exactly their entries cleared (version + 1), acknowledged; the next WRITE raised %llu page requests and %llu uffd faults\n",
	       QUIET_N, (unsigned long long)(s1.page_requests - s0.page_requests),
	       (unsigned long long)(rs.uffd_faults - uffd0));
	FX_ASSERT(s1.page_requests > s0.page_requests,
		  "the dropped pages were not asked for again");
	FX_ASSERT(rs.uffd_faults == uffd0,
		  "%llu DMAs reached dropped pages behind npfd's back (entries left present?)",
		  (unsigned long long)(rs.uffd_faults - uffd0));
	munmap(iopt.h, iopt.size);
	fx_sync(sock, 3);
	fx_npf_close(c, &ep);
	return 0;
}

/* WRITE stream until the first error completion; then drain the flushed rest. */
static void stream(struct fx_ep *ep, struct nic_qp *qp, char *src, struct nic_mr *mr,
		   const struct fx_region *reg, int round)
{
	__u64 posted = 0, done = 0, ok = 0;
	enum nic_wc_status first_err = NIC_WC_SUCCESS;
	struct nic_wc wc;

	while (first_err == NIC_WC_SUCCESS || done < posted) {
		if (first_err == NIC_WC_SUCCESS && posted - done < 256) {
			__u64 off = (posted * 7919UL * PG) % (REG - WR_LEN);

			if (!fx_post(qp, NIC_WR_RDMA_WRITE, posted, src + off, WR_LEN, mr,
				     reg->addr + off, reg->rkey)) {
				posted++;
				continue;
			}
		}
		fx_wait_wc(ep->cq, &wc, 20000);
		done++;
		if (wc.status == NIC_WC_SUCCESS) {
			FX_ASSERT(first_err == NIC_WC_SUCCESS, "a WRITE succeeded after an error");
			ok++;
		} else if (first_err == NIC_WC_SUCCESS) {
			first_err = wc.status;
			FX_ASSERT(wc.status == NIC_WC_REM_ACCESS_ERR,
				  "round %d: WRITE %llu: '%s' (want remote access error)", round,
				  (unsigned long long)wc.wr_id, nic_wc_status_str(wc.status));
		} else {
			FX_ASSERT(wc.status == NIC_WC_WR_FLUSH_ERR, "after the error: '%s'",
				  nic_wc_status_str(wc.status));
		}
	}
	printf("A round %d: %llu WRITEs of 16 KiB succeeded, then %s and %llu flushed\n", round,
	       (unsigned long long)ok, nic_wc_status_str(first_err),
	       (unsigned long long)(done - ok - 1));
	/* open bug (reported): a page request BPF never saw leaves the stream stalled */
	if (!ok)
		printf("NOTE: round %d: no WRITE succeeded before the detach (the stream stalled)\n",
		       round);
}

static int side_a(int sock, void *arg)
{
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	struct nic_qp *qp;
	char *src;
	__u64 sum;
	int region, round;
	char e = 'E';

	fx_ep_open(&ep, NULL);
	src = fx_alloc(REG);
	region = fx_npf_register(c, src, REG, NULL);
	fx_fill(src, REG, 11);
	mr = fx_npf_mr(c, &ep, region, src, REG, NIC_ACCESS_LOCAL_WRITE, NULL);
	for (round = 0; round < ROUNDS; round++) {
		qp = fx_qp(&ep, sock);
		fx_recv(sock, &reg, sizeof(reg));
		fx_sync(sock, 1);
		stream(&ep, qp, src, mr, &reg, round);
		fx_send(sock, &e, 1);
		fx_sync(sock, 2);
		FX_ASSERT(!nic_destroy_qp(qp), "nic_destroy_qp");
	}
	qp = fx_qp(&ep, sock);
	fx_recv(sock, &reg, sizeof(reg));
	fx_fill(src, REG, 12);
	FX_ASSERT(!fx_post(qp, NIC_WR_RDMA_WRITE, 99999, src, REG, mr, reg.addr, reg.rkey), "post");
	fx_expect_wc(ep.cq, 99999, NIC_WC_SUCCESS);
	sum = fx_sum(src, REG);
	fx_send(sock, &sum, sizeof(sum));
	fx_sync(sock, 4);
	fx_fill(src, REG, 13);
	FX_ASSERT(!fx_post(qp, NIC_WR_RDMA_WRITE, 100000, src, REG, mr, reg.addr, reg.rkey),
		  "post");
	fx_expect_wc(ep.cq, 100000, NIC_WC_SUCCESS);
	sum = fx_sum(src, REG);
	fx_send(sock, &sum, sizeof(sum));
	fx_sync(sock, 3);
	fx_npf_close(c, &ep);
	return 0;
}

int main(void)
{
	int r = fx_pair_npfd(side_a, side_b, NULL, 80);

	if (!r)
		printf("PASS: npfd's invalidations acknowledged under a WRITE stream; no DMA after a detach's acknowledgement\n");
	return r;
}
