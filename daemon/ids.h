/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Region and device ids, never reused across restarts: a client whose npfd
 * died adopts its regions and devices under their ids, so the next npfd
 * starts above every id the last one may have handed out (ids.c).
 */
#ifndef NPFD_IDS_H
#define NPFD_IDS_H

#include <stdbool.h>
#include <linux/types.h>

enum id_kind { ID_REGION, ID_DEVICE, ID_KINDS };

/* Read the mark in npfd.ids beside the socket (a directory only npfd may write). */
void ids_open(const char *socket_path);
/* At exit: with no region left, nobody can come back to adopt: forget the mark. */
void ids_close(bool regions_left);
__u32 id_alloc(enum id_kind kind);
/* An adopted object keeps its id: later ids go above it. */
void id_taken(enum id_kind kind, __u32 id);

#endif
