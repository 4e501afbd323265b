// SPDX-License-Identifier: GPL-2.0
/*
 * kill -9 npfd every second for a minute under load, and start it again at
 * once (as systemd's Restart= would): every fault is served, every byte is
 * right (issue 10).
 *
 * This process is an npfd client with a file-backed and an anonymous
 * region faulted by RS_THREADS threads that check every word they touch
 * (restart_common.h); two more processes move data with the software NIC
 * (an RDMA WRITE initiator and its target, both with npf regions and
 * devices attached, the target's region dropped with MADV_DONTNEED before
 * every round so that every round faults again; the target checks every
 * byte). npfd is killed with SIGKILL every INTERVAL_MS (kill to kill,
 * whatever its start-up took) and started again; after each start the CPU
 * workload must make progress. libnpf hands its regions and devices to the
 * new npfd (no fallback: fallback_ms is longer than the test), and the last
 * npfd must be the one serving them.
 *
 * Every fault served, counted: the CPU workload counts its touches of pages
 * it knows absent (each a fault that returned with the right bytes), none
 * stays stuck (every thread stops in time), no SIGBUS; each NIC side counts
 * its page requests and the answers it got (every request answered, every
 * work request completed successfully, every byte checked).
 *
 * Usage: restart_kill [CYCLES [INTERVAL_MS]]   (default 60, 1000: a minute)
 *        restart_kill --client SECONDS DIR [--no-nic]
 *   The same workloads against the npfd at $NPF_SOCKET, which someone else
 *   kills and restarts (tests/restart_systemd.sh: systemd's Restart=), for
 *   SECONDS or until DIR/stop exists, files in DIR; prints "reconnects N
 *   served M faults F" for the caller.
 *   --no-nic: the CPU workload only.
 */
#include "restart_common.h"
#include "nic_fixture.h"

#define NIC_BYTES (8ULL << 20)
#define WR_BYTES (1ULL << 20)

static struct rs_npfd d;

static uint8_t nic_pattern(uint64_t round, uint64_t off)
{
	return (uint8_t)((off >> 12) * 31 + (off & 0xfff) * 7 + round * 13 + 1);
}

/* Connected with a long fallback: this test wants npfd's adoption, not libnpf's fallback. */
static struct npf_client *connect_adopting(void)
{
	NPF_OPTS(npf_client_opts, o, .fallback_ms = 600 * 1000);
	struct npf_client *c = npf_client__connect(&o);

	FX_ASSERT(c, "connect to npfd: %s", strerror(errno));
	return c;
}

/* Retry a call that met npfd away (ENOTCONN, ECONNRESET): libnpf reconnects meanwhile. */
#define RETRY(call)                                                                                \
	({                                                                                         \
		int ___r, ___n = 0;                                                                \
		while (((___r = (call)) == -ENOTCONN || ___r == -ECONNRESET) && ___n++ < 3000)     \
			usleep(10000);                                                             \
		___r;                                                                              \
	})

struct nic_side {
	struct npf_client *npf;
	struct fx_ep ep;
	struct nic_mr *mr;
	char *mem;
	int region, device;
};

static void nic_side_open(struct nic_side *s, int sock, int access)
{
	s->npf = connect_adopting();
	s->mem = fx_alloc(NIC_BYTES);
	s->region = fx_npf_register(s->npf, s->mem, NIC_BYTES, NULL);
	fx_ep_open(&s->ep, NULL);
	{
		/*
		 * The software NIC's engine copies through the CPU's page
		 * tables: a page dropped just before npfd died blocks it in a
		 * CPU fault until the next npfd serves it, so it answers
		 * nothing meanwhile. On a loaded machine a restart may take
		 * longer than the default transport budget (10 ms timeout, 7
		 * retries: ~1 s): allow ~8 s, as a network would for a peer
		 * that pauses.
		 */
		NIC_OPTS(nic_qp_init_attr, qa, .send_cq = s->ep.cq, .recv_cq = s->ep.cq,
			 .max_send_wr = 1024, .max_recv_wr = 1024, .timeout_us = 100000);
		int err;

		s->ep.qp = nic_create_qp(s->ep.pd, &qa);
		FX_ASSERT(s->ep.qp, "nic_create_qp: %s", strerror(errno));
		err = nic_qp_connect_fd(s->ep.qp, sock);
		FX_ASSERT(!err, "nic_qp_connect_fd: %s", strerror(-err));
	}
	s->mr = fx_npf_mr(s->npf, &s->ep, s->region, s->mem, NIC_BYTES, access, &s->device);
}

/*
 * Every page request of this side answered (the NIC asks again, counted
 * apart, when an answer does not come: a killed npfd), and, must_fault,
 * some were made: the NIC did fault.
 */
static void nic_side_check(struct nic_side *s, const char *who, bool must_fault)
{
	struct nic_stats st;

	FX_ASSERT(!nic_query_stats(s->ep.nic, &st, sizeof(st)), "%s: nic_query_stats", who);
	printf("%s: %llu page requests (%llu asked again after no answer), %llu answers\n", who,
	       (unsigned long long)st.page_requests, (unsigned long long)st.page_requests_reissued,
	       (unsigned long long)st.page_responses);
	FX_ASSERT(!must_fault || st.page_requests > 0,
		  "%s: the NIC made no page request: nothing faulted", who);
	FX_ASSERT(st.page_responses >= st.page_requests,
		  "%s: %llu page requests, %llu answers: a device fault was not served", who,
		  (unsigned long long)st.page_requests, (unsigned long long)st.page_responses);
}

/* Target: each round drop the region's pages, let the initiator write, check every byte. */
static int nic_target(int sock, void *arg)
{
	struct nic_side s = {0};
	struct fx_region r;
	uint64_t round, off, bad = 0;
	__u32 go;

	npf_set_print(rs_print);
	nic_side_open(&s, sock, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE);
	r = (struct fx_region){(__u64)(uintptr_t)s.mem, NIC_BYTES, nic_mr_rkey(s.mr), 0};
	fx_send(sock, &r, sizeof(r));
	for (round = 1;; round++) {
		/* through npfd: the REMOVE event clears the device's entries (or waits for npfd) */
		FX_ASSERT(!madvise(s.mem, NIC_BYTES, MADV_DONTNEED), "madvise: %s",
			  strerror(errno));
		go = (__u32)round;
		fx_send(sock, &go, sizeof(go));
		fx_recv(sock, &go, sizeof(go)); /* written, or 0: stop */
		if (!go)
			break;
		for (off = 0; off < NIC_BYTES; off++)
			if ((uint8_t)s.mem[off] != nic_pattern(round, off) && bad++ < 3)
				printf("nic target round %llu: byte %llu is 0x%02x, want 0x%02x\n",
				       (unsigned long long)round, (unsigned long long)off,
				       (uint8_t)s.mem[off], nic_pattern(round, off));
		FX_ASSERT(!bad, "nic target: %llu bytes differ in round %llu",
			  (unsigned long long)bad, (unsigned long long)round);
	}
	printf("nic target: %llu rounds of %llu MiB checked, %d reconnects\n",
	       (unsigned long long)round - 1, NIC_BYTES >> 20, rs_reconnects);
	FX_ASSERT(!rs_fallbacks, "nic target: libnpf's fallback served faults: npfd did not adopt");
	nic_side_check(&s, "nic target", true);
	RETRY(npf_client__detach_device(s.npf, (__u32)s.device));
	nic_close(s.ep.nic);
	npf_client__close(s.npf);
	return 0;
}

/* Initiator: each round write the pattern with the CPU (its pages dropped first) and RDMA WRITE it. */
static int nic_initiator(int sock, void *arg)
{
	int ctl = *(int *)arg;
	struct nic_side s = {0};
	struct fx_region r;
	uint64_t off, i;
	__u32 round;
	char stop;

	npf_set_print(rs_print);
	nic_side_open(&s, sock, NIC_ACCESS_LOCAL_WRITE);
	fx_recv(sock, &r, sizeof(r));
	for (;;) {
		fx_recv(sock, &round, sizeof(round));
		if (read(ctl, &stop, 1) == 1) { /* the parent says: last round was the last */
			round = 0;
			fx_send(sock, &round, sizeof(round));
			break;
		}
		FX_ASSERT(!madvise(s.mem, NIC_BYTES, MADV_DONTNEED), "madvise: %s",
			  strerror(errno));
		for (off = 0; off < NIC_BYTES; off++)
			s.mem[off] = (char)nic_pattern(round, off);
		for (i = 0; i < NIC_BYTES / WR_BYTES; i++)
			FX_ASSERT(!fx_post(s.ep.qp, NIC_WR_RDMA_WRITE, i, s.mem + i * WR_BYTES,
					   (__u32)WR_BYTES, s.mr, r.addr + i * WR_BYTES, r.rkey),
				  "post WR %llu", (unsigned long long)i);
		for (i = 0; i < NIC_BYTES / WR_BYTES; i++) {
			struct nic_wc wc;

			fx_wait_wc(s.ep.cq, &wc, 60000);
			FX_ASSERT(wc.status == NIC_WC_SUCCESS,
				  "round %u: WR %llu completed with %s", round,
				  (unsigned long long)wc.wr_id, nic_wc_status_str(wc.status));
		}
		fx_send(sock, &round, sizeof(round));
		/* (each byte costs a socket buffer's worth of accounting: the parent drains them) */
		while (write(ctl, "R", 1) != 1)
			FX_ASSERT(errno == EAGAIN && !usleep(1000),
				  "report progress to the parent: %s", strerror(errno));
	}
	printf("nic initiator: %d reconnects\n", rs_reconnects);
	FX_ASSERT(!rs_fallbacks,
		  "nic initiator: libnpf's fallback served faults: npfd did not adopt");
	/* (the CPU wrote its pages before the NIC reads them: it need not fault) */
	nic_side_check(&s, "nic initiator", false);
	RETRY(npf_client__detach_device(s.npf, (__u32)s.device));
	nic_close(s.ep.nic);
	npf_client__close(s.npf);
	return 0;
}

/* Rounds the NIC pair has finished (read without blocking). */
static uint64_t nic_rounds(int ctl)
{
	static uint64_t rounds;
	char buf[64];
	ssize_t n;

	while ((n = read(ctl, buf, sizeof(buf))) > 0)
		rounds += (uint64_t)n;
	return rounds;
}

int main(int argc, char **argv)
{
	bool client = argc > 3 && !strcmp(argv[1], "--client");
	int cycles = argc > 1 && !client ? atoi(argv[1]) : 60;
	int interval = argc > 2 && !client ? atoi(argv[2]) : 1000;
	double secs = client ? atof(argv[2]) : 0;
	const char *dir = client ? argv[3] : NULL;
	bool with_nic = !(client && argc > 4 && !strcmp(argv[4], "--no-nic"));
	struct npf_region_stats_full *sf;
	struct npf_client *c;
	struct rs_work w = {0};
	int sv[2], k, err, st;
	uint64_t rounds0;
	pid_t nic;
	size_t n, i;
	__u64 served = 0;
	char stop[256];
	double t0, t_kill = 0, t_first = 0, gap, gap_max = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	npf_set_print(rs_print);
	if (!client) {
		th_require_root();
		rs_npfd_start(&d);
		dir = d.dir;
	}

	/*
	 * The NIC pair, forked before this process has threads: a supervisor
	 * runs it (fx_pair); its initiator reports each round with a byte on
	 * sv and stops when the parent writes one.
	 */
	TH_ASSERT(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), "socketpair");
	nic = with_nic ? fork() : 0;
	TH_ASSERT(nic >= 0, "fork: %s", strerror(errno));
	if (with_nic && !nic) {
		close(sv[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(fx_pair(nic_initiator, nic_target, &sv[1], 300));
	}
	close(sv[1]);

	c = connect_adopting();
	rs_work_start(&w, c, dir, 64ULL << 20);
	TH_ASSERT(rs_progress(&w, 2000, 20), "the CPU workload makes no progress before any kill");
	for (i = 0; with_nic && nic_rounds(sv[0]) < 2 && i < 2000; i++)
		usleep(10000);
	TH_ASSERT(!with_nic || nic_rounds(sv[0]) >= 2,
		  "the NIC pair makes no progress before any kill");
	printf("workloads running\n");

	/* --client: npfd is killed by someone else; the workload must never stop for long */
	snprintf(stop, sizeof(stop), "%s/stop", dir);
	for (t0 = th_now(); client && th_now() - t0 < secs && access(stop, F_OK);) {
		usleep(500 * 1000);
		nic_rounds(sv[0]);
		TH_ASSERT(rs_fault_progress(&w, 50, 20),
			  "the CPU workload's faults were not served for 20 s (last warning: %s)",
			  rs_last_warn);
	}
	/*
	 * A kill every interval ms, kill to kill: the start-up and the
	 * progress check of one cycle are in the next one's interval (on a
	 * machine so loaded that they take longer, the next kill follows them
	 * at once; the gaps are printed).
	 */
	for (k = 0; !client && k < cycles; k++) {
		double next = k ? t_kill + interval / 1000.0 : th_now() + interval / 1000.0;

		while (th_now() < next) {
			nic_rounds(sv[0]); /* drain the initiator's reports */
			usleep(10000);
		}
		gap = k ? th_now() - t_kill : 0;
		gap_max = gap > gap_max ? gap : gap_max;
		t_kill = th_now();
		if (!k)
			t_first = t_kill;
		rs_npfd_kill(&d, SIGKILL);
		usleep(20000); /* faults pile up with nobody to serve them */
		rs_npfd_start(&d);
		/* served by the new npfd: faults, not touches of pages already there */
		if (!rs_fault_progress(&w, 50, 20)) {
			rs_npfd_dump_log(&d);
			th_fail("cycle %d: the CPU workload's faults were not served within 20 s of npfd's restart (last warning: %s)",
				k, rs_last_warn);
		}
	}
	if (!client)
		printf("%d kills in %.1f s (%.2f s apart on average, at most %.2f s)\n", cycles,
		       t_kill - t_first, cycles > 1 ? (t_kill - t_first) / (cycles - 1) : 0,
		       gap_max);
	rounds0 = nic_rounds(sv[0]);
	for (i = 0; with_nic && nic_rounds(sv[0]) < rounds0 + 2 && i < 3000; i++)
		usleep(10000);
	if (with_nic && nic_rounds(sv[0]) < rounds0 + 2) {
		if (!client)
			rs_npfd_dump_log(&d);
		th_fail("the NIC pair made no progress after the last restart");
	}
	TH_ASSERT(!with_nic || write(sv[0], "S", 1) == 1, "stop the NIC pair");
	st = 0;
	if (with_nic)
		waitpid(nic, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		if (!client)
			rs_npfd_dump_log(&d);
		th_fail("the NIC pair failed (status 0x%x)", st);
	}

	rs_work_stop(&w, 20);
	err = RETRY(npf_client__stats(c, 0, &sf, &n));
	TH_ASSERT(!err, "stats from the last npfd: %s", npf_client__errmsg(c));
	for (i = 0; i < n; i++)
		if (sf[i].stats.tgid == (__u32)getpid())
			served += sf[i].stats.uffd_faults;
	free(sf);
	printf("%d kills%s; %llu touches checked, %llu of them faults, all served with the right bytes; %d reconnects of this client; the last npfd served %llu of its faults; %llu NIC rounds of %llu MiB checked\n",
	       client ? 0 : cycles, client ? " here (npfd killed by the caller)" : "",
	       (unsigned long long)rs_touches(&w), (unsigned long long)rs_faults(&w), rs_reconnects,
	       (unsigned long long)served, (unsigned long long)nic_rounds(sv[0]), NIC_BYTES >> 20);
	TH_ASSERT(client || rs_reconnects >= cycles, "libnpf reconnected %d times for %d kills",
		  rs_reconnects, cycles);
	TH_ASSERT(!rs_fallbacks, "libnpf's fallback served faults: npfd did not adopt in time");
	TH_ASSERT(!rs_sigbus, "libnpf sent SIGBUS %d times: faults failed instead of served",
		  rs_sigbus);
	TH_ASSERT(served > 0, "the last npfd served none of this client's faults: not adopted");
	npf_client__close(c);
	rs_work_free(&w);
	if (client) {
		printf("reconnects %d served %llu faults %llu\n", rs_reconnects,
		       (unsigned long long)served, (unsigned long long)rs_faults(&w));
		return 0;
	}
	rs_npfd_kill(&d, SIGTERM);
	rs_npfd_cleanup(&d);
	printf("ok\n");
	return 0;
}
