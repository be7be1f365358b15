/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * counted.h - spoke-bench-counted (counted.c): its command, and its main,
 * which counted_main.c calls.
 */
#ifndef SPOKE_BENCH_COUNTED_H
#define SPOKE_BENCH_COUNTED_H

#include "bench_opts.h"

extern const struct bench_cmd bench_counted_cmd;

int counted_main(int argc, char **argv);

#endif /* SPOKE_BENCH_COUNTED_H */
