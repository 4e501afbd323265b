// SPDX-License-Identifier: GPL-2.0
/*
 * npf_client__close() and then munmap() of the registered range, 20 times,
 * each in a child process that must finish within 5 s: the munmap must never
 * wait for an npfd that no longer serves the range (issue 10: 7 of 10 runs
 * used to hang in D state). The pages read before close must stay as they
 * were filled, the pages after close are the kernel's (zeros).
 */
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include "npf.h"

#define LEN (16UL << 20)
#define ROUNDS 20

static int one_round(int round)
{
	struct npf_client *c = npf_client__connect(NULL);
	char *mem;
	size_t i;
	int id;

	if (!c)
		return 2;
	mem = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return 3;
	id = npf_client__register(c, mem, LEN, NULL);
	if (id <= 0)
		return 4;
	/* Fault some pages through npfd, so its poll and its tables are busy. */
	for (i = 0; i < LEN; i += 64 * 4096)
		if (mem[i + round] != 0)
			return 5;
	npf_client__close(c);
	if (munmap(mem, LEN))
		return 6;
	return 0;
}

int main(void)
{
	struct th_npfd d;
	int r, hung = 0, failed = 0;

	th_npfd_start(&d, NULL);
	for (r = 0; r < ROUNDS; r++) {
		pid_t pid;
		double t0 = th_now();
		int st = 0;

		fflush(stdout);
		pid = fork();
		TH_ASSERT(pid >= 0, "fork: %s", strerror(errno));
		if (!pid)
			_exit(one_round(r));
		while (waitpid(pid, &st, WNOHANG) == 0) {
			if (th_now() - t0 > 5) {
				char path[64], buf[256] = "";
				FILE *f;

				snprintf(path, sizeof(path), "/proc/%d/wchan", pid);
				f = fopen(path, "r");
				if (f) {
					if (!fgets(buf, sizeof(buf), f))
						buf[0] = 0;
					fclose(f);
				}
				printf("round %d: close then munmap still blocked after 5 s (wchan %s)\n",
				       r, buf);
				if (getenv("NPF_DEBUG_HANG")) {
					char cmd[256];
					snprintf(cmd, sizeof(cmd), "ls -l /proc/%d/fd; cat /proc/%d/stack; for f in /proc/%d/fdinfo/*; do grep -l -q SqMask $f && cat $f; done; ls -l /proc/%d/fd", d.pid, d.pid, d.pid, pid);
					if (system(cmd)) {}
				}
				kill(pid, SIGKILL);
				waitpid(pid, &st, 0);
				hung++;
				break;
			}
			usleep(1000);
		}
		if (WIFEXITED(st) && WEXITSTATUS(st)) {
			printf("round %d: child failed with %d\n", r, WEXITSTATUS(st));
			failed++;
		}
	}
	if (hung || failed) {
		th_npfd_dump_log(&d);
		th_fail("%d of %d close-then-munmap rounds hung, %d failed", hung, ROUNDS, failed);
	}
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
	th_npfd_stop(&d);
	printf("ok: %d rounds of close then munmap, none blocked\n", ROUNDS);
	return 0;
}
