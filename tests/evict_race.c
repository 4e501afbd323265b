// SPDX-License-Identifier: GPL-2.0
/*
 * CPU writes racing eviction are never lost. Four threads increment
 * counters spread over every page of an anonymous region eight times its
 * budget, so npfd evicts pages while they are written: a write that
 * lands on a page after npfd read it out and before it dropped it would
 * be lost (the freeze, UFFDIO_WRITEPROTECT, is what prevents it; the
 * write waits, then faults the page back). Each thread owns every fourth
 * word of a page, and keeps its own count of each word's increments in
 * private memory: at the end every word must equal its count.
 */
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include "harness.h"
#include "budget.h"
#include "npf.h"

#define PG 4096UL
#define NPG 512UL
#define BUDGET 64UL
#define THREADS 4
#define SECONDS 4

static uint64_t *mem;
static volatile int stop;

struct worker {
	int t;
	uint64_t *counts; /* private: increments of word w of page p */
	uint64_t ops;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(w->t + 1);

	while (!stop) {
		uint64_t p, k, i;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p = x % NPG;
		k = (x >> 32) % (PG / 8 / THREADS);
		i = p * (PG / 8) + k * THREADS + (uint64_t)w->t;
		/* plain load and store, as a program does: one thread owns the word */
		mem[i] = mem[i] + 1;
		w->counts[p * (PG / 8 / THREADS) + k]++;
		w->ops++;
	}
	return NULL;
}

static struct npf_budget_info budget(struct npf_client *c, int id)
{
	return th_budget(c, id);
}

int main(void)
{
	struct worker w[THREADS];
	pthread_t th[THREADS];
	struct th_npfd d;
	struct npf_client *c;
	struct npf_budget_info bi;
	uint64_t lost = 0, ops = 0;
	int id, t;

	th_npfd_start(&d, NULL);
	NPF_OPTS(npf_client_opts, co, .socket_path = d.sock);
	c = npf_client__connect(&co);
	TH_ASSERT(c, "connect: %s", strerror(errno));
	mem = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TH_ASSERT(mem != MAP_FAILED, "mmap");
	NPF_OPTS(npf_region_opts, o, .name = "evict-race");
	id = npf_client__register(c, mem, NPG * PG, &o);
	TH_ASSERT(id > 0, "register: %s", npf_client__errmsg(c));
	TH_ASSERT(!npf_client__region_set(c, (__u32)id, NPF_SET_BUDGET, BUDGET * PG, NULL),
		  "set budget: %s", npf_client__errmsg(c));

	for (t = 0; t < THREADS; t++) {
		w[t] = (struct worker){.t = t};
		w[t].counts = calloc(NPG * (PG / 8 / THREADS), sizeof(uint64_t));
		TH_ASSERT(w[t].counts, "calloc");
		TH_ASSERT(!pthread_create(&th[t], NULL, work, &w[t]), "pthread_create");
	}
	sleep(SECONDS);
	stop = 1;
	for (t = 0; t < THREADS; t++) {
		pthread_join(th[t], NULL);
		ops += w[t].ops;
	}
	bi = budget(c, id);
	printf("%llu increments; npfd evicted %llu pages (%llu written back, %llu read back, %llu kept)\n",
	       (unsigned long long)ops, (unsigned long long)bi.evicted_pages,
	       (unsigned long long)bi.written_pages, (unsigned long long)bi.refaults,
	       (unsigned long long)bi.aborted);
	for (uint64_t p = 0; p < NPG; p++)
		for (uint64_t k = 0; k < PG / 8 / THREADS; k++)
			for (t = 0; t < THREADS; t++) {
				uint64_t want = w[t].counts[p * (PG / 8 / THREADS) + k];
				uint64_t got = mem[p * (PG / 8) + k * THREADS + (uint64_t)t];

				if (got != want && lost++ < 5)
					printf("page %llu word %llu: %llu, incremented %llu times\n",
					       (unsigned long long)p,
					       (unsigned long long)(k * THREADS + (uint64_t)t),
					       (unsigned long long)got, (unsigned long long)want);
			}
	for (t = 0; t < THREADS; t++)
		free(w[t].counts);
	TH_ASSERT(!lost, "%llu words lost writes", (unsigned long long)lost);
	TH_ASSERT(bi.evicted_pages > NPG, "eviction did not race the writers: %llu pages evicted",
		  (unsigned long long)bi.evicted_pages);
	npf_client__close(c);
	th_npfd_stop(&d);
	printf("PASS\n");
	return 0;
}
