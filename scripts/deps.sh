#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Install the Debian packages npf builds, tests and benchmarks with.
# Idempotent and quiet when everything is present; says what it installs.
set -eu

PKGS="clang llvm gcc make pkg-config libbpf-dev bpftool liburing-dev libelf-dev zlib1g-dev \
libsystemd-dev iproute2 util-linux python3 python3-prometheus-client jq gnuplot-nox \
abigail-tools clang-format libibverbs-dev ibverbs-utils rdma-core perftest tshark bindfs"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "npf: missing Debian packages:$missing" >&2
	echo "npf: run 'sudo apt-get install$missing' (or run make as root)" >&2
	exit 1
fi
echo "npf: installing Debian packages:$missing"
export DEBIAN_FRONTEND=noninteractive
# tshark pulls in wireshark-common, which asks whether non-root users may capture:
# answer "no" up front so the install never stops at a prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
if ! apt-get install -y -qq $missing >/tmp/npf-apt.log 2>&1; then
	apt-get update -qq >>/tmp/npf-apt.log 2>&1 || true
	if ! apt-get install -y -qq $missing >>/tmp/npf-apt.log 2>&1; then
		echo "npf: apt-get install failed; see /tmp/npf-apt.log" >&2
		tail -n 5 /tmp/npf-apt.log >&2
		exit 1
	fi
fi
