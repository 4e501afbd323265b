# SPDX-License-Identifier: GPL-2.0
# Sourced by the tests that run npfd as the installed unit: a systemd booted
# as PID 1 of its own PID, mount and network namespaces, with npf installed
# (make install) into a scratch root bound over /usr/local there.
#
# A systemd booted bare in a namespace still believes it owns the machine
# and sets up what it believes is its machine (tmpfiles empties /tmp, udev
# re-triggers devices, sysctl writes /proc/sys). So before systemd starts,
# /run, /tmp, /var/tmp, /var/log, /var/lib/systemd and /var/lib/npf (the
# unit's StateDirectory) become tmpfs, /sys is read-only (systemd then skips
# udev, as in a container; bpffs and tracefs are their own mounts and stay
# writable), /etc is an overlay whose changes stay in the namespace, and the
# units that touch shared state are masked there.
#
#   sd_boot NAME      install, boot; sets $t (scratch dir), $pins, $sd (its PID 1)
#   ns CMD...         run CMD in the namespace (systemctl, journalctl, ...)
#   fail MESSAGE      print, show the unit's status and journal, exit 1
# A test may define sd_cleanup_extra (called first on exit).
[ "$(id -u)" -eq 0 ] || { echo "needs root (boots systemd in a namespace; npfd loads BPF)"; exit 77; }
[ -x /lib/systemd/systemd ] || { echo "systemd is not installed (/lib/systemd/systemd is missing)"; exit 77; }
for c in unshare nsenter jq; do
	command -v $c >/dev/null || { echo "$c is missing"; exit 77; }
done
O=${O:-build}
BIN=${NPF_BIN:-$PWD/$O/bin}
sd= boot= t= pins= made_state=

fail() {
	echo "FAIL: $*"
	if [ -n "$sd" ]; then
		echo "--- systemctl status npfd:"; ns systemctl status --no-pager -l npfd 2>&1 | tail -n 20
		echo "--- journal:"; ns journalctl --no-pager -u npfd 2>&1 | tail -n 30
	fi
	exit 1
}

sd_cleanup() {
	command -v sd_cleanup_extra >/dev/null && sd_cleanup_extra
	[ -n "$sd" ] && kill -9 "$sd" 2>/dev/null
	[ -n "$boot" ] && wait "$boot" 2>/dev/null
	[ -n "$made_state" ] && rmdir /var/lib/npf 2>/dev/null
	[ -n "$pins" ] && { rm -f "$pins"/* 2>/dev/null; rmdir "$pins" 2>/dev/null; }
	[ -n "$t" ] && rm -rf "$t"
}
trap sd_cleanup EXIT
# A test stopped by a signal (the runner's timeout sends SIGTERM) cleans up
# too: dash runs no EXIT trap on a signal it does not trap, and a systemd
# left booted in its namespace runs on, its npfd pinned in bpffs.
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP

ns() { nsenter -t "$sd" -a "$@"; }

sd_boot() {
	# Where the namespace sees the host's files: it mounts its own /run, /tmp,
	# /var/tmp, /var/log and /var/lib/systemd, and the checkout may be under any.
	t=$(mktemp -d "/var/lib/npf-$1-XXXXXX")
	pins=/sys/fs/bpf/npf-$1-$$
	make -s install O="$O" DESTDIR="$t/root" PREFIX=/usr/local >"$t/install.log" 2>&1 ||
		{ cat "$t/install.log"; fail "make install failed"; }
	# This test's npfd pins its maps away from any npfd on the host (bpffs is shared).
	printf 'bpffs = %s\n' "$pins" >>"$t/root/etc/npf/npfd.conf"
	mkdir -p "$t/ovl"
	# The unit's StateDirectory: a tmpfs in the namespace (its mount point is
	# the only trace on the host, removed afterwards when this test made it).
	[ -d /var/lib/npf ] || { mkdir /var/lib/npf && made_state=1; }
	unshare -fpm --mount-proc --net sh -c '
		set -e
		# First everything that reads the scratch root: it may itself be under
		# /tmp (a checkout there), which the tmpfs mounts below hide.
		mount --bind "$1/root/usr/local" /usr/local
		mount -t tmpfs tmpfs "$1/ovl"
		mkdir "$1/ovl/upper" "$1/ovl/work"
		mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/ovl/upper,workdir=$1/ovl/work" /etc
		cp -r "$1/root/etc/npf" /etc/
		for d in /run /tmp /var/tmp /var/log /var/lib/systemd /var/lib/npf; do mount -t tmpfs tmpfs $d; done
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
}
