/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_opts.h - a tool's command line from one table: the parser
 * (getopt_long) and the --help text are both made from it, so the help
 * names every option the parser accepts, each with its default.
 *
 * A tool (spoke-bench's subcommands, spoke-bench-counted, spoke-demo)
 * describes itself in a struct bench_cmd: its name, what it does, and its
 * options, one struct bench_option each. bench_cmd_parse() then
 *   --help          prints bench_cmd_help() on stdout: exit status 0;
 *   an unknown option, one without its argument, or an operand left over:
 *                   one line on stderr naming it: exit status 2;
 *   a bad value     the tool's handler says what it wants, and the line on
 *                   stderr names the option and the value: exit status 2;
 *   the options common to the benchmarks (--json, --quick, --runs, and a
 *                   grid's --max-n and --budget, BENCH_KEY_*) go into the
 *                   struct bench_opts the command points to.
 *
 * It needs nothing but the C library: spoke-demo builds it too.
 * Threading: the main thread, before any other thread exists.
 */
#ifndef SPOKE_BENCH_OPTS_H
#define SPOKE_BENCH_OPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Keys of the common options (a tool's own keys are characters, below 256). */
enum {
	BENCH_KEY_JSON = 256,
	BENCH_KEY_QUICK,
	BENCH_KEY_RUNS,
	BENCH_KEY_MAX_N,
	BENCH_KEY_BUDGET,
	BENCH_KEY_HELP,
};

#define BENCH_MAX_RUNS 100

/* One option. A table of them ends with an entry whose name is NULL. */
struct bench_option {
	const char *name; /* without the "--" */
	int key;	  /* what the handler gets: a character, or a BENCH_KEY_* */
	const char *arg;  /* the argument's name in the help ("K", "LIST"); NULL: none */
	const char *help; /* what it does; '\n' starts another line */
	const char *dflt; /* its default, as the help shows it after "default: " (every
			     option of a table has one; only the built-in --help has none) */
};

/* The common options as table entries; each tool says its own defaults. */
#define BENCH_OPT_JSON                                                                             \
	{                                                                                          \
		"json", BENCH_KEY_JSON, NULL, "one JSON object per line instead of the table",     \
			"a table"                                                                  \
	}
#define BENCH_OPT_QUICK(what)                                                                      \
	{                                                                                          \
		"quick", BENCH_KEY_QUICK, NULL, what, "off"                                        \
	}
#define BENCH_OPT_RUNS(dflt)                                                                       \
	{                                                                                          \
		"runs", BENCH_KEY_RUNS, "K",                                                       \
			"runs per measurement, each in a fresh process: median, min, "             \
			"max\n(1..100)",                                                           \
			dflt                                                                       \
	}
#define BENCH_OPT_MAX_N(dflt)                                                                      \
	{                                                                                          \
		"max-n", BENCH_KEY_MAX_N, "N", "largest N, a power of ten from 1e3 to 1e7", dflt   \
	}
#define BENCH_OPT_BUDGET(dflt)                                                                     \
	{                                                                                          \
		"budget", BENCH_KEY_BUDGET, "SEC", "skip a cell whose runs would take longer",     \
			dflt                                                                       \
	}
#define BENCH_OPT_END                                                                              \
	{                                                                                          \
		NULL, 0, NULL, NULL, NULL                                                          \
	}

/* What the common options gave (zero: not given). */
struct bench_opts {
	bool json, quick;
	uint64_t runs;
	uint64_t max_n;
	double budget_s;
};

/*
 * A tool's own option: NULL if taken, else what a good value looks like
 * ("a list like 1,2,4 of counts 1..256"), which the parser prints after
 * the option's name and the value it got.
 */
typedef const char *bench_option_fn(void *ctx, int key, const char *arg);

struct bench_cmd {
	const char *name;		    /* "spoke-bench service": usage and error lines */
	const char *synopsis;		    /* after the name in the usage line */
	const char *about;		    /* what it does: lines of the help, '\n'-separated */
	const struct bench_option *options; /* ends with BENCH_OPT_END; --help is added */
	bench_option_fn *handle;	    /* the tool's own keys (NULL: it has none) */
	void *ctx;			    /* handle's first argument */
	struct bench_opts *common;	    /* where BENCH_KEY_* go (NULL: none are listed) */
};

/*
 * Parse argv (argv[0]: the tool's or subcommand's name). -1: go on; else
 * the exit status for main: 0 after --help, 2 after a bad command line.
 * *c->common is zeroed first.
 */
int bench_cmd_parse(const struct bench_cmd *c, int argc, char **argv);

/* The --help text. */
void bench_cmd_help(const struct bench_cmd *c, FILE *f);

/*
 * The getopt_long table the parser uses (the command's options, then
 * --help, then a zero entry) into all[0..cap-1]; how many options, or -1
 * if they do not fit. For the check that the help names all of them.
 */
int bench_cmd_longopts(const struct bench_cmd *c, struct option *all, size_t cap);

/* What a handler's message may be built in (one per process; main thread). */
const char *bench_opts_why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A count written "1e6" or "1000000" (an integer, 1..1e12). 0 or -EINVAL. */
int bench_parse_count(const char *s, uint64_t *out);
/* A positive number of seconds (below 1e6). 0 or -EINVAL. */
int bench_parse_seconds(const char *s, double *out);
/* A list "1,2,4" (each 1..max, at most cap of them) into out: how many, or -EINVAL. */
int bench_parse_threads(const char *s, unsigned *out, size_t cap, unsigned max);

#endif /* SPOKE_BENCH_OPTS_H */
