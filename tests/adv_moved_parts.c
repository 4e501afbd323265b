// SPDX-License-Identifier: GPL-2.0
/*
 * Moved parts cost npfd what they hold, not what they span (moved.c). An
 * unprivileged client registers a file-backed region over a 1 TiB sparse
 * file (a memfd), empties the file, and moves 1000 slices of 1 GiB out of
 * the region with mremap(). Each slice is a part that npfd puts back from
 * the file, holding a descriptor of it meanwhile. Put back page by page,
 * past the file's end, they made npfd hold 1000 descriptors more (of which
 * a user has 320) and spend 0.3 s of every loop pass on them, for hours
 * (review). Looked for with SEEK_DATA, an empty file has nothing to put
 * back: within 10 s npfd must hold no more descriptors of the file than
 * the region's own, and
 * the parts must be the process's own memory (a write there is not held).
 */
#include <sys/mman.h>
#include <sys/wait.h>
#include "adv.h"
#include "npf.h"

#define SLICE (1UL << 30)
#define NSLICES 1000
#define LEN ((NSLICES + 1) * SLICE)

static int go[2], done[2];

static void attack(void *arg)
{
	const char *sock = arg;
	NPF_OPTS(npf_client_opts, co, .socket_path = sock);
	struct npf_client *c;
	char *m, x;
	int fd, id;

	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	fd = memfd_create("npf-adv-moved", MFD_CLOEXEC);
	TH_ASSERT(fd >= 0 && !ftruncate(fd, (off_t)LEN), "memfd of 1 TiB: %s", strerror(errno));
	m = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
		 0);
	TH_ASSERT(m != MAP_FAILED, "mmap: %s", strerror(errno));
	NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = fd);
	id = npf_client__register(c, m, LEN, &o);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(!ftruncate(fd, 0), "ftruncate: %s", strerror(errno));
	TH_ASSERT(write(done[1], "r", 1) == 1, "pipe");
	TH_ASSERT(read(go[0], &x, 1) == 1, "pipe"); /* npfd's descriptors counted */
	for (int k = 0; k < NSLICES; k++) {
		char *to = mmap(NULL, SLICE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
				-1, 0);

		TH_ASSERT(to != MAP_FAILED, "mmap: %s", strerror(errno));
		TH_ASSERT(mremap(m + LEN - (size_t)(k + 1) * SLICE, SLICE, SLICE,
				 MREMAP_MAYMOVE | MREMAP_FIXED, to) == to,
			  "mremap %d: %s", k, strerror(errno));
		if (k == NSLICES - 1) {
			/* the last part: written once it is the process's own */
			TH_ASSERT(write(done[1], "m", 1) == 1, "pipe");
			TH_ASSERT(read(go[0], &x, 1) == 1, "pipe");
			to[SLICE - 1] = 7;
		}
	}
	TH_ASSERT(write(done[1], "w", 1) == 1, "pipe");
	TH_ASSERT(read(go[0], &x, 1) == 1, "pipe"); /* hold the region until the count is taken */
	npf_client__close(c);
}

int main(void)
{
	struct th_npfd d;
	int registered, after = -1, st;
	pid_t pid;
	char x;

	pid = adv_attacker_stepped(&d, go, done, attack);
	TH_ASSERT(read(done[0], &x, 1) == 1 && x == 'r', "the attacker died before it registered");
	registered = adv_fds_of_file(d.pid, "memfd:npf-adv-moved");
	TH_ASSERT(write(go[1], "g", 1) == 1, "pipe");
	TH_ASSERT(read(done[0], &x, 1) == 1 && x == 'm', "the attacker died before its mremaps");
	/* npfd holds the parts now; they must end without the process doing anything */
	after = adv_fds_of_file_down_to(d.pid, "memfd:npf-adv-moved", registered, 10);
	printf("npfd held %d descriptors of the client's file for its region, %d after its %d moved parts\n",
	       registered, after, NSLICES);
	TH_ASSERT(after <= registered,
		  "npfd holds %d descriptors more for the client's parts after 10 s",
		  after - registered);
	TH_ASSERT(write(go[1], "g", 1) == 1, "pipe");
	TH_ASSERT(read(done[0], &x, 1) == 1 && x == 'w',
		  "the write to the last part did not return");
	TH_ASSERT(write(go[1], "g", 1) == 1, "pipe");
	TH_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st),
		  "the attacker failed (status 0x%x)", st);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
