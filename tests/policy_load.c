// SPDX-License-Identifier: GPL-2.0
/*
 * Fault policies through npfd:
 *  1. a sequential scan of a file-backed region takes at least 8x fewer
 *     faults under `seq` than under the built-in exact decision; with the
 *     kill switch off (npf_client__policy_enable(false), npfctl policy
 *     disable) the same scan takes the built-in decision's faults and seq
 *     makes no decision, and switched on again seq cuts them again;
 *  2. bad policy objects are refused with the reason (wrong ABI version,
 *     wrong program type, no name, verifier rejection with its log, not an
 *     ELF object), npfd stays up and keeps the policy it had;
 *  3. loading, replacing and unloading policies while threads fault
 *     continuously loses no fault and corrupts no byte;
 *  4. wsreplay: a region registered again replays the faults of its
 *     first run; another user's region of the same name neither replays
 *     that record nor writes over it.
 */
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include "adv.h"
#include "harness.h"
#include "npf.h"

#define REGION (64ULL << 20)
#define PAGES (REGION / 4096)

static struct th_npfd d;
static char policy_dir[256], backing[160], ws_dir[64];
static int backing_fd;

static uint64_t word(uint64_t off)
{
	return off * 0x9e3779b97f4a7c15ULL + 3;
}

static void make_backing(void)
{
	uint64_t *buf = malloc(1 << 20), c, i;

	snprintf(backing, sizeof(backing), "%s/backing", d.dir);
	backing_fd = open(backing, O_RDWR | O_CREAT | O_TRUNC, 0600);
	TH_ASSERT(backing_fd >= 0 && buf, "create %s", backing);
	for (c = 0; c < REGION >> 20; c++) {
		for (i = 0; i < (1 << 20) / 8; i++)
			buf[i] = word((c << 20) + i * 8);
		TH_ASSERT(pwrite(backing_fd, buf, 1 << 20, (off_t)(c << 20)) == 1 << 20, "write");
	}
	free(buf);
}

struct region {
	char *mem;
	int id;
};

static struct region new_region(struct npf_client *c, const char *name)
{
	NPF_OPTS(npf_region_opts, o, .backing = NPF_BACKING_FILE, .backing_fd = backing_fd,
		 .name = name);
	struct region r;

	r.mem = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(r.mem != MAP_FAILED, "mmap");
	r.id = npf_client__register(c, r.mem, REGION, &o);
	TH_ASSERT(r.id > 0, "register: %s", npf_client__errmsg(c));
	return r;
}

static void check_page(const char *mem, uint64_t p)
{
	const uint64_t *w = (const uint64_t *)(mem + p * 4096);
	int i;

	for (i = 0; i < 512; i += 37)
		if (w[i] != word(p * 4096 + (uint64_t)i * 8))
			th_fail("page %llu word %d is 0x%llx, want 0x%llx", (unsigned long long)p,
				i, (unsigned long long)w[i],
				(unsigned long long)word(p * 4096 + (uint64_t)i * 8));
}

static struct npf_region_stats region_stats(struct npf_client *c, int id)
{
	struct npf_region_stats_full *sf;
	struct npf_region_stats st;
	size_t n;

	TH_ASSERT(npf_client__stats(c, (__u32)id, &sf, &n) == 0 && n == 1, "stats of region %d",
		  id);
	st = sf->stats;
	free(sf);
	return st;
}

static uint64_t ws_touched[2048], ws_first_run;

/* As nobody: a region named as root's, the same pages touched: no replay of root's record. */
static void other_user(void *arg)
{
	struct npf_client *c = npf_client__connect(NULL);
	struct region r;
	uint64_t f;

	(void)arg;
	TH_ASSERT(c, "connect as another user: %s", strerror(errno));
	r = new_region(c, "replayed");
	usleep(50000);
	for (int p = 0; p < 2048; p++)
		check_page(r.mem, ws_touched[p]);
	f = region_stats(c, r.id).uffd_faults;
	printf("wsreplay: another user's region named 'replayed': %llu faults\n",
	       (unsigned long long)f);
	TH_ASSERT(f * 2 > ws_first_run, "another user's region replayed root's record");
	munmap(r.mem, REGION);
	npf_client__close(c);
}

static int load(struct npf_client *c, const char *file, __u32 region, const char *name)
{
	char path[512];
	int fd, ret;

	snprintf(path, sizeof(path), "%s/%s", policy_dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	TH_ASSERT(fd >= 0, "open %s: %s", path, strerror(errno));
	ret = npf_client__policy_load(c, fd, region, name, NULL);
	close(fd);
	return ret;
}

/* Sequential scan: returns the userfaultfd faults it took. */
static uint64_t scan(struct npf_client *c, const char *name)
{
	struct region r = new_region(c, name);
	uint64_t p, faults;

	for (p = 0; p < PAGES; p++)
		check_page(r.mem, p);
	faults = region_stats(c, r.id).uffd_faults;
	munmap(r.mem, REGION);
	return faults;
}

/* Compile a bad policy with clang into the test's directory. */
static const char *bad_object(const char *tag, const char *source)
{
	static char obj[256];
	char src[256], cmd[1024];
	FILE *f;

	snprintf(src, sizeof(src), "%s/%s.bpf.c", d.dir, tag);
	snprintf(obj, sizeof(obj), "%s/%s.bpf.o", d.dir, tag);
	f = fopen(src, "w");
	TH_ASSERT(f, "write %s", src);
	fputs(source, f);
	fclose(f);
	/* vmlinux.h is in the build tree the runner tests ($O/gen, beside $O/bin). */
	snprintf(
		cmd, sizeof(cmd),
		"clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -Iinclude -I%s/../gen -Ibpf -c %s -o %s 2>&1",
		getenv("NPF_BIN") ?: "build/bin", src, obj);
	TH_ASSERT(system(cmd) == 0, "clang failed on %s", src);
	return obj;
}

static void expect_refused(struct npf_client *c, const char *what, const char *obj,
			   const char *needle)
{
	int fd = open(obj, O_RDONLY), ret;

	TH_ASSERT(fd >= 0, "open %s", obj);
	ret = npf_client__policy_load(c, fd, 0, NULL, NULL);
	close(fd);
	printf("%-24s -> %d \"%.200s\"\n", what, ret, npf_client__errmsg(c));
	TH_ASSERT(ret < 0, "%s was accepted", what);
	TH_ASSERT(strstr(npf_client__errmsg(c), needle), "%s: \"%s\" does not mention \"%s\"", what,
		  npf_client__errmsg(c), needle);
	TH_ASSERT(th_npfd_alive(&d), "npfd died on %s", what);
}

static volatile int stop;
static struct region churn_region;

static void *faulter(void *arg)
{
	uint64_t seed = (uintptr_t)arg * 7 + 1, n = 0;

	while (!stop) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		check_page(churn_region.mem, (seed >> 33) % PAGES);
		n++;
	}
	return (void *)(uintptr_t)n;
}

int main(void)
{
	static const char *const names[] = {"exact.bpf.o", "seq.bpf.o", "pia.bpf.o", "pi4.bpf.o",
					    "stride.bpf.o"};
	struct npf_policy_status *ps;
	struct npf_client *c;
	uint64_t f_exact, f_seq, f_off, f_on, dec, reads = 0;
	pthread_t th[2];
	size_t n;
	int i;

	snprintf(policy_dir, sizeof(policy_dir), "%s/../policies", th_bin_dir());
	snprintf(ws_dir, sizeof(ws_dir), "/tmp/npf-test-ws-%d", getpid());
	{
		const char *args[] = {"--ws-dir", ws_dir, NULL};

		th_npfd_start(&d, args);
	}
	adv_open_to_group(&d);
	make_backing();
	c = npf_client__connect(NULL);
	TH_ASSERT(c, "connect");

	/* 1. exact vs seq on a sequential scan */
	f_exact = scan(c, "scan-exact");
	TH_ASSERT(load(c, "seq.bpf.o", 0, NULL) > 0, "load seq: %s", npf_client__errmsg(c));
	f_seq = scan(c, "scan-seq");
	printf("sequential scan of %llu pages: %llu faults with the built-in decision, %llu with seq (%.1fx fewer)\n",
	       (unsigned long long)PAGES, (unsigned long long)f_exact, (unsigned long long)f_seq,
	       (double)f_exact / (double)(f_seq ? f_seq : 1));
	TH_ASSERT(f_seq * 8 <= f_exact, "seq cut faults only %.1fx (want >= 8x)",
		  (double)f_exact / (double)(f_seq ? f_seq : 1));

	/* 1b. the kill switch: BPF must stop calling seq, not only npfctl say DISABLED */
	TH_ASSERT(npf_client__policy_list(c, &ps, &n) == 0 && n == 1, "policy list");
	dec = ps[0].invocations;
	free(ps);
	TH_ASSERT(npf_client__policy_enable(c, false) == 0, "kill switch off: %s",
		  npf_client__errmsg(c));
	f_off = scan(c, "scan-disabled");
	TH_ASSERT(npf_client__policy_list(c, &ps, &n) == 0 && n == 1, "policy list");
	printf("with policies disabled: %llu faults, seq made %llu decisions\n",
	       (unsigned long long)f_off, (unsigned long long)(ps[0].invocations - dec));
	TH_ASSERT(ps[0].invocations == dec, "seq made %llu decisions while policies were disabled",
		  (unsigned long long)(ps[0].invocations - dec));
	free(ps);
	TH_ASSERT(f_off * 10 >= f_exact * 9,
		  "policies disabled: the scan took %llu faults, the built-in decision %llu: "
		  "a disabled seq still prefetches",
		  (unsigned long long)f_off, (unsigned long long)f_exact);
	TH_ASSERT(npf_client__policy_enable(c, true) == 0, "kill switch on: %s",
		  npf_client__errmsg(c));
	f_on = scan(c, "scan-enabled");
	printf("enabled again: %llu faults\n", (unsigned long long)f_on);
	TH_ASSERT(f_on * 8 <= f_exact, "enabled again: seq cut faults only %.1fx (want >= 8x)",
		  (double)f_exact / (double)(f_on ? f_on : 1));

	/* 2. bad objects, each refused for its own reason; seq stays */
	expect_refused(
		c, "wrong ABI version",
		bad_object("abi",
			   "#include \"npf_policy.h\"\n"
			   "char LICENSE[] SEC(\"license\") = \"GPL\";\n"
			   "struct npf_policy_info i SEC(\".npf_policy\") __attribute__((used)) ="
			   " {.magic = NPF_POLICY_MAGIC, .abi_version = 99, .name = \"x\"};\n"
			   "SEC(\"tracepoint\") int p(void *u) { return 0; }\n"),
		"ABI version 99");
	expect_refused(c, "wrong program type",
		       bad_object("type", "#include \"npf_policy.h\"\nNPF_POLICY(\"xdp\");\n"
					  "SEC(\"xdp\") int p(void *u) { return 2; }\n"),
		       "wrong program type");
	expect_refused(c, "no name",
		       bad_object("noname", "#include \"npf_policy.h\"\nNPF_POLICY(\"\");\n"
					    "SEC(\"tracepoint\") int p(void *u) { return 0; }\n"),
		       "no name");
	expect_refused(c, "verifier rejection",
		       bad_object("unsafe", "#include \"npf_policy.h\"\nNPF_POLICY(\"unsafe\");\n"
					    "SEC(\"tracepoint\") int p(void *u)\n"
					    "{ struct npf_policy_ctx *c = npf_policy_ctx();\n"
					    "  if (!c) return 0;\n"
					    "  /* past the end of the map value */\n"
					    "  ((volatile char *)c)[sizeof(*c) + 64] = 1;\n"
					    "  return npf_policy_submit(c); }\n"),
		       "verifier");
	{
		char junk[256];
		FILE *f;

		snprintf(junk, sizeof(junk), "%s/junk.bpf.o", d.dir);
		f = fopen(junk, "w");
		TH_ASSERT(f, "write %s", junk);
		fputs("this is not an ELF object\n", f);
		fclose(f);
		expect_refused(c, "not an ELF object", junk, "not an ELF");
	}
	TH_ASSERT(npf_client__policy_list(c, &ps, &n) == 0 && n == 1 && !strcmp(ps[0].name, "seq"),
		  "after the refusals, seq is not the one policy loaded");
	printf("seq still loaded: %llu decisions, %llu clamped\n",
	       (unsigned long long)ps[0].invocations, (unsigned long long)ps[0].clamped);
	free(ps);

	/* 3. churn policies under continuous faults */
	churn_region = new_region(c, "churn");
	for (i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, faulter, (void *)(uintptr_t)i);
	for (i = 0; i < 60; i++) {
		const char *f = names[i % 5];

		if (i % 3 == 2) {
			TH_ASSERT(npf_client__policy_unload(c, "churn") == 0 ||
					  strstr(npf_client__errmsg(c), "no policy"),
				  "unload: %s", npf_client__errmsg(c));
		} else {
			TH_ASSERT(load(c, f, i % 2 ? (__u32)churn_region.id : 0, "churn") > 0,
				  "load %s: %s", f, npf_client__errmsg(c));
		}
		if (i == 30)
			TH_ASSERT(npf_client__policy_enable(c, false) == 0, "kill switch off");
		if (i == 40)
			TH_ASSERT(npf_client__policy_enable(c, true) == 0, "kill switch on");
		usleep(5000);
	}
	stop = 1;
	for (i = 0; i < 2; i++) {
		void *ret;

		pthread_join(th[i], &ret);
		reads += (uintptr_t)ret;
	}
	printf("policy churn: 60 loads/replacements/unloads while 2 threads read %llu pages, all correct\n",
	       (unsigned long long)reads);
	TH_ASSERT(th_npfd_alive(&d), "npfd died");

	/* 4. wsreplay: the second registration of a region replays the first one's faults */
	{
		uint64_t f1, f2, p, seed = 99, touched[2048];
		struct region r;
		char cmd[128];

		TH_ASSERT(load(c, "wsreplay.bpf.o", 0, NULL) > 0, "load wsreplay: %s",
			  npf_client__errmsg(c));
		for (p = 0; p < 2048; p++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			touched[p] = (seed >> 33) % PAGES;
		}
		r = new_region(c, "replayed");
		for (p = 0; p < 2048; p++)
			check_page(r.mem, touched[p]);
		f1 = region_stats(c, r.id).uffd_faults;
		munmap(r.mem, REGION);
		r = new_region(c, "replayed");
		usleep(50000); /* the replay is queued at registration; let it land */
		for (p = 0; p < 2048; p++)
			check_page(r.mem, touched[p]);
		f2 = region_stats(c, r.id).uffd_faults;
		munmap(r.mem, REGION);
		printf("wsreplay: %llu faults in the first run, %llu in the replayed second run\n",
		       (unsigned long long)f1, (unsigned long long)f2);
		TH_ASSERT(f1 > 1000 && f2 * 10 < f1, "replay did not cut faults 10x");
		memcpy(ws_touched, touched, sizeof(touched));
		ws_first_run = f1;
		TH_ASSERT(adv_run_as_attacker(other_user, NULL, 60) == 0,
			  "another user's region of the same name");
		r = new_region(c, "replayed");
		usleep(50000);
		for (p = 0; p < 2048; p++)
			check_page(r.mem, touched[p]);
		f2 = region_stats(c, r.id).uffd_faults;
		munmap(r.mem, REGION);
		printf("wsreplay: root's third run after it: %llu faults\n",
		       (unsigned long long)f2);
		TH_ASSERT(f2 * 10 < f1, "the other user's run wrote over root's record");
		snprintf(cmd, sizeof(cmd), "rm -rf %s", ws_dir);
		TH_ASSERT(system(cmd) == 0, "%s", cmd);
	}
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("ok\n");
	return 0;
}
