/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_engine_errors.c - every error include/spoke/engine.h documents, one
 * named test per (function, error), each checking the code returned and
 * that nothing changed.
 *
 * "Nothing changed" is checked on a scene: an engine whose clock is not at
 * 0, holding witness timers at known deadlines. After the refused call the
 * engine's now, count and next are what they were, every witness and the
 * timer the call was about are byte for byte what they were (memcmp), and
 * then, advancing one tick at a time, every timer fires exactly once,
 * exactly at its deadline (the refused timer at its old deadline, or never
 * if it was not pending). Leaks are LeakSanitizer's job (ASan build).
 *
 * -ENOMEM is reached with tests/fault_inject.h (the program is linked with
 * --wrap for malloc, calloc and realloc).
 *
 *   group api (scheme-independent, table-driven over all 8 schemes)
 *     (unknown names, NULL name, NULL out: test_engine_conformance, group api)
 *     spoke_engine_new_bad_<field>_einval      each params field: the schemes
 *                                              that have it refuse, others ignore
 *   group <scheme> (one per scheme; ctest engine.errors.<scheme>)
 *     spoke_engine_new_enomem                  every allocation of new() failed in turn
 *     spoke_engine_start_wheel_beyond_max_interval_erange     wheel only
 *     spoke_engine_start_heap_cannot_grow_enomem              heap only
 *     spoke_engine_start_lawn_cannot_grow_enomem              lawn only
 *     spoke_engine_stop_never_started_enoent
 *     spoke_engine_stop_stopped_enoent
 *     spoke_engine_stop_fired_enoent
 *     spoke_engine_stop_in_own_callback_enoent
 *     spoke_engine_advance_reentered_returns_0 (documented refusal, not an errno)
 *
 * Usage: test_engine_errors [api | SCHEME]; no argument runs everything.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <spoke/engine.h>

#include "engine_main.h"
#include "fault_inject.h"
#include "test_prelude.h"

#define POW2(k) ((uint64_t)1 << (k))

/* An address *out must still hold after a refused spoke_engine_new(). */
static uint64_t sentinel_storage;
#define SENTINEL_ENGINE ((struct spoke_engine *)(void *)&sentinel_storage)

/* ---- the scene ------------------------------------------------------------------ */

#define SCENE_MAX   96
#define SCENE_START 100 /* the clock of a new scene: not 0 */

struct rec {
	struct spoke_timer t;
	bool in_use;
	uint64_t due; /* absolute tick it must fire at; 0 = must never fire */
	unsigned fired;
	uint64_t fired_at;
};

struct scene {
	struct spoke_engine *e;
	struct rec r[SCENE_MAX];
	size_t n;
	/* an expiry hook, run for r[hook_on] when it fires */
	void (*hook)(struct scene *sc, struct rec *r);
	size_t hook_on;
	/* the snapshot */
	uint64_t snap_now, snap_next;
	size_t snap_count;
	struct spoke_timer snap_t[SCENE_MAX];
};

static struct scene scene; /* one per test (tests run one at a time) */

static void scene_expire(void *ctx, struct spoke_timer *t)
{
	struct scene *sc = ctx;
	struct rec *r = (struct rec *)(void *)((char *)t - offsetof(struct rec, t));

	r->fired++;
	r->fired_at = spoke_engine_now(sc->e);
	if (sc->hook && r == &sc->r[sc->hook_on])
		sc->hook(sc, r);
}

/* A record for one more timer (initialised, not started). */
static struct rec *scene_rec(struct scene *sc)
{
	struct rec *r;

	assert_true(sc->n < SCENE_MAX);
	r = &sc->r[sc->n++];
	memset(r, 0, sizeof(*r));
	r->in_use = true;
	spoke_timer_init(&r->t);
	return r;
}

/* Start r with delay; on success it is expected to fire at now + max(delay, 1). */
static int scene_start(struct scene *sc, struct rec *r, uint64_t delay)
{
	int rc = spoke_engine_start(sc->e, &r->t, delay);

	if (rc == 0)
		r->due = spoke_engine_now(sc->e) + (delay ? delay : 1);
	return rc;
}

static void scene_must_start(struct scene *sc, struct rec *r, uint64_t delay)
{
	int rc = scene_start(sc, r, delay);

	if (rc != 0)
		fail_msg("%s: start(delay %" PRIu64 ") = %d", spoke_engine_scheme(sc->e), delay,
			 rc);
}

/*
 * A new scene: an engine of the scheme (params may be NULL) at tick
 * SCENE_START, with witnesses due 1, 2, 7, 64 and 1000 ticks on (never more
 * than max_delay: a small `wheel`), two of them at the same tick.
 */
static struct scene *scene_new(const char *scheme, const struct spoke_engine_params *p,
			       uint64_t max_delay)
{
	static const uint64_t witness_delay[] = {1, 2, 7, 7, 64, 1000};
	struct scene *sc = &scene;

	memset(sc, 0, sizeof(*sc));
	assert_int_equal(spoke_engine_new(&sc->e, scheme, p), 0);
	assert_int_equal(spoke_engine_advance(sc->e, SCENE_START, scene_expire, sc), 0);
	for (size_t i = 0; i < ARRAY_SIZE(witness_delay); i++) {
		uint64_t d = witness_delay[i] < max_delay ? witness_delay[i] : max_delay;

		scene_must_start(sc, scene_rec(sc), d);
	}
	return sc;
}

static void scene_snap(struct scene *sc)
{
	sc->snap_now = spoke_engine_now(sc->e);
	sc->snap_count = spoke_engine_count(sc->e);
	sc->snap_next = spoke_engine_next(sc->e);
	for (size_t i = 0; i < sc->n; i++)
		sc->snap_t[i] = sc->r[i].t;
}

/* Nothing changed since scene_snap(): engine and every timer, byte for byte. */
static void scene_unchanged(struct scene *sc)
{
	const char *scheme = spoke_engine_scheme(sc->e);

	if (spoke_engine_now(sc->e) != sc->snap_now)
		fail_msg("%s: now %" PRIu64 " -> %" PRIu64, scheme, sc->snap_now,
			 spoke_engine_now(sc->e));
	if (spoke_engine_count(sc->e) != sc->snap_count)
		fail_msg("%s: count %zu -> %zu", scheme, sc->snap_count, spoke_engine_count(sc->e));
	if (spoke_engine_next(sc->e) != sc->snap_next)
		fail_msg("%s: next %" PRIu64 " -> %" PRIu64, scheme, sc->snap_next,
			 spoke_engine_next(sc->e));
	for (size_t i = 0; i < sc->n; i++)
		if (memcmp(&sc->snap_t[i], &sc->r[i].t, sizeof(struct spoke_timer)) != 0)
			fail_msg("%s: timer %zu changed", scheme, i);
}

/*
 * Advance one tick at a time past the last deadline: every timer fires
 * exactly once at its deadline (never, if due is 0); then free the engine.
 */
static void scene_run_out(struct scene *sc)
{
	const char *scheme = spoke_engine_scheme(sc->e);
	uint64_t last = spoke_engine_now(sc->e);

	for (size_t i = 0; i < sc->n; i++)
		if (sc->r[i].due > last)
			last = sc->r[i].due;
	while (spoke_engine_now(sc->e) <= last)
		spoke_engine_advance(sc->e, 1, scene_expire, sc);
	for (size_t i = 0; i < sc->n; i++) {
		const struct rec *r = &sc->r[i];

		if (r->due == 0 && r->fired != 0)
			fail_msg("%s: timer %zu fired (at %" PRIu64 "), it must not", scheme, i,
				 r->fired_at);
		if (r->due != 0 && (r->fired != 1 || r->fired_at != r->due))
			fail_msg("%s: timer %zu fired %u times (last at %" PRIu64
				 "), expected once at %" PRIu64,
				 scheme, i, r->fired, r->fired_at, r->due);
	}
	assert_int_equal(spoke_engine_count(sc->e), 0);
	spoke_engine_free(sc->e);
	sc->e = NULL;
}

static int scene_teardown(void **state)
{
	(void)state;
	fault_off();
	spoke_engine_free(scene.e);
	scene.e = NULL;
	return 0;
}

static const char *scheme_of(void **state)
{
	return *state;
}

/* ---- spoke_engine_new: -EINVAL ----------------------------------------------------- */

/*
 * One params field with out-of-range values: the schemes in `owners`
 * refuse each with -EINVAL and leave *out alone; every other scheme ignores
 * the field (engine.h: "a field that the chosen scheme does not have is
 * ignored"). The last good value is accepted by the owners.
 */
struct bad_field {
	const char *owners[3]; /* NULL-terminated */
	struct spoke_engine_params bad[4];
	size_t nbad;
	struct spoke_engine_params good_edge;
};

static bool is_owner(const char *scheme, const char *const *owners)
{
	for (; *owners; owners++)
		if (strcmp(*owners, scheme) == 0)
			return true;
	return false;
}

static void check_bad_field(const struct bad_field *f)
{
	for (const char *const *s = spoke_engine_schemes(); *s; s++) {
		bool owner = is_owner(*s, f->owners);

		for (size_t i = 0; i < f->nbad; i++) {
			struct spoke_engine *e = SENTINEL_ENGINE;
			int rc = spoke_engine_new(&e, *s, &f->bad[i]);

			if (owner) {
				if (rc != -EINVAL)
					fail_msg("%s, bad value %zu: %d, expected -EINVAL", *s, i,
						 rc);
				assert_ptr_equal(e, SENTINEL_ENGINE);
				continue;
			}
			if (rc != 0)
				fail_msg("%s does not have the field, bad value %zu: %d, expected "
					 "0 (ignored)",
					 *s, i, rc);
			spoke_engine_free(e);
		}
		if (owner) {
			struct spoke_engine *e = SENTINEL_ENGINE;

			assert_int_equal(spoke_engine_new(&e, *s, &f->good_edge), 0);
			spoke_engine_free(e);
		}
	}
}

static void spoke_engine_new_bad_level_bits_einval(void **state)
{
	const struct bad_field f = {
		.owners = {"hierarchical"},
		.bad = {{.level_bits = 17}, {.level_bits = 64}, {.level_bits = UINT32_MAX}},
		.nbad = 3,
		.good_edge = {.level_bits = 16},
	};

	(void)state;
	check_bad_field(&f);
}

static void spoke_engine_new_bad_levels_einval(void **state)
{
	const struct bad_field f = {
		.owners = {"hierarchical"},
		.bad = {{.levels = 65}, {.levels = 1000}, {.levels = UINT32_MAX}},
		.nbad = 3,
		.good_edge = {.levels = 64},
	};

	(void)state;
	check_bad_field(&f);
}

static void spoke_engine_new_bad_table_size_einval(void **state)
{
	const struct bad_field f = {
		.owners = {"hashed", "hashed-sorted"},
		.bad = {{.table_size = 3},
			{.table_size = ((size_t)1 << 24) - 1},
			{.table_size = ((size_t)1 << 24) + 1},
			{.table_size = (size_t)1 << 25}},
		.nbad = 4,
		.good_edge = {.table_size = 1},
	};

	(void)state;
	check_bad_field(&f);
}

static void spoke_engine_new_bad_max_interval_einval(void **state)
{
	const struct bad_field f = {
		.owners = {"wheel"},
		.bad = {{.max_interval = POW2(28) + 1},
			{.max_interval = POW2(40)},
			{.max_interval = UINT64_MAX}},
		.nbad = 3,
		.good_edge = {.max_interval = 1},
	};

	(void)state;
	check_bad_field(&f);
}

static void spoke_engine_new_bad_initial_capacity_einval(void **state)
{
	const struct bad_field f = {
		.owners = {"heap"},
		.bad = {{.initial_capacity = (size_t)POW2(32) + 1},
			{.initial_capacity = (size_t)POW2(40)},
			{.initial_capacity = SIZE_MAX}},
		.nbad = 3,
		.good_edge = {.initial_capacity = 1},
	};

	(void)state;
	check_bad_field(&f);
}

/* ---- spoke_engine_new: -ENOMEM -------------------------------------------------------- */

/*
 * Fail the first allocation of spoke_engine_new, then the second, ... until
 * one call succeeds: each refused call gives -ENOMEM, leaves *out alone and
 * frees what it had (LeakSanitizer). With default and non-default params.
 */
static void spoke_engine_new_enomem(void **state)
{
	const char *scheme = scheme_of(state);
	const struct spoke_engine_params small = {.level_bits = 4,
						  .levels = 3,
						  .table_size = 8,
						  .max_interval = 10,
						  .initial_capacity = 2};
	const struct spoke_engine_params *params[] = {NULL, &small};

	for (size_t v = 0; v < ARRAY_SIZE(params); v++) {
		long k;

		for (k = 0; k < 64; k++) {
			struct spoke_engine *e = SENTINEL_ENGINE;
			int rc;

			fault_alloc_after(k);
			rc = spoke_engine_new(&e, scheme, params[v]);
			fault_off();
			if (rc == 0) {
				assert_true(e != SENTINEL_ENGINE && e != NULL);
				assert_int_equal(spoke_engine_count(e), 0);
				spoke_engine_free(e);
				break;
			}
			if (rc != -ENOMEM)
				fail_msg("%s: allocation %ld refused: %d, expected -ENOMEM", scheme,
					 k + 1, rc);
			assert_true(fault_allocs_failed > 0);
			assert_ptr_equal(e, SENTINEL_ENGINE);
		}
		assert_true(k > 0); /* at least the engine itself is allocated */
		assert_true(k < 64);
	}
}

/* ---- spoke_engine_start: -ERANGE, -ENOMEM --------------------------------------------- */

/*
 * `wheel`: a delay past max_interval is -ERANGE and leaves the timer as it
 * was, pending (fires at its old deadline) or not (never fires); the limit
 * itself is accepted. For max_interval 1, 100 and the default 65535.
 */
static void spoke_engine_start_wheel_beyond_max_interval_erange(void **state)
{
	static const uint64_t maxes[] = {1, 100, 0};

	(void)state;
	for (size_t v = 0; v < ARRAY_SIZE(maxes); v++) {
		const struct spoke_engine_params p = {.max_interval = maxes[v]};
		uint64_t max = maxes[v] ? maxes[v] : 65535;
		struct scene *sc = scene_new("wheel", &p, max);
		struct rec *idle = scene_rec(sc), *armed = scene_rec(sc);
		const uint64_t bad[] = {max + 1, max + 2, 2 * max + 1, POW2(32), UINT64_MAX};

		scene_must_start(sc, armed, max);
		scene_snap(sc);
		for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
			assert_int_equal(spoke_engine_start(sc->e, &idle->t, bad[i]), -ERANGE);
			assert_int_equal(spoke_engine_start(sc->e, &armed->t, bad[i]), -ERANGE);
			scene_unchanged(sc);
		}
		assert_false(spoke_timer_pending(&idle->t));
		assert_true(spoke_timer_pending(&armed->t));
		scene_run_out(sc);
	}
}

static void count_expire(void *ctx, struct spoke_timer *t)
{
	(void)t;
	++*(size_t *)ctx;
}

/* Start fresh timers while allocation fails, until one is refused; returns it. */
static struct rec *start_until_enomem(struct scene *sc, uint64_t (*delay_of)(size_t i))
{
	for (size_t i = 0; i < 80; i++) {
		struct rec *r = scene_rec(sc);
		int rc = scene_start(sc, r, delay_of(i));

		if (rc == -ENOMEM)
			return r;
		if (rc != 0)
			fail_msg("%s: start %zu: %d", spoke_engine_scheme(sc->e), i, rc);
	}
	fail_msg("%s: 80 starts without memory all succeeded", spoke_engine_scheme(sc->e));
	return NULL;
}

static uint64_t delay_same_ttl(size_t i)
{
	return 300 + i % 3;
}

static uint64_t delay_new_ttl(size_t i)
{
	return 2000 + i;
}

/*
 * A start refused with -ENOMEM: the timer is unchanged; if it was pending it
 * still fires at its old deadline, if not it never fires; the scene is
 * unchanged. Then memory comes back and everything fires on time.
 */
static void check_start_enomem(struct scene *sc, struct rec *refused, struct rec *armed,
			       uint64_t delay)
{
	int rc;

	scene_snap(sc);
	assert_int_equal(spoke_engine_start(sc->e, &refused->t, delay), -ENOMEM);
	scene_unchanged(sc);
	rc = spoke_engine_start(sc->e, &armed->t, delay);
	if (rc == -ENOMEM) {
		scene_unchanged(sc);
	} else {
		/* the re-arm needed no memory: it took effect */
		assert_int_equal(rc, 0);
		armed->due = spoke_engine_now(sc->e) + delay;
	}
	assert_false(spoke_timer_pending(&refused->t));
	assert_true(spoke_timer_pending(&armed->t));
	fault_off();
	scene_run_out(sc);
}

/* `heap`: a start that needs the array to grow, with no memory, is -ENOMEM. */
static void spoke_engine_start_heap_cannot_grow_enomem(void **state)
{
	static const size_t caps[] = {1, 0};

	(void)state;
	for (size_t v = 0; v < ARRAY_SIZE(caps); v++) {
		const struct spoke_engine_params p = {.initial_capacity = caps[v]};
		struct scene *sc = scene_new("heap", &p, UINT64_MAX);
		struct rec *armed = scene_rec(sc), *refused;

		scene_must_start(sc, armed, 500);
		fault_alloc_after(0);
		refused = start_until_enomem(sc, delay_same_ttl);
		refused->due = 0;
		check_start_enomem(sc, refused, armed, 3);
	}
}

/*
 * `lawn`: a start with a TTL no queue has yet, when the queue pool or the
 * hash table must grow and cannot, is -ENOMEM. Known TTLs still start.
 */
static void spoke_engine_start_lawn_cannot_grow_enomem(void **state)
{
	struct scene *sc;
	struct rec *armed, *known, *refused;

	(void)state;
	/* the pool: its first chunk of queues cannot be allocated */
	{
		struct spoke_engine *e;
		struct spoke_timer t, copy;
		size_t fired = 0;

		assert_int_equal(spoke_engine_new(&e, "lawn", NULL), 0);
		spoke_timer_init(&t);
		copy = t;
		fault_alloc_after(0);
		assert_int_equal(spoke_engine_start(e, &t, 5), -ENOMEM);
		fault_off();
		assert_memory_equal(&t, &copy, sizeof(t));
		assert_int_equal(spoke_engine_count(e), 0);
		assert_int_equal(spoke_engine_next(e), UINT64_MAX);
		assert_int_equal(spoke_engine_start(e, &t, 5), 0);
		assert_int_equal(spoke_engine_advance(e, 5, count_expire, &fired), 1);
		assert_int_equal(fired, 1);
		spoke_engine_free(e);
	}
	/* the table: a new TTL that would make it more than half full */
	sc = scene_new("lawn", NULL, UINT64_MAX);
	armed = scene_rec(sc);
	scene_must_start(sc, armed, 500);
	fault_alloc_after(0);
	known = scene_rec(sc);
	scene_must_start(sc, known, 64); /* a witness's TTL: no memory needed */
	refused = start_until_enomem(sc, delay_new_ttl);
	refused->due = 0;
	check_start_enomem(sc, refused, armed, 4000);
}

/* ---- spoke_engine_stop: -ENOENT ----------------------------------------------------- */

/* stop(r) is -ENOENT and changes nothing, r included. */
static void stop_refused(struct scene *sc, struct rec *r)
{
	scene_snap(sc);
	assert_int_equal(spoke_engine_stop(sc->e, &r->t), -ENOENT);
	assert_int_equal(spoke_engine_stop(sc->e, &r->t), -ENOENT);
	scene_unchanged(sc);
}

static void spoke_engine_stop_never_started_enoent(void **state)
{
	struct scene *sc = scene_new(scheme_of(state), NULL, UINT64_MAX);

	stop_refused(sc, scene_rec(sc));
	scene_run_out(sc);
}

static void spoke_engine_stop_stopped_enoent(void **state)
{
	struct scene *sc = scene_new(scheme_of(state), NULL, UINT64_MAX);
	struct rec *a = scene_rec(sc), *b = scene_rec(sc);

	scene_must_start(sc, a, 7); /* shares a tick with two witnesses */
	scene_must_start(sc, b, 5000);
	assert_int_equal(spoke_engine_stop(sc->e, &a->t), 0);
	assert_int_equal(spoke_engine_stop(sc->e, &b->t), 0);
	a->due = b->due = 0;
	stop_refused(sc, a);
	stop_refused(sc, b);
	scene_run_out(sc);
}

static void spoke_engine_stop_fired_enoent(void **state)
{
	struct scene *sc = scene_new(scheme_of(state), NULL, UINT64_MAX);
	struct rec *a = scene_rec(sc);

	scene_must_start(sc, a, 3);
	spoke_engine_advance(sc->e, 3, scene_expire, sc);
	assert_int_equal(a->fired, 1);
	stop_refused(sc, a);
	scene_run_out(sc);
}

/* Inside its own expiry function the timer is no longer pending. */
static int own_stop_rc;
static size_t own_count_before, own_count_after;

static void stop_self_hook(struct scene *sc, struct rec *r)
{
	own_count_before = spoke_engine_count(sc->e);
	own_stop_rc = spoke_engine_stop(sc->e, &r->t);
	own_count_after = spoke_engine_count(sc->e);
}

static void spoke_engine_stop_in_own_callback_enoent(void **state)
{
	struct scene *sc = scene_new(scheme_of(state), NULL, UINT64_MAX);
	struct rec *a = scene_rec(sc);

	scene_must_start(sc, a, 7); /* due with two witnesses */
	sc->hook = stop_self_hook;
	sc->hook_on = (size_t)(a - sc->r);
	own_stop_rc = 12345;
	scene_run_out(sc);
	assert_int_equal(own_stop_rc, -ENOENT);
	assert_int_equal(own_count_after, own_count_before);
}

/* ---- spoke_engine_advance: re-entered from fn ----------------------------------------- */

static size_t reenter_rc;
static uint64_t reenter_now_before, reenter_now_after;
static size_t reenter_count_before, reenter_count_after;

static void reenter_hook(struct scene *sc, struct rec *r)
{
	(void)r;
	reenter_now_before = spoke_engine_now(sc->e);
	reenter_count_before = spoke_engine_count(sc->e);
	reenter_rc = spoke_engine_advance(sc->e, 5000, scene_expire, sc);
	reenter_rc += spoke_engine_advance(sc->e, UINT64_MAX, scene_expire, sc);
	reenter_now_after = spoke_engine_now(sc->e);
	reenter_count_after = spoke_engine_count(sc->e);
}

/*
 * engine.h: advance called from inside fn does nothing and returns 0: the
 * clock stays at the firing timer's deadline, nothing fires (not the
 * witnesses due at the same tick, not the later ones), and afterwards every
 * timer still fires exactly once at its own tick.
 */
static void spoke_engine_advance_reentered_returns_0(void **state)
{
	struct scene *sc = scene_new(scheme_of(state), NULL, UINT64_MAX);
	struct rec *a = scene_rec(sc);

	scene_must_start(sc, a, 7); /* due with two witnesses */
	sc->hook = reenter_hook;
	sc->hook_on = (size_t)(a - sc->r);
	reenter_rc = 12345;
	scene_run_out(sc);
	assert_int_equal(reenter_rc, 0);
	assert_int_equal(reenter_now_before, SCENE_START + 7);
	assert_int_equal(reenter_now_after, reenter_now_before);
	assert_int_equal(reenter_count_after, reenter_count_before);
}

/* ---- main ------------------------------------------------------------------------------- */

struct scheme_test {
	struct CMUnitTest t;
	const char *only; /* NULL: every scheme */
};

#define FOR_ALL(f)                                                                                 \
	{                                                                                          \
		cmocka_unit_test_setup_teardown(f, NULL, scene_teardown), NULL                     \
	}
#define ONLY(f, s)                                                                                 \
	{                                                                                          \
		cmocka_unit_test_setup_teardown(f, NULL, scene_teardown), s                        \
	}

static const struct scheme_test scheme_tests[] = {
	FOR_ALL(spoke_engine_new_enomem),
	ONLY(spoke_engine_start_wheel_beyond_max_interval_erange, "wheel"),
	ONLY(spoke_engine_start_heap_cannot_grow_enomem, "heap"),
	ONLY(spoke_engine_start_lawn_cannot_grow_enomem, "lawn"),
	FOR_ALL(spoke_engine_stop_never_started_enoent),
	FOR_ALL(spoke_engine_stop_stopped_enoent),
	FOR_ALL(spoke_engine_stop_fired_enoent),
	FOR_ALL(spoke_engine_stop_in_own_callback_enoent),
	FOR_ALL(spoke_engine_advance_reentered_returns_0),
};

static int run_scheme(const char *scheme)
{
	struct CMUnitTest sel[ARRAY_SIZE(scheme_tests)];
	size_t n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(scheme_tests); i++) {
		if (scheme_tests[i].only && strcmp(scheme_tests[i].only, scheme) != 0)
			continue;
		sel[n] = scheme_tests[i].t;
		sel[n].initial_state = (void *)(uintptr_t)scheme;
		n++;
	}
	print_message("[ GROUP    ] %s\n", scheme);
	return _cmocka_run_group_tests(scheme, sel, n, NULL, NULL);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest api_tests[] = {
		cmocka_unit_test(spoke_engine_new_bad_level_bits_einval),
		cmocka_unit_test(spoke_engine_new_bad_levels_einval),
		cmocka_unit_test(spoke_engine_new_bad_table_size_einval),
		cmocka_unit_test(spoke_engine_new_bad_max_interval_einval),
		cmocka_unit_test(spoke_engine_new_bad_initial_capacity_einval),
	};

	return engine_main(argc, argv, api_tests, ARRAY_SIZE(api_tests), run_scheme);
}
