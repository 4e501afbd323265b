// SPDX-License-Identifier: GPL-2.0
/*
 * npfctl doctor: every kernel feature npf uses, tried (common/features.c);
 * the text report is npfd --check's.
 */
#include <stdio.h>
#include "npf_features.h"
#include "npf.h"
#include "npf_print.h"
#include "npfctl.h"

static const char *need_name(enum npf_feat_need need)
{
	switch (need) {
	case NPF_NEED_REQUIRED:
		return "required";
	case NPF_NEED_OPTIONAL:
		return "optional";
	default:
		return "unused";
	}
}

int do_doctor(int argc, char **argv)
{
	size_t i;
	int err, missing;

	err = no_more_args("doctor", argc, argv);
	if (err)
		return err;
	/* The text report is npfd --check's, word for word. */
	if (!is_json_context()) {
		missing = npf_features_report(stdout);
		return missing ? EXIT_FAIL : EXIT_OK;
	}
	missing = npf_features_missing_required();
	open_json_object(NULL);
	open_json_array("features");
	for (i = 0; i < npf_nr_features; i++) {
		const struct npf_feature *f = &npf_features[i];

		open_json_object(NULL);
		print_string("group", NULL, f->group);
		print_string("name", NULL, f->name);
		print_string("result", NULL, npf_feature_verdict(f));
		print_string("need", NULL, need_name(f->need));
		print_string("detail", NULL, f->detail);
		print_string("disables", NULL, f->disables);
		close_json_object();
	}
	close_json_array();
	print_u64("missing_required", NULL, (__u64)missing);
	close_json_object();
	return missing ? EXIT_FAIL : EXIT_OK;
}
