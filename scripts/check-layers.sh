#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The layers of daemon/, lowest first (docs/design.md, "Layers"): a file may
# call and include only files of layers below its own. The call graph comes
# from the built objects (nm: which object's undefined symbols another
# object defines), the include graph from the sources (#include "x.h" is an
# arrow to module x: x.c, or x.h alone for a header without a .c). Prints
# the graph with -v; fails on an arrow that points up or sideways, and on a
# daemon file no layer names (a new file must be given its place here).
#
#   sh scripts/check-layers.sh [-v] [BUILD_DIR]     (make check-layers)
set -eu
cd "$(dirname "$0")/.."

# One line per layer, lowest first; the files of a line do not call each other.
LAYERS='
list log holes bitmap
util objects
ids wait verifier_log policy_object wire_check swapstore mmcall layout
config
loop
busypoll
collect
moved
region
policy
runs
resolve
mmwatch
device wsstore
evict
memcg
control
main
'

verbose=0
[ "${1:-}" = -v ] && { verbose=1; shift; }
O=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "$LAYERS" | awk 'NF { n++; for (i = 1; i <= NF; i++) print $i, n }' | sort >"$tmp/layer"

fail=0
# every daemon file has a layer
for f in daemon/*.c daemon/*.h; do
	m=$(basename "$f"); m=${m%.*}
	if ! grep -q "^$m " "$tmp/layer"; then
		echo "check-layers: $f is in no layer: give it its place in scripts/check-layers.sh (LAYERS) and docs/design.md" >&2
		fail=1
	fi
done

# calls: symbol -> defining module, then each object's undefined symbols
: >"$tmp/defs"
: >"$tmp/uses"
for c in daemon/*.c; do
	m=$(basename "$c" .c)
	o=$O/obj/daemon/$m.o
	if [ ! -f "$o" ]; then
		echo "check-layers: $o is missing: build first (make)" >&2
		exit 1
	fi
	nm -g --defined-only "$o" | awk -v m="$m" 'NF == 3 { print $3, m }' >>"$tmp/defs"
	nm -u "$o" | awk -v m="$m" '{ print $2, m }' >>"$tmp/uses"
done
sort -o "$tmp/defs" "$tmp/defs"
sort -o "$tmp/uses" "$tmp/uses"
join "$tmp/uses" "$tmp/defs" | awk '$2 != $3 { print $2, $3, "calls", $1 }' >"$tmp/arrows"

# includes: "x.h" of a daemon module
for f in daemon/*.c daemon/*.h; do
	m=$(basename "$f"); m=${m%.*}
	sed -n 's/^#include "\([^"]*\)\.h".*/\1/p' "$f" | while read -r h; do
		if [ -f "daemon/$h.h" ] && [ "$h" != "$m" ]; then
			echo "$m $h includes $h.h ($f)"
		fi
	done
done >>"$tmp/arrows"

sort -u "$tmp/arrows" -o "$tmp/arrows"
if [ $verbose = 1 ]; then cat "$tmp/arrows"; fi
# each arrow: from's layer must be above to's
bad=$(awk 'NR == FNR { layer[$1] = $2; next }
	!($1 in layer) || !($2 in layer) { next }
	layer[$1] <= layer[$2] { print }' "$tmp/layer" "$tmp/arrows")
if [ -n "$bad" ]; then
	echo "check-layers: arrows that point up or sideways (a lower layer must hand this up through a hook, see docs/design.md \"Layers\"):" >&2
	echo "$bad" | sed 's/^/  /' >&2
	fail=1
fi
[ $fail = 1 ] || echo "check-layers: $(wc -l <"$tmp/arrows") arrows between $(wc -l <"$tmp/layer") daemon modules, all pointing down"
exit $fail
