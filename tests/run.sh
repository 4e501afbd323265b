#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The test runner: every built test program (build/tests/*) and every
# tests/*.sh, each with a time limit. Output is kept in build/test-logs/ and
# shown only on failure. Exit 77 means skip; the reason is the last line.
#   sh tests/run.sh [NAME...]    run some tests only
#   TEST_TIMEOUT=SECONDS         per-test limit (default 300)
set -u
O=${O:-build}
export NPF_BIN="$PWD/$O/bin"
export NPF_TESTS="$PWD/$O/tests"
logs="$O/test-logs"
mkdir -p "$logs"
limit=${TEST_TIMEOUT:-300}

if [ "$(id -u)" -ne 0 ]; then
	echo "tests: run as root (npfd loads BPF programs and serves other processes' userfaultfds)" >&2
fi

tests=""
if [ $# -gt 0 ]; then
	for n in "$@"; do
		if [ -x "$O/tests/$n" ]; then tests="$tests $O/tests/$n"
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

pass=0 fail=0 skip=0
for t in $tests; do
	name=$(basename "$t" .sh)
	log="$logs/$name.log"
	start=$(date +%s.%N)
	case "$t" in
	*.sh) timeout -k 5 "$limit" sh "$t" >"$log" 2>&1 ;;
	*) timeout -k 5 "$limit" "$t" >"$log" 2>&1 ;;
	esac
	rc=$?
	secs=$(awk "BEGIN { print $(date +%s.%N) - $start }")
	case $rc in
	0) pass=$((pass + 1)); printf 'PASS  %-28s %6.2fs\n' "$name" "$secs" ;;
	77) skip=$((skip + 1)); printf 'SKIP  %-28s %s\n' "$name" "$(tail -n 1 "$log")" ;;
	*)
		fail=$((fail + 1))
		if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then why="timed out after ${limit}s"; else why="exit $rc"; fi
		printf 'FAIL  %-28s %s\n' "$name" "$why"
		sed 's/^/    | /' "$log" | tail -n 60
		;;
	esac
done
echo "tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
