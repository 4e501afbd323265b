#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Budgets through npfctl against a live npfd and a real workload: region set
# ID budget SIZE sets it (and none removes it); the budget and what eviction
# did show in npfctl stats (text and JSON), its Prometheus output and the
# pinned map npf_budget (bpftool, with BTF names); a bad SIZE is a usage
# error (2), a budget npfd refuses fails (1) with npfd's reason; the
# workload's pages, evicted under it, read back right (npf-workload checks
# every word it touches).
set -u
. "$(dirname "$0")/lib/npfd.sh"
npfd_start
workload_hold --size 16 --touches 4000 --threads 1
anon=$("$BIN/npfctl" -j region list | jq '.[] | select(.name == "workload-anon") | .id')
[ -n "$anon" ] || fail "no workload-anon region: $("$BIN/npfctl" region list)"

"$BIN/npfctl" region set "$anon" budget 1M >"$dir/out" || fail "region set exited $?: $(cat "$dir/out")"
grep -q "budget 256 pages (high 256, low 230)" "$dir/out" || fail "region set printed: $(cat "$dir/out")"
"$BIN/npfctl" -j stats show region "$anon" >"$dir/stats.json" || fail "stats -j exited $?"
jq -e ".[0].budget.budget_pages == 256 and .[0].budget.low_pages == 230" "$dir/stats.json" >/dev/null ||
	fail "stats -j budget: $(cat "$dir/stats.json")"
"$BIN/npfctl" stats show region "$anon" | grep -q "budget   256 pages" || fail "stats text has no budget line"
"$BIN/npfctl" stats --format prometheus >"$dir/prom" || fail "prometheus output exited $?"
grep -q "^npf_region_budget_pages{region=\"$anon\",.*} 256$" "$dir/prom" ||
	fail "no npf_region_budget_pages 256 for region $anon: $(grep budget "$dir/prom")"
grep -q "^npf_region_evicted_pages_total{region=\"$anon\"" "$dir/prom" || fail "no eviction counter"
bpftool -j map dump pinned "$pins/npf_budget" >"$dir/map.json" || fail "bpftool cannot dump $pins/npf_budget"
jq -e "[.[].formatted.value | select(.region_id == $anon) | .budget_pages] == [256]" "$dir/map.json" >/dev/null ||
	fail "pinned npf_budget does not show the budget: $(cat "$dir/map.json" | head -c 600)"

# the workload's region is 16 MiB: wait for npfd to bring it down to the low watermark
i=0
until "$BIN/npfctl" -j stats show region "$anon" | jq -e '.[0].budget | .resident_pages <= .low_pages and .evicted_pages > 0' >/dev/null; do
	i=$((i + 1)); [ $i -lt 200 ] || fail "region $anon not evicted to its low watermark: $("$BIN/npfctl" stats show region "$anon")"
	sleep 0.05
done

# Usage errors (2) and npfd's refusals (1, with its reason).
"$BIN/npfctl" region set "$anon" budget 12Q >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "a bad SIZE exited $rc, want 2"
"$BIN/npfctl" region set x budget 1M >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "a bad ID exited $rc, want 2"
"$BIN/npfctl" region set "$anon" frob 1 >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "an unknown setting exited $rc, want 2"
"$BIN/npfctl" region set "$anon" budget 4097 >/dev/null 2>"$dir/err"; rc=$?
[ $rc -eq 1 ] || fail "a budget that is no page multiple exited $rc, want 1"
grep -q "multiple of the page size" "$dir/err" || fail "no reason given: $(cat "$dir/err")"

"$BIN/npfctl" region set "$anon" budget none >/dev/null || fail "budget none exited $?"
"$BIN/npfctl" -j stats show region "$anon" | jq -e '.[0].budget.budget_pages == 0' >/dev/null ||
	fail "budget none did not remove the budget"
workload_release
echo ok
