#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# npfd's configuration: precedence (defaults < file < command line) as
# --check-config prints it, and every kind of bad file refused with one line
# naming the file, the line and the problem, before npfd touches anything.
set -u
BIN=${NPF_BIN:-build/bin}
dir=$(mktemp -d /tmp/npf-test-config-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
c="$dir/npfd.conf"

# Defaults, then the file, then the command line.
"$BIN/npfd" --check-config --config /dev/null >"$dir/out" || fail "--check-config with an empty file failed"
grep -qx "poll-us = 100" "$dir/out" || fail "default poll-us is not 100: $(cat "$dir/out")"
printf '# a comment\n\n  poll-us = 50  \nstaging-pages=2048\nquiet = yes\nsocket = /tmp/x/npfd.sock\n' >"$c"
"$BIN/npfd" --check-config --config "$c" >"$dir/out" || fail "--check-config failed: $(cat "$dir/out")"
grep -qx "poll-us = 50" "$dir/out" || fail "the file's poll-us is not in effect: $(cat "$dir/out")"
grep -qx "staging-pages = 2048" "$dir/out" || fail "the file's staging-pages is not in effect"
grep -qx "quiet = yes" "$dir/out" || fail "the file's quiet is not in effect"
"$BIN/npfd" --check-config --config "$c" --poll-us 7 -v >"$dir/out" || fail "--check-config with options failed"
grep -qx "poll-us = 7" "$dir/out" || fail "the command line does not override the file: $(cat "$dir/out")"
grep -qx "quiet = no" "$dir/out" && grep -qx "verbose = 1" "$dir/out" ||
	fail "-v on the command line does not replace the file's quiet: $(cat "$dir/out")"
grep -qx "staging-pages = 2048" "$dir/out" || fail "an option not on the command line lost the file's value"

# Each bad file: exit 2, one line, naming file:line and the problem.
bad() { # content, expected pattern
	printf "$1" >"$c"
	"$BIN/npfd" --config "$c" --socket "$dir/s" --bpffs /sys/fs/bpf/npf-test-config-$$ \
		>"$dir/out" 2>"$dir/err"
	rc=$?
	[ $rc -eq 2 ] || fail "config '$1': exit $rc, want 2 ($(cat "$dir/err"))"
	[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "config '$1': not one line: $(cat "$dir/err")"
	grep -q -- "$2" "$dir/err" || fail "config '$1': '$(cat "$dir/err")' does not match '$2'"
	echo "refused: $(cat "$dir/err")"
}
bad 'poll-us = 5\npol-us = 5\n' "^npfd: $c:2: unknown key 'pol-us'"
bad 'poll-us = fast\n' "^npfd: $c:1: poll-us: 'fast' is not a number from 0 to 100000"
bad '\n\nstaging-pages = 0\n' "^npfd: $c:3: staging-pages: '0' is not a number from 1 to 65536"
bad 'quiet = maybe\n' "$c:1: quiet: 'maybe' is not yes or no"
bad 'poll-us 5\n' "$c:1: 'poll-us 5' is not 'key = value'"
bad 'poll-us = 5\npoll-us = 6\n' "$c:2: 'poll-us' is already set on line 1"
bad 'socket = relative/npfd.sock\n' "$c:1: socket: 'relative/npfd.sock' is not an absolute path"
bad 'config = /etc/other.conf\n' "$c:1: config: is a command-line option"
bad 'verbose =\n' "$c:1: verbose: no value after '='"
[ -e "$dir/s" ] && fail "npfd created its socket despite a bad configuration"
[ -e /sys/fs/bpf/npf-test-config-$$ ] && fail "npfd pinned maps despite a bad configuration"

# An unreadable file named with --config is an error; a missing default is not.
"$BIN/npfd" --config "$dir/missing.conf" --check-config >/dev/null 2>"$dir/err"
[ $? -eq 2 ] || fail "a missing --config file is not an error"
grep -q "$dir/missing.conf: cannot read the configuration file: No such file" "$dir/err" ||
	fail "missing file: $(cat "$dir/err")"
echo "refused: $(cat "$dir/err")"
# Unreadable: root reads any file, so read it as nobody when we are root.
echo "poll-us = 5" >"$c"; chmod 600 "$c"
as=""
[ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null && as="setpriv --reuid=nobody --regid=nogroup --clear-groups"
if [ "$(id -u)" -ne 0 ] || [ -n "$as" ]; then
	[ "$(id -u)" -ne 0 ] && chmod 000 "$c"
	$as "$BIN/npfd" --config "$c" --check-config >/dev/null 2>"$dir/err"
	[ $? -eq 2 ] && grep -q "$c: cannot read the configuration file: Permission denied" "$dir/err" ||
		fail "unreadable file: $(cat "$dir/err")"
	echo "refused: $(cat "$dir/err")"
fi
"$BIN/npfd" --config "$dir" --check-config >/dev/null 2>"$dir/err"
[ $? -eq 2 ] && grep -q "$dir: cannot read the configuration file" "$dir/err" ||
	fail "a directory as --config: $(cat "$dir/err")"
echo "refused: $(cat "$dir/err")"

# --help lists every configuration key as a long option.
for k in socket bpffs foreground staging-pages poll-us verbose quiet; do
	"$BIN/npfd" --help | grep -q -- "--$k" || fail "--help does not list --$k"
done
echo ok
