// SPDX-License-Identifier: GPL-2.0
/* npfctl policy: load, unload, list fault policies; the kill switch. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "npf.h"
#include "npf_print.h"
#include "npfctl.h"

/* h: the watchdog's view of p, when npfd gave one */
static void print_policy(const struct npf_policy_status *p, const struct npf_policy_health *h)
{
	char name[sizeof(p->name) + 1];

	snprintf(name, sizeof(name), "%.*s", (int)sizeof(p->name), p->name);
	open_json_object(NULL);
	print_u64("id", "%-4llu ", p->policy_id);
	print_string("name", "%-16s ", name);
	print_u64("abi_version", "%-4llu ", p->abi_version);
	if (p->region_id)
		print_u64("region", "region %-6llu ", p->region_id);
	else
		print_string("region", "%-13s ", "global");
	print_u64("invocations", "%-12llu ", p->invocations);
	print_u64("clamped", "%-9llu ", p->clamped);
	print_u64("pages_prefetched", "%-12llu", p->pages_prefetched);
	if (h) {
		print_u64("slow_decisions", NULL, h->slow_decisions);
		if (h->state == NPF_POLICY_WATCHDOG)
			print_string("state", "  DISABLED by the %s", "watchdog");
		else
			print_string("state", NULL, "active");
	}
	print_nl();
	close_json_object();
}

static const char policy_header[] =
	"ID   NAME             ABI  SLOT          DECISIONS    CLAMPED   PREFETCHED";

static int policy_list_or_show(const char *name)
{
	struct npf_policy_health *hs = NULL;
	struct npf_policy_status *ps;
	size_t n, nh = 0, i, shown = 0;
	int err = open_client();

	if (err)
		return err;
	err = npf_client__policy_list(client, &ps, &n);
	if (err)
		return request_failed("policy list", err);
	/* an npfd without the watchdog refuses it: the list stands without */
	if (npf_client__policy_health(client, &hs, &nh))
		nh = 0;
	if (!name) {
		/* The kill switch is npfd-wide: say so above the table. */
		if (n)
			print_string(
				NULL, "%s\n",
				ps[0].enabled ?
					"policies enabled" :
					"policies DISABLED (kill switch): every fault gets the built-in decision");
		print_string(NULL, "%s\n", policy_header);
		open_json_array(NULL);
	}
	for (i = 0; i < n; i++) {
		if (name && strncmp(ps[i].name, name, sizeof(ps[i].name)))
			continue;
		if (name && shown == 0)
			print_string(NULL, "%s\n", policy_header);
		print_policy(&ps[i], i < nh && hs[i].policy_id == ps[i].policy_id &&
						     hs[i].region_id == ps[i].region_id ?
					     &hs[i] :
					     NULL);
		shown++;
	}
	if (!name)
		close_json_array();
	free(ps);
	free(hs);
	if (name && !shown) {
		p_err("policy show: no policy named '%s'", name);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

static int do_policy_list(int argc, char **argv)
{
	int err = no_more_args("policy list", argc, argv);

	return err ? err : policy_list_or_show(NULL);
}

static int do_policy_show(int argc, char **argv)
{
	if (argc != 1)
		return usage_error("policy show NAME");
	return policy_list_or_show(argv[0]);
}

/* policy load FILE [region ID] [name NAME] */
static int do_policy_load(int argc, char **argv)
{
	struct npf_policy_status st;
	const char *file, *name = NULL;
	unsigned long region = 0;
	char *end;
	int fd, err;

	if (argc < 1)
		return usage_error("policy load FILE [region ID] [name NAME]");
	file = argv[0];
	for (argc--, argv++; argc > 0; argc -= 2, argv += 2) {
		if (argc < 2)
			return usage_error("policy load: '%s' needs a value", argv[0]);
		if (!strcmp(argv[0], "region")) {
			region = strtoul(argv[1], &end, 10);
			if (*end || !region || region > 0xffffffffUL)
				return usage_error("policy load: region '%s' is not a region id",
						   argv[1]);
		} else if (!strcmp(argv[0], "name")) {
			name = argv[1];
			if (!*name || strlen(name) >= sizeof(st.name))
				return usage_error("policy load: a name is 1 to %zu characters",
						   sizeof(st.name) - 1);
		} else {
			return usage_error(
				"policy load: unknown argument '%s' (region ID, name NAME)",
				argv[0]);
		}
	}
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		p_err("policy load: cannot open %s: %s", file, strerror(errno));
		return EXIT_FAIL;
	}
	err = open_client();
	if (err) {
		close(fd);
		return err;
	}
	err = npf_client__policy_load(client, fd, (__u32)region, name, &st);
	close(fd);
	if (err < 0)
		return request_failed("policy load", err);
	print_string(NULL, "%s\n", policy_header);
	print_policy(&st, NULL);
	return EXIT_OK;
}

/* policy use NAME region ID: a region's owner chooses a loaded policy */
static int do_policy_use(int argc, char **argv)
{
	struct npf_policy_status st;
	unsigned long region;
	char *end;
	int err;

	if (argc != 3 || strcmp(argv[1], "region"))
		return usage_error("policy use NAME region ID");
	region = strtoul(argv[2], &end, 10);
	if (*end || !region || region > 0xffffffffUL)
		return usage_error("policy use: region '%s' is not a region id", argv[2]);
	if (!*argv[0] || strlen(argv[0]) >= sizeof(st.name))
		return usage_error("policy use: a name is 1 to %zu characters",
				   sizeof(st.name) - 1);
	err = open_client();
	if (err)
		return err;
	err = npf_client__policy_load(client, -1, (__u32)region, argv[0], &st);
	if (err < 0)
		return request_failed("policy use", err);
	print_string(NULL, "%s\n", policy_header);
	print_policy(&st, NULL);
	return EXIT_OK;
}

static int do_policy_unload(int argc, char **argv)
{
	int err;

	if (argc != 1)
		return usage_error("policy unload NAME");
	err = open_client();
	if (err)
		return err;
	err = npf_client__policy_unload(client, argv[0]);
	if (err)
		return request_failed("policy unload", err);
	open_json_object(NULL);
	print_string("unloaded", "policy %s unloaded\n", argv[0]);
	close_json_object();
	return EXIT_OK;
}

static int policy_switch(bool on, int argc, char **argv)
{
	int err = no_more_args(on ? "policy enable" : "policy disable", argc, argv);

	if (err)
		return err;
	err = open_client();
	if (err)
		return err;
	err = npf_client__policy_enable(client, on);
	if (err)
		return request_failed(on ? "policy enable" : "policy disable", err);
	open_json_object(NULL);
	print_string("policies", "policies %s\n", on ? "enabled" : "disabled");
	close_json_object();
	return EXIT_OK;
}

static int do_policy_enable(int argc, char **argv)
{
	return policy_switch(true, argc, argv);
}

static int do_policy_disable(int argc, char **argv)
{
	return policy_switch(false, argc, argv);
}

int do_policy(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{"list", do_policy_list},
		{"show", do_policy_show},
		{"load", do_policy_load},
		{"use", do_policy_use},
		{"unload", do_policy_unload},
		{"enable", do_policy_enable},
		{"disable", do_policy_disable},
		{"help", do_help},
		{},
	};

	return cmd_select(cmds, "policy", argc, argv);
}
