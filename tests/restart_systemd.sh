#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# npfd killed with SIGKILL every second under load, restarted by systemd
# (the installed unit's Restart=), under a systemd booted in a namespace
# by tests/lib/systemd.sh (read its comments: a bare systemd would clean
# the machine's /tmp). The load is restart_kill --client: a CPU
# workload (file-backed and anonymous regions) checking every word it
# touches; libnpf hands its regions to each new npfd.
set -u
wl=
sd_cleanup_extra() { [ -n "$wl" ] && kill -9 "$wl" 2>/dev/null; }
. tests/lib/systemd.sh
sd_boot restart-systemd

KILLS=${RESTART_KILLS:-12}
ns systemctl start npfd || fail "systemctl start npfd failed"
ns systemctl is-active npfd >/dev/null || fail "npfd is not active"
mkdir "$t/wl"
cp "${NPF_TESTS:-$PWD/$O/tests}/restart_kill" "$t/wl/" || fail "no restart_kill binary"
secs=$((KILLS + 6))
# CPU only: the NIC's page requests reach npfd through BPF, which names
# processes by their pids in the machine's pid namespace, and npfd runs in
# this systemd's own (restart_kill drives the NIC through restarts instead).
ns env NPF_SOCKET=/run/npf/npfd.sock "$t/wl/restart_kill" --client $secs "$t/wl" --no-nic \
	>"$t/wl.log" 2>&1 &
wl=$!
wlog() { grep -v "^libnpf: " "$t/wl.log" | tail -n 30; }
i=0
until grep -q "^workloads running" "$t/wl.log"; do
	i=$((i + 1)); [ $i -lt 600 ] || fail "the workload did not start: $(wlog)"
	kill -0 $wl 2>/dev/null || fail "the workload died: $(wlog)"
	sleep 0.05
done
k=0
while [ $k -lt $KILLS ]; do
	pid=$(ns systemctl show -P MainPID npfd)
	[ "${pid:-0}" -gt 0 ] || fail "npfd has no main pid before kill $k"
	ns kill -9 "$pid"
	i=0
	until new=$(ns systemctl show -P MainPID npfd) && [ "${new:-0}" -gt 0 ] && [ "$new" != "$pid" ] &&
		[ "$(ns systemctl is-active npfd)" = active ]; do
		i=$((i + 1)); [ $i -lt 200 ] || fail "systemd did not restart npfd after kill $k"
		sleep 0.05
	done
	k=$((k + 1))
	sleep 1
done
restarts=$(ns systemctl show -P NRestarts npfd)
echo "npfd killed $KILLS times, systemd restarted it $restarts times"
[ "$restarts" -ge $KILLS ] || fail "NRestarts is $restarts after $KILLS kills"
wait $wl; rc=$?; wl=
cat "$t/wl.log" | grep -v "libnpf: " | tail -n 5
[ $rc -eq 0 ] || fail "the workload failed (exit $rc): $(wlog)"
line=$(grep '^reconnects ' "$t/wl.log")
rec=$(echo "$line" | awk '{print $2}'); served=$(echo "$line" | awk '{print $4}')
[ "${rec:-0}" -ge $KILLS ] || fail "the workload reconnected ${rec:-0} times for $KILLS kills"
[ "${served:-0}" -gt 0 ] || fail "the last npfd served none of the workload's faults"
ns systemctl stop npfd || fail "systemctl stop npfd failed"
echo ok
