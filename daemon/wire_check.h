/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Validation of what arrives on npfd's control socket, as pure functions:
 * no globals, no I/O, no allocation. Each returns 0 or -errno and writes the
 * reason for the client into err. Kept apart from control.c so that a fuzz
 * target can link this file alone (see wire_check.c).
 */
#ifndef NPFD_WIRE_CHECK_H
#define NPFD_WIRE_CHECK_H

#include <stddef.h>
#include "npf_abi.h"
#include "npf_nic_abi.h"

/* Body size each request type carries, or -1 for an unknown type. */
long wire_body_size(__u16 type);

/*
 * One received message: n bytes at buf, recvmsg()'s msg_flags, nfds
 * descriptors taken from it. Checks truncation, the header, the body size
 * of the type and how many descriptors the type may carry.
 */
int wire_check_request(const void *buf, size_t n, int msg_flags, int nfds, char *err,
		       size_t errlen);

/* What a region request says, before npfd looks at its descriptors or memory. */
int wire_check_region_req(const struct npf_region_req *req, int nfds, char *err, size_t errlen);

/* A policy request: flags, and a name that fits its field with its NUL. */
int wire_check_policy_load(const struct npf_policy_load_req *req, int nfds, char *err,
			   size_t errlen);

/*
 * An IO page table's header as read from the client's memfd of object_size
 * bytes, for a device inside the region [region_start, +region_length):
 * magic, version, a page count and entry offset whose table fits the object
 * (no sum or product may wrap), and a device range inside the region. On
 * success *map_len is how much of the object npfd maps.
 */
int wire_check_iopt(const struct npf_iopt_header *hdr, __u64 object_size, __u64 region_start,
		    __u64 region_length, size_t *map_len, char *err, size_t errlen);

#endif
