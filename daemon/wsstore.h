/* SPDX-License-Identifier: GPL-2.0 */
/* Working-set records for the wsreplay policy (wsstore.c). */
#ifndef NPFD_WSSTORE_H
#define NPFD_WSSTORE_H

#include "npf_abi.h"

struct npfd_region;

/* --ws-dir: where records are kept (set at start and on reload). */
void ws_set_dir(const char *dir);
/* Append page of r to its record. */
void ws_record(struct npfd_region *r, __u64 page);
/* r was registered: with wsreplay loaded, queue the pages its last run recorded. */
void ws_region_registered(struct npfd_region *r);
void ws_region_gone(struct npfd_region *r);

#endif
