/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What npfctl's files share (bpftool's main.h): the exit codes, the
 * options every object may look at, the error and command-dispatch
 * helpers in main.c, and one entry point per object. Printing is
 * common/npf_print.h.
 */
#ifndef NPFCTL_H
#define NPFCTL_H

#include <stdbool.h>
#include <stddef.h>
#include "npf.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

extern bool prometheus_output;	  /* --format prometheus (stats only) */
extern bool top_once;		  /* --once (top only) */
extern struct npf_client *client; /* open_client() connects it */

/* One error line on stderr ({"error": "..."} in JSON mode). */
__attribute__((format(printf, 1, 2))) void p_err(const char *fmt, ...);
/* A usage error: says so with a pointer to the grammar; returns EXIT_USAGE. */
__attribute__((format(printf, 1, 2))) int usage_error(const char *fmt, ...);
/* npfd refused, or the exchange failed: say what npfd (or libnpf) said; EXIT_FAIL. */
int request_failed(const char *what, int err);
/* Connect client to npfd (--socket, $NPF_SOCKET, the default); EXIT_FAIL with a reason. */
int open_client(void);

struct cmd {
	const char *name;
	int (*func)(int argc, char **argv);
};

/* Run the command argv[0] from cmds; with no command, the first one. */
int cmd_select(const struct cmd *cmds, const char *object, int argc, char **argv);
/* A usage error when arguments remain, else 0. */
int no_more_args(const char *what, int argc, char **argv);
int do_help(int argc, char **argv);

/* A name a client chose: bounded, and harmless on a terminal in text mode. */
const char *region_name(char *buf, const char name[NPF_NAME_LEN]);

void print_prometheus(const struct npf_status *st, const struct npf_region_stats_full *sf, size_t n,
		      const struct npf_region_info *ri, size_t nri,
		      const struct npf_budget_info *bi, size_t nbi);

/* The objects. */
int do_status(int argc, char **argv);
int do_region(int argc, char **argv);
int do_stats(int argc, char **argv);
int do_policy(int argc, char **argv);
int do_device(int argc, char **argv);
int do_top(int argc, char **argv);
int do_doctor(int argc, char **argv);

#endif
