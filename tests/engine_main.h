/* SPDX-License-Identifier: MIT */
/*
 * engine_main.h - main() of the engine tests that run per scheme
 * (test_engine_conformance.c, test_engine_errors.c): no argument runs the
 * "api" group, then run_scheme() for every scheme of spoke_engine_schemes();
 * "api" or a scheme's name runs that group alone (ctest runs each group in
 * its own process: engine.api, engine.conformance.<scheme>, engine.errors.api,
 * engine.errors.<scheme>).
 */
#ifndef SPOKE_TESTS_ENGINE_MAIN_H
#define SPOKE_TESTS_ENGINE_MAIN_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <spoke/engine.h>

/* Returns the exit status: 0 if every test run passed, 1 if one failed, 2 on an unknown group. */
static inline int engine_main(int argc, char **argv, const struct CMUnitTest *api, size_t n_api,
			      int (*run_scheme)(const char *scheme))
{
	const char *only = argc > 1 ? argv[1] : NULL;
	bool matched = false;
	int failed = 0;

	if (!only || strcmp(only, "api") == 0) {
		print_message("[ GROUP    ] api\n");
		failed += _cmocka_run_group_tests("api", api, n_api, NULL, NULL);
		matched = true;
	}
	for (const char *const *s = spoke_engine_schemes(); *s; s++) {
		if (only && strcmp(only, *s) != 0)
			continue;
		failed += run_scheme(*s);
		matched = true;
	}
	if (!matched) {
		fprintf(stderr,
			"%s: no group named \"%s\" (api, or a scheme of spoke_engine_schemes())\n",
			argv[0], only);
		return 2;
	}
	return failed ? 1 : 0;
}

#endif /* SPOKE_TESTS_ENGINE_MAIN_H */
