# SPDX-License-Identifier: GPL-2.0
# Sourced by the shell tests: a private npfd and a workload that holds its
# regions, cleaned up whatever happens. Sets $BIN, $dir, $NPF_SOCKET, $pins.
#   npfd_start [NPFD ARGS...]        start npfd, wait for its socket ($npfd_wrap:
#                                    a command npfd runs under, e.g. setpriv ...)
#   npfd_unit_caps                   have npfd_start run npfd with exactly the
#                                    capabilities systemd/npfd.service.in leaves it
#   workload_hold [WORKLOAD ARGS...] run npf-workload until it holds its regions
#   workload_release                 let it finish; fails the test if it failed
#   fail MESSAGE                     print, show npfd's log, exit 1
[ "$(id -u)" -eq 0 ] || { echo "needs root (npfd loads BPF)"; exit 77; }
command -v jq >/dev/null || { echo "jq is missing (make installs it)"; exit 77; }
BIN=${NPF_BIN:-build/bin}
dir=$(mktemp -d /tmp/npf-test-XXXXXX)
pins=/sys/fs/bpf/npf-test-$$
export NPF_SOCKET="$dir/npfd.sock"
npfd= wl= npfd_wrap=

fail() {
	echo "FAIL: $*"
	echo "--- npfd log:"
	cat "$dir/npfd.log"
	exit 1
}

npf_cleanup() {
	rm -f "$dir/hold"
	[ -n "$wl" ] && wait "$wl" 2>/dev/null
	st=0
	if [ -n "$npfd" ] && kill "$npfd" 2>/dev/null; then
		wait "$npfd" 2>/dev/null || st=$?
	fi
	# npfd exits 0 on SIGTERM: anything else (a crash, a sanitizer report)
	# fails the test whatever it checked.
	if [ "$st" -ne 0 ]; then
		echo "FAIL: npfd exited with status $st"
		cat "$dir/npfd.log"
		rm -rf "$dir"
		exit 1
	fi
	rm -rf "$dir"
}
trap npf_cleanup EXIT

npfd_start() {
	# shellcheck disable=SC2086 # $npfd_wrap is a command and its words
	$npfd_wrap "$BIN/npfd" --config /dev/null --foreground --socket "$NPF_SOCKET" --bpffs "$pins" "$@" \
		2>"$dir/npfd.log" &
	npfd=$!
	i=0
	until [ -S "$NPF_SOCKET" ]; do
		i=$((i + 1))
		[ $i -lt 400 ] && kill -0 "$npfd" 2>/dev/null || fail "npfd did not start"
		sleep 0.05
	done
}

npfd_unit_caps() {
	command -v setpriv >/dev/null || { echo "setpriv is missing (util-linux)"; exit 77; }
	unit_caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$(dirname "$0")/../systemd/npfd.service.in")
	[ -n "$unit_caps" ] || fail "no CapabilityBoundingSet= in systemd/npfd.service.in"
	set_caps=-all
	for c in $unit_caps; do
		set_caps="$set_caps,+$(echo "${c#CAP_}" | tr 'A-Z' 'a-z')"
	done
	echo "npfd runs with the unit's capabilities: $unit_caps"
	npfd_wrap="setpriv --bounding-set $set_caps --inh-caps -all --ambient-caps -all"
}

workload_hold() {
	"$BIN/npf-workload" --dir "$dir" --hold "$dir/hold" "$@" >"$dir/wl.log" 2>&1 &
	wl=$!
	i=0
	until [ -e "$dir/hold" ]; do
		i=$((i + 1))
		[ $i -lt 600 ] || fail "workload did not finish"
		kill -0 "$wl" 2>/dev/null || fail "workload died: $(cat "$dir/wl.log")"
		sleep 0.05
	done
}

workload_release() {
	rm -f "$dir/hold"
	wait "$wl" || fail "workload failed: $(cat "$dir/wl.log")"
	wl=
}
