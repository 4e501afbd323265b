// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz npfd's check of an IO page table header (wire_check_iopt), the
 * client-written memfd npfd maps and writes: the input is the header, the
 * object's size and the region the device claims to be in. A header the
 * check accepts must give a table that fits the object and a device range
 * inside the region, with nothing wrapping.
 * FUZZ_SOURCES: daemon/wire_check.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "wire_check.h"

struct input {
	__u64 object_size;
	__u64 region_start;
	__u64 region_length;
	struct npf_iopt_header hdr;
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = {0};
	char err[256] = "";
	size_t map_len = 0;
	__u64 table, end;
	int rc;

	memcpy(&in, data, size < sizeof(in) ? size : sizeof(in));
	/* A region as npfd keeps one: page-aligned, inside user space (wire_check_region_req). */
	in.region_start &= ((1ULL << 47) - 1) & ~(__u64)(NPF_PAGE_SIZE - 1);
	in.region_length &= ~(__u64)(NPF_PAGE_SIZE - 1);
	if (in.region_length > (1ULL << 47) - in.region_start)
		in.region_length = (1ULL << 47) - in.region_start;
	/* Most inputs should reach past the magic and the version. */
	if (!(in.hdr.pad[0] & 1)) {
		in.hdr.magic = NPF_IOPT_MAGIC;
		in.hdr.version = NPF_IOPT_VERSION;
	}
	rc = wire_check_iopt(&in.hdr, in.object_size, in.region_start, in.region_length, &map_len,
			     err, sizeof(err));
	if (rc) {
		if (!memchr(err, '\0', sizeof(err)) || !err[0])
			abort(); /* a refusal says why */
		return 0;
	}
	if (__builtin_mul_overflow(in.hdr.npages, 8, &table) ||
	    __builtin_add_overflow(table, in.hdr.pte_offset, &table) || table != map_len ||
	    map_len > in.object_size || in.hdr.pte_offset < sizeof(in.hdr) || !in.hdr.npages)
		abort();
	if (in.hdr.start < in.region_start ||
	    __builtin_mul_overflow(in.hdr.npages, NPF_PAGE_SIZE, &end) ||
	    __builtin_add_overflow(end, in.hdr.start, &end) ||
	    end - in.region_start > in.region_length)
		abort();
	return 0;
}
