/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_plot.c - bench_plot_png() (bench_util.h): panels of log-log lines
 * drawn by gnuplot, fed through a pipe, into one PNG. Main thread only.
 */
#include "bench_util.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

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
