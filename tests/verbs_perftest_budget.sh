#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Debian's unmodified ib_write_bw --odp under a client budget smaller than
# one of its messages: 4 MiB RDMA WRITEs from and into buffers of 8 MiB
# that perftest fills before it registers them, each client held to 1 MiB
# (client-budget-mib). Every message needs four times the budget resident
# at once. Both sides must run to the end, and npfd must have evicted (the
# buffers' pages, those written before the registration included) and read
# pages back for the NICs' page requests.
# Without the grace eviction gives pages a device asked for
# (EVICT_DEVICE_GRACE_MS, daemon/evict.c) a message's first pages were
# evicted while the NIC still waited for its last ones: not one of 5
# messages went through in 200 s.
set -u
. "$(dirname "$0")/lib/verbs.sh"
vx_need ib_write_bw
npfd_start --client-budget-mib 1

# npfd's evicted and read-back counts of both regions, summed over the run
# (sampled: the regions go with the programs)
max_evicted=0 max_read_back=0
vx_sample() {
	set -- $("$BIN/npfctl" -j stats 2>/dev/null |
		jq -r '[([.[].budget.evicted_pages] | add // 0), ([.[].budget.refaults] | add // 0)] | @tsv' 2>/dev/null)
	[ "${1:-0}" -gt "$max_evicted" ] && max_evicted=$1
	[ "${2:-0}" -gt "$max_read_back" ] && max_read_back=$2
	return 0
}

# 100 messages: the run must outlast the device grace (1 s: pages a device
# asked for are not evicted within it), else a fast run (4 MiB x 20 in
# 0.27 s, once in CI) fits in the grace whole and evicts nothing
n=100
args="-x 0 -p $vx_port -s 4194304 -n $n --odp"
vx_pair ib_write_bw $args -- $args
[ $srv_rc -eq 0 ] && [ $cli_rc -eq 0 ] || fail "ib_write_bw --odp under a 1 MiB budget failed"
f=$(awk -v n=$n '$1 == 4194304 && $2 == n { print }' "$dir/cli.log")
[ -n "$f" ] || fail "ib_write_bw printed no result for its $n messages"
echo "RESULT ib_write_bw 4 MiB x $n under a 1 MiB budget: $f"
echo "npfd evicted $max_evicted pages and read $max_read_back back (sampled)"
# $n messages of 1024 pages each side through 256 pages: thousands
[ "$max_evicted" -ge 4096 ] || fail "only $max_evicted pages evicted: the budget did not hold"
[ "$max_read_back" -gt 0 ] || fail "no page was read back for the NICs"
for side in srv cli; do
	set -- $(vx_nic_faults "$dir/$side.log")
	[ "${1:-0}" -gt 0 ] || fail "the $side NIC raised no page request"
done
echo ok
