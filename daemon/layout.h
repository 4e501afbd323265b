/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The layout journal of an address space (npf_abi.h NPF_MSG_LAYOUT): where
 * its regions are now, and the parts of them that mremap() moved away and
 * npfd is still putting back (moved.c). Its slots: the regions' first
 * (region.c hands those out), the parts' after them (handed out here).
 */
#ifndef NPFD_LAYOUT_H
#define NPFD_LAYOUT_H

#include "objects.h"

/* The journal's size in bytes. */
#define LAYOUT_SIZE (NPF_LAYOUT_ENTRIES * sizeof(struct npf_layout_entry))

/* Write entry e at slot (none: no journal yet). One pwrite(): never seen half written. */
void layout_write(struct npfd_mm *mm, int slot, const struct npf_layout_entry *e);
/* A free part slot of mm, taken; -1 if every one is taken. */
int layout_part_slot_take(struct npfd_mm *mm);
/* The part slot is free again; clear: its entry too (else it stays, for the process). */
void layout_part_slot_put(struct npfd_mm *mm, int slot, bool clear);

#endif
