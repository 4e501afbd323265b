// SPDX-License-Identifier: GPL-2.0
/* npfctl status: npfd's pid, protocol, uptime and global counters. */
#include <string.h>
#include "npf.h"
#include "npf_print.h"
#include "npfctl.h"

static int do_status_show(int argc, char **argv)
{
	struct npf_status st;
	char buf[64], bpffs[sizeof(st.bpffs) + 1];
	int err;

	err = no_more_args("status show", argc, argv);
	if (err)
		return err;
	err = open_client();
	if (err)
		return err;
	err = npf_client__status(client, &st);
	if (err)
		return request_failed("status", err);
	memcpy(bpffs, st.bpffs, sizeof(st.bpffs));
	bpffs[sizeof(st.bpffs)] = '\0';

	open_json_object(NULL);
	print_u64("npfd_pid", "npfd pid          %llu\n", st.npfd_pid);
	print_u64("proto_version", "protocol version  %llu\n", st.proto_version);
	print_u64("uptime_ns", NULL, st.uptime_ns);
	print_string(NULL, "uptime            %s\n", fmt_uptime(buf, sizeof(buf), st.uptime_ns));
	print_u64("clients", "clients           %llu\n", st.clients);
	print_u64("regions", "regions           %llu\n", st.regions);
	print_u64("faults_resolved", "faults resolved   %llu\n", st.faults_resolved);
	print_u64("batches", "batches           %llu\n", st.batches);
	print_u64("iommu_faults", "iommu faults      %llu\n", st.iommu_faults);
	print_u64("records_dropped", "records dropped   %llu\n", st.records_dropped);
	print_u64("bad_messages", "bad messages      %llu\n", st.bad_messages);
	print_u64("filter_misses", "filter misses     %llu\n", st.filter_misses);
	print_string("bpffs", "bpffs dir         %s\n", bpffs);
	close_json_object();
	return EXIT_OK;
}

int do_status(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{"show", do_status_show},
		{"help", do_help},
		{},
	};

	return cmd_select(cmds, "status", argc, argv);
}
