#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Check C files against .clang-format (the kernel's style, 100 columns).
#   sh scripts/check-format.sh              every C file git tracks
#   sh scripts/check-format.sh FILE...      these files
#   sh scripts/check-format.sh --fix [FILE...]   rewrite them in place instead
# Exit 0 when every file is formatted, 1 when one is not (with the first
# lines of its diff), 2 when clang-format is missing.
set -u
cd "$(dirname "$0")/.."
fix=0
[ "${1:-}" = --fix ] && { fix=1; shift; }
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
if ! command -v "$CLANG_FORMAT" >/dev/null 2>&1; then
	echo "check-format: $CLANG_FORMAT not found (Debian: apt-get install clang-format)" >&2
	exit 2
fi
if [ $# -eq 0 ]; then
	set -- $(git ls-files '*.c' '*.h')
fi

bad=0 n=0
tmp=$(mktemp) || exit 2
trap 'rm -f "$tmp"' EXIT
for f in "$@"; do
	n=$((n + 1))
	if [ $fix -eq 1 ]; then
		"$CLANG_FORMAT" --style=file -i "$f" || bad=$((bad + 1))
		continue
	fi
	"$CLANG_FORMAT" --style=file "$f" >"$tmp" || { bad=$((bad + 1)); continue; }
	if ! cmp -s "$f" "$tmp"; then
		bad=$((bad + 1))
		echo "check-format: $f is not formatted (fix: sh scripts/check-format.sh --fix $f)"
		diff -u "$f" "$tmp" | sed -n '3,20p' | sed 's/^/    /'
	fi
done
if [ $fix -eq 1 ]; then
	echo "check-format: formatted $n files"
elif [ $bad -eq 0 ]; then
	echo "check-format: $n files formatted as .clang-format says"
else
	echo "check-format: $bad of $n files not formatted"
fi
[ $bad -eq 0 ]
