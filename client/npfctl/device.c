// SPDX-License-Identifier: GPL-2.0
/* npfctl device: the device memory regions npfd serves. */
#include <stdlib.h>
#include "npf.h"
#include "npf_print.h"
#include "npfctl.h"

static int do_device_list(int argc, char **argv)
{
	struct npf_device_info *di;
	size_t n, i;
	int err = no_more_args("device list", argc, argv);

	if (err)
		return err;
	err = open_client();
	if (err)
		return err;
	err = npf_client__device_list(client, &di, &n);
	if (err)
		return request_failed("device list", err);
	print_string(
		NULL, "%s\n",
		"ID     REGION PID      START               PAGES      REQUESTS   WAITING  MAPPED     INVALIDATIONS MEAN-SERVICE");
	open_json_array(NULL);
	for (i = 0; i < n; i++) {
		open_json_object(NULL);
		print_u64("id", "%-6llu ", di[i].device_id);
		print_u64("region", "%-6llu ", di[i].region_id);
		print_u64("pid", "%-8llu ", di[i].tgid);
		print_u64("start", "0x%-16llx ", di[i].start);
		print_u64("pages", "%-10llu ", di[i].npages);
		print_u64("page_requests", "%-10llu ", di[i].page_requests);
		print_u64("requests_waiting", "%-8llu ", di[i].requests_waiting);
		print_u64("pages_mapped", "%-10llu ", di[i].pages_mapped);
		print_u64("invalidations", "%-13llu ", di[i].invalidations);
		print_ns("mean_service_ns", "%s",
			 di[i].page_requests ? di[i].fault_ns_sum / di[i].page_requests : 0);
		print_nl();
		close_json_object();
	}
	close_json_array();
	free(di);
	return EXIT_OK;
}

int do_device(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{"list", do_device_list},
		{"show", do_device_list},
		{"help", do_help},
		{},
	};

	return cmd_select(cmds, "device", argc, argv);
}
