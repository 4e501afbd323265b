#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Asynchronous events of npf devices through Debian's libibverbs
# (tests/helpers/verbs_async.c under npf-run): COMM_EST, QP_ACCESS_ERR,
# QP_REQ_ERR, CQ_ERR and QP_FATAL, each naming the right QP or CQ through
# ibv_get_async_event; destroy waits for acknowledgements and discards
# events nobody read.
set -u
. "$(dirname "$0")/lib/verbs.sh"
h="${NPF_TESTS:-build/tests}/helpers/verbs_async"
[ -x "$h" ] || { echo "$h is not built (make verbs)"; exit 77; }
npfd_start
timeout 60 "$BIN/npf-run" "$h" >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
[ $rc -eq 0 ] || fail "verbs_async exited $rc"
grep -q "^ok$" "$dir/out" || fail "verbs_async did not finish"
echo ok
