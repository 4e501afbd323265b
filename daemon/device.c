// SPDX-License-Identifier: GPL-2.0
/*
 * Device memory regions: npfd's side of the software NIC (nic/) and of any
 * device whose IO page table npfd keeps.
 *
 * A client attaches an MR's IO page table (a memfd, npf_nic_abi.h) to one
 * of its registered regions. From then on:
 *
 *   NIC: page missing -> npf_nic_fault_report(req) --uprobe--> BPF record
 *   npfd: record -> group {cookie, range} -> each missing page queued in the
 *         resolver's batch like a CPU fault -> installed in the client's mm
 *         (UFFDIO_COPY / ZEROPAGE; EEXIST means it is there already)
 *         -> entries set present (version bump) -> response in the ring
 *         -> one futex wake per device per batch
 *
 * npfd is the only writer of PRESENT. Before pages stop being safe for DMA
 * (unregistration, detach, munmap, MADV_DONTNEED) their entries are
 * cleared with a version bump and an invalidation is posted. Detach and
 * unregistration retire the device: it is marked retiring at once (its
 * requests are answered INVALID, no entry is set again), and the client's
 * request is answered only when the NIC acknowledges that no DMA to the
 * pages is in flight (seed 000 Fig. 2), or INVAL_ACK_TIMEOUT_NS later with
 * -ETIMEDOUT. The client must not reuse the pages before its answer. npfd
 * does not wait in the handler: the event loop goes on (the NIC may itself
 * be blocked on a CPU fault only npfd can serve) and device_flush() looks
 * at the acknowledgements after each pass.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include "collect.h"
#include "device.h"
#include "ids.h"
#include "log.h"
#include "mmwatch.h"
#include "npf_nic_abi.h"
#include "policy.h"
#include "region.h"
#include "resolve.h"
#include "util.h"
#include "wait.h"
#include "wire_check.h"

#define INVAL_ACK_TIMEOUT_NS (2ULL * 1000 * 1000 * 1000)

struct npfd_device {
	struct list_head node;	    /* in devices */
	struct npfd_region *region; /* NULL once retiring */
	struct npfd_mm *mm;	    /* the process whose device it is; NULL once orphaned */
	uid_t uid;		    /* mm's user, whom it is listed for (kept while it retires) */
	bool detached;		    /* a tombstone: kept to answer late requests INVALID */
	bool retiring;		    /* being detached: waiting for the NIC's acknowledgement */
	bool orphaned;		    /* its process went while it was retiring: free it after */
	__u64 retire_seq;	    /* the invalidation whose acknowledgement ends the retirement */
	__u64 retire_deadline;	    /* now_ns() past which it ends without one */
	struct npfd_wait *wait;	    /* the request answered when it ends, or NULL */
	__u32 id;
	struct npf_iopt_header *hdr;
	size_t map_len;
	__u64 *pte;
	int table_fd;	  /* the table's memfd: where its data is (SEEK_DATA) */
	__u64 pte_offset; /* of entry 0 in it */
	__u64 start, npages;
	__u64 inval_seq;
	/*
	 * Invalidations the ring had no room for, posted in order as the NIC
	 * frees slots (device_flush): never dropped, or a DMA could still be
	 * in flight to a page npfd let go.
	 */
	struct npf_inval_request *backlog;
	unsigned int nbacklog, backlog_cap;
	bool resp_posted;  /* responses posted since the last wake */
	__u64 evicted_gen; /* bumped when eviction takes pages of it (device_pages_evicted()) */
	struct npf_device_info info;
};

/*
 * Page request groups one device may have waiting. An honest NIC has at
 * most 16 requests in flight on each of its 1024 queue pairs; one that
 * never reads its answers (its response ring stays full) would otherwise
 * make npfd keep every request it raises, and walk them all on every pass
 * (found by an adversarial review). Past it a request is dropped: the NIC
 * asks again.
 */
#define DEVICE_GROUPS_MAX 16384

/*
 * Pages one request is served at most: the group is answered once they
 * are, and the NIC asks again for the rest (as after a policy's early
 * answer). A request is the client's to size: one for a whole 128 TiB
 * region would have npfd install and walk it all before it looked at
 * anyone else's faults.
 */
#define DEVICE_REQUEST_MAX_PAGES 16384

/* A page request group waiting for its pages. */
struct group {
	struct list_head node;
	struct npfd_device *dev;
	__u64 first, last; /* page indexes, inclusive */
	__u64 cookie;
	__u64 raised_ns;
	unsigned int tries; /* pages fetched again after they went missing */
	__u64 evicted_gen;  /* its device's when it was raised */
	bool write;
};

static struct list_head devices = LIST_HEAD_INIT(devices);
static struct list_head groups = LIST_HEAD_INIT(groups);
static struct device_hooks hooks;

void device_set_hooks(const struct device_hooks *h)
{
	hooks = *h;
}
static unsigned int nretiring;	 /* devices waiting for an acknowledgement */
static unsigned int nbacklogged; /* devices with invalidations waiting for ring slots */

/* A backlog past this many requests becomes one request for the whole device. */
#define INVAL_BACKLOG_MAX 1024

/*
 * Wake the NIC on a ring's tail that npfd has just stored, if it sleeps:
 * while it polls, the wake is a system call for nothing. The barrier
 * orders the tail's store before the flag's load (npf_nic_abi.h).
 */
static void nic_wake(struct npfd_device *d, __u32 *tail)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&d->hdr->resp.nic_sleeping, __ATOMIC_RELAXED))
		syscall(SYS_futex, tail, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/*
 * A device of process tgid. Ids npfd hands out are unique, but an adopted
 * device keeps the id it had, which only its own process can claim: so a
 * device is always named by (process, id), and a process that claims
 * another's id cannot take the other's device or its page requests.
 */
static struct npfd_device *device_of(pid_t tgid, __u32 id)
{
	struct npfd_device *d;

	list_for_each_entry(d, &devices, node)
		if (d->id == id && d->mm && !d->orphaned && d->mm->tgid == tgid)
			return d;
	return NULL;
}

static bool pte_present(const struct npfd_device *d, __u64 i)
{
	return __atomic_load_n(&d->pte[i], __ATOMIC_ACQUIRE) & NPF_PTE_PRESENT;
}

/* Set or clear PRESENT (with R/W) on entry i, bumping its version; A/D bits are the NIC's. */
static bool pte_set(struct npfd_device *d, __u64 i, bool present)
{
	__u64 old = __atomic_load_n(&d->pte[i], __ATOMIC_RELAXED), val;

	do {
		if (!!(old & NPF_PTE_PRESENT) == present)
			return false;
		val = ((old >> NPF_PTE_VERSION_SHIFT) + 1) << NPF_PTE_VERSION_SHIFT;
		val |= old & (NPF_PTE_ACCESSED | NPF_PTE_DIRTY);
		if (present)
			val |= NPF_PTE_PRESENT | NPF_PTE_READ | NPF_PTE_WRITE;
	} while (!__atomic_compare_exchange_n(&d->pte[i], &old, val, false, __ATOMIC_RELEASE,
					      __ATOMIC_RELAXED));
	return true;
}

static int post_response(struct npfd_device *d, __u64 cookie, __u32 status)
{
	struct npf_resp_ring *rr = &d->hdr->resp;
	__u32 head = __atomic_load_n(&rr->head, __ATOMIC_ACQUIRE), tail = rr->tail;

	if (tail - head >= NPF_NIC_RING_SIZE)
		return -EAGAIN; /* the NIC has not consumed: try after the next batch */
	rr->ent[tail % NPF_NIC_RING_SIZE] =
		(struct npf_page_response){.cookie = cookie, .status = status};
	__atomic_store_n(&rr->tail, tail + 1, __ATOMIC_RELEASE);
	d->resp_posted = true;
	return 0;
}

/* Post as many backlogged invalidations as the ring has slots for, in order. */
static void inval_post_backlog(struct npfd_device *d)
{
	struct npf_inval_ring *ir = &d->hdr->inval;
	__u32 head = __atomic_load_n(&ir->head, __ATOMIC_ACQUIRE), tail = ir->tail;
	unsigned int i = 0;

	while (i < d->nbacklog && tail - head < NPF_NIC_RING_SIZE)
		ir->ent[tail++ % NPF_NIC_RING_SIZE] = d->backlog[i++];
	if (!i)
		return;
	memmove(d->backlog, d->backlog + i, (d->nbacklog - i) * sizeof(*d->backlog));
	d->nbacklog -= i;
	if (!d->nbacklog)
		nbacklogged--;
	__atomic_store_n(&ir->tail, tail, __ATOMIC_RELEASE);
	nic_wake(d, &ir->tail);
}

/*
 * Queue an invalidation that found the ring full. The NIC acknowledges by
 * sequence number, so a backlog grown past its bound can be folded into one
 * request for the whole device carrying the newest sequence: whoever waits
 * for an older one is answered by that acknowledgement too.
 */
static int inval_defer(struct npfd_device *d, const struct npf_inval_request *req)
{
	if (!d->nbacklog)
		nbacklogged++;
	if (d->nbacklog == INVAL_BACKLOG_MAX) {
		d->backlog[0] = (struct npf_inval_request){
			.seq = req->seq, .first_page = 0, .npages = d->npages};
		d->nbacklog = 1;
		return 0;
	}
	if (d->nbacklog == d->backlog_cap) {
		unsigned int cap = d->backlog_cap ? d->backlog_cap * 2 : 16;
		void *p = realloc(d->backlog, cap * sizeof(*d->backlog));

		if (!p) {
			if (!d->nbacklog)
				nbacklogged--;
			return -ENOMEM;
		}
		d->backlog = p;
		d->backlog_cap = cap;
	}
	d->backlog[d->nbacklog++] = *req;
	return 0;
}

/*
 * Clear [first, first + n) and tell the NIC, at once or, when its ring is
 * full, as soon as it has room. Returns 0 and the invalidation's sequence
 * number in *seq_out, whose acknowledgement (acked_seq >= it) means no DMA
 * to those pages is in flight; -ENOMEM only if it could not be queued (the
 * entries are cleared all the same).
 */
/*
 * Clear the entries of [first, end) that are present, reading only the
 * table's data (SEEK_DATA, SEEK_HOLE; tmpfs counts swapped pages as
 * data): a hole's entries are zeros, and reading one through the mapping
 * makes the kernel allocate it. A client's table of 2^24 entries, all but
 * a few holes, made a detach walk every one and fault in 128 MiB of shmem
 * in 2.4 s (found by an adversarial review; at 2^35 entries, 256 GiB).
 */
static void clear_entries(struct npfd_device *d, __u64 first, __u64 end)
{
	const __u64 esz = sizeof(*d->pte);

	if (end > d->npages)
		end = d->npages;
	while (first < end) {
		off_t data = lseek(d->table_fd, (off_t)(d->pte_offset + first * esz), SEEK_DATA);
		off_t hole = data < 0 ? -1 : lseek(d->table_fd, data, SEEK_HOLE);
		__u64 a, b;

		if (data < 0 && errno == ENXIO)
			return; /* holes to the end */
		if (data < 0 || hole < 0) {
			a = first; /* cannot tell: every entry */
			b = end;
		} else {
			a = ((__u64)data - d->pte_offset) / esz;
			b = ((__u64)hole - d->pte_offset + esz - 1) / esz;
			a = a < first ? first : a;
			b = b > end ? end : b;
		}
		for (__u64 i = a; i < b; i++)
			pte_set(d, i, false);
		first = b > first ? b : first + 1;
	}
}

static int invalidate(struct npfd_device *d, __u64 first, __u64 n, __u64 *seq_out)
{
	struct npf_inval_request req;
	int err;

	clear_entries(d, first, first + n < first ? d->npages : first + n);
	req = (struct npf_inval_request){.seq = d->inval_seq + 1, .first_page = first, .npages = n};
	/* Behind a backlog too, so that the NIC sees them in order. */
	err = inval_defer(d, &req);
	if (err) {
		pr_warn("device %u: cannot queue an invalidation: %s", d->id, strerror(-err));
		return err;
	}
	d->inval_seq = req.seq;
	inval_post_backlog(d);
	if (d->nbacklog)
		pr_debug("device %u: invalidation ring full, %u waiting", d->id, d->nbacklog);
	d->info.invalidations++;
	if (seq_out)
		*seq_out = req.seq;
	return 0;
}

static void group_free(struct group *g)
{
	g->dev->info.requests_waiting--;
	list_del_init(&g->node);
	free(g);
}

static void answer_groups_of(struct npfd_device *d, __u32 status)
{
	struct group *g, *tmp;

	list_for_each_entry_safe(g, tmp, &groups, node) {
		if (g->dev != d)
			continue;
		post_response(d, g->cookie, status);
		group_free(g);
	}
}

static void device_free(struct npfd_device *d)
{
	if (d->nbacklog)
		nbacklogged--;
	free(d->backlog);
	list_del_init(&d->node);
	munmap(d->hdr, d->map_len);
	close(d->table_fd);
	free(d);
}

/*
 * The retirement of d ends: its acknowledgement came (err 0), its deadline
 * passed or npfd stops (err < 0). It stays a tombstone; the request that
 * waited for it hears how it ended.
 */
static void retire_end(struct npfd_device *d, int err)
{
	struct npfd_wait *w = d->wait;

	d->retiring = false;
	d->detached = true;
	d->wait = NULL;
	nretiring--;
	if (err == -ETIMEDOUT)
		pr_warn("device %u: the NIC did not acknowledge invalidation %llu within %llu ms: its entries are cleared, but DMA to its pages may still be in flight",
			d->id, (unsigned long long)d->retire_seq,
			INVAL_ACK_TIMEOUT_NS / 1000000ULL);
	pr_info("device %u detached from region %u%s", d->id, d->info.region_id,
		err ? " without the NIC's acknowledgement" : "");
	if (w && err)
		wait_fail(
			w, err,
			"device %u is detached, but the NIC did not acknowledge its invalidation (%s): DMA to its pages may still be in flight; do not reuse them before the device is closed",
			d->id, err == -ETIMEDOUT ? "no answer within 2 s" : "npfd is stopping");
	if (w)
		wait_done(w);
	if (d->orphaned)
		device_free(d);
}

/*
 * Stop serving a device: answer what it waits for with INVALID, clear and
 * invalidate every entry, and keep it as a tombstone so that requests the
 * NIC still makes for it get INVALID rather than silence. With
 * wait_for_ack it stays retiring until the NIC acknowledges (or the
 * deadline passes), and w, if any, is answered then.
 */
static void device_retire(struct npfd_device *d, bool wait_for_ack, struct npfd_wait *w)
{
	__u64 seq = 0;
	int err;

	d->retiring = true;
	d->region = NULL;
	nretiring++;
	mmwatch_device_detached();
	answer_groups_of(d, NPF_PR_INVALID);
	err = invalidate(d, 0, d->npages, &seq);
	if (d->resp_posted) {
		d->resp_posted = false;
		nic_wake(d, &d->hdr->resp.tail);
	}
	if (err) {
		if (w)
			wait_fail(
				w, err,
				"device %u is detached, but its invalidation could not be queued (out of memory): DMA to its pages may still be in flight",
				d->id);
		w = NULL;
		wait_for_ack = false;
	}
	d->wait = w;
	if (w)
		w->pending++;
	d->retire_seq = seq;
	d->retire_deadline = now_ns() + INVAL_ACK_TIMEOUT_NS;
	if (!wait_for_ack)
		retire_end(d, 0);
}

/* Has the NIC acknowledged invalidation seq? (acked_seq is the NIC's to write: only compared) */
static bool acked(const struct npfd_device *d, __u64 seq)
{
	return __atomic_load_n(&d->hdr->inval.acked_seq, __ATOMIC_ACQUIRE) >= seq;
}

/* After each pass of the loop: end the retirements that were acknowledged or timed out. */
static void retire_poll(void)
{
	struct npfd_device *d, *tmp;
	__u64 t;

	if (!nretiring)
		return;
	t = now_ns();
	list_for_each_entry_safe(d, tmp, &devices, node) {
		if (!d->retiring)
			continue;
		if (acked(d, d->retire_seq))
			retire_end(d, 0);
		else if (t > d->retire_deadline)
			retire_end(d, -ETIMEDOUT);
	}
}

/* npfd stops: the retirements still waiting end now, and their requests hear so. */
void device_retire_stop(void)
{
	struct npfd_device *d, *tmp;

	list_for_each_entry_safe(d, tmp, &devices, node)
		if (d->retiring)
			retire_end(d, acked(d, d->retire_seq) ? 0 : -ESHUTDOWN);
}

/* The process is gone: nothing will ask for its devices any more. */
void device_mm_gone(struct npfd_mm *mm)
{
	struct npfd_device *d, *tmp;

	list_for_each_entry_safe(d, tmp, &devices, node) {
		if (d->mm != mm)
			continue;
		if (d->retiring) {
			bool alive = mm_alive(mm);

			d->orphaned = true; /* retire_end() frees it */
			d->mm = NULL;
			/* A dead process has no DMA in flight: nothing to wait for. */
			if (!alive)
				retire_end(d, 0);
		} else {
			device_free(d);
		}
	}
}

/*
 * adopt_id: the device was attached through an earlier npfd and puts that
 * id in its page requests; keep it (an id npfd hands out is never reused,
 * see id_alloc()) or refuse.
 */
int device_attach(struct npfd_client *c, const struct npf_device_attach_req *req, __u32 adopt_id,
		  int fd, struct npf_device_info *out, char *err, size_t errlen)
{
	struct npfd_region *r = region_find_id(req->region_id);
	struct npf_iopt_header hdr;
	struct npfd_device *d;
	struct stat st;
	size_t need;
	void *map;
	int ret, seals;

	if (req->flags)
		return refuse(err, errlen, EINVAL, "unknown flags 0x%x", req->flags);
	if (!r || !c->mm || r->mm != c->mm)
		return refuse(err, errlen, ENOENT, "no region %u of this client", req->region_id);
	if (adopt_id && (d = device_of(c->mm->tgid, adopt_id))) {
		/* handed over within this npfd (the client reconnected): it is there */
		if (d->mm == c->mm && d->region == r && !d->detached && !d->retiring) {
			*out = d->info;
			return 0;
		}
		return refuse(
			err, errlen, EEXIST,
			"device id %u is in use by another device of this process: the device must be attached again and told its new id",
			adopt_id);
	}
	/*
	 * npfd maps the table and writes it from its event loop: a table the
	 * client could shrink afterwards would make those writes SIGBUS. Asked
	 * first: only a memfd answers, and an fstat() of a file on FUSE would
	 * wait for its server's GETATTR.
	 */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return refuse(
			err, errlen, EPERM,
			"the IO page table is not sealed against shrinking (%s): create it with memfd_create(MFD_ALLOW_SEALING) and add F_SEAL_SHRINK with fcntl(F_ADD_SEALS) before attaching",
			seals < 0 ? "not a sealable memfd" : "F_SEAL_SHRINK missing");
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (size_t)st.st_size < sizeof(hdr))
		return refuse(
			err, errlen, EINVAL,
			"the descriptor is not an IO page table (a memfd of at least %zu bytes)",
			sizeof(hdr));
	if (pread(fd, &hdr, sizeof(hdr), 0) != sizeof(hdr))
		return refuse(err, errlen, EINVAL, "cannot read the IO page table's header");
	ret = wire_check_iopt(&hdr, (__u64)st.st_size, r->start, r->length, &need, err, errlen);
	if (ret)
		return ret;

	map = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return refuse(err, errlen, errno, "cannot map the IO page table: %s",
			      strerror(errno));
	d = calloc(1, sizeof(*d));
	if (!d) {
		munmap(map, need);
		return refuse(err, errlen, ENOMEM, "out of memory");
	}
	d->table_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	ret = d->table_fd < 0 ? refuse(err, errlen, errno, "cannot keep the IO page table: %s",
				       strerror(errno)) :
				collect_nic_uprobe(c->mm, err, errlen);
	if (ret) {
		if (d->table_fd >= 0)
			close(d->table_fd);
		munmap(map, need);
		free(d);
		return ret;
	}
	d->region = r;
	d->mm = c->mm;
	d->uid = c->mm->uid;
	if (adopt_id)
		id_taken(ID_DEVICE, adopt_id);
	d->id = adopt_id ? adopt_id : id_alloc(ID_DEVICE);
	d->hdr = map;
	d->map_len = need;
	d->pte = (__u64 *)((char *)map + hdr.pte_offset);
	d->pte_offset = hdr.pte_offset;
	d->start = hdr.start;
	d->npages = hdr.npages;
	d->inval_seq = __atomic_load_n(&d->hdr->inval.acked_seq, __ATOMIC_ACQUIRE);
	d->info.device_id = d->id;
	d->info.region_id = r->id;
	d->info.tgid = (__u32)c->mm->tgid;
	d->info.start = d->start;
	d->info.npages = d->npages;
	list_add_tail(&d->node, &devices);
	mmwatch_device_attached();
	*out = d->info;
	pr_info("pid %d: device %u %s region %u: 0x%llx, %llu pages", c->pid, d->id,
		adopt_id ? "adopted in" : "attached to", r->id, (unsigned long long)d->start,
		(unsigned long long)d->npages);
	return 0;
}

int device_detach(struct npfd_client *c, __u32 id, struct npfd_wait *w, char *err, size_t errlen)
{
	struct npfd_device *d = c->mm ? device_of(c->mm->tgid, id) : NULL;

	if (!d || d->detached || !c->mm || d->mm != c->mm)
		return refuse(err, errlen, ENOENT, "no device %u of this client", id);
	if (d->retiring)
		return refuse(err, errlen, EALREADY, "device %u is already being detached", id);
	device_retire(d, true, w);
	return 0;
}

/*
 * Region going away: retire its devices; wait for acks only if its process
 * lives on (w, if any, is answered when they come).
 */
void device_region_gone(struct npfd_region *r, bool process_alive, struct npfd_wait *w)
{
	struct npfd_device *d, *tmp;

	list_for_each_entry_safe(d, tmp, &devices, node)
		if (d->region == r && !d->retiring)
			device_retire(d, process_alive, w);
}

/*
 * Eviction: have r's devices acknowledged every invalidation npfd posted
 * them? Then no DMA to the pages they cleared is in flight.
 */
bool device_region_quiet(struct npfd_region *r)
{
	struct npfd_device *d;

	list_for_each_entry(d, &devices, node)
		if (d->region == r && !d->detached && !d->retiring &&
		    (d->nbacklog || !acked(d, d->inval_seq)))
			return false;
	return true;
}

/* Did a device of r touch page since the last look (its ACCESSED bit, cleared here)? */
bool device_page_referenced(struct npfd_region *r, __u64 page)
{
	struct npfd_device *d;
	bool ref = false;

	list_for_each_entry(d, &devices, node) {
		__u64 i;

		if (d->region != r || page < d->start ||
		    (page - d->start) >> NPF_PAGE_SHIFT >= d->npages)
			continue;
		i = (page - d->start) >> NPF_PAGE_SHIFT;
		if (__atomic_fetch_and(&d->pte[i], ~NPF_PTE_ACCESSED, __ATOMIC_RELAXED) &
		    NPF_PTE_ACCESSED)
			ref = true;
	}
	return ref;
}

unsigned int device_fds(const struct npfd_mm *mm)
{
	const struct npfd_device *d;
	unsigned int n = 0;

	list_for_each_entry(d, &devices, node)
		n += d->mm == mm;
	return n;
}

void device_list(void (*emit)(const struct npf_device_info *, uid_t, void *), void *arg)
{
	struct npfd_device *d;

	list_for_each_entry(d, &devices, node)
		if (!d->detached)
			emit(&d->info, d->uid, arg);
}

/* The end of the device's range: its table was checked to fit the region's. */
static __u64 d_end(const struct npfd_device *d)
{
	return d->start + d->npages * NPF_PAGE_SIZE;
}

/*
 * Pages of [start, start + len) of region r stop being safe for DMA
 * (munmap, MADV_DONTNEED): clear them in every device that maps them.
 * The kernel does not wait for npfd here, so neither can npfd wait for the
 * NIC; the NIC finds the entries gone before its next access.
 */
void device_range_removed(struct npfd_region *r, __u64 start, __u64 end)
{
	struct npfd_device *d;

	list_for_each_entry(d, &devices, node) {
		__u64 lo = start > d->start ? start : d->start;
		__u64 hi = d_end(d);

		if (d->region != r)
			continue;
		if (end < hi)
			hi = end;
		if (lo >= hi)
			continue;
		invalidate(d, (lo - d->start) >> NPF_PAGE_SHIFT, (hi - lo) >> NPF_PAGE_SHIFT, NULL);
	}
}

void device_pages_evicted(struct npfd_region *r, __u64 start, __u64 end)
{
	struct npfd_device *d;

	device_range_removed(r, start, end);
	list_for_each_entry(d, &devices, node)
		if (d->region == r && start < d_end(d) && end > d->start)
			d->evicted_gen++;
}

/* The resolver installed [start, start + npages) of region r: the devices may use it now. */
void device_pages_installed(struct npfd_region *r, __u64 start, __u64 npages)
{
	struct npfd_device *d;

	list_for_each_entry(d, &devices, node) {
		__u64 end = start + npages * NPF_PAGE_SIZE, i, lo, hi;

		/*
		 * A retiring device must never get an entry back: pages still
		 * installed while npfd waits for its acknowledgement are not its.
		 */
		if (d->region != r || d->retiring || d->detached)
			continue;
		lo = start > d->start ? start : d->start;
		hi = d_end(d);
		if (end < hi)
			hi = end;
		for (i = lo; i < hi; i += NPF_PAGE_SIZE)
			if (!region_page_evicting(r, i) &&
			    pte_set(d, (i - d->start) >> NPF_PAGE_SHIFT, true))
				d->info.pages_mapped++;
		if (lo < hi)
			mmwatch_mapped(r, lo, (hi - lo) >> NPF_PAGE_SHIFT);
	}
}

/* Does any page of [first, last] of d lie in a hole of its region? */
static bool in_hole(const struct npfd_device *d, __u64 first, __u64 last)
{
	__u64 lo = d->start + first * NPF_PAGE_SIZE, hi = d->start + (last + 1) * NPF_PAGE_SIZE;
	__u64 from = lo, pe;

	return d->region && d->region->holes.n &&
	       (!holes_piece(&d->region->holes, &lo, hi, &pe) || lo != from || pe != hi);
}

/*
 * Queue the pages of [first, last] the device cannot use yet. Pages the
 * process already has need no install and are mapped at once: those npfd
 * installed itself it knows of; others (written by the CPU before the
 * region was registered, say) one read of /proc/PID/pagemap finds.
 * Installing them would cost an ioctl each just to hear EEXIST.
 */
static __u64 queue_missing(struct npfd_device *d, __u64 first, __u64 last, __u64 raised,
			   __u32 max_pages, bool write)
{
	struct npfd_mm *mm = d->mm;
	__u64 ent[512], i, j, n, queued = 0;

	for (i = first; i <= last; i += n) {
		__u64 va = d->start + i * NPF_PAGE_SIZE;
		int looked = 0; /* 0: pagemap not read yet, 1: read, -1: unreadable */

		n = last - i + 1 < 512 ? last - i + 1 : 512;
		for (j = 0; j < n; j++) {
			__u64 page = va + j * NPF_PAGE_SIZE;
			bool exists = region_page_installed(d->region, page);

			/* being evicted: mapped again (or fetched) once that is over */
			if (pte_present(d, i + j) || region_page_evicting(d->region, page))
				continue;
			if (!exists && !looked)
				looked = mm_pagemap_read_now(mm, va, ent, n) ? 1 : -1;
			/* pagemap bits 63/62: present in RAM / in swap */
			if (!exists && looked == 1)
				exists = ent[j] >> 62;
			if (exists) {
				if (pte_set(d, i + j, true))
					d->info.pages_mapped++;
				mmwatch_mapped(d->region, page, 1);
			} else {
				resolve_queue(mm, page, raised, write);
				/* A policy may answer early (pio, pi4): the device asks again. */
				if (max_pages && ++queued == max_pages)
					return i + j;
			}
		}
	}
	return last;
}

/* Are all pages of g present for the device? */
static bool group_mapped(const struct group *g)
{
	__u64 i;

	for (i = g->first; i <= g->last; i++)
		if (!pte_present(g->dev, i))
			return false;
	return true;
}

/*
 * Answer g and forget it. When the NIC's response ring is full, g stays
 * and is answered after a later batch. The wake-up is device_flush()'s.
 */
/* g's pages are wanted by its device: eviction leaves them to it for a while (evict.c). */
static void group_wanted(const struct group *g)
{
	if (hooks.wanted && g->dev->region)
		hooks.wanted(g->dev->region, g->dev->start + g->first * NPF_PAGE_SIZE,
			     g->last - g->first + 1);
}

static void group_answer(struct group *g, __u32 status)
{
	__u64 t;

	if (post_response(g->dev, g->cookie, status))
		return;
	if (status == NPF_PR_SUCCESS)
		group_wanted(g);
	t = now_ns();
	g->dev->info.page_requests++;
	if (t > g->raised_ns)
		g->dev->info.fault_ns_sum += t - g->raised_ns;
	group_free(g);
}

/*
 * Device requests waiting for their policy's decision (NPF_DECIDE_AWAIT_POLICY).
 * Both records are written by one run of the uprobe, so a decision that has
 * not come AWAIT_NS later is not coming: the policy failed.
 */
#define MAX_AWAIT 256
#define AWAIT_NS (1000 * 1000)
static struct npf_fault_record await[MAX_AWAIT];
static unsigned int nawait;
static __u64 policy_failures;

static void device_request(const struct npf_fault_record *rec);

void device_record(const struct npf_fault_record *rec)
{
	unsigned int i;

	if (rec->decision.flags & NPF_DECIDE_AWAIT_POLICY) {
		if (nawait == MAX_AWAIT) {
			device_request(&await[0]); /* no room to wait: the built-in decision */
			memmove(await, await + 1, --nawait * sizeof(await[0]));
		}
		await[nawait++] = *rec;
		return;
	}
	for (i = 0; i < nawait; i++)
		if (await[i].cookie == rec->cookie && await[i].tgid == rec->tgid) {
			memmove(await + i, await + i + 1, (--nawait - i) * sizeof(await[0]));
			break;
		}
	device_request(rec);
}

/* Is something due soon (a policy's decision, an acknowledgement)? The loop comes back quickly. */
bool device_awaiting(void)
{
	return nawait != 0 || nretiring != 0 || nbacklogged != 0;
}

void device_await_expire(void)
{
	__u64 t;

	if (!nawait)
		return;
	t = now_ns();
	while (nawait && t - await[0].ts_ns > AWAIT_NS) {
		struct npf_fault_record rec = await[0];

		memmove(await, await + 1, --nawait * sizeof(await[0]));
		if (!policy_failures++ || !(policy_failures & 1023))
			pr_warn("device %u: its policy gave no decision for a page request (%llu so far): the built-in decision applies",
				rec.device_id, (unsigned long long)policy_failures);
		memset(&rec.decision, 0, sizeof(rec.decision));
		device_request(&rec);
	}
}

/* A device page request and its decision. */
static void device_request(const struct npf_fault_record *rec)
{
	struct npfd_device *d = device_of((pid_t)rec->tgid, rec->device_id);
	struct npf_policy_decision dec;
	__u64 first, last, n;
	struct group *g;

	if (!d || !d->mm || (pid_t)rec->tgid != d->mm->tgid) {
		pr_warn("pid %u: page request for unknown device %u dropped", rec->tgid,
			rec->device_id);
		return;
	}
	if (d->detached || d->retiring) {
		/* Not served any more: the work request fails, the NIC does not hang. */
		post_response(d, rec->cookie, NPF_PR_INVALID);
		return;
	}
	/*
	 * addr and len are the client's (the uprobe copies its request):
	 * end - addr, not addr + len, which wraps (len 2^64 - addr + 4096
	 * passed, and the walk wrote past the table and killed npfd).
	 */
	if (!rec->len || rec->addr < d->start || rec->addr >= d_end(d) ||
	    rec->len > d_end(d) - rec->addr) {
		pr_warn("device %u: page request 0x%llx+%llu outside the device region: invalid",
			d->id, (unsigned long long)rec->addr, (unsigned long long)rec->len);
		post_response(d, rec->cookie, NPF_PR_INVALID);
		return;
	}
	first = (rec->addr - d->start) >> NPF_PAGE_SHIFT;
	last = (rec->addr + rec->len - 1 - d->start) >> NPF_PAGE_SHIFT;
	if (last - first >= DEVICE_REQUEST_MAX_PAGES)
		last = first + DEVICE_REQUEST_MAX_PAGES - 1;
	if (in_hole(d, first, last)) {
		/*
		 * A hole of its region (region.c) is not the region's memory,
		 * whatever is mapped there now: mapped for the device, it would
		 * never be invalidated. The DMA fails, as to unmapped memory.
		 */
		pr_warn_rl(
			"device %u: page request 0x%llx+%llu reaches a hole of region %u: invalid",
			d->id, (unsigned long long)rec->addr, (unsigned long long)rec->len,
			d->region->id);
		post_response(d, rec->cookie, NPF_PR_INVALID);
		return;
	}
	if (d->info.requests_waiting >= DEVICE_GROUPS_MAX) {
		pr_warn_rl(
			"device %u: %u page requests wait for answers its NIC does not take: one more dropped",
			d->id, d->info.requests_waiting);
		return;
	}
	dec = policy_clamp(rec, d->region);
	/* what the policy adds stops short of a hole */
	for (n = dec.before < first ? dec.before : first; n && in_hole(d, first - n, first - 1);
	     n--)
		;
	first -= n;
	for (n = dec.after < d->npages - 1 - last ? dec.after : d->npages - 1 - last;
	     n && in_hole(d, last + 1, last + n); n--)
		;
	last += n;
	g = calloc(1, sizeof(*g));
	if (!g) {
		post_response(d, rec->cookie, NPF_PR_INVALID);
		return;
	}
	g->dev = d;
	g->first = first;
	g->last = last;
	g->cookie = rec->cookie;
	g->raised_ns = rec->ts_ns;
	g->evicted_gen = d->evicted_gen;
	g->write = rec->access & NPF_ACCESS_WRITE;
	list_add_tail(&g->node, &groups);
	d->info.requests_waiting++;
	group_wanted(g);
	g->last = queue_missing(d, first, last, rec->ts_ns, dec.max_pages,
				rec->access & NPF_ACCESS_WRITE);
	/* Nothing to install (a minor fault): answer now, not after the batch. */
	if (group_mapped(g))
		group_answer(g, NPF_PR_SUCCESS);
}

/* Is a page of g being evicted? It is fetched again once that is over. */
static bool group_evicting(const struct group *g)
{
	__u64 i;

	if (!g->dev->region || !g->dev->region->evicting)
		return false;
	for (i = g->first; i <= g->last; i++)
		if (region_page_evicting(g->dev->region, g->dev->start + i * NPF_PAGE_SIZE))
			return true;
	return false;
}

/*
 * After a resolver batch: answer every group whose pages are all present
 * now; a group with a page neither present nor still queued failed (its
 * memory went away) and is answered INVALID. Then one wake per device.
 */
void device_flush(void)
{
	struct npfd_device *d;
	struct group *g, *tmp;

	list_for_each_entry_safe(g, tmp, &groups, node) {
		__u32 status = NPF_PR_SUCCESS;

		if (!group_mapped(g)) {
			if (resolve_pending() || group_evicting(g))
				continue; /* retried next batch */
			/*
			 * A page went missing again after it was installed
			 * (MADV_DONTNEED raced the answer): fetch it again, a
			 * few times, before calling the request failed.
			 */
			if (g->dev->region && g->tries++ < 3) {
				queue_missing(g->dev, g->first, g->last, g->raised_ns, 0, g->write);
				continue;
			}
			/*
			 * Eviction took pages of the device meanwhile: what is
			 * missing may be pages the NIC has used since they were
			 * mapped (it goes on as pages come), taken again to meet
			 * the budget. The request is answered, and the NIC asks
			 * again for what it still lacks: INVALID here failed a
			 * 4 MiB WRITE through a 1 MiB budget (REM_ACCESS_ERR:
			 * ib_write_bw --odp, 100 messages, 4 runs in 16).
			 */
			status = g->dev->region && g->dev->evicted_gen != g->evicted_gen ?
					 NPF_PR_SUCCESS :
					 NPF_PR_INVALID;
		}
		group_answer(g, status);
	}
	list_for_each_entry(d, &devices, node) {
		if (d->nbacklog)
			inval_post_backlog(d);
		if (!d->resp_posted)
			continue;
		d->resp_posted = false;
		nic_wake(d, &d->hdr->resp.tail);
	}
	retire_poll();
}
