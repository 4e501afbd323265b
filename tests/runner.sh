#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The runner and the harness, on tests made for the purpose (no npfd, no root):
#  1. a test that skips: its reason is on the summary's SKIP line;
#  2. NPF_TESTS_NO_SKIP=1 makes that skip a failure (the runner exits 1),
#     unless NPF_TESTS_ALLOW_SKIP names the test;
#  3. a C test (tests/harness.h) that prints a line and hangs: the harness's
#     alarm fires before the runner's timeout (TEST_TIMEOUT), and its log
#     keeps the line printed before (stdout is line-buffered: the alarm
#     _exit()s, and a block-buffered stdout to a file would be lost).
set -u
here=$PWD
dir=$(mktemp -d /tmp/npf-runner-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$dir/build/tests"
cc=${CC:-cc}
command -v "$cc" >/dev/null || { echo "SKIP: no C compiler ($cc) to build the hanging test"; exit 77; }

cat >"$dir/build/tests/t_skip" <<'EOF'
#!/bin/sh
echo "SKIP: the widget is missing (a reason)"
exit 77
EOF
cat >"$dir/build/tests/t_pass" <<'EOF'
#!/bin/sh
exit 0
EOF
chmod +x "$dir/build/tests/t_skip" "$dir/build/tests/t_pass"
cat >"$dir/hang.c" <<'EOF'
#include "harness.h"
int main(void)
{
	printf("before the hang: line 1\n");
	for (;;)
		pause();
}
EOF
"$cc" -I"$here/tests" -o "$dir/build/tests/t_hang" "$dir/hang.c" || fail "cannot build the hanging test"

# The runner under test, from the tree, on the tests above; nothing of the
# outer runner's settings (build tree, logs, timeouts, skips allowed) reaches it.
unset O NPF_TEST_LOGS NPF_TESTS_NO_SKIP NPF_TESTS_ALLOW_SKIP TEST_TIMEOUT NPF_TEST_ALARM
run() { (cd "$dir" && env "$@" sh "$here/tests/run.sh" t_pass t_skip t_hang >out 2>&1; echo $? >rc); }

# 1, 3
run TEST_TIMEOUT=6 NPF_TESTS_NO_SKIP=0
cat "$dir/out"
grep -q '^SKIP  t_skip .*the widget is missing (a reason)' "$dir/out" ||
	fail "the summary does not give the skip's reason"
grep -q '^PASS  t_pass' "$dir/out" || fail "t_pass did not pass"
grep -q '^FAIL  t_hang' "$dir/out" || fail "t_hang did not fail"
[ "$(cat "$dir/rc")" = 1 ] || fail "the runner exited $(cat "$dir/rc") with a failed test, want 1"
log=$dir/build/test-logs/t_hang.log
grep -q 'before the hang: line 1' "$log" || fail "the hanging test's log lost its line (stdout not line-buffered): $(cat "$log")"
grep -q 'did not finish within 4 s' "$log" ||
	fail "the harness's alarm did not fire before the runner's 6 s timeout: $(cat "$log")"
grep -q '^FAIL  t_hang .*timed out' "$dir/out" && fail "t_hang was killed by the timeout, not its alarm"

# 2
(cd "$dir" && NPF_TESTS_NO_SKIP=1 sh "$here/tests/run.sh" t_pass t_skip >out 2>&1; echo $? >rc)
cat "$dir/out"
grep -q '^FAIL  t_skip .*NPF_TESTS_NO_SKIP' "$dir/out" || fail "NPF_TESTS_NO_SKIP=1: the skip is not a failure"
[ "$(cat "$dir/rc")" = 1 ] || fail "NPF_TESTS_NO_SKIP=1: a skip, and the runner exited $(cat "$dir/rc")"
(cd "$dir" && NPF_TESTS_NO_SKIP=1 NPF_TESTS_ALLOW_SKIP="t_other t_skip" sh "$here/tests/run.sh" t_pass t_skip >out 2>&1; echo $? >rc)
[ "$(cat "$dir/rc")" = 0 ] && grep -q '^SKIP  t_skip' "$dir/out" ||
	fail "NPF_TESTS_ALLOW_SKIP names t_skip, yet: $(cat "$dir/out")"
echo "PASS: skip reasons shown, NPF_TESTS_NO_SKIP fails skips (except the allowed), the alarm fires first and the log keeps its lines"
