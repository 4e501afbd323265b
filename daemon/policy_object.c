// SPDX-License-Identifier: GPL-2.0
/*
 * What a policy object says about itself (policy_object.h), read from its
 * ELF with libelf before libbpf sees it. Only a privileged peer may send an
 * object (policy.c), but the bytes are still checked as hostile: a fuzz
 * target (tests/fuzz/policy_object.c) links this file alone.
 */
#include <errno.h>
#include <stddef.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include "policy_object.h"
#include "util.h"

int policy_object_info(const void *buf, size_t size, struct npf_policy_info *info, char *err,
		       size_t errlen)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	int ret = -ENOENT;
	Elf *elf;

	elf_version(EV_CURRENT);
	elf = elf_memory((char *)buf, size);
	if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getshdrstrndx(elf, &shstrndx)) {
		if (elf)
			elf_end(elf);
		return refuse(err, errlen, ENOEXEC,
			      "not an ELF object: build policies with clang -target bpf");
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, NPF_POLICY_SECTION))
			continue;
		data = elf_getdata(scn, NULL);
		/* A SHT_NOBITS section has a size but no bytes (d_buf NULL). */
		if (!data || !data->d_buf || data->d_size < offsetof(typeof(*info), kind)) {
			ret = refuse(err, errlen, EINVAL, "section %s is too short",
				     NPF_POLICY_SECTION);
			break;
		}
		/* an object built before `kind` ends at name: a fault policy */
		memset(info, 0, sizeof(*info));
		memcpy(info, data->d_buf,
		       data->d_size < sizeof(*info) ? data->d_size : sizeof(*info));
		ret = 0;
		break;
	}
	elf_end(elf);
	if (ret == -ENOENT)
		return refuse(
			err, errlen, EINVAL,
			"no %s section: not an npf policy (declare it with NPF_POLICY(\"name\"))",
			NPF_POLICY_SECTION);
	if (ret)
		return ret;
	if (info->magic != NPF_POLICY_MAGIC)
		return refuse(err, errlen, EINVAL, "bad magic 0x%08x in %s", info->magic,
			      NPF_POLICY_SECTION);
	if (info->abi_version != NPF_POLICY_ABI_VERSION)
		return refuse(err, errlen, EPROTONOSUPPORT,
			      "policy ABI version %u is not supported: this npfd speaks version %d",
			      info->abi_version, NPF_POLICY_ABI_VERSION);
	if (info->kind != NPF_POLICY_KIND_FAULT && info->kind != NPF_POLICY_KIND_EVICT)
		return refuse(
			err, errlen, EINVAL,
			"policy kind %u is unknown: npfd loads fault policies (NPF_POLICY) and eviction policies (NPF_EVICT_POLICY)",
			info->kind);
	info->name[sizeof(info->name) - 1] = '\0';
	return 0;
}
