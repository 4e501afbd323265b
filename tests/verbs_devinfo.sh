#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# npf-run gives Debian's ibv_devices and ibv_devinfo one npf device per
# address, with RoCEv2 GIDs and the on-demand paging capabilities (RC SEND,
# RECV, WRITE, READ; implicit), and leaves the host as it was: no
# /dev/infiniband, no new mount, nothing new in /tmp.
set -u
[ "$(id -u)" -eq 0 ] || { echo "needs root (npf-run makes a mount namespace)"; exit 77; }
BIN=${NPF_BIN:-build/bin}
command -v ibv_devinfo >/dev/null || { echo "ibverbs-utils is not installed"; exit 77; }
[ -x "$BIN/npf-run" ] || { echo "npf-run is not built (make verbs)"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
o=$(( $$ % 200 + 20 ))
a0="127.92.$o.1" a1="127.92.$o.2"
mounts=$(findmnt -rn -o TARGET | sort | md5sum)
# what npf-run could leave in /tmp, by name (other test runners on this
# machine make /tmp/npf-runner-* directories of their own meanwhile)
ours() { ls -d /tmp/npf-run* 2>/dev/null | grep -v '^/tmp/npf-runner-' | sort; }
tmp0=$(ours)
out=$(NPF_VERBS_ADDRS="$a0,$a1" "$BIN/npf-run" ibv_devices) || fail "npf-run ibv_devices exited $?"
echo "$out"
echo "$out" | grep -q "npf0.*02004e50" && echo "$out" | grep -q "npf1" || fail "ibv_devices does not list npf0 and npf1"
[ "$(echo "$out" | grep -c npf)" -eq 2 ] || fail "ibv_devices lists other than the two addresses' devices"
v=$(NPF_VERBS_ADDRS="$a0,$a1" "$BIN/npf-run" ibv_devinfo -v -d npf1) || fail "ibv_devinfo -v exited $?"
echo "$v"
for cap in ODP_SUPPORT ODP_SUPPORT_IMPLICIT; do
	echo "$v" | sed -n '/general_odp_caps/,/rc_odp_caps/p' | grep -q -w "$cap" || fail "general ODP caps lack $cap"
done
for cap in SUPPORT_SEND SUPPORT_RECV SUPPORT_WRITE SUPPORT_READ; do
	echo "$v" | sed -n '/rc_odp_caps/,/uc_odp_caps/p' | grep -q -w "$cap" || fail "RC ODP caps lack $cap"
done
echo "$v" | grep -q "GID\[  0\]:.*::ffff:$a1, RoCE v2" || fail "npf1's GID 0 is not ::ffff:$a1 (RoCE v2)"
echo "$v" | grep -q "link_layer:.*Ethernet" || fail "the port is not Ethernet (RoCE)"
echo "$v" | grep -q "state:.*PORT_ACTIVE" || fail "the port is not active"
[ ! -e /dev/infiniband ] || fail "/dev/infiniband exists on the host"
[ "$(findmnt -rn -o TARGET | sort | md5sum)" = "$mounts" ] || fail "the host's mount table changed"
[ "$(ours)" = "$tmp0" ] || fail "npf-run left something in /tmp: $(ours)"
echo ok
