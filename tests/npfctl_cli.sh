#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# npfctl and bpftool against a live npfd with a real workload holding two
# regions: text and JSON output, exit codes, and the pinned maps' BTF names.
set -u
. "$(dirname "$0")/lib/npfd.sh"
npfd_start --trace-cpu-faults # the pinned map counts CPU faults with no policy loaded
workload_hold --size 64 --touches 500 --threads 2

# Text output.
"$BIN/npfctl" status >"$dir/out" || fail "npfctl status exited $?"
grep -qi "regions" "$dir/out" || fail "npfctl status does not mention regions: $(cat $dir/out)"
"$BIN/npfctl" region list >"$dir/out" || fail "npfctl region list exited $?"
grep -q "workload-file" "$dir/out" && grep -q "workload-anon" "$dir/out" || fail "region list lacks the regions: $(cat $dir/out)"

# JSON output: one document, numbers agree with what the workload did.
n=$("$BIN/npfctl" -j region list | jq 'length') || fail "region list -j is not JSON"
[ "$n" = 2 ] || fail "region list -j shows $n regions, want 2"
"$BIN/npfctl" -j stats >"$dir/stats.json" || fail "npfctl -j stats exited $?"
jq -e . "$dir/stats.json" >/dev/null || fail "stats -j is not JSON: $(cat $dir/stats.json)"
filled=$(jq '[.. | objects | select(has("pages_copied")) | .pages_copied + .pages_zeroed] | add' "$dir/stats.json")
[ "${filled:-0}" -gt 0 ] || fail "stats -j shows no filled pages: $(cat $dir/stats.json)"
"$BIN/npfctl" -j status | jq -e '.regions == 2' >/dev/null || fail "status -j does not show 2 regions"

# bpftool reads the pinned maps with field names (BTF).
bpftool -j map dump pinned "$pins/npf_region_stats" >"$dir/map.json" || fail "bpftool cannot dump $pins/npf_region_stats"
bcpu=$(jq '[.[].formatted.value | select(.region_id != 0) | .cpu_faults] | add' "$dir/map.json")
[ "${bcpu:-0}" -gt 0 ] || fail "pinned map shows no CPU faults"
bpftool map dump pinned "$pins/npf_info" | grep -q maps_version || fail "npf_info has no BTF field names"

# Errors: unknown object -> 2; npfd absent -> 1 with a hint; JSON errors on stderr.
"$BIN/npfctl" frobnicate >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "unknown object exited $rc, want 2"
NPF_SOCKET=$dir/nothing "$BIN/npfctl" -s "$dir/nothing" status >/dev/null 2>"$dir/err"; rc=$?
[ $rc -eq 1 ] || fail "npfd absent: exit $rc, want 1"
grep -q "npfd" "$dir/err" || fail "npfd absent: message does not say so: $(cat $dir/err)"
"$BIN/npfctl" -j -s "$dir/nothing" status >/dev/null 2>"$dir/err"
jq -e '.error' "$dir/err" >/dev/null || fail "JSON-mode error is not {\"error\": ...}: $(cat $dir/err)"
"$BIN/npfctl" stats show region 99999 >/dev/null 2>"$dir/err"; rc=$?
[ $rc -eq 1 ] || fail "stats of a missing region exited $rc, want 1"

workload_release
echo ok
