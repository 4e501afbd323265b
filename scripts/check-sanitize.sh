#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Build npfd, libnpf, npfctl, the NIC library and the tests with AddressSanitizer
# and UndefinedBehaviorSanitizer into their own build tree, run the suite, and
# fail if any process (npfd included, whose stderr the tests may not keep)
# reported an error. Reports land in $O/san-logs/, one file per process.
#   sh scripts/check-sanitize.sh [TEST...]
set -eu
O=${O:-build-san}
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
# -O1 keeps the suite's run time close to the normal build's; frame pointers
# give readable stacks.
# Exported: tests that run make themselves (make install) build the same way.
export CFLAGS="-O1 -g -fno-omit-frame-pointer $san" LDFLAGS="$san"
make -s O="$O" all

logs="$PWD/$O/san-logs"
rm -rf "$logs"
mkdir -p "$logs"
# Leaks are reported too: npfd frees what it owns on a clean stop. With both
# runtimes linked, UBSAN_OPTIONS is parsed last and its log_path wins, so both
# name the same one; halt_on_error there would lose the report file
# (-fno-sanitize-recover already stops at the first UBSan error). A failed
# allocation returns NULL, as libc's does (a huge region's per-page state
# the kernel will not lend): npfd's out-of-memory paths run, not an abort.
ASAN_OPTIONS="log_path=$logs/san:detect_leaks=1:allocator_may_return_null=1" \
UBSAN_OPTIONS="log_path=$logs/san:print_stacktrace=1" \
O="$O" sh tests/run.sh "$@" || rc=$?

# Some processes write their report to stderr whatever log_path says (npfd
# does): the tests' logs are searched too. C tests also fail when their npfd
# exits non-zero, and the shell tests when theirs did (tests/lib/npfd.sh).
if grep -lE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$O"/test-logs/*.log >"$logs/in-test-logs" 2>/dev/null; then
	:
else
	rm -f "$logs/in-test-logs"
fi
if [ -n "$(ls -A "$logs")" ]; then
	echo "check-sanitize: sanitizer reports:"
	for f in "$logs"/*; do
		echo "==> $f"
		head -n 40 "$f"
	done
	exit 1
fi
exit "${rc:-0}"
