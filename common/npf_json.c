// SPDX-License-Identifier: GPL-2.0
/* The JSON writer: see npf_json.h. */
#include <math.h>
#include "npf_json.h"

void npf_json_init(struct npf_json *j, FILE *out, bool pretty)
{
	j->out = out;
	j->pretty = pretty;
	j->depth = 0;
	j->first[0] = true;
	j->after_key = false;
}

/* Length of the valid UTF-8 sequence at p (2..4), or 0 when it is not one. */
static int utf8_len(const unsigned char *p)
{
	unsigned char c = p[0];
	int n, i;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0; /* a continuation byte, an overlong lead (c0, c1) or past U+10FFFF */
	for (i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	/* Overlong 3- and 4-byte forms, UTF-16 surrogates, past U+10FFFF. */
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) ||
	    (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))
		return 0;
	return n;
}

void npf_json_escape(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	while (*p) {
		unsigned char ch = *p;
		int n;

		if (ch == '"' || ch == '\\') {
			fprintf(f, "\\%c", ch);
		} else if (ch == '\n') {
			fputs("\\n", f);
		} else if (ch == '\t') {
			fputs("\\t", f);
		} else if (ch == '\r') {
			fputs("\\r", f);
		} else if (ch < 0x20 || ch == 0x7f) {
			fprintf(f, "\\u%04x", ch);
		} else if (ch < 0x80) {
			fputc(ch, f);
		} else if ((n = utf8_len(p))) {
			fwrite(p, 1, (size_t)n, f);
			p += n - 1;
		} else {
			fputs("\\ufffd", f);
		}
		p++;
	}
	fputc('"', f);
}

static void indent(struct npf_json *j)
{
	int i;

	if (!j->pretty)
		return;
	fputc('\n', j->out);
	for (i = 0; i < j->depth; i++)
		fputs("    ", j->out);
}

/* Separate a new member or element from the previous one. */
static void begin_value(struct npf_json *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (j->depth) {
		if (!j->first[j->depth])
			fputc(',', j->out);
		j->first[j->depth] = false;
		indent(j);
	}
}

void npf_json_key(struct npf_json *j, const char *key)
{
	begin_value(j);
	npf_json_escape(j->out, key);
	fputs(j->pretty ? ": " : ":", j->out);
	j->after_key = true;
}

void npf_json_string(struct npf_json *j, const char *s)
{
	begin_value(j);
	npf_json_escape(j->out, s);
}

void npf_json_u64(struct npf_json *j, uint64_t v)
{
	begin_value(j);
	fprintf(j->out, "%llu", (unsigned long long)v);
}

void npf_json_double(struct npf_json *j, int prec, double v)
{
	begin_value(j);
	if (isfinite(v))
		fprintf(j->out, "%.*f", prec, v);
	else
		fputs("null", j->out);
}

void npf_json_bool(struct npf_json *j, bool v)
{
	npf_json_raw(j, v ? "true" : "false");
}

void npf_json_null(struct npf_json *j)
{
	npf_json_raw(j, "null");
}

void npf_json_raw(struct npf_json *j, const char *value)
{
	begin_value(j);
	fputs(value, j->out);
}

static void open_container(struct npf_json *j, char ch)
{
	begin_value(j);
	fputc(ch, j->out);
	/*
	 * Nesting deeper than NPF_JSON_MAX_DEPTH is a caller's bug (npf's
	 * documents nest four deep): the writer stays in bounds, but the
	 * separators of the too-deep levels are then wrong.
	 */
	if (j->depth + 1 < NPF_JSON_MAX_DEPTH)
		j->depth++;
	j->first[j->depth] = true;
}

static void close_container(struct npf_json *j, char ch)
{
	bool empty = j->first[j->depth];

	if (j->depth)
		j->depth--;
	if (!empty)
		indent(j);
	fputc(ch, j->out);
	if (!j->depth)
		fputc('\n', j->out);
}

void npf_json_open_object(struct npf_json *j)
{
	open_container(j, '{');
}

void npf_json_close_object(struct npf_json *j)
{
	close_container(j, '}');
}

void npf_json_open_array(struct npf_json *j)
{
	open_container(j, '[');
}

void npf_json_close_array(struct npf_json *j)
{
	close_container(j, ']');
}
