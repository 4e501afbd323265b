#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# npfctl doctor and npfd --check: one probe table, one report. Every feature
# gets a verdict; on a kernel npfd runs on (this test's precondition: root)
# nothing required is missing; the JSON is one document with the same rows;
# without privilege a probe says "unknown", never "missing".
set -u
[ "$(id -u)" -eq 0 ] || { echo "needs root (the probes load BPF programs)"; exit 77; }
command -v jq >/dev/null || { echo "jq is missing (make installs it)"; exit 77; }
BIN=${NPF_BIN:-build/bin}
dir=$(mktemp -d /tmp/npf-test-doctor-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$BIN/npfctl" doctor >"$dir/doctor" || fail "npfctl doctor exited $?: $(cat "$dir/doctor")"
"$BIN/npfd" --check >"$dir/check" || fail "npfd --check exited $?: $(cat "$dir/check")"
# The same report, but for the measured uprobe costs: their rows, and the
# summary's heading, which says whether anything (that verdict too) is missing.
sum='/nop5/d; /^What this disables:$/d; /^Everything npf uses works\.$/d'
sed "$sum" "$dir/doctor" >"$dir/a"; sed "$sum" "$dir/check" >"$dir/b"
cmp -s "$dir/a" "$dir/b" || fail "npfctl doctor and npfd --check differ: $(diff "$dir/a" "$dir/b")"
for f in EVENT_REMAP "POLL_ADD multishot" READ_FIXED "map ringbuf" "prog tracepoint" \
	 "exceptions:page_fault_user" fentry "uprobe on nop5 optimized"; do
	grep -q "^  $f  *\(ok\|missing\|refused\|unknown\) " "$dir/doctor" || fail "no verdict for '$f'"
done

"$BIN/npfctl" -j doctor >"$dir/json" || fail "npfctl -j doctor exited $?"
jq -e '.missing_required == 0' "$dir/json" >/dev/null || fail "JSON: required features missing"
n_json=$(jq '.features | length' "$dir/json")
n_text=$(grep -c '^  [^ ].*  \(ok\|missing\|refused\|unknown\) ' "$dir/doctor")
[ "$n_json" = "$n_text" ] || fail "JSON has $n_json features, text $n_text"
jq -e '[.features[] | select(.need == "required" and .result != "ok")] | length == 0' "$dir/json" >/dev/null ||
	fail "a required feature is not ok: $(jq -c '.features[] | select(.result != "ok")' "$dir/json")"

if command -v setpriv >/dev/null; then
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$BIN/npfctl" -j doctor >"$dir/nobody" 2>&1
	jq -e '[.features[] | select(.result == "missing")] | length == 0' "$dir/nobody" >/dev/null ||
		fail "unprivileged doctor calls features missing: $(jq -c '.features[] | select(.result == "missing") | .name' "$dir/nobody")"
fi
cat "$dir/doctor"
echo ok
