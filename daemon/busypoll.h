/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Busy-polling (busypoll.c): for --poll-us after the last fault, while a
 * CPU is spare, npfd reads the userfaultfds that faulted instead of
 * sleeping.
 */
#ifndef NPFD_BUSYPOLL_H
#define NPFD_BUSYPOLL_H

#include <stdbool.h>
#include <linux/types.h>

struct npfd_mm;

/* --poll-us (live): how long to poll after the last fault; 0 never. */
void busypoll_set(unsigned int us);
/* mm's userfaultfd had messages at t. */
void busypoll_note_hot(struct npfd_mm *mm, __u64 t);
/* A device page request arrived: its next one comes through the ring buffer. */
void busypoll_note_device(void);
/* Is npfd polling now? */
bool busypoll_polling(void);
/* Polling, but quiet for a while: let the threads sharing the CPU run. */
bool busypoll_quiet(void);
/* Read each hot userfaultfd again with fn (the resolver's handler). */
void busypoll_hot(void (*fn)(void *mm));
void busypoll_forget(struct npfd_mm *mm);

#endif
