#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# npfd under a real systemd: boot systemd as PID 1 of a fresh PID+mount(+net)
# namespace, 'make install' into a scratch root that the namespace mounts over
# /usr/local (and an overlay over /etc, so the host is not modified), then
# systemctl start / status / reload / stop npfd, a libnpf workload that faults
# through the service, and what is left behind afterwards.
#
# How the namespace keeps the host untouched: tests/lib/systemd.sh.
set -u
. tests/lib/systemd.sh
sd_boot ops-systemd

# The installed unit passes systemd's own checks (the man pages are installed too).
ns systemd-analyze verify /usr/local/lib/systemd/system/npfd.service >"$t/verify" 2>&1 ||
	fail "systemd-analyze verify: $(cat "$t/verify")"
echo "systemd-analyze verify: ok"

# The operator lets another user in by the socket's group (socket-group: the
# unit's CAP_CHOWN).
# (gid 65534 by its name: nogroup, or nobody on some distributions)
g65534=$(getent group 65534 | cut -d: -f1)
[ -n "$g65534" ] || fail "no group of gid 65534 to give the socket"
ns sh -c "echo 'socket-group = $g65534' >> /etc/npf/npfd.conf"
ns systemctl start npfd || fail "systemctl start npfd failed"
ns systemctl status --no-pager npfd >"$t/status" 2>&1
grep -q "active (running)" "$t/status" || fail "npfd is not active (running): $(cat "$t/status")"
echo "systemctl status: $(grep -o 'Active: .*' "$t/status")"
pid=$(ns systemctl show -P MainPID npfd)
[ -e "$pins/npf_region_stats" ] || fail "maps are not pinned under $pins"
ns test -S /run/npf/npfd.sock || fail "no socket at /run/npf/npfd.sock"
[ "$(ns stat -c %g:%a /run/npf/npfd.sock)" = 65534:660 ] ||
	fail "socket-group = $g65534: the socket is $(ns stat -c %g:%a /run/npf/npfd.sock), want 65534:660"
ns setpriv --reuid 65534 --regid 65534 --clear-groups /usr/local/bin/npfctl -j status >"$t/nobody" 2>&1 ||
	fail "uid 65534 (group $g65534) cannot ask the service: $(cat "$t/nobody")"
ns setpriv --reuid 65534 --regid 1 --clear-groups /usr/local/bin/npfctl status >"$t/daemon" 2>&1 &&
	fail "uid 65534 outside the socket's group was let in: $(cat "$t/daemon")"
grep -q "Permission denied" "$t/daemon" ||
	fail "uid 65534 outside the socket's group failed, but not for the socket's permission: $(cat "$t/daemon")"
echo "socket-group: $g65534's members reach the service, others do not"

# A libnpf client of the service: register two regions, fault them, hold them.
mkdir "$t/wl"
cp "$BIN/npf-workload" "$t/wl/"
ns env NPF_SOCKET=/run/npf/npfd.sock "$t/wl/npf-workload" --dir "$t/wl" --size 16 --touches 100 \
	--threads 1 --hold "$t/wl/hold" >"$t/wl.log" 2>&1 &
wl=$!
i=0
until [ -e "$t/wl/hold" ]; do
	i=$((i + 1)); [ $i -lt 600 ] || fail "workload did not finish its touches"
	kill -0 $wl 2>/dev/null || fail "workload died: $(cat "$t/wl.log")"
	sleep 0.05
done
ns /usr/local/bin/npfctl -j stats >"$t/stats.json" || fail "npfctl -j stats (installed) failed"
filled=$(jq '[.[] | .pages_zeroed + .pages_copied] | add' "$t/stats.json")
[ "${filled:-0}" -ge 200 ] || fail "the service filled $filled pages, want >= 200: $(cat "$t/stats.json")"
echo "workload through the service: $filled pages filled"
# The service may write its working-set records (npfd's default --ws-dir,
# /var/lib/npf/ws) although ProtectSystem=strict makes /var/lib read-only: the
# unit's StateDirectory. Tried in npfd's own mount namespace. (wsreplay itself
# records nothing here: its faults reach BPF with the host's pids, npfd knows
# the namespace's.)
ns nsenter -t "$pid" -m sh -c 'mkdir -p /var/lib/npf/ws && touch /var/lib/npf/ws/probe.ws' 2>"$t/state" ||
	fail "npfd's service cannot write its ws-dir /var/lib/npf/ws: $(cat "$t/state")"
echo "StateDirectory: the service writes /var/lib/npf/ws"

# Reload: poll-us changes live; the client stays connected; same process.
ns sh -c 'echo "poll-us = 7" >> /etc/npf/npfd.conf'
ns systemctl reload npfd || fail "systemctl reload npfd failed"
[ "$(ns systemctl show -P MainPID npfd)" = "$pid" ] || fail "reload restarted npfd"
ns /usr/local/bin/npfctl -j status | jq -e '.regions == 2' >/dev/null ||
	fail "regions lost across the reload"
i=0
until ns journalctl --no-pager -u npfd 2>/dev/null | grep -q "reload: poll-us: 100 -> 7"; do
	i=$((i + 1)); [ $i -lt 100 ] || fail "the journal does not show the reload applying poll-us"
	sleep 0.1
done
echo "reload: applied, MainPID $pid kept, clients kept"

# A bad file on reload changes nothing and says why.
ns sh -c 'echo "poll-us = fast" > /etc/npf/npfd.conf.bad; cat /etc/npf/npfd.conf >> /etc/npf/npfd.conf.bad'
ns cp /etc/npf/npfd.conf /etc/npf/npfd.conf.good
ns cp /etc/npf/npfd.conf.bad /etc/npf/npfd.conf
ns systemctl reload npfd || fail "systemctl reload with a bad file failed"
ns systemctl is-active npfd >/dev/null || fail "npfd not active after a bad reload"
i=0
until ns journalctl --no-pager -u npfd 2>/dev/null | grep -q "npfd.conf:1: poll-us: 'fast'.*keeping the running configuration"; do
	i=$((i + 1)); [ $i -lt 100 ] || fail "the journal does not show the refused reload"
	sleep 0.1
done
echo "bad reload: refused, npfd still active"
ns cp /etc/npf/npfd.conf.good /etc/npf/npfd.conf

touch "$t/wl/done"; rm -f "$t/wl/hold"
wait $wl || fail "workload failed: $(cat "$t/wl.log")"

# Stop: npfd unpins its maps and removes its socket; systemd removes /run/npf.
ns systemctl stop npfd || fail "systemctl stop npfd failed"
[ "$(ns systemctl is-active npfd)" = inactive ] || fail "npfd is not inactive after stop"
ns test -e /run/npf/npfd.sock && fail "the socket is left behind after stop"
ns test -e /run/npf && fail "/run/npf is left behind after stop"
left=$(ls "$pins" 2>/dev/null)
[ -z "$left" ] || fail "maps left pinned under $pins after stop: $left"
echo "stop: socket, /run/npf and pinned maps gone"

# A bad configuration keeps npfd from starting, with one line naming file:line.
ns sh -c 'echo "pol-us = 5" >> /etc/npf/npfd.conf'
ns systemctl start npfd 2>/dev/null && fail "npfd started with an unknown key in its configuration"
i=0
until ns journalctl --no-pager -u npfd 2>/dev/null | grep -q "/etc/npf/npfd.conf:[0-9]*: unknown key 'pol-us'"; do
	i=$((i + 1)); [ $i -lt 100 ] || fail "the journal does not name the bad line"
	sleep 0.1
done
ns journalctl --no-pager -u npfd | grep "unknown key" | tail -n 1
[ "$(ns systemctl show -P NRestarts npfd)" = 0 ] || fail "systemd restarted npfd after a configuration error"
echo ok
