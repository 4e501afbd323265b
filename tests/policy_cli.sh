#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# npfctl policy: load (global and per region), list/show in text and JSON,
# replace, unload, the kill switch (disabled, BPF calls no policy: a
# workload's faults add no decision to seq's count; enabled, they do again),
# and the errors a user meets (file not found, no such policy, bad arguments)
# with their exit codes.
set -u
. "$(dirname "$0")/lib/npfd.sh"
POL=$BIN/../policies
npfd_start --ws-dir "$dir/ws"
ctl() { "$BIN/npfctl" "$@"; }

ctl policy load "$POL/seq.bpf.o" >"$dir/out" || fail "load seq exited $?"
grep -q "global" "$dir/out" || fail "load did not show the slot: $(cat $dir/out)"
[ "$(ctl -j policy list | jq -r '.[0].name')" = seq ] || fail "policy list -j does not show seq"

# A workload holding a region, to load a per-region policy on.
workload_hold --size 16 --touches 200 --threads 1
rid=$(ctl -j region list | jq '.[0].id')
ctl policy load "$POL/pia.bpf.o" region "$rid" name bulk >/dev/null || fail "per-region load exited $?"
[ "$(ctl -j policy show bulk | jq ".region")" = "$rid" ] || fail "bulk is not on region $rid"
[ "$(ctl -j policy list | jq length)" = 2 ] || fail "want 2 policies"
dec=$(ctl -j policy show seq | jq '.invocations')
[ "$dec" -gt 0 ] || fail "seq made no decisions for the workload's faults"

# Replace by name: still two policies, bulk now from exact.
ctl policy load "$POL/exact.bpf.o" region "$rid" name bulk >/dev/null || fail "replace exited $?"
[ "$(ctl -j policy list | jq length)" = 2 ] || fail "replacing by name changed the count"

# The kill switch: a workload run while it is off must not reach seq.
ws() { "$BIN/npf-workload" --dir "$dir" --size 4 --touches 100 --threads 1 >"$dir/wl2.log" 2>&1 ||
	fail "workload failed: $(cat "$dir/wl2.log")"; }
ctl policy disable >/dev/null || fail "disable exited $?"
ctl policy list | grep -q DISABLED || fail "policy list does not say policies are disabled"
before=$(ctl -j policy show seq | jq '.invocations')
ws
after=$(ctl -j policy show seq | jq '.invocations')
[ "$after" = "$before" ] || fail "seq made $((after - before)) decisions while policies were disabled"
ctl policy enable >/dev/null || fail "enable exited $?"
ws
again=$(ctl -j policy show seq | jq '.invocations')
[ "$again" -gt "$after" ] || fail "seq made no decision after policies were enabled again"
echo "kill switch: seq decisions $before -> $after while disabled -> $again enabled"

ctl policy unload bulk >/dev/null || fail "unload exited $?"
ctl policy unload bulk >/dev/null 2>"$dir/err"; rc=$?
[ $rc -eq 1 ] && grep -q "no policy named" "$dir/err" || fail "unloading twice: exit $rc, $(cat $dir/err)"
ctl policy load "$dir/missing.o" >/dev/null 2>"$dir/err"; rc=$?
[ $rc -eq 1 ] && grep -q "No such file" "$dir/err" || fail "missing file: exit $rc, $(cat $dir/err)"
ctl policy load "$POL/seq.bpf.o" region 0 >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "region 0: exit $rc, want 2 (usage)"
ctl policy load "$POL/seq.bpf.o" region 999999 >/dev/null 2>"$dir/err"; rc=$?
[ $rc -eq 1 ] && grep -q "no region" "$dir/err" || fail "unknown region: exit $rc, $(cat $dir/err)"
ctl -j policy show nothing >/dev/null 2>"$dir/err"; rc=$?
[ $rc -eq 1 ] && jq -e .error "$dir/err" >/dev/null || fail "show of a missing policy: exit $rc, $(cat $dir/err)"

workload_release
echo ok
