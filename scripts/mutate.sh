#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# make mutate: break the product on purpose, one bug at a time, and see
# which tests catch each break. A test suite that passes whatever the code
# does proves nothing; this shows, break by break, that ours does not.
#
# Every break is applied to a scratch copy of the tree (the working tree as
# it is, uncommitted changes included, plus its build/ for incremental
# builds) in /tmp: the real tree is never modified, so nothing is left
# broken when this is interrupted; the scratch copy is removed on exit. For
# each break: patch one file (a perl substitution that must change it),
# rebuild, run the tests that should catch it, restore the file. The tests
# run unmodified first: a break "caught" by a test that fails anyway would
# prove nothing.
#
#   sh scripts/mutate.sh [BREAK...]   all breaks, or the named ones
#   MUTATE_ALL_TESTS=1                run the whole suite for each break
#                                     (slow) to list every test that catches it
#   MUTATE_KEEP=1                     keep the scratch copy (for debugging)
#
# Prints "break | caught by | verdict": CAUGHT (a test failed), MISSED (all
# passed: the behaviour is not defended), or BROKEN-BREAK (the substitution
# did not apply or the tree did not build: fix the table). Exit 0 when every
# break is caught. Needs root (the tests do); takes several minutes.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
O=${O:-build}
[ -x "$O/bin/npfd" ] || { echo "mutate: build first (make)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "mutate: run as root (the tests need it)" >&2; exit 2; }

scratch=$(mktemp -d /tmp/npf-mutate-XXXXXX)
cleanup() {
	[ "${MUTATE_KEEP:-0}" = 1 ] && { echo "mutate: scratch copy kept in $scratch" >&2; return; }
	rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# The tree as it is (tracked and untracked files, not ignored ones), and its build.
git ls-files -z -c -o --exclude-standard | tar -c --null -T - -f - | tar -x -C "$scratch" -f -
cp -a "$O" "$scratch/$O"
results=$scratch/.results
: >"$results"

# ------------------------------------------------------------------ #
# The breaks: NAME | FILE | PERL SUBSTITUTION (perl -0pe: the whole file
# at once) | TESTS that should catch it. One per line; '|' separates, so
# the substitutions use other delimiters.
breaks() {
	cat <<'EOF'
file-offset-ignored | daemon/resolve.c | s{rn->region->file_offset \+ }{}g | file_offset
head-unmap-offset-kept | daemon/resolve.c | s{r->file_offset \+= end - rs;}{}g | file_offset
kill-switch-ignored-in-bpf | bpf/npf_collect.bpf.c | s{c && c->enabled && c->installed}{c && c->installed} | policy_load policy_cli
responder-request-per-page | nic/nic_rc.c | s{nic_fault_range\(qp, mr, pkt->vaddr, pkt->msg_len - pkt->offset, DMA_WRITE\)}{nic_fault_range(qp, mr, pkt->vaddr, 4096 - (pkt->vaddr & 4095), DMA_WRITE)} | nic_fault
relaxed-ordering-off | nic/nic_rc.c | s{bool relaxed = qp->attr.flags & NIC_QP_RELAXED_ORDERING;}{bool relaxed = false;}g | nic_order_loss nic_order
EOF
}

apply() { # FILE SUBST: patch the scratch copy; fails if nothing changed
	cp "$scratch/$1" "$scratch/.orig"
	perl -0pi -e "$2" "$scratch/$1" || return 1
	! cmp -s "$scratch/$1" "$scratch/.orig"
}

restore() { # FILE: the original back, with a fresh mtime so that make rebuilds
	cat "$here/$1" >"$scratch/$1"
	touch "$scratch/$1"
}

build() {
	make -C "$scratch" -j2 >"$scratch/.build.log" 2>&1
}

run_tests() { # TEST...: prints the ones that failed
	(cd "$scratch" && TEST_TIMEOUT=${MUTATE_TIMEOUT:-120} NPF_TEST_LOGS="$scratch/.logs" \
		sh tests/run.sh "$@" >"$scratch/.run.log" 2>&1)
	sed -n 's/^FAIL  \([^ ]*\).*/\1/p' "$scratch/.run.log" | tr '\n' ' '
}

want=" $* "

# Every test named in the table (or all), once, unbroken: they must pass.
all_tests=$(breaks | while IFS='|' read -r name file subst tests; do
	name=$(echo $name)
	[ "$want" = "  " ] || case "$want" in *" $name "*) ;; *) continue ;; esac
	echo $tests
done | tr ' ' '\n' | sort -u | tr '\n' ' ')
if [ "${MUTATE_ALL_TESTS:-0}" = 1 ]; then all_tests=""; fi
echo "mutate: baseline: the tests, unbroken${all_tests:+: $all_tests}"
bad=$(run_tests $all_tests)
if [ -n "$bad" ]; then
	echo "mutate: these fail without any break, fix them first: $bad" >&2
	cat "$scratch/.run.log" >&2
	exit 1
fi

breaks | while IFS='|' read -r name file subst tests; do
	name=$(echo $name) file=$(echo $file) subst=$(echo "$subst" | sed 's/^ *//; s/ *$//')
	[ "$want" = "  " ] || case "$want" in *" $name "*) ;; *) continue ;; esac
	[ "${MUTATE_ALL_TESTS:-0}" = 1 ] && tests=""
	printf 'mutate: %-32s ' "$name" >&2
	if ! apply "$file" "$subst"; then
		verdict=BROKEN-BREAK caught="(the substitution did not change $file)"
	elif ! build; then
		verdict=BROKEN-BREAK caught="(does not build: $(grep -m1 error "$scratch/.build.log"))"
	else
		caught=$(run_tests $tests)
		if [ -n "$caught" ]; then verdict=CAUGHT; else verdict=MISSED caught="($(echo ${tests:-all}) passed)"; fi
	fi
	restore "$file"
	echo "$verdict" >&2
	printf '%s | %s | %s\n' "$name" "$caught" "$verdict" >>"$results"
done
build || { echo "mutate: the restored scratch tree does not build" >&2; exit 1; }

echo
printf '%-32s | %-40s | %s\n' "break" "caught by" "verdict"
printf '%-32s-+-%-40s-+-%s\n' "--------------------------------" \
	"----------------------------------------" "-------"
while IFS='|' read -r name caught verdict; do
	printf '%-32s | %-40s | %s\n' "$(echo $name)" "$(echo $caught)" "$(echo $verdict)"
done <"$results"
total=$(wc -l <"$results")
caught=$(grep -c '| CAUGHT$' "$results")
echo "mutate: $caught of $total breaks caught"
[ "$caught" -eq "$total" ]
