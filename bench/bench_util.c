/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_util.c - the shared half of spoke-bench: forked repeat-and-summarize,
 * RSS, table/JSON rows, gnuplot output, option parsing. See bench_util.h.
 */
#define _GNU_SOURCE /* pthread_setaffinity_np */
#include "bench_util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- repeat and summarize ---------------------------------------------- */

/* What a child sends back through its pipe (< PIPE_BUF: one atomic write). */
struct child_msg {
	int rc;
	struct bench_sample sample;
};

static void set_error(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_error(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Child side: run once, report, exit without touching the parent's stdio. */
static void __attribute__((noreturn)) child_run(bench_run_fn *fn, void *arg, unsigned run, int fd)
{
	struct child_msg msg;
	const char *p = (const char *)&msg;
	size_t left = sizeof(msg);

	memset(&msg, 0, sizeof(msg));
	msg.rc = fn(arg, run, &msg.sample);
	while (left > 0) {
		ssize_t w = write(fd, p, left);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(3);
		p += w;
		left -= (size_t)w;
	}
	_exit(0);
}

/* Read the child's message; deadline_ns 0 = wait forever. 0, -ETIMEDOUT or -EPIPE. */
static int read_msg(int fd, struct child_msg *msg, uint64_t deadline_ns)
{
	char *p = (char *)msg;
	size_t got = 0;

	while (got < sizeof(*msg)) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int timeout_ms = -1;
		ssize_t r;

		if (deadline_ns) {
			uint64_t now = bench_now_ns();

			if (now >= deadline_ns)
				return -ETIMEDOUT;
			timeout_ms = (int)((deadline_ns - now) / 1000000u) + 1;
		}
		r = poll(&pfd, 1, timeout_ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			continue; /* re-check the deadline */
		r = read(fd, p + got, sizeof(*msg) - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EPIPE;
		got += (size_t)r;
	}
	return 0;
}

/* One run in a forked child. */
static int run_forked(bench_run_fn *fn, void *arg, unsigned run, uint64_t deadline_ns,
		      struct bench_sample *out, char *err, size_t errlen)
{
	struct child_msg msg;
	int fds[2], status = 0, rc;
	pid_t pid;

	fflush(NULL);
	if (pipe(fds) != 0) {
		set_error(err, errlen, "pipe: %s", strerror(errno));
		return -errno;
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(fds[0]);
		close(fds[1]);
		set_error(err, errlen, "fork: %s", strerror(-rc));
		return rc;
	}
	if (pid == 0) {
		close(fds[0]);
		child_run(fn, arg, run, fds[1]);
	}
	close(fds[1]);
	rc = read_msg(fds[0], &msg, deadline_ns);
	if (rc == -ETIMEDOUT)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	close(fds[0]);

	if (rc == -ETIMEDOUT) {
		set_error(err, errlen, "stopped at the time limit");
		return rc;
	}
	if (rc != 0) {
		if (WIFSIGNALED(status))
			set_error(err, errlen, "run crashed: %s", strsignal(WTERMSIG(status)));
		else
			set_error(err, errlen, "run died (exit status %d)", WEXITSTATUS(status));
		return -ECHILD;
	}
	if (msg.rc != 0) {
		msg.sample.error[sizeof(msg.sample.error) - 1] = '\0';
		set_error(err, errlen, "%s",
			  msg.sample.error[0] ? msg.sample.error : strerror(-msg.rc));
		return msg.rc;
	}
	*out = msg.sample;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *v, unsigned k)
{
	qsort(v, k, sizeof(*v), cmp_double);
	return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

/* Summarize the first k runs (k may be 0: nothing measured). */
static void summarize(struct bench_summary *sum, double *value, double *setup, double *timed,
		      unsigned k)
{
	memset(sum, 0, sizeof(*sum));
	sum->runs = k;
	if (k == 0)
		return;
	sum->median = bench_median(value, k); /* sorted now */
	sum->min = value[0];
	sum->max = value[k - 1];
	sum->setup_ns = bench_median(setup, k);
	sum->timed_ns = bench_median(timed, k);
}

int bench_repeat(bench_run_fn *fn, void *arg, unsigned runs, double limit_s,
		 struct bench_summary *sum, char *err, size_t errlen)
{
	double value[BENCH_MAX_RUNS], setup[BENCH_MAX_RUNS], timed[BENCH_MAX_RUNS];
	uint64_t start_ns = bench_now_ns(), limit_ns = (uint64_t)(limit_s * 1e9);
	unsigned done = 0;
	int rc = 0;

	if (runs == 0 || runs > BENCH_MAX_RUNS) {
		set_error(err, errlen, "runs must be 1..%d", BENCH_MAX_RUNS);
		return -EINVAL;
	}
	while (done < runs) {
		struct bench_sample s = {0};
		uint64_t deadline_ns = limit_s > 0 ? start_ns + 2 * limit_ns : 0;
		double spent_s, total_s;

		rc = run_forked(fn, arg, done, deadline_ns, &s, err, errlen);
		if (rc == -ETIMEDOUT)
			set_error(err, errlen,
				  "stopped after %.1f s, twice the limit, in run %u of %u",
				  2 * limit_s, done + 1, runs);
		if (rc != 0)
			break;
		value[done] = s.value;
		setup[done] = s.setup_ns;
		timed[done] = s.timed_ns;
		done++;
		spent_s = (double)(bench_now_ns() - start_ns) / 1e9;
		total_s = spent_s / done * runs;
		if (limit_s > 0 && done < runs && total_s > limit_s) {
			set_error(err, errlen, "would take ~%.*f s for %u runs (%u took %.1f s)",
				  total_s < 10 ? 1 : 0, total_s, runs, done, spent_s);
			rc = -ETIMEDOUT;
			break;
		}
	}
	summarize(sum, value, setup, timed, done);
	return rc;
}

/* ---- memory ------------------------------------------------------------ */

long bench_rss_bytes(void)
{
	char buf[128];
	long resident, shared;
	ssize_t r;
	char *p;
	int fd;

	fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return -1;
	buf[r] = '\0';
	strtol(buf, &p, 10); /* size */
	resident = strtol(p, &p, 10);
	shared = strtol(p, NULL, 10); /* file-backed: code a fresh child faults in */
	return (resident - shared) * sysconf(_SC_PAGESIZE);
}

/* ---- output ------------------------------------------------------------ */

const char *bench_fmt_count(char *buf, size_t len, uint64_t n)
{
	unsigned exp = 0;
	uint64_t m = n;

	while (m >= 10 && m % 10 == 0) {
		m /= 10;
		exp++;
	}
	if (m == 1 && exp >= 3)
		snprintf(buf, len, "1e%u", exp);
	else
		snprintf(buf, len, "%llu", (unsigned long long)n);
	return buf;
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_head(struct bench_out *o, const char *subject, const char *workload, uint64_t n)
{
	fprintf(o->f, "{\"%s\":", o->subject_key);
	json_string(o->f, subject);
	fputs(",\"workload\":", o->f);
	json_string(o->f, workload);
	fprintf(o->f, ",\"n\":%llu", (unsigned long long)n);
}

static void table_head(struct bench_out *o, const char *subject, const char *workload, uint64_t n)
{
	char nb[32];

	if (!o->header_done) {
		fprintf(o->f, "%-14s %-11s %5s %10s %10s %10s  %s\n", o->subject_key, "workload",
			"n", "median", "min", "max", "unit");
		o->header_done = true;
	}
	fprintf(o->f, "%-14s %-11s %5s", subject, workload, bench_fmt_count(nb, sizeof(nb), n));
}

void bench_out_result_ratio(struct bench_out *o, const char *subject, const char *workload,
			    uint64_t n, const struct bench_summary *s, const char *unit,
			    double ratio)
{
	if (o->format == BENCH_JSON) {
		json_head(o, subject, workload, n);
		fprintf(o->f, ",\"ns_per_op\":%.2f,\"min\":%.2f,\"max\":%.2f,\"unit\":", s->median,
			s->min, s->max);
		json_string(o->f, unit);
		if (ratio > 0)
			fprintf(o->f, ",\"ratio\":%.3f", ratio);
		fprintf(o->f, ",\"runs\":%u}\n", s->runs);
	} else {
		table_head(o, subject, workload, n);
		fprintf(o->f, " %10.1f %10.1f %10.1f  %s", s->median, s->min, s->max, unit);
		if (ratio > 0)
			fprintf(o->f, "  %.2fx", ratio);
		fputc('\n', o->f);
	}
	fflush(o->f);
}

void bench_out_result(struct bench_out *o, const char *subject, const char *workload, uint64_t n,
		      const struct bench_summary *s, const char *unit)
{
	bench_out_result_ratio(o, subject, workload, n, s, unit, 0);
}

void bench_out_note(struct bench_out *o, const char *kind, const char *subject,
		    const char *workload, uint64_t n, const char *reason)
{
	if (o->format == BENCH_JSON) {
		json_head(o, subject, workload, n);
		fprintf(o->f, ",\"%s\":", kind);
		json_string(o->f, reason);
		fputs("}\n", o->f);
	} else {
		table_head(o, subject, workload, n);
		fprintf(o->f, "  %s: %s\n", kind, reason);
	}
	fflush(o->f);
}

void bench_md_sizes_head(FILE *f, const char *first, int first_w, const uint64_t *sizes,
			 size_t nsizes, int col_w)
{
	char nb[32];

	fprintf(f, "| %-*s |", first_w, first);
	for (size_t i = 0; i < nsizes; i++)
		fprintf(f, " %*s |", col_w, bench_fmt_count(nb, sizeof(nb), sizes[i]));
	fprintf(f, "\n|%.*s|", first_w + 2, "--------------------------------");
	for (size_t i = 0; i < nsizes; i++)
		fprintf(f, "%.*s:|", col_w + 1, "--------------------------------");
	fputc('\n', f);
}

void bench_machine(char *buf, size_t len)
{
	char line[256], model[128] = "unknown CPU";
	struct utsname u;
	FILE *f = fopen("/proc/cpuinfo", "r");

	while (f && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) == 0 && colon) {
			snprintf(model, sizeof(model), "%s", colon + 2);
			model[strcspn(model, "\n")] = '\0';
			break;
		}
	}
	if (f)
		fclose(f);
	if (uname(&u) != 0)
		strcpy(u.release, "?");
	snprintf(buf, len, "%s, %ld CPUs, Linux %s", model, sysconf(_SC_NPROCESSORS_ONLN),
		 u.release);
}

/* ---- the paper's workloads (schemes, peers) ----------------------------- */

int bench_fail(struct bench_sample *out, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out->error, sizeof(out->error), fmt, ap);
	va_end(ap);
	return err;
}

size_t bench_grid_sizes(uint64_t *sizes, size_t max, uint64_t max_n)
{
	size_t k = 0;

	for (uint64_t n = 1000; n <= max_n && n <= 10000000 && k < max; n *= 10)
		sizes[k++] = n;
	if (k == 0 || sizes[k - 1] != max_n) {
		fprintf(stderr, "--max-n: a power of ten from 1e3 to 1e7\n");
		return 0;
	}
	return k;
}

/* ---- plot -------------------------------------------------------------- */

/* A gnuplot single-quoted string: '' stands for one quote. */
static void gp_quote(FILE *gp, const char *s)
{
	fputc('\'', gp);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', gp);
		if (*s != '\n')
			fputc(*s, gp);
	}
	fputc('\'', gp);
}

static void gp_set(FILE *gp, const char *what, const char *text)
{
	fprintf(gp, "set %s ", what);
	gp_quote(gp, text);
	fputc('\n', gp);
}

/* Eight colours far apart (series i always gets colour i and point type i). */
static const char *const palette[] = {
	"#9400d3", "#009e73", "#56b4e9", "#e69f00", "#8b4513", "#0032b2", "#e41a1c", "#000000",
};
#define NPALETTE (sizeof(palette) / sizeof(palette[0]))

static void gp_panel(FILE *gp, size_t p, const struct bench_panel *pn)
{
	double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
	bool first = true;

	for (size_t s = 0; s < pn->nseries; s++) {
		const struct bench_series *se = &pn->series[s];

		if (se->npts == 0)
			continue;
		fprintf(gp, "$d%zu_%zu << EOD\n", p, s);
		for (size_t i = 0; i < se->npts; i++) {
			fprintf(gp, "%.6g %.6g\n", se->pts[i].x, se->pts[i].y);
			xmin = fmin(xmin, se->pts[i].x);
			xmax = fmax(xmax, se->pts[i].x);
			ymin = fmin(ymin, se->pts[i].y);
			ymax = fmax(ymax, se->pts[i].y);
		}
		fputs("EOD\n", gp);
	}
	gp_set(gp, "title", pn->title);
	gp_set(gp, "xlabel", pn->xlabel);
	gp_set(gp, "ylabel", pn->ylabel);
	fputs("set logscale x 10\nset format x '10^{%L}'\n", gp);
	fputs(pn->logy ? "set logscale y 10\n" : "unset logscale y\n", gp);
	if (xmin > xmax) { /* nothing measured: an empty frame */
		fputs("set xrange [1e3:1e6]\nset yrange [1:10]\nplot 1/0 notitle\n", gp);
		fputs("set autoscale\n", gp);
		return;
	}
	fprintf(gp, "set xrange [%g:%g]\n", xmin / 1.5, xmax * 1.5);
	if (pn->logy && ymin > 0) { /* whole decades: one point alone is no empty range */
		double lo = floor(log10(ymin)), hi = ceil(log10(ymax));

		fprintf(gp, "set yrange [%g:%g]\n", pow(10, lo), pow(10, hi > lo ? hi : lo + 1));
	} else {
		fputs("set autoscale y\n", gp);
	}
	for (size_t s = 0; s < pn->nseries; s++) {
		const struct bench_series *se = &pn->series[s];

		if (se->npts == 0)
			continue;
		fprintf(gp,
			"%s $d%zu_%zu using 1:2 with linespoints lw 2 lc rgb '%s' pt %zu ps 1.2 "
			"title ",
			first ? "plot" : ",", p, s, palette[s % NPALETTE], s % 13 + 1);
		gp_quote(gp, se->title);
		fputs(" noenhanced", gp);
		first = false;
	}
	fputc('\n', gp);
}

int bench_plot_png(const char *file, const char *title, const struct bench_panel *panels,
		   size_t npanels)
{
	size_t cols = npanels > 1 ? 2 : 1, rows = (npanels + cols - 1) / cols;
	void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
	struct stat st;
	FILE *gp;
	int status;

	unlink(file);
	gp = popen("gnuplot", "w");
	if (!gp) {
		signal(SIGPIPE, old_pipe);
		return -errno;
	}
	fprintf(gp, "set terminal pngcairo size %zu,%zu font 'Sans,10'\n", 820 * cols, 520 * rows);
	gp_set(gp, "output", file);
	fputs("set grid\nset key outside right top font ',9'\nset format y '%g'\n", gp);
	fprintf(gp, "set multiplot layout %zu,%zu title ", rows, cols);
	gp_quote(gp, title);
	fputc('\n', gp);
	for (size_t p = 0; p < npanels; p++)
		gp_panel(gp, p, &panels[p]);
	fputs("unset multiplot\nset output\n", gp);
	status = pclose(gp);
	signal(SIGPIPE, old_pipe);
	if (status != 0 || stat(file, &st) != 0 || st.st_size == 0)
		return -EIO;
	return 0;
}

/* ---- options ----------------------------------------------------------- */

static const struct option common_longopts[] = {
	{"json", no_argument, NULL, 'j'},
	{"quick", no_argument, NULL, 'q'},
	{"runs", required_argument, NULL, 'r'},
	{"help", no_argument, NULL, 'h'},
};
static const struct option grid_longopts[] = {
	{"max-n", required_argument, NULL, 'n'},
	{"budget", required_argument, NULL, 'b'},
};
#define MAX_LONGOPTS 32

/* Append src[0..n-1] (n = SIZE_MAX: up to a zero entry) at all[*len]; false if it does not fit. */
static bool add_longopts(struct option *all, size_t *len, const struct option *src, size_t n)
{
	for (size_t i = 0; src && i < n && src[i].name; i++) {
		if (*len + 1 >= MAX_LONGOPTS)
			return false;
		all[(*len)++] = src[i];
	}
	all[*len] = (struct option){0};
	return true;
}

/* A common option (the grid's too with `grid`): 0 taken, -1 a bad value (said), 1 not one. */
static int common_option(struct bench_opts *o, bool grid, int opt, const char *arg)
{
	if (!grid && (opt == 'n' || opt == 'b'))
		return 1; /* the subcommand's own */
	switch (opt) {
	case 'j':
		o->json = true;
		return 0;
	case 'q':
		o->quick = true;
		return 0;
	case 'r':
		if (bench_parse_count(arg, &o->runs) == 0 && o->runs <= BENCH_MAX_RUNS)
			return 0;
		fprintf(stderr, "--runs: 1..%d\n", BENCH_MAX_RUNS);
		return -1;
	case 'n':
		if (bench_parse_count(arg, &o->max_n) == 0)
			return 0;
		fprintf(stderr, "--max-n: a power of ten from 1e3 to 1e7\n");
		return -1;
	case 'b':
		if (bench_parse_seconds(arg, &o->budget_s) == 0)
			return 0;
		fprintf(stderr, "--budget: seconds > 0\n");
		return -1;
	default:
		return 1;
	}
}

int bench_parse_options(int argc, char **argv, bool grid, const struct option *own,
			bench_option_fn *fn, void *ctx, void (*usage)(FILE *f),
			struct bench_opts *o)
{
	struct option all[MAX_LONGOPTS];
	size_t len = 0;
	int opt, rc;

	*o = (struct bench_opts){0};
	if (!add_longopts(all, &len, common_longopts, ARRAY_LEN(common_longopts)) ||
	    !add_longopts(all, &len, grid_longopts, grid ? ARRAY_LEN(grid_longopts) : 0) ||
	    !add_longopts(all, &len, own, SIZE_MAX)) {
		fprintf(stderr, "spoke-bench %s: too many options\n", argv[0]);
		return 2;
	}
	optind = 1;
	while ((opt = getopt_long(argc, argv, "", all, NULL)) != -1) {
		if (opt == 'h') {
			usage(stdout);
			return 0;
		}
		if (opt == '?') {
			usage(stderr);
			return 2;
		}
		rc = common_option(o, grid, opt, optarg);
		if (rc > 0)
			rc = fn(ctx, opt, optarg);
		if (rc != 0)
			return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "spoke-bench %s: unexpected argument '%s'\n", argv[0],
			argv[optind]);
		return 2;
	}
	return -1;
}

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

size_t bench_threads_doubling(unsigned *out, size_t cap, unsigned upto)
{
	size_t n = 0;
	unsigned t = 1;

	for (; n < cap && t <= upto; t *= 2)
		out[n++] = t;
	if (n < cap && n && out[n - 1] != upto)
		out[n++] = upto;
	return n;
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

/* ---- threads and sleeping ---------------------------------------------- */

unsigned bench_ncpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : (unsigned)n;
}

void bench_pin_self(unsigned index)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(index % bench_ncpus(), &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

void bench_sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- a team of threads ------------------------------------------------- */

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bench_thread_fail(struct bench_thread *t, int err, const char *what)
{
	if (!t->err) {
		t->err = err ? err : -EPROTO;
		t->what = what;
	}
}

/* Team thread: prepared; wait for the gate. Whether to run the body. */
static bool team_wait_gate(struct bench_team *tm)
{
	bool run;

	pthread_mutex_lock(&tm->mu);
	tm->ready++;
	pthread_cond_broadcast(&tm->cv);
	while (!tm->open)
		pthread_cond_wait(&tm->cv, &tm->mu);
	run = tm->run;
	pthread_mutex_unlock(&tm->mu);
	return run;
}

static void *team_thread_main(void *arg)
{
	struct bench_thread *t = arg;
	struct bench_team *tm = t->team;
	bool run;

	if (tm->pin)
		bench_pin_self(t->index);
	if (tm->prepare && !t->err)
		tm->prepare(t);
	run = team_wait_gate(tm);
	t->cpu0 = thread_cpu_ns();
	t->t0 = bench_now_ns();
	if (!t->err && run)
		tm->body(t);
	t->t1 = bench_now_ns();
	t->cpu1 = thread_cpu_ns();
	return NULL;
}

int bench_team_start(struct bench_team *tm)
{
	int err;

	pthread_mutex_init(&tm->mu, NULL);
	pthread_cond_init(&tm->cv, NULL);
	tm->started = tm->ready = 0;
	tm->open = tm->run = false;
	atomic_store(&tm->stop, 0);
	for (; tm->started < tm->T; tm->started++) {
		struct bench_thread *t = bench_team_thread(tm, tm->started);

		t->team = tm;
		t->index = tm->started;
		err = pthread_create(&t->th, NULL, team_thread_main, t);
		if (err) {
			struct bench_team_result r;

			bench_team_go(tm, false);
			bench_team_join(tm, &r);
			return -err;
		}
	}
	return 0;
}

void bench_team_ready(struct bench_team *tm)
{
	pthread_mutex_lock(&tm->mu);
	while (tm->ready < tm->started)
		pthread_cond_wait(&tm->cv, &tm->mu);
	pthread_mutex_unlock(&tm->mu);
}

void bench_team_go(struct bench_team *tm, bool run)
{
	pthread_mutex_lock(&tm->mu);
	tm->open = true;
	tm->run = run;
	pthread_cond_broadcast(&tm->cv);
	pthread_mutex_unlock(&tm->mu);
}

void bench_team_stop(struct bench_team *tm)
{
	atomic_store(&tm->stop, 1);
}

void bench_team_join(struct bench_team *tm, struct bench_team_result *r)
{
	uint64_t last_t1 = 0;

	memset(r, 0, sizeof(*r));
	r->first_t0 = UINT64_MAX;
	for (unsigned i = 0; i < tm->started; i++) {
		struct bench_thread *t = bench_team_thread(tm, i);

		pthread_join(t->th, NULL);
		if (t->err && !r->err) {
			r->err = t->err;
			r->err_index = i;
			r->what = t->what;
		}
		r->ops += t->ops;
		r->thread_ns += (double)(t->t1 - t->t0);
		r->cpu_ns += (double)(t->cpu1 - t->cpu0);
		if (t->t0 < r->first_t0)
			r->first_t0 = t->t0;
		if (t->t1 > last_t1)
			last_t1 = t->t1;
	}
	r->window_ns = tm->started ? (double)(last_t1 - r->first_t0) : 0;
	pthread_cond_destroy(&tm->cv);
	pthread_mutex_destroy(&tm->mu);
}

/* ---- progress ---------------------------------------------------------- */

static void fmt_duration(char *buf, size_t len, double s)
{
	if (s < 60)
		snprintf(buf, len, "%.0fs", s);
	else if (s < 3600)
		snprintf(buf, len, "%dm%02ds", (int)(s / 60), (int)s % 60);
	else
		snprintf(buf, len, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
}

void bench_progress_start(struct bench_progress *pr, const char *cmd, size_t total, uint64_t now_ns)
{
	*pr = (struct bench_progress){.cmd = cmd, .total = total, .t0_ns = now_ns};
	pr->tty = isatty(STDERR_FILENO) == 1;
}

void bench_progress_step(struct bench_progress *pr, const char *what, uint64_t now_ns)
{
	double elapsed = (double)(now_ns - pr->t0_ns) / 1e9, left;
	char el[32], lt[32];

	if (pr->done < pr->total)
		pr->done++;
	left = elapsed / (double)pr->done * (double)(pr->total - pr->done);
	fmt_duration(el, sizeof(el), elapsed);
	fmt_duration(lt, sizeof(lt), left);
	fprintf(stderr, "%s%s: %zu/%zu cells, %s, %s elapsed, about %s left%s", pr->tty ? "\r" : "",
		pr->cmd, pr->done, pr->total, what, el, lt, pr->tty ? "\033[K" : "\n");
	fflush(stderr);
}

void bench_progress_end(struct bench_progress *pr)
{
	if (pr->tty && pr->done > 0)
		fputs("\r\033[K", stderr);
}
