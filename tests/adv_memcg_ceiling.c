// SPDX-License-Identifier: GPL-2.0
/*
 * Another user cannot hold a limited cgroup's faults through an id its
 * regions had (daemon/memcg.c). The victim, in a memory cgroup limited to
 * 64 MiB, registers a region (id X: npfd gives it a ceiling), unregisters
 * it, and registers another. The attacker, an unprivileged user outside
 * the cgroup, fills 256 MiB of its own memory and adopts it as region X
 * (NPF_MSG_REGION_ADOPT keeps an id that is free): npfd counted its pages
 * in the victim's cgroup while X's ceiling outlived X, and the victim's
 * next faults waited for as long as the attacker kept the region (review:
 * 10 s, until killed). The victim must write its whole region while the
 * attacker holds X.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "adv.h"
#include "npf.h"

#define MEMCG_PREFIX "npf-adv-memcg-"
#include "memcg_fixture.h"

#define PG 4096UL
#define LIMIT (64UL << 20)
#define VICTIM (16UL << 20)
#define ATTACKER (256UL << 20)
#define HOLD_S 40 /* the attacker keeps region X this long */

static pid_t parent, victim, attacker;
static int to_victim[2], from_victim[2], from_attacker[2];

static void cleanup(void)
{
	if (getpid() != parent)
		return;
	if (victim > 0)
		kill(victim, SIGKILL), waitpid(victim, NULL, 0), victim = 0;
	if (attacker > 0)
		kill(attacker, SIGKILL), waitpid(attacker, NULL, 0), attacker = 0;
	if (cg[0] && rmdir(cg) && errno != ENOENT)
		printf("cannot remove cgroup %s: %s\n", cg, strerror(errno));
	cg[0] = '\0';
}

static void on_alarm(int sig)
{
	static const char msg[] = "\nFAIL: the test did not finish in time (harness alarm)\n";

	(void)sig;
	if (victim > 0)
		kill(victim, SIGKILL);
	if (attacker > 0)
		kill(attacker, SIGKILL);
	if (cg[0])
		rmdir(cg);
	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static void tell(int fd, __u32 v)
{
	TH_ASSERT(write(fd, &v, sizeof(v)) == sizeof(v), "pipe: %s", strerror(errno));
}

/* The next word on fd within timeout_s; the test fails without one. */
static __u32 hear(int fd, int timeout_s, const char *what)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	__u32 v;

	TH_ASSERT(poll(&p, 1, timeout_s * 1000) == 1, "%s: nothing within %d s", what, timeout_s);
	TH_ASSERT(read(fd, &v, sizeof(v)) == sizeof(v), "%s: the process died", what);
	return v;
}

static void run_victim(const char *sock)
{
	NPF_OPTS(npf_client_opts, co, .socket_path = sock);
	struct npf_client *c;
	char *a, *b;
	int x, y;

	TH_ASSERT(!put("cgroup.procs", "0"), "cannot enter cgroup %s: %s", cg, strerror(errno));
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	a = mmap(NULL, VICTIM, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	b = mmap(NULL, VICTIM, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(a != MAP_FAILED && b != MAP_FAILED, "mmap");
	x = npf_client__register(c, a, VICTIM, NULL);
	TH_ASSERT(x > 0, "register: %s", npf_client__errmsg(c));
	for (size_t i = 0; i < VICTIM; i += PG)
		a[i] = 1;
	TH_ASSERT(!npf_client__unregister(c, (__u32)x), "unregister: %s", npf_client__errmsg(c));
	y = npf_client__register(c, b, VICTIM, NULL);
	TH_ASSERT(y > 0 && y != x, "register again: %d %s", y, npf_client__errmsg(c));
	printf("victim: region %d registered and unregistered, region %d registered\n", x, y);
	tell(from_victim[1], (__u32)x);
	hear(to_victim[0], 60, "the go");
	for (size_t i = 0; i < VICTIM; i += PG)
		b[i] = (char)(i / PG | 1);
	for (size_t i = 0; i < VICTIM; i += PG)
		TH_ASSERT(b[i] == (char)(i / PG | 1), "page %zu read back wrong", i / PG);
	tell(from_victim[1], 1);
	npf_client__close(c);
}

static void run_attacker(const char *sock, __u32 id)
{
	struct npf_region_info info = {0};
	char err[NPF_ERRMSG_LEN];
	char *m;
	int fd, rc;

	adv_become_attacker();
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* after the setuid(), which clears it */
	m = mmap(NULL, ATTACKER, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(m != MAP_FAILED, "mmap");
	memset(m, 1, ATTACKER);
	rc = adv_adopt(sock, m, ATTACKER, id, &info, err, sizeof(err), &fd);
	TH_ASSERT(rc == 0 && info.region_id == id,
		  "adopting 256 MiB as region %u: status %d, id %u (%s): the test needs that id",
		  id, rc, info.region_id, err);
	printf("attacker: 256 MiB present, adopted as region %u\n", id);
	tell(from_attacker[1], 1);
	sleep(HOLD_S);
}

int main(void)
{
	struct th_npfd d;
	__u32 x;
	double t0;

	th_require_root();
	parent = getpid();
	atexit(cleanup);
	signal(SIGALRM, on_alarm);
	memcg_make(LIMIT);
	th_npfd_start(&d, NULL);
	adv_open_to_group(&d);
	TH_ASSERT(!pipe(to_victim) && !pipe(from_victim) && !pipe(from_attacker), "pipe: %s",
		  strerror(errno));

	victim = fork();
	TH_ASSERT(victim >= 0, "fork: %s", strerror(errno));
	if (!victim) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		run_victim(d.sock);
		fflush(stdout);
		_exit(0);
	}
	x = hear(from_victim[0], 30, "the victim's old region id");

	attacker = fork();
	TH_ASSERT(attacker >= 0, "fork: %s", strerror(errno));
	if (!attacker) {
		run_attacker(d.sock, x);
		fflush(stdout);
		_exit(0);
	}
	hear(from_attacker[0], 30, "the attacker's adoption");

	t0 = th_now();
	tell(to_victim[1], 1);
	/* HOLD_S - 5: the victim must be done while the attacker still holds region x */
	hear(from_victim[0], HOLD_S - 5, "the victim's writes while another user holds its old id");
	printf("the victim wrote and read back its %lu MiB in %.2f s while the attacker held region %u\n",
	       VICTIM >> 20, th_now() - t0, x);
	TH_ASSERT(waitpid(attacker, NULL, WNOHANG) == 0, "the attacker exited early");
	th_npfd_stop(&d);
	cleanup();
	printf("PASS\n");
	return 0;
}
