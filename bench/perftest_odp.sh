#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# perftest over npf devices: on-demand memory (--odp, served by npfd) against
# the same run on pinned memory, 4 KiB ... 8 MiB, in one run (the machine
# may be shared: compare the ratios, not the absolute figures).
#  - latency (ib_write_lat): the first iteration writes never-device-mapped
#    memory on both sides (the first pass, t_max, with the NICs' page
#    requests); the typical iteration is a later pass (t_typical);
#  - bandwidth (ib_write_bw): the average over the run, whose first pass is
#    one message of n.
#   sh bench/perftest_odp.sh [SIZE...]     (needs root, perftest; make verbs)
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
NPF_TESTLIB=tests/lib
. tests/lib/verbs.sh
vx_need ib_write_lat ib_write_bw
npfd_start
sizes=${*:-4096 65536 1048576 8388608}

val() { # FILE COLUMN: a column of the last perftest figure line
	awk -v c="$2" '/^ *[0-9]+ +[0-9]+ / { l = $0 } END { split(l, f); print f[c] }' "$1"
}
faults() { # page requests of both NICs (NPF_VERBS_STATS lines)
	cat "$dir/srv.log" "$dir/cli.log" | sed -n 's/.*page_requests \([0-9]*\).*/\1/p' |
		awk '{ s += $1 } END { print s + 0 }'
}

printf '%-8s | %-32s | %-32s | %s\n' "" "latency (ib_write_lat, us)" "" "bandwidth (ib_write_bw, MB/s)"
printf '%-8s | %9s %10s %10s | %9s %10s %5s | %8s %8s %6s\n' size "pin typ" "odp typ" ratio \
	"pin 1st" "odp 1st" flts "pinned" "odp" ratio
for s in $sizes; do
	n=$(( 67108864 / s )); [ $n -lt 20 ] && n=20; [ $n -gt 2000 ] && n=2000
	vx_pair ib_write_lat -x 0 -p $vx_port -s $s -n 50 -- -x 0 -p $vx_port -s $s -n 50 >/dev/null
	vx_port=$((vx_port + 1))
	lp_typ=$(val "$dir/cli.log" 5) lp_max=$(val "$dir/cli.log" 4)
	vx_pair ib_write_lat -x 0 -p $vx_port -s $s -n 50 --odp -- -x 0 -p $vx_port -s $s -n 50 --odp >/dev/null
	vx_port=$((vx_port + 1))
	lo_typ=$(val "$dir/cli.log" 5) lo_max=$(val "$dir/cli.log" 4) lo_f=$(faults)
	vx_pair ib_write_bw -x 0 -p $vx_port -s $s -n $n -- -x 0 -p $vx_port -s $s -n $n >/dev/null
	vx_port=$((vx_port + 1))
	bp=$(val "$dir/cli.log" 4)
	vx_pair ib_write_bw -x 0 -p $vx_port -s $s -n $n --odp -- -x 0 -p $vx_port -s $s -n $n --odp >/dev/null
	vx_port=$((vx_port + 1))
	bo=$(val "$dir/cli.log" 4)
	printf '%-8s | %9s %10s %10s | %9s %10s %5s | %8s %8s %6s\n' $s "$lp_typ" "$lo_typ" \
		"$(awk "BEGIN { if ($lp_typ > 0) printf \"%.2f\", $lo_typ / $lp_typ }")" \
		"$lp_max" "$lo_max" "$lo_f" "$bp" "$bo" \
		"$(awk "BEGIN { if ($bp > 0) printf \"%.2f\", $bo / $bp }")"
done
