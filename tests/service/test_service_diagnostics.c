/* SPDX-License-Identifier: MIT */
/*
 * test_service_diagnostics.c - answers a person can read: spoke_config_check
 * names the field of a config that spoke_create refuses (docs/contract.md
 * line 9: bad input gets a clear error).
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

int main(int argc, char **argv)
{
	static const struct CMUnitTest all[] = {
		SVC_TEST(config_check_accepts_defaults),
		SVC_TEST(config_check_names_each_field),
		SVC_TEST(config_check_why_is_bounded),
	};

	return svc_main(argc, argv, "diagnostics", all, ARRAY_SIZE(all));
}
