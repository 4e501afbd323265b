// SPDX-License-Identifier: GPL-2.0
/* The text-or-JSON print layer: see npf_print.h. */
#include <stdio.h>
#include "npf_json.h"
#include "npf_print.h"

static bool json_output;
static struct npf_json jw;

void print_set_json(bool json, bool pretty)
{
	json_output = json;
	npf_json_init(&jw, stdout, pretty);
}

bool is_json_context(void)
{
	return json_output;
}

void open_json_object(const char *key)
{
	if (!json_output)
		return;
	if (key)
		npf_json_key(&jw, key);
	npf_json_open_object(&jw);
}

void close_json_object(void)
{
	if (json_output)
		npf_json_close_object(&jw);
}

void open_json_array(const char *key)
{
	if (!json_output)
		return;
	if (key)
		npf_json_key(&jw, key);
	npf_json_open_array(&jw);
}

void close_json_array(void)
{
	if (json_output)
		npf_json_close_array(&jw);
}

void print_u64(const char *key, const char *fmt, uint64_t v)
{
	if (json_output) {
		if (key) {
			npf_json_key(&jw, key);
			npf_json_u64(&jw, v);
		}
	} else if (fmt) {
		printf(fmt, (unsigned long long)v);
	}
}

void print_string(const char *key, const char *fmt, const char *s)
{
	if (json_output) {
		if (key) {
			npf_json_key(&jw, key);
			npf_json_string(&jw, s);
		}
	} else if (fmt) {
		printf(fmt, s);
	}
}

void print_size(const char *key, const char *fmt, uint64_t v)
{
	char buf[32];

	print_u64(key, NULL, v);
	print_string(NULL, fmt, fmt_size(buf, sizeof(buf), v));
}

void print_ns(const char *key, const char *fmt, uint64_t v)
{
	char buf[32];

	print_u64(key, NULL, v);
	print_string(NULL, fmt, fmt_ns(buf, sizeof(buf), v));
}

void print_nl(void)
{
	if (!json_output)
		putchar('\n');
}

const char *fmt_size(char *buf, size_t len, uint64_t v)
{
	static const char units[] = "KMGTPE";
	double d = (double)v;
	int u = -1;

	if (v < 1024) {
		snprintf(buf, len, "%llu", (unsigned long long)v);
		return buf;
	}
	while (d >= 1024 && u < 5) {
		d /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f%c", d, units[u]);
	return buf;
}

const char *fmt_ns(char *buf, size_t len, uint64_t ns)
{
	static const char *const units[] = {"ns", "µs", "ms", "s"};
	double d = (double)ns;
	int u = 0;

	while (u < 3 && d >= 999.5) {
		d /= 1000;
		u++;
	}
	if (!u)
		snprintf(buf, len, "%lluns", (unsigned long long)ns);
	else
		snprintf(buf, len, d < 9.95 ? "%.1f%s" : "%.0f%s", d, units[u]);
	return buf;
}

const char *fmt_uptime(char *buf, size_t len, uint64_t ns)
{
	unsigned long long s = ns / 1000000000ULL;

	if (s >= 86400)
		snprintf(buf, len, "%llud %lluh %llum %llus", s / 86400, s % 86400 / 3600,
			 s % 3600 / 60, s % 60);
	else if (s >= 3600)
		snprintf(buf, len, "%lluh %llum %llus", s / 3600, s % 3600 / 60, s % 60);
	else if (s >= 60)
		snprintf(buf, len, "%llum %llus", s / 60, s % 60);
	else
		snprintf(buf, len, "%llus", s);
	return buf;
}
