#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# npfctl and bpftool against a live npfd with a real workload holding two
# regions: text and JSON output, exit codes, and the pinned maps' BTF names.
set -u
[ "$(id -u)" -eq 0 ] || { echo "needs root (npfd loads BPF)"; exit 77; }
command -v jq >/dev/null || { echo "jq is missing (make installs it)"; exit 77; }
BIN=${NPF_BIN:-build/bin}
dir=$(mktemp -d /tmp/npf-test-XXXXXX)
pins=/sys/fs/bpf/npf-test-cli-$$
export NPF_SOCKET="$dir/npfd.sock"
fail() { echo "FAIL: $*"; echo "--- npfd log:"; cat "$dir/npfd.log"; exit 1; }
cleanup() {
	rm -f "$dir/hold"
	[ -n "${wl:-}" ] && wait "$wl" 2>/dev/null
	[ -n "${npfd:-}" ] && kill "$npfd" 2>/dev/null && wait "$npfd" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

"$BIN/npfd" --config /dev/null --foreground --socket "$NPF_SOCKET" --bpffs "$pins" 2>"$dir/npfd.log" &
npfd=$!
i=0; until [ -S "$NPF_SOCKET" ]; do i=$((i+1)); [ $i -lt 400 ] || fail "npfd did not start"; sleep 0.05; done

"$BIN/npf-workload" --dir "$dir" --size 64 --touches 500 --threads 2 --hold "$dir/hold" >"$dir/wl.log" 2>&1 &
wl=$!
i=0; until [ -e "$dir/hold" ]; do i=$((i+1)); [ $i -lt 600 ] || fail "workload did not finish"; kill -0 $wl 2>/dev/null || fail "workload died: $(cat $dir/wl.log)"; sleep 0.05; done

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

rm -f "$dir/hold"
wait $wl || fail "workload failed: $(cat $dir/wl.log)"
wl=
echo ok
