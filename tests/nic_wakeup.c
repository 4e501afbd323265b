// SPDX-License-Identifier: GPL-2.0
/*
 * Device page requests reach npfd whether it polls or sleeps.
 *
 * For poll-us after a device record npfd busy-polls the BPF ring buffer,
 * and meanwhile the uprobe program submits device records WITHOUT waking
 * it; when it stops polling it must see every record submitted so far
 * (npf_shared_maps.h). A record that slipped through would sit in the
 * ring while npfd sleeps, and the NIC would report it again after
 * NIC_PR_REISSUE_MS: page_requests_reissued counts exactly that.
 *
 *  1. The first fault of a freshly attached MR, 40 times (each time a new
 *     region, MR and attachment): answered, not re-reported.
 *  2. 400 faulting 4 KiB WRITEs, each after a pause drawn from 0 µs to
 *     npfd's 200 ms idle timeout, most of them around npfd's 100 µs poll
 *     window: the fault lands while npfd polls, as it stops, and while it
 *     sleeps. Every one is answered, none re-reported, and the data lands.
 *
 * Side B is the WRITE target (its pages mapped once, by a first WRITE).
 */
#include "nic_fixture.h"

#define NATTACH 40
#define NFAULT 400
#define DST (64 * PG)

/* Pauses that straddle npfd's poll window (100 µs) and its 200 ms idle wait. */
static useconds_t pause_us(unsigned int i)
{
	static const useconds_t edge[] = {0, 20, 60, 90, 100, 110, 130, 200, 500, 2000};

	if (i % 100 == 99)
		return 210 * 1000; /* npfd has slept through a whole idle timeout */
	return edge[i % 10] + (useconds_t)(rand() % 40);
}

static __u64 reissued(struct fx_ep *ep)
{
	struct nic_stats st;

	nic_query_stats(ep->nic, &st, sizeof(st));
	return st.page_requests_reissued;
}

/* WRITE 4 KiB from src (a page npfd has not mapped for the device) and wait for it. */
static void write_page(struct fx_ep *ep, char *src, struct nic_mr *mr, const struct fx_region *dst,
		       __u64 off, __u64 wr_id)
{
	int err =
		fx_post(ep->qp, NIC_WR_RDMA_WRITE, wr_id, src, PG, mr, dst->addr + off, dst->rkey);

	FX_ASSERT(!err, "post WRITE: %s", strerror(-err));
	fx_expect_wc(ep->cq, wr_id, NIC_WC_SUCCESS);
}

static int side_a(int sock, void *arg)
{
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region dst;
	struct nic_mr *mr;
	char *buf;
	int region, dev;
	__u64 before, i;

	srand((unsigned int)getpid());
	fx_ep_open(&ep, NULL);
	fx_qp(&ep, sock);
	fx_recv(sock, &dst, sizeof(dst));

	/* 1 */
	before = reissued(&ep);
	for (i = 0; i < NATTACH; i++) {
		buf = fx_alloc(PG);
		region = fx_npf_register(c, buf, PG, NULL);
		/*
		 * Resident before the MR is attached (npfd maps the pages it
		 * installs for attached devices at once): a minor fault.
		 */
		buf[0] = (char)i;
		mr = fx_npf_mr(c, &ep, region, buf, PG, NIC_ACCESS_LOCAL_WRITE, &dev);
		write_page(&ep, buf, mr, &dst, 0, i);
		FX_ASSERT(fx_device_info(c, dev).page_requests == 1,
			  "attachment %llu: npfd answered %llu page requests for one fault",
			  (unsigned long long)i,
			  (unsigned long long)fx_device_info(c, dev).page_requests);
		FX_ASSERT(!npf_client__detach_device(c, (__u32)dev), "detach device %d", dev);
		nic_dereg_mr(mr);
		FX_ASSERT(!npf_client__unregister(c, (__u32)region), "unregister region %d",
			  region);
		munmap(buf, PG);
	}
	printf("1: %d first faults after a fresh attach: %llu reported again\n", NATTACH,
	       (unsigned long long)(reissued(&ep) - before));
	FX_ASSERT(
		reissued(&ep) == before,
		"%llu first fault(s) after attach went unanswered for %d ms (a report npfd did not see)",
		(unsigned long long)(reissued(&ep) - before), NIC_PR_REISSUE_MS);

	/* 2 */
	buf = fx_alloc(NFAULT * PG);
	region = fx_npf_register(c, buf, NFAULT * PG, NULL);
	for (i = 0; i < NFAULT; i++)
		fx_fill(buf + i * PG, PG, i); /* resident before the attach: minor faults */
	mr = fx_npf_mr(c, &ep, region, buf, NFAULT * PG, NIC_ACCESS_LOCAL_WRITE, &dev);
	before = reissued(&ep);
	for (i = 0; i < NFAULT; i++) {
		usleep(pause_us((unsigned int)i));
		write_page(&ep, buf + i * PG, mr, &dst, (i % (DST / PG)) * PG, 1000 + i);
	}
	printf("2: %d faults after pauses of 0 us .. 210 ms: npfd answered %llu, %llu reported again\n",
	       NFAULT, (unsigned long long)fx_device_info(c, dev).page_requests,
	       (unsigned long long)(reissued(&ep) - before));
	FX_ASSERT(fx_device_info(c, dev).page_requests == NFAULT,
		  "npfd answered %llu page requests for %d faults",
		  (unsigned long long)fx_device_info(c, dev).page_requests, NFAULT);
	FX_ASSERT(
		reissued(&ep) == before,
		"%llu fault(s) went unanswered for %d ms: a record npfd did not see (lost wakeup)",
		(unsigned long long)(reissued(&ep) - before), NIC_PR_REISSUE_MS);
	fx_send(sock, &i, sizeof(i));
	fx_sync(sock, 1);
	fx_npf_close(c, &ep);
	return 0;
}

static int side_b(int sock, void *arg)
{
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region dst;
	struct nic_mr *mr;
	char *buf = fx_alloc(DST);
	__u64 n, i;
	int region;

	fx_ep_open(&ep, NULL);
	region = fx_npf_register(c, buf, DST, NULL);
	mr = fx_npf_mr(c, &ep, region, buf, DST, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE,
		       NULL);
	fx_qp(&ep, sock);
	dst = (struct fx_region){(uintptr_t)buf, DST, nic_mr_rkey(mr)};
	fx_send(sock, &dst, sizeof(dst));
	fx_recv(sock, &n, sizeof(n));
	/* the last WRITE into each of the DST pages came from fault number i */
	for (i = n - DST / PG; i < n; i++) {
		char want[PG];

		fx_fill(want, PG, i);
		FX_ASSERT(!memcmp(buf + (i % (DST / PG)) * PG, want, PG),
			  "WRITE %llu: the data did not land", (unsigned long long)i);
	}
	fx_sync(sock, 1);
	fx_npf_close(c, &ep);
	return 0;
}

int main(void)
{
	return fx_pair_npfd(side_a, side_b, NULL, 240);
}
