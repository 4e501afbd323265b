// SPDX-License-Identifier: GPL-2.0
/*
 * Device faults end to end, through npfd (no stand-in): two processes, two
 * software NICs over shared memory.
 *
 *  A (initiator) writes a pattern into its own npf region with the CPU, and
 *    RDMA-WRITEs it, 4 MiB per work request, into B's region.
 *  B (target) registers a never-touched, unpinned npf region and attaches
 *    its MR's IO page table to npfd.
 *
 * Both IO page tables start empty: A's NIC faults on reading its source
 * (the pages exist, npfd finds them with EEXIST and maps them), B's NIC on
 * every page it receives (npfd zero-fills them; B's NIC answers RNR NAK
 * meanwhile and A's retries). B checks every byte. The first 4 MiB work
 * request of A touches 1024 missing pages: it must raise ONE page request.
 *
 * Usage: nic_npfd_write [MiB]   (default 1024)
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include "harness.h"
#include "npf.h"
#include "npf_nic.h"
#include "nic_side.h"

#define WR_BYTES (4ULL << 20)

static uint64_t total;

static uint8_t pattern(uint64_t off)
{
	return (uint8_t)((off >> 12) * 31 + (off & 0xfff) * 7 + 1);
}

/* fill: write the pattern with the CPU before the NIC exists, so its page table starts empty. */
static void side_open(struct side *s, int access, bool fill)
{
	NIC_OPTS(nic_qp_init_attr, qa, .max_send_wr = 64, .max_recv_wr = 64);
	NPF_OPTS(npf_region_opts, ro, .name = "nic");

	s->npf = npf_client__connect(NULL);
	TH_ASSERT(s->npf, "connect to npfd: %s", strerror(errno));
	s->mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(s->mem != MAP_FAILED, "mmap %llu bytes", (unsigned long long)total);
	s->region = npf_client__register(s->npf, s->mem, total, &ro);
	TH_ASSERT(s->region > 0, "register: %s", npf_client__errmsg(s->npf));
	if (fill) {
		uint64_t off;

		for (off = 0; off < total; off++)
			s->mem[off] = (char)pattern(off);
	}

	s->nic = nic_open(NULL);
	TH_ASSERT(s->nic, "nic_open: %s", strerror(errno));
	s->pd = nic_alloc_pd(s->nic);
	s->cq = nic_create_cq(s->nic, 256);
	TH_ASSERT(s->pd && s->cq, "pd/cq: %s", strerror(errno));
	qa.send_cq = s->cq;
	qa.recv_cq = s->cq;
	s->qp = nic_create_qp(s->pd, &qa);
	TH_ASSERT(s->qp, "qp: %s", strerror(errno));
	s->mr = nic_reg_mr(s->pd, s->mem, total, access);
	TH_ASSERT(s->mr, "reg_mr: %s", strerror(errno));
	s->device = npf_client__attach_device(s->npf, (__u32)s->region, nic_mr_iopt_fd(s->mr));
	TH_ASSERT(s->device > 0, "attach device: %s (%s)", strerror(-s->device),
		  npf_client__errmsg(s->npf));
	TH_ASSERT(nic_mr_set_npf_id(s->mr, (__u32)s->device) == 0, "set npf id");
}

static void print_device(struct side *s, const char *who)
{
	struct npf_device_info *di;
	size_t n, i;

	if (npf_client__device_list(s->npf, &di, &n))
		return;
	for (i = 0; i < n; i++)
		if ((int)di[i].device_id == s->device)
			printf("%s: npfd answered %llu page request groups, mapped %llu pages, mean service %llu ns\n",
			       who, (unsigned long long)di[i].page_requests,
			       (unsigned long long)di[i].pages_mapped,
			       (unsigned long long)(di[i].page_requests ?
							    di[i].fault_ns_sum /
								    di[i].page_requests :
							    0));
	free(di);
}

static int target(int sock)
{
	struct side s;
	uint64_t off, bad = 0;
	char ch;
	__u32 rkey;
	__u64 addr;

	side_open(&s, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE, false);
	TH_ASSERT(nic_qp_connect_fd(s.qp, sock) == 0, "target connect");
	rkey = nic_mr_rkey(s.mr);
	addr = (__u64)(uintptr_t)s.mem;
	TH_ASSERT(write(sock, &rkey, sizeof(rkey)) == sizeof(rkey) &&
			  write(sock, &addr, sizeof(addr)) == sizeof(addr),
		  "send rkey");
	TH_ASSERT(read(sock, &ch, 1) == 1 && ch == 'D', "initiator did not finish");
	for (off = 0; off < total; off++)
		if ((uint8_t)s.mem[off] != pattern(off) && bad++ < 3)
			printf("target: byte %llu is 0x%02x, want 0x%02x\n",
			       (unsigned long long)off, (uint8_t)s.mem[off], pattern(off));
	print_device(&s, "target");
	{
		struct nic_stats st;

		nic_query_stats(s.nic, &st, sizeof(st));
		printf("target NIC: %llu page requests, %llu RNR NAKs sent\n",
		       (unsigned long long)st.page_requests, (unsigned long long)st.rnr_nak_tx);
	}
	TH_ASSERT(!bad, "target: %llu bytes differ from what was written", (unsigned long long)bad);
	TH_ASSERT(write(sock, "K", 1) == 1, "ack");
	npf_client__detach_device(s.npf, (__u32)s.device);
	nic_close(s.nic);
	npf_client__close(s.npf);
	return 0;
}

static int initiator(int sock)
{
	struct side s;
	struct nic_stats st;
	uint64_t posted = 0, done = 0, nwr = total / WR_BYTES;
	__u32 rkey;
	__u64 raddr;
	char ch;
	double t0, t1;

	side_open(&s, NIC_ACCESS_LOCAL_WRITE, true);
	TH_ASSERT(nic_qp_connect_fd(s.qp, sock) == 0, "initiator connect");
	TH_ASSERT(read(sock, &rkey, sizeof(rkey)) == sizeof(rkey) &&
			  read(sock, &raddr, sizeof(raddr)) == sizeof(raddr),
		  "receive rkey");

	/* One work request over 1024 pages the NIC has never seen: one page request. */
	t0 = th_now();
	side_post_write(&s, 0, WR_BYTES, raddr, rkey, 0);
	side_wait_one(&s, 0);
	nic_query_stats(s.nic, &st, sizeof(st));
	printf("initiator: first 4 MiB WR over 1024 unmapped pages raised %llu page request(s)\n",
	       (unsigned long long)st.page_requests);
	TH_ASSERT(st.page_requests == 1, "a 1024-page WR raised %llu page requests, want 1",
		  (unsigned long long)st.page_requests);
	posted = done = 1;
	while (done < nwr) {
		while (posted < nwr && posted - done < 8) {
			side_post_write(&s, posted * WR_BYTES, WR_BYTES, raddr, rkey, posted);
			posted++;
		}
		side_wait_one(&s, done);
		done++;
	}
	t1 = th_now();
	printf("initiator: RDMA WRITE of %llu MiB into never-touched unpinned memory in %.2f s (%.0f MiB/s)\n",
	       (unsigned long long)(total >> 20), t1 - t0, (double)(total >> 20) / (t1 - t0));
	print_device(&s, "initiator");
	TH_ASSERT(write(sock, "D", 1) == 1, "done");
	TH_ASSERT(read(sock, &ch, 1) == 1 && ch == 'K', "target failed");
	npf_client__detach_device(s.npf, (__u32)s.device);
	nic_close(s.nic);
	npf_client__close(s.npf);
	return 0;
}

int main(int argc, char **argv)
{
	struct th_npfd d;
	int sv[2], st, fails = 0, i;
	pid_t pid[2];

	total = (argc > 1 ? strtoull(argv[1], NULL, 0) : 1024) << 20;
	th_npfd_start(&d, NULL);
	TH_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	fflush(stdout);
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			close(sv[i]);
			exit(i ? target(sv[1 - i]) : initiator(sv[1 - i]));
		}
	}
	close(sv[0]);
	close(sv[1]);
	for (i = 0; i < 2; i++) {
		waitpid(pid[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			fails++;
	}
	if (fails) {
		th_npfd_dump_log(&d);
		th_fail("%d side(s) failed", fails);
	}
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
	th_npfd_stop(&d);
	printf("ok\n");
	return 0;
}
