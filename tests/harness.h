/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by the test programs: start a private npfd (own socket directory,
 * own bpffs pin directory), stop it, and report pass / fail / skip the way
 * tests/run.sh expects (exit 0 / 1 / 77, reason on the last line).
 *
 * Including it also (a constructor, before main) makes stdout line-buffered,
 * so that a test killed half-way leaves every line it printed in its log,
 * and arms an alarm shorter than the runner's time limit: a test that hangs
 * fails with its own message (and its children -- npfd, the two sides of a
 * NIC test -- go with it through PR_SET_PDEATHSIG) instead of being killed
 * silently. The alarm is $NPF_TEST_ALARM seconds (tests/run.sh sets it to
 * its limit minus a margin), TH_ALARM_DEFAULT when unset, 0 for none.
 */
#ifndef NPF_TEST_HARNESS_H
#define NPF_TEST_HARNESS_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TH_SKIP 77
#define TH_ALARM_DEFAULT 240

static char th_alarm_msg[128];
static int th_alarm_len;

static void th_on_alarm(int sig)
{
	/* async-signal-safe: no stdio; what was printed is already out (line-buffered) */
	if (write(STDOUT_FILENO, th_alarm_msg, (size_t)th_alarm_len) < 0)
		_exit(1);
	_exit(1);
}

static void __attribute__((constructor)) th_init(void)
{
	const char *a = getenv("NPF_TEST_ALARM");
	unsigned int secs = a ? (unsigned int)strtoul(a, NULL, 10) : TH_ALARM_DEFAULT;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!secs)
		return;
	th_alarm_len = snprintf(th_alarm_msg, sizeof(th_alarm_msg),
				"\nFAIL: the test did not finish within %u s (the harness's alarm, "
				"$NPF_TEST_ALARM)\n",
				secs);
	signal(SIGALRM, th_on_alarm);
	alarm(secs);
}

static inline void __attribute__((noreturn, format(printf, 1, 2))) th_skip(const char *fmt, ...)
{
	va_list ap;

	printf("SKIP: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(TH_SKIP);
}

/*
 * The npfds this test started: a failed test kills those still running,
 * stopped (SIGSTOP) or not -- a stopped one ignores the SIGTERM its
 * parent's death sends it until it is continued, and would be left behind.
 * A slot is free again once its process has been reaped (the pid is no
 * child of ours: ECHILD), by whichever code killed it.
 */
static pid_t th_children[8];

/* Is pid a child of ours not reaped yet (1), and still running or stopped (2)? */
static inline int th_child_state(pid_t pid)
{
	siginfo_t si = {0};

	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return 0;
	return si.si_pid ? 1 : 2;
}

static inline void th_child_started(pid_t pid)
{
	for (unsigned int i = 0; i < sizeof(th_children) / sizeof(th_children[0]); i++)
		if (!th_children[i] || !th_child_state(th_children[i])) {
			th_children[i] = pid;
			return;
		}
}

static int th_failed;

/*
 * LeakSanitizer asks this before its check at exit: none after a failure.
 * The check stops every thread with ptrace first, and a thread waiting for
 * a stopped npfd to read its MADV_DONTNEED's REMOVE event (a killable
 * sleep, which no SIGSTOP ends) never stops: the exit hung until the
 * runner's timeout killed the test. A failed test's leaks do not matter.
 */
int __attribute__((weak)) __lsan_is_turned_off(void);
int __attribute__((weak)) __lsan_is_turned_off(void)
{
	return __atomic_load_n(&th_failed, __ATOMIC_RELAXED);
}

static inline void __attribute__((noreturn, format(printf, 1, 2))) th_fail(const char *fmt, ...)
{
	va_list ap;

	__atomic_store_n(&th_failed, 1, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < sizeof(th_children) / sizeof(th_children[0]); i++)
		if (th_children[i] > 0 && th_child_state(th_children[i]) == 2)
			kill(th_children[i], SIGKILL);
	printf("FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

#define TH_ASSERT(cond, ...)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			th_fail(__VA_ARGS__);                                                      \
	} while (0)

static inline void th_require_root(void)
{
	if (geteuid() != 0)
		th_skip("needs root (BPF and userfaultfd of other processes)");
}

/* A small text file (/proc): its first size - 1 bytes, NUL-terminated; the length. */
static inline size_t th_read_text(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n;

	TH_ASSERT(f, "open %s: %s", path, strerror(errno));
	n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = 0;
	return n;
}

static inline double th_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct th_npfd {
	pid_t pid;
	char dir[32];
	char sock[100];
	char bpffs[128];
	char log[128];
};

/* Where the built binaries are: $NPF_BIN (set by tests/run.sh) or ./build/bin. */
static inline const char *th_bin_dir(void)
{
	const char *d = getenv("NPF_BIN");

	return d ? d : "build/bin";
}

static inline int th_connectable(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int ok;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Start npfd with extra arguments (NULL-terminated); fails the test if it does not come up. */
static inline void th_npfd_start(struct th_npfd *d, const char *const *extra)
{
	char bin[256];
	const char *argv[32];
	int i = 0, n;
	double t0;

	th_require_root();
	snprintf(d->dir, sizeof(d->dir), "/tmp/npf-test-XXXXXX");
	if (!mkdtemp(d->dir))
		th_fail("mkdtemp: %s", strerror(errno));
	snprintf(d->sock, sizeof(d->sock), "%s/npfd.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/npfd.log", d->dir);
	snprintf(d->bpffs, sizeof(d->bpffs), "/sys/fs/bpf/npf-test-%d", getpid());
	snprintf(bin, sizeof(bin), "%s/npfd", th_bin_dir());
	argv[i++] = bin;
	argv[i++] = "--foreground";
	argv[i++] = "--config"; /* isolated from the machine's /etc/npf/npfd.conf */
	argv[i++] = "/dev/null";
	argv[i++] = "--socket";
	argv[i++] = d->sock;
	argv[i++] = "--bpffs";
	argv[i++] = d->bpffs;
	for (n = 0; extra && extra[n] && i < 30; n++)
		argv[i++] = extra[n];
	argv[i] = NULL;

	fflush(stdout);
	d->pid = fork();
	if (d->pid < 0)
		th_fail("fork: %s", strerror(errno));
	if (d->pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		/* a test that fails (exits) takes its npfd with it, not leaving it running */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 1);
		}
		execv(bin, (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	th_child_started(d->pid);
	for (t0 = th_now(); th_now() - t0 < 20;) {
		int st;

		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			char cmd[256];

			snprintf(cmd, sizeof(cmd), "cat %s", d->log);
			if (system(cmd) < 0)
				perror("system");
			th_fail("npfd exited during start-up (status %d)", st);
		}
		if (th_connectable(d->sock)) {
			setenv("NPF_SOCKET", d->sock, 1);
			return;
		}
		usleep(10000);
	}
	th_fail("npfd did not open %s within 20 s", d->sock);
}

static inline int th_npfd_alive(struct th_npfd *d)
{
	return waitpid(d->pid, NULL, WNOHANG) == 0 && th_connectable(d->sock);
}

static inline void th_npfd_dump_log(struct th_npfd *d)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "echo '--- npfd log:'; cat %s", d->log);
	if (system(cmd) < 0)
		perror("system");
}

/* Stop npfd with SIGTERM; fails the test if it does not exit cleanly. */
static inline void th_npfd_stop(struct th_npfd *d)
{
	double t0 = th_now();
	int st = 0;

	kill(d->pid, SIGTERM);
	while (waitpid(d->pid, &st, WNOHANG) == 0) {
		if (th_now() - t0 > 10) {
			kill(d->pid, SIGKILL);
			waitpid(d->pid, &st, 0);
			th_npfd_dump_log(d);
			th_fail("npfd did not exit within 10 s of SIGTERM");
		}
		usleep(10000);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		th_npfd_dump_log(d);
		th_fail("npfd exited with status 0x%x", st);
	}
	unlink(d->log);
	rmdir(d->dir);
}

#endif
