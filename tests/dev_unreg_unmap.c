// SPDX-License-Identifier: GPL-2.0
/*
 * Unregistering a region with a device attached while the client munmaps
 * it (issue 11): npfd must not free the region under itself. The device
 * is an IO page table memfd this test acknowledges by hand (no NIC).
 *
 * Checked: npfd survives; the unregistration cleared the entries npfd had
 * set (PRESENT gone, version bumped: the pages it installed for CPU
 * faults) and posted one invalidation; the answer does not come before the
 * device acknowledges, and comes once it does; meanwhile npfd answers
 * another connection at once (nothing waits inside a handler).
 */
#include "dev_fixture.h"

#define NPG 64
#define TOUCHED 8

/*
 * One try: a fresh region and device, the unregistration racing the
 * munmap. Returns false when npfd read the UNMAP first (then the region is
 * gone before the request, which is refused: the race was not set up).
 */
static bool attempt(struct dv_conn *c, int uffd)
{
	struct npf_region_id_req rq;
	struct npf_status status;
	char err[NPF_ERRMSG_LEN];
	__u32 region, v[NPG];
	struct dv_dev d;
	double t_ack, dt;
	int st, got;
	char *mem;
	__u64 i;

	mem = mmap(NULL, NPG * DV_PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	region = dv_register(c, uffd, mem, NPG * DV_PG);
	dv_iopt(&d, (uintptr_t)mem, NPG, F_SEAL_SHRINK | F_SEAL_GROW);
	st = dv_attach(c, &d, region, err, sizeof(err));
	TH_ASSERT(!st, "attach: %d %s", st, err);

	/* CPU faults npfd serves make the device's entries present */
	memset(mem, 0x5a, TOUCHED * DV_PG);
	TH_ASSERT(dv_present_wait(&d, 0, TOUCHED, 2000), "npfd did not map the touched pages");
	for (i = 0; i < NPG; i++) {
		v[i] = dv_version(&d, i);
		TH_ASSERT(dv_present(&d, i) == (i < TOUCHED), "entry %llu present: %d",
			  (unsigned long long)i, dv_present(&d, i));
	}

	rq = (struct npf_region_id_req){.region_id = region};
	dv_request_while_unmapping(c, NPF_MSG_REGION_UNREGISTER, &rq, sizeof(rq), mem, NPG * DV_PG);
	got = dv_reply(c, 100, &st, NULL, 0, err, sizeof(err));
	dv_expect_alive("when the region was unmapped during its unregistration");
	TH_ASSERT(dv_inval_pending(&d) >= 1, "no invalidation posted");
	for (i = 0; i < NPG; i++) {
		TH_ASSERT(!dv_present(&d, i), "entry %llu still present after the unregistration",
			  (unsigned long long)i);
		TH_ASSERT(dv_version(&d, i) == v[i] + (i < TOUCHED),
			  "entry %llu: version %u, was %u", (unsigned long long)i,
			  dv_version(&d, i), v[i]);
	}
	if (dv_unmap_came_first(got, st, err, &d))
		return false;
	TH_ASSERT(got == 0,
		  "the unregistration was answered (%d: %d %s) before the device acknowledged", got,
		  st, err);
	dt = dv_status_ms(300, &status);
	printf("while the unregistration waits: another client answered in %.1f ms\n", dt);

	dv_ack(&d);
	t_ack = th_now();
	got = dv_reply(c, 1000, &st, NULL, 0, err, sizeof(err));
	dv_expect_alive("once the device acknowledged");
	TH_ASSERT(got == 1, "no answer within 1 s of the acknowledgement (%d)", got);
	if (dv_unmap_came_first(got, st, err, &d))
		return false;
	TH_ASSERT(!st, "unregister: %d %s", st, err);
	printf("unregistration answered %.1f ms after the device's acknowledgement\n",
	       (th_now() - t_ack) * 1e3);
	dv_status_ms(1000, &status);
	TH_ASSERT(status.regions == 0, "npfd still serves %u regions", status.regions);
	return true;
}

int main(void)
{
	struct dv_conn c;
	int uffd, n;

	th_npfd_start(&dv_npfd, NULL);
	dv_connect(&c);
	uffd = dv_uffd();
	for (n = 1; n <= 20 && !attempt(&c, uffd); n++)
		;
	TH_ASSERT(n <= 20, "in 20 tries npfd always read the UNMAP before the unregistration");
	dv_expect_alive("after the unregistration");
	close(c.fd);
	th_npfd_stop(&dv_npfd);
	printf("PASS: unregister while unmapping (try %d): npfd survives, entries cleared, answered after the acknowledgement\n",
	       n);
	return 0;
}
