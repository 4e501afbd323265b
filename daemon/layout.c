// SPDX-License-Identifier: GPL-2.0
/* The layout journal (layout.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include "layout.h"
#include "log.h"

void layout_write(struct npfd_mm *mm, int slot, const struct npf_layout_entry *e)
{
	if (mm->layout_fd < 0 || slot < 0)
		return;
	/* one pwrite(): an entry is never seen half written, npfd dead or not */
	if (pwrite(mm->layout_fd, e, sizeof(*e), (off_t)slot * (off_t)sizeof(*e)) !=
	    (ssize_t)sizeof(*e))
		pr_warn_rl("pid %d: cannot write its layout journal: %s", mm->tgid,
			   strerror(errno));
}

int layout_part_slot_take(struct npfd_mm *mm)
{
	for (unsigned int i = 0; i < LAYOUT_PART_SLOTS; i++)
		if (!(mm->layout_part_slots[i / 64] & (1ULL << (i % 64)))) {
			mm->layout_part_slots[i / 64] |= 1ULL << (i % 64);
			return NPF_MAX_RANGES_PER_PROC + (int)i;
		}
	return -1;
}

void layout_part_slot_put(struct npfd_mm *mm, int slot, bool clear)
{
	unsigned int i;

	if (slot < NPF_MAX_RANGES_PER_PROC)
		return;
	i = (unsigned int)slot - NPF_MAX_RANGES_PER_PROC;
	if (clear)
		layout_write(mm, slot, &(struct npf_layout_entry){0});
	mm->layout_part_slots[i / 64] &= ~(1ULL << (i % 64));
}
