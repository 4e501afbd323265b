// SPDX-License-Identifier: GPL-2.0
/*
 * evict_cgroup with two npf clients in the one limited cgroup: each
 * registers twice the limit, writes and reads it back; neither may be
 * OOM-killed (see evict_cgroup.c and daemon/memcg.c).
 */
#define NCLIENTS 2
#include "evict_cgroup.c"
