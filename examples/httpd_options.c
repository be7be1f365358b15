/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd_options.c - spoke-httpd's command line (httpd_options.h).
 */
#include "httpd_options.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct httpd_options opt = {
	.port = 8080,
	.threads = 0, /* one per online CPU */
	.workers = 16,
	.tick_us = 1000,
	.idle_ms = 5000,
	.header_ms = 10000,
	.write_ms = 10000,
	.deadline_ms = 1000,
	.timers = "spoke",
};

static const struct cli_option {
	const char *name, *metavar, *meaning;
	uint64_t *value, min, max;
} options[] = {
	{"--port", "P",
	 "TCP port on 127.0.0.1; 0 takes a free one (the first line of output names it)", &opt.port,
	 0, 65535},
	{"--threads", "N", "event-loop threads, each with its own listener and spoke shard",
	 &opt.threads, 1, SPOKE_MAX_SHARDS},
	{"--workers", "N", "worker threads that do the work of /sleep requests", &opt.workers, 1,
	 4096},
	{"--timers", "NAME", "timer backend: spoke, heap, timerfd or mutex-heap", NULL, 0, 0},
	{"--idle-ms", "MS", "keep-alive wait for the next request before the connection closes",
	 &opt.idle_ms, 1, 86400000},
	{"--header-ms", "MS", "from a request's first byte until all of it (body too) has arrived",
	 &opt.header_ms, 1, 86400000},
	{"--write-ms", "MS", "for a response to drain to a slow reader", &opt.write_ms, 1,
	 86400000},
	{"--deadline-ms", "MS", "for a /sleep worker's answer; then 504", &opt.deadline_ms, 1,
	 86400000},
	{"--tick-us", "US", "spoke's tick (timer granularity) in microseconds", &opt.tick_us, 1,
	 3600000000ull},
};
#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

static void print_help(void)
{
	printf("usage: spoke-httpd [OPTION VALUE]...\n"
	       "An HTTP/1.1 server on 127.0.0.1 whose connection timeouts live in spoke.\n"
	       "Serves GET|HEAD /, POST /, GET|HEAD /big (1 MiB), GET|HEAD /sleep?ms=N.\n"
	       "Stops on SIGINT or SIGTERM and prints its counters.\n\n");
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct cli_option *o = &options[i];
		char flag[32];

		snprintf(flag, sizeof(flag), "%s %s", o->name, o->metavar);
		printf("  %-17s %s\n  %-17s (default ", flag, o->meaning, "");
		if (!o->value)
			printf("%s)\n", opt.timers);
		else if (o->value == &opt.threads)
			printf("one per online CPU)\n");
		else
			printf("%" PRIu64 ")\n", *o->value);
	}
	printf("  %-17s print this and exit\n", "--help");
}

static void __attribute__((noreturn, format(printf, 1, 2))) bad_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "spoke-httpd: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (spoke-httpd --help lists the options)\n");
	exit(2);
}

static void set_timers(const char *v)
{
	const char *name;

	opt.ops = tmr_backend(v);
	if (opt.ops) {
		opt.timers = v;
		return;
	}
	fprintf(stderr, "spoke-httpd: --timers '%s': not one of", v);
	for (unsigned i = 0; (name = tmr_backend_name(i)); i++)
		fprintf(stderr, "%s %s", i ? "," : "", name);
	fprintf(stderr, "\n");
	exit(2);
}

static void set_number(const struct cli_option *o, const char *v)
{
	char *end;
	unsigned long long x;

	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno || end == v || *end || v[0] == '-' || x < o->min || x > o->max)
		bad_usage("%s '%s': not a whole number from %" PRIu64 " to %" PRIu64, o->name, v,
			  o->min, o->max);
	*o->value = x;
}

void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const struct cli_option *o = NULL;

		if (!strcmp(argv[i], "--help")) {
			print_help();
			exit(0);
		}
		for (size_t k = 0; k < N_OPTIONS && !o; k++)
			if (!strcmp(argv[i], options[k].name))
				o = &options[k];
		if (!o)
			bad_usage("unknown option '%s'", argv[i]);
		if (i + 1 == argc)
			bad_usage("%s needs a value (%s)", o->name, o->metavar);
		if (o->value)
			set_number(o, argv[++i]);
		else
			set_timers(argv[++i]);
	}
	if (!opt.ops)
		set_timers(opt.timers);
	if (!opt.threads) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		opt.threads = n < 1 ? 1 : n > SPOKE_MAX_SHARDS ? SPOKE_MAX_SHARDS : (uint64_t)n;
	}
}
