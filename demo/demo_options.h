/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * demo_options.h - spoke-demo's command line: its options and --help from
 * one table (bench/bench_opts.h), apart from the demo so that the options
 * check (bench/test_options.c) can walk the table the parser uses.
 */
#ifndef SPOKE_DEMO_OPTIONS_H
#define SPOKE_DEMO_OPTIONS_H

#include "bench_opts.h"

struct demo_options {
	double seconds;	  /* how long the load runs */
	unsigned threads; /* producer threads */
	bool quiet;	  /* no progress line */
};

extern const struct bench_cmd demo_cmd;

/*
 * Parse argv into *o. -1: run; otherwise the exit status for main (0 after
 * --help, 2 after a bad command line, said on stderr).
 */
int demo_parse_options(int argc, char **argv, struct demo_options *o);

#endif /* SPOKE_DEMO_OPTIONS_H */
