#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Unmodified perftest under a budget (issue 15): ib_write_bw --odp between
# two npf devices, 4 MiB RDMA WRITEs from and into 8 MiB buffers (perftest
# fills both before it registers them), each client held to a budget of
# BUDGETS MiB (client-budget-mib, changed with SIGHUP between runs), against
# the same run without a budget. Below 8 MiB npfd evicts while the NICs
# write; below 4 MiB one message needs more than the budget at once.
#
# Rounds: each round runs every budget once, "none" included, the order
# rotated every round (the machine is shared: a load change hits all of a
# round). Per run: ib_write_bw's average bandwidth, the page requests both
# NICs raised and the retransmissions. Per budget: the median bandwidth of
# the rounds, its minimum and maximum, the median ratio to the same round's
# run without a budget, and how the run without a budget varied alone.
# Rows: a table on stdout, JSON rows (perftest_budget) to $NPF_BENCH_JSON.
#   sh bench/perftest_budget.sh [--rounds=N] [--budgets="MiB ..."] [--iters=N]
# (root, perftest, make verbs; bench/run.sh runs it as perftest_budget)
set -u
here=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
cd "$here"
rounds=5
budgets="6 4 2 1"
iters=20
for a in "$@"; do
	case "$a" in
	--rounds=*) rounds=${a#--rounds=} ;;
	--budgets=*) budgets=${a#--budgets=} ;;
	--iters=*) iters=${a#--iters=} ;;
	-h | --help) sed -n '3,18p' "$0"; exit 0 ;;
	*) echo "perftest_budget: unknown argument $a (see --help)" >&2; exit 2 ;;
	esac
done
for v in "$rounds" "$iters" $budgets; do
	case "$v" in *[!0-9]* | "" | 0) echo "perftest_budget: $v: want a positive number" >&2; exit 2 ;; esac
done
command -v ib_write_bw >/dev/null || { echo "perftest_budget: ib_write_bw is not installed (perftest): not run"; exit 0; }
[ -x build/bin/npf-run ] && [ -e build/lib/libnpfverbs-rdmav34.so ] ||
	{ echo "perftest_budget: build/bin/npf-run or the provider is missing (make verbs): not run"; exit 0; }
NPF_TESTLIB=tests/lib
. tests/lib/verbs.sh
VX_SAMPLE=0
fail() {
	echo "perftest_budget: $*" >&2
	for f in srv cli; do
		[ -s "$dir/$f.log" ] && { echo "--- $f:"; cat "$dir/$f.log"; } >&2
	done
	{ echo "--- npfd (last 40 lines):"; tail -n 40 "$dir/npfd.log"; } >&2
	exit 1
}
conf="$dir/npfd.conf"
echo "client-budget-mib = 0" >"$conf"
npfd_start --config "$conf"
data="$dir/data"
: >"$data"

sum() { # WORD: that counter of both NICs' NPF_VERBS_STATS lines, summed
	cat "$dir/srv.log" "$dir/cli.log" | sed -n "s/.* $1 \([0-9]*\).*/\1/p" |
		awk '{ s += $1 } END { print s + 0 }'
}

t0=$(date +%s)
all="0 $budgets"
n=$(echo $all | wc -w)
r=0
while [ $r -lt "$rounds" ]; do
	# rotate: round r starts at the (r mod n)-th budget
	order=$(echo $all | awk -v k=$((r % n)) '{ for (i = 0; i < NF; i++) printf "%s ", $((i + k) % NF + 1) }')
	for b in $order; do
		echo "client-budget-mib = $b" >"$conf"
		kill -HUP "$npfd"
		sleep 0.3 # npfd re-reads its configuration in its loop
		vx_pair ib_write_bw -x 0 -p $vx_port -s 4194304 -n "$iters" --odp -- \
			-x 0 -p $vx_port -s 4194304 -n "$iters" --odp >/dev/null
		vx_port=$((vx_port + 1))
		bw=$(awk '/^ *4194304 +[0-9]+ / { print $4 }' "$dir/cli.log")
		[ $srv_rc -eq 0 ] && [ $cli_rc -eq 0 ] && [ -n "$bw" ] || fail "budget $b MiB: ib_write_bw failed:"
		echo "$b $r $bw $(sum page_requests) $(sum retransmits)" >>"$data"
	done
	r=$((r + 1))
done
secs=$(($(date +%s) - t0))

python3 - "$data" "$rounds" "$secs" "$iters" "${NPF_BENCH_JSON:-}" <<'EOF'
import json, sys
data, rounds, secs, iters, jpath = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
runs = {}
for line in open(data):
    b, r, bw, pr, rt = line.split()
    runs[(int(b), int(r))] = (float(bw), int(pr), int(rt))

def med(v):
    v = sorted(v); n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2

budgets = sorted({b for b, _ in runs}, key=lambda b: (b != 0, -b))
print(f"ib_write_bw --odp, 4 MiB x {iters}, 8 MiB buffers; {rounds} rounds, every budget once a round ({secs} s)")
print(f"{'budget':>8} {'MB/s median':>12} {'min':>8} {'max':>8} {'vs none':>8} {'page requests':>14} {'retransmits':>12}")
rows = []
for b in budgets:
    bw = [runs[(b, r)][0] for r in range(rounds)]
    ratio = [runs[(b, r)][0] / runs[(0, r)][0] for r in range(rounds) if runs[(0, r)][0] > 0]
    pr = med([runs[(b, r)][1] for r in range(rounds)])
    rt = med([runs[(b, r)][2] for r in range(rounds)])
    name = "none" if b == 0 else f"{b} MiB"
    print(f"{name:>8} {med(bw):12.1f} {min(bw):8.1f} {max(bw):8.1f} {med(ratio):8.3f} {pr:14g} {rt:12g}")
    rows.append({"bench": "perftest_budget", "budget": name, "bw_mbs_median": med(bw),
                 "bw_mbs_min": min(bw), "bw_mbs_max": max(bw), "vs_none_median": med(ratio),
                 "page_requests_median": pr, "retransmits_median": rt, "rounds": rounds,
                 "iters": int(iters)})
if jpath:
    with open(jpath, "a") as out:
        for r in rows:
            out.write(json.dumps(r) + "\n")
EOF
