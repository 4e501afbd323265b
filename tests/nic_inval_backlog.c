// SPDX-License-Identifier: GPL-2.0
/*
 * npfd never drops an invalidation when the NIC's invalidation ring is full.
 * B's NIC acknowledges invalidations ACK_DELAY_US after it sees them; B drops
 * EVICTIONS pages one MADV_DONTNEED at a time, faster than that, so the
 * ring (NPF_NIC_RING_SIZE slots) fills. Checked: npfd posted exactly one
 * invalidation per DONTNEED (the ones the ring had no room for were posted
 * as it freed slots, in order: the NIC's acknowledged sequence number never
 * goes back and ends at the newest), the NIC acknowledged every one of
 * them, and each dropped page's entry is cleared. A is only B's peer in
 * the pair.
 */
#include "nic_fixture.h"

#define NPG 64
#define REG (NPG * PG)
#define EVICTIONS (3 * NPF_NIC_RING_SIZE)
#define ACK_DELAY_US 100000 /* acks come in batches: the ring fills in between */

static __u64 nic_acks(struct nic *nic)
{
	struct nic_stats st;

	nic_query_stats(nic, &st, sizeof(st));
	return st.invalidations;
}

static int side_b(int sock, void *arg)
{
	struct nic_opts slow = {.sz = sizeof(slow), .inval_ack_delay_us = ACK_DELAY_US};
	struct npf_client *c = fx_npf_connect();
	struct npf_device_info di;
	struct fx_ep ep = {0};
	struct fx_iopt iopt;
	struct nic_mr *mr;
	__u64 acks0, e, seq, seq0, last_seq;
	char *buf;
	int region, dev;
	double t0;

	fx_ep_open(&ep, &slow);
	buf = fx_alloc(REG);
	region = fx_npf_register(c, buf, REG, NULL);
	mr = fx_npf_mr(c, &ep, region, buf, REG, NIC_ACCESS_LOCAL_WRITE, &dev);
	fx_iopt_map(&iopt, mr);
	acks0 = nic_acks(ep.nic);
	seq0 = last_seq = __atomic_load_n(&iopt.h->inval.acked_seq, __ATOMIC_ACQUIRE);
	for (e = 0; e < EVICTIONS; e++) {
		nic_test_mark_present(&iopt, (uintptr_t)buf + (e % NPG) * PG, PG);
		FX_ASSERT(!madvise(buf + (e % NPG) * PG, PG, MADV_DONTNEED), "MADV_DONTNEED: %s",
			  strerror(errno));
	}
	/*
	 * In order: the NIC acknowledges by sequence number (acked_seq is the
	 * last one it consumed), so it must never go back, and it must end at
	 * the newest, posted last. A backlog posted out of order, or whose
	 * entries were posted twice and others never, moves it back or ends
	 * it short while every count above still agrees.
	 */
	for (t0 = th_now(); nic_acks(ep.nic) - acks0 < EVICTIONS && th_now() - t0 < 20;) {
		seq = __atomic_load_n(&iopt.h->inval.acked_seq, __ATOMIC_ACQUIRE);
		FX_ASSERT(seq >= last_seq,
			  "the NIC's acknowledged sequence went back from %llu to %llu",
			  (unsigned long long)last_seq, (unsigned long long)seq);
		last_seq = seq;
		usleep(200);
	}
	di = fx_device_info(c, dev);
	printf("B: %d DONTNEEDs -> npfd posted %llu invalidations, the NIC acknowledged %llu\n",
	       EVICTIONS, (unsigned long long)di.invalidations,
	       (unsigned long long)(nic_acks(ep.nic) - acks0));
	FX_ASSERT(di.invalidations == EVICTIONS, "npfd posted %llu invalidations for %d DONTNEEDs",
		  (unsigned long long)di.invalidations, EVICTIONS);
	FX_ASSERT(nic_acks(ep.nic) - acks0 == EVICTIONS, "the NIC acknowledged %llu of %d",
		  (unsigned long long)(nic_acks(ep.nic) - acks0), EVICTIONS);
	seq = __atomic_load_n(&iopt.h->inval.acked_seq, __ATOMIC_ACQUIRE);
	FX_ASSERT(seq == seq0 + EVICTIONS,
		  "the NIC acknowledged up to sequence %llu, the newest is %llu: the backlog was "
		  "not posted in order",
		  (unsigned long long)seq, (unsigned long long)(seq0 + EVICTIONS));
	for (e = 0; e < NPG; e++)
		FX_ASSERT(!(__atomic_load_n(&iopt.pte[e], __ATOMIC_ACQUIRE) & NPF_PTE_PRESENT),
			  "entry %llu still present after its DONTNEED", (unsigned long long)e);
	munmap(iopt.h, iopt.size);
	fx_sync(sock, 1);
	fx_npf_close(c, &ep);
	return 0;
}

static int side_a(int sock, void *arg)
{
	fx_sync(sock, 1);
	return 0;
}

int main(void)
{
	return fx_pair_npfd(side_a, side_b, NULL, 60);
}
