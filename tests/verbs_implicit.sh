#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# A peer's RDMA WRITE and READ through an implicit on-demand MR's rkey
# (tests/helpers/verbs_implicit.c under npf-run): bytes checked, a WRITE
# where nothing is mapped refused with REM_ACCESS_ERR, and the target's NIC
# (npf1) raised page requests that npfd answered: the child MRs made for
# the peer's ranges are served on demand, nothing pinned.
set -u
. "$(dirname "$0")/lib/verbs.sh"
h="${NPF_TESTS:-build/tests}/helpers/verbs_implicit"
[ -x "$h" ] || { echo "$h is not built (make verbs)"; exit 77; }
npfd_start
timeout 60 "$BIN/npf-run" "$h" >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
[ $rc -eq 0 ] || fail "verbs_implicit exited $rc"
grep -q "^ok$" "$dir/out" || fail "verbs_implicit did not finish"
set -- $(grep "npf verbs: npf1:" "$dir/out" | vx_nic_faults /dev/stdin)
[ "${1:-0}" -gt 0 ] && [ "${2:-0}" -ge "$1" ] ||
	fail "npf1 (the implicit MR's NIC) raised ${1:-no} page requests, npfd answered ${2:-none}"
echo "npf1: $1 page requests, $2 answered by npfd"
echo ok
