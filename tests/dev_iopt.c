// SPDX-License-Identifier: GPL-2.0
/*
 * Hostile IO page tables (issue 10), sent as an attacker would, on the raw
 * protocol:
 *  - a page count near 2^61 whose table size and device range wrap
 *    (npages * 8 and npages * 4096 overflow): refused; once accepted, its
 *    detach wrote past the mapping and crashed npfd;
 *  - a table offset near 2^64: refused;
 *  - an unsealed memfd: refused (the client could truncate it and npfd's
 *    next write would die of SIGBUS); it is truncated and the region
 *    unregistered anyway, to show npfd survives;
 *  - a memfd sealed against shrinking: accepted; the client cannot
 *    truncate it; page requests whose range wraps (addr + len past 2^64,
 *    which once passed the range check and crashed npfd), ends past the
 *    device's last page or starts before its first are answered invalid,
 *    an honest one answered and its page mapped; a request for a whole
 *    16 GiB device served 16384 pages, and a detach of its 2^22-entry
 *    table reads none of the table's holes; with its answers left
 *    unread (response ring full), npfd keeps at most 16384 of the
 *    device's requests however many more come; detach and unregister
 *    work, and a request sent behind the detach while it waits for the
 *    acknowledgement is answered after it (answers in order, the
 *    connection not stuck).
 * After each, npfd is alive and answers. The attacker is what issue 10
 * names: an unprivileged member of the socket's group (tests/adv.h), the
 * test's npfd root.
 */
#include "dev_fixture.h"
#include "adv.h"

#define NPG 16

static struct dv_conn c;
static __u32 region;
static int uffd;
static char *mem;

/*
 * npfd still answers (from the attacker: it is not npfd's parent, and cannot
 * wait for it; the parent sees how npfd died, dv_expect_alive()).
 */
static void alive(const char *what)
{
	TH_ASSERT(th_connectable(dv_npfd.sock), "%s: npfd is gone", what);
	dv_status_ms(10000, NULL);
}

/* Attach d; when npfd took it although it should not have, use it as the attacker would. */
static void expect_refused(struct dv_dev *d, const char *what, int want, const char *needle,
			   bool truncate)
{
	char err[NPF_ERRMSG_LEN];
	int st = dv_attach(&c, d, region, err, sizeof(err));

	printf("%-44s -> %d \"%s\"\n", what, st, err);
	if (!st) {
		struct npf_device_id_req rq = {.device_id = d->id};

		if (truncate)
			TH_ASSERT(!ftruncate(d->fd, 0), "truncate: %s", strerror(errno));
		dv_send(&c, NPF_MSG_DEVICE_DETACH, &rq, sizeof(rq), NULL, 0);
		usleep(100 * 1000);
		alive(what);
		th_fail("%s: accepted (device %u)", what, d->id);
	}
	TH_ASSERT(st == want, "%s: status %d, want %d", what, st, want);
	TH_ASSERT(strstr(err, needle), "%s: \"%s\" does not say \"%s\"", what, err, needle);
	alive(what);
	close(d->fd);
	munmap(d->h, d->size);
}

/*
 * A page request for d's device, made as the NIC makes it (the uprobe reads
 * it); returns its answer's status, or -1 if none came in 5 s.
 */
static int page_request(struct dv_dev *d, __u64 addr, __u64 len, __u64 cookie)
{
	struct npf_page_request req = {.magic = NPF_IOPT_MAGIC,
				       .mr_id = d->id,
				       .addr = addr,
				       .len = len,
				       .cookie = cookie,
				       .npages = 1,
				       .access = NPF_ACCESS_READ};
	struct npf_resp_ring *ring = &d->h->resp;

	npf_nic_fault_report(&req);
	for (double t0 = th_now(); th_now() - t0 < 5; usleep(1000)) {
		__u32 tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);

		for (; ring->head != tail; ring->head++) {
			const struct npf_page_response *r =
				&ring->ent[ring->head % NPF_NIC_RING_SIZE];

			if (r->cookie == cookie) {
				ring->head++;
				return (int)r->status;
			}
		}
	}
	return -1;
}

static void expect_answer(struct dv_dev *d, const char *what, __u64 addr, __u64 len, int want)
{
	static __u64 cookie = 0x100;
	int st = page_request(d, addr, len, ++cookie);

	printf("%-44s -> %s\n", what,
	       st < 0		    ? "no answer" :
	       st == NPF_PR_SUCCESS ? "success" :
				      "invalid");
	TH_ASSERT(st == want, "%s: answer %d, want %d", what, st, want);
	alive(what);
}

/* npfd's count of d's page requests waiting for an answer. */
static __u32 requests_waiting(const struct dv_dev *d)
{
	struct npf_device_info di[8];
	char err[NPF_ERRMSG_LEN];
	int n;

	memset(di, 0, sizeof(di));
	n = dv_call(&c, NPF_MSG_DEVICE_LIST, NULL, 0, NULL, 0, di, sizeof(di), err, sizeof(err),
		    5000);
	TH_ASSERT(n >= 0, "device list: %d %s", n, err);
	for (int i = 0; i < 8; i++)
		if (di[i].device_id == d->id)
			return di[i].requests_waiting;
	th_fail("device %u is not in npfd's list", d->id);
	return 0;
}

/*
 * The NIC reads no answers: npfd keeps its requests, up to a bound. Sent
 * 256 at a time, each batch waited for (the BPF ring buffer drops what
 * npfd has not read when it is full), until npfd has the bound, then
 * 4096 more. Returns what npfd keeps.
 */
static __u32 flood_unanswered(struct dv_dev *d, __u32 bound)
{
	struct npf_page_request req = {.magic = NPF_IOPT_MAGIC,
				       .mr_id = d->id,
				       .addr = (uintptr_t)mem + DV_PG,
				       .len = DV_PG,
				       .npages = 1,
				       .access = NPF_ACCESS_READ};
	__u32 waiting = 0, extra = 0;

	__atomic_store_n(&d->h->resp.head, d->h->resp.tail + 1, __ATOMIC_RELEASE);
	for (int batch = 0; batch < 200 && extra < 4096; batch++) {
		__u32 before = waiting;

		for (int i = 0; i < 256; i++) {
			req.cookie++;
			npf_nic_fault_report(&req);
		}
		for (double t0 = th_now(); th_now() - t0 < 2; usleep(2000)) {
			__u32 now = requests_waiting(d);

			if (now == waiting && (now != before || now >= bound))
				break; /* settled */
			waiting = now;
		}
		if (waiting >= bound)
			extra += 256;
	}
	return waiting;
}

/*
 * A table of 2^22 entries for a 16 GiB region nobody touched, all holes
 * but what npfd maps: one request for the whole device is served 16384
 * pages (the NIC asks again for the rest), and the detach's invalidation
 * reads only the table's data: the memfd stays about as large as what was
 * mapped (reading every entry made the kernel allocate all 32 MiB).
 */
static void huge_table(void)
{
	const __u64 npg = 1ULL << 22;
	char *big = mmap(NULL, npg * DV_PG, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct npf_region_id_req rq;
	struct npf_device_id_req dq;
	char err[NPF_ERRMSG_LEN];
	__u64 mapped = 0;
	struct dv_dev d;
	struct stat sb;
	int st;

	TH_ASSERT(big != MAP_FAILED, "mmap 16 GiB: %s", strerror(errno));
	rq.region_id = dv_register(&c, uffd, big, npg * DV_PG); /* one userfaultfd a connection */
	rq.pad = 0;
	dv_iopt(&d, (uintptr_t)big, npg, F_SEAL_SHRINK);
	st = dv_attach(&c, &d, rq.region_id, err, sizeof(err));
	TH_ASSERT(!st, "attach a 2^22-entry table: %d %s", st, err);
	expect_answer(&d, "page request: a whole 16 GiB device", (uintptr_t)big, npg * DV_PG,
		      NPF_PR_SUCCESS);
	for (__u64 i = 0; i <= 16384; i++)
		mapped += dv_present(&d, i);
	printf("%-44s -> %llu entries mapped\n", "... of which served", (unsigned long long)mapped);
	TH_ASSERT(mapped == 16384, "one request was served %llu pages, not 16384",
		  (unsigned long long)mapped);
	dq.device_id = d.id;
	dv_send(&c, NPF_MSG_DEVICE_DETACH, &dq, sizeof(dq), NULL, 0);
	TH_ASSERT(dv_inval_wait(&d, 5000), "detach posted no invalidation");
	dv_ack(&d);
	TH_ASSERT(dv_reply(&c, 5000, &st, NULL, 0, err, sizeof(err)) == 1 && !st, "detach: %d %s",
		  st, err);
	TH_ASSERT(!fstat(d.fd, &sb), "fstat: %s", strerror(errno));
	printf("%-44s -> %lld KiB of the table's 32 MiB allocated\n", "detach of the 2^22 table",
	       (long long)sb.st_blocks / 2);
	TH_ASSERT(sb.st_blocks / 2 < 1024, "the detach made %lld KiB of the table allocated",
		  (long long)sb.st_blocks / 2);
	TH_ASSERT(!dv_call(&c, NPF_MSG_REGION_UNREGISTER, &rq, sizeof(rq), NULL, 0, NULL, 0, err,
			   sizeof(err), 5000),
		  "unregister the 16 GiB region: %s", err);
	close(d.fd);
	munmap(d.h, d.size);
	munmap(big, npg * DV_PG);
	alive("a 2^22-entry table");
}

static void attacker(void *arg)
{
	struct npf_device_id_req dq;
	struct npf_region_id_req rq;
	char err[NPF_ERRMSG_LEN];
	struct dv_dev d;
	int st;

	dv_connect(&c);
	mem = mmap(NULL, NPG * DV_PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	uffd = adv_uffd();
	region = dv_register(&c, uffd, mem, NPG * DV_PG);

	dv_iopt(&d, (uintptr_t)mem, NPG, F_SEAL_SHRINK | F_SEAL_GROW);
	d.h->npages = 1ULL << 61; /* * 8 and * 4096 both wrap to 0 */
	expect_refused(&d, "page count 2^61 (sizes wrap)", -EINVAL, "inconsistent", false);

	dv_iopt(&d, (uintptr_t)mem, NPG, F_SEAL_SHRINK | F_SEAL_GROW);
	d.h->npages = (1ULL << 61) + NPG; /* * 8 wraps to NPG * 8 */
	expect_refused(&d, "page count 2^61 + 16", -EINVAL, "inconsistent", false);

	dv_iopt(&d, (uintptr_t)mem, NPG, F_SEAL_SHRINK | F_SEAL_GROW);
	d.h->pte_offset = -(__u64)(NPG * 8) & ~7ULL; /* + npages * 8 wraps to 0 */
	expect_refused(&d, "table offset 2^64 - 128", -EINVAL, "inconsistent", false);

	dv_iopt(&d, (uintptr_t)mem + DV_PG, NPG, F_SEAL_SHRINK | F_SEAL_GROW);
	expect_refused(&d, "one page past the region's end", -ERANGE, "not inside", false);

	dv_iopt(&d, (uintptr_t)mem, NPG, 0);
	expect_refused(&d, "unsealed memfd (then truncated)", -EPERM, "F_SEAL_SHRINK", true);

	dv_iopt(&d, (uintptr_t)mem, NPG, F_SEAL_GROW);
	expect_refused(&d, "memfd sealed against growing only", -EPERM, "F_SEAL_SHRINK", true);

	/* sealed against shrinking: accepted, and the client cannot pull it away */
	dv_iopt(&d, (uintptr_t)mem, NPG, F_SEAL_SHRINK);
	st = dv_attach(&c, &d, region, err, sizeof(err));
	TH_ASSERT(!st, "sealed table refused: %d %s", st, err);
	TH_ASSERT(ftruncate(d.fd, 0) && errno == EPERM, "a sealed table could be truncated");
	expect_answer(&d, "page request: len wraps past 2^64", (uintptr_t)mem,
		      -(__u64)(uintptr_t)mem + DV_PG, NPF_PR_INVALID);
	expect_answer(&d, "page request: one page past the end", (uintptr_t)mem + (NPG - 1) * DV_PG,
		      2 * DV_PG, NPF_PR_INVALID);
	expect_answer(&d, "page request: one page before the start", (uintptr_t)mem - DV_PG, DV_PG,
		      NPF_PR_INVALID);
	TH_ASSERT(!dv_present(&d, 0), "page 0 mapped before any honest request");
	expect_answer(&d, "page request: page 0", (uintptr_t)mem, DV_PG, NPF_PR_SUCCESS);
	TH_ASSERT(dv_present(&d, 0), "page 0 answered but not mapped");
	{
		__u32 kept = flood_unanswered(&d, 16384);

		printf("%-44s -> %u kept\n", "requests whose answers go unread", kept);
		TH_ASSERT(kept == 16384,
			  "npfd keeps %u unanswered requests of one device, not 16384", kept);
		alive("requests whose answers go unread");
	}
	huge_table();
	/* a request sent behind the waiting detach is answered after it, in order */
	dq.device_id = d.id;
	dv_send(&c, NPF_MSG_DEVICE_DETACH, &dq, sizeof(dq), NULL, 0);
	dv_send(&c, NPF_MSG_STATUS, NULL, 0, NULL, 0);
	TH_ASSERT(dv_inval_wait(&d, 2000), "detach posted no invalidation");
	c.expect = c.seq - 1;
	TH_ASSERT(dv_reply(&c, 100, &st, NULL, 0, err, sizeof(err)) == 0,
		  "an answer came before the device acknowledged the detach");
	dv_ack(&d);
	TH_ASSERT(dv_reply(&c, 2000, &st, NULL, 0, err, sizeof(err)) == 1 && !st, "detach: %d %s",
		  st, err);
	c.expect = 0;
	TH_ASSERT(dv_reply(&c, 2000, &st, NULL, 0, err, sizeof(err)) == 1 && !st,
		  "the status request queued behind the detach was not answered: %d %s", st, err);
	rq.region_id = region;
	st = dv_call(&c, NPF_MSG_REGION_UNREGISTER, &rq, sizeof(rq), NULL, 0, NULL, 0, err,
		     sizeof(err), 2000);
	TH_ASSERT(!st, "unregister: %d %s", st, err);
	alive("at the end");
	close(c.fd);
}

int main(void)
{
	int st;

	th_npfd_start(&dv_npfd, NULL);
	adv_open_to_group(&dv_npfd);
	st = adv_run_as_attacker(attacker, NULL, 60);
	dv_expect_alive("under the attacks");
	TH_ASSERT(st == 0, "the attacker's checks failed (exit %d)", st);
	th_npfd_stop(&dv_npfd);
	printf("PASS: wrapping and unsealed IO page tables refused; a sealed one served\n");
	return 0;
}
