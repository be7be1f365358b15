/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_options.c - the tools' command lines: every --help goes to stdout,
 * names every option the parser accepts, each with its default, and exits
 * 0; a bad option names itself on stderr and exits 2.
 *
 * The commands are the ones the tools parse with: spoke-bench's
 * subcommands (bench_subcommands[]), spoke-bench-counted's and spoke-demo's.
 * For each, the parser's own getopt table (bench_cmd_longopts, what
 * bench_cmd_parse hands getopt_long) is walked and every entry looked up
 * in the help text; then the built tools (their paths are the arguments:
 * spoke-bench, spoke-bench-counted, spoke-demo) are run with --help, with
 * an option that does not exist and with an option missing its argument.
 */
#define _GNU_SOURCE
#include "bench_util.h"
#include "counted.h"
#include "demo_options.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define MAX_OPTS 64
#define OUT_MAX	 (64 * 1024)

static const char *tool_bench, *tool_counted, *tool_demo;

/* ---- the tables and the help --------------------------------------------- */

/* The help text of c, in a malloc'ed string (not inlined: gcc 12 then takes the
 * returned buffer for the memstream's local pointer, -Wdangling-pointer). */
static __attribute__((noinline)) char *help_of(const struct bench_cmd *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	bench_cmd_help(c, f);
	fclose(f);
	return buf;
}

/*
 * The help's entry of option `name`: from its line "  --name" to the next
 * option's line (or the end). NULL if the help has no such line.
 */
static char *entry_of(const char *help, const char *name)
{
	char key[96];
	const char *at, *next;
	size_t from;

	snprintf(key, sizeof(key), "\n  --%s", name);
	at = strstr(help, key);
	if (!at)
		return NULL;
	from = (size_t)(at - help) + 1;
	next = strstr(help + from, "\n  --");
	return strndup(help + from, next ? (size_t)(next - help) - from : strlen(help + from));
}

/*
 * Does every option the parser of c accepts have an entry in its help, with
 * its default? NULL if so, else what is missing (a malloc'ed string).
 */
static char *help_problem(const struct bench_cmd *c)
{
	struct option all[MAX_OPTS];
	int n = bench_cmd_longopts(c, all, MAX_OPTS);
	char *help = help_of(c), *problem = NULL;

	if (n <= 0 || !strstr(help, "usage: "))
		problem = strdup("no usage line, or no options");
	for (int i = 0; i < n && !problem; i++) {
		char *entry = entry_of(help, all[i].name);

		if (!entry)
			(void)!asprintf(&problem, "%s --help does not name --%s", c->name,
					all[i].name);
		else if (strcmp(all[i].name, "help") != 0 && !strstr(entry, "(default: "))
			(void)!asprintf(&problem, "%s --help gives no default for --%s:\n%s",
					c->name, all[i].name, entry);
		free(entry);
	}
	free(help);
	return problem;
}

static void check_help_names_all(const struct bench_cmd *c)
{
	char *problem = help_problem(c);

	if (problem)
		fail_msg("%s", problem);
}

static void help_names_every_option(void **state)
{
	(void)state;
	for (size_t i = 0; i < bench_nsubcommands; i++)
		check_help_names_all(bench_subcommands[i].cmd);
	check_help_names_all(&bench_counted_cmd);
	check_help_names_all(&demo_cmd);
}

/* The check above can fail: an option listed without its default is caught. */
static void help_check_sees_a_missing_default(void **state)
{
	static const struct bench_option opts[] = {
		{"with", 'w', NULL, "has one", "yes"},
		{"without", 'o', "X", "has none", NULL},
		BENCH_OPT_END,
	};
	const struct bench_cmd c = {.name = "t", .options = opts};
	char *problem = help_problem(&c);

	(void)state;
	assert_non_null(problem);
	assert_non_null(strstr(problem, "--without"));
	free(problem);
}

/* ---- the tools, run -------------------------------------------------------- */

struct run {
	int status; /* exit status, or -1 */
	char out[OUT_MAX], err[OUT_MAX];
};

/* Read all of fd into buf (NUL-terminated, truncated at OUT_MAX - 1). */
static void slurp(int fd, char *buf)
{
	size_t got = 0;
	ssize_t r;

	while ((r = read(fd, buf + got, OUT_MAX - 1 - got)) > 0 || (r < 0 && errno == EINTR))
		if (r > 0)
			got += (size_t)r;
	buf[got] = '\0';
}

/* Run argv (NULL-terminated) with stdout and stderr captured. */
static void run_tool(struct run *r, char *const argv[])
{
	int out[2], err[2], status;
	pid_t pid;

	assert_int_equal(pipe(out), 0);
	assert_int_equal(pipe(err), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(out[1], STDOUT_FILENO);
		dup2(err[1], STDERR_FILENO);
		close(out[0]);
		close(err[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	slurp(out[0], r->out); /* the help fits the pipe: stderr is read after */
	slurp(err[0], r->err);
	close(out[0]);
	close(err[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	r->status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The tool's command lines: tool [sub] followed by up to two words. */
static void run_words(struct run *r, const char *tool, const char *sub, const char *a,
		      const char *b)
{
	char *argv[5];
	int n = 0;

	argv[n++] = (char *)tool;
	if (sub)
		argv[n++] = (char *)sub;
	if (a)
		argv[n++] = (char *)a;
	if (b)
		argv[n++] = (char *)b;
	argv[n] = NULL;
	run_tool(r, argv);
}

/* --help: exit 0, the help on stdout (the same text as the table gives), nothing on stderr. */
static void check_help_run(const char *tool, const char *sub, const struct bench_cmd *c)
{
	static struct run r;
	char *help = c ? help_of(c) : NULL;

	run_words(&r, tool, sub, "--help", NULL);
	if (r.status != 0 || r.err[0] || !strstr(r.out, "usage: "))
		fail_msg("%s %s --help: exit %d, stderr '%s'", tool, sub ? sub : "", r.status,
			 r.err);
	if (help && strcmp(help, r.out) != 0)
		fail_msg("%s %s --help prints another text than its table gives", tool,
			 sub ? sub : "");
	free(help);
}

/* A bad command line: exit 2, stderr names `word`, stdout empty. */
static void check_refused(const char *tool, const char *sub, const char *a, const char *b,
			  const char *word)
{
	static struct run r;

	run_words(&r, tool, sub, a, b);
	if (r.status != 2 || !strstr(r.err, word) || r.out[0])
		fail_msg("%s %s %s %s: exit %d (want 2), stderr '%s' (want it to name %s)", tool,
			 sub ? sub : "", a ? a : "", b ? b : "", r.status, r.err, word);
}

/* The first option of c that takes an argument, or NULL. */
static const struct bench_option *option_with_arg(const struct bench_cmd *c)
{
	for (const struct bench_option *o = c->options; o->name; o++)
		if (o->arg)
			return o;
	return NULL;
}

/* All three checks of one tool (sub: a spoke-bench subcommand, or NULL). */
static void check_tool(const char *tool, const char *sub, const struct bench_cmd *c)
{
	const struct bench_option *o = option_with_arg(c);
	char opt[64];

	check_help_run(tool, sub, c);
	check_refused(tool, sub, "--no-such-option", NULL, "--no-such-option");
	if (o) {
		snprintf(opt, sizeof(opt), "--%s", o->name);
		check_refused(tool, sub, opt, NULL, opt); /* its argument missing */
	}
}

static void tools_help_and_bad_options(void **state)
{
	(void)state;
	check_help_run(tool_bench, NULL, NULL);
	check_refused(tool_bench, "no-such-subcommand", NULL, NULL, "no-such-subcommand");
	for (size_t i = 0; i < bench_nsubcommands; i++)
		check_tool(tool_bench, bench_subcommands[i].name, bench_subcommands[i].cmd);
	check_tool(tool_counted, NULL, &bench_counted_cmd);
	if (tool_demo)
		check_tool(tool_demo, NULL, &demo_cmd);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(help_names_every_option),
		cmocka_unit_test(help_check_sees_a_missing_default),
		cmocka_unit_test(tools_help_and_bad_options),
	};

	if (argc < 3) {
		fprintf(stderr, "usage: %s SPOKE_BENCH SPOKE_BENCH_COUNTED [SPOKE_DEMO]\n",
			argv[0]);
		return 2;
	}
	tool_bench = argv[1];
	tool_counted = argv[2];
	tool_demo = argc > 3 ? argv[3] : NULL;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
