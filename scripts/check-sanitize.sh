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
CFLAGS="-O1 -g -fno-omit-frame-pointer $san" LDFLAGS="$san" make -s O="$O" all

logs="$PWD/$O/san-logs"
rm -rf "$logs"
mkdir -p "$logs"
# Leaks are reported too: npfd frees what it owns on a clean stop.
ASAN_OPTIONS="log_path=$logs/asan:detect_leaks=1:abort_on_error=0:halt_on_error=1" \
UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1:halt_on_error=1" \
O="$O" sh tests/run.sh "$@" || rc=$?

if [ -n "$(ls -A "$logs")" ]; then
	echo "check-sanitize: sanitizer reports:"
	for f in "$logs"/*; do
		echo "==> $f"
		head -n 40 "$f"
	done
	exit 1
fi
exit "${rc:-0}"
