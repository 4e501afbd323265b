#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# RoCEv2 on the wire: captures of ibv_rc_pingpong (SEND first/middle/last),
# ib_write_bw (RDMA WRITE) and ib_read_lat (RDMA READ) between two npf
# devices, decoded by tshark: every datagram must be InfiniBand with an RC
# opcode and its headers, PSNs in sequence per sender, each response
# answering a request, the client's first PSN the one it printed
# (tests/verbs_wire_check.py).
set -u
. "$(dirname "$0")/lib/verbs.sh"
vx_need ibv_rc_pingpong ib_write_bw ib_read_lat tshark
[ -x /usr/bin/python3 ] || { echo "python3 is missing"; exit 77; }
npfd_start
cli="127.91.$o.2"
cap=

stop_capture() {
	[ -n "$cap" ] && kill -INT "$cap" 2>/dev/null && wait "$cap" 2>/dev/null
	cap=
}

capture() { # NAME MTU OPCODES -- PROGRAM ARGS...
	name=$1 mtu=$2 ops=$3
	shift 4
	tshark -i lo -f "udp port 4791 and host $cli" -w "$dir/$name.pcap" >"$dir/tshark.log" 2>&1 &
	cap=$!
	i=0
	until grep -q "Capturing on" "$dir/tshark.log"; do
		i=$((i + 1))
		[ $i -lt 200 ] || fail "tshark did not start capturing: $(cat "$dir/tshark.log")"
		sleep 0.05
	done
	prog=$1; shift
	vx_pair $prog -p $vx_port "$@" -- -p $vx_port "$@"
	vx_port=$((vx_port + 1))
	sleep 0.5
	stop_capture
	[ $srv_rc -eq 0 ] && [ $cli_rc -eq 0 ] || fail "$name: $prog failed"
	psn=$(awk '/local address/ { for (i = 1; i <= NF; i++) if ($i == "PSN") { sub(",", "", $(i + 1)); print $(i + 1); exit } }' "$dir/cli.log")
	[ -n "$psn" ] || fail "$name: the client printed no PSN"
	case $psn in 0x*) ;; *) psn=0x$psn ;; esac
	tshark -r "$dir/$name.pcap" -T fields -e frame.number -e ip.src -e udp.dstport \
		-e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.bth.psn \
		-e infiniband.reth.dmalen -e infiniband.aeth.syndrome >"$dir/$name.txt" 2>"$dir/tshark-r.log" ||
		fail "$name: tshark cannot read its capture: $(cat "$dir/tshark-r.log")"
	echo "--- $name: client PSN $psn"
	/usr/bin/python3 "$(dirname "$0")/verbs_wire_check.py" "$dir/$name.txt" $mtu $cli $psn $ops ||
		fail "$name: the capture does not decode as the RC conversation it was"
}
trap 'stop_capture; npf_cleanup' EXIT

# rc_pingpong: path MTU 1024 by default; 10000-byte SENDs are first, 8 middle, last
capture send 1024 "0x00 0x01 0x02 0x11" -- ibv_rc_pingpong -g 0 -s 10000 -n 3
capture write 4096 "0x06 0x07 0x08 0x11" -- ib_write_bw -x 0 -s 10000 -n 20
capture read 4096 "0x0c 0x0d 0x0e 0x0f" -- ib_read_lat -x 0 -s 10000 -n 20
echo ok
