// SPDX-License-Identifier: GPL-2.0
/*
 * RDMA WRITEs into a region with a hole, through the real npfd.
 *
 *  B registers a region with npf and a NIC MR over it, then unmaps 16
 *    pages of its middle and maps memory of its own there, filled with a
 *    pattern: the MR still covers those addresses, but the memory there
 *    is not the region's any more.
 *  A WRITEs into the region below the hole (must succeed, checked by
 *    checksum), then into the hole: B's NIC raises a page request there,
 *    and npfd must answer it INVALID (A sees a remote access error) rather
 *    than map B's own pages for the NIC -- an entry for a page npfd does
 *    not serve would never be invalidated when that page goes. B checks
 *    its own memory is untouched.
 */
#include <sys/mman.h>
#include "nic_fixture.h"

#define NPG 64UL
#define HOLE 16UL
#define HOLE_N 16UL
#define WR_PAGES 4UL

static int side_b(int sock, void *arg)
{
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	char *buf, *own;
	__u64 sum, wrong = 0;
	int region, dev;
	char status;

	fx_ep_open(&ep, NULL);
	buf = fx_alloc(NPG * PG);
	region = fx_npf_register(c, buf, NPG * PG, NULL);
	mr = fx_npf_mr(c, &ep, region, buf, NPG * PG,
		       NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE, &dev);
	FX_ASSERT(!munmap(buf + HOLE * PG, HOLE_N * PG), "munmap: %s", strerror(errno));
	own = mmap(buf + HOLE * PG, HOLE_N * PG, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	FX_ASSERT(own == buf + HOLE * PG, "mmap into the hole: %s", strerror(errno));
	memset(own, 0x5a, HOLE_N * PG);
	fx_qp(&ep, sock);
	reg = (struct fx_region){(uintptr_t)buf, NPG * PG, nic_mr_rkey(mr)};
	fx_send(sock, &reg, sizeof(reg));
	fx_recv(sock, &sum, sizeof(sum));
	FX_ASSERT(fx_sum(buf, WR_PAGES * PG) == sum, "WRITE below the hole: checksum mismatch");
	fx_recv(sock, &status, 1);
	for (__u64 i = 0; i < HOLE_N * PG; i++)
		wrong += own[i] != 0x5a;
	printf("B: WRITE into the hole: %s; bytes of the process's own memory there changed: %llu\n",
	       status == 'E' ? "remote access error" : "succeeded", (unsigned long long)wrong);
	FX_ASSERT(!wrong, "a WRITE into the region's hole reached the process's own memory");
	FX_ASSERT(status == 'E', "a WRITE into the region's hole did not fail");
	fx_sync(sock, 1);
	fx_npf_close(c, &ep);
	return 0;
}

static int side_a(int sock, void *arg)
{
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	struct nic_qp *qp;
	struct nic_wc wc;
	char *src, status;
	__u64 sum;
	int region;

	fx_ep_open(&ep, NULL);
	src = fx_alloc(WR_PAGES * PG);
	region = fx_npf_register(c, src, WR_PAGES * PG, NULL);
	fx_fill(src, WR_PAGES * PG, 31);
	mr = fx_npf_mr(c, &ep, region, src, WR_PAGES * PG, NIC_ACCESS_LOCAL_WRITE, NULL);
	qp = fx_qp(&ep, sock);
	fx_recv(sock, &reg, sizeof(reg));
	FX_ASSERT(!fx_post(qp, NIC_WR_RDMA_WRITE, 1, src, WR_PAGES * PG, mr, reg.addr, reg.rkey),
		  "post");
	fx_expect_wc(ep.cq, 1, NIC_WC_SUCCESS);
	sum = fx_sum(src, WR_PAGES * PG);
	fx_send(sock, &sum, sizeof(sum));
	FX_ASSERT(!fx_post(qp, NIC_WR_RDMA_WRITE, 2, src, WR_PAGES * PG, mr,
			   reg.addr + (HOLE + 4) * PG, reg.rkey),
		  "post");
	fx_wait_wc(ep.cq, &wc, 20000);
	printf("A: WRITE into B's hole: '%s'\n", nic_wc_status_str(wc.status));
	status = wc.status == NIC_WC_REM_ACCESS_ERR ? 'E' : wc.status == NIC_WC_SUCCESS ? 'S' : '?';
	fx_send(sock, &status, 1);
	fx_sync(sock, 1);
	fx_npf_close(c, &ep);
	return 0;
}

int main(void)
{
	int r = fx_pair_npfd(side_a, side_b, NULL, 60);

	if (!r)
		printf("PASS: a WRITE into a region's hole fails; the memory mapped there is not touched\n");
	return r;
}
