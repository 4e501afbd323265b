// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz the checks npfd makes on every control message before it acts on it
 * (daemon/wire_check.c). The first byte picks recvmsg()'s flags and the
 * number of descriptors the message came with. If the second byte's top bit
 * is set, the rest is the message as received; else the rest is a body and a
 * well-formed header for request type (second byte & 0x3f) is put before it,
 * so that the body checks are reached without guessing magic and lengths.
 * Besides sanitizer reports, a request the checks accept must be one npfd
 * can act on safely: its length is the header's, its body the type's size,
 * a region inside user space without wrapping, a file range pread() can name.
 * FUZZ_SOURCES: daemon/wire_check.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "wire_check.h"

#define REFUSED_SAYS_WHY(rc, err)                                                                  \
	do {                                                                                       \
		if ((rc) && (!memchr((err), '\0', sizeof(err)) || !(err)[0]))                      \
			abort();                                                                   \
	} while (0)

static void check_region(const void *body, int nfds)
{
	struct npf_region_req req;
	char err[256] = "";
	__u64 end;
	int rc;

	memcpy(&req, body, sizeof(req));
	rc = wire_check_region_req(&req, nfds, err, sizeof(err));
	REFUSED_SAYS_WHY(rc, err);
	if (rc)
		return;
	if (!req.length || __builtin_add_overflow(req.start, req.length, &end) ||
	    end > (1ULL << 47) || ((req.start | req.length) & (NPF_PAGE_SIZE - 1)))
		abort();
	if (req.backing == NPF_BACKING_FILE &&
	    (__builtin_add_overflow(req.file_offset, req.length, &end) || end > (__u64)INT64_MAX))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int flags[] = {0, MSG_TRUNC, MSG_CTRUNC, 0};
	static uint8_t msg[NPF_REQ_MAX + sizeof(struct npf_msg_hdr)];
	struct npf_msg_hdr hdr;
	char err[256] = "";
	int msg_flags, nfds, rc;
	long body;

	if (size < 2)
		return 0;
	msg_flags = flags[data[0] & 3];
	nfds = (data[0] >> 2) & 7;
	if (!(data[1] & 0x80) && size - 2 <= NPF_REQ_MAX) {
		hdr = (struct npf_msg_hdr){.magic = NPF_PROTO_MAGIC,
					   .version = NPF_PROTO_VERSION,
					   .type = data[1] & 0x3f,
					   .len = sizeof(hdr) + size - 2};
		memcpy(msg, &hdr, sizeof(hdr));
		memcpy(msg + sizeof(hdr), data + 2, size - 2);
		data = msg;
		size = hdr.len;
	} else {
		data += 2;
		size -= 2;
	}

	rc = wire_check_request(data, size, msg_flags, nfds, err, sizeof(err));
	REFUSED_SAYS_WHY(rc, err);
	if (rc)
		return 0;
	if (msg_flags || size < sizeof(hdr))
		abort();
	memcpy(&hdr, data, sizeof(hdr));
	body = wire_body_size(hdr.type);
	if (hdr.len != size || body < 0 || size - sizeof(hdr) != (size_t)body)
		abort();

	if (hdr.type == NPF_MSG_REGION_REGISTER) {
		check_region(data + sizeof(hdr), nfds);
	} else if (hdr.type == NPF_MSG_POLICY_LOAD) {
		struct npf_policy_load_req req;

		memcpy(&req, data + sizeof(hdr), sizeof(req));
		rc = wire_check_policy_load(&req, nfds, err, sizeof(err));
		REFUSED_SAYS_WHY(rc, err);
		if (!rc && !memchr(req.name, '\0', sizeof(req.name)))
			abort();
	}
	return 0;
}
