/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine_oracle.h - the oracle of engine_oracle_core.h for the cmocka tests
 * (test_engine_conformance.c, test_engine_schemes.c): a broken promise fails
 * the running cmocka test, and oracle_teardown frees what it left behind.
 */
#ifndef SPOKE_TESTS_ENGINE_ORACLE_H
#define SPOKE_TESTS_ENGINE_ORACLE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define ORACLE_PRINT(...) print_error(__VA_ARGS__)
#define ORACLE_FAIL(...)  fail_msg(__VA_ARGS__)

#include "engine_oracle_core.h"

/* cmocka teardown: free what a failed test left behind (LeakSanitizer-clean). */
static inline int oracle_teardown(void **state)
{
	(void)state;
	while (oracle_live)
		oracle_free(oracle_live);
	return 0;
}

#endif /* SPOKE_TESTS_ENGINE_ORACLE_H */
