// SPDX-License-Identifier: GPL-2.0
/*
 * Control-message validation (wire_check.h). Everything here trusts nothing
 * it is given: lengths are checked before fields are read, and sums of
 * client-supplied sizes use overflow-checked arithmetic.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include "wire_check.h"

/* The highest user address npf serves (x86-64 4-level paging). */
#define USER_TOP (1ULL << 47)

static int wire_refuse(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int wire_refuse(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -code;
}

long wire_body_size(__u16 type)
{
	switch (type) {
	case NPF_MSG_STATUS:
	case NPF_MSG_FORK_PREPARE:
	case NPF_MSG_LAYOUT:
	case NPF_MSG_REGION_LIST:
	case NPF_MSG_DEVICE_LIST:
	case NPF_MSG_POLICY_LIST:
	case NPF_MSG_POLICY_HEALTH:
		return 0;
	case NPF_MSG_REGION_REGISTER:
		return sizeof(struct npf_region_req);
	case NPF_MSG_REGION_ADOPT:
		return sizeof(struct npf_region_adopt_req);
	case NPF_MSG_DEVICE_ADOPT:
		return sizeof(struct npf_device_adopt_req);
	case NPF_MSG_REGION_UNREGISTER:
	case NPF_MSG_STATS:
		return sizeof(struct npf_region_id_req);
	case NPF_MSG_DEVICE_ATTACH:
		return sizeof(struct npf_device_attach_req);
	case NPF_MSG_DEVICE_DETACH:
		return sizeof(struct npf_device_id_req);
	case NPF_MSG_POLICY_LOAD:
		return sizeof(struct npf_policy_load_req);
	case NPF_MSG_POLICY_UNLOAD:
		return sizeof(struct npf_policy_name_req);
	case NPF_MSG_POLICY_ENABLE:
		return sizeof(struct npf_policy_enable_req);
	case NPF_MSG_REGION_SET:
		return sizeof(struct npf_region_set_req);
	case NPF_MSG_BUDGET_LIST:
		return sizeof(struct npf_region_id_req);
	case NPF_MSG_EVICT_RING:
		return sizeof(struct npf_evict_ring_req);
	case NPF_MSG_FORK_DONE:
		return sizeof(struct npf_fork_req);
	case NPF_MSG_REGION_FORKED:
		return sizeof(struct npf_region_forked_req);
	}
	return -1;
}

/* How many descriptors a request type may carry; the handler checks the exact count. */
static int max_fds(__u16 type)
{
	switch (type) {
	case NPF_MSG_REGION_REGISTER:
	case NPF_MSG_REGION_ADOPT:
	case NPF_MSG_REGION_FORKED:
		return 2; /* userfaultfd, backing file */
	case NPF_MSG_DEVICE_ATTACH:
	case NPF_MSG_DEVICE_ADOPT:
		return 1; /* IO page table */
	case NPF_MSG_POLICY_LOAD:
		return 1; /* object file; none: choose a loaded policy */
	}
	return 0;
}

int wire_check_request(const void *buf, size_t n, int msg_flags, int nfds, char *err, size_t errlen)
{
	struct npf_msg_hdr hdr;
	long want;

	if (msg_flags & MSG_TRUNC)
		return wire_refuse(err, errlen, EMSGSIZE,
				   "request too large: requests are at most %d bytes", NPF_REQ_MAX);
	if (msg_flags & MSG_CTRUNC)
		return wire_refuse(err, errlen, EINVAL,
				   "too many descriptors: the control data was truncated");
	if (n == 0)
		return wire_refuse(err, errlen, EBADMSG, "empty request");
	if (n < sizeof(hdr))
		return wire_refuse(err, errlen, EBADMSG,
				   "truncated request: %zu bytes, the header alone is %zu", n,
				   sizeof(hdr));
	memcpy(&hdr, buf, sizeof(hdr)); /* buf need not be aligned */
	if (hdr.magic != NPF_PROTO_MAGIC)
		return wire_refuse(err, errlen, EBADMSG, "bad magic 0x%08x: not an npf request",
				   hdr.magic);
	if (hdr.version != NPF_PROTO_VERSION)
		return wire_refuse(
			err, errlen, EPROTONOSUPPORT,
			"protocol version %u is not supported: this npfd speaks version %d",
			hdr.version, NPF_PROTO_VERSION);
	if (hdr.len != n)
		return wire_refuse(err, errlen, EBADMSG,
				   "length field says %u bytes but the request has %zu", hdr.len,
				   n);
	want = wire_body_size(hdr.type);
	if (want < 0)
		return wire_refuse(err, errlen, EOPNOTSUPP, "unknown request type %u", hdr.type);
	if (n - sizeof(hdr) != (size_t)want)
		return wire_refuse(err, errlen, EBADMSG,
				   "request type %u needs a %ld-byte body, got %zu", hdr.type, want,
				   n - sizeof(hdr));
	if (nfds && !max_fds(hdr.type))
		return wire_refuse(err, errlen, EINVAL, "request type %u takes no descriptors",
				   hdr.type);
	if (nfds > max_fds(hdr.type))
		return wire_refuse(err, errlen, EINVAL,
				   "request type %u takes at most %d descriptor%s, got %d",
				   hdr.type, max_fds(hdr.type), max_fds(hdr.type) == 1 ? "" : "s",
				   nfds);
	return 0;
}

int wire_check_region_req(const struct npf_region_req *req, int nfds, char *err, size_t errlen)
{
	__u64 end, file_end;
	int want_fds;

	if (req->backing != NPF_BACKING_ANON && req->backing != NPF_BACKING_FILE)
		return wire_refuse(err, errlen, EINVAL,
				   "unknown backing type %u (want 1=anon or 2=file)", req->backing);
	if (req->flags & ~NPF_REGION_FAULT_AROUND)
		return wire_refuse(err, errlen, EINVAL, "unknown flags 0x%x", req->flags);
	if (req->pad || (!(req->flags & NPF_REGION_FAULT_AROUND) && req->fault_around_kib))
		return wire_refuse(
			err, errlen, EINVAL,
			"fault_around_kib is set without NPF_REGION_FAULT_AROUND, or pad is not 0");
	if (req->fault_around_kib > NPF_FAULT_AROUND_MAX_KIB ||
	    req->fault_around_kib & (req->fault_around_kib - 1) ||
	    (req->fault_around_kib && req->fault_around_kib < NPF_PAGE_SIZE / 1024))
		return wire_refuse(
			err, errlen, EINVAL,
			"fault-around of %u KiB: want 0 (the faulting page only) or a power of two from 4 to %d",
			req->fault_around_kib, NPF_FAULT_AROUND_MAX_KIB);
	want_fds = req->backing == NPF_BACKING_FILE ? 2 : 1;
	if (nfds != want_fds)
		return wire_refuse(err, errlen, EINVAL,
				   "%s region needs %d descriptor%s (userfaultfd%s), got %d",
				   want_fds == 2 ? "a file-backed" : "an anonymous", want_fds,
				   want_fds == 2 ? "s" : "", want_fds == 2 ? ", backing file" : "",
				   nfds);
	if (!req->length)
		return wire_refuse(err, errlen, EINVAL, "region length is 0");
	if ((req->start | req->length | req->file_offset) & (NPF_PAGE_SIZE - 1))
		return wire_refuse(
			err, errlen, EINVAL,
			"region 0x%llx+0x%llx (file offset 0x%llx) is not page aligned (4096)",
			(unsigned long long)req->start, (unsigned long long)req->length,
			(unsigned long long)req->file_offset);
	if (__builtin_add_overflow(req->start, req->length, &end) || end > USER_TOP)
		return wire_refuse(err, errlen, EINVAL,
				   "region 0x%llx+0x%llx is outside user space",
				   (unsigned long long)req->start, (unsigned long long)req->length);
	/*
	 * pread() takes a signed offset: the region's last byte must be one,
	 * in its file or (an adopted anonymous region) its swap store.
	 */
	if ((__builtin_add_overflow(req->file_offset, req->length, &file_end) ||
	     file_end > (__u64)INT64_MAX))
		return wire_refuse(err, errlen, EOVERFLOW,
				   "file offset %llu + length %llu is past the largest file offset",
				   (unsigned long long)req->file_offset,
				   (unsigned long long)req->length);
	return 0;
}

int wire_check_policy_load(const struct npf_policy_load_req *req, int nfds, char *err,
			   size_t errlen)
{
	if (req->flags)
		return wire_refuse(err, errlen, EINVAL, "unknown flags 0x%x", req->flags);
	if (!memchr(req->name, '\0', sizeof(req->name)))
		return wire_refuse(err, errlen, EINVAL,
				   "the policy name is not NUL-terminated (at most %zu characters)",
				   sizeof(req->name) - 1);
	if (!nfds && !req->name[0])
		return wire_refuse(
			err, errlen, EINVAL,
			"choosing a loaded policy needs its name (or pass an object file to load one)");
	return 0;
}

int wire_check_iopt(const struct npf_iopt_header *hdr, __u64 object_size, __u64 region_start,
		    __u64 region_length, size_t *map_len, char *err, size_t errlen)
{
	size_t need;

	if (hdr->magic != NPF_IOPT_MAGIC)
		return wire_refuse(err, errlen, EINVAL, "the IO page table has a bad magic");
	if (hdr->version != NPF_IOPT_VERSION)
		return wire_refuse(err, errlen, EPROTONOSUPPORT,
				   "IO page table version %u is not supported (npfd speaks %d)",
				   hdr->version, NPF_IOPT_VERSION);
	/* Every sum and product below is checked: the header is the client's. */
	if (!hdr->npages || hdr->pte_offset < sizeof(*hdr) || hdr->pte_offset % 8 ||
	    __builtin_mul_overflow(hdr->npages, sizeof(__u64), &need) ||
	    __builtin_add_overflow(need, hdr->pte_offset, &need) || need > object_size ||
	    (hdr->start & (NPF_PAGE_SIZE - 1)))
		return wire_refuse(
			err, errlen, EINVAL,
			"the IO page table header is inconsistent (%llu pages at offset %llu, object %llu bytes)",
			(unsigned long long)hdr->npages, (unsigned long long)hdr->pte_offset,
			(unsigned long long)object_size);
	if (hdr->start < region_start || hdr->start - region_start > region_length ||
	    hdr->npages > (region_length - (hdr->start - region_start)) >> NPF_PAGE_SHIFT)
		return wire_refuse(
			err, errlen, ERANGE,
			"the device range 0x%llx+%llu pages is not inside its region (0x%llx-0x%llx)",
			(unsigned long long)hdr->start, (unsigned long long)hdr->npages,
			(unsigned long long)region_start,
			(unsigned long long)(region_start + region_length));
	*map_len = need;
	return 0;
}
