/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * engine.c - the scheme-independent half of every engine: names, argument
 * checks, the clock, the re-entry guard, and the start, stop and advance of
 * the schemes that fill in only the plain operations. Each scheme is
 * reached through its table of operations alone (engine_impl.h), and no
 * scheme calls back into this file.
 */
#include "engine_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct spoke_engine_ops *const scheme_table[] = {
	&spoke_list_ops,	  &spoke_sorted_list_ops, &spoke_heap_ops,	   &spoke_wheel_ops,
	&spoke_hashed_sorted_ops, &spoke_hashed_ops,	  &spoke_hierarchical_ops, &spoke_lawn_ops,
};

#define NSCHEMES (sizeof(scheme_table) / sizeof(scheme_table[0]))

static const char *const scheme_names[NSCHEMES + 1] = {
	"list",	  "sorted-list",  "heap", "wheel", "hashed-sorted",
	"hashed", "hierarchical", "lawn", NULL,
};

const char *const *spoke_engine_schemes(void)
{
	return scheme_names;
}

static const struct spoke_engine_ops *find_scheme(const char *name)
{
	for (size_t i = 0; i < NSCHEMES; i++)
		if (strcmp(scheme_table[i]->name, name) == 0)
			return scheme_table[i];
	return NULL;
}

static int start_plain(struct spoke_engine *e, struct spoke_timer *t, uint64_t delay_ticks);
static int stop_plain(struct spoke_engine *e, struct spoke_timer *t);
static size_t advance_plain(struct spoke_engine *e, uint64_t ticks, spoke_expire_fn *fn, void *ctx);

int spoke_engine_new(struct spoke_engine **out, const char *scheme,
		     const struct spoke_engine_params *params)
{
	static const struct spoke_engine_params defaults;
	const struct spoke_engine_ops *ops;
	struct spoke_engine *e;
	int err;

	if (!out || !scheme)
		return -EINVAL;
	ops = find_scheme(scheme);
	if (!ops)
		return -EINVAL;
	e = calloc(1, ops->size);
	if (!e)
		return -ENOMEM;
	e->ops = ops;
	e->start = ops->start ? ops->start : start_plain;
	e->stop = ops->stop ? ops->stop : stop_plain;
	e->advance = ops->advance ? ops->advance : advance_plain;
	spoke_tlist_init(&e->due);
	spoke_tlist_init(&e->firing);
	err = ops->init(e, params ? params : &defaults);
	if (err) {
		free(e);
		return err;
	}
	*out = e;
	return 0;
}

void spoke_engine_free(struct spoke_engine *e)
{
	if (!e)
		return;
	if (e->ops->fini)
		e->ops->fini(e);
	free(e);
}

const char *spoke_engine_scheme(const struct spoke_engine *e)
{
	return e->ops->name;
}

void spoke_timer_init(struct spoke_timer *t)
{
	memset(t, 0, sizeof(*t));
}

/*
 * The plain start, stop and advance, from the scheme's admit(), insert(),
 * remove(), next_event() and collect(), for a scheme without its own
 * (spoke_engine_new() chooses).
 */
static int start_plain(struct spoke_engine *e, struct spoke_timer *t, uint64_t delay_ticks)
{
	if (e->ops->admit) {
		int err = e->ops->admit(e, delay_ticks);

		if (err)
			return err;
	}
	if (spoke_timer_pending(t))
		spoke_unlink_pending(e, t);
	if (spoke_arm(e, t, spoke_deadline_after(e->now, delay_ticks)))
		e->ops->insert(e, t);
	return 0;
}

/* The start, stop or advance spoke_engine_new() chose: the scheme's own, or the plain one. */
int spoke_engine_start(struct spoke_engine *e, struct spoke_timer *t, uint64_t delay_ticks)
{
	return e->start(e, t, delay_ticks);
}

static int stop_plain(struct spoke_engine *e, struct spoke_timer *t)
{
	spoke_unlink_pending(e, t);
	return 0;
}

int spoke_engine_stop(struct spoke_engine *e, struct spoke_timer *t)
{
	if (!spoke_timer_pending(t))
		return -ENOENT;
	return e->stop(e, t);
}

/* The plain advance's loop: next_event() and collect(), then fire what collect() made due. */
static inline size_t advance_plain_to(struct spoke_engine *e, uint64_t target, spoke_expire_fn *fn,
				      void *ctx)
{
	size_t fired = 0;

	while (e->count > 0) {
		uint64_t ev = e->ops->next_event(e);

		if (ev > target || ev <= e->now)
			break;
		e->now = ev;
		e->ops->collect(e);
		fired += spoke_fire_due(e, fn, ctx);
	}
	return fired;
}

static size_t advance_plain(struct spoke_engine *e, uint64_t ticks, spoke_expire_fn *fn, void *ctx)
{
	return spoke_advance_with(e, ticks, fn, ctx, advance_plain_to);
}

size_t spoke_engine_advance(struct spoke_engine *e, uint64_t ticks, spoke_expire_fn *fn, void *ctx)
{
	return e->advance(e, ticks, fn, ctx);
}

uint64_t spoke_engine_now(const struct spoke_engine *e)
{
	return e->now;
}

uint64_t spoke_engine_next(const struct spoke_engine *e)
{
	/*
	 * Logically const: next_event() may refresh a cached minimum that
	 * a stop left stale, which changes no observable state.
	 */
	struct spoke_engine *me = (struct spoke_engine *)e;
	uint64_t ev;

	if (e->count == 0)
		return UINT64_MAX;
	if (!spoke_tlist_empty(&e->due) || !spoke_tlist_empty(&e->firing))
		return 1;
	ev = e->ops->next_event(me);
	return ev > e->now ? ev - e->now : 1;
}

size_t spoke_engine_count(const struct spoke_engine *e)
{
	return e->count;
}
