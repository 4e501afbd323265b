#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# npfd killed with SIGKILL every second under load, restarted by systemd
# (the installed unit's Restart=), under a systemd booted in a namespace
# exactly as tests/ops_systemd.sh does it (read its comments: a bare systemd
# would clean the machine's /tmp). The load is restart_kill --client: a CPU
# workload (file-backed and anonymous regions) checking every word it
# touches; libnpf hands its regions to each new npfd.
set -u
[ "$(id -u)" -eq 0 ] || { echo "needs root (boots systemd in a namespace; npfd loads BPF)"; exit 77; }
[ -x /lib/systemd/systemd ] || { echo "systemd is not installed (/lib/systemd/systemd is missing)"; exit 77; }
for c in unshare nsenter jq; do
	command -v $c >/dev/null || { echo "$c is missing"; exit 77; }
done
O=${O:-build}
BIN=${NPF_BIN:-$PWD/$O/bin}
# Where the namespace sees the host's files: it mounts its own /run, /tmp,
# /var/tmp, /var/log and /var/lib/systemd, and the checkout may be under any.
t=$(mktemp -d /var/lib/npf-restart-systemd-XXXXXX)
pins=/sys/fs/bpf/npf-restart-systemd-$$
sd=
fail() {
	echo "FAIL: $*"
	if [ -n "$sd" ]; then
		echo "--- systemctl status npfd:"; ns systemctl status --no-pager -l npfd 2>&1 | tail -n 20
		echo "--- journal:"; ns journalctl --no-pager -u npfd 2>&1 | tail -n 30
	fi
	exit 1
}
cleanup() {
	[ -n "${wl:-}" ] && kill -9 "$wl" 2>/dev/null
	[ -n "$sd" ] && kill -9 "$sd" 2>/dev/null
	[ -n "${boot:-}" ] && wait "$boot" 2>/dev/null
	rm -f "$pins"/* 2>/dev/null; rmdir "$pins" 2>/dev/null
	rm -rf "$t"
}
trap cleanup EXIT
ns() { nsenter -t "$sd" -a "$@"; }

make -s install O="$O" DESTDIR="$t/root" PREFIX=/usr/local >"$t/install.log" 2>&1 ||
	{ cat "$t/install.log"; fail "make install failed"; }
# This test's npfd pins its maps away from any npfd on the host (bpffs is shared).
printf 'bpffs = %s\n' "$pins" >>"$t/root/etc/npf/npfd.conf"

mkdir -p "$t/ovl"
unshare -fpm --mount-proc --net sh -c '
	set -e
	# First everything that reads the scratch root: it may itself be under
	# /tmp (a checkout there), which the tmpfs mounts below hide.
	mount --bind "$1/root/usr/local" /usr/local
	mount -t tmpfs tmpfs "$1/ovl"
	mkdir "$1/ovl/upper" "$1/ovl/work"
	mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/ovl/upper,workdir=$1/ovl/work" /etc
	cp -r "$1/root/etc/npf" /etc/
	for d in /run /tmp /var/tmp /var/log /var/lib/systemd; do mount -t tmpfs tmpfs $d; done
	mount -o remount,bind,ro /sys
	for u in systemd-tmpfiles-setup.service systemd-tmpfiles-setup-dev.service \
		 systemd-tmpfiles-clean.service systemd-tmpfiles-clean.timer systemd-sysctl.service \
		 systemd-udevd.service systemd-udev-trigger.service systemd-udev-settle.service \
		 systemd-random-seed.service systemd-remount-fs.service systemd-modules-load.service \
		 systemd-binfmt.service systemd-firstboot.service systemd-machine-id-commit.service \
		 apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer; do
		ln -sf /dev/null /etc/systemd/system/$u
	done
	exec /lib/systemd/systemd --system --unit=basic.target' sh "$t" >"$t/boot.log" 2>&1 &
boot=$!
i=0
while [ -z "$sd" ]; do
	i=$((i + 1)); [ $i -lt 100 ] || { cat "$t/boot.log"; fail "systemd did not start"; }
	sleep 0.1
	sd=$(cat /proc/$boot/task/$boot/children 2>/dev/null | awk '{print $1}')
done
i=0
until state=$(ns systemctl is-system-running 2>/dev/null); [ "$state" = running ] || [ "$state" = degraded ]; do
	i=$((i + 1)); [ $i -lt 300 ] || { cat "$t/boot.log"; fail "systemd did not finish booting (state '$state')"; }
	sleep 0.1
done
echo "systemd booted as pid $sd (state $state)"


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
