/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * consumer.c - a program outside the spoke tree, built against the installed
 * library (find_package(spoke) and pkg-config spoke, see run.sh): it creates
 * a hierarchical engine, starts a timer that has to cascade down a level,
 * advances and checks the timer fired once, at its deadline. Exit 0 = works.
 *
 * Versions: spoke_version() of the library it runs with must be the
 * "MAJOR.MINOR.PATCH" of the headers' SPOKE_VERSION_* macros and, when the
 * build says which version it found (SPOKE_CONSUMER_FOUND_VERSION: the
 * CMake package's), that one too. `consumer --version` prints it, for run.sh
 * to compare with `pkg-config --modversion spoke`.
 */
#include <spoke/engine.h>
#include <spoke/spoke.h>

#include <stdio.h>
#include <string.h>

#define STR_(x) #x
#define STR(x)	STR_(x)

struct seen {
	struct spoke_engine *e;
	unsigned fired;
	uint64_t fired_at;
};

static void on_expire(void *ctx, struct spoke_timer *t)
{
	struct seen *s = ctx;

	(void)t;
	s->fired++;
	s->fired_at = spoke_engine_now(s->e);
}

static int fail(const char *what)
{
	fprintf(stderr, "spoke consumer: %s\n", what);
	return 1;
}

int main(int argc, char **argv)
{
	static const char macros[] =
		STR(SPOKE_VERSION_MAJOR) "." STR(SPOKE_VERSION_MINOR) "." STR(SPOKE_VERSION_PATCH);
	struct seen s = {0};
	struct spoke_timer t;
	int rc;

	if (strcmp(spoke_version(), macros) != 0) {
		fprintf(stderr,
			"spoke consumer: spoke_version() is \"%s\", the headers' macros say %s\n",
			spoke_version(), macros);
		return 1;
	}
#ifdef SPOKE_CONSUMER_FOUND_VERSION
	if (strcmp(spoke_version(), SPOKE_CONSUMER_FOUND_VERSION) != 0) {
		fprintf(stderr,
			"spoke consumer: spoke_version() is \"%s\", find_package found %s\n",
			spoke_version(), SPOKE_CONSUMER_FOUND_VERSION);
		return 1;
	}
#endif
	if (argc > 1 && strcmp(argv[1], "--version") == 0) {
		puts(spoke_version());
		return 0;
	}
	rc = spoke_engine_new(&s.e, "hierarchical", NULL);
	if (rc != 0)
		return fail("spoke_engine_new(\"hierarchical\") failed");
	spoke_timer_init(&t);
	if (spoke_engine_start(s.e, &t, 300) != 0)
		return fail("spoke_engine_start failed");
	if (spoke_engine_advance(s.e, 299, on_expire, &s) != 0 || s.fired != 0)
		return fail("the timer fired early");
	if (spoke_engine_advance(s.e, 1, on_expire, &s) != 1 || s.fired != 1 || s.fired_at != 300)
		return fail("the timer did not fire once at tick 300");
	if (spoke_timer_pending(&t) || spoke_engine_count(s.e) != 0)
		return fail("the timer is still pending after it fired");
	spoke_engine_free(s.e);
	puts("spoke consumer: ok");
	return 0;
}
