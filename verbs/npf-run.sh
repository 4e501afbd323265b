#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# npf-run CMD [ARGS...]: run an unmodified libibverbs program with npf devices.
#
# In a private mount namespace (nothing on the host changes, nothing is
# created there: what it makes lives in a tmpfs mounted over /dev in that
# namespace, which disappears with it; for a user other than root, in a user
# namespace of its own too) it gives CMD:
#  - a sysfs tree (SYSFS_PATH) describing one RoCEv2 device per IPv4 address:
#    npf0, npf1, ... with GID ::ffff:a.b.c.d (libibverbs reads devices, ports,
#    GIDs and pkeys from there when the kernel has no RDMA stack);
#  - /dev/infiniband/uverbsN, character devices whose number matches sysfs
#    `dev` (1:7, /dev/full: the provider takes no kernel command, and any
#    command libibverbs would still write fails with ENOSPC);
#  - RDMAV_DRIVERS: the npf provider; LD_PRELOAD: its write() interposer for
#    completion channels; NPF_SOCKET is passed on (npfd serves ODP memory).
# Devices: NPF_VERBS_ADDRS="A B ..." (IPv4), default 127.0.0.1 127.0.0.2 then
# every other IPv4 address of the current network namespace.
set -eu

usage() {
	echo "usage: npf-run CMD [ARGS...]   (e.g. npf-run ibv_devinfo -v, npf-run ib_write_bw -d npf0 --odp)" >&2
	exit 2
}
[ $# -ge 1 ] || usage
case "$1" in -h | --help) usage ;; esac

here=$(cd "$(dirname "$0")" && pwd)
if [ -e "$here/../lib/libnpfverbs-rdmav34.so" ]; then
	lib=$(cd "$here/../lib" && pwd)
elif [ -e "$here/../lib/npf/libnpfverbs-rdmav34.so" ]; then
	lib=$(cd "$here/../lib/npf" && pwd)
else
	echo "npf-run: the npf provider libnpfverbs-rdmav34.so is not in $here/../lib (run make)" >&2
	exit 1
fi
# Root makes a mount namespace and device nodes. Any other user makes a user
# namespace of its own too, where it is root (its uid mapped to 0: npfd still
# sees its own uid), and binds the host's device nodes instead of making
# them: a user namespace may not make one.
if [ "$(id -u)" -eq 0 ]; then
	ns="--mount"
	rootless=0
else
	ns="--user --map-root-user --mount"
	rootless=1
	if ! unshare $ns true 2>/dev/null; then
		echo "npf-run: not root, and cannot make a user namespace (user.max_user_namespaces, or a kernel that refuses them to unprivileged users): run it as root" >&2
		exit 1
	fi
fi

if [ -n "${NPF_VERBS_ADDRS:-}" ]; then
	addrs=$(echo "$NPF_VERBS_ADDRS" | tr ',' ' ')
else
	addrs="127.0.0.1 127.0.0.2 $(ip -4 -o addr show 2>/dev/null | awk '{ sub("/.*", "", $4); print $4 }' |
		grep -v -x -e 127.0.0.1 -e 127.0.0.2 | tr '\n' ' ')"
fi
for a in $addrs; do
	case "$a" in
	*[!0-9.]* | "") echo "npf-run: '$a' in NPF_VERBS_ADDRS is not an IPv4 address" >&2; exit 2 ;;
	esac
done

# Runs inside the new mount namespace, then execs CMD.
inner='
set -eu
# /dev becomes a tmpfs holding a copy of the host /dev (nodes and links) with
# its submounts (pts, shm, mqueue, ...) bound back, plus /dev/infiniband and
# the sysfs tree; the working directory keeps the host /dev reachable while
# it is copied (the host /dev itself is not touched)
cwd=$(pwd)
cd /dev
mount -t tmpfs -o mode=0755,size=16m npf-run /dev
# --no-canonicalize: "./$m" must stay relative to the host /dev, not become /dev/$m
if [ "$NPF_RUN_ROOTLESS" = 0 ]; then
	cp -a -x ./. /dev/
	# RDMA devices of the host (a real HCA, rxe) are not for the command
	rm -rf /dev/infiniband
	for m in $(cd / && findmnt -rn -o TARGET | sed -n "s|^/dev/\([^/]*\)\$|\1|p" | sort -u); do
		[ -d "./$m" ] && mount --no-canonicalize --rbind "./$m" "/dev/$m" 2>/dev/null || true
	done
else
	# links copied, nodes and directories bound (with what is mounted under
	# them); not the RDMA devices of the host, nor its ptys: a ptmx bound alone
	# finds no devpts beside it, so the command gets a devpts of its own
	for m in $(ls -A); do
		case "$m" in infiniband | ptmx | pts) continue ;; esac
		if [ -L "./$m" ]; then
			cp -P "./$m" "/dev/$m"
		elif [ -d "./$m" ]; then
			mkdir "/dev/$m" && mount --no-canonicalize --rbind "./$m" "/dev/$m" 2>/dev/null || true
		else
			: > "/dev/$m" && mount --no-canonicalize --bind "./$m" "/dev/$m" 2>/dev/null || rm -f "/dev/$m"
		fi
	done
	mkdir /dev/pts
	mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /dev/pts && ln -s pts/ptmx /dev/ptmx || true
fi
cd "$cwd"
mkdir -p /dev/infiniband
t=/dev/.npf-run
s="$t/sys/class"
mkdir -p "$s/infiniband_verbs" "$s/infiniband"
echo 6 > "$s/infiniband_verbs/abi_version"
i=0
for a in $NPF_RUN_ADDRS; do
	d=npf$i
	if [ "$NPF_RUN_ROOTLESS" = 0 ]; then
		mknod /dev/infiniband/uverbs$i c 1 7
	else
		: > /dev/infiniband/uverbs$i
		mount --bind /dev/full /dev/infiniband/uverbs$i
	fi
	u="$s/infiniband_verbs/uverbs$i"
	mkdir -p "$u"
	echo "$d" > "$u/ibdev"
	echo 1:7 > "$u/dev"
	echo 1 > "$u/abi_version"
	p="$s/infiniband/$d"
	mkdir -p "$p/ports/1/gids" "$p/ports/1/pkeys" "$p/ports/1/gid_attrs/types" "$p/ports/1/gid_attrs/ndevs"
	echo "1: CA" > "$p/node_type"
	hex=$(echo "$a" | awk -F. "{ printf \"%02x%02x:%02x%02x\", \$1, \$2, \$3, \$4 }")
	echo "0200:4e50:$hex" > "$p/node_guid"
	cp "$p/node_guid" "$p/sys_image_guid"
	echo "npf-nic 1" > "$p/fw_ver"
	echo "npf software RNIC ($a)" > "$p/hca_type"
	echo "0000:0000:0000:0000:0000:ffff:$hex" > "$p/ports/1/gids/0"
	echo "RoCE v2" > "$p/ports/1/gid_attrs/types/0"
	ip -o -4 addr show 2>/dev/null | awk -v a="$a" "{ sub(\"/.*\", \"\", \$4); if (\$4 == a) { print \$2; exit } }" \
		> "$p/ports/1/gid_attrs/ndevs/0"
	echo 0xffff > "$p/ports/1/pkeys/0"
	echo "4: ACTIVE" > "$p/ports/1/state"
	echo "5: LinkUp" > "$p/ports/1/phys_state"
	echo Ethernet > "$p/ports/1/link_layer"
	echo 0x0 > "$p/ports/1/lid"
	echo 0x0 > "$p/ports/1/sm_lid"
	echo 0 > "$p/ports/1/lmc"
	echo "100 Gb/sec (4X EDR)" > "$p/ports/1/rate"
	i=$((i + 1))
done
export SYSFS_PATH="$t/sys"
export RDMAV_DRIVERS="$NPF_RUN_LIB/libnpfverbs"
export LD_PRELOAD="$NPF_RUN_LIB/libnpfverbs-preload.so${LD_PRELOAD:+:$LD_PRELOAD}"
rootless=$NPF_RUN_ROOTLESS uid=$NPF_RUN_UID gid=$NPF_RUN_GID
unset NPF_RUN_ADDRS NPF_RUN_LIB NPF_RUN_ROOTLESS NPF_RUN_UID NPF_RUN_GID
# not root in its namespace: the user itself again, in one more (HOME, ssh, mpirun)
[ "$rootless" = 0 ] || exec unshare --user --map-user="$uid" --map-group="$gid" -- "$@"
exec "$@"
'
# shellcheck disable=SC2086 # $ns is unshare's options
NPF_RUN_UID=$(id -u) NPF_RUN_GID=$(id -g) \
NPF_RUN_ADDRS="$addrs" NPF_RUN_LIB="$lib" NPF_RUN_ROOTLESS=$rootless exec unshare $ns \
	--propagation private sh -c "$inner" npf-run "$@"
