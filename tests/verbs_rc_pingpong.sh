#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Debian's unmodified ibv_rc_pingpong between two processes over npf devices
# (RoCEv2 GIDs on two loopback addresses): pinned (no -o), on-demand (-o),
# on-demand with prefetch (-o -P), implicit on-demand (-O), with completion
# channels (-e) and data checked (-c), 1 MiB messages, then 8 MiB ones. On-demand runs must have had device faults
# resolved by npfd and nothing locked; the pinned run locks its buffer and
# npfd sees no device fault.
set -u
. "$(dirname "$0")/lib/verbs.sh"
vx_need ibv_rc_pingpong
npfd_start

run() { # what ARGS...
	what=$1; shift
	vx_pair ibv_rc_pingpong -g 0 -p $vx_port "$@" -- -g 0 -p $vx_port "$@"
	[ $srv_rc -eq 0 ] && [ $cli_rc -eq 0 ] || fail "$what: ibv_rc_pingpong failed"
	grep -q "iters in" "$dir/cli.log" || fail "$what: the client did not report its iterations"
	vx_port=$((vx_port + 1))
}

run pinned -e -c -s 1048576 -n 40
[ "$max_dev_faults" -eq 0 ] || fail "pinned run: npfd resolved $max_dev_faults device faults, want 0"
: # npfd serves no region in a pinned run: nothing to look at
grep -q "page_requests 0 " "$dir/cli.log" || fail "pinned run: the client's NIC raised page requests"

run odp -o -e -c -s 1048576 -n 40
[ "$max_dev_faults" -gt 0 ] || fail "ODP run: npfd resolved no device fault"
[ "$max_vmlck_kb" -eq 0 ] || fail "ODP run: a served process locked ${max_vmlck_kb} kB"
grep -q "page_requests [1-9]" "$dir/cli.log" || fail "ODP run: the client's NIC raised no page request"

run odp-prefetch -o -P -e -c -s 1048576 -n 40
[ "$max_dev_faults" -gt 0 ] || fail "ODP prefetch run: npfd resolved no device fault (the prefetch)"
grep -q "page_requests 0 .*responses [1-9]" "$dir/cli.log" ||
	fail "ODP prefetch run: the NIC still faulted, or npfd never answered the prefetch"
run odp-implicit -O -e -c -s 65536 -n 40
[ "$max_dev_faults" -gt 0 ] || fail "implicit ODP run: npfd resolved no device fault"
[ "$max_vmlck_kb" -eq 0 ] || fail "implicit ODP run: ${max_vmlck_kb} kB locked in a registered mapping"
grep -q "page_requests [1-9]" "$dir/cli.log" || fail "implicit ODP run: the client's NIC raised no page request"

run odp-8MiB -o -c -s 8388608 -n 4
[ "$max_dev_faults" -gt 0 ] || fail "8 MiB ODP run: npfd resolved no device fault"
echo ok
