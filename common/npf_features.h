/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel features npf uses, each probed by trying it (as libbpf's
 * features.c and CRIU's kerndat.c do). One table, shared by `npfd --check`
 * and `npfctl doctor`; a probe runs at most once per process. (Not named
 * features.h: that is glibc's <features.h>.)
 */
#ifndef NPF_FEATURES_H
#define NPF_FEATURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum npf_feat_result {
	NPF_FEAT_UNPROBED = 0,
	NPF_FEAT_YES,	  /* tried, and it works */
	NPF_FEAT_NO,	  /* tried, and the kernel refused or lacks it */
	NPF_FEAT_UNKNOWN, /* could not be tried (see the detail) */
};

/* What a missing feature costs. */
enum npf_feat_need {
	NPF_NEED_REQUIRED, /* npfd cannot run without it */
	NPF_NEED_OPTIONAL, /* npfd runs; the `disables` text says what is lost */
	NPF_NEED_INFO,	   /* npf does not use it: shown for context only */
};

struct npf_feature {
	const char *group; /* "userfaultfd", "io_uring", "bpf", "tracing" */
	const char *name;
	enum npf_feat_result (*probe)(char *detail, size_t len);
	enum npf_feat_need need;
	const char *disables;	     /* what does not work without it */
	enum npf_feat_result result; /* cached */
	char detail[160];	     /* the probe's evidence: errno, timing, path */
};

extern struct npf_feature npf_features[];
extern const size_t npf_nr_features;

/* Run f's probe unless it already ran; returns the cached result. */
enum npf_feat_result npf_feature_probe(struct npf_feature *f);

/* "ok", "missing", "refused", "unknown": the word a report shows for f. */
const char *npf_feature_verdict(const struct npf_feature *f);

/*
 * Probe everything and print one line per feature, then what is disabled.
 * Returns the number of required features that do not work.
 */
int npf_features_report(FILE *out);

/* Required features that do not work (probing them first). */
int npf_features_missing_required(void);

#endif
