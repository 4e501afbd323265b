#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Budgets through npfctl against a live npfd and a real workload: region set
# ID budget SIZE sets it (and none removes it); the budget, its watermarks
# (set apart from it: 95% and 80%) and what eviction did show alike in
# npfctl stats (text and JSON), its Prometheus output (one budget line per
# region, the right one for each) and the pinned map npf_budget (bpftool,
# with BTF names); a bad SIZE is a usage error (2), a budget npfd refuses
# fails (1) with npfd's reason; the workload's pages, evicted under it, read
# back right (npf-workload checks every word it touches). Each output was
# broken in turn (a field shown in place of another, the text only, the
# JSON only, the map left unpinned): scripts/mutate.sh lists the breaks.
set -u
. "$(dirname "$0")/lib/npfd.sh"
# Watermarks apart from the budget (95% and 80% of 256 pages: 243 and 204),
# so that an output showing one in place of another is seen.
npfd_start --budget-high-pct 95 --budget-low-pct 80
workload_hold --size 16 --touches 4000 --threads 1
anon=$("$BIN/npfctl" -j region list | jq '.[] | select(.name == "workload-anon") | .id')
[ -n "$anon" ] || fail "no workload-anon region: $("$BIN/npfctl" region list)"
nregions=$("$BIN/npfctl" -j region list | jq length)
[ "$nregions" -ge 2 ] || fail "the workload registered $nregions regions, want its file one too"

"$BIN/npfctl" region set "$anon" budget 1M >"$dir/out" || fail "region set exited $?: $(cat "$dir/out")"
grep -q "budget 256 pages (high 243, low 204)" "$dir/out" || fail "region set printed: $(cat "$dir/out")"

# the workload's region is 16 MiB: wait for npfd to bring it down to the low watermark
i=0
until "$BIN/npfctl" -j stats show region "$anon" | jq -e '.[0].budget | .resident_pages <= .low_pages and .evicted_pages > 0' >/dev/null; do
	i=$((i + 1)); [ $i -lt 200 ] || fail "region $anon not evicted to its low watermark: $("$BIN/npfctl" stats show region "$anon")"
	sleep 0.05
done
sleep 0.2 # the last batch ends; the workload holds still: nothing changes now

# Every output shows the same budget, watermarks and eviction counts.
"$BIN/npfctl" -j stats show region "$anon" >"$dir/stats.json" || fail "stats -j exited $?"
jq -e ".[0].budget | .budget_pages == 256 and .high_pages == 243 and .low_pages == 204" "$dir/stats.json" >/dev/null ||
	fail "stats -j budget: $(cat "$dir/stats.json")"
evicted=$(jq '.[0].budget.evicted_pages' "$dir/stats.json")
resident=$(jq '.[0].budget.resident_pages' "$dir/stats.json")
[ "$evicted" -gt 0 ] && [ "$resident" -le 204 ] || fail "stats -j: evicted $evicted, resident $resident"

"$BIN/npfctl" stats show region "$anon" >"$dir/stats.txt" || fail "stats exited $?"
grep -q "budget   256 pages (high 243, low 204)  resident $resident$" "$dir/stats.txt" ||
	fail "stats text budget line, want 256 (high 243, low 204) resident $resident: $(grep budget "$dir/stats.txt")"
grep -q "^  evicted  $evicted " "$dir/stats.txt" ||
	fail "stats text evicted, want $evicted: $(grep evicted "$dir/stats.txt")"

"$BIN/npfctl" stats --format prometheus >"$dir/prom" || fail "prometheus output exited $?"
[ "$(grep -c "^npf_region_budget_pages{region=\"$anon\"," "$dir/prom")" -eq 1 ] &&
	grep -q "^npf_region_budget_pages{region=\"$anon\",.*} 256$" "$dir/prom" ||
	fail "want one npf_region_budget_pages 256 for region $anon: $(grep budget_pages "$dir/prom")"
grep "^npf_region_budget_pages{" "$dir/prom" | grep -v "region=\"$anon\"," | grep -qv " 0$" &&
	fail "a region without a budget shows one: $(grep budget_pages "$dir/prom")"
[ "$(grep -c "^npf_region_budget_pages{" "$dir/prom")" -eq "$nregions" ] ||
	fail "want a budget line for each of $nregions regions: $(grep budget_pages "$dir/prom")"
grep -q "^npf_region_evicted_pages_total{region=\"$anon\",.*} $evicted$" "$dir/prom" ||
	fail "want npf_region_evicted_pages_total $evicted for region $anon: $(grep evicted_pages "$dir/prom")"
grep -q "^npf_region_resident_pages{region=\"$anon\",.*} $resident$" "$dir/prom" ||
	fail "want npf_region_resident_pages $resident for region $anon: $(grep resident_pages "$dir/prom")"

bpftool -j map dump pinned "$pins/npf_budget" >"$dir/map.json" || fail "bpftool cannot dump $pins/npf_budget"
jq -e "[.[].formatted.value | select(.region_id == $anon) | [.budget_pages, .high_pages, .low_pages, .evicted_pages, .resident_pages]] == [[256, 243, 204, $evicted, $resident]]" "$dir/map.json" >/dev/null ||
	fail "pinned npf_budget, want [256, 243, 204, $evicted, $resident]: $(jq -c "[.[].formatted.value | select(.region_id == $anon)]" "$dir/map.json")"

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
