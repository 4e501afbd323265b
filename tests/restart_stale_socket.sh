#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# npfd's socket path: a live npfd keeps it, a dead one's does not block.
#  - npfd B started on the socket of a running npfd A exits non-zero, and A
#    still answers on it;
#  - a socket that still accepts connections but whose listener is gone
#    (what a SIGKILLed npfd leaves while the kernel tears its io_uring down
#    in a worker: restart_kill met it) is replaced: npfd C starts on it and
#    answers there.
set -u
. "$(dirname "$0")/lib/npfd.sh"
command -v python3 >/dev/null || { echo "python3 is missing (make installs it)"; exit 77; }

npfd_start
a=$npfd
"$BIN/npfd" --config /dev/null --foreground --socket "$NPF_SOCKET" --bpffs "$pins-b" \
	2>"$dir/b.log" &
b=$!
i=0
while kill -0 $b 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 200 ]; then kill $b; fail "npfd B still runs on A's socket after 10 s"; fi
	sleep 0.05
done
wait $b && fail "npfd B exited 0 on a live npfd's socket: $(cat "$dir/b.log")"
rm -rf "$pins-b" 2>/dev/null
pid=$("$BIN/npfctl" -j status | jq '.npfd_pid') || fail "npfd A stopped answering after B"
[ "$pid" = "$a" ] || fail "the socket is answered by pid $pid, not npfd A $a"

# A listener whose process is gone: a child listens, hands the socket to a
# grandchild that keeps it open (and never accepts), and exits.
kill "$a"
wait "$a" || fail "npfd A did not stop cleanly"
npfd=
python3 - "$NPF_SOCKET" "$dir/holder.pid" <<'EOF' || fail "cannot make the stale listener"
import os, socket, sys, time
path, pidfile = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(path)
    s.listen(8)
    if os.fork() == 0:
        open(pidfile, "w").write(str(os.getpid()))
        time.sleep(60)
        os._exit(0)
    os._exit(0)
os.wait()
while not os.path.exists(pidfile) or not open(pidfile).read():
    time.sleep(0.01)
EOF
holder=$(cat "$dir/holder.pid")
trap 'kill $holder 2>/dev/null; npf_cleanup' EXIT
python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect(sys.argv[1])" \
	"$NPF_SOCKET" || fail "the stale listener does not accept (nothing to test)"
npfd_start # returns at once: the stale socket file is there
c=$npfd
i=0
until [ "$(NPF_TIMEOUT_MS=200 "$BIN/npfctl" -j status 2>/dev/null | jq '.npfd_pid')" = "$c" ]; do
	i=$((i + 1))
	kill -0 "$c" 2>/dev/null || fail "npfd C exited: the stale socket blocked it"
	[ $i -lt 100 ] || fail "npfd C does not answer on the replaced socket"
	sleep 0.1
done
echo PASS
