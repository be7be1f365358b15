/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_httpd_cli.c - the command line and the counters: --help prints every
 * option with its meaning and default on stdout and exits 0; a bad option
 * or value is named on stderr with the reason, exit 2; a port another
 * server holds is refused (SO_REUSEPORT would otherwise share it silently
 * and each server would count only its share); three requests then SIGTERM
 * report connections=3 requests=3.
 */
#include "httpd_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

struct run {
	int status;
	char out[8192], err[4096];
};

/* Read fd to EOF into buf (up to cap - 1); false if nothing came for WAIT_MS. */
static bool slurp(int fd, char *buf, size_t cap)
{
	size_t len = 0;
	bool ended = true;

	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t n;

		if (poll(&p, 1, WAIT_MS) != 1) {
			ended = false;
			break;
		}
		n = read(fd, buf + len, cap - 1 - len);
		if (n <= 0 || (len += (size_t)n) == cap - 1)
			break;
	}
	buf[len] = '\0';
	return ended;
}

/* spoke-httpd with args (NULL-ended), run to its end; a run that does not end fails. */
static void run_httpd(struct run *r, const char *const *args)
{
	const char *argv[16] = {httpd_path};
	int out[2], err[2];
	pid_t pid;
	size_t n = 1;

	for (; *args && n + 1 < 16; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(err, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
			_exit(127);
		execv(httpd_path, (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	if (!slurp(out[0], r->out, sizeof(r->out)) || !slurp(err[0], r->err, sizeof(r->err))) {
		kill(pid, SIGKILL);
		waitpid(pid, &r->status, 0);
		fail_msg("spoke-httpd %s: still running after %d ms", argv[1] ? argv[1] : "",
			 WAIT_MS);
	}
	close(out[0]);
	close(err[0]);
	assert_int_equal(waitpid(pid, &r->status, 0), pid);
}

static void help(void **state)
{
	static const char *const names[] = {
		"--port",      "--threads",  "--workers",     "--timers",  "--idle-ms",
		"--header-ms", "--write-ms", "--deadline-ms", "--tick-us", "--help"};
	static const char *const args[] = {"--help", NULL};
	unsigned defaults = 0;
	struct run r;

	(void)state;
	run_httpd(&r, args);
	if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
		fail_msg("--help: wait status %#x", r.status);
	assert_string_equal(r.err, "");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strstr(r.out, names[i]))
			fail_msg("--help does not list %s:\n%s", names[i], r.out);
	for (const char *p = r.out; (p = strstr(p, "(default ")); p++)
		defaults++;
	if (defaults != sizeof(names) / sizeof(names[0]) - 1)
		fail_msg("--help gives %u defaults for %zu options:\n%s", defaults,
			 sizeof(names) / sizeof(names[0]) - 1, r.out);
	assert_non_null(strstr(r.out, "(default 8080)"));
	assert_non_null(strstr(r.out, "(default spoke)"));
}

/* Exit 2, nothing on stdout, stderr names the option and the value (or what is wrong). */
static void expect_bad(const char *const *args, const char *must1, const char *must2)
{
	struct run r;

	run_httpd(&r, args);
	if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 2)
		fail_msg("%s %s: wait status %#x, want exit 2", args[0], args[1] ? args[1] : "",
			 r.status);
	assert_string_equal(r.out, "");
	if (!strstr(r.err, must1) || !strstr(r.err, must2))
		fail_msg("%s %s: stderr '%s' does not name '%s' and '%s'", args[0],
			 args[1] ? args[1] : "", r.err, must1, must2);
}

static void bad_options(void **state)
{
	(void)state;
	expect_bad((const char *const[]){"--bogus", NULL}, "--bogus", "unknown option");
	expect_bad((const char *const[]){"--timers", "nope", NULL}, "--timers", "nope");
	expect_bad((const char *const[]){"--timers", "nope", NULL}, "timerfd", "mutex-heap");
	expect_bad((const char *const[]){"--port", "70000", NULL}, "--port", "70000");
	expect_bad((const char *const[]){"--port", "80x", NULL}, "--port", "0 to 65535");
	expect_bad((const char *const[]){"--idle-ms", "0", NULL}, "--idle-ms", "'0'");
	expect_bad((const char *const[]){"--threads", "-1", NULL}, "--threads", "'-1'");
	expect_bad((const char *const[]){"--port", "0", "--workers", NULL}, "--workers",
		   "needs a value");
}

/* n requests on n connections, each answered and closed by the client. */
static void requests(int port, int n)
{
	for (int i = 0; i < n; i++) {
		struct response r;
		struct client c;

		exchange(port, "GET / HTTP/1.1\r\nHost: t\r\n\r\n", &r, &c);
		assert_int_equal(r.status, 200);
		client_close(&c);
	}
}

static void counters(void **state)
{
	static const char *const args[] = {NULL};
	struct server srv;

	(void)state;
	server_start(&srv, 0, args);
	requests(srv.port, 3);
	server_stop_ok(&srv);
	assert_int_equal(server_stat(&srv, "connections"), 3);
	assert_int_equal(server_stat(&srv, "requests"), 3);
	assert_int_equal(server_stat(&srv, "resp_200"), 3);
}

/* A second server on the first one's port is refused, and the first counts every request. */
static void port_in_use(void **state)
{
	static const char *const args[] = {NULL};
	char port[16];
	struct server srv;
	struct run r;

	(void)state;
	server_start(&srv, 0, args);
	snprintf(port, sizeof(port), "%d", srv.port);
	run_httpd(&r, (const char *const[]){"--port", port, NULL});
	if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 2 || !strstr(r.err, "in use"))
		fail_msg("a second server on port %s: wait status %#x, stderr '%s'", port, r.status,
			 r.err);
	requests(srv.port, 3);
	server_stop_ok(&srv);
	assert_int_equal(server_stat(&srv, "connections"), 3);
	assert_int_equal(server_stat(&srv, "requests"), 3);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(help),
		cmocka_unit_test(bad_options),
		cmocka_unit_test(counters),
		cmocka_unit_test(port_in_use),
	};

	httpd_args(argc, argv);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
