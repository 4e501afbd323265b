#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Run the standard benchmark set (a few minutes). Tables go to the terminal
# and to build/bench/tables.txt, one JSON object per result row to
# build/bench/results.jsonl ($NPF_BENCH_JSON: the same run prints both), CDF
# data and PNG plots to build/bench/. Every row carries /proc/loadavg at its
# benchmark's start and end (load_start, load_end): the machine is shared.
# Then scripts/bench-tables.py writes build/bench/tables.md and splices the
# tables into bench/README.md between its markers (NPF_BENCH_README=0: not).
#   sh bench/run.sh [NAME...]    run some benchmarks only
# The shared npfd runs as by default: its CPU fault collector is not
# attached (policies are run by npfd), so the kernel-fault baselines pay nothing.
# observe_overhead runs first, before the shared npfd starts: it starts and
# stops its own npfd (its "without" rounds need no npfd running).
set -eu
O=${O:-build}
BIN="$PWD/$O/bin"
out="$PWD/$O/bench"
mkdir -p "$out"
[ "$(id -u)" -eq 0 ] || { echo "bench: run as root (npfd loads BPF programs)" >&2; exit 1; }

# name and the arguments of its standard run (sized for a 2-vCPU VM)
standard="observe_overhead:--rounds=100
observe_overhead:--rounds=100 --trace-cpu-faults
observe_overhead:--rounds=100 --policy=seq
cpu_fault:
nic_fault:
policy:
fault_latency:--samples-4k=400 --samples-4m=16
present_path:--epochs=50
fault_throughput:
registration:--sizes=1,4
proactive:--reps=48
hol:--rounds=200
pingpong:--iters=200
perftest_odp:--rounds=40
evict:--size=64 --rounds=3
evict_mechanism:
overcommit_startup:--use=256
kv_overcommit:
kv_hotswap:
fork:--size=64 --reps=20
unregister:--size=256 --rounds=3
perftest_budget:--rounds=5
huge_region:--rounds=20"

want=${*:-}
runs=$(echo "$standard" | while IFS=: read -r name args; do
	if [ -z "$want" ] || echo " $want " | grep -q " $name "; then echo "$name:$args"; fi
done)
# Benchmarks built but not in the standard list (e.g. another engineer's) run with no arguments.
for b in "$BIN"/npf-bench-*; do
	name=${b##*/npf-bench-}
	echo "$standard" | grep -q "^$name:" && continue
	if [ -z "$want" ] || echo " $want " | grep -q " $name "; then runs="$runs
$name:"; fi
done

dir=$(mktemp -d /tmp/npf-bench-XXXXXX)
npfd=
cleanup() {
	[ -n "$npfd" ] && kill "$npfd" 2>/dev/null && wait "$npfd" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM
export NPF_SOCKET="$dir/npfd.sock"
export NPF_BENCH_DATA="$out"
: >"$out/results.jsonl"
: >"$out/tables.txt"
# The run's own row: when, which commit, how loaded the machine was.
run_row() {
	printf '{"bench":"run","event":"%s","date":"%s","commit":"%s","cpus":%s,"load":"%s"%s}\n' \
		"$1" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
		"$(git describe --always --dirty 2>/dev/null || echo unknown)" \
		"$(getconf _NPROCESSORS_ONLN)" "$(cat /proc/loadavg)" "${2:-}" >>"$out/results.jsonl"
}
run_row start

start_npfd() {
	"$BIN/npfd" --config /dev/null --foreground -q --socket "$NPF_SOCKET" \
		--bpffs /sys/fs/bpf/npf-bench-$$ --ws-dir "$dir/ws" 2>"$dir/npfd.log" &
	npfd=$!
	i=0
	until [ -S "$NPF_SOCKET" ]; do
		i=$((i + 1))
		[ $i -lt 400 ] || { echo "bench: npfd did not start" >&2; cat "$dir/npfd.log" >&2; exit 1; }
		sleep 0.05
	done
}

t0=$(date +%s)
fails=0
echo "$runs" >"$dir/runs"
while IFS=: read -r name args; do
	[ -n "$name" ] || continue
	if [ "$name" != observe_overhead ] && [ ! -S "$NPF_SOCKET" ]; then start_npfd; fi
	load0=$(cat /proc/loadavg)
	echo "== $name ($args) load: $load0" | tee -a "$out/tables.txt"
	s=$(date +%s)
	# One run gives both: the table on stdout, the JSON rows in $dir/rows.jsonl.
	: >"$dir/rows.jsonl"
	# shellcheck disable=SC2086
	{
		NPF_BENCH_JSON="$dir/rows.jsonl" "$BIN/npf-bench-$name" $args 2>&1
		echo $? >"$dir/rc"
	} | tee -a "$out/tables.txt"
	load1=$(cat /proc/loadavg)
	echo "   load at the end: $load1" | tee -a "$out/tables.txt"
	if ! jq -c --arg s "$load0" --arg e "$load1" '. + {load_start: $s, load_end: $e}' \
		"$dir/rows.jsonl" >>"$out/results.jsonl"; then
		echo "bench: $name printed rows that are not JSON (see $out/tables.txt)" | tee -a "$out/tables.txt"
		fails=$((fails + 1))
	fi
	if [ "$(cat "$dir/rc")" -ne 0 ]; then
		echo "bench: $name failed (exit $(cat "$dir/rc"))" | tee -a "$out/tables.txt"
		fails=$((fails + 1))
	fi
	echo "   ($(($(date +%s) - s)) s)"
	echo
done <"$dir/runs"

# Plots: CDFs of the fault service latencies (bench_write_cdf data files
# named GROUP-CURVE.dat), one PNG per group.
plots="fault_latency-4KiB:Device fault service latency, 4 KiB message
fault_latency-4MiB:Device fault service latency, 4 MiB message
nic_fault-sleep:NIC 4 KiB fault, raised to QP resumed (poster sleeps on the CQ)
nic_fault-spin:NIC 4 KiB fault, raised to QP resumed (poster spins on the CQ)"
if command -v gnuplot >/dev/null; then
	echo "$plots" >"$dir/plots"
	while IFS=: read -r group title; do
		set -- "$out"/"$group"-*.dat
		[ -e "$1" ] || continue
		plot=""
		for f in "$@"; do
			t=${f##*/"$group"-}
			t=${t%.dat}
			plot="$plot${plot:+, }'$f' using (\$1/1000):2 with lines lw 2 title '$t'"
		done
		gnuplot <<EOF
set terminal pngcairo size 1000,600 noenhanced font 'sans,11'
set output '$out/$group.png'
set title '$title (CDF; baselines measured in the same run)'
set xlabel 'latency (us, log scale)'
set ylabel 'fraction of samples'
set logscale x
set key right bottom
set grid
plot $plot
EOF
		echo "plot: $out/$group.png"
	done <"$dir/plots"
	# kv_hotswap: hits per second over time, seed 000 Fig. 7's three panels
	# (npf, static, both instances together) and npf's resident memory.
	d="$out/kv_hotswap.dat"
	if [ -e "$d" ] && echo "$runs" | grep -q "^kv_hotswap:"; then
		swap=$(sed -n 's/^# swap_s //p' "$d")
		mem=$(sed -n 's/^# memory_mib \([0-9]*\).*/\1/p' "$d")
		gnuplot <<EOF
set terminal pngcairo size 1000,1200 noenhanced font 'sans,11'
set output '$out/kv_hotswap.png'
set multiplot layout 4,1 title 'Hot sets swap at ${swap} s: two key-value instances sharing ${mem} MiB (seed 000 Fig. 7 shape)'
set xlabel 'time (s)'
set grid
set key outside right
set lmargin 10
set rmargin 22
set arrow 1 from $swap, graph 0 to $swap, graph 1 nohead dashtype 2
set ylabel 'hits/s'
set title '(a) npf: one budget for both'
plot '$d' using 1:2 with lines lw 2 title 'A: small, large', '' using 1:3 with lines lw 2 title 'B: large, small'
set title '(b) static: half of it pinned each'
plot '$d' using 1:4 with lines lw 2 title 'A', '' using 1:5 with lines lw 2 title 'B'
set title '(c) both instances together'
plot '$d' using 1:6 with lines lw 2 title 'npf', '' using 1:7 with lines lw 2 title 'static'
set title '(d) npf: resident memory per instance (npfd counts)'
set ylabel 'MiB'
plot '$d' using 1:8 with lines lw 2 title 'A', '' using 1:9 with lines lw 2 title 'B', $mem with lines dashtype 3 title 'budget'
unset multiplot
EOF
		echo "plot: $out/kv_hotswap.png"
	fi
else
	echo "bench: gnuplot is missing (make installs gnuplot-nox): no plots"
fi
run_row end ",\"seconds\":$(($(date +%s) - t0)),\"failed\":$fails"
readme=
[ "${NPF_BENCH_README:-1}" = 0 ] || readme="--readme bench/README.md"
# shellcheck disable=SC2086
python3 scripts/bench-tables.py "$out/results.jsonl" --out "$out/tables.md" $readme ||
	fails=$((fails + 1))
echo "results: $out/results.jsonl, tables: $out/tables.txt, $out/tables.md${readme:+ and bench/README.md} ($(($(date +%s) - t0)) s)"
[ "$fails" -eq 0 ] || { echo "bench: $fails benchmark(s) failed" >&2; exit 1; }
