#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Bad input to npf devices through plain libibverbs calls
# (tests/helpers/verbs_bad_input.c): an unknown QP attribute, RTR without a
# GID, a QP connected to a GID nobody owns, an on-demand MR deregistered
# while the peer's WRITE into it waits for npfd. Clear errors, error
# completions, nothing hangs.
set -u
. "$(dirname "$0")/lib/verbs.sh"
h="${NPF_TESTS:-build/tests}/helpers/verbs_bad_input"
[ -x "$h" ] || { echo "$h is not built (make verbs)"; exit 77; }
npfd_start
NPFD_PID=$npfd NOBODY_GID_ADDR="127.91.$o.99" timeout 120 "$BIN/npf-run" "$h" >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
[ $rc -eq 0 ] || fail "verbs_bad_input exited $rc"
grep -q "^ok$" "$dir/out" || fail "verbs_bad_input did not finish"
echo ok
