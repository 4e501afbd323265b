// SPDX-License-Identifier: GPL-2.0
/*
 * A part full of gaps costs npfd no descriptor per gap (moved.c:
 * part_cut()). An unprivileged client registers a file-backed region
 * over a memfd with 1 GiB of data and moves the region's top half out
 * with mremap(): a part of 131072 pages that npfd puts back from the file,
 * holding one descriptor of it meanwhile. While it does, the client
 * munmaps every other page of the part's middle, top down, 4000 of them.
 * A first version split the rest of a part off as a part of its own at
 * each such gap, with a descriptor of its own: thousands of descriptors
 * of the file (a user has 320 in all), out of what npfd has for every
 * client. Checked: every 500 unmaps, npfd holds at most one descriptor of
 * the file more than for the region alone (the part's); when the part is
 * back, every page of it still mapped reads the file's bytes, and the
 * descriptors are the region's alone again.
 */
#include <sys/mman.h>
#include <sys/wait.h>
#include "adv.h"
#include "npf.h"

#define PG 4096UL
#define NPG (262144UL) /* 1 GiB, all of it data in the file */
#define PART (NPG / 2)
#define HOLES 4000
#define EVERY 500

static int go[2], done[2];

static __u64 word(__u64 page, __u64 w)
{
	return page * 0x9e3779b97f4a7c15ULL + w;
}

static void attack(void *arg)
{
	const char *sock = arg;
	NPF_OPTS(npf_client_opts, co, .socket_path = sock);
	static __u64 buf[256 * PG / 8];
	struct npf_client *c;
	__u64 wrong = 0, pages = 0;
	char *m, *to, x;
	int fd, id;

	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	fd = memfd_create("npf-adv-gaps", MFD_CLOEXEC);
	TH_ASSERT(fd >= 0, "memfd: %s", strerror(errno));
	for (__u64 p = 0; p < NPG; p += 256) {
		for (__u64 i = 0; i < 256 * PG / 8; i++)
			buf[i] = word(p + i / (PG / 8), i % (PG / 8));
		TH_ASSERT(pwrite(fd, buf, sizeof(buf), (off_t)(p * PG)) == (ssize_t)sizeof(buf),
			  "write the file: %s", strerror(errno));
	}
	m = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	to = mmap(NULL, PART * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	TH_ASSERT(m != MAP_FAILED && to != MAP_FAILED, "mmap: %s", strerror(errno));
	NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = fd);
	id = npf_client__register(c, m, NPG * PG, &o);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(write(done[1], "r", 1) == 1, "pipe");
	TH_ASSERT(read(go[0], &x, 1) == 1, "pipe"); /* npfd's descriptors counted */
	TH_ASSERT(mremap(m + (NPG - PART) * PG, PART * PG, PART * PG, MREMAP_MAYMOVE | MREMAP_FIXED,
			 to) == to,
		  "mremap: %s", strerror(errno));
	/* every other page of the middle, top down: put back last, so still to put back */
	for (int k = 0; k < HOLES; k++) {
		TH_ASSERT(!munmap(to + (PART - 2 - 2 * (__u64)k) * PG, PG), "munmap: %s",
			  strerror(errno));
		if ((k + 1) % EVERY == 0) {
			TH_ASSERT(write(done[1], "h", 1) == 1, "pipe");
			TH_ASSERT(read(go[0], &x, 1) == 1, "pipe"); /* counted */
		}
	}
	TH_ASSERT(write(done[1], "u", 1) == 1, "pipe");
	TH_ASSERT(read(go[0], &x, 1) == 1, "pipe"); /* the part is back */
	for (__u64 p = 0; p < PART; p++) {
		const __u64 *w = (const __u64 *)(to + p * PG);

		if (p < PART - 1 && p >= PART - 1 - 2 * HOLES && (PART - p) % 2 == 0)
			continue; /* unmapped */
		pages++;
		for (__u64 i = 0; i < PG / 8; i++)
			wrong += w[i] != word(NPG - PART + p, i);
	}
	printf("the part: %llu pages still mapped, %llu words wrong\n", (unsigned long long)pages,
	       (unsigned long long)wrong);
	TH_ASSERT(!wrong, "%llu words of the part read wrong", (unsigned long long)wrong);
	TH_ASSERT(write(done[1], "w", 1) == 1, "pipe");
	TH_ASSERT(read(go[0], &x, 1) == 1, "pipe"); /* hold the region until the count is taken */
	npf_client__close(c);
}

int main(void)
{
	struct th_npfd d;
	int registered, now, most = 0, after = -1, st;
	pid_t pid;
	char x;

	pid = adv_attacker_stepped(&d, go, done, attack);
	TH_ASSERT(read(done[0], &x, 1) == 1 && x == 'r', "the attacker died before it registered");
	registered = adv_fds_of_file(d.pid, "memfd:npf-adv-gaps");
	TH_ASSERT(write(go[1], "g", 1) == 1, "pipe");
	for (int k = 0; k < HOLES / EVERY; k++) {
		TH_ASSERT(read(done[0], &x, 1) == 1 && x == 'h', "the attacker died in its unmaps");
		now = adv_fds_of_file(d.pid, "memfd:npf-adv-gaps");
		most = now > most ? now : most;
		TH_ASSERT(write(go[1], "g", 1) == 1, "pipe");
	}
	TH_ASSERT(read(done[0], &x, 1) == 1 && x == 'u', "the attacker died in its unmaps");
	/* the part is put back by itself */
	after = adv_fds_of_file_down_to(d.pid, "memfd:npf-adv-gaps", registered, 20);
	printf("npfd held %d descriptors of the client's file for its region, at most %d during %d unmaps in its part, %d once it was back\n",
	       registered, most, HOLES, after);
	TH_ASSERT(most <= registered + 1,
		  "npfd held %d descriptors of the file, %d more than for the region alone", most,
		  most - registered);
	TH_ASSERT(after <= registered, "the part is not back after 20 s (%d descriptors more)",
		  after - registered);
	TH_ASSERT(write(go[1], "g", 1) == 1, "pipe");
	TH_ASSERT(read(done[0], &x, 1) == 1 && x == 'w', "the part read wrong, or did not return");
	TH_ASSERT(write(go[1], "g", 1) == 1, "pipe");
	TH_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the attacker failed (status 0x%x)", st);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
