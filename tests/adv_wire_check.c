// SPDX-License-Identifier: GPL-2.0
/*
 * daemon/wire_check.c on its own, as a fuzz target will link it: the
 * control-message checks refuse each hostile shape with its errno (sizes,
 * wrap-arounds, descriptors) and let the well-formed ones through. No npfd
 * needed: the functions are pure.
 */
#include <stdint.h>
#include "harness.h"
#include "../daemon/wire_check.c"

static char err[NPF_ERRMSG_LEN];

#define CHECK(what, got, want)                                                                     \
	do {                                                                                       \
		int g_ = (got);                                                                    \
		printf("%-48s -> %d %s\n", what, g_, g_ ? err : "");                               \
		TH_ASSERT(g_ == (want), "%s: %d, want %d (%s)", what, g_, want, err);              \
	} while (0)

static size_t req(char *buf, __u16 type, size_t body)
{
	struct npf_msg_hdr h = {.magic = NPF_PROTO_MAGIC,
				.version = NPF_PROTO_VERSION,
				.type = type,
				.len = (__u32)(sizeof(h) + body),
				.seq = 1};

	memcpy(buf, &h, sizeof(h));
	memset(buf + sizeof(h), 0, body);
	return sizeof(h) + body;
}

int main(void)
{
	char buf[NPF_REQ_MAX + 1];
	struct npf_region_req r;
	struct npf_policy_load_req pl;
	size_t n;

	/* whole messages */
	CHECK("empty message", wire_check_request(buf, 0, 0, 0, err, sizeof(err)), -EBADMSG);
	CHECK("3 bytes", wire_check_request("NPF", 3, 0, 0, err, sizeof(err)), -EBADMSG);
	n = req(buf, NPF_MSG_STATUS, 0);
	CHECK("status", wire_check_request(buf, n, 0, 0, err, sizeof(err)), 0);
	CHECK("status, truncated", wire_check_request(buf, n, MSG_TRUNC, 0, err, sizeof(err)),
	      -EMSGSIZE);
	CHECK("status, control truncated",
	      wire_check_request(buf, n, MSG_CTRUNC, 0, err, sizeof(err)), -EINVAL);
	CHECK("status with a descriptor", wire_check_request(buf, n, 0, 1, err, sizeof(err)),
	      -EINVAL);
	CHECK("length field 8 bytes short", wire_check_request(buf, n + 8, 0, 0, err, sizeof(err)),
	      -EBADMSG);
	n = req(buf + 1, NPF_MSG_STATUS, 0); /* unaligned: must not matter */
	CHECK("status at an odd address", wire_check_request(buf + 1, n, 0, 0, err, sizeof(err)),
	      0);
	n = req(buf, 0x7fff, 0);
	CHECK("unknown type", wire_check_request(buf, n, 0, 0, err, sizeof(err)), -EOPNOTSUPP);
	n = req(buf, NPF_MSG_REGION_REGISTER, 8);
	CHECK("register, 8-byte body", wire_check_request(buf, n, 0, 2, err, sizeof(err)),
	      -EBADMSG);
	n = req(buf, NPF_MSG_REGION_REGISTER, sizeof(r));
	CHECK("register, 2 descriptors", wire_check_request(buf, n, 0, 2, err, sizeof(err)), 0);
	CHECK("register, 3 descriptors", wire_check_request(buf, n, 0, 3, err, sizeof(err)),
	      -EINVAL);
	n = req(buf, NPF_MSG_POLICY_LOAD, sizeof(pl));
	CHECK("policy load, no descriptor", wire_check_request(buf, n, 0, 0, err, sizeof(err)), 0);
	CHECK("policy load, 2 descriptors", wire_check_request(buf, n, 0, 2, err, sizeof(err)),
	      -EINVAL);

	/* region requests */
	memset(&r, 0, sizeof(r));
	r.start = 0x7f0000000000ULL;
	r.length = 1 << 20;
	r.backing = NPF_BACKING_FILE;
	CHECK("file region", wire_check_region_req(&r, 2, err, sizeof(err)), 0);
	CHECK("file region, 1 descriptor", wire_check_region_req(&r, 1, err, sizeof(err)), -EINVAL);
	r.file_offset = ~0ULL - 4095;
	CHECK("file offset 2^64 - 4096 (wraps)", wire_check_region_req(&r, 2, err, sizeof(err)),
	      -EOVERFLOW);
	r.file_offset = (1ULL << 63) - (1 << 20) - 4096;
	CHECK("file offset ending at 2^63 - 4096", wire_check_region_req(&r, 2, err, sizeof(err)),
	      0);
	r.file_offset = (1ULL << 63) - (1 << 20);
	CHECK("file offset ending at 2^63 (no file is that long)",
	      wire_check_region_req(&r, 2, err, sizeof(err)), -EOVERFLOW);
	r.file_offset = 1ULL << 63;
	CHECK("file offset 2^63", wire_check_region_req(&r, 2, err, sizeof(err)), -EOVERFLOW);
	r.file_offset = 100;
	CHECK("unaligned file offset", wire_check_region_req(&r, 2, err, sizeof(err)), -EINVAL);
	r.file_offset = 0;
	r.start = ~0ULL - 4095;
	CHECK("start + length wraps", wire_check_region_req(&r, 2, err, sizeof(err)), -EINVAL);
	r.start = (1ULL << 47) - 4096;
	CHECK("region past user space", wire_check_region_req(&r, 2, err, sizeof(err)), -EINVAL);
	r.start = 0x1000;
	r.length = 0;
	CHECK("length 0", wire_check_region_req(&r, 2, err, sizeof(err)), -EINVAL);
	r.length = 4096;
	r.backing = 7;
	CHECK("backing 7", wire_check_region_req(&r, 2, err, sizeof(err)), -EINVAL);
	r.backing = NPF_BACKING_ANON;
	r.flags = 0x80;
	CHECK("unknown flag", wire_check_region_req(&r, 1, err, sizeof(err)), -EINVAL);
	r.flags = NPF_REGION_FAULT_AROUND;
	r.fault_around_kib = 64;
	CHECK("fault-around 64 KiB", wire_check_region_req(&r, 1, err, sizeof(err)), 0);
	r.fault_around_kib = 96;
	CHECK("fault-around 96 KiB", wire_check_region_req(&r, 1, err, sizeof(err)), -EINVAL);
	r.flags = 0;
	r.fault_around_kib = 64;
	CHECK("fault_around_kib without its flag", wire_check_region_req(&r, 1, err, sizeof(err)),
	      -EINVAL);

	/* policy requests */
	memset(&pl, 'x', sizeof(pl));
	pl.flags = 0;
	CHECK("policy name without its NUL", wire_check_policy_load(&pl, 1, err, sizeof(err)),
	      -EINVAL);
	memset(pl.name, 0, sizeof(pl.name));
	CHECK("choose a policy without a name", wire_check_policy_load(&pl, 0, err, sizeof(err)),
	      -EINVAL);
	strcpy(pl.name, "seq");
	CHECK("choose 'seq'", wire_check_policy_load(&pl, 0, err, sizeof(err)), 0);
	printf("PASS\n");
	return 0;
}
