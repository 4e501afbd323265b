// SPDX-License-Identifier: GPL-2.0
/*
 * The policy trust model (man npfctl, README "Fault policies"):
 *  - an unprivileged member of the socket's group (uid 65534) cannot load
 *    code, for its own region or globally: a policy object, or garbage
 *    that would only reach the ELF parser, is refused with EPERM;
 *  - it may choose a policy root loaded, by name, for its own region only
 *    (not another user's region, not the global slot), and the choice
 *    works: a sequential scan of its region takes far fewer faults with
 *    'seq' than pages; it may drop its choice, not root's policy; the
 *    policies root loaded are in its policy list (it chooses from them),
 *    root's choice for another region of root's is not, nor in its
 *    health list;
 *  - nor can it with every capability in a user namespace of its own
 *    (unshare -U): a global policy load and turning policies off are
 *    refused with EPERM;
 *  - a user with CAP_BPF and CAP_PERFMON (uid 65533) may load code;
 *  - a policy asking for a 1 GiB map is refused with E2BIG, naming it;
 *  - the watchdog: a policy whose decisions spin for milliseconds is
 *    disabled after a run of slow decisions, shows as such in the list,
 *    and decides nothing more;
 *  - root chooses a loaded policy for a region with npfctl policy use.
 */
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include "adv.h"
#include "npf.h"

#define PG 4096

static struct th_npfd d;
static char tmpobj[2][256];
static int root_region, root_chose, seq_fd = -1, exact_fd = -1;

static const char *policy_obj(const char *name)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/../policies/%s.bpf.o", th_bin_dir(), name);
	return path;
}

static struct npf_policy_status *find(struct npf_client *c, const char *name, __u32 region,
				      struct npf_policy_status *out)
{
	struct npf_policy_status *ps;
	size_t n, i;
	bool found = false;

	TH_ASSERT(npf_client__policy_list(c, &ps, &n) == 0, "policy list: %s",
		  npf_client__errmsg(c));
	for (i = 0; i < n; i++)
		if (!strcmp(ps[i].name, name) && ps[i].region_id == region) {
			*out = ps[i];
			found = true;
		}
	free(ps);
	return found ? out : NULL;
}

static void expect(const char *what, int rc, int want, const char *errmsg)
{
	printf("%-52s -> %d \"%s\"\n", what, rc, rc < 0 ? errmsg : "");
	TH_ASSERT(rc == want || (want > 0 && rc > 0), "%s: %d, want %d (%s)", what, rc, want,
		  errmsg);
}

/*
 * The attacker in a user namespace of its own, where it has every
 * capability: none of them counts in npfd's. Returns 0, or 77 when the
 * machine allows no unprivileged user namespace (the part is skipped).
 */
static int userns_attacker(void)
{
	struct npf_policy_status st;
	struct npf_client *c;
	int rc;

	if (unshare(CLONE_NEWUSER)) {
		printf("user namespace part skipped: unshare(CLONE_NEWUSER) as uid %d: %s\n",
		       getuid(), strerror(errno));
		return 77;
	}
	c = npf_client__connect(NULL);
	TH_ASSERT(c, "connect from a user namespace: %s", strerror(errno));
	rc = npf_client__policy_load(c, seq_fd, 0, "userns", &st);
	expect("in its own user namespace: load globally", rc, -EPERM, npf_client__errmsg(c));
	rc = npf_client__policy_enable(c, false);
	expect("in its own user namespace: turn policies off", rc, -EPERM, npf_client__errmsg(c));
	npf_client__close(c);
	return 0;
}

static void attacker(void *arg)
{
	struct npf_client *c = npf_client__connect(NULL);
	char *mem =
		mmap(NULL, 1024 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct npf_region_stats_full *sf;
	struct npf_policy_status st;
	int id, fd, junk, i, rc;
	size_t n;
	char buf[64];

	TH_ASSERT(c, "connect: %s", strerror(errno));
	id = npf_client__register(c, mem, 1024 * PG, NULL);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));

	fd = seq_fd; /* opened for it: the build tree may be closed to uid 65534 */
	rc = npf_client__policy_load(c, fd, (__u32)id, "mine", &st);
	expect("load a policy object for its own region", rc, -EPERM, npf_client__errmsg(c));
	TH_ASSERT(strstr(npf_client__errmsg(c), "choose"),
		  "the refusal does not say what it may do");
	rc = npf_client__policy_load(c, fd, 0, "mine", &st);
	expect("load a policy object globally", rc, -EPERM, npf_client__errmsg(c));
	/* not an ELF file at all: parsed, it would be ENOEXEC */
	snprintf(buf, sizeof(buf), "/tmp/adv-policy-junk-%d", getpid());
	junk = open(buf, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	TH_ASSERT(junk >= 0 && write(junk, "\177ELF garbage that is no object", 30) == 30, "junk");
	unlink(buf);
	rc = npf_client__policy_load(c, junk, (__u32)id, "junk", &st);
	expect("load a corrupt object for its own region", rc, -EPERM, npf_client__errmsg(c));

	rc = npf_client__policy_load(c, -1, 0, "seq", &st);
	expect("choose 'seq' for the global slot", rc, -EPERM, npf_client__errmsg(c));
	rc = npf_client__policy_load(c, -1, (__u32)root_region, "seq", &st);
	expect("choose 'seq' for root's region", rc, -EPERM, npf_client__errmsg(c));
	rc = npf_client__policy_load(c, -1, (__u32)id, "nosuch", &st);
	expect("choose a policy nobody loaded", rc, -ENOENT, npf_client__errmsg(c));
	rc = npf_client__policy_load(c, -1, (__u32)id, "seq", &st);
	expect("choose 'seq' for its own region", rc, 1, npf_client__errmsg(c));
	TH_ASSERT(find(c, "seq", (__u32)id, &st), "policy list does not show the choice");

	/* seq reads ahead: a sequential scan of 1024 pages takes far fewer faults */
	for (i = 0; i < 1024; i++)
		TH_ASSERT(((volatile char *)mem)[(size_t)i * PG] == 0, "page %d not zero", i);
	TH_ASSERT(npf_client__stats(c, (__u32)id, &sf, &n) == 0 && n == 1, "stats");
	printf("sequential scan of 1024 pages with 'seq' chosen: %llu userfaultfd faults\n",
	       (unsigned long long)sf->stats.uffd_faults);
	TH_ASSERT(sf->stats.uffd_faults < 256, "%llu faults: the choice of 'seq' had no effect",
		  (unsigned long long)sf->stats.uffd_faults);
	free(sf);

	rc = npf_client__policy_unload(c, "seq");
	expect("drop its own choice", rc, 0, npf_client__errmsg(c));
	TH_ASSERT(!find(c, "seq", (__u32)id, &st), "the choice is still listed");
	/* what root loaded is listed to all; root's choice for a region of its own is root's (control.c: sees_policy()) */
	TH_ASSERT(find(c, "seq", (__u32)root_region, &st), "root's 'seq' went with the choice");
	TH_ASSERT(!find(c, "seq", (__u32)root_chose, &st), "root's choice for region %d is listed",
		  root_chose);
	{
		struct npf_policy_health *h = NULL;
		size_t nh = 0, j;

		TH_ASSERT(!npf_client__policy_health(c, &h, &nh), "policy health: %s",
			  npf_client__errmsg(c));
		for (j = 0; j < nh; j++)
			TH_ASSERT(h[j].region_id != (__u32)root_chose,
				  "root's choice '%s' for region %d is in the health list",
				  h[j].name, root_chose);
		free(h);
	}
	rc = npf_client__policy_unload(c, "seq");
	expect("unload root's 'seq'", rc, -EPERM, npf_client__errmsg(c));
	npf_client__close(c);
	{
		/* a fresh process: unshare(CLONE_NEWUSER) wants a single thread */
		pid_t p;
		int ws;

		fflush(stdout);
		p = fork();
		if (p == 0)
			_exit((rc = userns_attacker(), fflush(stdout), rc));
		TH_ASSERT(waitpid(p, &ws, 0) == p && WIFEXITED(ws) &&
				  (WEXITSTATUS(ws) == 0 || WEXITSTATUS(ws) == 77),
			  "the attacker in a user namespace of its own was taken for root");
	}
}

/* uid 65533 with CAP_BPF and CAP_PERFMON only: may load code. */
static int capable_user(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct cd[2] = {};
	struct npf_policy_status st;
	struct npf_client *c;
	gid_t g = ADV_GID;
	int fd, rc;

	TH_ASSERT(prctl(PR_SET_KEEPCAPS, 1) == 0 && setgroups(1, &g) == 0 && setgid(ADV_GID) == 0 &&
			  setuid(65533) == 0,
		  "drop to uid 65533");
	cd[1].effective = cd[1].permitted = (1u << (CAP_BPF - 32)) | (1u << (CAP_PERFMON - 32));
	TH_ASSERT(syscall(SYS_capset, &h, cd) == 0, "capset: %s", strerror(errno));
	c = npf_client__connect(NULL);
	TH_ASSERT(c, "connect");
	fd = exact_fd;
	rc = npf_client__policy_load(c, fd, 0, "capable", &st);
	expect("uid 65533 with CAP_BPF + CAP_PERFMON loads 'exact'", rc, 1, npf_client__errmsg(c));
	rc = npf_client__policy_unload(c, "capable");
	expect("... and unloads it", rc, 0, npf_client__errmsg(c));
	npf_client__close(c);
	return 0;
}

int main(void)
{
	struct npf_client *root;
	struct npf_policy_status st;
	char *mem, *slow_mem;
	int fd, rc, st2, i, slow_region;
	__u64 inv;
	pid_t p;

	th_npfd_start(&d, NULL);
	adv_open_to_group(&d);
	adv_compile_policy("adv_bigmap", d.dir, tmpobj[0], sizeof(tmpobj[0]));
	adv_compile_policy("adv_slow", d.dir, tmpobj[1], sizeof(tmpobj[1]));

	/* root: a region of its own with 'seq' */
	root = npf_client__connect(NULL);
	TH_ASSERT(root, "connect");
	mem = mmap(NULL, 64 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	root_region = npf_client__register(root, mem, 64 * PG, NULL);
	TH_ASSERT(root_region > 0, "register: %s", npf_client__errmsg(root));
	fd = open(policy_obj("seq"), O_RDONLY | O_CLOEXEC);
	TH_ASSERT(fd >= 0, "no %s (make builds it)", policy_obj("seq"));
	rc = npf_client__policy_load(root, fd, (__u32)root_region, NULL, &st);
	expect("root loads 'seq' for its region", rc, 1, npf_client__errmsg(root));
	close(fd);
	mem = mmap(NULL, 64 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	root_chose = npf_client__register(root, mem, 64 * PG, NULL);
	TH_ASSERT(root_chose > 0, "register: %s", npf_client__errmsg(root));
	rc = npf_client__policy_load(root, -1, (__u32)root_chose, "seq", &st);
	expect("root chooses 'seq' for a second region", rc, 1, npf_client__errmsg(root));

	/* the attackers' own copies of policy objects, whatever the build tree's modes */
	seq_fd = open(policy_obj("seq"), O_RDONLY | O_CLOEXEC);
	TH_ASSERT(seq_fd >= 0, "no %s (make builds it)", policy_obj("seq"));
	TH_ASSERT(adv_run_as_attacker(attacker, NULL, 60) == 0, "the attacker's checks failed");
	close(seq_fd);
	TH_ASSERT(find(root, "seq", (__u32)root_chose, &st), "root does not see its own choice");

	exact_fd = open(policy_obj("exact"), O_RDONLY | O_CLOEXEC);
	TH_ASSERT(exact_fd >= 0, "no %s (make builds it)", policy_obj("exact"));
	fflush(stdout);
	p = fork();
	if (p == 0)
		_exit((capable_user(), fflush(stdout), 0));
	TH_ASSERT(waitpid(p, &st2, 0) == p && WIFEXITED(st2) && WEXITSTATUS(st2) == 0,
		  "a user with CAP_BPF and CAP_PERFMON could not load a policy");

	fd = open(tmpobj[0], O_RDONLY | O_CLOEXEC);
	rc = npf_client__policy_load(root, fd, 0, NULL, &st);
	expect("root loads a policy with a 1 GiB map", rc, -E2BIG, npf_client__errmsg(root));
	TH_ASSERT(strstr(npf_client__errmsg(root), "huge"), "the refusal does not name the map");
	close(fd);

	/* the watchdog */
	slow_mem = mmap(NULL, 256 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	slow_region = npf_client__register(root, slow_mem, 256 * PG, NULL);
	TH_ASSERT(slow_region > 0, "register: %s", npf_client__errmsg(root));
	fd = open(tmpobj[1], O_RDONLY | O_CLOEXEC);
	rc = npf_client__policy_load(root, fd, (__u32)slow_region, NULL, &st);
	expect("root loads 'slow' (ms per decision)", rc, 1, npf_client__errmsg(root));
	close(fd);
	for (i = 0; i < 128; i++)
		TH_ASSERT(((volatile char *)slow_mem)[(size_t)i * PG] == 0, "page not zero");
	TH_ASSERT(find(root, "slow", (__u32)slow_region, &st), "'slow' is gone from the list");
	{
		struct npf_policy_health *hs;
		size_t nh, k;
		bool seen = false;

		TH_ASSERT(npf_client__policy_health(root, &hs, &nh) == 0, "policy health: %s",
			  npf_client__errmsg(root));
		for (k = 0; k < nh; k++) {
			if (strcmp(hs[k].name, "slow"))
				continue;
			seen = true;
			printf("'slow' after 128 faults: state %u, %llu decisions, %llu slow\n",
			       hs[k].state, (unsigned long long)st.invocations,
			       (unsigned long long)hs[k].slow_decisions);
			TH_ASSERT(hs[k].state == NPF_POLICY_WATCHDOG,
				  "the watchdog did not disable 'slow'");
			TH_ASSERT(hs[k].slow_decisions >= NPF_POLICY_WATCHDOG_RUN,
				  "only %llu slow decisions",
				  (unsigned long long)hs[k].slow_decisions);
		}
		free(hs);
		TH_ASSERT(seen, "'slow' has no health entry");
	}
	{
		char cmd[512];

		snprintf(cmd, sizeof(cmd),
			 "%s/npfctl policy list | grep slow | grep -q 'DISABLED by the watchdog'",
			 th_bin_dir());
		TH_ASSERT(system(cmd) == 0, "npfctl policy list does not show 'slow' disabled");
	}
	inv = st.invocations;
	for (i = 128; i < 256; i++)
		TH_ASSERT(((volatile char *)slow_mem)[(size_t)i * PG] == 0, "page not zero");
	TH_ASSERT(find(root, "slow", (__u32)slow_region, &st), "'slow' is gone from the list");
	TH_ASSERT(st.invocations == inv, "'slow' still decides after the watchdog: %llu -> %llu",
		  (unsigned long long)inv, (unsigned long long)st.invocations);
	/* root may choose for any region, from npfctl too */
	{
		char cmd[512];

		snprintf(cmd, sizeof(cmd), "%s/npfctl policy use seq region %d >/dev/null",
			 th_bin_dir(), slow_region);
		TH_ASSERT(system(cmd) == 0, "npfctl policy use seq region %d failed", slow_region);
		TH_ASSERT(find(root, "seq", (__u32)slow_region, &st),
			  "npfctl policy use: 'seq' is not listed on region %d", slow_region);
		TH_ASSERT(!find(root, "slow", (__u32)slow_region, &st),
			  "the disabled 'slow' still holds region %d", slow_region);
	}
	npf_client__close(root);
	TH_ASSERT(th_npfd_alive(&d), "npfd died");
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
