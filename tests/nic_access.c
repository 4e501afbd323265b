// SPDX-License-Identifier: GPL-2.0
/*
 * Bad use, through the real npfd:
 *  - npfd absent: npf_client__connect() fails with ENOENT (no socket) or
 *    ECONNREFUSED (a socket nobody listens on), and a NIC test says so;
 *  - keys and bounds, as hardware checks them: a bad rkey or an
 *    out-of-bounds RDMA READ complete with REM_ACCESS_ERR, a bad lkey with
 *    LOC_PROT_ERR, and the WRs behind them are flushed;
 *  - mid-transfer, under a stream of WRITEs into never-touched memory:
 *    the region is unregistered (npf_client__unregister), or the device is
 *    detached (npf_client__detach_device). B's NIC acknowledges
 *    invalidations ACK_DELAY_MS late (nic_opts.inval_ack_delay_us, a slow
 *    device): the call must not return before the NIC's acknowledgement
 *    (asserted: it took at least ACK_DELAY_MS and the NIC's count of
 *    acknowledged invalidations went up before it returned), and every
 *    entry of the MR's IO page table is cleared when it returns (the ones
 *    that were present with their version bumped). The NIC's further page
 *    requests name a device npfd no longer serves, so the stream stalls
 *    (RNR) until B deregisters the MR; A's stream then ends with
 *    REM_ACCESS_ERR and flushed WRs. Nothing crashes, and npfd stays alive
 *    and answers (checked by fx_pair_npfd and by a status request).
 */
#include <sys/un.h>
#include "nic_fixture.h"

#define REG (1UL << 20)
#define NSTREAM 200
#define ACK_DELAY_MS 50

/* A NIC test's side connecting to an absent npfd: its output, and its exit status. */
static int absent_connect_says(const char *sockpath, char *out, size_t outlen)
{
	int p[2], st;
	ssize_t n, got = 0;
	pid_t pid;

	FX_ASSERT(!pipe(p), "pipe");
	fflush(stdout);
	pid = fork();
	if (!pid) {
		dup2(p[1], 1);
		setenv("NPF_SOCKET", sockpath, 1);
		fx_npf_connect();
		_exit(0);
	}
	close(p[1]);
	while ((n = read(p[0], out + got, outlen - 1 - got)) > 0)
		got += n;
	out[got] = 0;
	close(p[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void npfd_absent(void)
{
	NPF_OPTS(npf_client_opts, o);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char dir[] = "/tmp/npf-absent-XXXXXX", path[64], out[512];
	struct npf_client *c;
	int fd, code;

	FX_ASSERT(mkdtemp(dir), "mkdtemp");
	snprintf(path, sizeof(path), "%s/npfd.sock", dir);
	o.socket_path = path;
	c = npf_client__connect(&o);
	FX_ASSERT(!c && errno == ENOENT, "connect to a missing socket: %s, want ENOENT",
		  c ? "connected" : strerror(errno));
	code = absent_connect_says(path, out, sizeof(out));
	FX_ASSERT(code == 1 && strstr(out, "cannot connect to npfd"),
		  "a NIC test without npfd exited %d saying '%s'", code, out);
	printf("npfd absent (no socket): ENOENT; a NIC test says: %s", out);

	/* a socket left behind by an npfd that died: nobody listens */
	fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	FX_ASSERT(fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)), "bind %s", path);
	close(fd);
	c = npf_client__connect(&o);
	FX_ASSERT(!c && errno == ECONNREFUSED, "connect to a dead socket: %s, want ECONNREFUSED",
		  c ? "connected" : strerror(errno));
	code = absent_connect_says(path, out, sizeof(out));
	FX_ASSERT(code == 1 && strstr(out, "cannot connect to npfd"),
		  "a NIC test without npfd exited %d saying '%s'", code, out);
	printf("npfd absent (stale socket): ECONNREFUSED; a NIC test says: %s", out);
	unlink(path);
	rmdir(dir);
}

enum { BY_UNREGISTER, BY_DETACH };

static int side_b(int sock, void *arg)
{
	int acc = NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE | NIC_ACCESS_REMOTE_READ;
	struct nic_opts slow = {.sz = sizeof(slow), .inval_ack_delay_us = ACK_DELAY_MS * 1000};
	struct npf_client *c = fx_npf_connect();
	static __u64 before[REG / PG];
	struct fx_iopt iopt;
	__u64 present, bumped, p;
	struct fx_ep ep = {0};
	struct fx_region reg[3];
	struct nic_mr *mr[3];
	struct npf_status status;
	struct npf_device_info *di;
	struct nic_stats s0, s1;
	char *buf[3];
	int region[3], dev[3], i, err;
	double t0, t_op;
	size_t n;

	fx_ep_open(&ep, &slow);
	for (i = 0; i < 3; i++) {
		buf[i] = fx_alloc(REG); /* never touched */
		region[i] = fx_npf_register(c, buf[i], REG, NULL);
		mr[i] = fx_npf_mr(c, &ep, region[i], buf[i], REG, acc, &dev[i]);
		reg[i] = (struct fx_region){(uintptr_t)buf[i], REG, nic_mr_rkey(mr[i])};
	}
	for (i = 0; i < 5; i++)
		fx_qp(&ep, sock);
	fx_send(sock, reg, sizeof(reg));

	for (i = 1; i <= 2; i++) {
		int how = i == 1 ? BY_UNREGISTER : BY_DETACH;

		nic_query_stats(ep.nic, &s0, sizeof(s0));
		fx_iopt_map(&iopt, mr[i]);
		fx_sync(sock, 10 + i); /* A streams WRITEs into buf[i] */
		/*
		 * Mid-transfer: once three of the 1 MiB WRITEs' packets have
		 * arrived and npfd has mapped pages for them (packets alone
		 * are not enough: retransmits count too while npfd is slow to
		 * answer the first page requests, as under AddressSanitizer).
		 */
		for (t0 = th_now(); th_now() - t0 < 10; usleep(200)) {
			bool mapped = false;

			for (p = 0; p < REG / PG && !mapped; p++)
				mapped = __atomic_load_n(&iopt.pte[p], __ATOMIC_ACQUIRE) &
					 NPF_PTE_PRESENT;
			nic_query_stats(ep.nic, &s1, sizeof(s1));
			if (s1.pkts_rx - s0.pkts_rx > 3 * REG / PG && mapped)
				break;
		}
		for (p = 0; p < REG / PG; p++)
			before[p] = __atomic_load_n(&iopt.pte[p], __ATOMIC_ACQUIRE);
		nic_query_stats(ep.nic, &s0, sizeof(s0));
		t0 = th_now();
		if (how == BY_UNREGISTER)
			err = npf_client__unregister(c, (__u32)region[i]);
		else
			err = npf_client__detach_device(c, (__u32)dev[i]);
		t_op = th_now() - t0;
		nic_query_stats(ep.nic, &s1, sizeof(s1));
		FX_ASSERT(!err, "%s mid-transfer: %s (%s)",
			  how == BY_UNREGISTER ? "unregister" : "detach", strerror(-err),
			  npf_client__errmsg(c));
		FX_ASSERT(
			s1.invalidations > s0.invalidations && t_op >= ACK_DELAY_MS / 1e3,
			"%s returned after %.1f ms, before the NIC acknowledged (it does %d ms late)",
			how == BY_UNREGISTER ? "unregister" : "detach", t_op * 1e3, ACK_DELAY_MS);
		/* entries that became present after the snapshot are checked for PRESENT only */
		for (p = 0, present = 0, bumped = 0; p < REG / PG; p++) {
			__u64 e = __atomic_load_n(&iopt.pte[p], __ATOMIC_ACQUIRE);

			FX_ASSERT(!(e & NPF_PTE_PRESENT), "entry %llu still present after the %s",
				  (unsigned long long)p,
				  how == BY_UNREGISTER ? "unregister" : "detach");
			if (before[p] & NPF_PTE_PRESENT) {
				present++;
				bumped += e >> NPF_PTE_VERSION_SHIFT > before[p] >>
					  NPF_PTE_VERSION_SHIFT;
			}
		}
		FX_ASSERT(present > 0 && bumped == present,
			  "%llu entries were present, %llu have a new version",
			  (unsigned long long)present, (unsigned long long)bumped);
		munmap(iopt.h, iopt.size);
		FX_ASSERT(!npf_client__device_list(c, &di, &n), "device list");
		for (size_t j = 0; j < n; j++)
			FX_ASSERT((int)di[j].device_id != dev[i], "device %d still listed", dev[i]);
		free(di);
		nic_query_stats(ep.nic, &s0, sizeof(s0));
		usleep(50 * 1000); /* the stream stalls: nobody serves the MR */
		nic_query_stats(ep.nic, &s1, sizeof(s1));
		printf("B: %s mid-transfer returned in %.1f ms, after the NIC's ack (%d ms late); %llu "
		       "present entries cleared; in the next 50 ms: %llu RNR NAKs\n",
		       how == BY_UNREGISTER ? "unregister" : "detach", t_op * 1e3, ACK_DELAY_MS,
		       (unsigned long long)present,
		       (unsigned long long)(s1.rnr_nak_tx - s0.rnr_nak_tx));
		FX_ASSERT(!nic_dereg_mr(mr[i]), "nic_dereg_mr");
		munmap(buf[i], REG); /* gone for good: a DMA now would crash us */
		fx_sync(sock, 20 + i);
	}
	FX_ASSERT(!npf_client__status(c, &status), "npfd does not answer after the bad use");
	printf("B: npfd (pid %u) answers: %u regions, %u clients\n", status.npfd_pid,
	       status.regions, status.clients);
	fx_sync(sock, 3);
	fx_npf_close(c, &ep);
	return 0;
}

/* NSTREAM 1 MiB WRITEs into r; returns how many succeeded before REM_ACCESS_ERR. */
static int stream_until_error(struct fx_ep *ep, struct nic_qp *qp, char *src, struct nic_mr *mr,
			      const struct fx_region *r, int sock, __u32 tag)
{
	struct nic_wc wc;
	int i, errs = 0;

	for (i = 0; i < NSTREAM; i++)
		FX_ASSERT(!fx_post(qp, NIC_WR_RDMA_WRITE, 1000 + i, src, REG, mr, r->addr, r->rkey),
			  "post");
	fx_sync(sock, tag);
	for (i = 0; i < NSTREAM; i++) {
		fx_wait_wc(ep->cq, &wc, 20000);
		FX_ASSERT(wc.wr_id == 1000U + i, "completion out of order");
		if (wc.status != NIC_WC_SUCCESS) {
			FX_ASSERT(errs || wc.status == NIC_WC_REM_ACCESS_ERR, "first error: '%s'",
				  nic_wc_status_str(wc.status));
			FX_ASSERT(!errs || wc.status == NIC_WC_WR_FLUSH_ERR, "then '%s'",
				  nic_wc_status_str(wc.status));
			errs++;
		} else {
			FX_ASSERT(!errs, "a WRITE succeeded after an error");
		}
	}
	FX_ASSERT(errs > 0, "all %d WRITEs succeeded although the region went away", NSTREAM);
	return NSTREAM - errs;
}

static int side_a(int sock, void *arg)
{
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region reg[3];
	struct nic_qp *qp[5];
	struct nic_mr *mr;
	char *src;
	int i, ok, region;

	fx_ep_open(&ep, NULL);
	src = fx_alloc(REG);
	region = fx_npf_register(c, src, REG, NULL);
	fx_fill(src, REG, 1);
	mr = fx_npf_mr(c, &ep, region, src, REG, NIC_ACCESS_LOCAL_WRITE, NULL);
	for (i = 0; i < 5; i++)
		qp[i] = fx_qp(&ep, sock);
	fx_recv(sock, reg, sizeof(reg));

	/* bad rkey; the next WR on that QP is flushed */
	FX_ASSERT(!fx_post(qp[0], NIC_WR_RDMA_WRITE, 1, src, 4096, mr, reg[0].addr,
			   reg[0].rkey ^ 0x80),
		  "post");
	FX_ASSERT(!fx_post(qp[0], NIC_WR_RDMA_WRITE, 2, src, 4096, mr, reg[0].addr, reg[0].rkey),
		  "post");
	fx_expect_wc(ep.cq, 1, NIC_WC_REM_ACCESS_ERR);
	fx_expect_wc(ep.cq, 2, NIC_WC_WR_FLUSH_ERR);
	/* READ one byte past the end */
	FX_ASSERT(!fx_post(qp[1], NIC_WR_RDMA_READ, 3, src, 4096, mr, reg[0].addr + REG - 4095,
			   reg[0].rkey),
		  "post");
	fx_expect_wc(ep.cq, 3, NIC_WC_REM_ACCESS_ERR);
	/* bad lkey */
	{
		struct nic_sge sge = {(uintptr_t)src, 64, nic_mr_lkey(mr) + 0x100};
		struct nic_send_wr wr = {.wr_id = 4,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = NIC_WR_RDMA_WRITE,
					 .remote_addr = reg[0].addr,
					 .rkey = reg[0].rkey};

		FX_ASSERT(!nic_post_send(qp[2], &wr, NULL), "post");
		fx_expect_wc(ep.cq, 4, NIC_WC_LOC_PROT_ERR);
	}
	printf("A: bad rkey, out-of-bounds READ, bad lkey: error completions as expected\n");

	ok = stream_until_error(&ep, qp[3], src, mr, &reg[1], sock, 11);
	printf("A: region unregistered mid-stream: %d WRITEs of 1 MiB completed, then "
	       "REM_ACCESS_ERR and %d flushed\n",
	       ok, NSTREAM - ok - 1);
	fx_sync(sock, 21);
	ok = stream_until_error(&ep, qp[4], src, mr, &reg[2], sock, 12);
	printf("A: device detached mid-stream: %d WRITEs of 1 MiB completed, then "
	       "REM_ACCESS_ERR and %d flushed\n",
	       ok, NSTREAM - ok - 1);
	fx_sync(sock, 22);
	fx_sync(sock, 3);
	fx_npf_close(c, &ep);
	return 0;
}

int main(void)
{
	int r;

	th_require_root();
	npfd_absent();
	r = fx_pair_npfd(side_a, side_b, NULL, 60);
	if (!r)
		printf("PASS: npfd absent, access errors, unregister and detach mid-transfer (through npfd)\n");
	return r;
}
