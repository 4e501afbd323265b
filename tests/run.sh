#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The test runner: every built test program (build/tests/*, the unit tests
# among them as unit-NAME) and every tests/*.sh, each with a time limit.
# Output is kept in build/test-logs/ and shown only on failure. Exit 77 means
# skip; the reason is the last line, and the summary line shows it.
#   sh tests/run.sh [NAME...]    run some tests only
#   TEST_TIMEOUT=SECONDS         per-test limit (default 300); the C tests'
#                                own alarm ($NPF_TEST_ALARM, tests/harness.h)
#                                fires 10 s before it, so that a hung test
#                                fails with its log instead of being killed
#   NPF_TESTS_NO_SKIP=1          a skip is a failure (.ci/run sets it: on a
#                                machine that has root, namespaces, systemd,
#                                BPF and the Prometheus client nothing may
#                                drop out unnoticed) ...
#   NPF_TESTS_ALLOW_SKIP="A B"   ... except for the tests named here, whose
#                                feature the machine genuinely lacks
# A test that leaves pinned BPF objects behind (/sys/fs/bpf/npf-test-PID of
# a process that is gone: its npfd was killed and nobody removed them) fails,
# and the runner removes them: tests must leave the host as they found it.
set -u
O=${O:-build}
export NPF_BIN="$PWD/$O/bin"
export NPF_TESTS="$PWD/$O/tests"
logs=${NPF_TEST_LOGS:-$O/test-logs} # where each test's output is kept
mkdir -p "$logs"
limit=${TEST_TIMEOUT:-300}
if [ "$limit" -gt 20 ]; then alarm=$((limit - 10)); else alarm=$((limit * 3 / 4)); fi
[ "$alarm" -gt 0 ] || alarm=1
export NPF_TEST_ALARM=$alarm
no_skip=${NPF_TESTS_NO_SKIP:-0}
allow_skip=" ${NPF_TESTS_ALLOW_SKIP:-} "

if [ "$(id -u)" -ne 0 ]; then
	echo "tests: not root: every test that needs npfd will skip (npfd loads BPF programs and serves other processes' userfaultfds)" >&2
	[ "$no_skip" = 1 ] && echo "tests: NPF_TESTS_NO_SKIP=1: those skips count as failures" >&2
fi

tests=""
if [ $# -gt 0 ]; then
	for n in "$@"; do
		if [ -x "$O/tests/$n" ] && [ -f "$O/tests/$n" ]; then tests="$tests $O/tests/$n"
		elif [ -f "tests/$n.sh" ]; then tests="$tests tests/$n.sh"
		elif [ -f "tests/$n" ]; then tests="$tests tests/$n"
		else echo "tests: no test named $n" >&2; exit 2; fi
	done
else
	for t in "$O"/tests/* tests/*.sh; do
		case "$t" in tests/run.sh) continue ;; esac
		[ -f "$t" ] && tests="$tests $t"
	done
fi

pins_root=/sys/fs/bpf
pins_now() { ls -d "$pins_root"/npf-test-* 2>/dev/null; }

# Pin directories that appeared during a test and whose process is gone.
pins_left() {
	pins_now | while read -r d; do
		case " $1 " in *" $d "*) continue ;; esac
		# the first number in the name is the pid (npf-test-PID, npf-test-PID-d, ...)
		pid=$(echo "${d##*/}" | sed -n 's/^[^0-9]*\([0-9][0-9]*\).*/\1/p')
		[ -n "$pid" ] && [ -d "/proc/$pid" ] && continue
		echo "$d"
	done
}

pass=0 fail=0 skip=0
for t in $tests; do
	before=$(pins_now | tr '\n' ' ')
	name=$(basename "$t" .sh)
	log="$logs/$name.log"
	start=$(date +%s.%N)
	case "$t" in
	*.sh) timeout -k 5 "$limit" sh "$t" >"$log" 2>&1 ;;
	*) timeout -k 5 "$limit" "$t" >"$log" 2>&1 ;;
	esac
	rc=$?
	secs=$(awk "BEGIN { print $(date +%s.%N) - $start }")
	why=""
	left=$(pins_left "$before" | tr '\n' ' ')
	if [ -n "$left" ]; then
		for d in $left; do rm -f "$d"/* 2>/dev/null; rmdir "$d" 2>/dev/null; done
		if [ $rc -eq 0 ]; then
			echo "runner: the test left pinned BPF objects behind: $left(removed)" >>"$log"
			rc=79
		fi
	fi
	if [ $rc -eq 77 ]; then
		why=$(tail -n 1 "$log")
		why=${why#SKIP: }
		[ -n "$why" ] || why="(the test gave no reason: a bug in the test)"
		case "$allow_skip" in
		*" $name "*) ;;
		*) [ "$no_skip" = 1 ] && rc=78 ;;
		esac
	fi
	case $rc in
	0) pass=$((pass + 1)); printf 'PASS  %-28s %6.2fs\n' "$name" "$secs" ;;
	77) skip=$((skip + 1)); printf 'SKIP  %-28s %s\n' "$name" "$why" ;;
	*)
		fail=$((fail + 1))
		if [ $rc -eq 78 ]; then why="skipped, and NPF_TESTS_NO_SKIP=1 allows no skip (not in NPF_TESTS_ALLOW_SKIP): $why"
		elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then why="timed out after ${limit}s"
		elif [ $rc -eq 79 ]; then why="left pinned BPF objects in $pins_root: $left"
		else why="exit $rc"; fi
		printf 'FAIL  %-28s %s\n' "$name" "$why"
		sed 's/^/    | /' "$log" | tail -n 60
		;;
	esac
done
echo "tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
