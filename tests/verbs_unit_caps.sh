#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Another user's unmodified verbs programs against npfd with exactly the
# capabilities systemd/npfd.service.in leaves it (as tests/ops_unit_caps
# does for eviction): Debian's ibv_rc_pingpong, on-demand (-o), data
# checked (-c), run by uid 65534 under npf-run (in a user namespace of its
# own: npf-run is not root's only), let in by socket-group. npfd finds the
# provider in the process through /proc/PID/map_files (mode 0500, its
# owner's: CAP_DAC_OVERRIDE) and checks a device's pages in
# /proc/PID/pagemap (0400); both NICs must raise page requests that npfd
# answers, and the data must arrive right (-c).
set -u
. "$(dirname "$0")/lib/verbs.sh"
vx_need ibv_rc_pingpong
vx_as="setpriv --reuid 65534 --regid 65534 --clear-groups"
$vx_as unshare --user --map-root-user --mount true 2>/dev/null ||
	{ echo "uid 65534 may not make a user namespace here (npf-run needs one for a user other than root)"; exit 77; }
npfd_unit_caps
npfd_start --socket-group 65534
chmod 755 "$dir"
vx_pair ibv_rc_pingpong -g 0 -p $vx_port -o -c -s 1048576 -n 20 -- -g 0 -p $vx_port -o -c -s 1048576 -n 20
[ $srv_rc -eq 0 ] && [ $cli_rc -eq 0 ] || fail "uid 65534's ibv_rc_pingpong failed (server $srv_rc, client $cli_rc)"
grep -q "iters in" "$dir/cli.log" || fail "the client did not report its iterations"
for side in srv cli; do
	set -- $(vx_nic_faults "$dir/$side.log")
	[ "${1:-0}" -gt 0 ] && [ "${2:-0}" -ge "$1" ] ||
		fail "the $side NIC raised ${1:-no} page requests, npfd answered ${2:-none}"
	echo "$side NIC: $1 page requests, $2 answers"
done
echo PASS
