// SPDX-License-Identifier: GPL-2.0
/*
 * A client killed while its unregistration waits for the device's
 * acknowledgement (issue 11); the device never acknowledges. Checked:
 * npfd goes on answering others at once (the old npfd waited inside the
 * handler for 2 s); it notices the death, drops the client, and releases
 * the device (its IO page table mapping) without an answer to send; its
 * descriptors come back to what they were before the client came.
 */
#include "dev_fixture.h"

#define NPG 16

/* Is the child's IO page table still mapped in npfd? */
static bool npfd_maps_iopt(void)
{
	char path[64], line[512];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", dv_npfd.pid);
	f = fopen(path, "re");
	TH_ASSERT(f, "open %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, "dev-test-iopt") != NULL;
	fclose(f);
	return found;
}

static void child(int ready)
{
	struct npf_region_id_req rq;
	char err[NPF_ERRMSG_LEN];
	struct dv_conn c;
	struct dv_dev d;
	__u32 region;
	char *mem;

	dv_connect(&c);
	mem = mmap(NULL, NPG * DV_PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	region = dv_register(&c, dv_uffd(), mem, NPG * DV_PG);
	dv_iopt(&d, (uintptr_t)mem, NPG, F_SEAL_SHRINK | F_SEAL_GROW);
	TH_ASSERT(!dv_attach(&c, &d, region, err, sizeof(err)), "attach: %s", err);
	memset(mem, 1, 4 * DV_PG);
	TH_ASSERT(dv_present_wait(&d, 0, 4, 2000), "npfd did not map the touched pages");
	rq.region_id = region;
	dv_send(&c, NPF_MSG_REGION_UNREGISTER, &rq, sizeof(rq), NULL, 0);
	TH_ASSERT(dv_inval_wait(&d, 2000), "the unregistration posted no invalidation");
	TH_ASSERT(write(ready, "w", 1) == 1, "write");
	pause(); /* killed here, the answer never read */
}

int main(void)
{
	struct npf_status status;
	int p[2], fds0, fds1 = -1, st;
	double t_kill, dt;
	pid_t pid;
	char ch;

	th_npfd_start(&dv_npfd, NULL);
	dv_status_ms(1000, NULL);
	fds0 = dv_npfd_fds();
	TH_ASSERT(!pipe(p), "pipe");
	fflush(stdout);
	pid = fork();
	if (!pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failing test leaves no client behind */
		close(p[0]);
		child(p[1]);
		_exit(0);
	}
	close(p[1]);
	TH_ASSERT(read(p[0], &ch, 1) == 1, "the client did not get to its unregistration");
	TH_ASSERT(npfd_maps_iopt(), "npfd does not map the device's IO page table");
	/* a loop blocked in the wait would answer after the 2 s deadline */
	dt = dv_status_ms(500, &status);
	printf("while the client's unregistration waits: another client answered in %.1f ms\n", dt);
	kill(pid, SIGKILL);
	t_kill = th_now();
	waitpid(pid, &st, 0);
	/* (dropping a client detaches its NIC uprobe: that alone takes tens of ms) */
	dt = dv_status_ms(500, &status);
	printf("client killed while its unregistration waited; another client answered in %.1f ms\n",
	       dt);
	dv_expect_alive("after the client died");

	/* its death is noticed at once, not when the wait ends (2 s) */
	while (th_now() - t_kill < 1.0) {
		dv_status_ms(1000, &status);
		if (status.clients == 1 && !status.regions)
			break;
		usleep(20 * 1000);
	}
	printf("%.0f ms after the kill: %u clients (with the one asking)\n",
	       (th_now() - t_kill) * 1e3, status.clients);
	TH_ASSERT(status.clients == 1 && !status.regions,
		  "the dead client is still served 1 s after its death");
	/* within the 2 s deadline and a margin: everything of the client is gone */
	while (th_now() - t_kill < 3.5) {
		dv_status_ms(1000, &status);
		fds1 = dv_npfd_fds();
		/* the one client left is the one asking */
		if (status.clients == 1 && !status.regions && !npfd_maps_iopt() && fds1 <= fds0)
			break;
		usleep(20 * 1000);
	}
	printf("%.0f ms after the kill: %u clients (with the one asking), %u regions, IO page table %s, %d descriptors (%d before)\n",
	       (th_now() - t_kill) * 1e3, status.clients, status.regions,
	       npfd_maps_iopt() ? "still mapped" : "released", fds1, fds0);
	TH_ASSERT(status.clients == 1 && !status.regions, "the dead client is still served");
	TH_ASSERT(!npfd_maps_iopt(), "the dead client's device is never released");
	if (fds1 > fds0) {
		char cmd[96];

		snprintf(cmd, sizeof(cmd), "ls -l /proc/%d/fd", dv_npfd.pid);
		if (system(cmd) < 0)
			perror("system");
	}
	TH_ASSERT(fds1 <= fds0, "npfd holds %d descriptors, %d before the client", fds1, fds0);
	th_npfd_stop(&dv_npfd);
	printf("PASS: a client killed during an acknowledgement wait is cleaned up; npfd serves others meanwhile\n");
	return 0;
}
