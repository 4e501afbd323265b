#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# A second npfd never touches a live npfd's pinned maps; stale ones go.
#  - npfd B started on the pin directory of a running npfd A (its own
#    socket) refuses with A's pid and exits non-zero; A's maps stay pinned, still
#    A's (npf_info names A's pid), and A keeps serving;
#  - pins whose npf_info names a live process that is not their owner
#    (a reused pid: here another npfd D, which holds BPF maps, just not
#    these) are stale and replaced;
#  - after kill -9 of A, a new npfd removes A's stale pins and runs.
set -u
. "$(dirname "$0")/lib/npfd.sh"

info_pid() {
	bpftool -j map lookup pinned "$pins/npf_info" key 0 0 0 0 | jq '.formatted.value.npfd_pid'
}

npfd_start
a=$npfd
[ "$(info_pid)" = "$a" ] || fail "npf_info does not name npfd $a"

"$BIN/npfd" --config /dev/null --foreground --socket "$dir/b.sock" --bpffs "$pins" \
	2>"$dir/b.log" &
b=$!
i=0
while kill -0 $b 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 200 ]; then kill $b; fail "second npfd still runs after 10 s: $(cat $dir/b.log)"; fi
	sleep 0.05
done
wait $b
rc=$?
cat "$dir/b.log"
[ $rc -ne 0 ] || fail "second npfd exited 0 on a live npfd's pin directory"
grep -q "pid $a" "$dir/b.log" || fail "second npfd does not name the running npfd $a"
for m in npf_info npf_procs npf_region_stats npf_events npf_policy_kp; do
	[ -e "$pins/$m" ] || fail "second npfd removed $pins/$m of the running npfd"
done
[ "$(info_pid)" = "$a" ] || fail "npf_info now names $(info_pid), not the running npfd $a"
"$BIN/npfctl" status >/dev/null || fail "npfd $a stopped answering"
kill -0 $a || fail "npfd $a died"

# kill -9: pins stay behind, stale
kill -9 $a
wait $a 2>/dev/null
npfd=
[ -e "$pins/npf_info" ] || fail "pins gone after kill -9 (nothing to test)"
# a reused pid: npf_info names a live npfd that holds other maps, not these
"$BIN/npfd" --config /dev/null --foreground --socket "$dir/d.sock" --bpffs "$pins-d" \
	2>"$dir/d.log" &
dpid=$!
trap 'kill $dpid 2>/dev/null; wait $dpid 2>/dev/null; npf_cleanup' EXIT
i=0
until [ -S "$dir/d.sock" ]; do
	i=$((i + 1))
	[ $i -lt 400 ] && kill -0 $dpid 2>/dev/null || fail "npfd D did not start: $(cat $dir/d.log)"
	sleep 0.05
done
le() { printf '0x%02x 0x%02x 0x%02x 0x%02x' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)); }
bpftool map update pinned "$pins/npf_info" key 0 0 0 0 value \
	0x49 0x46 0x50 0x4e 1 0 0 0 1 0 0 0 $(le $dpid) || fail "cannot rewrite npf_info"
[ "$(info_pid)" = $dpid ] || fail "npf_info does not name npfd D $dpid: $(info_pid)"
rm -f "$NPF_SOCKET"
npfd_start
c=$npfd
grep -q "removed stale pinned map" "$dir/npfd.log" || fail "no stale pins removed"
[ "$(info_pid)" = "$c" ] || fail "npf_info names $(info_pid), not the new npfd $c"
"$BIN/npfctl" status >/dev/null || fail "the new npfd does not answer"
NPF_SOCKET="$dir/d.sock" "$BIN/npfctl" status >/dev/null || fail "npfd D stopped answering"
echo PASS
