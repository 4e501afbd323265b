/* SPDX-License-Identifier: GPL-2.0 */
#ifndef NPFD_VERIFIER_LOG_H
#define NPFD_VERIFIER_LOG_H

#include <stddef.h>

/*
 * Append ": verifier: " and the two lines before the verifier log's
 * statistics line (what was wrong and where) to err, on one line. log is
 * modified.
 */
void verifier_tail(char *log, char *err, size_t errlen);

#endif
