// SPDX-License-Identifier: GPL-2.0
/*
 * RDMA WRITE into never-touched, unpinned memory between two network
 * namespaces, through the real npfd: two processes, each in its own netns
 * (veth between them), two software NICs talking RC over UDP. npfd runs in
 * the initial namespace; its unix socket is a path, so both reach it.
 *
 *  A fills its npf region with the CPU (npfd serves those faults) and
 *    WRITEs it, 4 MiB per work request, 8 in flight, into B's region.
 *  B's region is never touched: every page B's NIC receives faults, npfd
 *    zero-fills it and marks it present; B's NIC answers RNR NAK meanwhile.
 *  B checks every byte against the pattern A wrote.
 *
 * Usage: nic_npfd_netns [MiB]   (default 1024)
 */
#include "nic_fixture.h"

#define CHUNK (4UL << 20)

static __u64 total = 1024ULL << 20;

static int side_b(int sock, void *arg)
{
	NIC_OPTS(nic_opts, o, .wire = NIC_WIRE_UDP, .udp_addr = fx_ns_addr[1]);
	struct npf_client *c;
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	char *buf, *expect;
	__u64 k, bad = 0;
	int region, dev;
	char ch;

	fx_netns_enter(1);
	c = fx_npf_connect();
	fx_ep_open(&ep, &o);
	buf = fx_alloc(total);
	region = fx_npf_register(c, buf, total, NULL);
	mr = fx_npf_mr(c, &ep, region, buf, total, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE,
		       &dev);
	fx_qp(&ep, sock);
	reg = (struct fx_region){(uintptr_t)buf, total, nic_mr_rkey(mr)};
	fx_send(sock, &reg, sizeof(reg));
	fx_recv(sock, &ch, 1);
	expect = malloc(CHUNK);
	FX_ASSERT(expect, "malloc");
	for (k = 0; k < total / CHUNK; k++) {
		fx_fill(expect, CHUNK, k);
		if (memcmp(buf + k * CHUNK, expect, CHUNK) && bad++ < 3)
			printf("B: 4 MiB chunk %llu differs from what A wrote\n",
			       (unsigned long long)k);
	}
	FX_ASSERT(!bad, "B: %llu of %llu chunks differ", (unsigned long long)bad,
		  (unsigned long long)(total / CHUNK));
	printf("B: all %llu MiB arrived intact\n", (unsigned long long)(total >> 20));
	fx_expect_page_requests(c, "B", region, dev);
	fx_print_stats("B NIC", ep.nic);
	fx_sync(sock, 1);
	fx_npf_close(c, &ep);
	return 0;
}

static int side_a(int sock, void *arg)
{
	NIC_OPTS(nic_opts, o, .wire = NIC_WIRE_UDP, .udp_addr = fx_ns_addr[0]);
	struct npf_client *c;
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	char *src;
	__u64 k, n = total / CHUNK;
	int region, dev;
	double t0, t1;

	fx_netns_enter(0);
	c = fx_npf_connect();
	fx_ep_open(&ep, &o);
	src = fx_alloc(total);
	region = fx_npf_register(c, src, total, NULL);
	for (k = 0; k < n; k++)
		fx_fill(src + k * CHUNK, CHUNK, k); /* CPU faults, served by npfd */
	mr = fx_npf_mr(c, &ep, region, src, total, NIC_ACCESS_LOCAL_WRITE, &dev);
	fx_qp(&ep, sock);
	fx_recv(sock, &reg, sizeof(reg));
	t0 = th_now();
	fx_stream(&ep, NIC_WR_RDMA_WRITE, src, n, CHUNK, mr, reg.addr, reg.rkey, 8);
	t1 = th_now();
	printf("A: RDMA WRITE of %llu MiB over UDP between two netns into never-touched memory: "
	       "%.2f s (%.0f MiB/s)\n",
	       (unsigned long long)(total >> 20), t1 - t0, (double)(total >> 20) / (t1 - t0));
	fx_expect_page_requests(c, "A", region, dev);
	fx_send(sock, "D", 1);
	fx_sync(sock, 1);
	fx_npf_close(c, &ep);
	return 0;
}

int main(int argc, char **argv)
{
	int r;

	if (argc > 1)
		total = strtoull(argv[1], NULL, 0) << 20;
	if (!total || total % CHUNK)
		th_fail("size must be a positive multiple of 4 MiB");
	fx_netns_setup();
	th_require_root();
	r = fx_pair_npfd(side_a, side_b, NULL, 85);
	if (!r)
		printf("PASS: %llu MiB RDMA WRITE over UDP between two network namespaces, through npfd\n",
		       (unsigned long long)(total >> 20));
	return r;
}
