// SPDX-License-Identifier: GPL-2.0
/*
 * Fault policies: BPF programs loaded at run time that decide what npfd
 * fetches for a fault (policies/, bpf/npf_policy.h).
 *
 * Two dispatchers tail-call into two prog arrays: npf_cpu_policy, a raw
 * tracepoint program that is never attached -- npfd runs it itself
 * (BPF_PROG_TEST_RUN) for each CPU fault it reads from a userfaultfd --
 * into npf_policy_cpu; the NIC's uprobe into npf_policy_kp. Slot 0 is the
 * global policy, slot 1 + region slot a region's own. A tail call needs
 * the caller's program type, so each policy object is loaded twice -- as
 * a raw tracepoint and as a kprobe program --
 * with its own maps shared between the two loads and the collectors'
 * scratch and ring buffer maps shared with both. Replacing a policy is
 * one map update per array: a fault runs the old program or the new one,
 * never neither. Nothing is attached to a tracepoint for a policy: a
 * loaded policy costs processes npf does not serve nothing.
 *
 * What a policy decides is only advice: npfd clamps decisions that reach
 * outside the region or past NPF_POLICY_MAX_PREFETCH pages and counts them.
 *
 * Eviction policies (NPF_POLICY_KIND_EVICT, bpf/npf_evict_policy.h) are
 * loaded, checked, chosen, listed, watched and unloaded the same way, in
 * slots of their own (0 global, 1 + region slot), but no prog array holds
 * them: npfd runs the one that applies to a region once per eviction
 * batch (policy_evict_decide()) with its batch in npf_evict_batch, a map
 * npfd creates and gives every eviction policy.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "collect.h"
#include "log.h"
#include "policy.h"
#include "policy_object.h"
#include "region.h"
#include "util.h"
#include "verifier_log.h"

#define MAX_POLICY_OBJECT (16 << 20)
#define VERIFIER_LOG_SIZE (1 << 20)

struct npfd_policy {
	struct list_head node;
	struct npf_policy_status st;
	__u32 kind; /* enum npf_policy_kind */
	__u32 slot; /* index in both prog arrays (fault policies), or its kind's own slots */
	struct bpf_object *obj_cpu, *obj_kp;
	/*
	 * A region owner's choice of a loaded policy: its programs are the
	 * origin's (no code of its own), and its decisions count on the origin.
	 */
	struct npfd_policy *origin;
	unsigned int slow_run; /* slow decisions in a row (the watchdog) */
	__u32 state;	       /* enum npf_policy_state */
	__u64 slow_decisions;
};

static struct list_head policies = LIST_HEAD_INIT(policies);
static __u32 next_policy_id;

static struct npfd_policy *policy_by_name(const char *name)
{
	struct npfd_policy *p;

	list_for_each_entry(p, &policies, node)
		if (!p->origin && !strncmp(p->st.name, name, sizeof(p->st.name)))
			return p;
	return NULL;
}

static struct npfd_policy *policy_by_slot(__u32 kind, __u32 slot)
{
	struct npfd_policy *p;

	list_for_each_entry(p, &policies, node)
		if (p->kind == kind && p->slot == slot)
			return p;
	return NULL;
}

/*
 * Fill or empty a slot: the prog arrays for a fault policy. An eviction
 * policy's slot is its place in the list (policy_by_slot()): npfd looks it
 * up for each batch, nothing to install.
 */
static int slot_install(__u32 kind, __u32 slot, int tp, int kp)
{
	return kind == NPF_POLICY_KIND_EVICT ? 0 : collect_policy_install(slot, tp, kp);
}

static int evict_batch_fd = -1; /* npf_evict_batch, created with the first eviction policy */

static int evict_batch_map(void)
{
	if (evict_batch_fd < 0)
		evict_batch_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, NPF_MAP_EVICT_BATCH,
						sizeof(__u32), sizeof(struct npf_evict_batch), 1,
						NULL);
	return evict_batch_fd;
}

static struct npfd_policy *policy_by_id(__u32 id)
{
	struct npfd_policy *p;

	list_for_each_entry(p, &policies, node)
		if (!p->origin && p->st.policy_id == id)
			return p;
	return NULL;
}

/*
 * A policy's own maps (not the collectors' it shares) are kernel memory npfd
 * creates for whoever loads it: bounded in all, with the map that breaks
 * the bound named.
 */
static int check_map_sizes(struct bpf_object *obj, const char *name, char *err, size_t errlen)
{
	int ncpus = libbpf_num_possible_cpus();
	struct bpf_map *map;
	__u64 total = 0;

	bpf_object__for_each_map(map, obj)
	{
		const char *mname = bpf_map__name(map);
		__u64 entry, bytes;
		bool over;

		if (collect_shared_map_fd(mname, true) >= 0 || !strcmp(mname, NPF_MAP_EVICT_BATCH))
			continue;
		switch (bpf_map__type(map)) {
		case BPF_MAP_TYPE_RINGBUF:
		case BPF_MAP_TYPE_USER_RINGBUF:
			entry = 1; /* max_entries is the size in bytes */
			break;
		case BPF_MAP_TYPE_PERCPU_ARRAY:
		case BPF_MAP_TYPE_PERCPU_HASH:
		case BPF_MAP_TYPE_LRU_PERCPU_HASH:
			entry = (__u64)bpf_map__key_size(map) +
				(__u64)bpf_map__value_size(map) * (__u64)(ncpus > 0 ? ncpus : 1);
			break;
		default:
			entry = (__u64)bpf_map__key_size(map) + bpf_map__value_size(map);
		}
		over = __builtin_mul_overflow(entry, (__u64)bpf_map__max_entries(map), &bytes) ||
		       __builtin_add_overflow(total, bytes, &total) ||
		       total > NPF_POLICY_MAX_MAP_BYTES;
		if (over)
			return refuse(
				err, errlen, E2BIG,
				"policy '%s': map %s (%u entries of %u+%u bytes) takes its maps past %d MiB, the most a policy may create",
				name, mname, bpf_map__max_entries(map), bpf_map__key_size(map),
				bpf_map__value_size(map), NPF_POLICY_MAX_MAP_BYTES >> 20);
	}
	return 0;
}

static int load_refused; /* -errno of a refusal load_copy() can name (else -EINVAL) */

/*
 * Open and load one copy of the policy as the given program type. Maps the
 * policy shares with the collectors get the collectors' fds; its own maps
 * get those of `peer` (the first copy) so that both copies share state.
 */
static struct bpf_object *load_copy(const void *buf, size_t size, const char *name,
				    enum bpf_prog_type type, __u32 id, struct bpf_object *peer,
				    char *err, size_t errlen)
{
	char *log = calloc(1, VERIFIER_LOG_SIZE);
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = name, .kernel_log_buf = log,
		    .kernel_log_size = VERIFIER_LOG_SIZE, .kernel_log_level = 1);
	struct bpf_program *prog, *only = NULL;
	struct bpf_object *obj;
	struct bpf_map *map;
	int nprogs = 0, ret;

	if (!log) {
		refuse(err, errlen, ENOMEM, "out of memory");
		return NULL;
	}
	obj = bpf_object__open_mem(buf, size, &opts);
	if (!obj) {
		refuse(err, errlen, errno, "libbpf cannot open the object: %s", strerror(errno));
		goto out;
	}
	bpf_object__for_each_program(prog, obj)
	{
		only = prog;
		nprogs++;
	}
	if (nprogs != 1) {
		refuse(err, errlen, EINVAL,
		       "a policy object holds exactly one program, this one %d", nprogs);
		goto bad;
	}
	if (bpf_program__type(only) != BPF_PROG_TYPE_TRACEPOINT) {
		refuse(err, errlen, EINVAL,
		       "wrong program type: a policy is a SEC(\"tracepoint\") program, '%s' is in section %s",
		       bpf_program__name(only), bpf_program__section_name(only));
		goto bad;
	}
	bpf_program__set_type(only, type);
	if (!peer && (load_refused = check_map_sizes(obj, name, err, errlen)))
		goto bad;
	bpf_object__for_each_map(map, obj)
	{
		const char *mname = bpf_map__name(map);
		int fd = collect_shared_map_fd(mname, type == BPF_PROG_TYPE_RAW_TRACEPOINT);

		if (!strcmp(mname, NPF_MAP_EVICT_BATCH)) {
			fd = evict_batch_map();
			if (fd < 0) {
				refuse(err, errlen, errno, "cannot create map %s: %s",
				       NPF_MAP_EVICT_BATCH, strerror(errno));
				goto bad;
			}
		}

		if (fd < 0 && peer) {
			struct bpf_map *pm = bpf_object__find_map_by_name(peer, mname);

			fd = pm ? bpf_map__fd(pm) : -1;
		}
		if (strstr(mname, ".rodata.npf")) {
			__u32 v = id;

			if (bpf_map__set_initial_value(map, &v, sizeof(v))) {
				refuse(err, errlen, EINVAL,
				       "cannot set npf_policy_id (not a __u32?)");
				goto bad;
			}
			continue;
		}
		if (fd >= 0 && bpf_map__reuse_fd(map, fd)) {
			refuse(err, errlen, EINVAL, "map %s does not match npfd's", mname);
			goto bad;
		}
	}
	ret = bpf_object__load(obj);
	if (ret) {
		refuse(err, errlen, -ret, "the kernel refused policy '%s': %s", name,
		       strerror(-ret));
		if (log[0]) {
			pr_warn("policy %s: verifier log:\n%s", name, log);
			verifier_tail(log, err, errlen);
		}
		goto bad;
	}
	free(log);
	return obj;
bad:
	bpf_object__close(obj);
	obj = NULL;
out:
	free(log);
	return NULL;
}

/* The programs a policy's slots run: its own, or its origin's. */
static void policy_prog_fds(const struct npfd_policy *p, int *tp, int *kp)
{
	const struct npfd_policy *o = p->origin ? p->origin : p;

	*tp = bpf_program__fd(bpf_object__next_program(o->obj_cpu, NULL));
	*kp = o->obj_kp ? bpf_program__fd(bpf_object__next_program(o->obj_kp, NULL)) : -1;
}

/*
 * Forget a policy (its own slot is the caller's to empty or refill). A
 * loaded policy takes the regions' choices of it along: their slots are
 * emptied, and they get the built-in decision.
 */
static void policy_free(struct npfd_policy *p)
{
	struct npfd_policy *q, *tmp;

	list_del_init(&p->node);
	if (!p->origin) {
		list_for_each_entry_safe(q, tmp, &policies, node) {
			if (q->origin != p)
				continue;
			slot_install(q->kind, q->slot, -1, -1);
			pr_info("policy %s no longer applies to region %u: it was unloaded",
				q->st.name, q->st.region_id);
			list_del_init(&q->node);
			free(q);
		}
		bpf_object__close(p->obj_cpu);
		bpf_object__close(p->obj_kp);
	}
	free(p);
}

/* The regions that chose `from` follow its replacement `to`. */
static void policy_move_users(struct npfd_policy *from, struct npfd_policy *to)
{
	struct npfd_policy *q;
	int tp, kp;

	policy_prog_fds(to, &tp, &kp);
	list_for_each_entry(q, &policies, node) {
		if (q->origin != from)
			continue;
		q->origin = to;
		q->st.policy_id = to->st.policy_id;
		q->st.abi_version = to->st.abi_version;
		q->state = NPF_POLICY_ACTIVE;
		slot_install(q->kind, q->slot, tp, kp);
	}
}

/*
 * What the slot held goes (replaced, not emptied, by the caller): a region's
 * choice is forgotten, a loaded policy is unloaded with its regions' choices.
 */
static void policy_evict_slot(__u32 kind, __u32 slot, const struct npfd_policy *keep)
{
	struct npfd_policy *in_slot = policy_by_slot(kind, slot);

	if (in_slot && in_slot != keep)
		policy_free(in_slot);
}

/*
 * The trust model. Loading a policy runs code in the kernel as a tracing
 * program (it may read kernel memory) and parses an ELF file in npfd, a
 * root daemon: only a peer that could load it itself may (root, or
 * CAP_BPF + CAP_PERFMON, or CAP_SYS_ADMIN, checked when it connected). Any
 * region owner may choose, for its own region, among the policies loaded.
 */
static int policy_choose(struct npfd_client *c, const struct npf_policy_load_req *req,
			 struct npfd_region *r, __u32 slot, struct npf_policy_status *out,
			 char *err, size_t errlen)
{
	struct npfd_policy *src = policy_by_name(req->name), *q;
	int tp, kp, ret;

	if (!src)
		return refuse(
			err, errlen, ENOENT,
			"no policy named '%.31s' is loaded (npfctl policy list shows them; root loads them)",
			req->name);
	if (src->state == NPF_POLICY_WATCHDOG)
		return refuse(
			err, errlen, EPERM,
			"policy '%s' was disabled by the watchdog (its decisions ran long): it must be loaded again",
			src->st.name);
	if (src->slot == slot)
		return refuse(err, errlen, EEXIST, "policy '%s' already holds that slot",
			      src->st.name);
	q = calloc(1, sizeof(*q));
	if (!q)
		return refuse(err, errlen, ENOMEM, "out of memory");
	q->origin = src;
	q->kind = src->kind;
	q->slot = slot;
	q->st.policy_id = src->st.policy_id;
	q->st.abi_version = src->st.abi_version;
	q->st.region_id = req->region_id;
	memcpy(q->st.name, src->st.name, sizeof(q->st.name));
	policy_prog_fds(src, &tp, &kp);
	ret = slot_install(q->kind, slot, tp, kp);
	if (ret) {
		free(q);
		return refuse(err, errlen, -ret, "cannot install policy '%s' in slot %u: %s",
			      src->st.name, slot, strerror(-ret));
	}
	policy_evict_slot(q->kind, slot, NULL);
	list_add_tail(&q->node, &policies);
	*out = q->st;
	out->enabled = collect_policy_enabled();
	pr_info("pid %d uid %u: region %u%s chose policy %s (id %u)", c->pid, c->uid, r ? r->id : 0,
		r ? "" : " (global slot)", q->st.name, q->st.policy_id);
	return 0;
}

int policy_load(struct npfd_client *c, const struct npf_policy_load_req *req, int fd,
		struct npf_policy_status *out, char *err, size_t errlen)
{
	struct npf_policy_info info;
	struct npfd_region *r = NULL;
	struct npfd_policy *p, *old;
	char name[32];
	struct stat st;
	void *buf;
	__u32 slot = 0;
	int ret, tp, kp;

	if (req->flags)
		return refuse(err, errlen, EINVAL, "unknown flags 0x%x", req->flags);
	if (req->region_id) {
		r = region_find_id(req->region_id);
		if (!r)
			return refuse(err, errlen, ENOENT, "no region %u", req->region_id);
		if (!c->privileged && r->mm != c->mm)
			return refuse(
				err, errlen, EPERM,
				"region %u belongs to pid %d: only its owner or root may set its policy",
				r->id, r->mm->tgid);
		slot = 1 + r->slot;
	} else if (!c->privileged) {
		return refuse(err, errlen, EPERM, "only root may set the global policy");
	}
	if (fd < 0)
		return policy_choose(c, req, r, slot, out, err, errlen);
	/* Before anything of the object is read: it is code, and untrusted ELF. */
	if (!c->privileged)
		return refuse(
			err, errlen, EPERM,
			"loading a policy object needs root (or CAP_BPF and CAP_PERFMON): a region's owner may choose a loaded policy by name instead");
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		return refuse(err, errlen, EINVAL, "the policy descriptor is not a regular file");
	if (st.st_size <= 0 || st.st_size > MAX_POLICY_OBJECT)
		return refuse(err, errlen, EFBIG,
			      "a policy object is 1 byte to %d MiB, this one %lld bytes",
			      MAX_POLICY_OBJECT >> 20, (long long)st.st_size);
	buf = malloc((size_t)st.st_size);
	if (!buf)
		return refuse(err, errlen, ENOMEM, "out of memory");
	if (pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
		free(buf);
		return refuse(err, errlen, EIO, "cannot read the policy object");
	}
	ret = policy_object_info(buf, (size_t)st.st_size, &info, err, errlen);
	if (ret) {
		free(buf);
		return ret;
	}
	snprintf(name, sizeof(name), "%s", req->name[0] ? req->name : info.name);
	if (!name[0]) {
		free(buf);
		return refuse(
			err, errlen, EINVAL,
			"the policy has no name: give it one in NPF_POLICY() or with 'name NAME'");
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		free(buf);
		return refuse(err, errlen, ENOMEM, "out of memory");
	}
	old = policy_by_name(name);
	if (old && old->kind != info.kind) {
		free(buf);
		free(p);
		return refuse(
			err, errlen, EEXIST,
			"a %s policy named '%s' is loaded: unload it first, or load this one under another name",
			old->kind == NPF_POLICY_KIND_EVICT ? "eviction" : "fault", name);
	}
	p->kind = info.kind;
	p->st.policy_id = ++next_policy_id;
	p->st.abi_version = info.abi_version;
	p->st.region_id = req->region_id;
	p->slot = slot;
	memcpy(p->st.name, name, sizeof(p->st.name));
	load_refused = 0;
	p->obj_cpu = load_copy(buf, (size_t)st.st_size, name, BPF_PROG_TYPE_RAW_TRACEPOINT,
			       p->st.policy_id, NULL, err, errlen);
	/* npfd alone runs an eviction policy: no device copy */
	if (p->obj_cpu && p->kind == NPF_POLICY_KIND_FAULT)
		p->obj_kp = load_copy(buf, (size_t)st.st_size, name, BPF_PROG_TYPE_KPROBE,
				      p->st.policy_id, p->obj_cpu, err, errlen);
	free(buf);
	if (!p->obj_cpu || (p->kind == NPF_POLICY_KIND_FAULT && !p->obj_kp)) {
		bpf_object__close(p->obj_cpu);
		free(p);
		return load_refused ? load_refused : -EINVAL;
	}

	/* Install: one update per array; what was in the slot is replaced, not removed first. */
	policy_prog_fds(p, &tp, &kp);
	ret = slot_install(p->kind, slot, tp, kp);
	if (ret) {
		bpf_object__close(p->obj_cpu);
		bpf_object__close(p->obj_kp);
		free(p);
		return refuse(err, errlen, -ret, "cannot install the policy in slot %u: %s", slot,
			      strerror(-ret));
	}
	/* a region's choice held this slot, or the regions that chose the old one follow */
	if (policy_by_slot(p->kind, slot) && policy_by_slot(p->kind, slot)->origin)
		policy_evict_slot(p->kind, slot, NULL);
	if (old)
		policy_move_users(old, p);
	if (old && old->slot != slot)
		slot_install(old->kind, old->slot, -1, -1); /* the name moved to another slot */
	if (old)
		policy_free(old);
	policy_evict_slot(p->kind, slot, NULL);
	list_add_tail(&p->node, &policies);
	*out = p->st;
	out->enabled = collect_policy_enabled();
	pr_info("%s policy %s (id %u) loaded for %s%.0u%s",
		p->kind == NPF_POLICY_KIND_EVICT ? "eviction" : "fault", name, p->st.policy_id,
		r ? "region " : "every region without its own", r ? r->id : 0,
		old ? ", replacing the previous one" : "");
	return 0;
}

int policy_unload(struct npfd_client *c, const char *name, char *err, size_t errlen)
{
	struct npfd_policy *p = NULL, *it;

	/* A region owner unloads what applies to its own regions; root, the loaded policy. */
	list_for_each_entry(it, &policies, node) {
		struct npfd_region *r;

		if (strncmp(it->st.name, name, sizeof(it->st.name)))
			continue;
		if (c->privileged && !it->origin) {
			p = it;
			break;
		}
		r = it->st.region_id ? region_find_id(it->st.region_id) : NULL;
		if (!c->privileged && r && c->mm && r->mm == c->mm) {
			p = it;
			break;
		}
	}
	if (!p) {
		if (!policy_by_name(name))
			return refuse(err, errlen, ENOENT, "no policy named '%.32s'", name);
		return refuse(err, errlen, EPERM,
			      "only root or the region's owner may unload '%.32s'", name);
	}
	slot_install(p->kind, p->slot, -1, -1);
	pr_info("policy %s unloaded%s%.0u", p->st.name, p->origin ? " from region " : "",
		p->origin ? p->st.region_id : 0);
	policy_free(p);
	return 0;
}

/* A region is going away: its policy goes with it. */
void policy_region_gone(struct npfd_region *r)
{
	__u32 kind;

	for (kind = NPF_POLICY_KIND_FAULT; kind <= NPF_POLICY_KIND_EVICT; kind++) {
		struct npfd_policy *p = policy_by_slot(kind, 1 + r->slot);

		if (p && p->st.region_id == r->id) {
			slot_install(p->kind, p->slot, -1, -1);
			pr_info("policy %s unloaded with region %u", p->st.name, r->id);
			policy_free(p);
		}
	}
}

void policy_list(void (*emit)(const struct npf_policy_status *, bool chosen, void *), void *arg)
{
	struct npfd_policy *p;

	list_for_each_entry(p, &policies, node) {
		struct npf_policy_status st = p->st;

		st.enabled = collect_policy_enabled();
		emit(&st, p->origin != NULL, arg);
	}
}

/* The watchdog's view of each policy, in policy_list()'s order. */
void policy_health(void (*emit)(const struct npf_policy_health *, bool chosen, void *), void *arg)
{
	struct npfd_policy *p;

	list_for_each_entry(p, &policies, node) {
		struct npf_policy_health h = {.policy_id = p->st.policy_id,
					      .region_id = p->st.region_id,
					      .state = p->state,
					      .slow_decisions = p->origin ?
									p->origin->slow_decisions :
									p->slow_decisions};

		memcpy(h.name, p->st.name, sizeof(h.name));
		emit(&h, p->origin != NULL, arg);
	}
}

bool policy_loaded(const char *name)
{
	return policy_by_name(name) != NULL;
}

/*
 * The watchdog. A fault cannot be served before its policy has decided, and
 * a policy that loops (bpf_loop allows 2^23 iterations) slows every fault it
 * decides -- for CPU faults npfd runs it itself, so it would stall npfd.
 * took: how long a decision took -- a CPU fault's policy run in npfd,
 * measured around it; a device request's, from the request to npfd reading
 * the decision (which npfd's own delays lengthen: hence the higher bound).
 * One slow decision may be a preemption, a run of them is the policy: it
 * is then taken out of every slot that runs it (the built-in decision
 * applies), logged, and listed as disabled until it is loaded again.
 */
static void policy_watchdog(struct npfd_policy *p, __u64 took, __u64 slow)
{
	struct npfd_policy *q;

	if (p->origin)
		p = p->origin; /* a region's choice: its decisions are the loaded policy's */
	if (p->state != NPF_POLICY_ACTIVE)
		return;
	if (took < slow) {
		p->slow_run = 0;
		return;
	}
	p->slow_decisions++;
	if (++p->slow_run < NPF_POLICY_WATCHDOG_RUN)
		return;
	slot_install(p->kind, p->slot, -1, -1);
	p->state = NPF_POLICY_WATCHDOG;
	list_for_each_entry(q, &policies, node)
		if (q->origin == p) {
			slot_install(q->kind, q->slot, -1, -1);
			q->state = NPF_POLICY_WATCHDOG;
		}
	pr_warn("policy %s (id %u) disabled by the watchdog: %u decisions in a row took %llu us or more (the last %.3f ms); its regions get the built-in decision until it is loaded again",
		p->st.name, p->st.policy_id, p->slow_run, (unsigned long long)(slow / 1000),
		(double)took / 1e6);
}

/*
 * Run the policy of a CPU fault of r that npfd read from the userfaultfd
 * (thread tid at addr; traced: the tracepoint's record of it, with
 * --trace-cpu-faults). True with the policy's record in *out; false when
 * no policy decided, and the built-in decision applies.
 */
bool policy_decide_cpu(struct npfd_region *r, __u32 tid, __u64 addr, bool write, __u64 raised,
		       const struct npf_fault_record *traced, struct npf_fault_record *out)
{
	struct npf_cpu_policy_args args = {
		.addr = addr,
		.ts_ns = raised,
		.cookie = traced ? traced->cookie : 0,
		.region_start = r->start,
		.region_length = r->length,
		.tgid_tid = (__u64)(__u32)r->mm->tgid << 32 | tid,
		.region_id_slot = (__u64)r->id << 32 | r->slot,
		.access = traced ? traced->access :
			  write	 ? NPF_ACCESS_WRITE :
				   NPF_ACCESS_READ,
	};

	__u64 t0 = now_ns();
	bool decided = collect_policy_run_cpu(&args, out);
	struct npfd_policy *p;

	/* whose run it was: the policy that decided, else the one its slots hold */
	p = decided ? policy_by_id(out->decision.policy_id) : NULL;
	if (!p)
		p = policy_by_slot(NPF_POLICY_KIND_FAULT, 1 + r->slot);
	if (!p)
		p = policy_by_slot(NPF_POLICY_KIND_FAULT, 0);
	if (p)
		policy_watchdog(p, now_ns() - t0, NPF_POLICY_SLOW_NS);
	return decided;
}

/*
 * Clamp a decision to what npfd will do, and account it to its policy.
 * Returns the decision to apply for a fault at [addr, addr + len) of r.
 */
struct npf_policy_decision policy_clamp(const struct npf_fault_record *rec,
					const struct npfd_region *r)
{
	struct npf_policy_decision d = rec->decision;
	struct npfd_policy *p = d.policy_id ? policy_by_id(d.policy_id) : NULL;
	__u64 first = (rec->addr - r->start) >> NPF_PAGE_SHIFT;
	__u64 last = (rec->addr + (rec->len ? rec->len : 1) - 1 - r->start) >> NPF_PAGE_SHIFT;
	__u64 npages = r->length >> NPF_PAGE_SHIFT;
	bool clamped = false;

	if (d.before > first) {
		d.before = (__u32)first;
		clamped = true;
	}
	if (d.after > npages - 1 - last) {
		d.after = (__u32)(npages - 1 - last);
		clamped = true;
	}
	if (d.before > NPF_POLICY_MAX_PREFETCH) {
		d.before = NPF_POLICY_MAX_PREFETCH;
		clamped = true;
	}
	if (d.after > NPF_POLICY_MAX_PREFETCH) {
		d.after = NPF_POLICY_MAX_PREFETCH;
		clamped = true;
	}
	if (d.stride_count > 64 || (d.stride_count && !d.stride)) {
		d.stride_count = d.stride ? 64 : 0;
		clamped = true;
	}
	if (p) {
		if (rec->source == NPF_SRC_DEVICE && rec->ts_ns) {
			__u64 now = now_ns();

			policy_watchdog(p, now > rec->ts_ns ? now - rec->ts_ns : 0,
					NPF_POLICY_SLOW_DEVICE_NS);
		}
		p->st.invocations++;
		if (clamped)
			p->st.clamped++;
		p->st.pages_prefetched += d.before + d.after + d.stride_count;
	}
	return d;
}

/*
 * The eviction policy that applies to r: its own choice, else the global
 * one, if active and the kill switch is on. NULL: CLOCK.
 */
static struct npfd_policy *evict_policy_of(const struct npfd_region *r)
{
	struct npfd_policy *p = policy_by_slot(NPF_POLICY_KIND_EVICT, 1 + r->slot);

	if (!p || p->state != NPF_POLICY_ACTIVE)
		p = policy_by_slot(NPF_POLICY_KIND_EVICT, 0);
	if (!p || p->state != NPF_POLICY_ACTIVE)
		return NULL;
	return collect_policy_enabled() ? p : NULL;
}

bool policy_evict_applies(const struct npfd_region *r)
{
	return evict_policy_of(r) != NULL;
}

/*
 * Run r's eviction policy over the batch bt (filled by evict.c: the
 * candidates, their flags, default scores). 1: the policy answered, its
 * scores are in bt and at least one candidate may go. 0: no policy
 * applies. -1: the policy failed (the run, no answer, or every candidate
 * kept): the caller chooses by CLOCK, and the policy's `clamped` counts it.
 * The watchdog times the run like a CPU fault's decision.
 */
int policy_evict_decide(const struct npfd_region *r, struct npf_evict_batch *bt)
{
	LIBBPF_OPTS(bpf_test_run_opts, run);
	struct npfd_policy *p = evict_policy_of(r), *o;
	static __u64 seq;
	const char *why = NULL;
	__u32 zero = 0, i, n = bt->n, go = 0;
	__u64 t0;
	int err;

	if (!p)
		return 0;
	o = p->origin ? p->origin : p;
	bt->seq = ++seq;
	bt->done = 0;
	t0 = now_ns();
	if (bpf_map_update_elem(evict_batch_fd, &zero, bt, BPF_ANY))
		why = "cannot fill its batch map";
	else if ((err = bpf_prog_test_run_opts(
			  bpf_program__fd(bpf_object__next_program(o->obj_cpu, NULL)), &run)))
		why = "the run failed";
	else if (bpf_map_lookup_elem(evict_batch_fd, &zero, bt))
		why = "cannot read its batch map";
	policy_watchdog(o, now_ns() - t0, NPF_POLICY_SLOW_NS);
	o->st.invocations++;
	bt->n = n; /* npfd's, whatever the policy wrote there */
	if (!why && bt->done != bt->seq)
		why = "it did not answer (npf_evict_done())";
	for (i = 0; !why && i < n && i < NPF_EVICT_MAX_CANDS; i++)
		go += bt->cand[i].score != NPF_EVICT_KEEP;
	if (!why && !go)
		why = "it kept every candidate";
	if (why) {
		o->st.clamped++;
		pr_warn_rl("eviction policy %s, region %u: %s; this batch is chosen by CLOCK",
			   o->st.name, r->id, why);
		return -1;
	}
	o->st.pages_prefetched += go < bt->want ? go : bt->want;
	return 1;
}
