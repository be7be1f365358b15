/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * service_report.c - what `spoke-bench service` and `scaling` print: a row
 * as it is measured (a table line, or a JSON object), then in table mode
 * the summary tables and the goals (service_plan.h).
 */
#include "service_plan.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#define LOAD_NOTE_ABOVE 0.05 /* the table flags rows measured beside more than this */

/* ---- output -------------------------------------------------------------- */

static void json_num(const char *key, double v)
{
	if (isfinite(v))
		printf(",\"%s\":%.2f", key, v);
	else
		printf(",\"%s\":null", key);
}

static void json_str(const char *key, const char *s)
{
	printf(",\"%s\":\"", key);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void print_json(const struct plan *p, const struct row *r)
{
	printf("{\"bench\":\"%s\",\"workload\":\"%s\",\"threads\":%u",
	       p->scaling ? "scaling" : "service", r->workload, r->T);
	if (r->kind == ROW_LATE)
		printf(",\"pending\":%llu,\"tick_us\":%.0f", (unsigned long long)r->pending,
		       (double)r->tick_ns / 1000.0);
	if (!r->ok) {
		if (r->kind == ROW_OPS && r->n)
			printf(",\"n\":%llu", (unsigned long long)r->n);
		json_str(r->skipped ? "skipped" : "error", r->error);
		printf("}\n");
		return;
	}
	printf(",\"n\":%llu", (unsigned long long)r->n);
	switch (r->kind) {
	case ROW_OPS:
		json_num("ns_per_op", r->v.med);
		json_num("min", r->v.min);
		json_num("max", r->v.max);
		json_num("ops_per_s", r->x[X_OPS_PER_S].med);
		json_num("cpu_ns_per_op", r->x[X_CPU_NS].med);
		printf(",\"shards\":%u,\"callback_threads\":%u", r->shards, r->callbacks);
		if (r->baseline) {
			json_str("baseline", r->baseline);
			json_num("ratio", r->ratio);
		}
		if (strcmp(r->workload, wl_name[W_OWN]) == 0)
			json_num("ratio_engine_clock", r->x[X_CLK_RATIO].med);
		if (strncmp(r->workload, "reset-", 6) == 0) {
			json_num("enoent", r->x[X_ENOENT].med);
			json_num("lost", r->x[X_LOST].med);
		}
		if (strcmp(r->workload, wl_name[W_CROSS_PAIR]) == 0 ||
		    strcmp(r->workload, wl_name[W_MUTEX_PAIR]) == 0)
			json_num("lost", r->x[X_LOST].med);
		if (strcmp(r->workload, wl_name[W_CROSS_START]) == 0)
			json_num("all_in_wheels_ms", r->x[X_DRAIN_NS].med / 1e6);
		if (strncmp(r->workload, "fire-", 5) == 0)
			json_num("csw_per_1k", r->x[X_CSW].med);
		break;
	case ROW_LATE:
		json_num("p50_us", r->x[X_P50].med);
		json_num("p99_us", r->x[X_P99].med);
		json_num("p999_us", r->x[X_P999].med);
		json_num("max_us", r->x[X_MAX].med);
		json_num("p99_min_us", r->x[X_P99].min);
		json_num("p99_max_us", r->x[X_P99].max);
		json_num("max_max_us", r->x[X_MAX].max);
		json_num("service_max_late_us", r->x[X_SVC_LATE].med);

		break;
	case ROW_MEM:
		json_num("bytes_per_timer", r->v.med);
		json_num("min", r->v.min);
		json_num("max", r->v.max);
		break;
	}
	if (r->other >= 0)
		json_num("other_load_pct", 100 * r->other);
	printf(",\"runs\":%u}\n", r->runs);
}

static void print_load_note(const struct row *r)
{
	if (r->other > LOAD_NOTE_ABOVE)
		printf("  [other processes: %.0f%% of the CPUs]", 100 * r->other);
	putchar('\n');
}

static void print_table_row(struct plan *p, const struct row *r)
{
	char nb[32];

	if (!p->header_done) {
		printf("%-23s %2s %9s %9s %9s %9s %9s %8s  %s\n", "workload", "T", "n", "ns/op",
		       "min", "max", "cpu-ns/op", "Mops/s", "note");
		p->header_done = true;
	}
	if (r->kind == ROW_LATE) {
		printf("%-23s %2u pending %s, tick %.0f us: ", r->workload, r->T,
		       bench_fmt_count(nb, sizeof(nb), r->pending), (double)r->tick_ns / 1000.0);
		if (!r->ok) {
			printf("%s: %s\n", r->skipped ? "skipped" : "error", r->error);
			return;
		}
		printf("p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f us  (%llu samples; p99 of the "
		       "runs %.1f .. %.1f)",
		       r->x[X_P50].med, r->x[X_P99].med, r->x[X_P999].med, r->x[X_MAX].med,
		       (unsigned long long)r->x[X_SAMPLES].med, r->x[X_P99].min, r->x[X_P99].max);
		print_load_note(r);
		return;
	}
	printf("%-23s %2u %9s", r->workload, r->T,
	       r->ok || r->n ? bench_fmt_count(nb, sizeof(nb), r->n) : "-");
	if (!r->ok) {
		printf("  %s: %s\n", r->skipped ? "skipped" : "error", r->error);
		return;
	}
	if (r->kind == ROW_MEM) {
		printf(" %9.1f %9.1f %9.1f %9s %8s  bytes per pending timer", r->v.med, r->v.min,
		       r->v.max, "", "");
		print_load_note(r);
		return;
	}
	printf(" %9.1f %9.1f %9.1f", r->v.med, r->v.min, r->v.max);
	if (r->x[X_CPU_NS].med > 0)
		printf(" %9.1f", r->x[X_CPU_NS].med);
	else
		printf(" %9s", "-");
	printf(" %8.2f  %s", r->x[X_OPS_PER_S].med / 1e6, r->note);
	print_load_note(r);
}

void print_row(struct plan *p, const struct row *r)
{
	if (p->json)
		print_json(p, r);
	else
		print_table_row(p, r);
	fflush(stdout);
}

/* ---- summary (table mode) ------------------------------------------------ */

static const struct row *find_row(const struct plan *p, const char *name, unsigned T,
				  uint64_t pending, uint64_t tick_ns)
{
	for (size_t i = 0; i < p->nrows; i++) {
		const struct row *r = &p->rows[i];

		if (strcmp(r->workload, name) == 0 && r->T == T && r->pending == pending &&
		    r->tick_ns == tick_ns)
			return r;
	}
	return NULL;
}

static bool find_kind(const struct plan *p, enum row_kind kind)
{
	for (size_t i = 0; i < p->nrows; i++)
		if (p->rows[i].kind == kind)
			return true;
	return false;
}

/* A throughput row of the summary. */
static void summary_ops_row(const struct row *r)
{
	char vs[64], cpu[32];

	if (!r->ok) {
		printf("| %s | %u | %s | | | | %s |\n", r->workload, r->T,
		       r->skipped ? "skipped" : "error", r->error);
		return;
	}
	vs[0] = '\0';
	if (r->baseline)
		snprintf(vs, sizeof(vs), "%.2fx %s", r->ratio, r->baseline);
	if (r->x[X_CPU_NS].med > 0)
		snprintf(cpu, sizeof(cpu), "%.1f", r->x[X_CPU_NS].med);
	else
		snprintf(cpu, sizeof(cpu), "-");
	printf("| %s | %u | %.1f | %.1f .. %.1f | %s | %.2f | %s |\n", r->workload, r->T, r->v.med,
	       r->v.min, r->v.max, cpu, r->x[X_OPS_PER_S].med / 1e6, vs);
}

/* A lateness row of the summary. */
static void summary_late_row(const struct row *r)
{
	char nb[32];

	if (!r->ok) {
		printf("| %s | %.0f us | %s: %s | | | | |\n",
		       bench_fmt_count(nb, sizeof(nb), r->pending), (double)r->tick_ns / 1000.0,
		       r->skipped ? "skipped" : "error", r->error);
		return;
	}
	printf("| %s | %.0f us | %.1f | %.1f | %.1f | %.1f | %.0f |\n",
	       bench_fmt_count(nb, sizeof(nb), r->pending), (double)r->tick_ns / 1000.0,
	       r->x[X_P50].med, r->x[X_P99].med, r->x[X_P999].med, r->x[X_MAX].med,
	       r->x[X_SAMPLES].med);
}

/* The memory line of the summary. */
static void summary_mem_row(const struct row *r)
{
	char nb[32];

	if (r->ok)
		printf("\nMemory: %.1f bytes per pending timer (N = %s; min %.1f, max %.1f)\n",
		       r->v.med, bench_fmt_count(nb, sizeof(nb), r->n), r->v.min, r->v.max);
}

/* One part of the summary: the rows of one kind under their head (if any). */
struct summary_part {
	enum row_kind kind;
	const char *head; /* the column names and the rule; NULL: no table */
	void (*row)(const struct row *r);
};

static const struct summary_part summary_parts[] = {
	{ROW_OPS,
	 "| workload | T | ns/op | min .. max | CPU ns/op | Mops/s | vs |\n"
	 "|---|--:|--:|--:|--:|--:|---|\n",
	 summary_ops_row},
	{ROW_LATE,
	 "| pending | tick | p50 | p99 | p99.9 | max | samples/run |\n"
	 "|--:|--:|--:|--:|--:|--:|--:|\n",
	 summary_late_row},
	{ROW_MEM, NULL, summary_mem_row},
};

static void summary_title(const struct plan *p, enum row_kind kind, const char *machine)
{
	if (kind == ROW_OPS)
		printf("\n### Throughput (median of %u runs; %s)\n\n", p->runs, machine);
	else if (kind == ROW_LATE)
		printf("\n### Expiry lateness (us; median of %u runs)\n\n", p->runs);
}

void print_summary(const struct plan *p, const char *machine)
{
	for (size_t k = 0; k < sizeof(summary_parts) / sizeof(summary_parts[0]); k++) {
		const struct summary_part *sp = &summary_parts[k];

		if (!find_kind(p, sp->kind))
			continue;
		summary_title(p, sp->kind, machine);
		if (sp->head)
			fputs(sp->head, stdout);
		for (size_t i = 0; i < p->nrows; i++)
			if (p->rows[i].kind == sp->kind)
				sp->row(&p->rows[i]);
	}
}

/* A goal line: "- <what>: <figure> - met" */
static void goal(bool met, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void goal(bool met, const char *fmt, ...)
{
	va_list ap;

	printf("- ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" - %s\n", met ? "met" : "NOT met");
}

/* The goals, against the rows measured. */
void print_goals(const struct plan *p)
{
	const struct row *r;

	if (!selected(p, W_OWN) && !selected(p, W_RESET_OWN) && !selected(p, W_CROSS_START) &&
	    !selected(p, W_LATENESS) && !selected(p, W_MEMORY))
		return;
	printf("\n### Goals\n\n");
	for (size_t i = 0; i < p->nthreads; i++) {
		r = find_row(p, wl_name[W_OWN], p->threads[i], 0, 0);
		if (r && r->ok)
			goal(r->x[X_CLK_RATIO].med <= 1.3,
			     "attached start+cancel at most 1.3x the bare engine + one clock read, "
			     "T=%u: %.2fx (%.1f vs %.1f ns; the bare engine alone %.2fx)",
			     r->T, r->x[X_CLK_RATIO].med, r->v.med, r->x[X_CLK_NS].med, r->ratio);
		r = find_row(p, wl_name[W_RESET_OWN], p->threads[i], 0, 0);
		if (r && r->ok)
			goal(r->ratio <= 1.3,
			     "reset on the owner's thread at most 1.3x the engine's stop + start + "
			     "one clock read, T=%u: %.2fx (%.1f vs %.1f ns)",
			     r->T, r->ratio, r->v.med, r->x[X_CLK_NS].med);
	}
	/*
	 * What a start costs its producer is the CPU time it spends in the
	 * call. The thread's wall time per start also counts the time it
	 * waited for a CPU, which is all of the difference once the producers
	 * and the shard threads outnumber the CPUs.
	 */
	for (size_t i = 0; i < p->nthreads; i++) {
		r = find_row(p, wl_name[W_CROSS_START], p->threads[i], 0, 0);
		if (r && r->ok)
			goal(r->x[X_CPU_NS].med < 100,
			     "cross-shard start under 100 ns on the producer, T=%u: CPU %.1f ns "
			     "(wall %.1f ns, %u producer and %u shard threads on %u CPUs)",
			     r->T, r->x[X_CPU_NS].med, r->v.med, r->T, r->shards, bench_ncpus());
	}
	for (size_t t = 0; t < p->nticks; t++) {
		uint64_t most = p->sc.late_pending[p->sc.nlate - 1];
		char nb[32];

		r = find_row(p, wl_name[W_LATENESS], 1, most, p->late_tick[t]);
		if (r && r->ok)
			goal(r->x[X_P99].med * 1000.0 <= (double)r->tick_ns,
			     "p99 lateness within one tick with %s pending, tick %.0f us: p99 %.1f "
			     "us",
			     bench_fmt_count(nb, sizeof(nb), most), (double)r->tick_ns / 1000.0,
			     r->x[X_P99].med);
	}
	r = find_row(p, wl_name[W_MEMORY], 1, 0, 0);
	if (r && r->ok)
		goal(r->v.med <= 48, "at most 48 bytes per pending timer: %.1f B", r->v.med);
}
