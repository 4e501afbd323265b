// SPDX-License-Identifier: GPL-2.0
/*
 * The JSON writer (common/npf_json.c) escapes what a client may put in a
 * name: quotes, backslashes, control bytes, and invalid UTF-8, so that
 * `npfctl -j` and the benchmarks' --json rows stay valid JSON whatever the
 * bytes. Also the separators of nested objects and arrays, compact and
 * pretty. No npfd, no root: exit 0 pass, 1 fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "npf_json.h"

static int failures;

static void expect(const char *what, const char *got, const char *want)
{
	if (!strcmp(got, want))
		return;
	fprintf(stderr, "FAIL %s:\n  got  %s\n  want %s\n", what, got, want);
	failures++;
}

/* A stream into *buf, which fclose() completes. */
static FILE *memstream(char **buf)
{
	static size_t len;
	FILE *f;

	*buf = NULL;
	f = open_memstream(buf, &len);
	if (!f) {
		perror("open_memstream");
		exit(1);
	}
	return f;
}

static void escape_case(const char *in, const char *want)
{
	char *buf;
	FILE *f = memstream(&buf);

	npf_json_escape(f, in);
	fclose(f);
	expect(in, buf, want);
	free(buf);
}

/* Every byte sequence a region name may hold, and what JSON must say for it. */
static void test_escape(void)
{
	escape_case("plain", "\"plain\"");
	escape_case("", "\"\"");
	escape_case("a\"b", "\"a\\\"b\"");
	escape_case("a\\b", "\"a\\\\b\"");
	escape_case("l1\nl2\tt\rr", "\"l1\\nl2\\tt\\rr\"");
	escape_case("\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\"");
	escape_case("\x1b[2J", "\"\\u001b[2J\""); /* a terminal escape stays inert */
	escape_case("/", "\"/\"");
	/* Valid UTF-8 is copied: 2, 3 and 4 bytes, and the bounds of each. */
	escape_case("4.1\xc2\xb5s", "\"4.1\xc2\xb5s\"");
	escape_case("\xe2\x82\xac", "\"\xe2\x82\xac\"");
	escape_case("\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\"");
	escape_case("\xc2\x80\xdf\xbf", "\"\xc2\x80\xdf\xbf\"");
	escape_case("\xe0\xa0\x80\xef\xbf\xbf", "\"\xe0\xa0\x80\xef\xbf\xbf\"");
	escape_case("\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\"");
	/* Invalid UTF-8: each offending byte becomes U+FFFD, the rest is kept. */
	escape_case("\x80", "\"\\ufffd\"");			  /* lone continuation */
	escape_case("a\xc3", "\"a\\ufffd\"");			  /* truncated at the end */
	escape_case("\xc3z", "\"\\ufffdz\"");			  /* truncated mid-string */
	escape_case("\xc0\xaf", "\"\\ufffd\\ufffd\"");		  /* overlong '/' */
	escape_case("\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\""); /* overlong, 3 bytes */
	escape_case("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""); /* UTF-16 surrogate */
	escape_case("\xf0\x80\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* overlong, 4 */
	escape_case("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* > U+10FFFF */
	escape_case("\xf5\xff", "\"\\ufffd\\ufffd\"");
	escape_case("\xe2\x82\"", "\"\\ufffd\\ufffd\\\"\""); /* a quote ends a sequence */
}

/* A small document through the writer, compact or pretty. */
static char *document(int pretty)
{
	struct npf_json j;
	char *buf;
	FILE *f = memstream(&buf);

	npf_json_init(&j, f, pretty);
	npf_json_open_object(&j);
	npf_json_key(&j, "na\"me");
	npf_json_string(&j, "r\n1");
	npf_json_key(&j, "n");
	npf_json_u64(&j, 18446744073709551615ULL);
	npf_json_key(&j, "list");
	npf_json_open_array(&j);
	npf_json_double(&j, 2, 1.005);
	npf_json_double(&j, 1, NAN);
	npf_json_double(&j, 1, -INFINITY);
	npf_json_bool(&j, 1);
	npf_json_null(&j);
	npf_json_open_object(&j);
	npf_json_close_object(&j);
	npf_json_open_array(&j);
	npf_json_close_array(&j);
	npf_json_close_array(&j);
	npf_json_key(&j, "raw");
	npf_json_raw(&j, "false");
	npf_json_close_object(&j);
	fclose(f);
	return buf;
}

static void test_writer(void)
{
	char *doc = document(0);

	expect("compact document", doc,
	       "{\"na\\\"me\":\"r\\n1\",\"n\":18446744073709551615,"
	       "\"list\":[1.00,null,null,true,null,{},[]],\"raw\":false}\n");
	free(doc);
	doc = document(1);
	expect("pretty document", doc,
	       "{\n"
	       "    \"na\\\"me\": \"r\\n1\",\n"
	       "    \"n\": 18446744073709551615,\n"
	       "    \"list\": [\n"
	       "        1.00,\n"
	       "        null,\n"
	       "        null,\n"
	       "        true,\n"
	       "        null,\n"
	       "        {},\n"
	       "        []\n"
	       "    ],\n"
	       "    \"raw\": false\n"
	       "}\n");
	free(doc);
}

int main(void)
{
	test_escape();
	test_writer();
	if (failures) {
		fprintf(stderr, "json: %d check(s) failed\n", failures);
		return 1;
	}
	printf("json: escaping and structure as expected\n");
	return 0;
}
