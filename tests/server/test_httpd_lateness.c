/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_httpd_lateness.c - the server measures how late its idle timeouts
 * close connections on its own clock, from the moment it began each idle
 * wait, so that scripts/server-load.sh reads the timer's lateness and not the
 * client's queueing: IDLE connections wait out --idle-ms, and the stats line
 * must count every one of those closes, none early, with p50 <= p99 <= max.
 * (No bound on how late: that is the machine's load, not a verdict.)
 */
#include "httpd_client.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define IDLE 20

static void idle_close_lateness(void **state)
{
	static const char *const args[] = {"--threads", "2", "--idle-ms", "200", NULL};
	struct client cs[IDLE];
	struct response r;
	struct server srv;
	uint64_t p50, p99, max;

	(void)state;
	server_start(&srv, 0, args);
	for (int i = 0; i < IDLE; i++) {
		client_open(&cs[i], srv.port);
		client_send_str(&cs[i], "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
		expect_response(&cs[i], &r, false);
	}
	for (int i = 0; i < IDLE; i++) {
		expect_orderly_close(&cs[i]); /* by the idle timer */
		client_close(&cs[i]);
	}
	server_stop_ok(&srv);
	assert_int_equal(server_stat(&srv, "close_idle"), IDLE);
	assert_int_equal(server_stat(&srv, "idle_close_early"), 0);
	p50 = server_stat(&srv, "idle_close_late_p50_us");
	p99 = server_stat(&srv, "idle_close_late_p99_us");
	max = server_stat(&srv, "idle_close_late_max_us");
	if (!(p50 <= p99 && p99 <= max))
		fail_msg("lateness p50 %" PRIu64 " p99 %" PRIu64 " max %" PRIu64 " us", p50, p99,
			 max);
	printf("idle closes late by p50 %" PRIu64 " us, p99 %" PRIu64 " us, max %" PRIu64
	       " us (server's clock)\n",
	       p50, p99, max);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(idle_close_lateness),
	};

	httpd_args(argc, argv);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
