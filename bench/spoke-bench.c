/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * spoke-bench.c - the benchmark driver: `spoke-bench <subcommand> [options]`.
 *
 * Each subcommand is bench_<name>.c (its workload families in files of
 * their own), listed in bench_commands.c; it gets argv starting at the
 * subcommand's name and parses its own options from its option table
 * (bench_opts.h). Shared machinery: bench_util.h (clock, PRNG, forked
 * repeat-and-summarize, RSS, table/JSON output, plots), bench_team.h (the
 * threads of a workload), bench_svc.h (the service's counters and owner
 * loops).
 *
 * To add one: write bench_<name>.c with its bench_<name>_main and its
 * struct bench_cmd, declare both in bench_util.h, add a row to
 * bench_commands.c and the file to bench/CMakeLists.txt.
 */
#include "bench_util.h"

#include <string.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: spoke-bench <subcommand> [options]   (spoke-bench <subcommand> --help "
		   "lists its options)\n\n");
	for (size_t i = 0; i < bench_nsubcommands; i++)
		fprintf(f, "  %-10s %s\n", bench_subcommands[i].name, bench_subcommands[i].summary);
	fprintf(f, "\noptions:\n  --help     this text, on stdout (exit status 0)\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < bench_nsubcommands; i++)
		if (strcmp(argv[1], bench_subcommands[i].name) == 0)
			return bench_subcommands[i].main(argc - 1, argv + 1);
	fprintf(stderr, "spoke-bench: unknown subcommand '%s'; spoke-bench --help lists them\n",
		argv[1]);
	return 2;
}
