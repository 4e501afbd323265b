#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# make mutate: break the product on purpose, one bug at a time, and see
# which tests catch each break. A test suite that passes whatever the code
# does proves nothing; this shows, break by break, that ours does not.
#
# Every break is applied to a scratch copy of the tree (the working tree as
# it is, uncommitted changes included, plus its build/ for incremental
# builds) in /tmp: the real tree is never read again nor modified, so
# nothing is left broken when this is interrupted, and the tree may be
# edited meanwhile; the scratch copy is removed on exit. For each break:
# patch one file (a perl substitution that must change it), rebuild, run the
# tests that should catch it, restore the file. The tests run unmodified
# first: a test that fails (twice) unbroken proves nothing and is left out
# (a break it alone should catch is UNTESTED). A test that fails is run
# again: only one that fails twice counts (a shared, loaded machine makes
# some tests flaky).
#
#   sh scripts/mutate.sh [BREAK...]   all breaks, or the named ones
#   MUTATE_ALL_TESTS=1                run the whole suite for each break
#                                     (slow) to list every test that catches it
#   MUTATE_KEEP=1                     keep the scratch copy (for debugging)
#   sh scripts/mutate.sh --check-table
#                                     only check that every break still
#                                     changes its file (no root, no build:
#                                     seconds; tests/mutate_table.sh)
#
# Prints "break | caught by | verdict": CAUGHT (a test failed), MISSED (all
# passed: the behaviour is not defended), UNTESTED (its tests fail even
# unbroken), or BROKEN-BREAK (the substitution did not apply or the tree did
# not build: fix the table). Exit 0 when every break is caught. Needs root (the tests do); takes several minutes.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
O=${O:-build}
table_only=0
[ "${1:-}" = --check-table ] && { table_only=1; shift; }
[ "$table_only" = 1 ] || [ -x "$O/bin/npfd" ] || { echo "mutate: build first (make)" >&2; exit 2; }
[ "$table_only" = 1 ] || [ "$(id -u)" -eq 0 ] || { echo "mutate: run as root (the tests need it)" >&2; exit 2; }

scratch=$(mktemp -d /tmp/npf-mutate-XXXXXX)
cleanup() {
	[ "${MUTATE_KEEP:-0}" = 1 ] && { echo "mutate: scratch copy kept in $scratch" >&2; return; }
	rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# The tree as it is (tracked and untracked files, not ignored ones), and its build.
if [ "$table_only" = 0 ]; then
	git ls-files -z -c -o --exclude-standard | tar -c --null -T - -f - | tar -x -C "$scratch" -f -
	cp -a "$O" "$scratch/$O"
fi
results=$scratch/.results
: >"$results"

# ------------------------------------------------------------------ #
# The breaks, one per line: NAME @@ FILE @@ PERL SUBSTITUTION (perl -0pe:
# the whole file at once) @@ TESTS that should catch it. Each is a bug the
# product could really have; the first ones are the issue-12 list. Lines
# starting with '#' inside the list are comments.
breaks() {
	cat <<'EOF'
file-offset-ignored @@ daemon/resolve.c @@ s{rn->region->file_offset \+ }{}g @@ file_offset
file-offset-ignored-in-mapping @@ daemon/resolve.c @@ s{MAP_SHARED, r->file_fd, \(off_t\)r->file_offset\);}{MAP_SHARED, r->file_fd, (off_t)0);} @@ file_offset
head-unmap-offset-kept @@ daemon/region.c @@ s{r->file_offset \+= hi - rs;}{} @@ file_offset
kill-switch-ignored-for-cpu-faults @@ daemon/collect.c @@ s{if \(!policies_on \|\| slot >= NPF_MAX_REGIONS}{if (slot >= NPF_MAX_REGIONS} @@ policy_load policy_cli
# Device faults' kill switch: the uprobe collector's check, and npfd writing
# the switch into the map it reads (the CPU path uses npfd's own flag).
kill-switch-ignored-in-bpf @@ bpf/npf_collect.bpf.c @@ s{c && c->enabled && c->installed}{c && c->installed} @@ nic_policy_kill
kill-switch-not-written-to-bpf @@ daemon/collect.c @@ s{\.enabled = policies_on, \.installed}{.enabled = true, .installed} @@ nic_policy_kill
responder-request-per-page @@ nic/nic_rc.c @@ s{nic_fault_range\(qp, mr, pkt->vaddr, pkt->msg_len - pkt->offset, DMA_WRITE\)}{nic_fault_range(qp, mr, pkt->vaddr, 4096 - (pkt->vaddr & 4095), DMA_WRITE)} @@ nic_fault
relaxed-ordering-off @@ nic/nic_rc.c @@ s{bool relaxed = qp->attr.flags & NIC_QP_RELAXED_ORDERING;}{bool relaxed = false;}g @@ nic_order_loss nic_order
inval-entries-left-present @@ daemon/device.c @@ s{\tclear_entries\(d, first, first \+ n < first \? d->npages : first \+ n\);\n}{} @@ nic_inval nic_access
unregister-no-ack-wait @@ daemon/main.c @@ s{device_region_gone\(r, alive, w\);}{device_region_gone(r, false, w);} @@ dev_unreg_unmap nic_inval
detach-no-ack-wait @@ daemon/device.c @@ s{\tif \(!wait_for_ack\)\n\t\tretire_end\(d, 0\);}{\tretire_end(d, 0);} @@ nic_access nic_inval
staging-offset-ignored @@ daemon/resolve.c @@ s{src = staging \+ \(size_t\)rn->staging \* NPF_PAGE_SIZE;}{src = staging;} @@ fault_1g file_offset nic_npfd_read_file
read-from-wrong-file @@ daemon/resolve.c @@ s{io_uring_prep_read_fixed\(sqe, rn->region->file_fd,}{io_uring_prep_read_fixed(sqe, rs[0].region ? rs[0].region->file_fd : -1,} @@ two_clients fault_1g
pages-copied-miscounted @@ daemon/resolve.c @@ s{r->stats->pages_copied \+= rn->npages;}{r->stats->pages_copied += 1;} @@ nic_npfd_read_file fault_1g file_offset
bpf-cpu-faults-miscounted @@ bpf/npf_collect.bpf.c @@ s{__sync_fetch_and_add\(&st->cpu_faults, 1\)}{__sync_fetch_and_add(&st->cpu_faults, 2)} @@ fault_1g
remap-not-followed @@ daemon/region.c @@ s{r->start = r->start - from \+ to;}{} @@ mm_events
unmapped-region-kept @@ daemon/region.c @@ s{region_remove\(r, false\);\n\t\t\tcontinue;}{continue;} @@ mm_events
overlap-unchecked @@ daemon/region.c @@ s{if \(!overlaps\(it, start, len\) \|\| holes_cover\(&it->holes, start, end\)\)}{if (1)} @@ bad_input
unregister-owner-unchecked @@ daemon/region.c @@ s{if \(!c->mm \|\| r->mm != c->mm\)}{if (0)} @@ bad_input
initiator-request-per-page @@ nic/nic_iommu.c @@ s{(\t\tb->npages\+\+;\n)}{$1\t\tprb_flush(b);\n} @@ nic_fault nic_npfd_write
rnr-nak-becomes-error @@ nic/nic_rc.c @@ s{return !r \|\| r == -EAGAIN \? SYN_RNR_NAK : SYN_NAK_REM_ACCESS;}{return SYN_NAK_REM_ACCESS;} @@ nic_fault nic_npfd_write nic_npfd_netns
recv-rnr-becomes-error @@ nic/nic_rc.c @@ s{\t\tif \(!r \|\| r == -EAGAIN\)\n\t\t\treturn SYN_RNR_NAK;\n}{} @@ nic_npfd_recv
qp-isolation-lost @@ nic/nic.c @@ s{nic_for_each_qp\(nic, i, qp\)\n\t\twork \+= nic_qp_poll\(qp, now, deadline\);}{nic_for_each_qp(nic, i, qp) {\n\t\tif (qp->npr)\n\t\t\tbreak;\n\t\twork += nic_qp_poll(qp, now, deadline);\n\t}} @@ nic_fault nic_isolation
fence-ignored @@ nic/nic_rc.c @@ s{if \(\(w->flags & NIC_SEND_FENCE\) \|\| wqe_conflict\(e, w\)\)}{if (wqe_conflict(e, w))} @@ nic_order
conflicts-ignored @@ nic/nic_rc.c @@ s{if \(\(w->flags & NIC_SEND_FENCE\) \|\| wqe_conflict\(e, w\)\)}{if (w->flags & NIC_SEND_FENCE)} @@ nic_order
timeout-no-resend @@ nic/nic_rc.c @@ s{\treq_rewind\(qp, qp->una\);\n\tqp->timer_at = req_timer_deadline}{\tqp->timer_at = req_timer_deadline} @@ nic_transport nic_order_loss
udp-payload-truncated @@ nic/nic_wire.c @@ s{sizeof\(\*pkt\) \+ pkt->len, 0,}{sizeof(*pkt) + pkt->len / 2, 0,} @@ nic_udp_netns nic_npfd_netns
# A race: a device record submitted without a wakeup just before npfd stops
# polling is found only by this re-check. nic_wakeup's 400 faults at the
# poll window's end hit the microseconds-wide gap only by chance;
# nic_ring_recheck widens it (a policy load in npfd with the polling flag set).
ring-recheck-skipped @@ daemon/collect.c @@ s{return \*ring_producer_pos != \*ring_consumer_pos;}{return false;} @@ nic_ring_recheck
device-records-never-wake @@ bpf/npf_shared_maps.h @@ s{\? BPF_RB_NO_WAKEUP : BPF_RB_FORCE_WAKEUP}{? BPF_RB_NO_WAKEUP : BPF_RB_NO_WAKEUP} @@ nic_wakeup
# The runner and the harness (issue 12): tests/runner.sh runs them on tests
# made for the purpose.
harness-not-line-buffered @@ tests/harness.h @@ s{\tsetvbuf\(stdout, NULL, _IOLBF, 0\);\n}{} @@ runner
harness-alarm-not-set @@ tests/run.sh @@ s{export NPF_TEST_ALARM=\$alarm}{export NPF_TEST_ALARM=0} @@ runner
skip-reason-not-shown @@ tests/run.sh @@ s{printf .SKIP  %-28s %s\\n. "\$name" "\$why"}{printf "SKIP  %-28s\\n" "\$name"} @@ runner
no-skip-not-enforced @@ tests/run.sh @@ s{\*\) \[ "\$no_skip" = 1 \] && rc=78 ;;}{*) ;;} @@ runner
allowed-skips-ignored @@ tests/run.sh @@ s{\*" \$name "\*\) ;;}{*" \$name "*) [ "\$no_skip" = 1 ] && rc=78 ;;} @@ runner
prefetch-after-ignored @@ daemon/resolve.c @@ s{for \(i = 1; i <= d.after; i\+\+\)}{for (i = 1; i <= 0; i++)} @@ policy_load
abi-version-unchecked @@ daemon/policy_object.c @@ s{if \(info->abi_version != NPF_POLICY_ABI_VERSION\)}{if (0)} @@ policy_load
cpu-trace-always-attached @@ daemon/collect.c @@ s{bool want = cpu_trace_always;}{bool want = true;} @@ cpu_trace
reload-not-applied @@ daemon/config.c @@ s{\t\tmemcpy\(field\(cur, o\), cfield\(next, o\), o->size\);\n}{} @@ cpu_trace ops_systemd
no-ready-notification @@ daemon/main.c @@ s{(clients may come. \*/\n\t\t)sd_notify\(0, "READY=1\\nSTATUS=running"\);}{$1;} @@ ops_systemd
cmdline-not-over-file @@ daemon/config.c @@ s{\t\tmemcpy\(field\(out, o\), cfield\(&cl->opt, o\), o->size\);\n}{} @@ unit-config ops_config
uint-range-unchecked @@ daemon/config.c @@ s{ \|\| v < min \|\| v > max\)}{)} @@ unit-config ops_config
device-requests-double-counted @@ daemon/device.c @@ s{g->dev->info.page_requests\+\+;}{g->dev->info.page_requests += 2;} @@ npfctl_device nic_fault
prometheus-counter-off @@ client/npfctl/prometheus.c @@ s{\(unsigned long long\)st->faults_resolved\);}{(unsigned long long)st->faults_resolved + 1);} @@ ops_metrics
status-json-key-renamed @@ client/npfctl/status.c @@ s{print_u64\("regions", "regions }{print_u64("nregions", "regions } @@ npfctl_cli ops_systemd
doctor-unprivileged-missing @@ common/features.c @@ s{if \(\(err == EPERM \|\| err == EACCES\) && geteuid\(\) != 0\)}{if (0)} @@ ops_doctor
clamp-before-off-by-one @@ daemon/policy.c @@ s{d.before = \(__u32\)first;}{d.before = (__u32)first + 1;} @@ unit-clamp
clamp-stride-limit-65 @@ daemon/policy.c @@ s{d.stride_count > 64 \|\|}{d.stride_count > 65 ||} @@ unit-clamp
run-length-unlimited @@ daemon/runs.c @@ s{j - i < MAX_RUN_PAGES &&}{} @@ unit-runs
staging-limit-ignored @@ daemon/runs.c @@ s{\(!file \|\| staged \+ \(j - i\) < staging_pages\)}{1} @@ unit-runs
dedupe-loses-write @@ daemon/runs.c @@ s{kept->write \|= faults\[i\].write;}{} @@ unit-runs
verifier-tail-one-line @@ daemon/verifier_log.c @@ s{\+\+lines == 2}{++lines == 1} @@ unit-verifier_log policy_load
json-quote-unescaped @@ common/npf_json.c @@ s{if \(ch == '"' \|\| ch == '\\\\'\)}{if (ch == '\\\\')} @@ unit-json
# The audit of the tests added on 2026-11-22/23: one break per header claim checked.
policy-sees-no-thread @@ daemon/policy.c @@ s{\.tgid_tid = \(__u64\)\(__u32\)r->mm->tgid << 32 \| tid,}{.tgid_tid = (__u64)(__u32)r->mm->tgid << 32 | 0,} @@ cpu_policy_streams
fault-around-reads-cold-file @@ daemon/resolve.c @@ s{if \(\(file && !cached\) \|\| region_page_installed\(r, p\) \|\|}{if (region_page_installed(r, p) ||} @@ cpu_fault_around
fault-around-kib-ignored @@ daemon/main.c @@ s{resolve_set_fault_around\(c->fault_around_kib\);}{resolve_set_fault_around(64);} @@ cpu_fault_around
region-fault-around-ignored @@ daemon/region.c @@ s{r->fault_around = req->flags & NPF_REGION_FAULT_AROUND \?}{r->fault_around = 0 ?} @@ cpu_fault_around
stop-answers-success @@ daemon/device.c @@ s{retire_end\(d, acked\(d, d->retire_seq\) \? 0 : -ESHUTDOWN\);}{retire_end(d, 0);} @@ dev_stop
inval-backlog-dropped @@ daemon/device.c @@ s{\td->backlog\[d->nbacklog\+\+\] = \*req;\n}{} @@ nic_inval_backlog
inval-backlog-out-of-order @@ daemon/device.c @@ s{ir->ent\[tail\+\+ % NPF_NIC_RING_SIZE\] = d->backlog\[i\+\+\];}{ir->ent[tail++ % NPF_NIC_RING_SIZE] = d->backlog[d->nbacklog - 1 - i++];} @@ nic_inval_backlog
orphan-device-kept @@ daemon/device.c @@ s{\tif \(d->orphaned\)\n\t\tdevice_free\(d\);\n}{} @@ dev_client_death
percentile-not-rounded @@ bench/bench.h @@ s{ \+ 0.5\);}{);} @@ unit-percentile
# Issue 10 (npfd may die, clients may lie): one break per defect it names.
# restart_kill and restart_systemd take a minute and more (60 kills): run
# them with MUTATE_TIMEOUT=300, or restart_systemd with RESTART_KILLS=15.
stale-socket-taken-for-live @@ daemon/control.c @@ s{process_alive\(cr.pid\)\)}{1)} @@ restart_stale_socket
pidns-ignored @@ daemon/collect.c @@ s{s->rodata->npf_pidns_ino = \(__u32\)st.st_ino;}{} @@ restart_systemd
adoption-zero-fills-file-page @@ daemon/resolve.c @@ s{if \(!rn->region && rn->mm->adopting\) \{}{if (0) \{} @@ restart_kill
adopt-file-region-without-file @@ client/libnpf.c @@ s{r->backing == NPF_BACKING_FILE \? 2 : 1}{1} @@ restart_kill
fallback-never-starts @@ client/libnpf.c @@ s{fallback_start\(c, why\);}{(void)why;} @@ restart_fallback
call-timeout-ignored @@ client/libnpf.c @@ s{left = \(int\)\(deadline - t\);}{left = -1;} @@ restart_stop
close-poll-not-removed @@ daemon/loop.c @@ s{cancel\(user_data\(id\)\);\n}{} @@ restart_close_munmap
file-offset-wraps @@ daemon/wire_check.c @@ s{__builtin_add_overflow\(req->file_offset, req->length, &file_end\) \|\|}{((file_end = req->file_offset + req->length), 0) ||} @@ adv_wire_check adv_backing
opath-backing-accepted @@ daemon/region.c @@ s{if \(mode & O_PATH\)\n}{if (0)\n} @@ adv_backing
failed-read-not-poisoned @@ daemon/resolve.c @@ s{if \(!mmcall_ioctl_now\(rn->mm->tgid, rn->mm->uffd, UFFDIO_POISON, &p\)\)\n\t\t\treturn 0;}{return 0;} @@ adv_backing
log-not-rate-limited @@ daemon/log.c @@ s{if \(rl->printed < LOG_RL_BURST\)}{if (1)} @@ adv_backing
empty-message-fds-leak @@ daemon/control.c @@ s{nfds = n >= 0 \? npf_fdpass_take}{nfds = n > 0 ? npf_fdpass_take} @@ adv_fds
uid-limits-off @@ daemon/control.c @@ s{if \(u.connections < NPFD_UID_MAX_CONNECTIONS && u.fds < NPFD_UID_MAX_FDS\)}{if (1)} @@ adv_limits
live-pins-taken-over @@ daemon/collect.c @@ s{\tpin_dir_fd = open\(pin_dir.*?(\tpinned_maps\[0\])}{$1}s @@ adv_pins
device-watchdog-off @@ daemon/policy.c @@ s{policy_watchdog\(p, now > rec->ts_ns \? now - rec->ts_ns : 0,\s*NPF_POLICY_SLOW_DEVICE_NS\);}{(void)now;} @@ adv_policy_nic
iopt-unsealed-accepted @@ daemon/device.c @@ s{if \(seals < 0 \|\| !\(seals & F_SEAL_SHRINK\)\)}{if (0)} @@ dev_iopt
iopt-size-wraps @@ daemon/wire_check.c @@ s{__builtin_mul_overflow\(hdr->npages, sizeof\(__u64\), &need\) \|\|\s*__builtin_add_overflow\(need, hdr->pte_offset, &need\) \|\|}{((need = hdr->npages * 8 + hdr->pte_offset), 0) ||} @@ dev_iopt adv_wire_check
unprivileged-loads-code @@ daemon/policy.c @@ s{if \(!c->privileged\)(\n\t\treturn refuse\(\n\t\t\terr, errlen, EPERM,\n\t\t\t"loading)}{if (0)$1} @@ adv_policy
policy-maps-unbounded @@ daemon/policy.c @@ s{total > NPF_POLICY_MAX_MAP_BYTES;}{0;} @@ adv_policy
cpu-watchdog-off @@ daemon/policy.c @@ s{policy_watchdog\(p, now_ns\(\) - t0, NPF_POLICY_SLOW_NS\);}{(void)t0;} @@ adv_policy
dropped-client-end-kept-open @@ daemon/control.c @@ s{\tshutdown\(c->fd, SHUT_RDWR\);}{\tif (dup(c->fd) < 0) \{\}} @@ adv_fds
unit-nofile-dropped @@ systemd/npfd.service.in @@ s{LimitNOFILE=65536\n}{} @@ restart_systemd
pidns-bpf-global-pids @@ bpf/npf_collect.bpf.c @@ s{if \(!npf_pidns_ino\)\n\t\treturn bpf_get_current_pid_tgid\(\);}{return bpf_get_current_pid_tgid();} @@ restart_systemd
# Issue 15 (overcommit): eviction must never drop a written page unwritten.
skipped-page-reported-clean @@ daemon/resolve.c @@ s{report_installed\(rn, rn->npages,\n\s+!rn->write && rn->region->install_clean\);}{hooks.installed(rn->region, rn->start, rn->npages, !rn->write && rn->region->install_clean);} @@ evict_skipped
unmapped-page-put-back @@ daemon/evict.c @@ s{\t\t\twake_page\(b.mm, page\);\n\t\t\tcontinue;\n\t\t\}}{\t\t\twake_page(b.mm, page);\n\t\t\}} @@ evict_unmap_remap
budget-hold-off @@ daemon/main.c @@ s{return evict_hold\(r, npages\) \|\|}{return 0 ||} @@ evict_hard
store-not-found-at-adoption @@ daemon/evict.c @@ s{fd = swapstore_find\(r->mm->tgid, old_id, name\);}{fd = -ENOENT;} @@ evict_crash evict_crash_storm
old-zaps-not-awaited @@ daemon/evict.c @@ s{if \(old_zap && bitmap_test}{if (0 && old_zap && bitmap_test} @@ evict_crash_storm evict_adopt_frozen
fork-copy-not-given @@ daemon/evict.c @@ s{\t\t\*copy = cp;\n}{\t\t*copy = NULL;\n} @@ evict_fork
fork-hold-ignored @@ daemon/evict.c @@ s{ \|\| fork_holds\(mm, now\)\)}{)} @@ evict_fork
fork-fill-skipped @@ client/libnpf.c @@ s{\tif \(pagemap < 0\)\n\t\treturn 0;}{\treturn 0;} @@ evict_fork
fork-parent-does-not-wait @@ client/libnpf.c @@ s{\tif \(fork_pipe\[1\] >= 0\) \{\n\t\tstruct pollfd}{\tif (0) \{\n\t\tstruct pollfd} @@ evict_fork
dontfork-ignored @@ client/libnpf.c @@ s{c->fork_mode == NPF_FORK_DONTFORK && madvise\(addr, len, MADV_DONTFORK\)}{0} @@ evict_fork
fork-claim-any-uid @@ daemon/evict.c @@ s{if \(mm->uid != c->uid \|\| mm == c->mm}{if (mm == c->mm} @@ adv_fork
fork-copy-taken-twice @@ daemon/evict.c @@ s{\t\tif \(cp->fd < 0\)\n\t\t\treturn refuse}{\t\tif (0)\n\t\t\treturn refuse} @@ adv_fork
fork-range-unchecked @@ daemon/evict.c @@ s{if \(cp->start != req->region.start \|\| cp->length != req->region.length \|\|}{if (0 &&} @@ adv_fork
fork-token-outlives-done @@ daemon/evict.c @@ s{\tfork_free\(c->mm\);\n\treturn 0;}{\tc->mm->fork_hold_until = 0;\n\treturn 0;} @@ adv_fork
event-fork-accepted @@ daemon/region.c @@ s{\tif \(features & UFFD_FEATURE_EVENT_FORK\)\n}{\tif (0)\n} @@ adv_fork
fork-copy-unbounded @@ daemon/evict.c @@ s{#define FORK_COPY_STEP 4096}{#define FORK_COPY_STEP (1ULL << 40)} @@ adv_fork
control-client-drained @@ daemon/control.c @@ s{\t\tlist_add_tail\(&c->resume, &resume\);\n\}}{\t\tclient_ready(c);\n\}} @@ adv_fork
late-zap-pages-let-go @@ daemon/evict.c @@ s{bool zaps_pending = b.zaps && }{bool zaps_pending = 0 && b.zaps && } @@ evict_zap_late
late-remove-taken-as-drop @@ daemon/evict.c @@ s{\t\tif \(bitmap_test\(r->ev->late, i\)\) \{}{\t\tif (0 && bitmap_test(r->ev->late, i)) \{} @@ evict_zap_late
late-page-write-let-through @@ daemon/evict.c @@ s{\tif \(r && r->ev && bitmap_test\(r->ev->busy, page_index\(r, page\)\) && !in_batch\(r, page, NULL\)\)\n\t\treturn;}{} @@ evict_zap_late
fallback-ignores-store @@ client/libnpf.c @@ s{if \(r.store_fd >= 0 && !dropped\(c, addr\)\)}{if (0 && r.store_fd >= 0)} @@ evict_fallback
store-fd-not-sent @@ daemon/control.c @@ s{rp->fd = evict_store_reader\(region_find_id\(info->region_id\)\);}{rp->fd = -1;} @@ evict_fallback
fallback-drops-not-tracked @@ client/libnpf.c @@ s{\t\t\t\tfallback_dropped\(c, m->arg.remove.start, m->arg.remove.end, zaps\);\n}{} @@ evict_fallback
fallback-drops-not-settled @@ client/libnpf.c @@ s{\tfallback_settle_drops\(c\);\n\t/\*\n\t \* Shortest first}{\t/*\n\t * Shortest first} @@ evict_fallback
fallback-takes-zaps-for-drops @@ client/libnpf.c @@ s{\tif \(!zaps\) \{}{\tif (1) \{} @@ evict_fallback_zaps
adopted-frozen-write-let-through @@ daemon/evict.c @@ s{\tif \(r && r->ev && old_victim\(r, page_index\(r, page\), old_zaps_pending\(mm\)\)\) \{}{\tif (0) \{} @@ evict_adopt_frozen
fallback-frozen-write-let-through @@ client/libnpf.c @@ s{!fallback_hold\(c, addr, zaps\) &&}{1 &&} @@ evict_adopt_frozen
adoption-pagemap-read-whole @@ daemon/region.c @@ s{\tint err = scan_pagemap_scan\(r, wp_only, false, found, arg\);}{\tint err = -ENOTTY;} @@ restart_sparse
repick-every-event @@ daemon/evict.c @@ s{\t\tr->ev->pick_after = now_ns\(\) \+ EVICT_REPICK_NS;\n}{} @@ evict_refuse
victim-zap-queued-twice @@ daemon/evict.c @@ s{return bitmap_test\(r->ev->busy, i\) \|\| old_victim\(r, i, old_zaps\);}{return 0;} @@ evict_adopt_frozen
old-victim-zap-queued-twice @@ daemon/evict.c @@ s{return bitmap_test\(r->ev->busy, i\) \|\| old_victim\(r, i, old_zaps\);}{return bitmap_test(r->ev->busy, i);} @@ evict_adopt_unstored evict_adopt_frozen
old-unstored-victim-zap-queued-twice @@ daemon/evict.c @@ s{return bitmap_test\(r->ev->busy, i\) \|\| old_victim\(r, i, old_zaps\);}{return bitmap_test(r->ev->busy, i) || (old_zaps && bitmap_test(r->ev->stored, i));} @@ evict_adopt_unstored
adopted-unstored-write-let-through @@ daemon/evict.c @@ s{\tif \(r && r->ev && old_victim\(r, page_index\(r, page\), old_zaps_pending\(mm\)\)\) \{}{\tif (r && r->ev && old_zaps_pending(mm) && bitmap_test(r->ev->stored, page_index(r, page))) \{} @@ evict_adopt_frozen
fallback-unstored-write-let-through @@ client/libnpf.c @@ s{\tif \(!zaps\)\n\t\treturn false;\n\th = grow}{\tif (!zaps || !region_at(c, addr) || region_at(c, addr)->store_fd < 0 || !store_holds(region_at(c, addr)->store_fd, region_at(c, addr), addr))\n\t\treturn false;\n\th = grow} @@ evict_adopt_frozen
freeze-cut-leaves-busy @@ daemon/evict.c @@ s{\tfor \(unsigned int i = n; i < b.n; i\+\+\)\n\t\tbitmap_assign\(b.r->ev->busy, page_index\(b.r, b.page\[i\]\), false\);\n}{} @@ evict_drop_busy
remove-taken-for-zap @@ daemon/evict.c @@ s{(\t\t\tif \(r->budget_info\)\n\t\t\t\tr->budget_info->evicted_pages\+\+;\n)(\t\t\tcontinue;)}{$1\t\t\tbit_set(r->ev->busy, i, false);\n\t\t\twake_page(r->mm, p);\n$2} @@ evict_adopt_frozen
own-drop-taken-for-zap @@ daemon/evict.c @@ s{if \(b\.zapped\[at\] && at < b\.zap_next\) }{if (b.zapped[at]) } @@ evict_drop_own
own-drop-copy-kept @@ daemon/evict.c @@ s{(\t\tb\.dropped\[at\] = true;\n)\t\tfree_slots\(r, i, i\);\n}{$1} @@ evict_drop_own
own-drop-wider-taken-for-zap @@ daemon/evict.c @@ s{(static bool remove_is_own\([^)]*\)\n\{\n)}{$1\treturn false;\n} @@ evict_drop_own
own-drop-told-under-old-zaps @@ daemon/evict.c @@ s{\tif \(old_zap\)\n\t\treturn false;\n}{} @@ evict_adopt_dropped
cut-leaves-zapping-unmarked @@ daemon/evict.c @@ s{\t\t\tbitmap_assign\(e->late, i, !b\.removed\[k\]\);\n}{} @@ evict_cut_zapping
cut-clears-busy @@ daemon/evict.c @@ s{\tbitmap_shift_down\(e->busy, shift\);\n}{\tbitmap_clear_all(e->busy);\n} @@ evict_cut_zapping
cut-forgets-installed @@ daemon/region.c @@ s{\t\t\tshift_installed\(r, \(hi - rs\) >> NPF_PAGE_SHIFT\);\n}{\t\t\tif (r->installed)\n\t\t\t\tmemset(r->installed, 0, (r->length >> NPF_PAGE_SHIFT) / 8 + 1);\n\t\t\tr->ninstalled = 0;\n} @@ evict_cut_zapping
remap-taken-for-drop @@ daemon/region.c @@ s{\t\tregion_invalidate\(r, r->start, r->start \+ r->length\);\n\t\tif \(hooks.moved\)}{\t\tregion_dropped(r, r->start, r->start + r->length);\n\t\tif (hooks.moved)} @@ evict_mremap
move-keeps-batch @@ daemon/evict.c @@ s{\tif \(r->ev && b\.state != B_IDLE && b\.r == r\)\n\t\tbatch_abandon\(r, 0, delta\);\n}{\t(void)delta;\n} @@ evict_mremap
abandon-leaves-frozen @@ daemon/evict.c @@ s{\t\tunfreeze\(r->mm, NULL, b\.page\[k\] \+ delta\);\n}{} @@ evict_mremap evict_cut_zapping
moved-part-not-put-back @@ daemon/moved.c @@ s{\tif \(got <= 0\)\n}{\tif (1)\n} @@ evict_mremap_part
moved-faults-not-held @@ daemon/resolve.c @@ s{if \(!rn->region &&\n\s+moved_waits\(rn->mm, rn->start, \(__u64\)rn->npages \* NPF_PAGE_SIZE\)\)}{if (0)} @@ evict_mremap_part
moved-slots-not-handed-over @@ daemon/evict.c @@ s{\t\tbitmap_assign\(e->stored, first \+ j, false\);\n}{} @@ evict_mremap_part
moved-part-stays-registered @@ daemon/moved.c @@ s{\tif \(pt->npages &&\n}{\tif (0 \&\&\n} @@ evict_mremap_part
moved-again-forgotten @@ daemon/moved.c @@ s{if \(pt->fd < 0 \|\| !part_split\(pt, lo, hi, to - from\)\)}{if (1)} @@ evict_mremap_part
moved-again-copies-punched @@ daemon/moved.c @@ s{\tpart_forget\(pt, lo, hi, false\);}{\tpart_forget(pt, lo, hi, true);} @@ evict_mremap_part
dontunmap-source-kept @@ daemon/region.c @@ s{\tsource_unregister\(mm, from, len\);\n}{} @@ evict_mremap
part-forget-punches-range @@ daemon/moved.c @@ s{\t\treturn;\n\t\}\n\tif \(lo <= pt->next && hi == pt->npages\)}{\t\tif (punch \&\& pt->punch)\n\t\t\tswapstore_punch_range(pt->fd, pt->off0 + (lo << NPF_PAGE_SHIFT), (hi - lo) << NPF_PAGE_SHIFT);\n\t\treturn;\n\t\}\n\tif (lo <= pt->next \&\& hi == pt->npages)} @@ evict_mremap_part
part-gap-split @@ daemon/moved.c @@ s{\tif \(hi < pt->npages\)\n\t\treturn;\n}{\tif (hi < pt->npages \&\& !part_split(pt, hi, pt->npages, 0))\n\t\treturn;\n} @@ adv_moved_gaps
part-not-journaled @@ daemon/moved.c @@ s{\tlayout_write\(pt->mm, pt->slot, &e\);\n}{} @@ evict_moved_restart
parts-not-taken @@ client/libnpf.c @@ s{\tif \(parts\)\n\t\tparts_take\(c, e, n\);\n}{} @@ evict_moved_restart
parts-not-finished @@ client/libnpf.c @@ s{\tif \(parts_finish\(c, true\)\) \{}{\tif (0) \{} @@ evict_moved_restart
fallback-move-not-followed @@ client/libnpf.c @@ s{\t\t\tr->start \+= delta;\n}{} @@ evict_moved_restart
fallback-moved-piece-dropped @@ client/libnpf.c @@ s{\t\t\t\tpart_add\(c, a \+ delta, pe - a,}{\t\t\t\tif (0) part_add(c, a + delta, pe - a,} @@ evict_moved_restart
hole-copies-counted @@ daemon/evict.c @@ s{\t\tif \(!holes_piece\(&r->holes, &lo, hi, &pe\)\)\n\t\t\tlo = pe = hi;\n}{\t\tpe = hi;\n} @@ evict_moved_restart
drops-not-moved @@ client/libnpf.c @@ s{\t\tif \(moved\)\n}{\t\tif (0)\n} @@ evict_moved_restart
drops-kept-at-unmap @@ client/libnpf.c @@ s{\t\t\t\tdrops_follow\(c, m->arg.remove.start, m->arg.remove.end, false, 0\);\n}{} @@ evict_moved_restart
moved-outer-region-pieces @@ client/libnpf.c @@ s{piece_uncovered\(held, nheld, &a, hi, &pe\)}{piece_uncovered(held, 0, &a, hi, &pe)} @@ evict_moved_restart
parts-retaken @@ client/libnpf.c @@ s{\t\tif \(!memcmp\(known, &e\[k\], sizeof\(e\[k\]\)\)\)\n\t\t\tcontinue;\n}{} @@ evict_moved_restart
old-ranges-missed @@ daemon/evict.c @@ s{\t\ter->n_old_ranges\+\+;\n}{} @@ evict_adopt_dropped evict_adopt_unstored
wp-fault-waits-any-page @@ daemon/evict.c @@ s{if \(r && r->ev && old_victim\(r, page_index\(r, page\), old_zaps_pending\(mm\)\)\)}{if (r && r->ev && old_zaps_pending(mm))} @@ evict_adopt_unstored
layout-not-synced @@ client/libnpf.c @@ s{n = got > 0 \? \(size_t\)got / sizeof\(e\[0\]\) : 0;}{n = 0;} @@ evict_restart_layout
layout-move-not-written @@ daemon/region.c @@ s{(\t\tif \(r->stats\)\n\t\t\tr->stats->start = r->start;\n)\t\tlayout_put\(r\);\n}{$1} @@ evict_restart_layout
layout-cut-not-written @@ daemon/region.c @@ s{(\t\t\tr->stats->length = r->length;\n\t\t\}\n)\t\tlayout_put\(r\);\n}{$1} @@ evict_restart_layout
layout-store-base-ignored @@ daemon/evict.c @@ s{e->store_base = r->backing == NPF_BACKING_ANON \? r->file_offset >> NPF_PAGE_SHIFT : 0;}{e->store_base = 0;} @@ evict_restart_layout
layout-file-offset-kept @@ client/libnpf.c @@ s{\t\telse\n\t\t\tr->file_offset = e\[k\]\.offset;\n}{} @@ evict_restart_layout
unmapped-frozen-writer-not-woken @@ daemon/evict.c @@ s{\t\t\twake_page\(b\.mm, page\);\n\t\t\tcontinue;\n}{\t\t\tcontinue;\n} @@ evict_mremap_part
layout-fallback-cut-undone @@ client/libnpf.c @@ s{\(e\[k\]\.start == r->known_start && e\[k\]\.length == r->known_length &&\n\t\s+e\[k\]\.offset == r->known_offset\)}{(e[k].start == r->start && e[k].length == r->length)} @@ evict_restart_layout
batch-removed-page-let-go @@ daemon/evict.c @@ s{\t\tif \(zaps_pending && i < b.zap_next && b.zapped\[i\]\) \{(.*?)(bool zap_left = zaps_pending && !b.unmapped\[i\] && i < b.zap_next && b.zapped\[i\])}{\t\tif (0) \{$1$2 && !b.removed[i]}s @@ evict_adopt_frozen
zap-pending-installed-writable @@ daemon/resolve.c @@ s{\(!rn->write \|\| \(hooks.zap_may_run && hooks.zap_may_run\(rn\)\)\)}{!rn->write} @@ evict_adopt_frozen
fallback-zap-pending-installed-writable @@ client/libnpf.c @@ s{\tif \(zaps_in_flight\(c\)\)\n\t\tcp.mode = UFFDIO_COPY_MODE_WP;\n}{} @@ evict_adopt_frozen
adopt-frozen-skipped @@ daemon/evict.c @@ s{\tadopt_frozen\(r\);\n}{} @@ evict_adopt_frozen
old-frozen-unmarked-by-remove @@ daemon/evict.c @@ s{(\town = remove_is_own\(r, start, end, old_zap\);\n)}{$1\tfor (__u64 q = page_index(r, lo); q < page_index(r, hi); q++)\n\t\tbit_set(r->ev->old_frozen, q, false);\n} @@ evict_adopt_unstored evict_adopt_frozen
stale-completions-counted @@ daemon/evict.c @@ s{\t__atomic_store_n\(cq->khead, cq_tail, __ATOMIC_RELEASE\);\n\ter->old_zaps}{\ter->old_zaps} @@ evict_adopt_frozen
ring-header-believed @@ daemon/evict.c @@ s{\tif \(\*sq->kring_entries != sq->ring_entries \|\|}{\tsq->ring_entries = *sq->kring_entries;\n\tif (0 &&} @@ evict_refuse
ring-cq-tail-believed-at-adoption @@ daemon/evict.c @@ s{\tif \(cq_tail - cq_head > cq->ring_entries\)}{\tif (0)} @@ evict_refuse
ring-cq-tail-believed @@ daemon/evict.c @@ s{\tif \(tail - head > cq->ring_entries\) \{}{\tif (0) \{} @@ evict_refuse
page-request-range-wraps @@ daemon/device.c @@ s{rec->addr >= d_end\(d\) \|\|\n\t    rec->len > d_end\(d\) - rec->addr\)}{rec->addr + rec->len > d_end(d))} @@ dev_iopt
device-requests-unbounded @@ daemon/device.c @@ s{if \(d->info.requests_waiting >= DEVICE_GROUPS_MAX\)}{if (0)} @@ dev_iopt
device-request-pages-unbounded @@ daemon/device.c @@ s{if \(last - first >= DEVICE_REQUEST_MAX_PAGES\)}{if (0)} @@ dev_iopt
table-holes-read @@ daemon/device.c @@ s{if \(data < 0 \|\| hole < 0\) \{}{if (1) \{} @@ dev_iopt
backing-fuse-accepted @@ daemon/region.c @@ s{if \(b.f_type == FUSE_SUPER_MAGIC\)}{if (0)} @@ adv_backing
backing-foreign-overlay-accepted @@ daemon/region.c @@ s{if \(b.f_type == OVERLAYFS_SUPER_MAGIC && !mount_visible\(makedev\(b.dev_major, b.dev_minor\)\)\)}{if (0)} @@ adv_backing
udp-any-port @@ nic/nic_wire.c @@ s{from.sin_port != w->peer.sin_port\)\n}{0)\n} @@ nic_udp_spoof
shm-rx-header-believed @@ nic/nic_wire.c @@ s{pkt = ring_slot\(r, w->rx_nslots, w->rx_slot_size, head\);}{pkt = ring_slot(r, r->nslots, r->slot_size, head);} @@ nic_shm_header
ws-record-shared-by-users @@ daemon/wsstore.c @@ s{"%s/%u.%s.ws", ws_dir, \(unsigned int\)r->mm->uid, r->name\)}{"%s/%s.ws", ws_dir, r->name)} @@ policy_load
evict-scan-unbounded @@ daemon/evict.c @@ s{ && scanned < EVICT_SCAN_MAX\) \{}{) \{} @@ evict_refuse
userns-caps-count @@ daemon/control.c @@ s{f = same_user_ns\(pidfd, cred->pid\) \? fopen\(path, "re"\) : NULL;}{f = fopen(path, "re");} @@ adv_policy
partial-install-not-reported @@ daemon/resolve.c @@ s{\t\t\t\treport_partial\(rn\);\n}{} @@ evict_policy_faults
policy-installs-not-counted @@ daemon/evict.c @@ s{\t\tif \(e->installs\[i\] < 255\)\n\t\t\te->installs\[i\]\+\+;\n}{} @@ evict_policy_faults
policy-idle-not-measured @@ daemon/evict.c @@ s{e->touched\[i\] \? now - e->touched\[i\]}{e->touched[i] ? 0 * now} @@ evict_policy_faults
# evict_npfctl: each output of a budget broken in turn (the text only, the
# JSON only, Prometheus, the pinned map, and npfd's own watermark).
budget-text-shows-high @@ client/npfctl/stats.c @@ s{print_u64\("budget_pages", "  budget   %llu pages", bi->budget_pages\);}{print_u64("budget_pages", "  budget   %llu pages", is_json_context() ? bi->budget_pages : bi->high_pages);} @@ evict_npfctl
budget-text-evicted-wrong @@ client/npfctl/stats.c @@ s{print_u64\("evicted_pages", "  evicted  %llu", bi->evicted_pages\);}{print_u64("evicted_pages", "  evicted  %llu", is_json_context() ? bi->evicted_pages : bi->refaults);} @@ evict_npfctl
budget-json-low-shows-high @@ client/npfctl/stats.c @@ s{print_u64\("low_pages", ", low %llu\)", bi->low_pages\);}{print_u64("low_pages", ", low %llu)", is_json_context() ? bi->high_pages : bi->low_pages);} @@ evict_npfctl
budget-prom-shows-high @@ client/npfctl/prometheus.c @@ s{B\("budget_pages", "gauge", budget_pages,}{B("budget_pages", "gauge", high_pages,} @@ evict_npfctl
budget-prom-any-region @@ client/npfctl/prometheus.c @@ s{if \(bi\[k\].region_id != r\[i\].id\)}{if (0 && bi[k].region_id != r[i].id)} @@ evict_npfctl
budget-map-not-pinned @@ daemon/collect.c @@ s{err = bpf_map__pin\(pinned_maps\[i\], path\);}{err = pinned_maps[i] == skel->maps.npf_budget ? 0 : bpf_map__pin(pinned_maps[i], path);} @@ evict_npfctl
budget-high-watermark-ignored @@ daemon/evict.c @@ s{bi->high_pages = bi->budget_pages \* high_pct / 100;}{bi->high_pages = bi->budget_pages;} @@ evict_npfctl
# Two clients of one limited cgroup: a region that gets its ceiling after a
# later id (its client's ring or cgroup entry came later) must get one too.
ceiling-only-when-ids-grow @@ daemon/memcg.c @@ s{\tfor \(pos = nceilings;}{\tif (nceilings && ceilings[nceilings - 1].id > id)\n\t\treturn;\n\tfor (pos = nceilings;} @@ evict_cgroup_two
holes-adopt-refused @@ daemon/region.c @@ s{ret = check_adopted\(c->pid, start, end, &holes, what, sizeof\(what\)\);}{ret = check_mapped_anon(c->pid, start, end, what, sizeof(what));} @@ evict_region_hole
holes-registration-refused @@ daemon/region.c @@ s{if \(!overlaps\(it, start, len\) \|\| holes_cover\(&it->holes, start, end\)\)}{if (!overlaps(it, start, len))} @@ evict_region_hole
holes-not-kept @@ daemon/region.c @@ s{\t\t\tregion_hole_add\(r, lo, hi\);\n}{} @@ evict_region_hole
holes-scan-takes-other-mapping @@ daemon/region.c @@ s{\tfor \(; holes_piece\(&r->holes, &lo, hi, &pe\); lo = pe\)\n\t\tfound\(r, lo, \(pe - lo\) >> NPF_PAGE_SHIFT, arg\);}{\tfound(r, lo, (hi - lo) >> NPF_PAGE_SHIFT, arg);\n\t(void)pe;} @@ evict_region_hole
holes-wp-registers-other-mapping @@ daemon/evict.c @@ s{\t\treg.range.start = lo;\n\t\treg.range.len = pe - lo;}{\t\treg.range.start = r->start;\n\t\treg.range.len = r->length;} @@ evict_region_hole
holes-fault-finds-outer @@ daemon/region.c @@ s{ &&\n\s+!holes_contain\(&r->holes, addr\)\)\n\t\t\treturn r;}{)\n\t\t\treturn r;} @@ evict_region_hole
holes-unregister-takes-inner @@ daemon/region.c @@ s{if \(mmcall_unregister\(tgid, uffd, lo, pe - lo\)}{if (mmcall_unregister(tgid, uffd, start, end - start)} @@ evict_region_hole
holes-nesting-ignored @@ daemon/region.c @@ s{(static int adopted_nesting\(struct npfd_region \*r\)\n\{\n)}{$1\tif (r) return 0;\n} @@ evict_region_hole
holes-filter-outer-first @@ daemon/collect.c @@ s{for \(; k > 0 && pr.r\[k - 1\].end - pr.r\[k - 1\].start > r->length; k--\)}{for (; 0;)} @@ evict_region_hole
holes-fallback-finds-outer @@ client/libnpf.c @@ s{ &&\n\t\t    \(!at \|\| c->regions\[i\].length < at->length\)\)}{ && !at)} @@ evict_region_hole
holes-run-crosses @@ daemon/runs.c @@ s{ &&\n\s+!holes_contain\(&r->holes, faults\[j\].page\) :}{ :} @@ unit-runs
unregister-drops-stored @@ daemon/region.c @@ s{ret = hooks.put_back \? hooks.put_back\(r, err, errlen\) : 0;}{ret = 0;} @@ evict_region_hole adv_stuck_mm
holes-device-maps-hole @@ daemon/device.c @@ s{\tif \(in_hole\(d, first, last\)\) \{}{\tif (0 && in_hole(d, first, last)) \{} @@ nic_region_hole
unregister-oom-not-refused @@ daemon/main.c @@ s{if \(stored && !memcg_room\(r->mm, stored, &room\)\)}{if (0 && stored && !memcg_room(r->mm, stored, &room))} @@ evict_cgroup
unregister-zaps-ignored @@ daemon/evict.c @@ s{\tif \(zaps_may_take\(r\)\)\n\t\treturn -EAGAIN;}{} @@ evict_unregister
holes-touching-not-merged @@ daemon/holes.c @@ s{while \(first < h->n && h->v\[first\].end < lo\)}{while (first < h->n && h->v[first].end <= lo)} @@ unit-holes
holes-piece-starts-in-hole @@ daemon/holes.c @@ s{\t\t\t\*lo = h->v\[i\].end; /\* in this hole: the piece starts past it \*/\n}{} @@ unit-holes
holes-bound-ignored @@ daemon/holes.c @@ s{if \(n > HOLES_MAX\)}{if (0)} @@ unit-holes
holes-clip-keeps-outside @@ daemon/holes.c @@ s{\t\tif \(x.start < lo\)\n\t\t\tx.start = lo;\n}{} @@ unit-holes
uffd-owner-unproven @@ daemon/region.c @@ s{ret = registered_in\(c->pid, start, end, &holes\);}{ret = 1;} @@ bad_input two_clients
late-settle-skips-busy @@ daemon/evict.c @@ s{i = bitmap_next\(e->busy, i \+ 1, e->npages\)\) \{}{i = bitmap_next(e->busy, i + 1, e->npages) + 8) \{} @@ evict_zap_late evict_adopt_frozen
zap-cap-ignored @@ daemon/evict.c @@ s{sqe = b.zaps \+ b.mm->evict_ring->late_zaps \+ b.mm->evict_ring->old_zaps <\n\s+NPF_EVICT_RING_ENTRIES \?\n\s+io_uring_get_sqe\(ring\) :\n\s+NULL;}{sqe = io_uring_get_sqe(ring);} @@ evict_zap_cap
full-ring-not-skipped @@ daemon/evict.c @@ s{(\t\tif \(\(__u64\)mm->evict_ring->late_zaps \+ mm->evict_ring->old_zaps >=\n\s+NPF_EVICT_RING_ENTRIES\))\n\t\t\tcontinue;}{$1\n\t\t\t;} @@ evict_zap_cap
removed-copy-kept @@ daemon/evict.c @@ s{(\t\tif \(old_zap && bitmap_test\(r->ev->stored, i\) && !own\)\n\t\t\tcontinue;\n)\t\tfree_slots\(r, i, i\);\n}{$1} @@ evict_anon
cut-copies-kept @@ daemon/evict.c @@ s{(\t\tif \(old_zap && bitmap_test\(r->ev->stored, i\) && !own\)\n\t\t\tcontinue;\n)\t\tfree_slots\(r, i, i\);\n}{$1}; s{\tfree_slots\(r, 0, shift - 1\);\n}{} @@ evict_anon
late-remove-not-counted @@ daemon/evict.c @@ s{(\t\t\tbitmap_assign\(r->ev->late, i, false\);\n\t\t\tbitmap_assign\(r->ev->clean, i, false\);\n)\t\t\tif \(r->budget_info\)\n\t\t\t\tr->budget_info->evicted_pages\+\+;\n}{$1} @@ evict_cut_zapping
put-back-step-ends-unregister @@ daemon/evict.c @@ s{\t\t\t\*failed = -EINPROGRESS;}{\t\t\t*failed = 0;} @@ evict_unregister
put-back-step-not-asked-again @@ client/libnpf.c @@ s{\t\tif \(err == -EINPROGRESS\) \{\n\t\t\tt0 = now_ms\(\);\n\t\t\tcontinue;\n\t\t\}\n}{} @@ evict_unregister
store-short-read-drops-run @@ daemon/evict.c @@ s{\t\t\tk \+= n > 0 \? \(__u32\)\(n / NPF_PAGE_SIZE\) : 0;\n}{} @@ evict_store_lost
store-read-head-poisoned @@ daemon/evict.c @@ s{(\t\t\tif \()k(\) \{\n\t\t\t\tstruct run head = \*rn;)}{${1}0$2} @@ evict_store_lost
store-read-failure-not-poisoned @@ daemon/evict.c @@ s{(\t\t\tif \(ret != -EAGAIN\) \{\n)\t\t\t\trn->unservable = true;\n\t\t\t\trn->valid_pages = 0;\n}{$1} @@ evict_store_lost
exited-peer-served @@ daemon/control.c @@ s{\tgone = peer_exited\(c\);}{\tgone = 0 && peer_exited(c);} @@ adv_orphan_conn
bitmap-shift-carry-lost @@ daemon/bitmap.c @@ s{w = \(w >> r\) \| \(word_at\(m, j \+ q \+ 8\) << \(64 - r\)\);}{w = w >> r;} @@ unit-bitmap
bitmap-next-skips-word @@ daemon/bitmap.c @@ s{for \(k = i / 64; k \* 64 < end && k \* 64 < lim; k\+\+\) \{}{for (k = i / 64; k * 64 < end && k * 64 < lim; k += 2) \{} @@ unit-bitmap
bitmap-summary-not-set @@ daemon/bitmap.h @@ s{\tif \(!\(\(m->sum\[b / 64\] >> \(b % 64\)\) & 1\)\)\n\t\tm->sum\[b / 64\] \|= 1ULL << \(b % 64\);\n}{} @@ unit-bitmap
bitmap-walk-reads-every-block @@ daemon/bitmap.c @@ s{\t\tif \(!sum_test\(m, b\)\) \{}{\t\tif (0) \{} @@ unit-bitmap
bitmap-shift-ignores-sources @@ daemon/bitmap.c @@ s{from = ns >= nb \? nb : ns > d \+ qb \? ns - qb - 1 : d;}{from = nb;} @@ unit-bitmap
bitmap-summary-cleared-unchecked @@ daemon/bitmap.c @@ s{if \(end <= lim && block_empty\(m, b\)\)}{if (end <= lim)} @@ unit-bitmap
bitmap-summary-word-skipped @@ daemon/bitmap.c @@ s{\t\tb = \(b / 64 \+ 1\) \* 64;}{\t\tb = (b / 64 + 2) * 64;} @@ unit-bitmap
device-grace-ignored @@ daemon/evict.c @@ s{\tif \(!dev_referenced && now - e->touched\[i\] < EVICT_DEVICE_GRACE_MS\)\n\t\treturn true;\n}{} @@ verbs_perftest_budget
# caught in 4 runs of 10 (a timing race: the NIC goes on through pages mapped before the request is answered)
evicted-request-invalid @@ daemon/device.c @@ s{status = g->dev->region && g->dev->evicted_gen != g->evicted_gen \?\s*NPF_PR_SUCCESS :\s*NPF_PR_INVALID;}{status = NPF_PR_INVALID;} @@ verbs_perftest_budget
present-at-registration-unmarked @@ daemon/region.c @@ s{\tmark_present\(r, adopt_id\);\n}{\tif (adopt_id)\n\t\tmark_present(r, adopt_id);\n} @@ verbs_perftest_budget
ceiling-outlives-region-hold-unbounded @@ daemon/memcg.c @@ s{\tif \(!c\)\n\t\treturn;\n\tpos = }{\treturn;\n\tpos = }; s{\t\tif \(t - g->full_since < MEMCG_STUCK_NS\)\n\t\t\treturn true;}{\t\treturn true;} @@ adv_memcg_ceiling
moved-reads-file-holes @@ daemon/moved.c @@ s{\tif \(pt->next < pt->data_end\)\n\t\treturn pt->next;}{\treturn pt->next;} @@ adv_moved_parts evict_mremap_part
lists-show-every-user @@ daemon/control.c @@ s{\treturn c->privileged \|\| mm->uid == c->uid;}{\treturn true;} @@ adv_lists
zero-page-counted-present @@ daemon/region.c @@ s{scan_pagemap_scan\(r, false, true, found_present, &found\)}{scan_pagemap_scan(r, false, false, found_present, &found)} @@ evict_zero_page
cut-counts-not-moved @@ daemon/evict.c @@ s{\te->installs \+= shift;\n\te->touched \+= shift;\n\te->cut \+= shift;\n}{} @@ evict_policy_faults
policy-lists-show-every-region @@ daemon/control.c @@ s{\treturn !chosen \|\| sees_region\(c, region_id\);}{\treturn true;} @@ adv_policy
policy-lists-hide-loaded @@ daemon/control.c @@ s{\treturn !chosen \|\| sees_region\(c, region_id\);}{\treturn !region_id || sees_region(c, region_id);} @@ adv_policy
device-list-shows-every-user @@ daemon/control.c @@ s{\tif \(l->c->privileged \|\| uid == l->c->uid\)}{\tif (1)} @@ adv_device_list
device-listed-by-region-id @@ daemon/control.c @@ s{\tif \(l->c->privileged \|\| uid == l->c->uid\)}{\tif (sees_region(l->c, info->region_id))} @@ adv_device_list
mem-read-waits-on-uffd @@ daemon/region.c @@ s{mmcall_pread\(mm->tgid, mm->mem_fd, buf, len, \(off_t\)va\)}{syscall(SYS_process_vm_readv, mm->tgid, &(struct iovec){buf, len}, 1UL, &(struct iovec){(void *)(uintptr_t)va, len}, 1UL, 0UL)} @@ unit-mem_rw
mem-write-waits-on-uffd @@ daemon/region.c @@ s{mmcall_pwrite\(mm->tgid, mm->mem_fd, buf, len, \(off_t\)va\)}{syscall(SYS_process_vm_writev, mm->tgid, &(struct iovec){buf, len}, 1UL, &(struct iovec){(void *)(uintptr_t)va, len}, 1UL, 0UL)} @@ unit-mem_rw
mmcall-no-deadline @@ daemon/mmcall.c @@ s{\(now = now_ns\(\)\) < deadline\)}{(now = now_ns()) < UINT64_MAX)} @@ adv_stuck_mm
mmcall-late-register-kept @@ daemon/mmcall.c @@ s{if \(ran && j->undo_register && !j->ret\)}{if (0)} @@ adv_stuck_mm
mmcall-stuck-waited-again @@ daemon/mmcall.c @@ s{(static struct job \*job_new\(pid_t tgid, enum op op, size_t buflen\)\n\{\n)\tif \(mmcall_refuses\(tgid\)\) \{}{${1}\tif (0) \{} @@ unit-mmcall
mmcall-user-not-capped @@ daemon/mmcall.c @@ s{return some_user_capped && uid_of_cached}{return 0 && uid_of_cached} @@ unit-mmcall
mmcall-late-open-kept @@ daemon/mmcall.c @@ s{if \(ran && \(j->op == OP_OPEN \|\| j->op == OP_GETFD\) && j->ret >= 0\)}{if (ran && j->op == OP_GETFD && j->ret >= 0)} @@ unit-mmcall
mmcall-exited-still-stuck @@ daemon/mmcall.c @@ s{return j->pidfd >= 0 && poll\(&p, 1, 0\) == 0;}{return 1;} @@ unit-mmcall
mmcall-stuck-for-good @@ daemon/mmcall.c @@ s{if \(atomic_load\(&j->state\) == J_FINISHED_LATE\) \{}{if (0) \{} @@ unit-mmcall
mmcall-fault-path-unwatched @@ daemon/mmcall.c @@ s{now_ns\(\) - atomic_load\(&c->started\) < timeout_ns\)}{now_ns() - atomic_load(&c->started) < UINT64_MAX)} @@ adv_stuck_mm
loop-moved-unarmed @@ daemon/loop.c @@ s{\t\tarm\(id\);\n\t\tif \(sources\[id\]\.ready\)}{\t\tif (sources[id].ready)} @@ adv_stuck_mm
uffd-checked-through-leader @@ daemon/region.c @@ s{"/proc/thread-self/fd/%d", fd\);\n\tn = readlink}{"/proc/self/fd/%d", fd);\n\tn = readlink} @@ adv_stuck_mm
mmcall-stuck-served-on @@ daemon/control.c @@ s{\tif \(!mmcall_failed_since\(&seen\)\)\n\t\treturn;}{\tif (1)\n\t\treturn;} @@ adv_stuck_mm
unit-without-dac-override @@ systemd/npfd.service.in @@ s{(CapabilityBoundingSet=.*) CAP_DAC_OVERRIDE}{$1} @@ ops_unit_caps verbs_unit_caps
unit-without-chown @@ systemd/npfd.service.in @@ s{(CapabilityBoundingSet=.*) CAP_CHOWN}{$1} @@ ops_unit_caps verbs_unit_caps
socket-group-ignored @@ daemon/control.c @@ s{\(gid != \(gid_t\)-1 && chown\(path, \(uid_t\)-1, gid\)\) \|\| }{} @@ ops_unit_caps
userns-through-proc @@ daemon/control.c @@ s{ns = ioctl\(pidfd, PIDFD_GET_USER_NAMESPACE, 0\);}{snprintf(path, sizeof(path), "/proc/%d/ns/user", pid), ns = open(path, O_RDONLY \| O_CLOEXEC);} @@ adv_stuck_mm
ring-getfd-on-loop @@ daemon/evict.c @@ s{fd = mmcall_getfd\(c->pid, pidfd, req->fd\);}{fd = (int)syscall(438, pidfd, req->fd, 0);} @@ adv_stuck_mm
token-not-pidfs @@ daemon/util.c @@ s{\t\ttoken = st.st_ino;}{\t\ttoken = start_time(pid);} @@ evict_crash
store-start-time-names-deleted @@ daemon/swapstore.c @@ s{if \(now && token == process_start_time\(pid\) &&}{if (0 &&} @@ evict_crash
mmcall-late-getfd-kept @@ daemon/mmcall.c @@ s{if \(ran && \(j->op == OP_OPEN \|\| j->op == OP_GETFD\) && j->ret >= 0\)}{if (ran && j->op == OP_OPEN && j->ret >= 0)} @@ adv_stuck_mm
nic-exe-on-loop @@ daemon/collect.c @@ s{fd = mmcall_open\(mm->tgid, cand\[i\], O_RDONLY\);}{fd = open(cand[i], O_RDONLY \| O_CLOEXEC);} @@ adv_stuck_mm
nic-attach-on-loop @@ daemon/collect.c @@ s{!mmcall_run\(0, fd, nic_attach, nic_attach_late, &a, sizeof\(a\)\)}{!nic_attach(fd, &a)} @@ adv_stuck_mm
nic-attach-late-not-gated @@ daemon/collect.c @@ s{\t\tif \(attach_waiting\(\)\) \{\n\t\t\tfree\(p\);}{\t\tif (0) \{\n\t\t\tfree(p);} @@ adv_stuck_mm
mmcall-run-late-kept @@ daemon/mmcall.c @@ s{\t\tif \(j->op == OP_RUN && j->late\)\n\t\t\tj->late\(j->arg, ran \? j->ret : -1\); \/\* -1: never ran \*\/\n}{} @@ unit-mmcall
fuse-close-on-loop @@ daemon/control.c @@ s{\t\tmmcall_close\(gone \? 0 : c->pid, fds\[i\]\);}{\t\tif (fds[i] >= 0)\n\t\t\tclose(fds[i]);} @@ adv_stuck_mm
fds-no-room @@ daemon/control.c @@ s{#define MAX_FDS 253}{#define MAX_FDS NPF_FDPASS_MAX} @@ adv_fds
backing-fuse-by-statfs @@ daemon/region.c @@ s{\tif \(on_visible_fuse\(fd\)\)\n}{\tif (0)\n} @@ adv_stuck_mm adv_backing
unregister-refused-dropped @@ daemon/mmcall.c @@ s{\tif \(!mmcall_refuses\(tgid\)\)\n\t\treturn mmcall_ioctl}{\tif (1)\n\t\treturn mmcall_ioctl} @@ unit-mmcall
unregister-pending-not-first @@ daemon/mmcall.c @@ s{return stuck_refuses\(tgid\) \|\|\s*\(!list_empty\(&unregister_pending\) && unregister_pending_run\(tgid\)\);}{return stuck_refuses(tgid);} @@ unit-mmcall
unregister-pending-while-stuck @@ daemon/mmcall.c @@ s{\t\tif \(!stuck_refuses\(u->tgid\)\) \{}{\t\tif (1) \{} @@ unit-mmcall
unregister-flush-idle @@ daemon/mmcall.c @@ s{\t\tif \(!stuck_refuses\(u->tgid\)\) \{}{\t\tif (0) \{} @@ unit-mmcall
EOF
}

apply() { # FILE SUBST: patch the scratch copy; fails if nothing changed
	cp "$scratch/$1" "$scratch/.orig"
	perl -0pi -e "$2" "$scratch/$1" || return 1
	! cmp -s "$scratch/$1" "$scratch/.orig"
}

restore() { # FILE: the original back, with a fresh mtime so that make rebuilds
	cat "$scratch/.orig" >"$scratch/$1"
	touch "$scratch/$1"
}

build() {
	make -C "$scratch" -j2 >"$scratch/.build.log" 2>&1
}

run_once() { # TEST...: prints the ones that failed
	(cd "$scratch" && TEST_TIMEOUT=${MUTATE_TIMEOUT:-120} NPF_TEST_LOGS="$scratch/.logs" \
		sh tests/run.sh "$@" >"$scratch/.run.log" 2>&1)
	sed -n 's/^FAIL  \([^ ]*\).*/\1/p' "$scratch/.run.log" | tr '\n' ' '
}

# TEST...: prints the ones that failed twice. The machine may be shared and
# loaded: a test that fails once and then passes is a flake, not a catch.
run_tests() {
	failed=$(run_once "$@")
	[ -z "$failed" ] || run_once $failed
}

want=" $* "
for n in "$@"; do
	breaks | grep -q "^$n @@" || { echo "mutate: no break named $n" >&2; exit 2; }
done

# A table line into $name $file $subst $tests.
parse() {
	name=$(echo ${1%%@@*}) rest=${1#*@@}
	file=$(echo ${rest%%@@*}) rest=${rest#*@@}
	subst=$(printf '%s' "${rest%@@*}" | sed 's/^ *//; s/ *$//') tests=${rest##*@@}
}

# --check-table: a break whose substitution no longer changes its file
# (the code moved on) breaks nothing and would say BROKEN-BREAK only when
# someone runs it; this says so at once.
if [ "$table_only" = 1 ]; then
	breaks | while IFS= read -r line; do
		case "$line" in '#'* | '') continue ;; esac
		parse "$line"
		cp "$file" "$scratch/.orig" && cp "$file" "$scratch/.try" || exit 1
		perl -0pi -e "$subst" "$scratch/.try" 2>/dev/null
		cmp -s "$scratch/.try" "$scratch/.orig" && echo "$name ($file)"
	done >"$scratch/.stale"
	n=$(breaks | grep -c ' @@ ')
	if [ -s "$scratch/.stale" ]; then
		echo "mutate: these breaks no longer change their files (rewrite them for the code as it is now):"
		cat "$scratch/.stale"
		exit 1
	fi
	echo "mutate: all $n breaks change their files"
	exit 0
fi

# Every test named in the table (or all), once, unbroken: they must pass.
all_tests=$(breaks | while IFS= read -r line; do
	case "$line" in '#'* | '') continue ;; esac
	parse "$line"
	[ "$want" = "  " ] || case "$want" in *" $name "*) ;; *) continue ;; esac
	echo $tests
done | tr ' ' '\n' | sort -u | tr '\n' ' ')
if [ "${MUTATE_ALL_TESTS:-0}" = 1 ]; then all_tests=""; fi
echo "mutate: baseline: the tests, unbroken${all_tests:+: $all_tests}"
bad=$(run_tests $all_tests)
if [ -n "$bad" ]; then
	# They prove nothing here; on a shared machine this is often the load.
	echo "mutate: these fail twice without any break and are left out: $bad" >&2
	sed -n '/^FAIL/,$p' "$scratch/.run.log" | head -n 40 >&2
fi

breaks | while IFS= read -r line; do
	case "$line" in '#'* | '') continue ;; esac
	parse "$line"
	[ "$want" = "  " ] || case "$want" in *" $name "*) ;; *) continue ;; esac
	[ "${MUTATE_ALL_TESTS:-0}" = 1 ] && tests=""
	kept=""
	for t in $tests; do
		case " $bad " in *" $t "*) ;; *) kept="$kept $t" ;; esac
	done
	printf 'mutate: %-32s ' "$name" >&2
	if [ -n "$tests" ] && [ -z "$kept" ]; then
		verdict=UNTESTED caught="($(echo $tests) failed unbroken)"
	elif ! apply "$file" "$subst"; then
		verdict=BROKEN-BREAK caught="(the substitution did not change $file)"
	elif ! build; then
		verdict=BROKEN-BREAK caught="(does not build: $(grep -m1 error "$scratch/.build.log"))"
	else
		caught=$(run_tests $kept)
		if [ -n "$caught" ]; then verdict=CAUGHT; else verdict=MISSED caught="($(echo ${kept:-all}) passed)"; fi
		restore "$file"
	fi
	[ "$verdict" = BROKEN-BREAK ] && restore "$file"
	echo "$verdict" >&2
	printf '%s@@%s@@%s\n' "$name" "$caught" "$verdict" >>"$results"
done
build || { echo "mutate: the restored scratch tree does not build" >&2; exit 1; }

echo
printf '%-32s | %-40s | %s\n' "break" "caught by" "verdict"
printf '%-32s-+-%-40s-+-%s\n' "--------------------------------" \
	"----------------------------------------" "-------"
while IFS= read -r line; do
	name=${line%%@@*} rest=${line#*@@}
	printf '%-32s | %-40s | %s\n' "$name" "$(echo ${rest%@@*})" "${rest##*@@}"
done <"$results"
total=$(wc -l <"$results")
caught=$(grep -c '@@CAUGHT$' "$results")
echo "mutate: $caught of $total breaks caught"
[ "$caught" -eq "$total" ]
