# SPDX-License-Identifier: GPL-2.0
# Sourced by the verbs tests: Debian's unmodified libibverbs programs under
# npf-run, with a private npfd (tests/lib/npfd.sh). Each test gets its own
# pair of loopback addresses (device npf0 and npf1) so that tests running
# at the same time never share a device's UDP port.
#   vx_need PROGRAM...          skip unless the programs are installed
#   vx_pair SRV_ARGS -- CLI_ARGS  run PROGRAM server on npf0 and client on npf1,
#                                 sampling npfd while they run; sets $srv_rc,
#                                 $cli_rc, $max_dev_faults, $max_vmlck_kb (locked
#                                 in the mappings of npfd's regions),
#                                 logs in $dir/srv.log, $dir/cli.log
#                                 (VX_SAMPLE=0: no sampling; both maxima stay 0;
#                                 $vx_as: a command both run under, e.g. setpriv)
. "${NPF_TESTLIB:-$(dirname "$0")/lib}/npfd.sh"
[ -x "$BIN/npf-run" ] || { echo "build/bin/npf-run is missing (make verbs)"; exit 77; }
[ -e "$BIN/../lib/libnpfverbs-rdmav34.so" ] || { echo "the npf verbs provider is not built"; exit 77; }
o=$(( $$ % 200 + 20 ))
export NPF_VERBS_ADDRS="127.91.$o.1 127.91.$o.2"
export NPF_VERBS_STATS=1
vx_port=$(( 20000 + $$ % 20000 ))
vx_as=

vx_need() {
	for p in "$@"; do
		command -v "$p" >/dev/null || { echo "$p is not installed (ibverbs-utils, perftest: make installs them)"; exit 77; }
	done
}

# The pids npfd serves right now, from its region list.
vx_region_pids() {
	"$BIN/npfctl" -j region list 2>/dev/null | jq -r '.[].pid' 2>/dev/null | sort -u
}

# kB locked in the mapping that holds each region npfd serves (smaps "Locked:")
vx_region_locked_kb() {
	"$BIN/npfctl" -j region list 2>/dev/null | jq -r '.[] | "\(.pid) \(.start)"' 2>/dev/null |
	while read -r pid start; do
		awk -v a="$start" '
			function hex(s,  i, c, v) { v = 0; s = tolower(s); sub("^0x", "", s)
				for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)) - 1; v = v * 16 + c }
				return v }
			BEGIN { want = (a ~ /^0x/) ? hex(a) : a + 0 }
			/^[0-9a-f]+-[0-9a-f]+ / { split($1, r, "-"); in_it = (hex(r[1]) <= want && want < hex(r[2])) }
			in_it && /^Locked:/ { print $2 }' "/proc/$pid/smaps" 2>/dev/null
	done | sort -n | tail -n 1
}

vx_sample() {
	df=$("$BIN/npfctl" -j stats 2>/dev/null | jq '[.[].device_faults] | add // 0' 2>/dev/null)
	[ "${df:-0}" -gt "$max_dev_faults" ] && max_dev_faults=$df
	l=$(vx_region_locked_kb)
	[ "${l:-0}" -gt "$max_vmlck_kb" ] && max_vmlck_kb=$l
	return 0
}

# How many page requests a side's NIC raised and npfd answered (its
# NPF_VERBS_STATS line): "REQUESTS RESPONSES". Deterministic, unlike sampling
# npfd's per-region counters, which go away with the region.
vx_nic_faults() { # LOG
	sed -n 's/.*page_requests \([0-9]*\) responses \([0-9]*\).*/\1 \2/p' "$1" | head -n 1
}

# vx_pair PROGRAM SRV_ARGS... -- CLI_ARGS...: server on npf0, client on npf1 to the server's address
vx_pair() {
	prog=$1; shift
	sargs=""
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do sargs="$sargs $1"; shift; done
	[ $# -gt 0 ] && shift
	max_dev_faults=0 max_vmlck_kb=0
	$vx_as "$BIN/npf-run" $prog -d npf0 $sargs >"$dir/srv.log" 2>&1 &
	vx_srv=$!
	# the client connects once, at start: wait until the server listens on
	# its -p port (a fixed sleep lost that race on a loaded machine: the
	# client gave up, the server waited for it until the 60 s limit)
	vx_lport=$(echo $sargs | awk '{ for (i = 1; i < NF; i++) if ($i == "-p") print $(i + 1) }')
	i=0
	if [ -n "$vx_lport" ]; then
		until ss -Hltn "sport = :$vx_lport" 2>/dev/null | grep -q .; do
			i=$((i + 1))
			[ $i -lt 200 ] && kill -0 "$vx_srv" 2>/dev/null || break
			sleep 0.05
		done
	else
		sleep 0.5
	fi
	$vx_as "$BIN/npf-run" $prog -d npf1 "$@" "127.91.$o.1" >"$dir/cli.log" 2>&1 &
	vx_cli=$!
	i=0
	while kill -0 "$vx_cli" 2>/dev/null || kill -0 "$vx_srv" 2>/dev/null; do
		[ "${VX_SAMPLE:-1}" = 0 ] || vx_sample
		i=$((i + 1))
		if [ $i -gt 600 ]; then
			kill "$vx_cli" "$vx_srv" 2>/dev/null
			echo "--- server:"; cat "$dir/srv.log"; echo "--- client:"; cat "$dir/cli.log"
			fail "$prog did not finish in 60 s"
		fi
		sleep 0.1
	done
	wait "$vx_srv"; srv_rc=$?
	wait "$vx_cli"; cli_rc=$?
	echo "--- server ($prog$sargs) exit $srv_rc:"; cat "$dir/srv.log"
	echo "--- client ($prog $*) exit $cli_rc:"; cat "$dir/cli.log"
	echo "--- npfd device faults seen: $max_dev_faults, locked in their regions' mappings: ${max_vmlck_kb} kB"
}
