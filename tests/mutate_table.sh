#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Every break of scripts/mutate.sh's table still applies to the code as it
# is: a change that moves the code a break patches leaves that break
# patching nothing, and the behaviour it defended unchecked until someone
# runs make mutate (16 had gone so by session 29). Seconds: no build.
set -u
cd "$(dirname "$0")/.."
sh scripts/mutate.sh --check-table
