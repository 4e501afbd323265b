// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzz npfd's option parsing: the command line (config_parse_args) and the
 * configuration file (config_load), with what the fuzzer writes as both.
 * The input is split at its first 0xff byte: before it, NUL-separated
 * arguments; after it, the file's content (read through a memfd).
 * FUZZ_SOURCES: daemon/config.c daemon/log.c
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *sep = memchr(data, 0xff, size);
	size_t alen = sep ? (size_t)(sep - data) : size;
	char *args = calloc(1, alen + 1), *argv[64], path[64], err[512];
	struct npfd_cmdline cl;
	struct npfd_config cfg;
	int argc = 0, fd;
	size_t i;

	memcpy(args, data, alen);
	argv[argc++] = "npfd";
	for (i = 0; i < alen && argc < 63; i += strlen(args + i) + 1)
		argv[argc++] = args + i;
	argv[argc] = NULL;

	fd = memfd_create("npfd.conf", MFD_CLOEXEC);
	if (fd < 0)
		abort();
	if (sep && write(fd, sep + 1, size - alen - 1) < 0)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

	optind = 0; /* glibc: a full re-initialisation of getopt */
	opterr = 0;
	memset(&cl, 0, sizeof(cl));
	if (config_parse_args(argc, argv, &cl) == 0) {
		/* The file given by the fuzzer, as if it were /etc/npf/npfd.conf. */
		cl.config_path = path;
		cl.config_given = true;
		if (config_load(&cl, &cfg, err, sizeof(err)) == 0) {
			FILE *out = fopen("/dev/null", "w");

			config_print(out, &cfg, path);
			fclose(out);
		} else if (!memchr(err, '\0', sizeof(err))) {
			abort(); /* a refusal always says why, in one terminated line */
		}
	}
	close(fd);
	free(args);
	return 0;
}
