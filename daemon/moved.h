/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Parts of regions that mremap() moved away (moved.c). A region is one
 * range, so a part moved leaves it; what only npfd held of that part
 * goes to its new place: the pages of eviction's swap store, or the pages
 * of a file-backed region's file. The part's new range stays registered
 * (the kernel moved the registration with it) until they are all there,
 * and its faults wait until then; then npfd unregisters it and the kernel
 * serves it as any memory of the process.
 */
#ifndef NPFD_MOVED_H
#define NPFD_MOVED_H

#include <stdbool.h>
#include "objects.h"

/*
 * Put back the part of npages pages moved to dst, page j from fd at byte
 * off0 + j pages: those set in wanted if wanted, else every page with data
 * in the file (a file's part: none in its holes or past its end). A page present there stays
 * as it is (it moved with its data). fd and wanted are
 * taken (fd may be -1: nothing to put back). punch: fd is a swap store:
 * a page's slot is punched once it is back.
 */
void moved_start(struct npfd_mm *mm, __u32 region_id, __u64 dst, __u64 npages, int fd, __u64 off0,
		 struct bitmap *wanted, bool punch);
/* From the event loop: more of the parts put back, in turn (MOVED_STEP_PAGES at most). */
void moved_step(void);
/* A part still being put back: moved_step() again soon. */
bool moved_pending(void);
/* Does a fault in [addr, addr + len) of mm wait for a part being put back? */
bool moved_waits(const struct npfd_mm *mm, __u64 addr, __u64 len);
/*
 * The process dropped (MADV_DONTNEED: anonymous pages read zeros now) or
 * unmapped [start, end): nothing is put back there.
 */
void moved_removed(struct npfd_mm *mm, __u64 start, __u64 end, bool unmapped);
/* mremap moved [from, from + len) to to: a part being put back there follows. */
void moved_remapped(struct npfd_mm *mm, __u64 from, __u64 to, __u64 len);
/*
 * npfd stops: the parts are finished if they can be (2 s at most); the
 * others stay registered with their journal entries, for the process to
 * finish (libnpf), or are unregistered if it has no journal (their faults
 * wake to the kernel's zeros).
 */
void moved_stop(void);
/* mm's journal was just made: every part of it written there. */
void moved_journal_all(struct npfd_mm *mm);
/* Descriptors npfd holds for mm's parts (one each): per-uid limits. */
unsigned int moved_fds(const struct npfd_mm *mm);
/* mm is torn down: its parts are forgotten (their entries stay if npfd stops or gave it up). */
void moved_mm_gone(struct npfd_mm *mm);

/* A late install may still read the put-back page: a new one (mmcall.h). */
void moved_retire_sources(void);

#endif
