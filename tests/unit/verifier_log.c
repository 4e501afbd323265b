// SPDX-License-Identifier: GPL-2.0
/*
 * The verifier's log cut to its reason (verifier_tail, daemon/verifier_log.c,
 * used when npfd refuses a policy): the two lines before the statistics
 * line, appended to the error after ": verifier: ", on one line.
 */
#include "unit.h"
#include "verifier_log.h"

static void tail(const char *log, const char *prefix, const char *want)
{
	char buf[4096], err[256];

	snprintf(buf, sizeof(buf), "%s", log);
	snprintf(err, sizeof(err), "%s", prefix);
	verifier_tail(buf, err, sizeof(err));
	UT_STREQ(err, want, "verifier tail");
}

int main(void)
{
	char big[2048], err[64];

	tail("func#0 @0\n"
	     "0: R1=ctx() R10=fp0\n"
	     "0: (b7) r0 = 0\n"
	     "1: (79) r2 = *(u64 *)(r1 +8)\n"
	     "invalid bpf_context access off=8 size=8\n"
	     "processed 2 insns (limit 1000000) max_states_per_insn 0 total_states 0\n",
	     "policy 'x': load refused",
	     "policy 'x': load refused: verifier: 1: (79) r2 = *(u64 *)(r1 +8) "
	     "invalid bpf_context access off=8 size=8");
	/* trailing blank lines, no statistics line */
	tail("a\nb\nc\nd\n\n\n", "E", "E: verifier: c d");
	/* a log of one line */
	tail("R0 !read_ok\n", "E", "E: verifier: R0 !read_ok");
	/* an empty log */
	tail("", "E", "E: verifier: ");
	/* "processed" is cut where it starts a line, not inside one */
	tail("x\nlast insn processed here\nerror\nprocessed 9 insns\n", "E",
	     "E: verifier: last insn processed here error");

	/* a long log into a short error: truncated, terminated, no newline */
	memset(big, 'v', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[100] = '\n';
	snprintf(err, sizeof(err), "E");
	verifier_tail(big, err, sizeof(err));
	UT_EQ(strlen(err), sizeof(err) - 1, "truncated to the error buffer");
	UT_CHECK(!strchr(err, '\n'), "no newline left");
	return ut_done("the verifier log's tail");
}
