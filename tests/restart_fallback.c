// SPDX-License-Identifier: GPL-2.0
/*
 * npfd killed and never started again: within fallback_ms libnpf serves
 * the faults itself and the workload finishes, every touched word right (a
 * file page read from the file, never zeros); a client that asked for
 * NPF_FALLBACK_SIGBUS instead gets SIGBUS on its next fault, after a
 * message through npf_set_print(), in bounded time -- never a silent hang.
 * Pages dropped while npfd is away (MADV_DONTNEED, read by the fallback) are
 * taken from the devices: their IO page table entries are cleared.
 */
#include "restart_common.h"
#include "nic_fixture.h"

#define FALLBACK_MS 1000

static struct rs_npfd d;

static void on_sigbus(int sig)
{
	_exit(42);
}

/* A client whose fallback is SIGBUS: ready on `sync`, then touches when told. */
static void sigbus_client(int sync)
{
	NPF_OPTS(npf_client_opts, o, .fallback_ms = FALLBACK_MS, .fallback = NPF_FALLBACK_SIGBUS);
	struct npf_client *c = npf_client__connect(&o);
	volatile char *mem;
	char go;

	npf_set_print(rs_print);
	signal(SIGBUS, on_sigbus);
	mem = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!c || npf_client__register(c, (void *)mem, 1 << 20, NULL) <= 0)
		_exit(2);
	if (mem[0] != 0) /* served by npfd */
		_exit(3);
	if (write(sync, "R", 1) != 1 || read(sync, &go, 1) != 1)
		_exit(4);
	(void)mem[1 << 16]; /* npfd is gone: SIGBUS after FALLBACK_MS */
	_exit(5);
}

int main(void)
{
	NPF_OPTS(npf_client_opts, o, .fallback_ms = FALLBACK_MS);
	struct rs_work w = {0};
	struct npf_client *c;
	struct fx_ep ep = {0};
	struct fx_iopt iopt;
	struct nic_mr *mr;
	char *dev_mem;
	int sv[2], st = 0, present;
	__u64 i;
	double t0, t1;
	pid_t kid;
	char ch;

	th_require_root();
	setvbuf(stdout, NULL, _IOLBF, 0);
	npf_set_print(rs_print);
	rs_npfd_start(&d);

	TH_ASSERT(!socketpair(AF_UNIX, SOCK_STREAM, 0, sv), "socketpair");
	fflush(stdout);
	kid = fork();
	TH_ASSERT(kid >= 0, "fork");
	if (!kid) {
		close(sv[0]);
		sigbus_client(sv[1]);
	}
	close(sv[1]);
	TH_ASSERT(read(sv[0], &ch, 1) == 1, "the SIGBUS client did not get ready");

	c = npf_client__connect(&o);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	rs_work_start(&w, c, d.dir, 64ULL << 20);
	TH_ASSERT(rs_progress(&w, 2000, 20), "no progress with npfd running");

	/* A device over a region whose pages npfd installs (the CPU touches them). */
	dev_mem = fx_alloc(1 << 20);
	i = (__u64)fx_npf_register(c, dev_mem, 1 << 20, NULL);
	fx_ep_open(&ep, NULL);
	mr = fx_npf_mr(c, &ep, (int)i, dev_mem, 1 << 20, NIC_ACCESS_LOCAL_WRITE, NULL);
	fx_iopt_map(&iopt, mr);
	for (i = 0; i < (1 << 20); i += 4096)
		dev_mem[i] = 1;
	for (i = 0, present = 0; i < 256; i++)
		present += !!(__atomic_load_n(&iopt.pte[i], __ATOMIC_ACQUIRE) & NPF_PTE_PRESENT);
	printf("device: %d of 256 entries present once the CPU touched the pages\n", present);
	TH_ASSERT(present >= 200, "npfd set only %d of 256 device entries present", present);

	rs_npfd_kill(&d, SIGKILL);
	t0 = th_now();
	TH_ASSERT(write(sv[0], "G", 1) == 1, "tell the SIGBUS client");
	TH_ASSERT(rs_progress(&w, 20000, FALLBACK_MS / 1000.0 + 15),
		  "the workload did not go on within %d ms + 15 s of npfd's death (fallbacks: %d)",
		  FALLBACK_MS, rs_fallbacks);
	printf("npfd dead: the workload went on through libnpf's fallback (%d), 20000 touches in %.2f s\n",
	       rs_fallbacks, th_now() - t0);
	TH_ASSERT(rs_fallbacks == 1, "fallbacks: %d, want 1", rs_fallbacks);
	rs_work_stop(&w, 10);

	/* npfd away, the fallback reads the REMOVE: the device must lose the pages */
	TH_ASSERT(!madvise(dev_mem, 1 << 20, MADV_DONTNEED), "madvise: %s", strerror(errno));
	/* reading the event lets madvise return: the entries go just after (as with npfd) */
	for (t1 = th_now(), present = 1; present && th_now() - t1 < 2; usleep(1000))
		for (i = 0, present = 0; i < 256; i++)
			present += !!(__atomic_load_n(&iopt.pte[i], __ATOMIC_ACQUIRE) &
				      NPF_PTE_PRESENT);
	printf("device: %d of 256 entries present after MADV_DONTNEED with npfd away\n", present);
	TH_ASSERT(!present, "%d device entries still present for pages that left the process",
		  present);
	for (i = 0; i < (1 << 20); i += 4096)
		TH_ASSERT(dev_mem[i] == 0, "a dropped anonymous page does not read zeros");
	nic_dereg_mr(mr);
	nic_destroy_cq(ep.cq);
	nic_dealloc_pd(ep.pd);
	nic_close(ep.nic);

	while (waitpid(kid, &st, WNOHANG) == 0 && th_now() - t0 < 15)
		usleep(10000);
	if (waitpid(kid, &st, WNOHANG) == 0) {
		kill(kid, SIGKILL);
		th_fail("the SIGBUS client still waits 15 s after npfd died");
	}
	printf("the SIGBUS client: %s %d after %.2f s\n", WIFEXITED(st) ? "exit" : "signal",
	       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), th_now() - t0);
	TH_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 42,
		  "the SIGBUS client did not get SIGBUS (status 0x%x)", st);

	npf_client__close(c);
	TH_ASSERT(!munmap(w.file_mem, w.len) && !munmap(w.anon_mem, w.len), "munmap");
	printf("%llu touches checked\n", (unsigned long long)rs_touches(&w));
	rs_work_free(&w);
	rs_npfd_cleanup(&d);
	printf("ok\n");
	return 0;
}
