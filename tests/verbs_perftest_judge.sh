#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# bench/perftest_odp.sh's judge on made-up rounds (--data=FILE: no
# measurement): per-round later-pass ratios all within 5% of pinned give
# "met", all beyond give "not met", straddling 1.05 gives "inconclusive";
# the interval is the rounds' minimum and maximum (6 rounds); bandwidth rows
# (ib_write_bw after its warm-up) are judged the same way, on pinned/odp
# bandwidth; the first pass is reported with its page requests; a run's
# retransmission timeouts and ib_write_lat's t_min (optional last columns)
# are reported, t_min judged like t_typical.
set -u
command -v jq >/dev/null || { echo "jq is missing (make installs it)"; exit 77; }
command -v python3 >/dev/null || { echo "python3 is missing"; exit 77; }
d=$(mktemp -d /tmp/npf-test-XXXXXX)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; cat "$d/rows" 2>/dev/null; exit 1; }

judge() { # NAME RATIO*6: made-up rounds for 4 KiB, ib_write_lat odp/pinned = RATIO
	name=$1; shift
	: >"$d/data"
	r=0
	for x in "$@"; do
		echo "lat 4096 $r pinned 100 3000 0 $r 80" >>"$d/data"
		echo "lat 4096 $r odp $(awk "BEGIN { print 100 * $x }") 9000 4 $((r + 10)) 120" >>"$d/data"
		echo "bw 4096 $r pinned 50 - 0" >>"$d/data"
		echo "bw 4096 $r odp 40 - 4" >>"$d/data"
		r=$((r + 1))
	done
	sh bench/perftest_odp.sh --rounds=6 --data="$d/data" --json >"$d/rows" 2>"$d/table" ||
		fail "$name: the judge failed: $(cat "$d/table")"
	lat='select(.bench == "perftest_odp_target" and .judged == "yes" and (.target | test("t_typical")))'
	v=$(jq -r "$lat | .verdict" "$d/rows")
	lo=$(jq -r "$lat | .ratio_lo" "$d/rows")
	hi=$(jq -r "$lat | .ratio_hi" "$d/rows")
	echo "$name: verdict $v [$lo, $hi]"
}

judge within 1.00 1.01 1.02 1.03 1.00 1.04
[ "$v" = met ] || fail "ratios 1.00-1.04: verdict $v, want met"
awk "BEGIN { exit !($lo == 1.0 && $hi == 1.04) }" || fail "ratios 1.00-1.04: interval [$lo, $hi], want [1, 1.04]"
bw=$(jq -r 'select(.bench == "perftest_odp_target" and (.target | test("ib_write_bw"))) | "\(.ratio) \(.verdict) \(.judged)"' "$d/rows")
[ "$bw" = "1.25 not_met yes" ] || fail "bandwidth 50 vs 40 MB/s: row '$bw', want ratio 1.25 not_met, judged"
tmin=$(jq -r 'select(.bench == "perftest_odp_target" and (.target | test("t_min"))) | "\(.ratio) \(.verdict) \(.judged)"' "$d/rows")
[ "$tmin" = "1.5 not_met yes" ] || fail "t_min 80 vs 120 us: row '$tmin', want ratio 1.5 not_met, judged"
to=$(jq -r 'select(.bench == "perftest_odp" and (.test | test("t_typical"))) | "\(.pinned_timeouts) \(.odp_timeouts)"' "$d/rows")
[ "$to" = "2.5 12.5" ] || fail "timeouts 0-5 pinned, 10-15 odp: medians '$to', want 2.5 12.5"
tob=$(jq -r 'select(.bench == "perftest_odp" and (.test | test("ib_write_bw"))) | .pinned_timeouts' "$d/rows")
[ "$tob" = null ] || fail "bandwidth rounds without a timeouts column: '$tob', want none reported"
first=$(jq -r 'select(.bench == "perftest_odp_first") | "\(.pinned_us) \(.odp_us) \(.odp_page_requests) \(.pinned_page_requests)"' "$d/rows")
[ "$first" = "3000 9000 4 0" ] || fail "first pass: '$first', want 3000 us pinned, 9000 us odp, 4 page requests, 0 pinned"

judge beyond 1.10 1.20 1.15 1.30 1.12 1.08
[ "$v" = not_met ] || fail "ratios 1.08-1.30: verdict $v, want not_met"

judge straddling 0.90 1.00 1.20 1.02 0.95 1.10
[ "$v" = inconclusive ] || fail "ratios 0.90-1.20: verdict $v, want inconclusive"
echo ok
