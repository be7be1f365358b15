/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_commands.c - the subcommands of spoke-bench (bench_util.h): what
 * spoke-bench.c dispatches to, and what the options check walks.
 */
#include "bench_util.h"

const struct bench_subcommand bench_subcommands[] = {
	{"schemes", bench_schemes_main, &bench_schemes_cmd,
	 "every engine scheme: start/stop, expiry and memory against N (the paper's comparison)"},
	{"service", bench_service_main, &bench_service_cmd,
	 "the multicore service: start/cancel, resets, expiry rate, lateness, memory, vs a mutex"},
	{"scaling", bench_scaling_main, &bench_scaling_cmd,
	 "the service against threads, T = 1, 2, 4 .. 4 x CPUs: start/cancel and pool expiry rate"},
	{"peers", bench_peers_main, &bench_peers_cmd,
	 "spoke beside libevent, libuv, timerfd, POSIX timers and a binary heap, same workloads"},
	{"latency", bench_latency_main, &bench_latency_cmd,
	 "lateness distribution of the service against pending timers, tick and load; stolen CPU"},
	{"clocks", bench_clocks_main, &bench_clocks_cmd,
	 "what a start's \"now\" costs: each never-early clock source"},
};

const size_t bench_nsubcommands = sizeof(bench_subcommands) / sizeof(bench_subcommands[0]);
