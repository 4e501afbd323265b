// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz the first look npfd takes at a policy object (policy_object_info):
 * libelf over bytes a client sent, before libbpf sees them. An accepted
 * object's info must carry the magic, the ABI version and a terminated name.
 * The corpus holds two shipped policies, debug info stripped.
 * FUZZ_SOURCES: daemon/policy_object.c daemon/util.c -lelf
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "policy_object.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct npf_policy_info info;
	char err[256] = "";
	void *copy = malloc(size ? size : 1);
	int rc;

	/* A copy of exactly size bytes, so that a read past it is caught. */
	memcpy(copy, data, size);
	rc = policy_object_info(copy, size, &info, err, sizeof(err));
	free(copy);
	if (rc) {
		if (!memchr(err, '\0', sizeof(err)) || !err[0])
			abort();
		return 0;
	}
	if (info.magic != NPF_POLICY_MAGIC || info.abi_version != NPF_POLICY_ABI_VERSION ||
	    !memchr(info.name, '\0', sizeof(info.name)))
		abort();
	return 0;
}
