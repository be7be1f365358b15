/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_util.c - the shared half of spoke-bench: forked repeat-and-summarize,
 * RSS, table/JSON rows, progress, percentiles, sleeping. See bench_util.h.
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
			timeout_ms = (int)((deadline_ns - now) / NS_PER_MS) + 1;
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

/* The runs' samples, one array per field, for the medians. */
struct series {
	double value[BENCH_MAX_RUNS], cpu[BENCH_MAX_RUNS], setup[BENCH_MAX_RUNS],
		timed[BENCH_MAX_RUNS];
};

/* Summarize the first k runs (k may be 0: nothing measured). */
static void summarize(struct bench_summary *sum, struct series *v, unsigned k)
{
	memset(sum, 0, sizeof(*sum));
	sum->runs = k;
	if (k == 0)
		return;
	sum->median = bench_median(v->value, k); /* sorted now */
	sum->min = v->value[0];
	sum->max = v->value[k - 1];
	sum->cpu_median = bench_median(v->cpu, k);
	sum->setup_ns = bench_median(v->setup, k);
	sum->timed_ns = bench_median(v->timed, k);
}

int bench_repeat(bench_run_fn *fn, void *arg, unsigned runs, double limit_s,
		 struct bench_summary *sum, char *err, size_t errlen)
{
	struct series v;
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
		v.value[done] = s.value;
		v.cpu[done] = s.cpu_value;
		v.setup[done] = s.setup_ns;
		v.timed[done] = s.timed_ns;
		done++;
		spent_s = (double)(bench_now_ns() - start_ns) / 1e9;
		total_s = spent_s / done * runs;
		if (limit_s > 0 && done < runs && total_s > limit_s) {
			set_error(err, errlen, "would take ~%.*f s for %u runs (%u took %.1f s)",
				  total_s < 10 ? 1 : 0, total_s, runs, done, spent_s);
			rc = BENCH_OVER_BUDGET;
			break;
		}
	}
	summarize(sum, &v, done);
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
			    double ratio, const char *basis)
{
	if (o->format == BENCH_JSON) {
		json_head(o, subject, workload, n);
		fprintf(o->f, ",\"ns_per_op\":%.2f,\"min\":%.2f,\"max\":%.2f,\"unit\":", s->median,
			s->min, s->max);
		json_string(o->f, unit);
		if (ratio > 0)
			fprintf(o->f, ",\"ratio\":%.3f", ratio);
		if (ratio > 0 && basis) {
			fputs(",\"ratio_basis\":", o->f);
			json_string(o->f, basis);
		}
		fprintf(o->f, ",\"runs\":%u}\n", s->runs);
	} else {
		table_head(o, subject, workload, n);
		fprintf(o->f, " %10.1f %10.1f %10.1f  %s", s->median, s->min, s->max, unit);
		if (ratio > 0)
			fprintf(o->f, "  %.2fx%s%s", ratio, basis ? " of " : "",
				basis ? basis : "");
		fputc('\n', o->f);
	}
	fflush(o->f);
}

void bench_out_result(struct bench_out *o, const char *subject, const char *workload, uint64_t n,
		      const struct bench_summary *s, const char *unit)
{
	bench_out_result_ratio(o, subject, workload, n, s, unit, 0, NULL);
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

/* ---- runs and grids ------------------------------------------------------ */

int bench_fail(struct bench_sample *out, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out->error, sizeof(out->error), fmt, ap);
	va_end(ap);
	return err ? err : -EPROTO;
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
	struct timespec ts = {(time_t)(ns / NS_PER_S), (long)(ns % NS_PER_S)};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void bench_sleep_until_ns(uint64_t t_ns)
{
	struct timespec ts = {(time_t)(t_ns / NS_PER_S), (long)(t_ns % NS_PER_S)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
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

/* ---- percentiles ------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

void bench_sort_u64(uint64_t *v, size_t k)
{
	qsort(v, k, sizeof(*v), cmp_u64);
}

double bench_pct_us(const uint64_t *sorted, size_t k, double q)
{
	size_t i = (size_t)ceil(q * (double)k);

	i = i == 0 ? 0 : i - 1;
	return (double)sorted[i < k ? i : k - 1] / 1000.0;
}

struct bench_pcts bench_pcts_us(const uint64_t *sorted, size_t k)
{
	return (struct bench_pcts){bench_pct_us(sorted, k, 0.50), bench_pct_us(sorted, k, 0.99),
				   bench_pct_us(sorted, k, 0.999), (double)sorted[k - 1] / 1000.0};
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
