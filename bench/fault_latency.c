// SPDX-License-Identifier: GPL-2.0
/*
 * Device fault service latency (seed 000 Fig. 3 / Table 4, seed 001 Fig. 8,
 * seed 004 Fig. 10-11), beside its baselines in the same run.
 *
 * An RDMA READ of one message (4 KiB or 4 MiB) from the peer into pages of
 * side A that the NIC has never seen: the NIC stalls the WR, raises one page
 * request group, npfd pages the range in and answers, the WR runs. Kinds:
 *
 *   npf-zero       anonymous region: npfd zero-fills (minor)
 *   npf-pagecache  file-backed region, file in the page cache (minor)
 *   npf-odirect    file-backed region over an O_DIRECT fd: npfd's io_uring
 *                  reads go to the disk (major)
 *
 * Baselines, interleaved sample by sample with the above:
 *
 *   transfer-only          the same READ into a pinned (static) MR: no fault
 *   cpu-first-touch        the CPU writes each page of fresh anonymous memory
 *   madv-populate-write    MADV_POPULATE_WRITE of the same number of pages
 *   io_uring-odirect-read  one raw io_uring O_DIRECT read of the same size
 *
 * Breakdown per kind (medians): npfd (uprobe fired -> answer posted, per
 * WR, from npfd's counters) and the rest of the same WR (the NIC: stall,
 * report, notice the answer, move the data), paired WR by WR.
 *
 * Usage: npf-bench-fault_latency [--json] [--samples-4k N] [--samples-4m N]
 * Needs a running npfd. $NPF_BENCH_DATA: directory for CDF data files.
 */
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include "bench_nic.h"

enum { K_ZERO, K_PAGECACHE, K_ODIRECT, NKINDS };
static const char *const kind_name[] = {"npf-zero", "npf-pagecache", "npf-odirect"};
enum { B_TRANSFER, B_TOUCH, B_POPULATE, B_URING, B_TRANSFER_ALONE, NBASE };
static const char *const base_name[] = {"transfer-only", "cpu-first-touch", "madv-populate-write",
					"io_uring-odirect-read", "transfer-only-alone"};

static struct io_uring ring;

/* A file of len bytes of non-zero data in dir; cold: dropped from the page cache. */
static int make_file(size_t len, int cold)
{
	char path[] = "/var/tmp/npf-bench-fl-XXXXXX";
	size_t off, chunk = 1 << 20;
	char *buf = malloc(chunk);
	int fd = mkstemp(path), dfd;

	if (fd < 0 || !buf)
		bench_die("cannot create a file in /var/tmp: %s", strerror(errno));
	memset(buf, 0x33, chunk);
	for (off = 0; off < len; off += chunk)
		if (pwrite(fd, buf, chunk, (off_t)off) != (ssize_t)chunk)
			bench_die("write %s: %s", path, strerror(errno));
	free(buf);
	fsync(fd);
	if (!cold) {
		unlink(path);
		return fd; /* written through the page cache: resident */
	}
	posix_fadvise(fd, 0, (off_t)len, POSIX_FADV_DONTNEED);
	dfd = open(path, O_RDONLY | O_DIRECT);
	if (dfd < 0)
		bench_die("open %s O_DIRECT: %s (the file system must support O_DIRECT)", path,
			  strerror(errno));
	unlink(path);
	close(fd);
	return dfd;
}

static uint64_t uring_read(int fd, void *buf, size_t len, off_t off)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	struct io_uring_cqe *cqe;
	uint64_t t0 = bench_now_ns();

	io_uring_prep_read(sqe, fd, buf, (unsigned)len, (__u64)off);
	io_uring_submit_and_wait(&ring, 1);
	if (io_uring_wait_cqe(&ring, &cqe) || cqe->res != (int)len)
		bench_die("io_uring O_DIRECT read: %s",
			  cqe ? strerror(-cqe->res) : "no completion");
	io_uring_cqe_seen(&ring, cqe);
	return bench_now_ns() - t0;
}

struct size_run {
	size_t size, samples;
	struct bench_samples lat[NKINDS], npfd[NKINDS], rest[NKINDS], base[NBASE];
};

static void run_size(struct size_run *sr, struct npf_client *c, struct bn_pair *p,
		     struct bn_mem *peer, struct bn_mem *pinned)
{
	size_t len = sr->size * sr->samples, i, k, off;
	int fds[NKINDS] = {-1, make_file(len, 0), make_file(len, 1)};
	int base_fd = make_file(len, 1);
	struct bn_mem mem[NKINDS];
	char *touch = bn_map(len), *pop = bn_map(len), *dbuf;

	if (posix_memalign((void **)&dbuf, BN_PAGE, sr->size))
		bench_die("out of memory");
	for (k = 0; k < NKINDS; k++)
		bn_mem_npf(&mem[k], c, &p->a, len, fds[k], kind_name[k]);
	for (i = 0; i < sr->samples; i++) {
		off = i * sr->size;
		bench_add(&sr->base[B_TRANSFER],
			  bn_op(p, 0, NIC_WR_RDMA_READ, pinned->buf, (__u32)sr->size, pinned->mr,
				peer->buf, peer->mr));
		for (k = 0; k < NKINDS; k++) {
			struct npf_device_info d0 = bn_device_info(c, mem[k].device), d1;
			uint64_t t = bn_op(p, 0, NIC_WR_RDMA_READ, mem[k].buf + off,
					   (__u32)sr->size, mem[k].mr, peer->buf, peer->mr);

			bench_add(&sr->lat[k], t);
			d1 = bn_device_info(c, mem[k].device);
			if (d1.page_requests > d0.page_requests) {
				uint64_t np = d1.fault_ns_sum - d0.fault_ns_sum;

				/* npfd's interval lies inside the WR's: the rest, paired per WR */
				bench_add(&sr->npfd[k], np);
				bench_add(&sr->rest[k], t > np ? t - np : 0);
			}
		}
		{
			uint64_t t0 = bench_now_ns();
			size_t pg;

			for (pg = 0; pg < sr->size; pg += BN_PAGE)
				((volatile char *)touch)[off + pg] = 1;
			bench_add(&sr->base[B_TOUCH], bench_now_ns() - t0);
			t0 = bench_now_ns();
			if (madvise(pop + off, sr->size, MADV_POPULATE_WRITE))
				bench_die("MADV_POPULATE_WRITE: %s", strerror(errno));
			bench_add(&sr->base[B_POPULATE], bench_now_ns() - t0);
		}
		bench_add(&sr->base[B_URING], uring_read(base_fd, dbuf, sr->size, (off_t)off));
	}
	/* The fault-free READ alone, back to back: what interleaving does to it. */
	for (i = 0; i < sr->samples; i++)
		bench_add(&sr->base[B_TRANSFER_ALONE],
			  bn_op(p, 0, NIC_WR_RDMA_READ, pinned->buf, (__u32)sr->size, pinned->mr,
				peer->buf, peer->mr));
	for (k = 0; k < NKINDS; k++) {
		bn_mem_free(&mem[k]);
		if (fds[k] >= 0)
			close(fds[k]);
	}
	close(base_fd);
	munmap(touch, len);
	munmap(pop, len);
	free(dbuf);
}

static void print_row(const struct size_run *sr, const char *method, struct bench_samples *s,
		      uint64_t ref_p50)
{
	struct bench_summary m = bench_summarize(s);
	char label[64], size[16];

	snprintf(size, sizeof(size), "%s", sr->size >= (1 << 20) ? "4MiB" : "4KiB");
	snprintf(label, sizeof(label), "fault_latency-%s-%s", size, method);
	bench_write_cdf(label, s);
	bench_row_begin("fault_latency");
	bench_col_str("size", 5, size);
	bench_col_str("method", 22, method);
	bench_col_u64("samples", 7, m.n);
	bench_col_f("p50_us", 9, 1, (double)m.p50 / 1e3);
	bench_col_f("p95_us", 9, 1, (double)m.p95 / 1e3);
	bench_col_f("p99_us", 9, 1, (double)m.p99 / 1e3);
	bench_col_f("max_us", 9, 1, (double)m.max / 1e3);
	bench_col_f("ratio_to_cpu_first_touch_p50", 8, 2,
		    ref_p50 ? (double)m.p50 / (double)ref_p50 : 0);
	bench_row_end();
}

static void report(struct size_run *sr)
{
	uint64_t touch50, xfer50;
	size_t k, b;

	/* Summaries sort in place: take the reference medians first. */
	touch50 = bench_summarize(&sr->base[B_TOUCH]).p50;
	xfer50 = bench_summarize(&sr->base[B_TRANSFER]).p50;
	bench_text("%-5s %-22s %7s %9s %9s %9s %9s %8s\n", "size", "method", "samples", "p50(us)",
		   "p95(us)", "p99(us)", "max(us)", "x touch");
	for (k = 0; k < NKINDS; k++)
		print_row(sr, kind_name[k], &sr->lat[k], touch50);
	for (b = 0; b < NBASE; b++)
		print_row(sr, base_name[b], &sr->base[b], touch50);

	/*
	 * npfd's clock starts when the uprobe fires (BPF timestamp) and stops when
	 * the answer is posted: it includes the ring buffer wake-up of npfd. The
	 * rest is the NIC: finding the miss, reporting it, noticing the answer,
	 * moving the data. The fault-free transfer is shown for reference only:
	 * its futex wake-ups overlap npfd's work in a faulting WR, so it does
	 * not subtract.
	 */
	bench_text("breakdown (medians, us): %-14s %9s %9s %9s %9s\n", "kind", "total", "npfd",
		   "NIC+data", "no-fault");
	for (k = 0; k < NKINDS; k++) {
		uint64_t tot = bench_summarize(&sr->lat[k]).p50;
		uint64_t np = bench_summarize(&sr->npfd[k]).p50;
		uint64_t rest = bench_summarize(&sr->rest[k]).p50;

		bench_row_begin("fault_latency_breakdown");
		bench_text("%-24s ", "");
		bench_col_str("size", 5, sr->size >= (1 << 20) ? "4MiB" : "4KiB");
		bench_col_str("method", 14, kind_name[k]);
		bench_col_f("total_p50_us", 9, 1, (double)tot / 1e3);
		bench_col_f("npfd_uprobe_to_answer_p50_us", 9, 1, (double)np / 1e3);
		bench_col_f("nic_and_data_p50_us", 9, 1, (double)rest / 1e3);
		bench_col_f("transfer_only_p50_us", 9, 1, (double)xfer50 / 1e3);
		bench_row_end();
	}
	bench_text("\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
						 {"samples-4k", required_argument, NULL, 'k'},
						 {"samples-4m", required_argument, NULL, 'm'},
						 {"help", no_argument, NULL, 'h'},
						 {}};
	struct size_run runs[2] = {{.size = BN_PAGE, .samples = 400},
				   {.size = 4UL << 20, .samples = 16}};
	struct bn_mem peer, pinned;
	struct npf_client *c;
	struct bn_pair p;
	int opt, i;

	bench_prog = "npf-bench-fault_latency";
	while ((opt = getopt_long(argc, argv, "jk:m:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			bench_json = 1;
			break;
		case 'k':
			runs[0].samples = strtoul(optarg, NULL, 0);
			break;
		case 'm':
			runs[1].samples = strtoul(optarg, NULL, 0);
			break;
		case 'h':
			printf("Usage: %s [--json] [--samples-4k N] [--samples-4m N]\n"
			       "Device fault service latency (zero-fill, page cache, O_DIRECT) for 4 KiB\n"
			       "and 4 MiB messages vs CPU first touch, MADV_POPULATE_WRITE, raw io_uring\n"
			       "O_DIRECT reads and a fault-free transfer, in one run. Needs npfd.\n",
			       argv[0]);
			return 0;
		default:
			return 2;
		}
	}
	if (!runs[0].samples || !runs[1].samples)
		bench_die("--samples-4k/--samples-4m must be at least 1");
	if (io_uring_queue_init(8, &ring, 0))
		bench_die("io_uring_queue_init failed");
	c = bn_connect();
	bn_pair_open(&p, 1);
	bn_mem_static(&peer, &p.b, 4UL << 20);
	bn_mem_static(&pinned, &p.a, 4UL << 20);
	for (i = 0; i < 2; i++) {
		run_size(&runs[i], c, &p, &peer, &pinned);
		report(&runs[i]);
	}
	bn_pair_close(&p, c);
	npf_client__close(c);
	return 0;
}
