// SPDX-License-Identifier: GPL-2.0
/* npfctl region: the registered regions. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "npf.h"
#include "npf_print.h"
#include "npfctl.h"

const char *region_name(char *buf, const char name[NPF_NAME_LEN])
{
	size_t i, n = strnlen(name, NPF_NAME_LEN);

	memcpy(buf, name, n);
	buf[n] = '\0';
	if (!is_json_context())
		for (i = 0; i < n; i++)
			if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
				buf[i] = '?';
	return buf;
}

static const char *backing_name(__u32 backing)
{
	switch (backing) {
	case NPF_BACKING_ANON:
		return "anon";
	case NPF_BACKING_FILE:
		return "file";
	}
	return "unknown";
}

static int do_region_list(int argc, char **argv)
{
	struct npf_region_info *ri;
	char name[NPF_NAME_LEN + 1];
	size_t n, i;
	int err;

	err = no_more_args("region list", argc, argv);
	if (err)
		return err;
	err = open_client();
	if (err)
		return err;
	err = npf_client__region_list(client, &ri, &n);
	if (err)
		return request_failed("region list", err);

	print_string(NULL, "%s\n",
		     "ID     PID      START               LENGTH    BACKING  OFFSET          NAME");
	open_json_array(NULL);
	for (i = 0; i < n; i++) {
		open_json_object(NULL);
		print_u64("id", "%-6llu ", ri[i].region_id);
		print_u64("pid", "%-8llu ", ri[i].tgid);
		print_u64("start", "0x%-16llx ", ri[i].start);
		print_size("length", "%-9s ", ri[i].length);
		print_string("backing", "%-8s ", backing_name(ri[i].backing));
		if (is_json_context() || ri[i].backing == NPF_BACKING_FILE)
			print_u64("file_offset", "0x%-13llx ", ri[i].file_offset);
		else
			print_string(NULL, "%-15s ", "-");
		region_name(name, ri[i].name);
		print_string("name", "%s", is_json_context() || *name ? name : "-");
		print_nl();
		close_json_object();
	}
	close_json_array();
	free(ri);
	return EXIT_OK;
}

/* SIZE: bytes, or with a K, M, G or T suffix (binary: 1K = 1024); "none" is 0. */
static int parse_size(const char *s, __u64 *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!strcmp(s, "none")) {
		*out = 0;
		return 0;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-' || *s == '+')
		return -EINVAL;
	switch (*end) {
	case 'K':
	case 'k':
		shift = 10;
		end++;
		break;
	case 'M':
	case 'm':
		shift = 20;
		end++;
		break;
	case 'G':
	case 'g':
		shift = 30;
		end++;
		break;
	case 'T':
	case 't':
		shift = 40;
		end++;
		break;
	}
	if (*end == 'i' && shift)
		end++;
	if ((*end == 'B' || *end == 'b') && shift)
		end++;
	if (*end || (shift && v > (ULLONG_MAX >> shift)))
		return -EINVAL;
	*out = (__u64)v << shift;
	return 0;
}

/* npfctl region set ID budget SIZE */
static int do_region_set(int argc, char **argv)
{
	struct npf_budget_info bi;
	unsigned long id;
	char *end;
	__u64 size;
	int err;

	if (argc < 1)
		return usage_error("region set: missing region ID");
	errno = 0;
	id = strtoul(argv[0], &end, 10);
	if (errno || end == argv[0] || *end || *argv[0] == '-' || !id || id > UINT_MAX)
		return usage_error("region set: '%s' is not a region id (1..%u)", argv[0],
				   UINT_MAX);
	if (argc < 2 || strcmp(argv[1], "budget"))
		return usage_error("region set ID: want 'budget SIZE'%s%s",
				   argc < 2 ? "" : ", not ", argc < 2 ? "" : argv[1]);
	if (argc < 3)
		return usage_error("region set ID budget: missing SIZE");
	if (parse_size(argv[2], &size))
		return usage_error(
			"region set ID budget: '%s' is not a size (bytes, or with K, M, G, T; 'none' for no budget)",
			argv[2]);
	err = no_more_args("region set ID budget SIZE", argc - 3, argv + 3);
	if (err)
		return err;
	err = open_client();
	if (err)
		return err;
	err = npf_client__region_set(client, (__u32)id, NPF_SET_BUDGET, size, &bi);
	if (err) {
		char what[64];

		snprintf(what, sizeof(what), "region set %lu budget", id);
		return request_failed(what, err);
	}
	open_json_object(NULL);
	print_u64("id", "region %llu", bi.region_id);
	print_u64("budget_pages", "  budget %llu pages", bi.budget_pages);
	print_u64("high_pages", " (high %llu", bi.high_pages);
	print_u64("low_pages", ", low %llu)", bi.low_pages);
	print_u64("resident_pages", "  resident %llu\n", bi.resident_pages);
	close_json_object();
	return EXIT_OK;
}

int do_region(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{"list", do_region_list},
		{"show", do_region_list},
		{"set", do_region_set},
		{"help", do_help},
		{},
	};

	return cmd_select(cmds, "region", argc, argv);
}
