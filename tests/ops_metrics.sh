#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Metrics: 'npfctl stats --format prometheus' parsed by the Prometheus
# project's own Python parser, every number checked against 'npfctl -j stats'
# and '-j status' taken at the same moment (the workload is holding still);
# 'npfctl top --once' prints one frame, as text and as JSON.
set -u
. "$(dirname "$0")/lib/npfd.sh"
PY=/usr/bin/python3
$PY -c 'import prometheus_client' 2>/dev/null ||
	{ echo "python3-prometheus-client is missing (make installs it)"; exit 77; }
npfd_start
workload_hold --size 16 --touches 300 --threads 1

"$BIN/npfctl" stats --format prometheus >"$dir/prom" || fail "stats --format prometheus exited $?"
"$BIN/npfctl" -j stats >"$dir/stats.json" || fail "-j stats exited $?"
"$BIN/npfctl" -j status >"$dir/status.json" || fail "-j status exited $?"
"$BIN/npfctl" -j region list >"$dir/regions.json" || fail "-j region list exited $?"

$PY - "$dir" <<'PYEOF' || fail "the Prometheus output does not match npfctl -j"
import json, math, sys
from prometheus_client.parser import text_string_to_metric_families

d = sys.argv[1]
fams = {f.name: f for f in text_string_to_metric_families(open(d + "/prom").read())}
stats = json.load(open(d + "/stats.json"))
status = json.load(open(d + "/status.json"))
names = {r["id"]: r["name"] for r in json.load(open(d + "/regions.json"))}
bad = []

def check(what, got, want):
    if not math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-9):
        bad.append("%s: prometheus %s, json %s" % (what, got, want))

def one(name):
    f = fams.get(name)
    if f is None or len(f.samples) != 1:
        bad.append("%s: missing or not one sample" % name)
        return 0
    return f.samples[0].value

# The parser drops _total from counter family names.
for key, fam in [("clients", "npf_clients"), ("regions", "npf_regions"),
                 ("faults_resolved", "npf_faults_resolved"), ("batches", "npf_batches"),
                 ("iommu_faults", "npf_iommu_faults"), ("records_dropped", "npf_records_dropped"),
                 ("bad_messages", "npf_bad_messages")]:
    check(fam, one(fam), status[key])
if fams["npf_faults_resolved"].type != "counter":
    bad.append("npf_faults_resolved is not a counter")

def region_samples(fam, suffix=""):
    out = {}
    for s in fams[fam].samples:
        if s.name == fam + suffix:
            out.setdefault(int(s.labels["region"]), []).append(s)
    return out

if len(stats) != 2:
    bad.append("want 2 regions in -j stats, got %d" % len(stats))
counters = ["cpu_faults", "device_faults", "uffd_faults", "pages_zeroed", "pages_copied",
            "bytes_read", "batches", "mm_events"]
for r in stats:
    rid = r["id"]
    for c in counters:
        fam = "npf_region_" + c
        ss = region_samples(fam, "_total").get(rid, [])
        if len(ss) != 1:
            bad.append("%s{region=%d}: %d samples" % (fam, rid, len(ss)))
            continue
        check("%s{region=%d}" % (fam, rid), ss[0].value, r[c])
        if ss[0].labels["name"] != names[rid] or int(ss[0].labels["pid"]) != r["pid"]:
            bad.append("%s{region=%d}: labels %s" % (fam, rid, ss[0].labels))
    check("length{region=%d}" % rid,
          region_samples("npf_region_length_bytes")[rid][0].value, r["length"])
    lat = r["latency"]
    h = "npf_region_fault_latency_seconds"
    if fams[h].type != "histogram":
        bad.append(h + " is not a histogram")
    check("%s_count{region=%d}" % (h, rid), region_samples(h, "_count")[rid][0].value, lat["samples"])
    check("%s_sum{region=%d}" % (h, rid), region_samples(h, "_sum")[rid][0].value * 1e9, lat["sum_ns"])
    buckets = {s.labels["le"]: s.value for s in region_samples(h, "_bucket")[rid]}
    for b in lat["histogram"]:
        # JSON buckets are [lo, hi) ns; Prometheus buckets are cumulative, le = hi in s.
        le = [k for k in buckets if k != "+Inf" and math.isclose(float(k) * 1e9, b["hi_ns"], rel_tol=1e-6)]
        if len(le) != 1:
            bad.append("no bucket le=%g s" % (b["hi_ns"] / 1e9))
            continue
        below = [v for k, v in buckets.items() if k != "+Inf" and float(k) * 1e9 < b["lo_ns"] * 1.000001]
        prev = max(below) if below else 0
        check("bucket %s{region=%d}" % (le[0], rid), buckets[le[0]] - prev, b["count"])
    check("+Inf{region=%d}" % rid, buckets["+Inf"], lat["samples"])
    if lat["samples"] == 0:
        bad.append("region %d: no latency samples after 300 touches" % rid)

for b in bad:
    print("mismatch:", b)
print("prometheus: %d families parsed, %d regions checked, %d mismatches" % (len(fams), len(stats), len(bad)))
sys.exit(1 if bad else 0)
PYEOF

# top: one frame when not on a terminal, and with --once; JSON too.
"$BIN/npfctl" top --once >"$dir/top" || fail "top --once exited $?"
grep -q "workload-file" "$dir/top" && grep -q "CPU/s" "$dir/top" || fail "top frame: $(cat "$dir/top")"
"$BIN/npfctl" -j top | jq -e '.per_region | length == 2' >/dev/null || fail "-j top is not 2 regions"
"$BIN/npfctl" stats --format nonsense >/dev/null 2>&1; [ $? -eq 2 ] || fail "--format nonsense is not a usage error"
"$BIN/npfctl" status --format prometheus >/dev/null 2>&1; [ $? -eq 2 ] || fail "--format prometheus for status is not a usage error"
cat "$dir/top"

workload_release
echo ok
