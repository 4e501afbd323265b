// SPDX-License-Identifier: GPL-2.0
/*
 * Eviction under a device: two processes with software NICs, both regions
 * four times their budget. Each round the initiator writes a new pattern
 * into its region with the CPU (npfd evicts most of it to its swap store),
 * then RDMA-WRITEs all of it into the target's region: the initiator's NIC
 * reads pages npfd evicted (device faults that read them back from the
 * store), the target's NIC writes pages npfd evicts meanwhile (their
 * entries invalidated and acknowledged before each page goes, so a NIC
 * write can never land on a page already read out). The target then
 * checks every byte with the CPU, which reads its evicted pages back.
 *
 * Meanwhile a thread of the target watches the device's view: an IO page
 * table entry must never be present while its page is not in the process
 * (read the entry, then /proc/self/pagemap, then the entry again: the
 * same version both times means it was present at the pagemap look, since
 * npfd bumps the version on every change of PRESENT). Eviction that took
 * a page before clearing its entry would show up here.
 *
 * Usage: evict_nic [MiB [ROUNDS]]   (default 8, 3)
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include "harness.h"
#include "npf.h"
#include "npf_nic.h"
#include "nic_side.h"
#include "npf_nic_abi.h"

#define WR_BYTES (1ULL << 20)

static uint64_t total;
static int rounds;

static uint8_t pattern(uint64_t off, int round)
{
	return (uint8_t)((off >> 12) * 31 + (off & 0xfff) * 7 + 1 + round * 101);
}

static void side_open(struct side *s, int access, const char *sock)
{
	/*
	 * Retransmission timeout 100 ms (doubling to 1.6 s, 7 retries): this
	 * checks bytes, not latency, on a shared 2-CPU machine where a NIC
	 * thread can wait its turn for longer than the default 10 ms x 7.
	 */
	NIC_OPTS(nic_qp_init_attr, qa, .max_send_wr = 64, .max_recv_wr = 64, .timeout_us = 100000);
	NPF_OPTS(npf_region_opts, ro, .name = "evict-nic");
	NPF_OPTS(npf_client_opts, co, .socket_path = sock);
	struct npf_budget_info bi;
	int err;

	s->npf = npf_client__connect(&co);
	TH_ASSERT(s->npf, "connect to npfd: %s", strerror(errno));
	s->mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(s->mem != MAP_FAILED, "mmap %llu bytes", (unsigned long long)total);
	s->region = npf_client__register(s->npf, s->mem, total, &ro);
	TH_ASSERT(s->region > 0, "register: %s", npf_client__errmsg(s->npf));
	err = npf_client__region_set(s->npf, (__u32)s->region, NPF_SET_BUDGET, total / 4, &bi);
	TH_ASSERT(!err, "set budget: %s", npf_client__errmsg(s->npf));

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

static struct npf_budget_info budget(struct side *s)
{
	struct npf_budget_info *bi, out;
	size_t n;

	TH_ASSERT(!npf_client__budget_list(s->npf, (__u32)s->region, &bi, &n) && n == 1,
		  "budget list: %s", npf_client__errmsg(s->npf));
	out = *bi;
	free(bi);
	return out;
}

struct watch {
	const volatile __u64 *pte;
	const char *mem;
	__u64 npages, looks, violations;
	volatile int stop;
};

static void *watch_view(void *arg)
{
	struct watch *w = arg;
	int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	TH_ASSERT(pm >= 0, "open pagemap: %s", strerror(errno));
	while (!w->stop) {
		for (__u64 i = 0; i < w->npages && !w->stop; i++) {
			__u64 v1 = w->pte[i], v2, ent = 0;

			if (!(v1 & NPF_PTE_PRESENT))
				continue;
			if (pread(pm, &ent, 8, (off_t)(((uintptr_t)w->mem >> 12) + i) * 8) != 8)
				continue;
			v2 = w->pte[i];
			w->looks++;
			/*
			 * Gone is neither present (bit 63) nor a swap-type
			 * entry (bit 62): a page being migrated (compaction,
			 * anywhere on the machine) shows a migration entry for
			 * a moment, and mmwatch invalidates it after.
			 */
			if (v1 >> NPF_PTE_VERSION_SHIFT == v2 >> NPF_PTE_VERSION_SHIFT &&
			    !(ent >> 62) && w->violations++ < 3)
				printf("target: page %llu is mapped for the device but not in memory\n",
				       (unsigned long long)i);
		}
	}
	close(pm);
	return NULL;
}

static void settle(struct side *s, int round)
{
	struct npf_budget_info bi;
	double t0 = th_now();

	do {
		bi = budget(s);
		if (bi.resident_pages <= bi.low_pages)
			return;
		usleep(2000);
	} while (th_now() - t0 < 20);
	th_fail("round %d: %llu pages resident after 20 s, budget low watermark %llu", round,
		(unsigned long long)bi.resident_pages, (unsigned long long)bi.low_pages);
}

static __u64 invalidations(struct side *s)
{
	struct npf_device_info *di;
	size_t n, i;
	__u64 v = 0;

	if (npf_client__device_list(s->npf, &di, &n))
		return 0;
	for (i = 0; i < n; i++)
		if ((int)di[i].device_id == s->device)
			v = di[i].invalidations;
	free(di);
	return v;
}

static void side_close(struct side *s)
{
	npf_client__detach_device(s->npf, (__u32)s->device);
	nic_close(s->nic);
	npf_client__close(s->npf);
}

static int target(int sock, const char *path)
{
	struct watch watch;
	pthread_t watcher;
	struct side s;
	struct npf_budget_info bi;
	__u32 rkey;
	__u64 addr;
	char ch;
	int r;

	side_open(&s, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE, path);
	TH_ASSERT(nic_qp_connect_fd(s.qp, sock) == 0, "target connect");
	{
		int fd = nic_mr_iopt_fd(s.mr);
		struct npf_iopt_header *h = mmap(NULL, sizeof(*h), PROT_READ, MAP_SHARED, fd, 0);
		size_t len;
		char *map;

		TH_ASSERT(h != MAP_FAILED, "map the IO page table: %s", strerror(errno));
		len = h->pte_offset + h->npages * 8;
		map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
		TH_ASSERT(map != MAP_FAILED, "map the IO page table: %s", strerror(errno));
		watch = (struct watch){.pte = (const __u64 *)(map + h->pte_offset),
				       .mem = s.mem,
				       .npages = h->npages};
		munmap(h, sizeof(*h));
		TH_ASSERT(!pthread_create(&watcher, NULL, watch_view, &watch), "watcher");
	}
	rkey = nic_mr_rkey(s.mr);
	addr = (__u64)(uintptr_t)s.mem;
	TH_ASSERT(write(sock, &rkey, sizeof(rkey)) == sizeof(rkey) &&
			  write(sock, &addr, sizeof(addr)) == sizeof(addr),
		  "send rkey");
	for (r = 0; r < rounds; r++) {
		uint64_t off, bad = 0;

		TH_ASSERT(read(sock, &ch, 1) == 1 && ch == 'D', "initiator did not finish round %d",
			  r);
		/* what the NIC wrote is evicted first: the CPU reads it back from the store */
		settle(&s, r);
		for (off = 0; off < total; off++)
			if ((uint8_t)s.mem[off] != pattern(off, r) && bad++ < 3)
				printf("target round %d: byte %llu is 0x%02x, want 0x%02x\n", r,
				       (unsigned long long)off, (uint8_t)s.mem[off],
				       pattern(off, r));
		TH_ASSERT(!bad, "target round %d: %llu bytes differ from what the NIC wrote", r,
			  (unsigned long long)bad);
		TH_ASSERT(write(sock, "K", 1) == 1, "ack");
	}
	watch.stop = 1;
	pthread_join(watcher, NULL);
	printf("target: %llu looks at mapped entries, %llu mapped while their page was gone\n",
	       (unsigned long long)watch.looks, (unsigned long long)watch.violations);
	TH_ASSERT(watch.looks && !watch.violations,
		  "target: the device could reach pages that were not in memory");
	bi = budget(&s);
	printf("target: resident %llu of budget %llu, evicted %llu, written back %llu in %llu batches, read back %llu; device invalidations %llu\n",
	       (unsigned long long)bi.resident_pages, (unsigned long long)bi.budget_pages,
	       (unsigned long long)bi.evicted_pages, (unsigned long long)bi.written_pages,
	       (unsigned long long)bi.write_batches, (unsigned long long)bi.refaults,
	       (unsigned long long)invalidations(&s));
	TH_ASSERT(bi.evicted_pages >= (__u64)rounds * (total / 4096) / 2 && bi.stored_pages,
		  "target: only %llu pages evicted", (unsigned long long)bi.evicted_pages);
	TH_ASSERT(bi.written_pages && bi.refaults, "target: nothing written back or read back");
	/* a batch abandoned: a device did not acknowledge within 2 s (or a zap failed) */
	TH_ASSERT(!bi.aborted, "target: %llu victims kept", (unsigned long long)bi.aborted);
	TH_ASSERT(invalidations(&s) > 0, "target: no device entry was invalidated");
	side_close(&s);
	return 0;
}

static int initiator(int sock, const char *path)
{
	struct side s;
	struct npf_budget_info bi;
	uint64_t nwr = total / WR_BYTES;
	__u32 rkey;
	__u64 raddr;
	char ch;
	int r;

	side_open(&s, NIC_ACCESS_LOCAL_WRITE, path);
	TH_ASSERT(nic_qp_connect_fd(s.qp, sock) == 0, "initiator connect");
	TH_ASSERT(read(sock, &rkey, sizeof(rkey)) == sizeof(rkey) &&
			  read(sock, &raddr, sizeof(raddr)) == sizeof(raddr),
		  "receive rkey");
	for (r = 0; r < rounds; r++) {
		uint64_t off, posted = 0, done = 0;

		for (off = 0; off < total; off++)
			s.mem[off] = (char)pattern(off, r);
		while (done < nwr) {
			while (posted < nwr && posted - done < 4) {
				side_post_write(&s, posted * WR_BYTES, WR_BYTES, raddr, rkey,
						posted);
				posted++;
			}
			side_wait_one(&s, done);
			done++;
		}
		TH_ASSERT(write(sock, "D", 1) == 1, "done");
		TH_ASSERT(read(sock, &ch, 1) == 1 && ch == 'K', "target failed round %d", r);
	}
	bi = budget(&s);
	printf("initiator: evicted %llu, written back %llu, read back %llu; device invalidations %llu\n",
	       (unsigned long long)bi.evicted_pages, (unsigned long long)bi.written_pages,
	       (unsigned long long)bi.refaults, (unsigned long long)invalidations(&s));
	TH_ASSERT(bi.evicted_pages && bi.refaults,
		  "initiator: the NIC never read an evicted page back");
	TH_ASSERT(!bi.aborted, "initiator: %llu victims kept", (unsigned long long)bi.aborted);
	side_close(&s);
	return 0;
}

int main(int argc, char **argv)
{
	struct th_npfd d;
	int sv[2], st, fails = 0, i;
	pid_t pid[2];

	total = (argc > 1 ? strtoull(argv[1], NULL, 0) : 8) << 20;
	rounds = argc > 2 ? atoi(argv[2]) : 3;
	{
		static const char *const vv[] = {"-v", "-v", NULL};

		th_npfd_start(&d, getenv("EVICT_DEBUG") ? vv : NULL);
	}
	TH_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	fflush(stdout);
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			close(sv[i]);
			exit(i ? target(sv[1 - i], d.sock) : initiator(sv[1 - i], d.sock));
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
	printf("PASS\n");
	return 0;
}
