#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The capabilities systemd/npfd.service.in leaves npfd are enough to serve
# another user's budgeted client: npfd runs here with exactly the unit's
# CapabilityBoundingSet (read from the unit, through setpriv), and a client
# of uid 65534 (let in by the socket's group: socket-group, which needs the
# unit's CAP_CHOWN; gid 65534, nogroup or nobody by distribution) has
# npf-bench-evict set a budget of 256 pages on 16 MiB, wait until npfd has
# evicted down to it, and read back and check every word. npfd reads the
# client's /proc/PID/pagemap (0400) and /proc/PID/mem (0600), its owner's alone:
# without CAP_DAC_OVERRIDE, which the unit left out until 2026-11-29, every
# eviction batch was given up ("Permission denied") and the client waited
# for ever. (tests/ops_systemd runs npfd under systemd itself, but in a pid
# namespace of its own, where eviction is refused: docs/design.md.)
set -u
. "$(dirname "$0")/lib/npfd.sh"
npfd_unit_caps
npfd_start --socket-group 65534
grep CapEff "/proc/$npfd/status"
[ "$(stat -c %g:%a "$NPF_SOCKET")" = 65534:660 ] ||
	fail "socket-group 65534: the socket is $(stat -c %g:%a "$NPF_SOCKET"), want 65534:660"

chmod 755 "$dir"
cp "$BIN/npf-bench-evict" "$dir/"
rc=0
timeout 60 setpriv --reuid 65534 --regid 65534 --clear-groups env NPF_SOCKET="$NPF_SOCKET" \
	"$dir/npf-bench-evict" --size=16 --rounds=1 --no-swap --json >"$dir/out.json" 2>"$dir/err" || rc=$?
cat "$dir/out.json"
[ "$rc" -eq 0 ] || fail "uid 65534's budgeted client exited $rc (124: it waited 60 s for eviction): $(cat "$dir/err")"
for method in "npf dirty" "npf clean"; do
	pages=$(jq -s "[.[] | select(.method == \"$method\") | .pages] | add" "$dir/out.json")
	[ "${pages:-0}" -ge 3000 ] || fail "$method: npfd evicted $pages pages of uid 65534's 4096, want >= 3000"
	echo "$method: $pages pages evicted, every word read back right"
done
echo PASS
