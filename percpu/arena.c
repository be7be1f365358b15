/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * arena.c - where timer handles live, and how ids find them.
 *
 * Every thread that calls the service gets an arena of its own (found through
 * a pthread key of the instance, cached in a thread-local pair). A handle is
 * allocated from the calling thread's arena without any atomic operation:
 * from the arena's private free list, else from the handles other threads
 * returned (a liburcu wfcqueue the owner splices in one step, without
 * blocking), else from a fresh slot. A thread that frees a handle of its own
 * arena pushes it on the private list; any other thread enqueues it on the
 * arena's return queue (wait-free). So the free list needs no ABA-prone
 * lock-free pop, and the memory held is bounded by the most timers each
 * thread had live at once (plus one handle per 2^32 - 1 timers of a slot:
 * spoke_handle_release).
 *
 * An id is generation << 32 | arena << 20 | slot. A handle stores neither:
 * each arena owns one region of 2^20 slots of 64 bytes (64 MiB of address
 * space), aligned to its size, and slot k lives at base + 64 k. Slot 0 is
 * the region's one header (struct arena_region: the arena and its id bits)
 * and in no id, so a handle finds its arena by masking its address, its slot
 * by subtracting the base: one header per 2^20 handles, and a handle costs
 * its 64 bytes. The region is reserved PROT_NONE when the arena hands out
 * its first handle (a thread that only cancels never reserves one) and made
 * read/write 512 KiB at a time (SPOKE_REGION_STEP_SLOTS) as fresh slots reach
 * it, so strict overcommit charges only what the steps cover and pages are
 * resident only once written. The region stays mapped until spoke_destroy,
 * so memory is type-stable: a stale id always resolves to a handle, whose
 * generation then tells it apart; whole steps no handle uses can give their
 * pages back (arena_trim, below), and read as zeros meanwhile. Lookups read only slots below the
 * published read/write limit (`ready`), never a PROT_NONE page; a slot there
 * that was never handed out still has the zero word of a fresh mapping,
 * generation 0, which no id carries.
 *
 * A thread that needs more than the 2^20 - 1 handles of an arena chains
 * further arenas ("spills") to its first one (its "home"), so one thread may
 * hold any number of live timers. When a thread exits, its home (with its
 * spills) is orphaned and the next new thread adopts it whole, so a spill
 * always belongs to its home and "is this handle from my arenas" is one
 * immutable pointer compare. At most 4096 arenas per instance.
 */
#define _GNU_SOURCE
#include "guard.h"
#include "protocol.h"
#include "service.h"
#include "test_hooks.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

_Thread_local struct spoke_tls_arena spoke_tls_arena;

#define REGION_STEP_BYTES ((size_t)SPOKE_REGION_STEP_SLOTS * SPOKE_SLOT_BYTES)

/*
 * A region's address range, PROT_NONE (no commit charge, no pages), aligned
 * to its size. Only the 64 MiB that are kept are ever mapped, so a process
 * under an address-space limit (RLIMIT_AS) pays 64 MiB per thread, not
 * twice that for a moment: the kernel's choice is kept if it happens to be
 * aligned; else the aligned ranges just below it (where a top-down mmap
 * leaves room) are asked for with MAP_FIXED_NOREPLACE, which never takes a
 * range that is in use; only if those are taken does it map one size larger
 * and unmap the unaligned ends. No transparent huge pages: under THP
 * "always" a 2 MiB-aligned range would be faulted in, or collapsed by
 * khugepaged, as a whole huge page, so a thread with a few timers would
 * hold 2 MiB and the bytes per timer would grow in 2 MiB steps. Without
 * them a page comes in when its first handle is written.
 */
#define REGION_TRIES 4

static char *region_map(void *at, size_t bytes, int flags)
{
	char *p = mmap(at, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static char *region_aligned_near(void)
{
	char *p = region_map(NULL, SPOKE_REGION_BYTES, 0);
	uintptr_t below;

	if (!p || (uintptr_t)p % SPOKE_REGION_BYTES == 0)
		return p;
	(void)munmap(p, SPOKE_REGION_BYTES);
	below = (uintptr_t)p - (uintptr_t)p % SPOKE_REGION_BYTES;
	for (unsigned i = 0; i < REGION_TRIES && below >= i * SPOKE_REGION_BYTES; i++) {
		void *at = (void *)(below - i * SPOKE_REGION_BYTES);
		char *q = region_map(at, SPOKE_REGION_BYTES, MAP_FIXED_NOREPLACE);

		if (q == at)
			return q;
		if (q) /* a kernel older than 4.17 took it as a hint */
			(void)munmap(q, SPOKE_REGION_BYTES);
	}
	return NULL;
}

static char *region_reserve(void)
{
	char *p = region_aligned_near();
	size_t head;

	if (!p) {
		p = region_map(NULL, 2 * SPOKE_REGION_BYTES, 0);
		if (!p)
			return NULL;
		head = (SPOKE_REGION_BYTES - (uintptr_t)p % SPOKE_REGION_BYTES) %
		       SPOKE_REGION_BYTES;
		if (head)
			(void)munmap(p, head);
		(void)munmap(p + head + SPOKE_REGION_BYTES, SPOKE_REGION_BYTES - head);
		p += head;
	}
	(void)madvise(p, SPOKE_REGION_BYTES, MADV_NOHUGEPAGE);
	return p;
}

/*
 * Owner: make a's next step of slots read/write, reserving the region (and
 * writing its header) first if a has none. false: a is full (the caller
 * spills), or no memory. The step's slots are not written: a fresh mapping's
 * zero state word is generation 0, which no id matches.
 */
static bool region_grow(struct arena *a)
{
	size_t ready = atomic_load_explicit(&a->ready, memory_order_relaxed);
	char *base = a->base;

	if (ready >= SPOKE_ARENA_SLOTS)
		return false;
	if (!base && !(base = region_reserve()))
		return false;
	if (mprotect(base + ready * SPOKE_SLOT_BYTES, REGION_STEP_BYTES, PROT_READ | PROT_WRITE) !=
	    0) {
		if (!a->base)
			(void)munmap(base, SPOKE_REGION_BYTES);
		return false;
	}
	if (!a->base) {
		struct arena_region *r = (struct arena_region *)(void *)base;

		r->arena = a;
		r->slot_id_base = (uint32_t)a->index << SPOKE_ARENA_SHIFT;
		a->base = base;
		a->fresh = 1; /* slot 0 is the header's */
	}
	atomic_store_explicit(&a->ready, ready + SPOKE_REGION_STEP_SLOTS, memory_order_release);
	a->grown_ns = spoke_clock_ns();
	return true;
}

/*
 * Owner: put a freed handle on the list it may be taken from again: a
 * periodic timer's second slot only ever serves as one (struct
 * spoke_periodic in service.h says why), every other handle as any.
 */
static void free_list_push(struct arena *a, struct spoke_handle *h)
{
	uint64_t st = atomic_load_explicit(&h->state, memory_order_relaxed);
	struct spoke_handle **list =
		spoke_st_status(st) == SPOKE_ST_AUX_FREE ? &a->aux_list : &a->free_list;

	h->qnode.next = (struct cds_wfcq_node *)*list;
	*list = h;
}

/*
 * Giving memory back. A shard that was stalled or outrun leaves its
 * senders' arenas with as many handles as its backlog held (up to its
 * inbox_limit), all free once it has caught up. They come back to each
 * sender on its return queue, and the sender takes them all at once when
 * its free list has run dry (take_returned): at that moment its free list
 * holds every free handle of the arena, so a step (512 KiB) all of whose
 * slots are on it is in use by no one, and arena_trim gives its pages back
 * to the kernel (MADV_DONTNEED: the step stays mapped read/write, and reads
 * as zeros until written). Its slots leave the free list, and are handed
 * out again (arena_refill) before the region grows by another step. A slot's
 * generation must not start over (an old id would name its next timer), so
 * a trimmed step remembers the highest generation on it: its slots start
 * there, past every id they were given. Meanwhile a lookup reads a zero
 * word (generation 0, in no id). Step 0 holds the region's header and is
 * never trimmed; nor is a step with a periodic timer's second slot (its
 * free second slots are on aux_list, not the free list), which keeps the
 * rule that such a slot stays one. Only memory beyond what the thread
 * needs is given back: it used at least the handles the last take left on
 * its free list (last_taken: the list has run dry since), and a trim keeps
 * that many free, giving back only whole steps beyond them, two at least
 * (a thread that keeps going at a steady rate takes back each time about
 * what it used since, and keeps it all). And only memory the arena has not
 * grown into lately is given back
 * (the last step it took, fresh or trimmed, is TRIM_AFTER_NS old): a
 * thread that takes its handles back right after a burst is likely to
 * need them again at once, and would pay a page fault per 64 handles to
 * get them back (a burst, a drain, and the same burst again: spoke-bench's
 * cross-start row is that); a backlog that built up while a shard was
 * stalled is given back once the sender's free handles next run dry after
 * that, two seconds after the backlog stopped growing at the earliest.
 */
#define TRIM_MIN_HANDLES (2 * SPOKE_REGION_STEP_SLOTS)
#define TRIM_AFTER_NS	 (2 * 1000000000ull)

static unsigned step_of(const struct arena *a, const struct spoke_handle *h)
{
	return (unsigned)(((const char *)h - a->base) / SPOKE_SLOT_BYTES / SPOKE_REGION_STEP_SLOTS);
}

/*
 * Owner, right after take_returned refilled an empty free list: give back
 * every step whose slots are all on it. Out of line, as arena_refill: rare,
 * and with its counts on the stack it would weigh on every slow allocation.
 */
static __attribute__((noinline)) size_t arena_trim(struct arena *a, size_t n)
{
	uint16_t free_on_step[SPOKE_REGION_STEPS] = {0};
	size_t spare = n > a->last_taken ? (n - a->last_taken) / SPOKE_REGION_STEP_SLOTS : 0;
	struct spoke_handle *h, **link;
	size_t trimmed = 0;

	for (h = a->free_list; h; h = (struct spoke_handle *)h->qnode.next)
		free_on_step[step_of(a, h)]++;
	/* Mark the steps to give back (UINT16_MAX), spare of them at most. */
	for (unsigned k = 1; k < SPOKE_REGION_STEPS && trimmed < spare; k++) {
		if (free_on_step[k] != SPOKE_REGION_STEP_SLOTS)
			continue;
		free_on_step[k] = UINT16_MAX;
		a->trimmed_gen[k] = 1;
		trimmed++;
	}
	if (!trimmed)
		return 0;
	for (link = &a->free_list; (h = *link) != NULL;) {
		unsigned k = step_of(a, h);
		uint32_t gen = spoke_st_gen(atomic_load_explicit(&h->state, memory_order_relaxed));

		if (free_on_step[k] != UINT16_MAX) {
			link = (struct spoke_handle **)&h->qnode.next;
			continue;
		}
		*link = (struct spoke_handle *)h->qnode.next;
		if (gen > a->trimmed_gen[k])
			a->trimmed_gen[k] = gen;
	}
	for (unsigned k = 1; k < SPOKE_REGION_STEPS; k++) {
		if (free_on_step[k] != UINT16_MAX)
			continue;
		(void)madvise(a->base + (size_t)k * REGION_STEP_BYTES, REGION_STEP_BYTES,
			      MADV_DONTNEED);
		a->trimmed[k / 64] |= UINT64_C(1) << (k % 64);
	}
	return trimmed * SPOKE_REGION_STEP_SLOTS;
}

/*
 * Take back what other threads returned (owner only, never blocks): splice
 * the return queue onto the private `taken` queue, then move what is fully
 * linked onto the free list, and trim. A node a preempted producer has not
 * linked yet stays on `taken` for the next time.
 */
static void take_returned(struct arena *a)
{
	struct cds_wfcq_node *n;
	size_t taken = 0;

	if (!cds_wfcq_empty(&a->ret_head, &a->ret_tail))
		(void)__cds_wfcq_splice_nonblocking(&a->taken_head, &a->taken_tail, &a->ret_head,
						    &a->ret_tail);
	while ((n = __cds_wfcq_dequeue_nonblocking(&a->taken_head, &a->taken_tail)) != NULL &&
	       n != CDS_WFCQ_WOULDBLOCK) {
		free_list_push(a, caa_container_of(n, struct spoke_handle, qnode));
		taken++;
	}
	if (taken >= TRIM_MIN_HANDLES + a->last_taken &&
	    spoke_clock_ns() - a->grown_ns >= TRIM_AFTER_NS)
		taken -= arena_trim(a, taken);
	a->last_taken = taken;
}

/* Owner: has a a trimmed step whose slots it has not begun to hand out again? */
static bool arena_any_trimmed(const struct arena *a)
{
	uint64_t any = 0;

	for (unsigned w = 0; w < SPOKE_REGION_STEPS / 64; w++)
		any |= a->trimmed[w];
	return any != 0;
}

/* Owner, a trimmed step to hand out (refill, or one in trimmed): its next slot, FREE. */
static __attribute__((noinline)) struct spoke_handle *arena_refill(struct arena *a)
{
	struct spoke_handle *h;

	if (a->refill == a->refill_end) { /* begin the lowest trimmed step */
		unsigned w = 0, k;

		while (!a->trimmed[w])
			w++;
		k = w * 64 + (unsigned)__builtin_ctzll(a->trimmed[w]);
		a->trimmed[w] &= a->trimmed[w] - 1;
		a->refill = (size_t)k * SPOKE_REGION_STEP_SLOTS;
		a->refill_end = a->refill + SPOKE_REGION_STEP_SLOTS;
		a->refill_gen = a->trimmed_gen[k];
		a->grown_ns = spoke_clock_ns();
	}
	h = spoke_arena_slot(a, a->refill++);
	starter_init_fresh(h, a->refill_gen);
	return h;
}

/*
 * Owner: a handle from a's free list, or what other threads returned, or a
 * slot no timer uses: the next fresh slot of those made read/write, else a
 * trimmed step's (before the region grows by a step); NULL: none left, or
 * no memory.
 */
static struct spoke_handle *arena_take(struct arena *a)
{
	struct spoke_handle *h = spoke_arena_pop_free(a);

	if (!h) {
		take_returned(a);
		h = spoke_arena_pop_free(a);
	}
	if (h)
		return h;
	if (a->fresh >= atomic_load_explicit(&a->ready, memory_order_relaxed)) {
		if (a->refill < a->refill_end || arena_any_trimmed(a))
			return arena_refill(a);
		if (!region_grow(a))
			return NULL;
	}
	h = spoke_arena_slot(a, a->fresh++);
	starter_init_fresh(h, 1);
	return h;
}

/* Has a handed out every slot it has? (Only its free lists can give more.) */
static bool arena_full(const struct arena *a)
{
	return a->fresh >= SPOKE_ARENA_SLOTS && a->refill == a->refill_end && !arena_any_trimmed(a);
}

static struct arena *arena_new(struct spoke *s, struct arena *home);

/*
 * spoke_handle_alloc (service.h) once home's free list is empty: a handle
 * from the calling thread's arenas (home is its home arena); NULL: -ENOMEM.
 * Only the last arena of the chain can have fresh slots left, so a spill is
 * added when that one is full, never because memory ran out (an arena per
 * failed start would use up the 4096).
 */
struct spoke_handle *spoke_handle_alloc_slow(struct arena *home)
{
	struct arena *a = home;

	for (;;) {
		struct spoke_handle *h = arena_take(a);

		if (h)
			return h;
		if (!arena_full(a))
			return NULL;
		if (!a->spill) {
			a->spill = arena_new(home->s, home);
			if (!a->spill)
				return NULL;
		}
		a = a->spill;
	}
}

/*
 * Give a handle back to its arena. The caller has already moved its state to
 * FREE (new generation) and guarantees the queue node is in no queue. A
 * handle whose generations are used up (state.h) stays out of every list,
 * one handle lost per 2^32 - 1 timers of its slot, so that an id kept for
 * hours can never name a new timer.
 */
static void handle_return(struct spoke *s, struct spoke_handle *h)
{
	struct arena *a;

	if (spoke_st_gen(atomic_load_explicit(&h->state, memory_order_relaxed)) == 0)
		return;
	a = spoke_region_of(h)->arena;
	if (spoke_tls_arena.serial == s->serial && spoke_tls_arena.arena == a->home) {
		free_list_push(a, h);
		return;
	}
	cds_wfcq_node_init(&h->qnode);
	cds_wfcq_enqueue(&a->ret_head, &a->ret_tail, &h->qnode);
}

/*
 * End of a timer whose last word was old (its kind): give back its handle
 * and, for a periodic timer, its SPOKE_ST_AUX slot, found before h can be
 * taken again.
 */
void spoke_handle_release(struct spoke *s, struct spoke_handle *h, uint64_t old)
{
	struct spoke_handle *aux = spoke_st_kind(old) == SPOKE_KIND_PERIODIC ? h->arg : NULL;

	handle_return(s, h);
	if (aux) {
		retirer_free_aux(aux);
		handle_return(s, aux);
	}
}

/*
 * A periodic timer's second slot, from the caller's arenas (home): one that
 * served as a second slot before if any is free, else any handle; NULL:
 * -ENOMEM. Second slots returned by other threads reach aux_list when
 * take_returned next runs (when a free list runs dry), so the slots kept
 * as second slots are bounded by the most periodic timers the thread had
 * at once, plus those returned meanwhile.
 */
struct spoke_handle *spoke_handle_alloc_aux(struct arena *home)
{
	struct spoke_handle *aux = NULL;

	for (struct arena *a = home; a && !aux; a = a->spill)
		aux = spoke_handle_list_pop(&a->aux_list);
	if (!aux)
		aux = spoke_handle_alloc(home);
	if (aux)
		starter_mark_aux(aux);
	return aux;
}

/*
 * A thread's token: the address of its own thread-local byte, unique among
 * live threads. An arena's `owner` holds its user's token, so a thread can
 * tell its own arena from another arena that has come to live at the same
 * address (below, arena_thread_exit).
 */
static _Thread_local char thread_token_byte;

static uintptr_t thread_token(void)
{
	return (uintptr_t)&thread_token_byte;
}

/* The calling thread gives up a, its home arena (no-op if a is not its own). */
static void arena_orphan(struct arena *a)
{
	uintptr_t me = thread_token();

	(void)atomic_compare_exchange_strong_explicit(&a->owner, &me, 0, memory_order_release,
						      memory_order_relaxed);
	/* A later call of this thread (another key's destructor) must not use it. */
	if (spoke_tls_arena.arena == a)
		spoke_tls_arena.serial = 0;
}

/* A new arena, registered under the next index; home NULL makes it a home. */
static struct arena *arena_new(struct spoke *s, struct arena *home)
{
	struct arena *a = spoke_zalloc_lines(1, sizeof(*a));

	if (!a)
		return NULL;
	a->s = s;
	a->home = home ? home : a;
	atomic_init(&a->owner, thread_token());
	cds_wfcq_init(&a->ret_head, &a->ret_tail);
	cds_wfcq_init(&a->taken_head, &a->taken_tail);
	for (;;) {
		unsigned idx = atomic_load_explicit(&s->narenas, memory_order_relaxed);

		if (idx >= SPOKE_ARENAS) {
			cds_wfcq_destroy(&a->ret_head, &a->ret_tail);
			cds_wfcq_destroy(&a->taken_head, &a->taken_tail);
			free(a);
			return NULL;
		}
		if (atomic_compare_exchange_weak_explicit(&s->narenas, &idx, idx + 1,
							  memory_order_acq_rel,
							  memory_order_relaxed)) {
			a->index = idx;
			atomic_store_explicit(&s->arenas[idx], a, memory_order_release);
			return a;
		}
	}
}

/* A home arena for a new thread: an orphaned one (with its spills), or a new one. */
static struct arena *arena_adopt_or_create(struct spoke *s)
{
	unsigned n = atomic_load_explicit(&s->narenas, memory_order_acquire);

	for (unsigned i = 0; i < n; i++) {
		struct arena *a = atomic_load_explicit(&s->arenas[i], memory_order_acquire);
		uintptr_t expect = 0;

		if (a && a->home == a &&
		    atomic_compare_exchange_strong_explicit(&a->owner, &expect, thread_token(),
							    memory_order_acq_rel,
							    memory_order_relaxed))
			return a; /* with the exited owner's free lists, slots and spills */
	}
	return arena_new(s, NULL);
}

/*
 * Thread exit against spoke_destroy. A key destructor may already be running
 * when destroy deletes the key (pthread_key_delete does not wait for it), and
 * it is handed a pointer into the instance. So every instance whose key
 * exists is on a list under one process-wide mutex: the destructor touches its
 * arena only while the arena belongs to an instance on the list, holding the
 * mutex throughout, and destroy takes the instance off (and deletes the key)
 * under the same mutex before it frees anything. Only thread exits and
 * create/destroy take it, never a timer operation.
 */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct spoke *live_first;

/*
 * fork() copies live_lock and the list as they are. The child has none of
 * the threads: the lock may be held by one of them, and the instances on
 * the list can never be used there (api.md), so the child starts with a
 * fresh lock and an empty list. A child handler only: a prepare handler
 * that took the lock would order it before any lock of the application's
 * own prepare handlers, and a handler registered twice (a fork inside the
 * pthread_once below makes the child run it again) would take it twice.
 * This one can run twice. If pthread_atfork fails (ENOMEM), a child's
 * spoke_create may wait for ever on a lock held at the fork.
 */
static void live_lock_reset_in_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

	/*
	 * The parent's instances are unusable here: every call on them says
	 * -ESHUTDOWN, and their destroy frees without waiting (api_lifecycle.c). The
	 * list's links are whole at any moment (one store inserts or
	 * removes), so walking it is safe even if its lock was held.
	 */
	for (struct spoke *s = live_first; s; s = s->live_next) {
		atomic_store_explicit(&s->stopping, 1, memory_order_relaxed);
		s->forked = true;
	}
	live_lock = fresh;
	live_first = NULL;
}

static void live_lock_guard_fork(void)
{
	(void)pthread_atfork(NULL, NULL, live_lock_reset_in_child);
}

/*
 * Under live_lock: is a an arena of an instance whose key still exists, and
 * the calling thread's own? The destructor's pointer alone does not say: its
 * instance may have been destroyed (freeing a) before the destructor took
 * the lock, and a new instance may since have allocated another thread's
 * arena at the same address.
 */
static bool arena_live_and_mine(const struct arena *a)
{
	for (struct spoke *s = live_first; s; s = s->live_next) {
		unsigned n = atomic_load_explicit(&s->narenas, memory_order_acquire);

		for (unsigned i = 0; i < n; i++)
			if (atomic_load_explicit(&s->arenas[i], memory_order_acquire) == a)
				return atomic_load_explicit(&a->owner, memory_order_relaxed) ==
				       thread_token(); /* only now is a known to be allocated */
	}
	return false;
}

/* Key destructor: the thread exits; its shard (if attached) and arena are handed on. */
static void arena_thread_exit(void *p)
{
	SPOKE_HOOK(SPOKE_HOOK_THREAD_EXIT_BEGIN);
	pthread_mutex_lock(&live_lock);
	if (arena_live_and_mine(p)) {
		SPOKE_HOOK(SPOKE_HOOK_THREAD_EXIT);
		((struct arena *)p)->s->thread_exit_hook(p);
		arena_orphan(p);
	}
	pthread_mutex_unlock(&live_lock);
}

/* Is the instance with this serial alive (created, not yet being freed)? Takes the lock. */
bool spoke_instance_live(uint64_t serial)
{
	bool live = false;

	pthread_mutex_lock(&live_lock);
	for (struct spoke *s = live_first; s && !live; s = s->live_next)
		live = s->serial == serial;
	pthread_mutex_unlock(&live_lock);
	return live;
}

/*
 * Create the instance's thread key: a thread's exit hands its arena on,
 * after calling on_exit(its home arena) under the arena lock (api_attach.c hands
 * on the shard the thread is attached to).
 */
int spoke_arena_key_create(struct spoke *s, void (*on_exit)(struct arena *home))
{
	static pthread_once_t fork_guarded = PTHREAD_ONCE_INIT;

	s->thread_exit_hook = on_exit;
	(void)pthread_once(&fork_guarded, live_lock_guard_fork);
	if (pthread_key_create(&s->arena_key, arena_thread_exit) != 0)
		return -EAGAIN;
	pthread_mutex_lock(&live_lock);
	s->live_next = live_first;
	live_first = s;
	pthread_mutex_unlock(&live_lock);
	return 0;
}

/* Delete the key; from then on no exiting thread touches this instance's arenas. */
void spoke_arena_key_delete(struct spoke *s)
{
	struct spoke **link;

	pthread_mutex_lock(&live_lock);
	/* Not on the list in a fork child, which starts with an empty one. */
	for (link = &live_first; *link && *link != s; link = &(*link)->live_next)
		;
	if (*link)
		*link = s->live_next;
	pthread_key_delete(s->arena_key);
	pthread_mutex_unlock(&live_lock);
}

/* The calling thread's home arena for s, found or made: its first call on s. */
static struct arena *arena_mine_slow(struct spoke *s)
{
	struct arena *a = pthread_getspecific(s->arena_key);

	if (!a) {
		a = arena_adopt_or_create(s);
		if (!a)
			return NULL;
		if (pthread_setspecific(s->arena_key, a) != 0) {
			arena_orphan(a);
			return NULL;
		}
	}
	spoke_tls_arena.serial = s->serial;
	spoke_tls_arena.arena = a;
	return a;
}

/* Is a call counted in any home arena? */
static bool arenas_busy(struct spoke *s)
{
	unsigned n = atomic_load_explicit(&s->narenas, memory_order_acquire);

	for (unsigned i = 0; i < n; i++) {
		struct arena *a = atomic_load_explicit(&s->arenas[i], memory_order_acquire);

		if (a && a->home == a &&
		    atomic_load_explicit(&a->in_call, memory_order_acquire) != 0)
			return true;
	}
	return false;
}

/*
 * guard.h: a thread's first call on s, which has no arena to count itself
 * in yet: counted in `entering` while it finds or makes one. The locked add
 * and destroy's store of `stopping` are both seq_cst, so either this sees
 * `stopping` or destroy's drain sees the count.
 */
int spoke_call_first(struct spoke *s, struct arena **out)
{
	struct arena *a = NULL;
	int err = -ESHUTDOWN;

	atomic_fetch_add_explicit(&s->entering, 1, memory_order_seq_cst);
	if (!atomic_load_explicit(&s->stopping, memory_order_seq_cst)) {
		a = arena_mine_slow(s);
		err = a ? 0 : -EAGAIN;
	}
	atomic_fetch_sub_explicit(&s->entering, 1, memory_order_release);
	*out = a;
	return err;
}

/* Is any thread inside an API call (or its first call's arena lookup)? */
static bool calls_in_progress(struct spoke *s)
{
	return atomic_load_explicit(&s->entering, memory_order_acquire) != 0 || arenas_busy(s);
}

/*
 * guard.h: destroy, `stopping` stored: every thread's count stored before
 * its look at `stopping` is visible after the heavy fence; wait for those
 * calls to end. A call that counts itself later sees `stopping` and leaves.
 */
void spoke_calls_drain(struct spoke *s)
{
	const struct timespec pause = {0, 100000};

	spoke_heavy_fence(s);
	while (calls_in_progress(s))
		nanosleep(&pause, NULL);
}

void spoke_arenas_free(struct spoke *s)
{
	unsigned n = atomic_load_explicit(&s->narenas, memory_order_acquire);

	for (unsigned i = 0; i < n; i++) {
		struct arena *a = atomic_load_explicit(&s->arenas[i], memory_order_acquire);

		if (!a)
			continue;
		/*
		 * Read-from the release store of a thread that exited before
		 * destroy (arena_orphan), so that store happens before the free.
		 * destroy deleted the key under the arena lock first: a
		 * destructor either finished before that or leaves it alone.
		 */
		(void)atomic_load_explicit(&a->owner, memory_order_acquire);
		if (a->base)
			(void)munmap(a->base, SPOKE_REGION_BYTES);
		cds_wfcq_destroy(&a->ret_head, &a->ret_tail);
		cds_wfcq_destroy(&a->taken_head, &a->taken_tail);
		free(a);
	}
	if (spoke_tls_arena.serial == s->serial)
		spoke_tls_arena.serial = 0;
}

/*
 * Any thread inside a call: fn(h, word, ctx) for every handle of s whose
 * word, read once, is a timer's (not FREE, not a periodic timer's second
 * slot, in use or freed). Only slots below each arena's published `ready` are read; the
 * words are read as they are, while other threads change them.
 */
void spoke_arenas_each(struct spoke *s, void (*fn)(struct spoke_handle *h, uint64_t st, void *ctx),
		       void *ctx)
{
	unsigned n = atomic_load_explicit(&s->narenas, memory_order_acquire);

	for (unsigned i = 0; i < n; i++) {
		struct arena *a = atomic_load_explicit(&s->arenas[i], memory_order_acquire);
		size_t ready = a ? atomic_load_explicit(&a->ready, memory_order_acquire) : 0;

		for (size_t k = 1; k < ready; k++) { /* slot 0: the region's header */
			struct spoke_handle *h = spoke_arena_slot(a, k);
			uint64_t st = atomic_load_explicit(&h->state, memory_order_acquire);

			if (spoke_st_status(st) != SPOKE_ST_FREE &&
			    spoke_st_status(st) != SPOKE_ST_AUX &&
			    spoke_st_status(st) != SPOKE_ST_AUX_FREE)
				fn(h, st, ctx);
		}
	}
}

/* Any thread inside a call: the places threads have taken in shard k's inbox and not used. */
uint64_t spoke_arenas_places(struct spoke *s, unsigned k)
{
	unsigned n = atomic_load_explicit(&s->narenas, memory_order_acquire);
	uint64_t places = 0;

	for (unsigned i = 0; i < n; i++) {
		struct arena *a = atomic_load_explicit(&s->arenas[i], memory_order_acquire);

		if (a && a->home == a)
			places += atomic_load_explicit(&a->inbox_places[k], memory_order_relaxed);
	}
	return places;
}

static void release_if_pending(struct spoke_handle *h, uint64_t st, void *release)
{
	unsigned status = spoke_st_status(st);

	if (status != SPOKE_ST_ARMED && status != SPOKE_ST_DISPATCHED)
		return;
	((spoke_fn *)release)(spoke_st_kind(st) == SPOKE_KIND_PERIODIC ? spoke_periodic_of(h)->arg
								       : h->arg);
}

/*
 * spoke_destroy_release: every timer that will never run now (armed, or due
 * and not started) hands its argument to release, once; a periodic timer's
 * second slot (SPOKE_ST_AUX) is no timer. Every spoke thread has stopped.
 */
void spoke_arenas_release_pending(struct spoke *s, spoke_fn *release)
{
	spoke_arenas_each(s, release_if_pending, (void *)release);
}
