/* SPDX-License-Identifier: MIT */
/*
 * test_service_diagnostics.c - answers a person can read: spoke_config_check
 * names the field of a config that spoke_create refuses, and
 * spoke_next_deadline_ns keeps "nothing pending" apart from the errors
 * (docs/contract.md line 9: bad input gets a clear error).
 *
 *   config_check_accepts_defaults        spoke_config_init's config and NULL
 *                                        are valid; why is ""
 *   config_check_names_each_field        each invalid field alone: -EINVAL
 *                                        from spoke_config_check with a line
 *                                        that starts with the field (and its
 *                                        override's index) and names the
 *                                        value; spoke_create gives -EINVAL
 *                                        and leaves *out alone
 *   config_check_why_is_bounded          a short buffer gets a NUL-terminated
 *                                        prefix of the line; NULL why is fine
 *   next_deadline_ns_encoding            attached: 1 and UINT64_MAX when
 *                                        nothing is pending, 0 and the ns
 *                                        otherwise (0 when work waits);
 *                                        NULL s or ns: -EINVAL
 *   next_deadline_ns_not_attached_eperm  -EPERM (not folded into anything),
 *                                        *ns untouched
 *   next_deadline_deprecated_encoding    spoke_next_deadline keeps its 0.3
 *                                        answers: -1, ns, -EINVAL
 */
#include "service_util.h"

/* ---- spoke_config_check ---------------------------------------------------------------- */

#define WHY_LEN 256

/* The base every case edits: valid on any machine (2 shards, 2 callback threads). */
static void base_config(struct spoke_config *c)
{
	spoke_config_init(c);
	c->shards = 2;
	c->callback_threads = 2;
}

static void config_check_accepts_defaults(void **state)
{
	struct spoke_config c;
	char why[WHY_LEN] = "junk";

	(void)state;
	spoke_config_init(&c);
	assert_int_equal(spoke_config_check(&c, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	strcpy(why, "junk");
	assert_int_equal(spoke_config_check(NULL, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	base_config(&c);
	assert_int_equal(spoke_config_check(&c, why, sizeof(why)), 0);
}

/* One invalid field: how to make it so, and what the line must start with. */
struct bad_case {
	const char *name;
	void (*edit)(struct spoke_config *c, struct spoke_shard_config *o);
	const char *starts; /* the field, its value */
};

static void zeroed(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	memset(c, 0, sizeof(*c));
}
static void shards_300(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	c->shards = 300;
}
static void tick_500(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	c->tick_ns = 500;
}
static void tick_over_an_hour(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	c->tick_ns = 3601 * SEC;
}
static void engine_misspelled(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	c->engine = "hierachical";
}
static void engine_wheel(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	c->engine = "wheel";
}
static void level_bits_17(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	c->level_bits = 17;
}
static void levels_65(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	c->levels = 65;
}
static void table_size_3(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	c->engine = "hashed";
	c->table_size = 3;
}
static void callback_threads_1025(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	c->callback_threads = 1025;
}
static void per_shard_without_pool(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	c->callback_threads = 0;
	c->callback_threads_per_shard = 1;
}
static void per_shard_too_many(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	c->callback_threads_per_shard = 513;
}
static void lawn_bit_past_shards(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	c->lawn_shards = 0x5;
}
static void more_overrides_than_shards(struct spoke_config *c, struct spoke_shard_config *o)
{
	c->shard_overrides = o;
	c->n_shard_overrides = 3;
}
static void overrides_null(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	c->n_shard_overrides = 1;
}
static void slack_100(struct spoke_config *c, struct spoke_shard_config *o)
{
	(void)o;
	c->slack_ns = 100;
}
static void override_cpu(struct spoke_config *c, struct spoke_shard_config *o)
{
	o[0].cpu = -2;
	c->shard_overrides = o;
	c->n_shard_overrides = 1;
}
static void override_tick(struct spoke_config *c, struct spoke_shard_config *o)
{
	o[1].tick_ns = 500;
	c->shard_overrides = o;
	c->n_shard_overrides = 2;
}
static void override_engine(struct spoke_config *c, struct spoke_shard_config *o)
{
	o[0].engine = "heap";
	c->shard_overrides = o;
	c->n_shard_overrides = 1;
}
static void override_slack(struct spoke_config *c, struct spoke_shard_config *o)
{
	o[0].slack_ns = 1000;
	c->shard_overrides = o;
	c->n_shard_overrides = 1;
}
/* The global slack is fine for the global tick, not for an override's longer one. */
static void global_slack_for_override_tick(struct spoke_config *c, struct spoke_shard_config *o)
{
	c->slack_ns = 20 * US;
	o[0].tick_ns = 10 * MS;
	c->shard_overrides = o;
	c->n_shard_overrides = 1;
}
static void override_level_bits(struct spoke_config *c, struct spoke_shard_config *o)
{
	o[1].level_bits = 20;
	c->shard_overrides = o;
	c->n_shard_overrides = 2;
}
/* A global geometry that only an override's engine reads. */
static void global_table_size_for_override_engine(struct spoke_config *c,
						  struct spoke_shard_config *o)
{
	c->table_size = 3;
	o[1].engine = "hashed-sorted";
	c->shard_overrides = o;
	c->n_shard_overrides = 2;
}

static const struct bad_case bad_cases[] = {
	{"zeroed", zeroed, "tick_ns: 0 is below the minimum of 1000 ns"},
	{"shards 300", shards_300, "shards: 300 "},
	{"tick 500", tick_500, "tick_ns: 500 is below the minimum of 1000 ns"},
	{"tick over an hour", tick_over_an_hour, "tick_ns: 3601000000000 "},
	{"misspelled engine", engine_misspelled, "engine: \"hierachical\" "},
	{"wheel", engine_wheel, "engine: \"wheel\" "},
	{"level_bits 17", level_bits_17, "level_bits: 17 "},
	{"levels 65", levels_65, "levels: 65 "},
	{"table_size 3", table_size_3, "table_size: 3 "},
	{"callback_threads 1025", callback_threads_1025, "callback_threads: 1025 "},
	{"per shard without a pool", per_shard_without_pool, "callback_threads_per_shard: 1 "},
	{"per shard too many", per_shard_too_many, "callback_threads_per_shard: 513 "},
	{"lawn bit past the shards", lawn_bit_past_shards, "lawn_shards: bit 2 "},
	{"more overrides than shards", more_overrides_than_shards, "n_shard_overrides: 3 "},
	{"overrides NULL", overrides_null, "shard_overrides: NULL"},
	{"slack 100", slack_100, "slack_ns: 100 "},
	{"override cpu", override_cpu, "shard_overrides[0].cpu: -2 "},
	{"override tick", override_tick, "shard_overrides[1].tick_ns: 500 "},
	{"override engine", override_engine, "shard_overrides[0].engine: \"heap\" "},
	{"override slack", override_slack, "shard_overrides[0].slack_ns: 1000 "},
	{"global slack, override tick", global_slack_for_override_tick, "slack_ns: 20000 "},
	{"override level_bits", override_level_bits, "shard_overrides[1].level_bits: 20 "},
	{"global table_size, override engine", global_table_size_for_override_engine,
	 "table_size: 3 "},
};

static void config_check_names_each_field(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad_cases); i++) {
		const struct bad_case *b = &bad_cases[i];
		struct spoke_shard_config o[3] = {{.cpu = -1}, {.cpu = -1}, {.cpu = -1}};
		struct spoke *s = (struct spoke *)&o; /* any address: must stay */
		struct spoke_config c;
		char why[WHY_LEN];

		base_config(&c);
		b->edit(&c, o);
		memset(why, 'x', sizeof(why));
		if (spoke_config_check(&c, why, sizeof(why)) != -EINVAL)
			fail_msg("%s: spoke_config_check did not return -EINVAL", b->name);
		if (strncmp(why, b->starts, strlen(b->starts)) != 0)
			fail_msg("%s: \"%s\" does not start with \"%s\"", b->name, why, b->starts);
		/* spoke_create refuses it through the same check, creating nothing. */
		assert_int_equal(spoke_create(&s, &c), -EINVAL);
		assert_ptr_equal(s, (struct spoke *)&o);
	}
}

static void config_check_why_is_bounded(void **state)
{
	struct spoke_config c;
	char why[9];

	(void)state;
	base_config(&c);
	c.tick_ns = 500;
	memset(why, 'x', sizeof(why));
	assert_int_equal(spoke_config_check(&c, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "tick_ns:");
	assert_int_equal(spoke_config_check(&c, NULL, 0), -EINVAL);
	assert_int_equal(spoke_config_check(&c, why, 0), -EINVAL);
	assert_string_equal(why, "tick_ns:"); /* len 0: untouched */
}

/* ---- spoke_next_deadline_ns ------------------------------------------------------------- */

static void next_deadline_ns_encoding(void **state)
{
	struct spoke *s = svc_new(1, 1 * MS, 0);
	atomic_uint runs = 0;
	uint64_t ns = 7;
	spoke_id id;

	(void)state;
	assert_int_equal(spoke_attach(s, 0), 0);
	assert_int_equal(spoke_next_deadline_ns(s, &ns), 1);
	assert_true(ns == UINT64_MAX);
	assert_int_equal(spoke_start(s, 3600 * SEC, never_fn, NULL, &id), 0);
	assert_int_equal(spoke_next_deadline_ns(s, &ns), 0);
	/* Never later than the deadline; earlier by at most a wheel level's cascade step. */
	assert_true(ns > 1000 * SEC && ns <= 3600 * SEC);
	assert_int_equal(spoke_start(s, 0, count_fn, &runs, NULL), 0);
	sleep_ms(3); /* past the next tick: work waits */
	assert_int_equal(spoke_next_deadline_ns(s, &ns), 0);
	assert_true(ns == 0);
	assert_int_equal(spoke_next_deadline_ns(NULL, &ns), -EINVAL);
	assert_int_equal(spoke_next_deadline_ns(s, NULL), -EINVAL);
	assert_true(spoke_poll(s) >= 1);
	assert_int_equal(atomic_load(&runs), 1);
	assert_int_equal(spoke_cancel(s, id), 0);
	assert_true(spoke_poll(s) >= 0);
	assert_int_equal(spoke_next_deadline_ns(s, &ns), 1);
	assert_int_equal(spoke_detach(s), 0);
	svc_destroy(s);
}

static void next_deadline_ns_not_attached_eperm(void **state)
{
	struct spoke *s = svc_new(1, 1 * MS, 1);
	uint64_t ns = 12345;

	(void)state;
	assert_int_equal(spoke_start(s, 3600 * SEC, never_fn, NULL, NULL), 0);
	assert_int_equal(spoke_next_deadline_ns(s, &ns), -EPERM);
	assert_true(ns == 12345);
	svc_destroy(s);
}

/* The deprecated call is still there for 0.x, with its own encoding. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void next_deadline_deprecated_encoding(void **state)
{
	struct spoke *s = svc_new(1, 1 * MS, 0);
	spoke_id id;
	int64_t ns;

	(void)state;
	assert_int_equal(spoke_next_deadline(s), -EINVAL); /* not attached */
	assert_int_equal(spoke_attach(s, 0), 0);
	assert_int_equal(spoke_next_deadline(s), -1);
	assert_int_equal(spoke_start(s, 3600 * SEC, never_fn, NULL, &id), 0);
	ns = spoke_next_deadline(s);
	assert_true(ns > (int64_t)(1000 * SEC) && ns <= (int64_t)(3600 * SEC));
	assert_int_equal(spoke_cancel(s, id), 0);
	assert_int_equal(spoke_detach(s), 0);
	svc_destroy(s);
}
#pragma GCC diagnostic pop

int main(int argc, char **argv)
{
	static const struct CMUnitTest all[] = {
		SVC_TEST(config_check_accepts_defaults),
		SVC_TEST(config_check_names_each_field),
		SVC_TEST(config_check_why_is_bounded),
		SVC_TEST(next_deadline_ns_encoding),
		SVC_TEST(next_deadline_ns_not_attached_eperm),
		SVC_TEST(next_deadline_deprecated_encoding),
	};

	return svc_main(argc, argv, "diagnostics", all, ARRAY_SIZE(all));
}
