// SPDX-License-Identifier: GPL-2.0
/*
 * A device page request submitted without a wakeup while npfd is busy is
 * served when npfd is done, not after its next sleep.
 *
 * While npfd polls the ring buffer it sets npfd_polling, and the uprobe
 * submits device records without waking it (npf_shared_maps.h). When npfd
 * stops polling it must look at the ring once more before it sleeps: a
 * record may have come in since its last read. The window is widest when
 * npfd leaves polling through a long piece of work, here a policy load
 * (ELF, maps, two verifier runs): a fault raised meanwhile finds the flag
 * set and wakes nobody.
 *
 * npfd polls only when a CPU is spare, which a shared 2-CPU machine seldom
 * has, so the test sets npfd_polling itself (npfd's own npf_ring_ctl map,
 * taken from npfd with pidfd_getfd) -- the state npfd is in when a long
 * request comes while it polls -- then sends the policy load and, while
 * npfd verifies it, makes A's NIC fault. A trial counts when the NIC's
 * report found the flag set and the load not yet answered. In such a
 * trial npfd must answer the fault without the NIC reporting it again
 * (page_requests_reissued, NIC_PR_REISSUE_MS after the report) when npfd
 * answered the load well before that: an npfd that slept with the record
 * in the ring takes it only from the report made again.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <bpf/bpf.h>
#include "nic_fixture.h"

#define NPG 64
#define WANT_HITS 6
#define DUMMY_PG 4

struct loader {
	struct npf_client *c;
	int fd;
	int region;
	pthread_t th;
	_Atomic int done;
	double t_reply;
	int err;
};

static volatile struct npf_ring_ctl *ring_ctl;

/* npfd's npf_ring_ctl map (not pinned): one of its descriptors, mapped here. */
static void map_ring_ctl(void)
{
	int pidfd = (int)syscall(SYS_pidfd_open, fx_npfd_pid, 0), fd, i;
	char path[64], link[64];

	FX_ASSERT(pidfd >= 0, "pidfd_open npfd: %s", strerror(errno));
	for (i = 3; i < 1024 && !ring_ctl; i++) {
		struct bpf_map_info info = {0};
		__u32 len = sizeof(info);
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%d/fd/%d", fx_npfd_pid, i);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (strcmp(link, "anon_inode:bpf-map"))
			continue;
		fd = (int)syscall(SYS_pidfd_getfd, pidfd, i, 0);
		if (fd < 0)
			continue;
		if (!bpf_obj_get_info_by_fd(fd, &info, &len) &&
		    !strcmp(info.name, "npf_ring_ctl")) {
			void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

			FX_ASSERT(p != MAP_FAILED, "map npf_ring_ctl: %s", strerror(errno));
			ring_ctl = p;
		}
		close(fd);
	}
	close(pidfd);
	FX_ASSERT(ring_ctl, "npfd (pid %d) has no npf_ring_ctl map", fx_npfd_pid);
}

/* The load alone: its connection and file are open already (npfd must see one request). */
static void *load_policy(void *arg)
{
	struct loader *l = arg;

	l->err = npf_client__policy_load(l->c, l->fd, (__u32)l->region, "recheck", NULL);
	l->t_reply = th_now();
	atomic_store(&l->done, 1);
	return NULL;
}

static struct nic_stats stats(struct fx_ep *ep)
{
	struct nic_stats st;

	nic_query_stats(ep->nic, &st, sizeof(st));
	return st;
}

static int side_a(int sock, void *arg)
{
	static const useconds_t delay_us[] = {300, 800, 1500, 3000};
	struct npf_client *c = fx_npf_connect(), *c2;
	struct fx_ep ep = {0};
	struct fx_region dst;
	struct nic_mr *mr;
	char *src, *dummy, path[512];
	int region, hits = 0, trials, lost = 0, pfd;

	(void)arg;
	map_ring_ctl();
	fx_ep_open(&ep, NULL);
	fx_qp(&ep, sock);
	fx_recv(sock, &dst, sizeof(dst));
	src = fx_alloc(NPG * PG); /* never touched: each trial's page is missing */
	region = fx_npf_register(c, src, NPG * PG, NULL);
	mr = fx_npf_mr(c, &ep, region, src, NPG * PG, NIC_ACCESS_LOCAL_WRITE, NULL);
	/* the policy goes to a region of its own: A's faults keep the built-in decision */
	dummy = fx_alloc(DUMMY_PG * PG);
	c2 = fx_npf_connect();
	snprintf(path, sizeof(path), "%s/../policies/exact.bpf.o", th_bin_dir());
	pfd = open(path, O_RDONLY | O_CLOEXEC);
	FX_ASSERT(pfd >= 0, "open %s: %s (make builds the policies)", path, strerror(errno));

	for (trials = 0; trials < NPG && hits < WANT_HITS; trials++) {
		struct loader l = {.c = c2,
				   .fd = pfd,
				   .region = fx_npf_register(c2, dummy, DUMMY_PG * PG, NULL)};
		struct nic_stats s0 = stats(&ep), s1;
		double t_report, end;
		bool flag_set, pending;
		__u64 again;

		__atomic_store_n(&ring_ctl->npfd_polling, 1, __ATOMIC_SEQ_CST);
		FX_ASSERT(!pthread_create(&l.th, NULL, load_policy, &l), "pthread_create");
		usleep(delay_us[trials % 4]);
		FX_ASSERT(!fx_post(ep.qp, NIC_WR_RDMA_WRITE, (__u64)trials, src + trials * PG, PG,
				   mr, dst.addr, dst.rkey),
			  "post");
		/* the NIC's report: did it find the flag set, with the load still in npfd? */
		for (end = th_now() + 10; stats(&ep).page_requests == s0.page_requests;)
			FX_ASSERT(th_now() < end, "trial %d: the NIC raised no page request",
				  trials);
		flag_set = __atomic_load_n(&ring_ctl->npfd_polling, __ATOMIC_SEQ_CST);
		pending = !atomic_load(&l.done);
		t_report = th_now();
		fx_expect_wc(ep.cq, (__u64)trials, NIC_WC_SUCCESS);
		pthread_join(l.th, NULL);
		FX_ASSERT(l.err >= 0, "trial %d: policy load: %s", trials, strerror(-l.err));
		s1 = stats(&ep);
		again = s1.page_requests_reissued - s0.page_requests_reissued;
		printf("trial %d: fault %u us after the load was sent; at the report the flag was "
		       "%s and the load %s; load answered %+.1f ms from the report; reported again "
		       "%llu time(s)\n",
		       trials, delay_us[trials % 4], flag_set ? "set" : "clear",
		       pending ? "in npfd" : "answered", (l.t_reply - t_report) * 1e3,
		       (unsigned long long)again);
		FX_ASSERT(!npf_client__unregister(c2, (__u32)l.region),
			  "unregister the dummy region");
		if (!flag_set || !pending)
			continue;
		hits++;
		/*
		 * npfd was free 10 ms and more before the NIC reported again:
		 * it went to sleep with the record in the ring.
		 */
		if (again && l.t_reply < t_report + (NIC_PR_REISSUE_MS - 10) / 1e3)
			lost++;
	}
	printf("%d trials, %d with the fault's record submitted without a wakeup while npfd "
	       "loaded a policy; %d of these lost until the NIC reported again\n",
	       trials, hits, lost);
	FX_ASSERT(!lost,
		  "%d fault(s) submitted while npfd was busy waited for the NIC's report made "
		  "again %d ms later: npfd slept with them in the ring",
		  lost, NIC_PR_REISSUE_MS);
	npf_client__policy_unload(c, "recheck");
	npf_client__close(c2);
	close(pfd);
	fx_sync(sock, 1);
	fx_npf_close(c, &ep);
	if (!hits)
		fx_skip("no trial had its fault reported while npfd loaded the policy");
	return 0;
}

static int side_b(int sock, void *arg)
{
	struct fx_ep ep = {0};
	struct fx_region dst;
	struct fx_iopt t;
	struct nic_mr *mr;
	char *buf = fx_alloc(PG);

	(void)arg;
	memset(buf, 0, PG);
	fx_ep_open(&ep, NULL);
	mr = nic_reg_mr(ep.pd, buf, PG, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE);
	FX_ASSERT(mr, "nic_reg_mr: %s", strerror(errno));
	fx_iopt_map(&t, mr);
	nic_test_mark_present(&t, (uintptr_t)buf, PG); /* the target never faults */
	fx_qp(&ep, sock);
	dst = (struct fx_region){(uintptr_t)buf, PG, nic_mr_rkey(mr)};
	fx_send(sock, &dst, sizeof(dst));
	fx_sync(sock, 1);
	nic_close(ep.nic);
	return 0;
}

int main(void)
{
	int r;

	th_require_root();
	r = fx_pair_npfd(side_a, side_b, NULL, 120);
	if (!r)
		printf("PASS: a device record that came while npfd was busy was served before it slept\n");
	return r;
}
