/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The swap store (swapstore.c): where the dirty pages of anonymous regions
 * go when eviction takes them away. One file per region in npfd's swap
 * directory; page i of the file is the region's page i (evict.c adds the
 * pages a munmap cut off the region's front); a page is stored iff its
 * range of the file is not a hole. A killed npfd leaves the files behind;
 * the next one finds a region's file when its process adopts the region.
 */
#ifndef NPFD_SWAPSTORE_H
#define NPFD_SWAPSTORE_H

#include <stdbool.h>
#include <sys/types.h>
#include <linux/types.h>
#include "objects.h" /* SWAPSTORE_NAME_LEN */

/*
 * Open the store directory (created 0700 if missing; refused if another
 * user owns it or may write it) and delete the stores whose process is
 * gone or ran in another boot. 0 or -errno, logged.
 */
int swapstore_open(const char *dir);
void swapstore_close(void);
bool swapstore_ready(void);
/*
 * A new store for region id of process pid, named after the process (pid
 * and process_token(): a later process with the same pid does not find it) and
 * the region; pid 0 makes an unnamed one (a copy for a forked child, named
 * once the child takes it: swapstore_link()). The descriptor, or -errno (logged); name gets the file's
 * name ("" for an unnamed one).
 */
int swapstore_create(pid_t pid, __u32 id, char name[SWAPSTORE_NAME_LEN]);
/* The store an earlier npfd left for region id of pid: its descriptor, or -ENOENT. */
int swapstore_find(pid_t pid, __u32 id, char name[SWAPSTORE_NAME_LEN]);
/* The store now belongs to region id (adopted under another id): name is updated. */
int swapstore_rename(char name[SWAPSTORE_NAME_LEN], pid_t pid, __u32 id);
/*
 * An unnamed store (pid 0 above) becomes region id of process pid's: it
 * gets that name, so that the next npfd finds it. 0 or -errno (logged).
 */
int swapstore_link(int fd, pid_t pid, __u32 id, char name[SWAPSTORE_NAME_LEN]);
/* Delete a store by name (a descriptor of it stays usable until closed). */
void swapstore_remove(const char *name);
/* The page at off is not stored any more: its blocks go back (a hole reads zeros). */
void swapstore_punch(int fd, __u64 off);
/* The same for the pages of [off, off + len). */
void swapstore_punch_range(int fd, __u64 off, __u64 len);

#endif
