/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which npfd socket a client means: the one it names, else $NPF_SOCKET,
 * else the default. libnpf connects there and npfctl names it in its
 * errors; one rule for both. Header-only: libnpf links nothing of common/.
 */
#ifndef NPF_SOCKET_H
#define NPF_SOCKET_H

#include <stdlib.h>
#include "npf_abi.h"

static inline const char *npf_socket_path(const char *path)
{
	if (!path)
		path = getenv("NPF_SOCKET");
	if (!path || !*path)
		path = NPF_DEFAULT_SOCKET;
	return path;
}

#endif
