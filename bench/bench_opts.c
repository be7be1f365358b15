/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_opts.c - a tool's command line from one table (bench_opts.h): the
 * getopt_long table and the --help text are both made from the command's
 * options, and the common options of the benchmarks are parsed here once.
 */
#include "bench_opts.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define HELP_COLUMN 22	/* where an option's text starts */
#define HELP_WIDTH  100 /* a default that would pass it goes on a line of its own */
#define MAX_OPTIONS 48

static const struct bench_option help_option = {"help", BENCH_KEY_HELP, NULL,
						"this text, on stdout (exit status 0)", NULL};

/* ---- the help ------------------------------------------------------------ */

/* "  --runs K" padded to HELP_COLUMN (or a new line when it is longer). */
static void help_name(FILE *f, const struct bench_option *o)
{
	int w = fprintf(f, "  --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");

	if (w + 1 >= HELP_COLUMN) {
		fputc('\n', f);
		w = 0;
	}
	fprintf(f, "%*s", HELP_COLUMN - w, "");
}

/* An option: its name, its text (continued lines indented), and its default. */
static void help_option_text(FILE *f, const struct bench_option *o)
{
	const char *s = o->help ? o->help : "";
	int col = HELP_COLUMN;

	help_name(f, o);
	for (;;) {
		size_t len = strcspn(s, "\n");

		fwrite(s, 1, len, f);
		col += (int)len;
		if (s[len] != '\n')
			break;
		s += len + 1;
		fprintf(f, "\n%*s", HELP_COLUMN, "");
		col = HELP_COLUMN;
	}
	if (!o->dflt) { /* --help alone: it has no default */
		fputc('\n', f);
		return;
	}
	if (col + (int)strlen(o->dflt) + 12 > HELP_WIDTH)
		fprintf(f, "\n%*s", HELP_COLUMN, "");
	else
		fputc(' ', f);
	fprintf(f, "(default: %s)\n", o->dflt);
}

void bench_cmd_help(const struct bench_cmd *c, FILE *f)
{
	const char *s = c->about ? c->about : "";

	fprintf(f, "usage: %s %s\n", c->name, c->synopsis ? c->synopsis : "[options]");
	while (*s) {
		size_t len = strcspn(s, "\n");

		fprintf(f, "  %.*s\n", (int)len, s);
		s += len + (s[len] == '\n');
	}
	fputs("\noptions:\n", f);
	for (const struct bench_option *o = c->options; o && o->name; o++)
		help_option_text(f, o);
	help_option_text(f, &help_option);
}

/* ---- the parser ----------------------------------------------------------- */

static struct option to_getopt(const struct bench_option *o)
{
	return (struct option){o->name, o->arg ? required_argument : no_argument, NULL, o->key};
}

int bench_cmd_longopts(const struct bench_cmd *c, struct option *all, size_t cap)
{
	size_t n = 0;

	for (const struct bench_option *o = c->options; o && o->name; o++) {
		if (n + 2 >= cap)
			return -1;
		all[n++] = to_getopt(o);
	}
	if (n + 2 > cap)
		return -1;
	all[n++] = to_getopt(&help_option);
	all[n] = (struct option){0};
	return (int)n;
}

/* The table entry of key, for messages. */
static const struct bench_option *option_of(const struct bench_cmd *c, int key)
{
	for (const struct bench_option *o = c->options; o && o->name; o++)
		if (o->key == key)
			return o;
	return &help_option;
}

/* A common option into *o: NULL if taken, else what it wants. */
static const char *common_option(struct bench_opts *o, int key, const char *arg)
{
	switch (key) {
	case BENCH_KEY_JSON:
		o->json = true;
		return NULL;
	case BENCH_KEY_QUICK:
		o->quick = true;
		return NULL;
	case BENCH_KEY_RUNS:
		if (bench_parse_count(arg, &o->runs) == 0 && o->runs <= BENCH_MAX_RUNS)
			return NULL;
		return "a count from 1 to 100";
	case BENCH_KEY_MAX_N:
		if (bench_parse_count(arg, &o->max_n) == 0)
			return NULL;
		return "a power of ten from 1e3 to 1e7";
	case BENCH_KEY_BUDGET:
		if (bench_parse_seconds(arg, &o->budget_s) == 0)
			return NULL;
		return "seconds, above 0";
	default:
		return "an option this tool does not take";
	}
}

/* The text of the argv element getopt_long just looked at. */
static const char *current_word(char **argv)
{
	return optind > 0 ? argv[optind - 1] : "?";
}

int bench_cmd_parse(const struct bench_cmd *c, int argc, char **argv)
{
	struct option all[MAX_OPTIONS];
	const struct bench_option *o;
	const char *why;
	int key;

	if (c->common)
		*c->common = (struct bench_opts){0};
	if (bench_cmd_longopts(c, all, MAX_OPTIONS) < 0) {
		fprintf(stderr, "%s: too many options for the parser\n", c->name);
		return 2;
	}
	optind = 1;
	opterr = 0;
	while ((key = getopt_long(argc, argv, ":", all, NULL)) != -1) {
		if (key == BENCH_KEY_HELP) {
			bench_cmd_help(c, stdout);
			return 0;
		}
		if (key == ':') {
			o = option_of(c, optopt);
			fprintf(stderr,
				"%s: option '--%s' needs an argument (%s); --help lists them\n",
				c->name, o->name, o->arg ? o->arg : "?");
			return 2;
		}
		if (key == '?') {
			fprintf(stderr, "%s: unknown option '%s'; --help lists the options\n",
				c->name, current_word(argv));
			return 2;
		}
		if (key >= BENCH_KEY_JSON && c->common)
			why = common_option(c->common, key, optarg);
		else if (c->handle)
			why = c->handle(c->ctx, key, optarg);
		else
			why = "an option this tool does not take";
		if (why) {
			o = option_of(c, key);
			if (optarg)
				fprintf(stderr, "%s: --%s '%s': want %s\n", c->name, o->name,
					optarg, why);
			else
				fprintf(stderr, "%s: --%s: %s\n", c->name, o->name, why);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'; --help lists the options\n", c->name,
			argv[optind]);
		return 2;
	}
	return -1;
}

const char *bench_opts_why(const char *fmt, ...)
{
	static char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return buf;
}

/* ---- values --------------------------------------------------------------- */

int bench_parse_count(const char *s, uint64_t *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end != '\0' || !(v >= 1 && v <= 1e12) || v != floor(v))
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}

int bench_parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end != '\0' || !(v > 0 && v < 1e6))
		return -EINVAL;
	*out = v;
	return 0;
}

int bench_parse_threads(const char *arg, unsigned *out, size_t cap, unsigned max)
{
	const char *s = arg;
	size_t n = 0;

	while (*s) {
		char *end;
		long v = strtol(s, &end, 10);

		if (end == s || v < 1 || (unsigned long)v > max || n >= cap ||
		    (*end && *end != ','))
			return -EINVAL;
		out[n++] = (unsigned)v;
		s = *end ? end + 1 : end;
	}
	return n ? (int)n : -EINVAL;
}
