#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# npfctl policy: load (global and per region), list/show in text and JSON,
# replace, unload, the kill switch, and the errors a user meets (file not
# found, no such policy, bad arguments) with their exit codes.
set -u
[ "$(id -u)" -eq 0 ] || { echo "needs root (npfd loads BPF)"; exit 77; }
command -v jq >/dev/null || { echo "jq is missing (make installs it)"; exit 77; }
BIN=${NPF_BIN:-build/bin}
POL=$BIN/../policies
dir=$(mktemp -d /tmp/npf-test-XXXXXX)
export NPF_SOCKET="$dir/npfd.sock"
fail() { echo "FAIL: $*"; echo "--- npfd log:"; cat "$dir/npfd.log"; exit 1; }
cleanup() {
	rm -f "$dir/hold"
	[ -n "${wl:-}" ] && wait "$wl" 2>/dev/null
	[ -n "${npfd:-}" ] && kill "$npfd" 2>/dev/null && wait "$npfd" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
"$BIN/npfd" --config /dev/null --foreground --socket "$NPF_SOCKET" --bpffs /sys/fs/bpf/npf-test-pol-$$ \
	--ws-dir "$dir/ws" 2>"$dir/npfd.log" &
npfd=$!
i=0; until [ -S "$NPF_SOCKET" ]; do i=$((i+1)); [ $i -lt 400 ] || fail "npfd did not start"; sleep 0.05; done
ctl() { "$BIN/npfctl" "$@"; }

ctl policy load "$POL/seq.bpf.o" >"$dir/out" || fail "load seq exited $?"
grep -q "global" "$dir/out" || fail "load did not show the slot: $(cat $dir/out)"
[ "$(ctl -j policy list | jq -r '.[0].name')" = seq ] || fail "policy list -j does not show seq"

# A workload holding a region, to load a per-region policy on.
"$BIN/npf-workload" --dir "$dir" --size 16 --touches 200 --threads 1 --hold "$dir/hold" >"$dir/wl.log" 2>&1 &
wl=$!
i=0; until [ -e "$dir/hold" ]; do i=$((i+1)); [ $i -lt 600 ] || fail "workload did not finish"; sleep 0.05; done
rid=$(ctl -j region list | jq '.[0].id')
ctl policy load "$POL/pia.bpf.o" region "$rid" name bulk >/dev/null || fail "per-region load exited $?"
[ "$(ctl -j policy show bulk | jq ".region")" = "$rid" ] || fail "bulk is not on region $rid"
[ "$(ctl -j policy list | jq length)" = 2 ] || fail "want 2 policies"
dec=$(ctl -j policy show seq | jq '.invocations')
[ "$dec" -gt 0 ] || fail "seq made no decisions for the workload's faults"

# Replace by name: still two policies, bulk now from exact.
ctl policy load "$POL/exact.bpf.o" region "$rid" name bulk >/dev/null || fail "replace exited $?"
[ "$(ctl -j policy list | jq length)" = 2 ] || fail "replacing by name changed the count"

ctl policy disable >/dev/null || fail "disable exited $?"
ctl policy list | grep -q DISABLED || fail "policy list does not say policies are disabled"
ctl policy enable >/dev/null || fail "enable exited $?"

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

rm -f "$dir/hold"
wait $wl || fail "workload failed: $(cat $dir/wl.log)"
wl=
echo ok
