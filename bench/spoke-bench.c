/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * spoke-bench.c - the benchmark driver: `spoke-bench <subcommand> [options]`.
 *
 * Each subcommand is one file bench_<name>.c exporting bench_<name>_main(),
 * which gets argv starting at the subcommand name and parses its own
 * options. Shared machinery (clock, PRNG, forked repeat-and-summarize, RSS,
 * table/JSON output, plots, the common options, thread teams) is in
 * bench_util.{h,c}.
 *
 *   schemes   the paper's comparison: every engine scheme (include/spoke/
 *             engine.h) under the same workloads at N = 1e3 .. 1e6 timers.
 *
 * To add one: write bench_<name>.c, declare its main in bench_util.h, add a
 * row below and the file to bench/CMakeLists.txt.
 */
#include "bench_util.h"

#include <string.h>

struct subcommand {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *summary;
};

static const struct subcommand subcommands[] = {
	{"schemes", bench_schemes_main,
	 "every engine scheme: start/stop, expiry and memory against N (the paper's comparison)"},
	{"service", bench_service_main,
	 "the multicore service: start/cancel, reset, expiry rate, lateness, memory, vs a mutex"},
	{"scaling", bench_scaling_main,
	 "the service against threads, T = 1, 2, 4 .. 4 x CPUs: start/cancel and pool expiry rate"},
	{"peers", bench_peers_main,
	 "spoke beside libevent, libuv, timerfd, POSIX timers and a binary heap, same workloads"},
	{"latency", bench_latency_main,
	 "lateness distribution of the service against pending timers, tick and load"},
	{"clocks", bench_clocks_main,
	 "what a start's \"now\" costs: each never-early clock source"},
};

#define NSUBCOMMANDS (sizeof(subcommands) / sizeof(subcommands[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: spoke-bench <subcommand> [options]   (<subcommand> --help for its "
		   "options)\n\n");
	for (size_t i = 0; i < NSUBCOMMANDS; i++)
		fprintf(f, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
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
	for (size_t i = 0; i < NSUBCOMMANDS; i++)
		if (strcmp(argv[1], subcommands[i].name) == 0)
			return subcommands[i].main(argc - 1, argv + 1);
	fprintf(stderr, "spoke-bench: unknown subcommand '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
