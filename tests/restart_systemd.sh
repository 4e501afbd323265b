#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# npfd killed with SIGKILL every second for a minute under load, restarted
# by systemd (the installed unit's Restart=), under a systemd booted in a
# namespace by tests/lib/systemd.sh (read its comments: a bare systemd
# would clean the machine's /tmp). The load is restart_kill --client: a CPU
# workload (file-backed and anonymous regions) checking every word it
# touches and counting its faults, and a software-NIC pair moving data by
# RDMA WRITE into a region whose pages are dropped every round, checking
# every byte and counting its page requests against their answers. npfd
# runs in that systemd's pid namespace: the NIC's page requests reach it
# through BPF, which must name processes by npfd's pids
# (bpf/npf_collect.bpf.c, npf_pidns_ino). libnpf hands its regions and
# devices to each new npfd.
#   RESTART_KILLS=N   kills (default 60), RESTART_INTERVAL_MS (default 1000)
set -u
wl=
sd_cleanup_extra() { [ -n "$wl" ] && kill -9 "$wl" 2>/dev/null; }
. tests/lib/systemd.sh
sd_boot restart-systemd

KILLS=${RESTART_KILLS:-60}
INTERVAL_MS=${RESTART_INTERVAL_MS:-1000}
ns systemctl start npfd || fail "systemctl start npfd failed"
ns systemctl is-active npfd >/dev/null || fail "npfd is not active"
# The unit sets npfd's limits (issue 10): descriptors for its per-uid
# limits to bite first, memlock for its io_uring and BPF maps. Without
# CAP_SYS_RESOURCE (a sandboxed test machine) systemd cannot raise a hard
# limit above its own: npfd then has systemd's.
pid=$(ns systemctl show -P MainPID npfd)
unit_nofile=$(ns systemctl show -P LimitNOFILE npfd)
unit_memlock=$(ns systemctl show -P LimitMEMLOCK npfd)
nofile=$(ns awk '/^Max open files/ {print $4}' /proc/$pid/limits)
memlock=$(ns awk '/^Max locked memory/ {print $4}' /proc/$pid/limits)
sd_nofile=$(awk '/^Max open files/ {print $5}' /proc/$sd/limits)
sd_memlock=$(awk '/^Max locked memory/ {print $5}' /proc/$sd/limits)
echo "the unit's limits: $unit_nofile descriptors, memlock $unit_memlock; npfd has $nofile and $memlock (its systemd's hard limits: $sd_nofile, $sd_memlock)"
[ "$unit_nofile" = 65536 ] || fail "the unit sets LimitNOFILE=$unit_nofile, want 65536"
[ "$unit_memlock" = infinity ] || fail "the unit sets LimitMEMLOCK=$unit_memlock, want infinity"
[ "$nofile" = 65536 ] || { [ "$sd_nofile" -lt 65536 ] && [ "$nofile" = "$sd_nofile" ]; } ||
	fail "npfd runs with $nofile descriptors, not the unit's 65536 (nor its systemd's cap $sd_nofile)"
[ "$memlock" = unlimited ] || [ "$memlock" = "$sd_memlock" ] ||
	fail "npfd runs with memlock $memlock, not the unit's infinity (nor its systemd's cap $sd_memlock)"
mkdir "$t/wl"
cp "${NPF_TESTS:-$PWD/$O/tests}/restart_kill" "$t/wl/" || fail "no restart_kill binary"
# The workload runs until $t/wl/stop appears (at most a generous bound).
ns env NPF_SOCKET=/run/npf/npfd.sock "$t/wl/restart_kill" --client $((KILLS * 3 + 60)) "$t/wl" \
	>"$t/wl.log" 2>&1 &
wl=$!
wlog() { grep -v "^libnpf: .*reconnect" "$t/wl.log" | tail -n 30; }
i=0
until grep -q "^workloads running" "$t/wl.log" 2>/dev/null; do
	i=$((i + 1)); [ $i -lt 600 ] || fail "the workload did not start: $(wlog)"
	kill -0 $wl 2>/dev/null || fail "the workload died: $(wlog)"
	sleep 0.05
done
ms() { echo $(($(date +%s%N) / 1000000)); }
k=0 first=0 last=0 gapmax=0
while [ $k -lt $KILLS ]; do
	# a kill every INTERVAL_MS, kill to kill (systemd's restart and the
	# clients' hand-over inside the interval; on a machine so loaded that
	# they take longer, the next kill follows them at once: the gaps are
	# printed)
	if [ $k -gt 0 ]; then
		while [ $(($(ms) - last)) -lt $INTERVAL_MS ]; do sleep 0.02; done
	fi
	kill -0 $wl 2>/dev/null || fail "the workload died after $k kills: $(wlog)"
	pid=$(ns systemctl show -P MainPID npfd)
	[ "${pid:-0}" -gt 0 ] || fail "npfd has no main pid before kill $k"
	now=$(ms)
	[ $k -gt 0 ] && [ $((now - last)) -gt $gapmax ] && gapmax=$((now - last))
	[ $k -eq 0 ] && first=$now
	last=$now
	ns kill -9 "$pid"
	i=0
	until new=$(ns systemctl show -P MainPID npfd) && [ "${new:-0}" -gt 0 ] && [ "$new" != "$pid" ] &&
		[ "$(ns systemctl is-active npfd)" = active ]; do
		i=$((i + 1)); [ $i -lt 400 ] || fail "systemd did not restart npfd after kill $k"
		sleep 0.05
	done
	# The next kill hits an npfd serving every client: all four regions
	# handed to it (the CPU workload's two, each NIC side's one).
	i=0
	until [ "$(ns /usr/local/bin/npfctl -j status 2>/dev/null | jq .regions)" = 4 ]; do
		i=$((i + 1)); [ $i -lt 400 ] || fail "the clients' regions were not handed to npfd within 20 s of restart $k"
		sleep 0.05
	done
	k=$((k + 1))
done
touch "$t/wl/stop"
restarts=$(ns systemctl show -P NRestarts npfd)
echo "npfd killed $KILLS times in $((last - first)) ms (at most $gapmax ms apart), systemd restarted it $restarts times"
[ "$restarts" -ge $KILLS ] || fail "NRestarts is $restarts after $KILLS kills"
wait $wl; rc=$?; wl=
grep -v "libnpf: " "$t/wl.log" | tail -n 8
[ $rc -eq 0 ] || fail "the workload failed (exit $rc): $(wlog)"
line=$(grep '^reconnects ' "$t/wl.log")
rec=$(echo "$line" | awk '{print $2}'); served=$(echo "$line" | awk '{print $4}')
faults=$(echo "$line" | awk '{print $6}')
[ "${rec:-0}" -ge $KILLS ] || fail "the workload reconnected ${rec:-0} times for $KILLS kills"
[ "${served:-0}" -gt 0 ] || fail "the last npfd served none of the workload's faults"
[ "${faults:-0}" -gt 0 ] || fail "the workload counted no faults"
grep -q "^nic target: .* answers" "$t/wl.log" || fail "the NIC target did not report its page requests"
ns systemctl stop npfd || fail "systemctl stop npfd failed"
echo ok
