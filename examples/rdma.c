// SPDX-License-Identifier: GPL-2.0
/*
 * npf-rdma: two processes, two software NICs, RDMA over unpinned memory.
 *
 * The sender fills its buffer and RDMA-WRITEs it into the receiver's
 * buffer, which nothing has touched: every page the receiver's NIC lands
 * on is missing, the NIC raises a page request (one per work request), npfd
 * brings the page in, the NIC resumes. Then the sender RDMA-READs it all
 * back and both compare checksums. Neither buffer is ever pinned.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "npf.h"
#include "npf_nic.h"

#define WR_BYTES (4U << 20)

static uint64_t total = 256ULL << 20;
static const char *hold;

struct side {
	const char *who;
	struct npf_client *npf;
	struct nic *nic;
	struct nic_pd *pd;
	struct nic_cq *cq;
	struct nic_qp *qp;
	struct nic_mr *mr;
	char *mem;
};

/* The reason an out-of-band read or write failed: an error, or the peer is gone. */
static const char *oob_why(void)
{
	return errno ? strerror(errno) : "the other process exited";
}

static void die(const struct side *s, const char *what, const char *why)
{
	fprintf(stderr, "npf-rdma %s: %s: %s\n", s ? s->who : "", what, why);
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t checksum(const char *p, uint64_t len)
{
	uint64_t h = 1469598103934665603ULL, i;

	for (i = 0; i < len; i += 8)
		h = (h ^ *(const uint64_t *)(p + i)) * 1099511628211ULL;
	return h;
}

/* Register the buffer with npfd (unpinned), and with the NIC; hand npfd its page table. */
static void side_open(struct side *s, const char *who, int access)
{
	NPF_OPTS(npf_region_opts, ro, .name = who);
	NIC_OPTS(nic_qp_init_attr, qa, .max_send_wr = 64, .max_recv_wr = 64);
	int region, dev;

	s->who = who;
	s->npf = npf_client__connect(NULL);
	if (!s->npf)
		die(s, "cannot connect to npfd (is it running?)", strerror(errno));
	s->mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->mem == MAP_FAILED)
		die(s, "mmap", strerror(errno));
	region = npf_client__register(s->npf, s->mem, total, &ro);
	if (region < 0)
		die(s, "register", npf_client__errmsg(s->npf));
	s->nic = nic_open(NULL);
	s->pd = s->nic ? nic_alloc_pd(s->nic) : NULL;
	s->cq = s->nic ? nic_create_cq(s->nic, 256) : NULL;
	if (!s->pd || !s->cq)
		die(s, "software NIC", strerror(errno));
	qa.send_cq = s->cq;
	qa.recv_cq = s->cq;
	s->qp = nic_create_qp(s->pd, &qa);
	s->mr = nic_reg_mr(s->pd, s->mem, total, access);
	if (!s->qp || !s->mr)
		die(s, "QP / memory region", strerror(errno));
	dev = npf_client__attach_device(s->npf, (__u32)region, nic_mr_iopt_fd(s->mr));
	if (dev < 0)
		die(s, "attach the NIC's page table", npf_client__errmsg(s->npf));
	nic_mr_set_npf_id(s->mr, (__u32)dev);
}

static void side_close(struct side *s)
{
	nic_close(s->nic);
	npf_client__close(s->npf);
}

static void wait_wr(struct side *s)
{
	struct nic_wc wc;

	do {
		if (nic_cq_wait(s->cq, 60000))
			die(s, "work request", "no completion within 60 s");
	} while (nic_poll_cq(s->cq, 1, &wc) != 1);
	if (wc.status != NIC_WC_SUCCESS)
		die(s, "work request", nic_wc_status_str(wc.status));
}

/* Move the whole buffer, WR_BYTES per work request, 8 in flight. */
static double transfer(struct side *s, enum nic_wr_opcode op, __u64 raddr, __u32 rkey)
{
	uint64_t n = total / WR_BYTES, posted = 0, done = 0;
	double t0 = now();

	while (done < n) {
		while (posted < n && posted - done < 8) {
			struct nic_sge sge = {
				.addr = (__u64)(uintptr_t)(s->mem + posted * WR_BYTES),
				.length = WR_BYTES,
				.lkey = nic_mr_lkey(s->mr)};
			struct nic_send_wr wr = {.wr_id = posted,
						 .sg_list = &sge,
						 .num_sge = 1,
						 .opcode = op,
						 .send_flags = NIC_SEND_SIGNALED,
						 .remote_addr = raddr + posted * WR_BYTES,
						 .rkey = rkey};
			struct nic_send_wr *bad;
			int err = nic_post_send(s->qp, &wr, &bad);

			if (err)
				die(s, "post", strerror(-err));
			posted++;
		}
		wait_wr(s);
		done++;
	}
	return now() - t0;
}

static void print_requests(struct side *s)
{
	struct nic_stats st;

	nic_query_stats(s->nic, &st, sizeof(st));
	printf("%s: NIC raised %llu page requests (%llu RNR NAKs sent, %llu received)\n", s->who,
	       (unsigned long long)st.page_requests, (unsigned long long)st.rnr_nak_tx,
	       (unsigned long long)st.rnr_nak_rx);
}

/* Wait while FILE exists: lets npfctl look at the regions and devices. */
static void hold_on(void)
{
	struct stat st;

	if (!hold)
		return;
	fclose(fopen(hold, "w"));
	while (stat(hold, &st) == 0)
		usleep(50000);
}

static int receiver(int sock)
{
	struct side s;
	__u64 addr;
	__u32 rkey;
	uint64_t sum;
	char ch;

	side_open(&s, "receiver",
		  NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE | NIC_ACCESS_REMOTE_READ);
	if (nic_qp_connect_fd(s.qp, sock))
		die(&s, "connect", "QP exchange failed");
	addr = (__u64)(uintptr_t)s.mem;
	rkey = nic_mr_rkey(s.mr);
	errno = 0;
	if (write(sock, &addr, sizeof(addr)) != sizeof(addr) ||
	    write(sock, &rkey, sizeof(rkey)) != sizeof(rkey) || read(sock, &ch, 1) != 1)
		die(&s, "out-of-band exchange", oob_why());
	sum = checksum(s.mem, total);
	print_requests(&s);
	if (write(sock, &sum, sizeof(sum)) != sizeof(sum) || read(sock, &ch, 1) != 1)
		die(&s, "out-of-band exchange", oob_why());
	side_close(&s);
	return 0;
}

static int sender(int sock)
{
	struct side s;
	uint64_t i, sum, theirs;
	__u64 raddr;
	__u32 rkey;
	double t;

	side_open(&s, "sender", NIC_ACCESS_LOCAL_WRITE);
	for (i = 0; i < total; i += 8)
		*(uint64_t *)(s.mem + i) = i * 0x9e3779b97f4a7c15ULL;
	sum = checksum(s.mem, total);
	if (nic_qp_connect_fd(s.qp, sock) || read(sock, &raddr, sizeof(raddr)) != sizeof(raddr) ||
	    read(sock, &rkey, sizeof(rkey)) != sizeof(rkey))
		die(&s, "connect", "QP exchange failed");

	t = transfer(&s, NIC_WR_RDMA_WRITE, raddr, rkey);
	printf("sender: RDMA WRITE of %llu MiB into the receiver's never-touched, unpinned buffer: %.2f s (%.0f MiB/s)\n",
	       (unsigned long long)(total >> 20), t, (double)(total >> 20) / t);
	memset(s.mem, 0, total); /* READ it back over what we wrote */
	t = transfer(&s, NIC_WR_RDMA_READ, raddr, rkey);
	printf("sender: RDMA READ of it back: %.2f s (%.0f MiB/s)\n", t, (double)(total >> 20) / t);
	print_requests(&s);
	errno = 0;
	if (write(sock, "w", 1) != 1 || read(sock, &theirs, sizeof(theirs)) != sizeof(theirs))
		die(&s, "out-of-band exchange", oob_why());
	printf("checksums: sent %016llx, received %016llx, read back %016llx: %s\n",
	       (unsigned long long)sum, (unsigned long long)theirs,
	       (unsigned long long)checksum(s.mem, total),
	       sum == theirs && sum == checksum(s.mem, total) ? "all equal" : "MISMATCH");
	fflush(stdout);
	hold_on();
	if (write(sock, "d", 1) != 1)
		die(&s, "out-of-band exchange", oob_why());
	side_close(&s);
	return sum == theirs ? 0 : 1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"size", required_argument, NULL, 's'},
						 {"hold", required_argument, NULL, 'H'},
						 {"help", no_argument, NULL, 'h'},
						 {}};
	int sv[2], opt, st, fails = 0, i;
	pid_t pid[2];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt_long(argc, argv, "s:H:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			total = strtoull(optarg, NULL, 0) << 20;
			break;
		case 'H':
			hold = optarg;
			break;
		case 'h':
			printf("Usage: %s [--size MiB] [--hold FILE]\n"
			       "Two processes with software NICs: RDMA WRITE into never-touched, unpinned\n"
			       "memory, then RDMA READ it back; npfd serves every page fault of both NICs.\n"
			       "  --size MiB   buffer size, a multiple of 4 (default 256)\n"
			       "  --hold FILE  when done, create FILE and wait until it is removed\n",
			       argv[0]);
			return 0;
		default:
			return 2;
		}
	}
	if (!total || total % WR_BYTES) {
		fprintf(stderr, "npf-rdma: --size must be a positive multiple of 4 (MiB)\n");
		return 2;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		die(NULL, "socketpair", strerror(errno));
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			close(sv[i]);
			exit(i ? receiver(sv[1 - i]) : sender(sv[1 - i]));
		}
	}
	close(sv[0]);
	close(sv[1]);
	for (i = 0; i < 2; i++) {
		waitpid(pid[i], &st, 0);
		fails += !WIFEXITED(st) || WEXITSTATUS(st);
	}
	return fails ? 1 : 0;
}
