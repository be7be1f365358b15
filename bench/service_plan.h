/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * service_plan.h - inside `spoke-bench service` and `scaling`: the plan of
 * a run and its rows, which bench_service.c fills (running the workloads in
 * order) and service_report.c prints (a row as it is measured, then the
 * summary tables and the goals).
 */
#ifndef SPOKE_BENCH_SERVICE_PLAN_H
#define SPOKE_BENCH_SERVICE_PLAN_H

#include "service.h"

#define MAX_ROWS	  320
#define MAX_PENDING_SIZES 4
#define MAX_TICKS	  2

extern const char *const wl_name[NWL];

#define BARE_NAME	 "engine-start-stop"
#define CLOCK_NAME	 "engine-clock-start-stop"
#define CLOCK_RESET_NAME "engine-clock-reset"

enum row_kind { ROW_OPS, ROW_LATE, ROW_MEM };

struct stat3 {
	double med, min, max;
};

struct row {
	enum row_kind kind;
	const char *workload;
	unsigned T, shards, callbacks;
	uint64_t n; /* see the comment at the top */
	uint64_t pending, tick_ns;
	unsigned runs;
	bool ok;
	bool skipped; /* over its time budget (BENCH_OVER_BUDGET): error says why */
	char error[320];
	struct stat3 v; /* ns/op, B/timer, or p99 us */
	struct stat3 x[NX];
	double other;	      /* other_load() over its runs */
	const char *baseline; /* ratio = this row's ns/op / the baseline's */
	double ratio;
	char note[120];
};

/* How big a run is: the full measurement, or --quick (a smoke test). */
struct scale {
	double limit_s;		 /* bench_repeat's limit for a series */
	uint64_t window_ns;	 /* windowed workloads */
	uint64_t start_n;	 /* cross-start, mutex-start: starts */
	uint64_t reset_n;	 /* reset: pending timers */
	uint64_t fire_n;	 /* fire-*: timers */
	uint64_t mem_n;		 /* memory: timers */
	uint64_t late_window_ns; /* lateness: the stream */
	uint64_t late_pending[MAX_PENDING_SIZES];
	size_t nlate;
};

struct plan {
	unsigned runs;
	bool quick;
	struct scale sc; /* scales[quick] */
	uint64_t late_tick[MAX_TICKS];
	size_t nticks;
	unsigned threads[MAX_T];
	size_t nthreads;
	bool json;
	bool scaling;		   /* spoke-bench scaling: see bench_scaling_main */
	const char *only[NWL + 1]; /* --only: run just these workloads (NULL = all) */
	uint64_t stall_test_ns;	   /* --stall-test */
	size_t nonly;
	struct row rows[MAX_ROWS];
	size_t nrows;
	bool failed;
	bool header_done;
};

/* Is workload w (or its baseline's service row) selected by --only? */
bool selected(const struct plan *p, enum wl w);

/* service_report.c: a row as it is measured; the summary and the goals (table mode). */
void print_row(struct plan *p, const struct row *r);
void print_summary(const struct plan *p, const char *machine);
void print_goals(const struct plan *p);

#endif /* SPOKE_BENCH_SERVICE_PLAN_H */
