#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Device page requests are visible to operators: two processes with software
# NICs (npf-rdma) fault on never-touched, unpinned memory; npfctl device list
# shows the groups npfd answered, and the BPF uprobe's count in the pinned
# map (bpftool, field names from BTF) agrees with npfctl stats and with them.
set -u
. "$(dirname "$0")/lib/npfd.sh"
npfd_start
"$BIN/npf-rdma" --size 64 --hold "$dir/hold" >"$dir/rdma.log" 2>&1 &
wl=$!
i=0
until [ -e "$dir/hold" ]; do
	i=$((i + 1))
	[ $i -lt 600 ] || fail "npf-rdma did not finish: $(cat "$dir/rdma.log")"
	kill -0 "$wl" 2>/dev/null || fail "npf-rdma died: $(cat "$dir/rdma.log")"
	sleep 0.05
done
cat "$dir/rdma.log"

"$BIN/npfctl" device list >"$dir/out" || fail "npfctl device list exited $?"
cat "$dir/out"
"$BIN/npfctl" -j device list >"$dir/dev.json" || fail "npfctl -j device list exited $?"
ndev=$(jq 'length' "$dir/dev.json")
[ "$ndev" = 2 ] || fail "device list -j shows $ndev devices, want 2 (one per NIC)"
answered=$(jq '[.[].page_requests] | add' "$dir/dev.json")
[ "${answered:-0}" -gt 0 ] || fail "npfd answered no page request: $(cat "$dir/dev.json")"

bpftool -j map dump pinned "$pins/npf_region_stats" >"$dir/map.json" ||
	fail "bpftool cannot dump $pins/npf_region_stats"
bpf=$(jq '[.[].formatted.value | select(.region_id != 0) | .device_faults] | add' "$dir/map.json")
ctl=$("$BIN/npfctl" -j stats | jq '[.[].device_faults] | add')
echo "page requests: BPF (bpftool) $bpf, npfctl stats $ctl, answered by npfd $answered"
[ "$bpf" = "$ctl" ] || fail "bpftool shows $bpf device faults, npfctl stats $ctl"
[ "$bpf" = "$answered" ] || fail "BPF saw $bpf page requests, npfd answered $answered"

rm -f "$dir/hold"
wait "$wl" || fail "npf-rdma failed: $(cat "$dir/rdma.log")"
wl=
grep -q "all equal" "$dir/rdma.log" || fail "checksums differ: $(cat "$dir/rdma.log")"
echo ok
