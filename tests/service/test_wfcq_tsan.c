/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_wfcq_tsan: liburcu's cds_wfcq used the way a shard uses its inbox,
 * built through percpu/urcu_wfcq.h, so that ThreadSanitizer checks it.
 *
 * Producers enqueue intrusive nodes (the node embedded in an item, as in
 * a timer handle) from several threads; the test thread is the owner: it
 * moves the shared queue into a private one with
 * __cds_wfcq_splice_nonblocking() and consumes the private queue either
 * with __cds_wfcq_dequeue_nonblocking() or with
 * __cds_wfcq_first_nonblocking()/__cds_wfcq_next_nonblocking(). Whenever
 * liburcu answers "would block" (a producer was preempted between its
 * tail exchange and linking its node) the owner yields and retries; the
 * blocking variants, which sleep 10 ms in poll(), are never used.
 *
 * Each item's fields are written by its producer with plain stores before
 * the enqueue and read by the owner with plain loads after the dequeue,
 * so under TSan the test passes only if the queue's happens-before edges
 * are visible to it (percpu/urcu_tsan.h). Without that header TSan reports
 * races inside urcu/static/wfcqueue.h and on these fields.
 *
 * After a splice, the owner is ordered after every item it took by the
 * chain of exchanges on the inbox's tail alone. The third case dequeues
 * straight from the shared inbox, so there the owner sees an item only
 * through the ->next pointer its producer stored after its exchange:
 * that case passes under TSan only if CMM_STORE_SHARED/CMM_LOAD_SHARED
 * carry release/acquire (see urcu_tsan.h), not merely relaxed.
 *
 * Checked: every item arrives exactly once, in FIFO order per producer,
 * with the payload its producer wrote; both queues are empty at the end.
 */
#include "urcu_wfcq.h"

#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define MAX_PRODUCERS 8
#define PAYLOAD_WORDS 2
/* Per run: 800k items, a few seconds under TSan on 2 cores. */
#define TOTAL_ITEMS 800000u
#define DEADLINE_NS (60ull * 1000000000ull) /* with no item taken: the queue stalled */
#define YIELD_EVERY 64			    /* producer items between sched_yield() */

struct item {
	struct cds_wfcq_node node; /* embedded, as in a timer handle */
	uint32_t producer;
	uint32_t consumed; /* 0 from the producer, 1 by the owner */
	uint64_t seq;
	uint64_t payload[PAYLOAD_WORDS];
};

struct inbox {
	struct cds_wfcq_head head;
	struct cds_wfcq_tail tail __attribute__((aligned(CAA_CACHE_LINE_SIZE)));
	int go; /* main -> producers only */
};

struct producer {
	pthread_t thread;
	unsigned id;
	unsigned nitems;
	struct item *items;
	struct inbox *inbox;
	unsigned long was_empty; /* enqueues that found the queue empty */
};

enum drain_mode {
	SPLICE_DEQUEUE, /* splice, then dequeue the private queue */
	SPLICE_ITERATE, /* splice, then first/next over it */
	DIRECT_DEQUEUE, /* dequeue from the shared inbox itself */
};

/* The owner's state: touched by the test thread only. */
struct owner {
	enum drain_mode mode;
	unsigned nproducers;
	unsigned nitems;
	struct __cds_wfcq_head priv_head;
	struct cds_wfcq_tail priv_tail;
	struct cds_wfcq_node *cursor; /* SPLICE_ITERATE: last consumed node */
	uint64_t expected[MAX_PRODUCERS];
	unsigned long received;
	unsigned long splices, splice_wouldblock, drain_wouldblock, yields;
	char error[256];
};

static uint64_t payload_word(unsigned producer, uint64_t seq, unsigned k)
{
	return (seq * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)producer << 56) ^ ((uint64_t)k << 48);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Producer thread: fills its items with plain stores, then enqueues them. */
static void *producer_main(void *arg)
{
	struct producer *pr = arg;
	struct inbox *in = pr->inbox;

	while (!__atomic_load_n(&in->go, __ATOMIC_ACQUIRE))
		sched_yield();
	for (unsigned s = 0; s < pr->nitems; s++) {
		struct item *it = &pr->items[s];

		it->producer = pr->id;
		it->seq = s;
		it->consumed = 0;
		for (unsigned k = 0; k < PAYLOAD_WORDS; k++)
			it->payload[k] = payload_word(pr->id, s, k);
		cds_wfcq_node_init(&it->node);
		if (!cds_wfcq_enqueue(&in->head, &in->tail, &it->node))
			pr->was_empty++;
		/* Let the owner in often: more splices of a queue in motion. */
		if (s % YIELD_EVERY == YIELD_EVERY - 1)
			sched_yield();
	}
	return NULL;
}

/* Owner: checks one item with plain loads; false (and error set) if bad. */
static bool consume(struct owner *o, struct cds_wfcq_node *node)
{
	struct item *it = caa_container_of(node, struct item, node);
	unsigned p = it->producer;

	if (p >= o->nproducers) {
		snprintf(o->error, sizeof(o->error), "item with producer id %u", p);
		return false;
	}
	if (it->seq != o->expected[p]) {
		snprintf(o->error, sizeof(o->error),
			 "producer %u: got seq %llu, expected %llu (FIFO or loss)", p,
			 (unsigned long long)it->seq, (unsigned long long)o->expected[p]);
		return false;
	}
	for (unsigned k = 0; k < PAYLOAD_WORDS; k++) {
		if (it->payload[k] != payload_word(p, it->seq, k)) {
			snprintf(o->error, sizeof(o->error),
				 "producer %u seq %llu: payload word %u corrupt", p,
				 (unsigned long long)it->seq, k);
			return false;
		}
	}
	if (it->consumed) {
		snprintf(o->error, sizeof(o->error), "producer %u seq %llu delivered twice", p,
			 (unsigned long long)it->seq);
		return false;
	}
	it->consumed = 1;
	o->expected[p]++;
	o->received++;
	return true;
}

/*
 * Owner: what a drain does with a node it got (not NULL): 1 when consumed,
 * 0 when the queue would block (the drain stops there), -1 on error.
 */
static int drain_take(struct owner *o, struct cds_wfcq_node *node)
{
	if (node == CDS_WFCQ_WOULDBLOCK) {
		o->drain_wouldblock++;
		return 0;
	}
	return consume(o, node) ? 1 : -1;
}

/*
 * Owner: consumes a queue (the private one, or the inbox itself) with
 * __cds_wfcq_dequeue_nonblocking() until it is empty or would block.
 * Returns items consumed, -1 on error.
 */
static long drain_dequeue(struct owner *o, cds_wfcq_head_ptr_t head, struct cds_wfcq_tail *tail)
{
	long n = 0;

	for (;;) {
		struct cds_wfcq_node *node = __cds_wfcq_dequeue_nonblocking(head, tail);
		int took;

		if (node == NULL)
			return n;
		took = drain_take(o, node);
		if (took <= 0)
			return took < 0 ? -1 : n;
		n++;
	}
}

/*
 * Owner: walks the private queue with __cds_wfcq_first_nonblocking() /
 * __cds_wfcq_next_nonblocking(), resuming after o->cursor. Once the walk
 * reaches the end every node has been consumed and none is still being
 * linked (next() returned NULL only because tail == cursor), so the
 * private queue is reset. Returns items consumed, -1 on error.
 */
static long drain_iterate(struct owner *o)
{
	long n = 0;

	for (;;) {
		struct cds_wfcq_node *node =
			o->cursor ? __cds_wfcq_next_nonblocking(&o->priv_head, &o->priv_tail,
								o->cursor)
				  : __cds_wfcq_first_nonblocking(&o->priv_head, &o->priv_tail);
		int took;

		if (node == NULL) {
			if (o->cursor) {
				__cds_wfcq_init(&o->priv_head, &o->priv_tail);
				o->cursor = NULL;
			}
			return n;
		}
		took = drain_take(o, node);
		if (took <= 0)
			return took < 0 ? -1 : n;
		o->cursor = node;
		n++;
	}
}

static void run_inbox(enum drain_mode mode, unsigned nproducers)
{
	struct inbox in;
	struct producer pr[MAX_PRODUCERS];
	struct owner *o = calloc(1, sizeof(*o));
	unsigned nitems = TOTAL_ITEMS / nproducers;
	uint64_t t0, deadline;
	bool ok = true;

	assert_non_null(o);
	assert_true(nproducers >= 1 && nproducers <= MAX_PRODUCERS);
	memset(&in, 0, sizeof(in));
	cds_wfcq_init(&in.head, &in.tail);
	o->mode = mode;
	o->nproducers = nproducers;
	o->nitems = nitems;
	__cds_wfcq_init(&o->priv_head, &o->priv_tail);

	for (unsigned p = 0; p < nproducers; p++) {
		pr[p] = (struct producer){.id = p, .nitems = nitems, .inbox = &in};
		pr[p].items = calloc(nitems, sizeof(struct item));
		assert_non_null(pr[p].items);
		assert_int_equal(pthread_create(&pr[p].thread, NULL, producer_main, &pr[p]), 0);
	}
	t0 = now_ns();
	deadline = t0 + DEADLINE_NS;
	__atomic_store_n(&in.go, 1, __ATOMIC_RELEASE);

	while (o->received < (unsigned long)nitems * nproducers) {
		long got;

		if (mode != DIRECT_DEQUEUE && !cds_wfcq_empty(&in.head, &in.tail)) {
			enum cds_wfcq_ret ret = __cds_wfcq_splice_nonblocking(
				&o->priv_head, &o->priv_tail, &in.head, &in.tail);

			if (ret == CDS_WFCQ_RET_WOULDBLOCK)
				o->splice_wouldblock++;
			else if (ret != CDS_WFCQ_RET_SRC_EMPTY)
				o->splices++;
		}
		switch (mode) {
		case SPLICE_DEQUEUE:
			got = drain_dequeue(o, &o->priv_head, &o->priv_tail);
			break;
		case SPLICE_ITERATE:
			got = drain_iterate(o);
			break;
		default:
			got = drain_dequeue(o, &in.head, &in.tail);
			break;
		}
		if (got < 0) {
			ok = false;
			break;
		}
		if (got > 0)
			deadline = now_ns() + DEADLINE_NS; /* a limit on no progress */
		if (got == 0) {
			if (now_ns() > deadline) {
				snprintf(o->error, sizeof(o->error),
					 "stalled: %lu of %lu items, none for %llu s", o->received,
					 (unsigned long)nitems * nproducers,
					 (unsigned long long)(DEADLINE_NS / 1000000000ull));
				ok = false;
				break;
			}
			o->yields++;
			sched_yield(); /* would block or nothing yet: retry */
		}
	}

	/* Producers never wait for the owner, so they finish in any case. */
	for (unsigned p = 0; p < nproducers; p++)
		assert_int_equal(pthread_join(pr[p].thread, NULL), 0);
	if (!ok)
		fail_msg("%s", o->error);

	for (unsigned p = 0; p < nproducers; p++) {
		assert_int_equal(o->expected[p], nitems);
		for (unsigned s = 0; s < nitems; s++)
			assert_int_equal(pr[p].items[s].consumed, 1);
	}
	assert_true(cds_wfcq_empty(&in.head, &in.tail));
	if (mode != SPLICE_ITERATE) {
		assert_true(cds_wfcq_empty(&o->priv_head, &o->priv_tail));
	} else {
		/* The last walk may stop at the last node without resetting. */
		assert_null(o->cursor ? __cds_wfcq_next_nonblocking(&o->priv_head, &o->priv_tail,
								    o->cursor)
				      : __cds_wfcq_first_nonblocking(&o->priv_head, &o->priv_tail));
	}

	unsigned long was_empty = 0;

	for (unsigned p = 0; p < nproducers; p++)
		was_empty += pr[p].was_empty;
	print_message("%u producers x %u items, %s: %.2f s; %lu splices, "
		      "%lu splice would-block, %lu drain would-block, "
		      "%lu yields, %lu enqueues found the inbox empty\n",
		      nproducers, nitems,
		      mode == SPLICE_DEQUEUE   ? "splice+dequeue"
		      : mode == SPLICE_ITERATE ? "splice+first/next"
					       : "direct dequeue",
		      (double)(now_ns() - t0) / 1e9, o->splices, o->splice_wouldblock,
		      o->drain_wouldblock, o->yields, was_empty);

	cds_wfcq_destroy(&in.head, &in.tail);
	for (unsigned p = 0; p < nproducers; p++)
		free(pr[p].items);
	free(o);
}

static void test_splice_dequeue_4_producers(void **state)
{
	(void)state;
	run_inbox(SPLICE_DEQUEUE, 4);
}

static void test_splice_first_next_8_producers(void **state)
{
	(void)state;
	run_inbox(SPLICE_ITERATE, 8);
}

static void test_direct_dequeue_6_producers(void **state)
{
	(void)state;
	run_inbox(DIRECT_DEQUEUE, 6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_splice_dequeue_4_producers),
		cmocka_unit_test(test_splice_first_next_8_producers),
		cmocka_unit_test(test_direct_dequeue_6_producers),
	};

	return cmocka_run_group_tests_name("wfcq_tsan", tests, NULL, NULL);
}
