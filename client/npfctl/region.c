// SPDX-License-Identifier: GPL-2.0
/* npfctl region: the registered regions. */
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

int do_region(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{"list", do_region_list},
		{"show", do_region_list},
		{"help", do_help},
		{},
	};

	return cmd_select(cmds, "region", argc, argv);
}
