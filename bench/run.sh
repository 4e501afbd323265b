#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Run the benchmarks against a private npfd. Tables go to the terminal,
# one JSON object per result row to build/bench/results.jsonl.
set -eu
O=${O:-build}
BIN="$PWD/$O/bin"
out="$O/bench"
mkdir -p "$out"
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root (npfd loads BPF programs)" >&2; exit 1; }
dir=$(mktemp -d /tmp/npf-bench-XXXXXX)
export NPF_SOCKET="$dir/npfd.sock"
"$BIN/npfd" --config /dev/null --foreground -q --socket "$NPF_SOCKET" --bpffs /sys/fs/bpf/npf-bench 2>"$dir/npfd.log" &
npfd=$!
trap 'kill $npfd 2>/dev/null; wait $npfd 2>/dev/null; rm -rf "$dir"' EXIT INT TERM
i=0
until [ -S "$NPF_SOCKET" ]; do
	i=$((i + 1))
	[ $i -lt 400 ] || { echo "bench: npfd did not start" >&2; cat "$dir/npfd.log" >&2; exit 1; }
	sleep 0.05
done
: >"$out/results.jsonl"
for b in "$BIN"/npf-bench-*; do
	name=${b##*/npf-bench-}
	echo "== $name"
	"$b"
	"$b" --json >>"$out/results.jsonl"
	echo
done
echo "results: $out/results.jsonl"
