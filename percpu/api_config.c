/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * api_config.c - the caller's configuration: its defaults
 * (spoke_config_init) and its check (spoke_config_check), which names the
 * field it refuses; spoke_create calls the check.
 */
#define _GNU_SOURCE
#include "api.h"
#include "service.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#define DEFAULT_TICK_NS	    1000000ull
#define MIN_TICK_NS	    1000ull
#define MAX_TICK_NS	    3600000000000ull
#define DEFAULT_INBOX_BATCH 4096
#define DEFAULT_RESCUE_NS   10000000ull /* spoke.h: struct spoke_config says why */
/*
 * Messages a shard's inbox may hold before other threads' starts to it are
 * refused. Each is a queued handle: 64 bytes (128 for a periodic start), so
 * a stalled shard holds at most 64 MiB of its senders' memory (128 MiB),
 * and its owner handles the backlog in about 0.1-0.7 s when it comes back
 * (docs/api.md has the figures). A healthy owner takes its inbox at least
 * every two ticks and never nears it: that would take 500 M starts/s.
 */
#define DEFAULT_INBOX_LIMIT  (1u << 20)
#define MAX_CALLBACK_THREADS 1024
/*
 * Spare workers a starved pool may add (spoke.h says when). Enough for a
 * burst of callbacks blocked on later timers, few enough that an overload
 * of long CPU-bound callbacks adds at most this many threads to it.
 */
#define DEFAULT_CALLBACK_SPARES 16

void spoke_config_init(struct spoke_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->shards = default_shards();
	cfg->tick_ns = DEFAULT_TICK_NS;
	cfg->engine = "hierarchical";
	cfg->callback_threads = cfg->shards;
	cfg->pin_threads = true;
	cfg->inbox_batch = DEFAULT_INBOX_BATCH;
	cfg->inbox_limit = DEFAULT_INBOX_LIMIT;
	cfg->rescue_after_ns = DEFAULT_RESCUE_NS;
	cfg->callback_spares = DEFAULT_CALLBACK_SPARES;
}

/*
 * --- checking a configuration ------------------------------------------------
 *
 * spoke_config_check is the one validator: spoke_create calls it, and so
 * can a tool that wants to tell its user which field is wrong. Each rule is
 * a small helper that writes "field: value, the rule" into `why` and
 * returns -EINVAL; a field of a shard override is named with its index
 * ("shard_overrides[2].tick_ns"). The wheel geometry is the engines' own
 * business (lib/, spoke_engine_new): it is tried by creating the engine.
 */

/* A shard's main engine must accept every delay and never fail a start. */
static const char *const shard_engines[] = {"hierarchical", "hashed", "hashed-sorted", "list",
					    "sorted-list"};

/* What a config check writes its verdict into (why may be NULL). */
struct verdict {
	char *why;
	size_t len;
};

/* Write "<at><field>: <what>" into v and return -EINVAL. */
static int __attribute__((format(printf, 4, 5)))
refuse(struct verdict *v, const char *at, const char *field, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!v->why || v->len == 0)
		return -EINVAL;
	n = snprintf(v->why, v->len, "%s%s: ", at, field);
	if (n >= 0 && (size_t)n < v->len) {
		va_start(ap, fmt);
		vsnprintf(v->why + n, v->len - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int check_tick(struct verdict *v, const char *at, uint64_t tick_ns, bool zero_keeps)
{
	if (tick_ns == 0 && zero_keeps)
		return 0;
	if (tick_ns < MIN_TICK_NS)
		return refuse(
			v, at, "tick_ns", "%" PRIu64 " is below the minimum of %llu ns%s", tick_ns,
			MIN_TICK_NS,
			tick_ns ? ""
				: " (a zeroed config is invalid: start from spoke_config_init)");
	if (tick_ns > MAX_TICK_NS)
		return refuse(v, at, "tick_ns", "%" PRIu64 " is above the maximum of %llu ns (1 h)",
			      tick_ns, MAX_TICK_NS);
	return 0;
}

static int check_engine(struct verdict *v, const char *at, const char *name)
{
	char list[96] = "";

	if (!name)
		return 0;
	for (size_t i = 0; i < sizeof(shard_engines) / sizeof(shard_engines[0]); i++) {
		if (strcmp(name, shard_engines[i]) == 0)
			return 0;
		strcat(strcat(list, i ? ", " : ""), shard_engines[i]);
	}
	return refuse(v, at, "engine",
		      "\"%.32s\" is not a shard's engine (one of: %s; wheel is bounded, heap and "
		      "lawn allocate on a start)",
		      name, list);
}

/* The slack of a shard whose tick is tick_ns: at least tick/64, rounded up. */
static int check_slack(struct verdict *v, const char *at, uint64_t slack_ns, uint64_t tick_ns)
{
	if (spoke_stage_slots(tick_ns, slack_ns) != 0)
		return 0;
	return refuse(v, at, "slack_ns",
		      "%" PRIu64 " is below 1/64 of the tick of %" PRIu64 " ns it applies to "
		      "(at least %" PRIu64 " ns, or 0 for tick/4)",
		      slack_ns, tick_ns, spoke_div_round_up(tick_ns, 64));
}

static int check_override(struct verdict *v, const struct spoke_config *c, unsigned i)
{
	const struct spoke_shard_config *o = &c->shard_overrides[i];
	char at[32];
	int err;

	snprintf(at, sizeof(at), "shard_overrides[%u].", i);
	if (o->cpu < -1 || o->cpu >= CPU_SETSIZE)
		return refuse(v, at, "cpu", "%d is neither -1 (the default) nor a CPU below %d",
			      o->cpu, CPU_SETSIZE);
	err = check_tick(v, at, o->tick_ns, true);
	if (!err)
		err = check_engine(v, at, o->engine);
	if (!err)
		err = check_slack(v, o->slack_ns ? at : "", o->slack_ns ? o->slack_ns : c->slack_ns,
				  o->tick_ns ? o->tick_ns : c->tick_ns);
	return err;
}

static int check_pool(struct verdict *v, const struct spoke_config *c, unsigned shards)
{
	if (c->callback_threads > MAX_CALLBACK_THREADS)
		return refuse(v, "", "callback_threads", "%u is above the maximum of %u",
			      c->callback_threads, MAX_CALLBACK_THREADS);
	if (c->callback_threads_per_shard && c->callback_threads == 0)
		return refuse(v, "", "callback_threads_per_shard",
			      "%u asks for a pool, but callback_threads 0 asks for none",
			      c->callback_threads_per_shard);
	if (c->callback_threads_per_shard > MAX_CALLBACK_THREADS / shards)
		return refuse(v, "", "callback_threads_per_shard",
			      "%u workers x %u shards is above the maximum of %u workers",
			      c->callback_threads_per_shard, shards, MAX_CALLBACK_THREADS);
	if (c->callback_spares > MAX_CALLBACK_THREADS)
		return refuse(v, "", "callback_spares", "%u is above the maximum of %u",
			      c->callback_spares, MAX_CALLBACK_THREADS);
	return 0;
}

static int check_shards(struct verdict *v, const struct spoke_config *c, unsigned shards)
{
	if (shards > SPOKE_MAX_SHARDS)
		return refuse(v, "", "shards", "%u is above the maximum of %u (SPOKE_MAX_SHARDS)",
			      shards, SPOKE_MAX_SHARDS);
	if (shards < 64 && (c->lawn_shards >> shards) != 0)
		return refuse(v, "", "lawn_shards", "bit %d is set, but there are %u shards",
			      __builtin_ctzll(c->lawn_shards >> shards) + (int)shards, shards);
	if (c->n_shard_overrides > shards)
		return refuse(v, "", "n_shard_overrides", "%u is more than the %u shards",
			      c->n_shard_overrides, shards);
	if (c->n_shard_overrides && !c->shard_overrides)
		return refuse(v, "", "shard_overrides", "NULL, with n_shard_overrides %u",
			      c->n_shard_overrides);
	return 0;
}

/*
 * The engine and geometry of shard k, as shard.c spoke_shard_init reads them;
 * mine[f] tells whether geometry field f (level_bits, levels, table_size)
 * comes from the shard's override.
 */
static const char *shard_geometry(const struct spoke_config *c, unsigned k,
				  struct spoke_engine_params *p, bool mine[3])
{
	const struct spoke_shard_config *o =
		k < c->n_shard_overrides ? &c->shard_overrides[k] : NULL;

	mine[0] = o && o->level_bits;
	mine[1] = o && o->levels;
	mine[2] = o && o->table_size;
	*p = (struct spoke_engine_params){
		.level_bits = mine[0] ? o->level_bits : c->level_bits,
		.levels = mine[1] ? o->levels : c->levels,
		.table_size = mine[2] ? o->table_size : c->table_size,
	};
	if (o && o->engine)
		return o->engine;
	return c->engine ? c->engine : "hierarchical";
}

/* 0, -EINVAL or -ENOMEM: whether spoke_engine_new takes this geometry. */
static int try_geometry(const char *engine, const struct spoke_engine_params *p)
{
	struct spoke_engine *e;
	int err = spoke_engine_new(&e, engine, p);

	if (!err)
		spoke_engine_free(e);
	return err;
}

/* The geometry of shard k; when it is refused, each field alone names the culprit. */
static int check_geometry(struct verdict *v, const struct spoke_config *c, unsigned k)
{
	static const char *const field[] = {"level_bits", "levels", "table_size"};
	struct spoke_engine_params p, one[3];
	bool mine[3];
	const char *engine = shard_geometry(c, k, &p, mine);
	char at[32];
	int err;

	if (!p.level_bits && !p.levels && !p.table_size)
		return 0; /* the engine's defaults */
	err = try_geometry(engine, &p);
	if (err != -EINVAL)
		return err;
	one[0] = (struct spoke_engine_params){.level_bits = p.level_bits};
	one[1] = (struct spoke_engine_params){.levels = p.levels};
	one[2] = (struct spoke_engine_params){.table_size = p.table_size};
	for (unsigned f = 0; f < 3; f++) {
		size_t value = f == 0 ? p.level_bits : f == 1 ? p.levels : p.table_size;

		if (!value || try_geometry(engine, &one[f]) != -EINVAL)
			continue;
		at[0] = '\0';
		if (mine[f])
			snprintf(at, sizeof(at), "shard_overrides[%u].", k);
		return refuse(v, at, field[f],
			      "%zu is refused by engine %s (its valid values: struct "
			      "spoke_engine_params in spoke/engine.h)",
			      value, engine);
	}
	return refuse(v, "", "level_bits, levels, table_size",
		      "refused together by engine %s (shard %u)", engine, k);
}

int spoke_config_check(const struct spoke_config *c, char *why, size_t len)
{
	struct verdict v = {why, len};
	unsigned shards;
	int err;

	if (why && len)
		why[0] = '\0';
	if (!c)
		return 0; /* the defaults */
	shards = c->shards ? c->shards : default_shards();
	err = check_shards(&v, c, shards);
	if (!err)
		err = check_tick(&v, "", c->tick_ns, false);
	if (!err)
		err = check_engine(&v, "", c->engine);
	if (!err)
		err = check_pool(&v, c, shards);
	/* The global slack applies to the shards without an override. */
	if (!err && c->n_shard_overrides < shards)
		err = check_slack(&v, "", c->slack_ns, c->tick_ns);
	for (unsigned i = 0; !err && i < c->n_shard_overrides; i++)
		err = check_override(&v, c, i);
	/* Shards past the overrides all run the global geometry: one try covers them. */
	for (unsigned k = 0; !err && k < shards && k <= c->n_shard_overrides; k++)
		err = check_geometry(&v, c, k);
	return err;
}
