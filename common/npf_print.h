/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One print call per field, for text and JSON alike (iproute2's
 * print_*(PRINT_ANY, key, fmt, val) idiom): each call names a JSON key and
 * a text format and prints whichever the output mode wants, so the two
 * cannot drift apart. A NULL key prints in text only; a NULL fmt in JSON
 * only. JSON goes through the writer in npf_json.h, on stdout.
 */
#ifndef NPF_PRINT_H
#define NPF_PRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Text (the default) or JSON, pretty-printed or not; call before printing. */
void print_set_json(bool json, bool pretty);
bool is_json_context(void);

void open_json_object(const char *key);
void close_json_object(void);
void open_json_array(const char *key);
void close_json_array(void);

void print_u64(const char *key, const char *fmt, uint64_t v);
void print_string(const char *key, const char *fmt, const char *s);
/* Bytes: a number in JSON, 1.0G in text (fmt takes a %s). */
void print_size(const char *key, const char *fmt, uint64_t v);
/* Nanoseconds: a number in JSON, 4.1µs in text (fmt takes a %s). */
void print_ns(const char *key, const char *fmt, uint64_t v);
/* End a text line (nothing in JSON). */
void print_nl(void);

/* 1.0G: sizes in powers of 1024. */
const char *fmt_size(char *buf, size_t len, uint64_t v);
/* 4.1µs: two or three significant digits. */
const char *fmt_ns(char *buf, size_t len, uint64_t ns);
/* 1d 2h 3m 4s */
const char *fmt_uptime(char *buf, size_t len, uint64_t ns);

#endif
