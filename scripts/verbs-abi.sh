#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Refuse to build the npf libibverbs provider against a libibverbs whose
# private provider ABI is not the one verbs/verbs_abi.h declares.
set -eu
want=$1
lib=$(ldconfig -p 2>/dev/null | awk '/libibverbs\.so\.1 .*x86-64|libibverbs\.so\.1 \(libc6,x86-64\)/ { print $NF; exit }')
[ -n "$lib" ] || lib=/usr/lib/x86_64-linux-gnu/libibverbs.so.1
ver=$(dpkg-query -W -f='${Version}' libibverbs1 2>/dev/null || echo unknown)
if [ ! -e "$lib" ] || [ ! -e /usr/include/infiniband/verbs.h ]; then
	echo "npf verbs: libibverbs and its headers are missing (apt-get install libibverbs-dev)" >&2
	exit 1
fi
if ! objdump -T "$lib" | grep -q "IBVERBS_PRIVATE_$want[[:space:]].*verbs_register_driver_$want\$"; then
	have=$(objdump -T "$lib" | sed -n 's/.*IBVERBS_PRIVATE_\([0-9]*\).*verbs_register_driver_.*/\1/p' | head -n 1)
	echo "npf verbs: $lib (libibverbs1 $ver) has provider ABI IBVERBS_PRIVATE_${have:-?};" \
		"npf's provider is written for IBVERBS_PRIVATE_$want (rdma-core 44, Debian 12)." >&2
	echo "npf verbs: its private structures (verbs/verbs_abi.h) would not match: refusing to build it." \
		"Install rdma-core 44 or port verbs/verbs_abi.h to this release." >&2
	exit 1
fi
