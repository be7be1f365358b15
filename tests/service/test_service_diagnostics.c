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

/* One invalid field each: what the line must start with (the field, its value). */
static const char *const bad_starts[] = {
	"tick_ns: 0 is below the minimum of 1000 ns",
	"shards: 300 ",
	"tick_ns: 500 is below the minimum of 1000 ns",
	"tick_ns: 3601000000000 ",
	"engine: \"hierachical\" ",
	"engine: \"wheel\" ",
	"level_bits: 17 ",
	"levels: 65 ",
	"table_size: 3 ",
	"callback_threads: 1025 ",
	"callback_threads_per_shard: 1 ",
	"callback_threads_per_shard: 513 ",
	"lawn_shards: bit 2 ",
	"n_shard_overrides: 3 ",
	"shard_overrides: NULL",
	"slack_ns: 100 ",
	"shard_overrides[0].cpu: -2 ",
	"shard_overrides[1].tick_ns: 500 ",
	"shard_overrides[0].engine: \"heap\" ",
	"shard_overrides[0].slack_ns: 1000 ",
	"slack_ns: 20000 ",
	"shard_overrides[1].level_bits: 20 ",
	"table_size: 3 ",
	"callback_spares: 1025 is above the maximum of 1024",
};

/* c takes the first n of the three overrides in o. */
static void use_overrides(struct spoke_config *c, struct spoke_shard_config *o, unsigned n)
{
	c->shard_overrides = o;
	c->n_shard_overrides = n;
}

/*
 * Make case k of bad_starts so in c, a valid base config; o is room for three
 * overrides (cpu -1, the rest 0).
 */
static void bad_edit(size_t k, struct spoke_config *c, struct spoke_shard_config *o)
{
	switch (k) {
	case 0: /* a zeroed config */
		memset(c, 0, sizeof(*c));
		break;
	case 1:
		c->shards = 300;
		break;
	case 2:
		c->tick_ns = 500;
		break;
	case 3:
		c->tick_ns = 3601 * SEC;
		break;
	case 4: /* misspelled */
		c->engine = "hierachical";
		break;
	case 5: /* bounded */
		c->engine = "wheel";
		break;
	case 6:
		c->level_bits = 17;
		break;
	case 7:
		c->levels = 65;
		break;
	case 8:
		c->engine = "hashed";
		c->table_size = 3;
		break;
	case 9:
		c->callback_threads = 1025;
		break;
	case 10:
		c->callback_threads = 0;
		c->callback_threads_per_shard = 1;
		break;
	case 11:
		c->callback_threads_per_shard = 513;
		break;
	case 12: /* bit 2, of 2 shards */
		c->lawn_shards = 0x5;
		break;
	case 13: /* 3 overrides, of 2 shards */
		use_overrides(c, o, 3);
		break;
	case 14: /* a count and no array */
		c->n_shard_overrides = 1;
		break;
	case 15:
		c->slack_ns = 100;
		break;
	case 16:
		o[0].cpu = -2;
		use_overrides(c, o, 1);
		break;
	case 17:
		o[1].tick_ns = 500;
		use_overrides(c, o, 2);
		break;
	case 18:
		o[0].engine = "heap";
		use_overrides(c, o, 1);
		break;
	case 19:
		o[0].slack_ns = 1000;
		use_overrides(c, o, 1);
		break;
	case 20: /* a global slack fine for the global tick, not for an override's */
		c->slack_ns = 20 * US;
		o[0].tick_ns = 10 * MS;
		use_overrides(c, o, 1);
		break;
	case 21:
		o[1].level_bits = 20;
		use_overrides(c, o, 2);
		break;
	case 22: /* a global geometry only an override's engine reads */
		c->table_size = 3;
		o[1].engine = "hashed-sorted";
		use_overrides(c, o, 2);
		break;
	case 23:
		c->callback_spares = 1025;
		break;
	}
}

static void config_check_names_each_field(void **state)
{
	(void)state;
	for (size_t k = 0; k < ARRAY_SIZE(bad_starts); k++) {
		struct spoke_shard_config o[3] = {{.cpu = -1}, {.cpu = -1}, {.cpu = -1}};
		struct spoke *s = (struct spoke *)&o; /* any address: must stay */
		struct spoke_config c;
		char why[WHY_LEN];

		base_config(&c);
		bad_edit(k, &c, o);
		memset(why, 'x', sizeof(why));
		if (spoke_config_check(&c, why, sizeof(why)) != -EINVAL)
			fail_msg("case %zu (%s): spoke_config_check did not return -EINVAL", k,
				 bad_starts[k]);
		if (strncmp(why, bad_starts[k], strlen(bad_starts[k])) != 0)
			fail_msg("case %zu: \"%s\" does not start with \"%s\"", k, why,
				 bad_starts[k]);
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
	/*
	 * Never later than the end of the deadline's slot (the deadline plus at
	 * most the slack, under a tick); earlier by up to a wheel level's cascade step.
	 */
	assert_true(ns > 1000 * SEC && ns <= 3600 * SEC + 1 * MS);
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
	assert_true(ns > (int64_t)(1000 * SEC) && ns <= (int64_t)(3600 * SEC + 1 * MS));
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
