#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The main job: start npfd, run real workloads on unpinned memory -- CPU
# faults from several threads, then RDMA between two processes over the
# software NIC -- and show what happened through npfctl and bpftool.
# Needs root.
set -eu
O=${O:-build}
BIN="$PWD/$O/bin"
dir=$(mktemp -d /tmp/npf-demo-XXXXXX)
sock="$dir/npfd.sock"
pins=/sys/fs/bpf/npf-demo
export NPF_SOCKET="$sock"

cleanup() {
	[ -n "${npfd_pid:-}" ] && kill "$npfd_pid" 2>/dev/null && wait "$npfd_pid" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM

if [ "$(id -u)" -ne 0 ]; then
	echo "demo: run as root (npfd loads BPF programs)" >&2
	exit 1
fi

echo "== starting npfd (socket $sock, maps pinned under $pins)"
"$BIN/npfd" --config /dev/null --foreground --socket "$sock" --bpffs "$pins" 2>"$dir/npfd.log" &
npfd_pid=$!
i=0
until [ -S "$sock" ]; do
	i=$((i + 1))
	if [ $i -gt 200 ] || ! kill -0 "$npfd_pid" 2>/dev/null; then
		echo "demo: npfd did not start:" >&2
		cat "$dir/npfd.log" >&2
		exit 1
	fi
	sleep 0.05
done

echo "== workload: 4 threads read random pages of a 1 GiB file-backed region and a 1 GiB"
echo "   anonymous region, registered with npf without pinning"
"$BIN/npf-workload" --dir "$dir" --hold "$dir/hold" &
wl=$!
i=0
until [ -e "$dir/hold" ] || ! kill -0 $wl 2>/dev/null; do
	sleep 0.1
done

echo
echo "== npfctl status"
"$BIN/npfctl" status
echo
echo "== npfctl region list"
"$BIN/npfctl" region list
echo
echo "== npfctl stats"
"$BIN/npfctl" stats
echo
echo "== bpftool map dump pinned $pins/npf_region_stats (slots in use)"
bpftool -j map dump pinned "$pins/npf_region_stats" | jq -c '.[].formatted.value | select(.region_id != 0)'
rm -f "$dir/hold"
wait $wl

echo
echo "== RDMA over the software NIC: two processes, 256 MiB WRITE into never-touched, unpinned"
echo "   memory, then READ back; every NIC page fault goes uprobe -> BPF -> npfd -> page-in -> resume"
"$BIN/npf-rdma" --size 256 --hold "$dir/hold-rdma" &
rd=$!
until [ -e "$dir/hold-rdma" ] || ! kill -0 $rd 2>/dev/null; do
	sleep 0.1
done
echo
echo "== npfctl device list"
"$BIN/npfctl" device list
echo
echo "== npfctl stats (device faults counted by the BPF uprobe)"
"$BIN/npfctl" stats | grep -E "^region|faults"
echo
echo "== bpftool map dump pinned $pins/npf_region_stats (the uprobe's count of page requests)"
bpftool -j map dump pinned "$pins/npf_region_stats" |
	jq -c '.[].formatted.value | select(.region_id != 0) | {region_id, tgid, device_faults, pages_zeroed}'
rm -f "$dir/hold-rdma"
wait $rd
echo
echo "== npfd log"
cat "$dir/npfd.log"
