/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A streaming JSON writer (as iproute2's and bpftool's json_writer): the
 * caller says key, value, open, close; the writer places the commas, the
 * colons and, when pretty, the newlines and indentation, and escapes every
 * string so the document stays valid whatever bytes a name holds.
 * npfctl's print layer (npf_print.h) and the benchmarks' rows use it.
 */
#ifndef NPF_JSON_H
#define NPF_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define NPF_JSON_MAX_DEPTH 16

struct npf_json {
	FILE *out;
	bool pretty;
	int depth;
	bool first[NPF_JSON_MAX_DEPTH]; /* no member written yet at this depth */
	bool after_key;			/* a key was written: the value follows directly */
};

void npf_json_init(struct npf_json *j, FILE *out, bool pretty);

/*
 * s as a JSON string literal, quotes included: '"', '\\' and control
 * characters escaped, valid UTF-8 copied, each byte of invalid UTF-8
 * (overlong forms, surrogates, code points past U+10FFFF, truncated
 * sequences) replaced by U+FFFD.
 */
void npf_json_escape(FILE *f, const char *s);

void npf_json_key(struct npf_json *j, const char *key);
void npf_json_string(struct npf_json *j, const char *s);
void npf_json_u64(struct npf_json *j, uint64_t v);
/* prec digits after the point; NaN and infinities (not JSON numbers) become null. */
void npf_json_double(struct npf_json *j, int prec, double v);
void npf_json_bool(struct npf_json *j, bool v);
void npf_json_null(struct npf_json *j);
/* A value the caller formatted as JSON already (a number, null, true, false). */
void npf_json_raw(struct npf_json *j, const char *value);

void npf_json_open_object(struct npf_json *j);
void npf_json_close_object(struct npf_json *j);
void npf_json_open_array(struct npf_json *j);
void npf_json_close_array(struct npf_json *j);

#endif
