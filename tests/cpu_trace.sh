#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The CPU fault tracepoint program (it costs every page fault on the
# machine) is attached only with trace-cpu-faults (also on reload): not by
# default, and not while a fault policy is loaded -- npfd runs a policy
# itself for the CPU faults it reads from a userfaultfd, so loading one
# attaches nothing machine-wide, yet the policy decides (its invocations
# count them). CPU faults are served through userfaultfd either way.
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

# BPF links npfd holds that attach a program to a perf event (tracepoints, uprobes).
perf_links() {
	n=0
	for f in /proc/"$npfd"/fdinfo/*; do
		grep -q "^link_type:[[:space:]]*perf" "$f" 2>/dev/null && n=$((n + 1))
	done
	echo $n
}

# attached-or-not WHAT: a workload's faults, and whether BPF saw them
run() {
	workload_hold --size 8 --touches 300 --threads 1
	counts
	echo "$1: BPF counted $bpf CPU faults, npfd served $uffd"
	[ "$uffd" -gt 0 ] || fail "$1: npfd served no CPU fault"
	workload_release
}

links0=$(perf_links)
run "default"
[ "$bpf" -eq 0 ] || fail "the tracepoint program ran with no policy loaded ($bpf faults counted)"
grep -q "tracepoint attached" "$dir/npfd.log" && fail "npfd attached the tracepoint with no policy"

"$BIN/npfctl" policy load "$POL/seq.bpf.o" >/dev/null || fail "policy load exited $?"
[ "$(perf_links)" -eq "$links0" ] ||
	fail "loading a policy attached something: npfd holds $(perf_links) perf links, $links0 before"
run "policy loaded"
[ "$bpf" -eq 0 ] || fail "a policy is loaded and the tracepoint program ran ($bpf faults counted)"
grep -q "tracepoint attached" "$dir/npfd.log" && fail "npfd attached the tracepoint for a policy"
inv=$("$BIN/npfctl" -j policy list | jq '[.[] | select(.name == "seq") | .invocations] | add // 0')
echo "policy loaded: seq decided $inv CPU faults"
[ "$inv" -gt 0 ] || fail "the policy decided no CPU fault: npfd did not run it"

"$BIN/npfctl" policy unload seq >/dev/null || fail "policy unload exited $?"
run "policy unloaded"
[ "$bpf" -eq 0 ] || fail "the tracepoint program ran after the policy went ($bpf)"

echo "trace-cpu-faults = yes" >"$dir/npfd.conf"
kill -HUP "$npfd"
i=0
until grep -q "tracepoint attached (--trace-cpu-faults)" "$dir/npfd.log"; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "reload did not attach the tracepoint"
	sleep 0.05
done
[ "$(perf_links)" -eq $((links0 + 1)) ] ||
	fail "trace-cpu-faults: npfd holds $(perf_links) perf links, want $((links0 + 1))"
run "trace-cpu-faults = yes"
[ "$bpf" -gt 0 ] || fail "trace-cpu-faults is on but BPF saw no CPU fault"
[ "$bpf" -ge "$uffd" ] || fail "BPF saw $bpf CPU faults, fewer than the $uffd npfd served"
echo ok
