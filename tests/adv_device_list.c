// SPDX-License-Identifier: GPL-2.0
/*
 * A user of the socket is listed its own devices only (control.c:
 * emit_device()). Root registers a region and attaches a device (a bare IO
 * page table the test never acknowledges). The attacker, an unprivileged
 * user, lists the devices: none. Root unregisters the region: its device
 * retires, listed under the region's id until the NIC acknowledges (2 s at
 * most). The attacker adopts that free id (NPF_MSG_REGION_ADOPT keeps an id
 * nobody holds) for a range of its own and lists the devices again: still
 * none. Before, a device was listed to whoever held its region id, and a
 * retiring one's id was there for the taking (review).
 */
#include "dev_fixture.h"
#include "adv.h"

#define NPG 16

/* The devices c is listed; their ids in ids (up to max), their number returned. */
static size_t listed(struct npf_client *c, __u32 *ids, size_t max)
{
	struct npf_device_info *di = NULL;
	size_t n = 0, i;

	TH_ASSERT(!npf_client__device_list(c, &di, &n), "device list: %s", npf_client__errmsg(c));
	for (i = 0; i < n && i < max; i++)
		ids[i] = di[i].device_id;
	free(di);
	return n;
}

static struct npf_client *connect_to(const char *sock)
{
	NPF_OPTS(npf_client_opts, co, .socket_path = sock);
	struct npf_client *c = npf_client__connect(&co);

	TH_ASSERT(c, "connect: %s", strerror(errno));
	return c;
}

static void attacker_lists(void *arg)
{
	struct npf_client *c = connect_to(arg);
	__u32 ids[4];
	size_t n = listed(c, ids, 4);

	TH_ASSERT(n == 0, "the attacker is listed %zu devices (the first %u)", n, ids[0]);
	printf("attacker: no device listed\n");
	npf_client__close(c);
}

static __u32 root_region;

/* Adopt root's old region id for a range of its own, then list. */
static void attacker_adopts(void *arg)
{
	struct npf_region_info info = {0};
	char err[NPF_ERRMSG_LEN];
	char *m =
		mmap(NULL, NPG * DV_PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fd, rc;

	TH_ASSERT(m != MAP_FAILED, "mmap");
	rc = adv_adopt(arg, m, NPG * DV_PG, root_region, &info, err, sizeof(err), &fd);
	TH_ASSERT(rc == 0 && info.region_id == root_region,
		  "adopting region %u: status %d, id %u (%s): the test needs that id", root_region,
		  rc, info.region_id, err);
	printf("attacker: adopted root's old region id %u\n", root_region);
	attacker_lists(arg);
	close(fd);
}

int main(void)
{
	struct npf_region_id_req rq;
	char err[NPF_ERRMSG_LEN];
	struct npf_client *root;
	struct dv_conn c;
	struct dv_dev d;
	__u32 ids[4];
	char *mem;

	th_require_root();
	th_npfd_start(&dv_npfd, NULL);
	adv_open_to_group(&dv_npfd);
	dv_connect(&c);
	mem = mmap(NULL, NPG * DV_PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	root_region = dv_register(&c, dv_uffd(), mem, NPG * DV_PG);
	dv_iopt(&d, (uintptr_t)mem, NPG, F_SEAL_SHRINK | F_SEAL_GROW);
	TH_ASSERT(!dv_attach(&c, &d, root_region, err, sizeof(err)), "attach: %s", err);
	root = connect_to(dv_npfd.sock);
	TH_ASSERT(listed(root, ids, 4) == 1 && ids[0] == d.id, "root is not listed its device %u",
		  d.id);

	TH_ASSERT(adv_run_as_attacker(attacker_lists, dv_npfd.sock, 30) == 0,
		  "the attacker's first listing failed");

	/* the device retires, waiting for an acknowledgement the test never gives */
	rq.region_id = root_region;
	dv_send(&c, NPF_MSG_REGION_UNREGISTER, &rq, sizeof(rq), NULL, 0);
	TH_ASSERT(dv_inval_wait(&d, 2000), "the unregistration posted no invalidation");
	TH_ASSERT(adv_run_as_attacker(attacker_adopts, dv_npfd.sock, 30) == 0,
		  "the attacker's listing under the adopted id failed");
	/* the attacker looked while the device still retired */
	TH_ASSERT(listed(root, ids, 4) == 1 && ids[0] == d.id,
		  "device %u no longer retiring when the attacker looked: the test proved nothing",
		  d.id);
	npf_client__close(root);
	th_npfd_stop(&dv_npfd);
	printf("PASS\n");
	return 0;
}
