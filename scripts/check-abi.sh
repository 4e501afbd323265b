#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# libnpf's ABI, checked (make check runs this; make abi-baseline records it):
#  1. every function npf.h declares NPF_API is listed in client/libnpf.map,
#     and the map lists nothing npf.h does not declare;
#  2. the built libnpf.so exports exactly the map's names (nm -D), each
#     with the version node the map gives it;
#  3. abidiff (abigail-tools) finds no change against the recorded ABI,
#     client/libnpf.abi: no symbol removed or added, no type of the
#     interface changed (an opts struct, a record layout). struct npf_client
#     is opaque and not part of it (client/libnpf.abignore).
#   sh scripts/check-abi.sh [build/lib/libnpf.so]
#   sh scripts/check-abi.sh --record [build/lib/libnpf.so]   write client/libnpf.abi
set -u
cd "$(dirname "$0")/.."
record=0
[ "${1:-}" = --record ] && { record=1; shift; }
so=${1:-build/lib/libnpf.so}
map=client/libnpf.map
hdr=client/npf.h
abi=client/libnpf.abi
supp=client/libnpf.abignore

[ -f "$so" ] || { echo "check-abi: $so does not exist (run make first)" >&2; exit 1; }
if [ $record -eq 1 ]; then
	abidw --no-corpus-path --no-show-locs --no-comp-dir-path --out-file "$abi" "$so" || exit 1
	echo "check-abi: recorded the ABI of $so in $abi"
	exit 0
fi

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# NPF_API declarations: the name before the first '(' on the NPF_API line.
sed -n 's/^NPF_API[^(]*[ *]\([a-z_][a-z0-9_]*\)(.*/\1/p' "$hdr" | sort -u >"$tmp/declared"
# Map: "name;" lines, with the node they are in ("LIBNPF_0.1 {").
awk '/^[A-Z][A-Z0-9_.]* *\{/ { node = $1 } /^[ \t]+[a-z_][a-z0-9_]*;/ { sub(/;.*/, "", $1); print $1 "@@" node }' \
	"$map" | sort -u >"$tmp/map@"
sed 's/@@.*//' "$tmp/map@" >"$tmp/map"
# Exported: defined dynamic symbols other than the version nodes themselves.
nm -D --defined-only "$so" | awk '$2 != "A" { print $3 }' | sort -u >"$tmp/exported@"

missing=$(comm -23 "$tmp/declared" "$tmp/map")
[ -n "$missing" ] && { fail=1; echo "check-abi: declared NPF_API in $hdr but not in $map (add them to a new version node):" $missing; }
extra=$(comm -13 "$tmp/declared" "$tmp/map")
[ -n "$extra" ] && { fail=1; echo "check-abi: listed in $map but not declared NPF_API in $hdr:" $extra; }
unexp=$(comm -23 "$tmp/map@" "$tmp/exported@")
[ -n "$unexp" ] && { fail=1; echo "check-abi: in $map but not exported by $so (is the function defined, and declared NPF_API?):" $unexp; }
leak=$(comm -13 "$tmp/map@" "$tmp/exported@")
[ -n "$leak" ] && { fail=1; echo "check-abi: exported by $so but not in $map:" $leak; }

if ! command -v abidiff >/dev/null 2>&1; then
	echo "check-abi: abidiff not found (Debian: abigail-tools): type layouts not compared"
elif [ ! -f "$abi" ]; then
	fail=1
	echo "check-abi: no recorded ABI ($abi): run 'make abi-baseline' and commit it"
else
	readelf -S "$so" | grep -q '\.debug_info' ||
		echo "check-abi: $so has no debug info (CFLAGS without -g): symbols compared, types not"
	abidiff --suppressions "$supp" "$abi" "$so" >"$tmp/abidiff"
	rc=$?
	if [ $rc -ne 0 ]; then
		fail=1
		echo "check-abi: libnpf's ABI differs from $abi (abidiff exit $rc):"
		sed 's/^/    /' "$tmp/abidiff"
		echo "check-abi: a layout change of a released type breaks every program built"
		echo "  against it: add a field at the end of an opts struct (sz tells the library"
		echo "  which fields a caller knows) instead. A new function, once it is in a new"
		echo "  node of $map, is recorded with 'make abi-baseline' (commit $abi)."
	fi
fi
[ $fail -eq 0 ] && echo "check-abi: libnpf exports $(wc -l <"$tmp/map") symbols, as npf.h, $map and $abi say"
exit $fail
