// SPDX-License-Identifier: GPL-2.0
/*
 * npf_client__close() and then munmap() of the registered range, 20 times,
 * each in a child process that must finish within 5 s: the munmap must never
 * wait for an npfd that no longer serves the range (issue 10: 7 of 10 runs
 * used to hang in D state). Then 20 clients end their connection just
 * before they unmap their registered region: npfd must drop their event sources all the same (it used
 * to leave a poll armed in its ring, holding the userfaultfd for ever, and
 * the munmap hung).
 * restart_stop does close then munmap with npfd stopped.
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

/*
 * A client whose connection ends just before it unmaps its still
 * registered region (the libnpf before issue 10 closed that way):
 * npfd sees the end with the userfaultfd becoming readable (the UNMAP
 * event), and must drop its event source all the same: a poll left armed
 * in its ring holds the userfaultfd, which is then never released, and the
 * munmap waits for ever. The connection is the one socket of this process.
 */
static int end_then_unmap(void)
{
	struct npf_client *c = npf_client__connect(NULL);
	char path[64], link[64];
	int fd, sock = -1, uffd = -1;
	char *mem;

	if (!c)
		return 2;
	mem = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED || npf_client__register(c, mem, LEN, NULL) <= 0)
		return 4;
	if (mem[0] != 0)
		return 5;
	for (fd = 0; fd < 64; fd++) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = 0;
		if (!strncmp(link, "socket:", 7))
			sock = fd;
		if (!strcmp(link, "anon_inode:[userfaultfd]"))
			uffd = fd;
	}
	/* as the libnpf before issue 10 closed: connection and userfaultfd, nothing unregistered */
	/* shutdown: the end reaches npfd now, whatever else holds the socket (libnpf's monitor) */
	if (sock < 0 || uffd < 0 || shutdown(sock, SHUT_RDWR))
		return 6;
	/* (libnpf's monitor may reconnect meanwhile: these may have gone already) */
	close(sock);
	close(uffd);
	return munmap(mem, LEN) ? 7 : 0;
}

/* Poll requests armed in npfd's event loop ring (its io_uring fdinfo). */
static int npfd_polls(pid_t pid)
{
	char cmd[256], buf[64] = "";
	FILE *f;

	snprintf(
		cmd, sizeof(cmd),
		"for f in /proc/%d/fdinfo/*; do grep -q SqMask $f && grep -c 'op=6,' $f; done | sort -n | tail -n 1",
		pid);
	f = popen(cmd, "r");
	if (!f || !fgets(buf, sizeof(buf), f))
		th_fail("cannot read npfd's io_uring fdinfo");
	pclose(f);
	return atoi(buf);
}

int main(void)
{
	struct th_npfd d;
	int r, hung = 0, failed = 0, polls0, polls1;

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
					snprintf(
						cmd, sizeof(cmd),
						"ls -l /proc/%d/fd; cat /proc/%d/stack; for f in /proc/%d/fdinfo/*; do grep -l -q SqMask $f && cat $f; done; ls -l /proc/%d/fd",
						d.pid, d.pid, d.pid, pid);
					if (system(cmd)) {
					}
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
	printf("%d rounds of close then munmap, none blocked\n", ROUNDS);

	polls0 = npfd_polls(d.pid);
	hung = failed = 0;
	for (r = 0; r < ROUNDS; r++) {
		double t0 = th_now();
		pid_t pid;
		int st = 0;

		fflush(stdout);
		pid = fork();
		TH_ASSERT(pid >= 0, "fork: %s", strerror(errno));
		if (!pid)
			_exit(end_then_unmap());
		while (waitpid(pid, &st, WNOHANG) == 0) {
			if (th_now() - t0 > 5) {
				printf("round %d: munmap after the connection's end still blocked after 5 s\n",
				       r);
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
	for (r = 0; r < 200 && npfd_polls(d.pid) != polls0; r++)
		usleep(10000);
	polls1 = npfd_polls(d.pid);
	printf("%d connections ended just before a munmap: %d hung, %d failed; npfd's ring holds %d polls, %d before\n",
	       ROUNDS, hung, failed, polls1, polls0);
	TH_ASSERT(!hung && !failed, "%d of %d munmaps after the connection's end hung, %d failed",
		  hung, ROUNDS, failed);
	TH_ASSERT(
		polls1 == polls0,
		"npfd's ring holds %d polls after the clients went, %d before: event sources leaked",
		polls1, polls0);
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
	th_npfd_stop(&d);
	printf("ok\n");
	return 0;
}
