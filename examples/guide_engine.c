/* SPDX-License-Identifier: MIT */
/*
 * guide_engine.c - a single-threaded engine in a program's own loop
 * (docs/guide.md, "The single-threaded engines").
 *
 * Retransmission timers for a few packets, one tick = 1 ms of
 * CLOCK_MONOTONIC: each packet's timer is embedded in it (starting it
 * allocates nothing), an ack stops it, an expiry retransmits and re-arms it
 * with twice the timeout. The loop sleeps in poll() for spoke_engine_next()
 * ticks and advances the engine by the ticks that have passed: tickless, no
 * wake-up per tick. The program checks that each expiry came at its own tick
 * and never before its time. Exit status 0 if so.
 */
#include <spoke/engine.h>

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define container_of(p, type, member) ((type *)((char *)(p)-offsetof(type, member)))
#define PACKETS			      8
#define MAX_SENDS		      3
#define FIRST_RTO_TICK		      10 /* ms */

struct packet {
	unsigned seq, sends;
	uint64_t rto_ticks, due_tick;
	struct spoke_timer rto; /* owned by the packet */
};

static uint64_t t0_ms, bad;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 - t0_ms;
}

static void send_packet(struct spoke_engine *e, struct packet *p)
{
	p->sends++;
	p->due_tick = spoke_engine_now(e) + p->rto_ticks;
	spoke_engine_start(e, &p->rto, p->rto_ticks); /* pending or not: (re)armed */
}

/* The expiry function: runs inside spoke_engine_advance, on this thread. */
static void on_rto(void *ctx, struct spoke_timer *t)
{
	struct spoke_engine *e = ctx;
	struct packet *p = container_of(t, struct packet, rto);

	if (spoke_engine_now(e) != p->due_tick || now_ms() < p->due_tick)
		bad++; /* not at its tick, or before its time */
	if (p->sends == MAX_SENDS) {
		printf("packet %u: no ack after %u sends, giving up\n", p->seq, p->sends);
		return;
	}
	p->rto_ticks *= 2; /* back off */
	send_packet(e, p);
}

int main(void)
{
	struct packet pk[PACKETS];
	struct spoke_engine *e;

	t0_ms = now_ms();
	if (spoke_engine_new(&e, "hierarchical", NULL) != 0)
		return 1;
	for (unsigned i = 0; i < PACKETS; i++) {
		pk[i] = (struct packet){.seq = i, .rto_ticks = FIRST_RTO_TICK};
		spoke_timer_init(&pk[i].rto); /* once, before the first start */
		send_packet(e, &pk[i]);
	}
	for (unsigned i = 0; i < PACKETS; i += 2)
		spoke_engine_stop(e, &pk[i].rto); /* the even packets are acked at once */

	while (spoke_engine_count(e) > 0) {
		uint64_t now = now_ms(), cur = spoke_engine_now(e), next;

		if (now > cur) /* cost: the timers and slots passed, not the ticks */
			spoke_engine_advance(e, now - cur, on_rto, e);
		next = spoke_engine_next(e); /* ticks to the next event, UINT64_MAX: none */
		if (next != UINT64_MAX)
			poll(NULL, 0, next > 60000 ? 60000 : (int)next);
	}
	spoke_engine_free(e);
	printf("guide_engine: %u packets, %llu expiries off their tick or early\n", PACKETS,
	       (unsigned long long)bad);
	return bad == 0 ? 0 : 1;
}
