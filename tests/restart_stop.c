// SPDX-License-Identifier: GPL-2.0
/*
 * A stopped npfd (SIGSTOP) never freezes a client:
 *  - libnpf calls fail with -ETIMEDOUT within their bound (timeout_ms), and
 *    so does `npfctl status` (NPF_TIMEOUT_MS);
 *  - faults left unread for fallback_ms, with npfd not answering, are
 *    served by libnpf itself (every touched word checked), and handed back
 *    to npfd once it runs again (SIGCONT), which then serves them;
 *  - with npfd stopped again, npf_client__close() and munmap() of the
 *    regions return at once.
 */
#include "restart_common.h"

#define TIMEOUT_MS 500
#define FALLBACK_MS 1000

static struct rs_npfd d;

/* The runner's timeout: a stopped npfd would not act on its SIGTERM (death signal). */
static void on_term(int sig)
{
	if (d.pid > 0)
		kill(d.pid, SIGKILL);
	_exit(128 + sig);
}

static __u64 uffd_faults(struct npf_client *c)
{
	struct npf_region_stats_full *sf;
	size_t n, i;
	__u64 sum = 0;
	int err = npf_client__stats(c, 0, &sf, &n);

	TH_ASSERT(!err, "stats: %s", npf_client__errmsg(c));
	for (i = 0; i < n; i++)
		if (sf[i].stats.tgid == (__u32)getpid())
			sum += sf[i].stats.uffd_faults;
	free(sf);
	return sum;
}

struct closer {
	struct npf_client *c;
	struct rs_work *w;
	volatile int done;
};

static void *close_and_unmap(void *arg)
{
	struct closer *cl = arg;

	npf_client__close(cl->c);
	TH_ASSERT(!munmap(cl->w->file_mem, cl->w->len) && !munmap(cl->w->anon_mem, cl->w->len),
		  "munmap: %s", strerror(errno));
	cl->done = 1;
	return NULL;
}

int main(void)
{
	NPF_OPTS(npf_client_opts, o, .timeout_ms = TIMEOUT_MS, .fallback_ms = FALLBACK_MS);
	struct rs_work w = {0};
	struct npf_client *c;
	struct npf_status st;
	struct closer cl;
	pthread_t th;
	char cmd[512];
	double t0, dt;
	__u64 before;
	char *more;
	int err, rc;

	th_require_root();
	setvbuf(stdout, NULL, _IOLBF, 0);
	npf_set_print(rs_print);
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	rs_npfd_start(&d);
	c = npf_client__connect(&o);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	/* regions registered, threads not started: nothing faults yet */
	rs_work_start(&w, c, d.dir, 32ULL << 20);
	w.stop = 1;
	rs_work_stop(&w, 5);
	w.stop = 0;

	rs_npfd_stop_signal(&d);
	t0 = th_now();
	err = npf_client__status(c, &st);
	dt = th_now() - t0;
	printf("status with npfd stopped: %d (%s) after %.2f s: %s\n", err, strerror(-err), dt,
	       npf_client__errmsg(c));
	TH_ASSERT(err == -ETIMEDOUT, "status with npfd stopped returned %d, want -ETIMEDOUT", err);
	TH_ASSERT(dt >= TIMEOUT_MS / 1000.0 * 0.9 && dt < TIMEOUT_MS / 1000.0 + 1,
		  "status took %.2f s, the bound is %d ms", dt, TIMEOUT_MS);

	more = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	t0 = th_now();
	err = npf_client__register(c, more, 1 << 20, NULL);
	dt = th_now() - t0;
	printf("register with npfd stopped: %d after %.2f s\n", err, dt);
	TH_ASSERT(err == -ETIMEDOUT && dt < TIMEOUT_MS / 1000.0 + 1,
		  "register with npfd stopped: %d after %.2f s, want -ETIMEDOUT within %d ms", err,
		  dt, TIMEOUT_MS);

	snprintf(cmd, sizeof(cmd), "NPF_TIMEOUT_MS=%d %s/npfctl status >/dev/null 2>&1", TIMEOUT_MS,
		 th_bin_dir());
	t0 = th_now();
	rc = system(cmd);
	dt = th_now() - t0;
	printf("npfctl status with npfd stopped: exit %d after %.2f s\n", WEXITSTATUS(rc), dt);
	TH_ASSERT(WIFEXITED(rc) && WEXITSTATUS(rc) == 1 && dt < TIMEOUT_MS / 1000.0 + 2,
		  "npfctl status with npfd stopped: status 0x%x after %.2f s", rc, dt);

	/* Faults now: npfd does not read them; libnpf serves them after FALLBACK_MS. */
	{
		struct rs_work *wp = &w;
		static struct rs_thread_arg args[RS_THREADS];
		int i;

		for (i = 0; i < RS_THREADS; i++) {
			args[i] = (struct rs_thread_arg){wp, (unsigned int)i};
			TH_ASSERT(!pthread_create(&w.th[i], NULL, rs_thread, &args[i]), "thread");
		}
	}
	t0 = th_now();
	TH_ASSERT(rs_progress(&w, 2000, FALLBACK_MS / 1000.0 + 10),
		  "faults not served within %d ms + 10 s of npfd stopping (fallback: %d)",
		  FALLBACK_MS, rs_fallbacks);
	printf("with npfd stopped, libnpf's fallback served faults %.2f s after they began (fallbacks %d)\n",
	       th_now() - t0, rs_fallbacks);
	TH_ASSERT(rs_fallbacks >= 1, "faults were served, but not by the fallback?");

	/* npfd runs again: libnpf hands back, npfd serves. */
	kill(d.pid, SIGCONT);
	for (t0 = th_now(); !rs_handbacks && th_now() - t0 < 10;)
		usleep(10000);
	TH_ASSERT(rs_handbacks,
		  "libnpf did not hand the faults back to npfd within 10 s of SIGCONT");
	before = uffd_faults(c);
	TH_ASSERT(rs_progress(&w, 2000, 20), "no progress once npfd runs again");
	printf("npfd serves again: %llu faults before, %llu after\n", (unsigned long long)before,
	       (unsigned long long)uffd_faults(c));
	TH_ASSERT(uffd_faults(c) > before, "npfd served none of the faults after SIGCONT");

	/* Stopped again: close and munmap must not wait for it. */
	rs_work_stop(&w, 10);
	rs_npfd_stop_signal(&d);
	cl = (struct closer){c, &w, 0};
	t0 = th_now();
	TH_ASSERT(!pthread_create(&th, NULL, close_and_unmap, &cl), "thread");
	while (!cl.done && th_now() - t0 < 5)
		usleep(1000);
	TH_ASSERT(cl.done,
		  "npf_client__close() + munmap() with npfd stopped still blocked after 5 s");
	pthread_join(th, NULL);
	printf("close + munmap with npfd stopped: %.3f s; %llu touches checked\n", th_now() - t0,
	       (unsigned long long)rs_touches(&w));
	rs_work_free(&w);
	kill(d.pid, SIGCONT);
	rs_npfd_kill(&d, SIGTERM);
	rs_npfd_cleanup(&d);
	printf("ok\n");
	return 0;
}
