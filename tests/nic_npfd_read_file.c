// SPDX-License-Identifier: GPL-2.0
/*
 * RDMA READ from a file-backed remote region, through the real npfd.
 *
 *  B writes a file, registers a never-touched npf region backed by it
 *    (NPF_BACKING_FILE) and exposes it for REMOTE_READ. B's CPU never
 *    touches the region: every page B's NIC reads faults, and npfd fills
 *    it from the file (io_uring reads: the file is dropped from the page
 *    cache first) before marking it present.
 *  A READs the whole region, 4 MiB per work request, into its own
 *    never-touched npf region (those pages fault too: zero-filled, then
 *    overwritten by the READ responses), and checks every byte against the
 *    file, read with pread().
 *
 * Usage: nic_npfd_read_file [MiB]   (default 128)
 */
#include "nic_fixture.h"

#define CHUNK (4UL << 20)

static __u64 total = 128ULL << 20;

static int side_b(int sock, void *arg)
{
	NPF_OPTS(npf_region_opts, ro, .backing = NPF_BACKING_FILE, .name = "nic-read-file");
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	struct npf_region_stats rs;
	char path[] = "/tmp/npf-nic-read-XXXXXX", *buf, *chunk;
	__u64 k;
	int fd, region, dev;

	fd = mkstemp(path);
	FX_ASSERT(fd >= 0, "mkstemp: %s", strerror(errno));
	chunk = malloc(CHUNK);
	FX_ASSERT(chunk, "malloc");
	for (k = 0; k < total / CHUNK; k++) {
		fx_fill(chunk, CHUNK, 1000 + k);
		FX_ASSERT(pwrite(fd, chunk, CHUNK, (off_t)(k * CHUNK)) == (ssize_t)CHUNK,
			  "write %s: %s", path, strerror(errno));
	}
	free(chunk);
	/*
	 * Cold: npfd reads it with io_uring, several runs of a request into
	 * one staging buffer (a warm file would be copied from npfd's mapping).
	 */
	FX_ASSERT(!fdatasync(fd) && !posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED),
		  "drop %s from the page cache: %s", path, strerror(errno));
	fx_ep_open(&ep, NULL);
	buf = fx_alloc(total);
	ro.backing_fd = fd;
	region = fx_npf_register(c, buf, total, &ro);
	mr = fx_npf_mr(c, &ep, region, buf, total, NIC_ACCESS_REMOTE_READ, &dev);
	fx_qp(&ep, sock);
	reg = (struct fx_region){(uintptr_t)buf, total, nic_mr_rkey(mr)};
	fx_send(sock, &reg, sizeof(reg));
	fx_send(sock, path, sizeof(path));
	fx_sync(sock, 1); /* A has read and checked everything */
	unlink(path);
	fx_expect_page_requests(c, "B (file-backed)", region, dev);
	rs = fx_region_stats(c, region);
	FX_ASSERT(rs.pages_copied == total / PG && rs.bytes_read >= total,
		  "npfd copied %llu pages (%llu bytes read) from the file, expected %llu",
		  (unsigned long long)rs.pages_copied, (unsigned long long)rs.bytes_read,
		  (unsigned long long)(total / PG));
	FX_ASSERT(rs.uffd_faults == 0, "B's CPU touched the region (%llu uffd faults)",
		  (unsigned long long)rs.uffd_faults);
	fx_print_stats("B NIC", ep.nic);
	fx_sync(sock, 2);
	fx_npf_close(c, &ep);
	close(fd);
	return 0;
}

static int side_a(int sock, void *arg)
{
	struct npf_client *c = fx_npf_connect();
	struct fx_ep ep = {0};
	struct fx_region reg;
	struct nic_mr *mr;
	char path[sizeof("/tmp/npf-nic-read-XXXXXX")], *dst, *file;
	__u64 k, n = total / CHUNK, bad = 0;
	int fd, region, dev;
	double t0, t1;

	fx_ep_open(&ep, NULL);
	dst = fx_alloc(total);
	region = fx_npf_register(c, dst, total, NULL);
	mr = fx_npf_mr(c, &ep, region, dst, total, NIC_ACCESS_LOCAL_WRITE, &dev);
	fx_qp(&ep, sock);
	fx_recv(sock, &reg, sizeof(reg));
	fx_recv(sock, path, sizeof(path));
	t0 = th_now();
	fx_stream(&ep, NIC_WR_RDMA_READ, dst, n, CHUNK, mr, reg.addr, reg.rkey, 4);
	t1 = th_now();
	printf("A: RDMA READ of %llu MiB from a never-touched file-backed remote region: %.2f s "
	       "(%.0f MiB/s)\n",
	       (unsigned long long)(total >> 20), t1 - t0, (double)(total >> 20) / (t1 - t0));

	fd = open(path, O_RDONLY);
	FX_ASSERT(fd >= 0, "open %s: %s", path, strerror(errno));
	file = malloc(CHUNK);
	FX_ASSERT(file, "malloc");
	for (k = 0; k < n; k++) {
		FX_ASSERT(pread(fd, file, CHUNK, (off_t)(k * CHUNK)) == (ssize_t)CHUNK, "read %s",
			  path);
		if (memcmp(dst + k * CHUNK, file, CHUNK) && bad++ < 3)
			printf("A: 4 MiB chunk %llu differs from the file\n",
			       (unsigned long long)k);
	}
	close(fd);
	FX_ASSERT(!bad, "A: %llu of %llu chunks differ from the file", (unsigned long long)bad,
		  (unsigned long long)n);
	printf("A: every byte read equals the file\n");
	fx_expect_page_requests(c, "A (READ target)", region, dev);
	fx_sync(sock, 1);
	fx_sync(sock, 2);
	fx_npf_close(c, &ep);
	return 0;
}

int main(int argc, char **argv)
{
	int r;

	if (argc > 1)
		total = strtoull(argv[1], NULL, 0) << 20;
	if (!total || total % CHUNK)
		th_fail("size must be a positive multiple of 4 MiB");
	r = fx_pair_npfd(side_a, side_b, NULL, 85);
	if (!r)
		printf("PASS: RDMA READ of %llu MiB from a file-backed remote npf region, every byte checked\n",
		       (unsigned long long)(total >> 20));
	return r;
}
