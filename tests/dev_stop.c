// SPDX-License-Identifier: GPL-2.0
/*
 * npfd stopped (SIGTERM) while an unregistration waits for a device that
 * never acknowledges (issue 11). Checked: the client gets an answer, and
 * it says the truth: -ESHUTDOWN, the NIC did not acknowledge (the old npfd
 * finished its 2 s wait and then answered success); npfd exits cleanly
 * and promptly, not after the deadline.
 */
#include "dev_fixture.h"

#define NPG 16

int main(void)
{
	struct npf_region_id_req rq;
	char err[NPF_ERRMSG_LEN];
	struct dv_conn c;
	struct dv_dev d;
	double t_term, t_reply = -1, t_exit = -1;
	__u32 region;
	char *mem;
	int st = 0, wst = 0, got = 0;

	th_npfd_start(&dv_npfd, NULL);
	dv_connect(&c);
	mem = mmap(NULL, NPG * DV_PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	region = dv_register(&c, dv_uffd(), mem, NPG * DV_PG);
	dv_iopt(&d, (uintptr_t)mem, NPG, F_SEAL_SHRINK | F_SEAL_GROW);
	TH_ASSERT(!dv_attach(&c, &d, region, err, sizeof(err)), "attach: %s", err);
	memset(mem, 1, 4 * DV_PG);
	TH_ASSERT(dv_present_wait(&d, 0, 4, 2000), "npfd did not map the touched pages");
	rq.region_id = region;
	dv_send(&c, NPF_MSG_REGION_UNREGISTER, &rq, sizeof(rq), NULL, 0);
	TH_ASSERT(dv_inval_wait(&d, 2000), "the unregistration posted no invalidation");

	TH_ASSERT(!kill(dv_npfd.pid, SIGTERM), "SIGTERM: %s", strerror(errno));
	t_term = th_now();
	while (th_now() - t_term < 5 && (t_reply < 0 || t_exit < 0)) {
		if (t_reply < 0 && (got = dv_reply(&c, 5, &st, NULL, 0, err, sizeof(err))) != 0)
			t_reply = th_now() - t_term;
		if (t_exit < 0 && waitpid(dv_npfd.pid, &wst, WNOHANG) == dv_npfd.pid)
			t_exit = th_now() - t_term;
	}
	printf("after SIGTERM: answer %d in %.0f ms (status %d \"%s\"); npfd exited in %.0f ms (0x%x)\n",
	       got, t_reply * 1e3, st, err, t_exit * 1e3, wst);
	if (t_exit < 0) {
		kill(dv_npfd.pid, SIGKILL);
		th_fail("npfd did not exit within 5 s of SIGTERM");
	}
	TH_ASSERT(WIFEXITED(wst) && !WEXITSTATUS(wst), "npfd exited with 0x%x", wst);
	TH_ASSERT(got == 1, "the waiting client got no answer, only %s", got ? "EOF" : "silence");
	TH_ASSERT(st == -ESHUTDOWN && strstr(err, "did not acknowledge"),
		  "answer %d \"%s\": want -ESHUTDOWN saying the NIC did not acknowledge", st, err);
	TH_ASSERT(t_exit < 1.0, "npfd took %.0f ms to stop", t_exit * 1e3);
	unlink(dv_npfd.log);
	rmdir(dv_npfd.dir);
	printf("PASS: npfd stopped during an acknowledgement wait: the client is told, npfd exits at once\n");
	return 0;
}
