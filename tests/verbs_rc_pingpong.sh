#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Debian's unmodified ibv_rc_pingpong between two processes over npf devices
# (RoCEv2 GIDs on two loopback addresses): pinned (no -o), on-demand (-o),
# on-demand with prefetch (-o -P), implicit on-demand (-O), with completion
# channels (-e) and data checked (-c), 1 MiB messages, then 8 MiB ones. In
# on-demand runs both NICs must have raised page requests that npfd
# answered, with nothing locked in the registered mappings; in the pinned
# run no NIC raises one. With prefetch (ibv_advise_mr) no NIC faults, and
# npfd answered the prefetch.
set -u
. "$(dirname "$0")/lib/verbs.sh"
vx_need ibv_rc_pingpong
npfd_start

odp_faulted() { # what: both NICs raised page requests and npfd answered them all
	for side in srv cli; do
		set -- $(vx_nic_faults "$dir/$side.log")
		[ "${1:-0}" -gt 0 ] && [ "${2:-0}" -ge "$1" ] ||
			fail "$what: the $side NIC raised ${1:-no} page requests, npfd answered ${2:-none}"
	done
	[ "$max_vmlck_kb" -eq 0 ] || fail "$what: ${max_vmlck_kb} kB locked in a registered mapping"
}

run() { # what ARGS...
	what=$1; shift
	vx_pair ibv_rc_pingpong -g 0 -p $vx_port "$@" -- -g 0 -p $vx_port "$@"
	[ $srv_rc -eq 0 ] && [ $cli_rc -eq 0 ] || fail "$what: ibv_rc_pingpong failed"
	grep -q "iters in" "$dir/cli.log" || fail "$what: the client did not report its iterations"
	vx_port=$((vx_port + 1))
}

run pinned -e -c -s 1048576 -n 40
[ "$max_dev_faults" -eq 0 ] || fail "pinned run: npfd resolved $max_dev_faults device faults, want 0"
for side in srv cli; do
	grep -q "page_requests 0 responses 0 " "$dir/$side.log" || fail "pinned run: the $side NIC raised page requests"
done

run odp -o -e -c -s 1048576 -n 40
odp_faulted

run odp-prefetch -o -P -e -c -s 1048576 -n 40
for side in srv cli; do
	grep -q "page_requests 0 responses [1-9]" "$dir/$side.log" ||
		fail "ODP prefetch run: the $side NIC faulted anyway, or npfd never answered its prefetch"
done
run odp-implicit -O -e -c -s 65536 -n 40
odp_faulted

run odp-8MiB -o -c -s 8388608 -n 4
odp_faulted
echo ok
