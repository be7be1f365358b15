/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * probes.h - USDT probes (provider "spoke"), for perf, bpftrace or
 * SystemTap to attach to in a running server; docs/api.md shows how.
 *
 *   spoke:start       (id, shard, deadline_ns)   a timer was started (any start)
 *   spoke:cancel      (id, rc)                   spoke_cancel / _sync returned rc
 *   spoke:reset       (id, delay_ns, rc)         spoke_reset returned rc
 *   spoke:fire        (id, shard, late_ns)       a callback is about to run
 *   spoke:shard_sleep (shard, wait_ns)           a managed shard thread goes to
 *                                                sleep (-1: until a message)
 *   spoke:shard_wake  (shard)                    ... and is awake again
 *   spoke:rescue      (shard, absence_ns)        another thread ran a turn of a
 *                                                stalled shard (rescue.c); its
 *                                                owner had been away that long
 *   spoke:pool_spare  (queue, spares)            a starved pool queue got a spare
 *                                                worker (pool.c); spares running now
 *
 * A probe is one nop in the code and a note in the ELF file (readelf -n
 * libspoke.so lists them); its arguments are values the function has at
 * hand anyway. Built in when <sys/sdt.h> is there at build time (Debian:
 * systemtap-sdt-dev, a header, nothing to link); otherwise the macros are
 * empty.
 */
#ifndef SPOKE_PERCPU_PROBES_H
#define SPOKE_PERCPU_PROBES_H

#ifdef SPOKE_HAVE_SDT
#include <sys/sdt.h>
#define SPOKE_PROBE1(name, a)	    DTRACE_PROBE1(spoke, name, a)
#define SPOKE_PROBE2(name, a, b)    DTRACE_PROBE2(spoke, name, a, b)
#define SPOKE_PROBE3(name, a, b, c) DTRACE_PROBE3(spoke, name, a, b, c)
#else
#define SPOKE_PROBE1(name, a)                                                                      \
	do {                                                                                       \
	} while (0)
#define SPOKE_PROBE2(name, a, b)                                                                   \
	do {                                                                                       \
	} while (0)
#define SPOKE_PROBE3(name, a, b, c)                                                                \
	do {                                                                                       \
	} while (0)
#endif

#endif /* SPOKE_PERCPU_PROBES_H */
