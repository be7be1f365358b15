/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * urcu_wfcq.h - the one way the project includes liburcu's wfcqueue.
 *
 * _LGPL_SOURCE makes <urcu/wfcqueue.h> compile liburcu's LGPL-2.1+
 * static inline implementation (urcu/static/wfcqueue.h) into our code
 * instead of calling liburcu-common.so. spoke is LGPL-2.1-or-later, so
 * inlining that code is allowed. Being in our own translation units is
 * also what lets urcu_tsan.h, included first, make the queue's atomics
 * visible to ThreadSanitizer.
 */
#ifndef SPOKE_PERCPU_URCU_WFCQ_H
#define SPOKE_PERCPU_URCU_WFCQ_H

#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE
#endif

#include "urcu_tsan.h"

#include <urcu/wfcqueue.h>

#endif /* SPOKE_PERCPU_URCU_WFCQ_H */
