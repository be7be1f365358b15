/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * httpd_report.h - what spoke-httpd counts and prints when it stops: the
 * counters of each loop (kept by its own thread, summed at exit) and how late
 * its idle timeouts closed connections.
 */
#ifndef SPOKE_HTTPD_REPORT_H
#define SPOKE_HTTPD_REPORT_H

#include "httpd_timers.h"

#include <stdint.h>
#include <sys/resource.h>

struct counters {
	uint64_t connections, accept_dropped, requests, resp_200, sleep_200, resp_400, resp_404,
		resp_405, resp_503, resp_504, close_header, close_idle, close_write, close_peer,
		close_error, close_done, close_linger, close_shutdown,
		idle_late_served; /* idle timeouts that found a request waiting: served */
};

/*
 * How late idle timeouts closed their connections, from the server's own clock:
 * close time - (time the idle wait began + --idle-ms). Log-linear buckets of
 * microseconds: values below 16 have a bucket each, then eight per power of two
 * (bucket 8k + (v >> k) for k = msb(v) - 3), so a percentile read from its
 * bucket's upper end is at most 1/8 above the truth.
 */
#define LATE_BUCKETS 496

struct lateness {
	uint64_t n[LATE_BUCKETS];
	uint64_t early; /* closes before the timeout: never, if the timers hold */
	uint64_t max_us;
};

/* A final response with this status was sent (requests counts them all). */
void count_response(struct counters *n, int status);
/* A close at close_ns of a connection whose idle timeout was due at due_ns. */
void late_record(struct lateness *h, uint64_t close_ns, uint64_t due_ns);
void sum_counters(struct counters *sum, const struct counters *c);
void sum_lateness(struct lateness *sum, const struct lateness *h);
/* The counters for people, then one line "stats key=value ..." for scripts. */
void print_counters(const struct counters *c, const struct tmr_counters *t,
		    const struct lateness *late, uint64_t remote, const struct rusage *ru,
		    int linger_ms);

#endif
