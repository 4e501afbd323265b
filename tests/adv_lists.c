// SPDX-License-Identifier: GPL-2.0
/*
 * A user of the socket sees its own regions only (control.c: sees()).
 * Root registers a region with a budget; the attacker, an unprivileged
 * user, registers one of its own with a budget too. Asked for the region
 * list, the stats and the budgets, npfd answers the attacker with its own
 * region alone, and root's region by id is no region for it: before, every
 * user read every client's addresses, names and pids (review). Root sees
 * both.
 */
#include "adv.h"
#include "budget.h"

static __u32 root_id;

static void attacker(void *arg)
{
	const char *sock = arg;
	NPF_OPTS(npf_client_opts, co, .socket_path = sock);
	struct npf_region_stats_full *sf = NULL;
	struct npf_region_info *ri = NULL;
	struct npf_budget_info *bi = NULL;
	struct npf_client *c = npf_client__connect(&co);
	size_t n = 0;
	int id, rc;

	TH_ASSERT(c, "connect: %s", strerror(errno));
	th_budget_region(c, 64, 16, &id);
	TH_ASSERT(!npf_client__region_list(c, &ri, &n), "region list: %s", npf_client__errmsg(c));
	TH_ASSERT(n == 1 && ri[0].region_id == (__u32)id,
		  "the attacker's region list: %zu regions, the first %u (its own: %d)", n,
		  n ? ri[0].region_id : 0, id);
	TH_ASSERT(!npf_client__stats(c, 0, &sf, &n), "stats: %s", npf_client__errmsg(c));
	TH_ASSERT(n == 1 && sf[0].stats.region_id == (__u32)id,
		  "the attacker's stats: %zu regions, the first %u (its own: %d)", n,
		  n ? sf[0].stats.region_id : 0, id);
	TH_ASSERT(!npf_client__budget_list(c, 0, &bi, &n), "budget list: %s",
		  npf_client__errmsg(c));
	TH_ASSERT(n == 1 && bi[0].region_id == (__u32)id,
		  "the attacker's budgets: %zu regions, the first %u (its own: %d)", n,
		  n ? bi[0].region_id : 0, id);
	free(ri);
	free(sf);
	free(bi);
	rc = npf_client__stats(c, root_id, &sf, &n);
	TH_ASSERT(rc == -ENOENT, "root's region %u by id: stats answered %d (%zu items)", root_id,
		  rc, rc ? 0 : n);
	rc = npf_client__budget_list(c, root_id, &bi, &n);
	TH_ASSERT(rc == -ENOENT, "root's region %u by id: budget list answered %d (%zu items)",
		  root_id, rc, rc ? 0 : n);
	printf("attacker: its own region %d listed, root's %u not\n", id, root_id);
	npf_client__close(c);
}

int main(void)
{
	struct npf_region_info *ri = NULL;
	struct npf_client *c;
	struct th_npfd d;
	size_t n = 0;
	int id;

	th_require_root();
	th_npfd_start(&d, NULL);
	adv_open_to_group(&d);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	th_budget_region(c, 64, 16, &id);
	root_id = (__u32)id;
	TH_ASSERT(adv_run_as_attacker(attacker, d.sock, 30) == 0, "the attacker's checks failed");
	TH_ASSERT(!npf_client__region_list(c, &ri, &n), "region list: %s", npf_client__errmsg(c));
	TH_ASSERT(n >= 1, "root sees %zu regions", n);
	free(ri);
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
