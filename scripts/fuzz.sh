#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# libFuzzer targets (tests/fuzz/NAME.c), each built with clang and ASan +
# UBSan together with the product sources its "FUZZ_SOURCES:" line names, then
# run for a bounded time from its corpus (tests/fuzz/corpus/NAME/, kept in
# git; new inputs go to $O/corpus/NAME/ and are not added by themselves).
# A crash leaves its input in $O/crashes/: add it to the corpus with the fix.
#   sh scripts/fuzz.sh [NAME...]     FUZZ_SECONDS=N per target (default 20)
set -eu
O=${O:-build-fuzz}
secs=${FUZZ_SECONDS:-20}
CLANG=${CLANG:-clang}
mkdir -p "$O/bin" "$O/crashes"

# vmlinux.h and the BPF skeletons are not needed: the targets link parsers only.
cflags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-D_GNU_SOURCE -std=gnu11 -Iinclude -Iclient -Inic -Icommon -Idaemon \
	-ffunction-sections -fdata-sections"
# --gc-sections: a parser's file may also hold functions that reach the rest
# of npfd (applying a configuration, say); the fuzz target never calls them.
ldflags="-Wl,--gc-sections"

names=${*:-$(for f in tests/fuzz/*.c; do basename "$f" .c; done)}
failed=0
for n in $names; do
	src=tests/fuzz/$n.c
	[ -f "$src" ] || { echo "fuzz: no target $src" >&2; exit 2; }
	srcs=$(sed -n 's/.*FUZZ_SOURCES:\(.*\)/\1/p' "$src")
	printf '  %-8s %s\n' FUZZ "$O/bin/$n"
	# shellcheck disable=SC2086
	$CLANG $cflags $ldflags -o "$O/bin/$n" "$src" $srcs
	mkdir -p "$O/corpus/$n" "tests/fuzz/corpus/$n"
	if ! "$O/bin/$n" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-close_fd_mask=2 -artifact_prefix="$O/crashes/$n-" -print_final_stats=1 \
		"$O/corpus/$n" "tests/fuzz/corpus/$n" >"$O/$n.log" 2>&1; then
		echo "fuzz: $n FAILED (log $O/$n.log, input in $O/crashes/):"
		grep -E 'ERROR|runtime error|SUMMARY' "$O/$n.log" | head -n 10
		failed=$((failed + 1))
		continue
	fi
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$O/$n.log")
	cov=$(grep -o 'cov: [0-9]*' "$O/$n.log" | tail -n 1)
	echo "fuzz: $n ok: $execs inputs in ${secs}s, $cov"
done
[ "$failed" -eq 0 ]
