/* SPDX-License-Identifier: GPL-2.0 */
/*
 * npfd's options: built-in defaults < the configuration file < the command
 * line. One table describes every option; its long name is also its key in
 * the file (npfd.conf(5)), so the two cannot disagree.
 */
#ifndef NPFD_CONFIG_H
#define NPFD_CONFIG_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#define NPFD_DEFAULT_CONFIG "/etc/npf/npfd.conf"
#define NPFD_DEFAULT_WS_DIR "/var/lib/npf/ws"
#define NPFD_DEFAULT_SWAP_DIR "/var/lib/npf/swap"

struct npfd_config {
	char socket[108];      /* sizeof(sun_path) */
	char socket_group[64]; /* a group name or number; "": npfd's own */
	char bpffs[256];
	unsigned int staging_pages;
	unsigned int poll_us;
	unsigned int fault_around_kib;
	bool trace_cpu_faults;
	char ws_dir[256];
	unsigned int client_budget_mib;
	unsigned int budget_high_pct, budget_low_pct;
	char swap_dir[256];
	unsigned int mm_call_timeout_ms;
	unsigned int verbose;
	bool quiet;
	bool foreground;
	unsigned long set; /* bit per option (enum in config.c) given by the source */
};

enum npfd_action {
	NPFD_RUN,
	NPFD_HELP,	   /* --help */
	NPFD_CHECK,	   /* --check: probe kernel features */
	NPFD_CHECK_CONFIG, /* --check-config: print the effective configuration */
	NPFD_VERSION,	   /* --version */
};

/* What the command line said: its options, and which file to read. */
struct npfd_cmdline {
	struct npfd_config opt; /* only the options in opt.set */
	const char *config_path;
	bool config_given; /* --config: the file must be readable */
	enum npfd_action action;
};

/* Parse argv; on a usage error print one line to stderr and return -EINVAL. */
int config_parse_args(int argc, char **argv, struct npfd_cmdline *cl);

/*
 * The effective configuration: defaults, then the file (a missing default
 * file is no error), then the command line. On error, err holds one line
 * naming the file, the line and the problem, and -errno is returned.
 */
int config_load(const struct npfd_cmdline *cl, struct npfd_config *out, char *err, size_t len);

/* The log level the configuration asks for (enum log_level). */
int config_log_level(const struct npfd_config *c);

/* The configuration in file syntax (what --check-config prints). */
void config_print(FILE *f, const struct npfd_config *c, const char *path);

/*
 * Merge a re-read configuration into the running one: what can change live
 * is copied into *cur (logged); what needs a restart is logged as such and
 * left as it runs. Only the values: main.c applies them to npfd's modules.
 */
void config_reload_merge(struct npfd_config *cur, const struct npfd_config *next);

/* The --help text: generated from the option table. */
void config_usage(FILE *f);
/* The gid socket-group names; -1 when it names none (npfd's own group). */
int config_socket_gid(const struct npfd_config *c, gid_t *gid);

#endif
