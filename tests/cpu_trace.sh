#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The CPU fault tracepoint program is attached only while something needs
# it (it costs every page fault on the machine): not by default, while a
# fault policy is loaded, and with trace-cpu-faults (also on reload).
# CPU faults are served through userfaultfd either way.
set -u
. "$(dirname "$0")/lib/npfd.sh"
POL=$BIN/../policies
: >"$dir/npfd.conf"
npfd_start --config "$dir/npfd.conf"

# BPF's count and npfd's, summed over the regions of the workload that holds them now.
counts() {
	bpf=$(bpftool -j map dump pinned "$pins/npf_region_stats" |
		jq '[.[].formatted.value | select(.region_id != 0) | .cpu_faults] | add // 0')
	uffd=$("$BIN/npfctl" -j stats | jq '[.[].uffd_faults] | add // 0')
}

# attached-or-not WHAT: a workload's faults, and whether BPF saw them
run() {
	workload_hold --size 8 --touches 300 --threads 1
	counts
	echo "$1: BPF counted $bpf CPU faults, npfd served $uffd"
	[ "$uffd" -gt 0 ] || fail "$1: npfd served no CPU fault"
	workload_release
}

run "default"
[ "$bpf" -eq 0 ] || fail "the tracepoint program ran with no policy loaded ($bpf faults counted)"
grep -q "tracepoint attached" "$dir/npfd.log" && fail "npfd attached the tracepoint with no policy"

"$BIN/npfctl" policy load "$POL/seq.bpf.o" >/dev/null || fail "policy load exited $?"
run "policy loaded"
[ "$bpf" -gt 0 ] || fail "a policy is loaded but BPF saw no CPU fault"

"$BIN/npfctl" policy unload seq >/dev/null || fail "policy unload exited $?"
run "policy unloaded"
[ "$bpf" -eq 0 ] || fail "the tracepoint program still ran after the last policy went ($bpf)"

echo "trace-cpu-faults = yes" >"$dir/npfd.conf"
kill -HUP "$npfd"
i=0
until grep -q "tracepoint attached (--trace-cpu-faults)" "$dir/npfd.log"; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "reload did not attach the tracepoint"
	sleep 0.05
done
run "trace-cpu-faults = yes"
[ "$bpf" -gt 0 ] || fail "trace-cpu-faults is on but BPF saw no CPU fault"
[ "$bpf" -ge "$uffd" ] || fail "BPF saw $bpf CPU faults, fewer than the $uffd npfd served"
echo ok
