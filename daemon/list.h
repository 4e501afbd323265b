/* SPDX-License-Identifier: GPL-2.0 */
/* The kernel's intrusive doubly linked list, the parts npfd uses. */
#ifndef NPFD_LIST_H
#define NPFD_LIST_H

#include <stddef.h>

struct list_head {
	struct list_head *next, *prev;
};

#define LIST_HEAD_INIT(name)                                                                       \
	{                                                                                          \
		&(name), &(name)                                                                   \
	}

static inline void INIT_LIST_HEAD(struct list_head *h)
{
	h->next = h->prev = h;
}

static inline void list_add_tail(struct list_head *n, struct list_head *h)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static inline void list_del_init(struct list_head *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	INIT_LIST_HEAD(n);
}

static inline int list_empty(const struct list_head *h)
{
	return h->next == h;
}

/* Move every entry of from to the end of to; from is left empty. */
static inline void list_splice_init(struct list_head *from, struct list_head *to)
{
	if (list_empty(from))
		return;
	from->next->prev = to->prev;
	to->prev->next = from->next;
	from->prev->next = to;
	to->prev = from->prev;
	INIT_LIST_HEAD(from);
}

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#define list_entry(ptr, type, member) container_of(ptr, type, member)

#define list_for_each_entry(pos, head, member)                                                     \
	for (pos = list_entry((head)->next, __typeof__(*pos), member); &pos->member != (head);     \
	     pos = list_entry(pos->member.next, __typeof__(*pos), member))

#define list_for_each_entry_safe(pos, n, head, member)                                             \
	for (pos = list_entry((head)->next, __typeof__(*pos), member),                             \
	    n = list_entry(pos->member.next, __typeof__(*pos), member);                            \
	     &pos->member != (head);                                                               \
	     pos = n, n = list_entry(n->member.next, __typeof__(*n), member))

#endif
