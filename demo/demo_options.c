/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * demo_options.c - spoke-demo's options (demo_options.h).
 */
#include "demo_options.h"

#include <stdlib.h>

static struct demo_options parsed;

static const char *demo_option(void *ctx, int key, const char *arg)
{
	struct demo_options *o = ctx;
	char *end;
	long v;

	switch (key) {
	case 's':
		o->seconds = strtod(arg, &end);
		return *end || !(o->seconds > 0 && o->seconds <= 86400) ? "seconds, above 0, at "
									  "most 86400"
									: NULL;
	case 't':
		v = strtol(arg, &end, 10);
		if (*end || v < 1 || v > 64)
			return "1..64";
		o->threads = (unsigned)v;
		return NULL;
	case 'q':
		o->quiet = true;
		return NULL;
	default:
		return "an option spoke-demo does not take";
	}
}

static const struct bench_option demo_table[] = {
	{"seconds", 's', "S", "how long to run the load", "10"},
	{"threads", 't', "T", "producer threads (1..64)", "4"},
	{"quiet", 'q', NULL, "no progress line, only the summary", "a line a second"},
	BENCH_OPT_END,
};

const struct bench_cmd demo_cmd = {
	.name = "spoke-demo",
	.about = "The timer service under a server-like load from several threads (idle\n"
		 "timeouts reset on activity, request deadlines, heartbeats, Lawn sessions),\n"
		 "a progress line a second, a table per shard, and the exactly-once,\n"
		 "never-early and counter checks (exit status 0 if all passed, 1 if not).",
	.options = demo_table,
	.handle = demo_option,
	.ctx = &parsed,
};

int demo_parse_options(int argc, char **argv, struct demo_options *o)
{
	int rc;

	parsed = (struct demo_options){.seconds = 10, .threads = 4};
	rc = bench_cmd_parse(&demo_cmd, argc, argv);
	*o = parsed;
	return rc;
}
