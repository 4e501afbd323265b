/* SPDX-License-Identifier: GPL-2.0 */
#ifndef NPFD_POLICY_OBJECT_H
#define NPFD_POLICY_OBJECT_H

#include <stddef.h>
#include "npf_abi.h"

/*
 * The NPF_POLICY_SECTION of the BPF object in buf (size bytes): its magic,
 * ABI version and name (NUL-terminated on return). 0, or -errno with the
 * reason in err (not an ELF object, no such section, too short, bad magic,
 * another ABI version).
 */
int policy_object_info(const void *buf, size_t size, struct npf_policy_info *info, char *err,
		       size_t errlen);

#endif
