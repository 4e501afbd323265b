#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# ibv_rc_pingpong on on-demand memory between two network namespaces joined
# by a veth pair: each namespace's npf-run makes one device (npf0) of its
# own address; RoCEv2 datagrams cross the veth (4 KiB packets fragmented on
# its 1500-byte MTU); npfd (in the root namespace) resolves both sides'
# device faults.
set -u
. "$(dirname "$0")/lib/verbs.sh"
vx_need ibv_rc_pingpong ip
npfd_start
na=npfvA$$ nb=npfvB$$ va=npfa$$ vb=npfb$$
netns_cleanup() {
	ip netns del "$na" 2>/dev/null
	ip netns del "$nb" 2>/dev/null
	npf_cleanup
}
trap netns_cleanup EXIT
ip netns add "$na" && ip netns add "$nb" || { echo "cannot create network namespaces"; exit 77; }
ip link add "$va" type veth peer name "$vb" || { echo "cannot create a veth pair"; exit 77; }
ip link set "$va" netns "$na" && ip link set "$vb" netns "$nb" || fail "moving the veth ends"
sub="10.$(( $$ % 200 + 20 )).$(( $$ / 200 % 250 ))"
ip -n "$na" addr add "$sub.1/24" dev "$va" && ip -n "$nb" addr add "$sub.2/24" dev "$vb" ||
	fail "addressing the veth ends"
ip -n "$na" link set "$va" up && ip -n "$nb" link set "$vb" up && ip -n "$na" link set lo up &&
	ip -n "$nb" link set lo up || fail "bringing the links up"

max_dev_faults=0 max_vmlck_kb=0
NPF_VERBS_ADDRS="$sub.1" ip netns exec "$na" "$BIN/npf-run" ibv_rc_pingpong -d npf0 -g 0 \
	-p $vx_port -o -e -c -s 1048576 -n 20 >"$dir/srv.log" 2>&1 &
srv=$!
sleep 0.5
NPF_VERBS_ADDRS="$sub.2" ip netns exec "$nb" "$BIN/npf-run" ibv_rc_pingpong -d npf0 -g 0 \
	-p $vx_port -o -e -c -s 1048576 -n 20 "$sub.1" >"$dir/cli.log" 2>&1 &
cli=$!
i=0
while kill -0 "$cli" 2>/dev/null || kill -0 "$srv" 2>/dev/null; do
	vx_sample
	i=$((i + 1))
	[ $i -lt 600 ] || { kill "$cli" "$srv" 2>/dev/null; fail "ibv_rc_pingpong did not finish in 60 s"; }
	sleep 0.1
done
wait "$srv"; s=$?
wait "$cli"; c=$?
echo "--- server:"; cat "$dir/srv.log"
echo "--- client:"; cat "$dir/cli.log"
echo "--- npfd device faults seen: $max_dev_faults"
[ $s -eq 0 ] && [ $c -eq 0 ] || fail "ibv_rc_pingpong between namespaces failed"
grep -q "GID ::ffff:$sub.1" "$dir/cli.log" || fail "the client did not talk to $sub.1"
[ "$max_vmlck_kb" -eq 0 ] || fail "${max_vmlck_kb} kB locked in a registered mapping"
for side in srv cli; do
	set -- $(vx_nic_faults "$dir/$side.log")
	[ "${1:-0}" -gt 0 ] && [ "${2:-0}" -ge "$1" ] ||
		fail "the $side NIC raised ${1:-no} page requests, npfd answered ${2:-none}"
done
echo ok
