/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd_options.h - spoke-httpd's command line: one table of options, each with
 * its meaning and default, which --help prints and parse_args reads.
 */
#ifndef SPOKE_HTTPD_OPTIONS_H
#define SPOKE_HTTPD_OPTIONS_H

#include "httpd_timers.h"

#include <stdint.h>

struct httpd_options {
	uint64_t port, threads, workers, tick_us;
	uint64_t idle_ms, header_ms, write_ms, deadline_ms;
	const char *timers;
	const struct tmr_ops *ops; /* the backend named by timers */
};

/* Set by parse_args before any thread starts; read-only afterwards. */
extern struct httpd_options opt;

/* Fill opt from argv: --help prints the options and exits 0; a bad option or
 * value is named on stderr with the reason, exit 2. */
void parse_args(int argc, char **argv);

#endif
