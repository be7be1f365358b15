/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * peers_kernel.c - the kernel's timers among the peers, each with a real
 * notification, on CLOCK_MONOTONIC. Time in ns: one tick = the setup's
 * tick_ns (1 ms in W1 and W3, where nothing fires; W2 runs in real time
 * with the short tick bench_peers.c gives it).
 *
 *   timerfd      one timerfd per timer (TFD_NONBLOCK), all registered with
 *                one epoll instance at open (EPOLLIN, data = slot). start =
 *                timerfd_settime(relative), stop = timerfd_settime(0).
 *                drain: epoll_wait (up to 256 ready fds; with `wait`, up to
 *                PEER_WAIT_NS) and one read() of each ready fd. reset =
 *                timerfd_settime(relative) of the armed timer. Cap: one
 *                file descriptor per timer, RLIMIT_NOFILE (the bench raises
 *                its soft limit to the hard one first).
 *   posix-timer  timer_create(CLOCK_MONOTONIC, SIGEV_SIGNAL, SIGRTMIN,
 *                sival_int = slot) per timer: a real-time signal, so every
 *                expiry is queued on its own; the signal is blocked and
 *                read through a signalfd (up to 64 siginfo per read()).
 *                start = timer_settime(relative), stop = timer_settime(0),
 *                reset = timer_settime(relative) of the armed timer.
 *                Cap: each timer preallocates its queued signal, counted
 *                against RLIMIT_SIGPENDING (per user; the bench raises the
 *                soft limit to the hard one): timer_create fails with EAGAIN.
 *
 * Their memory is mostly in the kernel (struct file, dentry, epoll item,
 * timerfd context; k_itimer and sigqueue), which RSS does not see: W3
 * adds the growth of the system-wide Slab figure of /proc/meminfo, which
 * other processes move too (noisy at small N).
 */
#define _GNU_SOURCE
#include "peers.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define TIMERFD_BATCH 256
#define SIGINFO_BATCH 64

/* Both kinds' start and stop: set one timer to its (relative, one-shot) time; 0 or -errno. */
typedef int arm_fn(struct peer *p, size_t i, const struct itimerspec *its);

static const struct itimerspec disarm;

/* Arm slot i to expire delay_ticks from now. */
static int arm_after(struct peer *p, size_t i, uint64_t delay_ticks, arm_fn *arm)
{
	uint64_t ns = delay_ticks * p->tick_ns;
	struct itimerspec its = {.it_value = {(time_t)(ns / NS_PER_S), (long)(ns % NS_PER_S)}};

	return arm(p, i, &its);
}

/* "RLIMIT_NOFILE 20000" */
static unsigned long soft_limit(int resource)
{
	struct rlimit rl;

	return getrlimit(resource, &rl) == 0 ? (unsigned long)rl.rlim_cur : 0;
}

/* ---- timerfd ----------------------------------------------------------- */

struct timerfd_peer {
	struct peer p; /* slots: int, the timerfds */
	int epfd;
	size_t nfds; /* created */
};

static struct timerfd_peer *to_timerfd(struct peer *p)
{
	return (struct timerfd_peer *)p;
}

static int *timerfd_fds(struct peer *p)
{
	return p->slots;
}

static void timerfd_close(struct peer *p)
{
	struct timerfd_peer *tp = to_timerfd(p);

	for (size_t i = 0; i < tp->nfds; i++)
		close(timerfd_fds(p)[i]);
	if (tp->epfd >= 0)
		close(tp->epfd);
	peer_free(p);
}

static int timerfd_open(struct peer **pp, const struct peer_ops *ops, const struct peer_setup *ps,
			struct bench_sample *out)
{
	struct timerfd_peer *tp = peer_new(sizeof(*tp), sizeof(int), ops, ps, out);
	int err;

	if (!tp)
		return -ENOMEM;
	tp->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (tp->epfd < 0) {
		err = -errno;
		timerfd_close(&tp->p);
		return bench_fail(out, err, "epoll_create1: %s", strerror(-err));
	}
	for (; tp->nfds < ps->ntimers; tp->nfds++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tp->nfds};
		int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);

		if (fd < 0) {
			err = errno;
			timerfd_close(&tp->p);
			if (err == EMFILE || err == ENFILE)
				return bench_fail(out, PEER_CAP,
						  "timerfd_create failed (%s) after %zu timers; "
						  "one fd per timer, RLIMIT_NOFILE %lu",
						  strerror(err), tp->nfds,
						  soft_limit(RLIMIT_NOFILE));
			return bench_fail(out, -err, "timerfd_create: %s", strerror(err));
		}
		timerfd_fds(&tp->p)[tp->nfds] = fd;
		if (epoll_ctl(tp->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
			err = errno;
			tp->nfds++;
			timerfd_close(&tp->p);
			if (err == ENOSPC)
				return bench_fail(out, PEER_CAP,
						  "epoll_ctl failed (ENOSPC) after %zu timers "
						  "(fs.epoll.max_user_watches)",
						  tp->nfds);
			return bench_fail(out, -err, "epoll_ctl: %s", strerror(err));
		}
	}
	*pp = &tp->p;
	return 0;
}

static int timerfd_arm(struct peer *p, size_t i, const struct itimerspec *its)
{
	return timerfd_settime(timerfd_fds(p)[i], 0, its, NULL) == 0 ? 0 : -errno;
}

static int timerfd_start(struct peer *p, size_t i, uint64_t delay_ticks)
{
	return arm_after(p, i, delay_ticks, timerfd_arm);
}

static int timerfd_stop(struct peer *p, size_t i)
{
	return timerfd_arm(p, i, &disarm);
}

static int timerfd_drain(struct peer *p, bool wait)
{
	struct timerfd_peer *tp = to_timerfd(p);
	struct epoll_event evs[TIMERFD_BATCH];
	int n = epoll_wait(tp->epfd, evs, TIMERFD_BATCH,
			   wait ? (int)(PEER_WAIT_NS / NS_PER_MS) : 0);

	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int k = 0; k < n; k++) {
		uint64_t expirations;

		if (read(timerfd_fds(p)[evs[k].data.u64], &expirations, sizeof(expirations)) ==
		    (ssize_t)sizeof(expirations))
			p->fired += (size_t)expirations;
	}
	return 0;
}

const struct peer_ops peer_timerfd = {
	.name = "timerfd",
	.clock = PEER_REAL_TIME,
	.kernel = true,
	.how = "one timerfd per timer in one epoll set, timerfd_settime arm/disarm, epoll_wait + "
	       "read; W2 in real time",
	.open = timerfd_open,
	.close = timerfd_close,
	.start = timerfd_start,
	.stop = timerfd_stop,
	.reset = timerfd_start, /* re-arming an armed timerfd moves it */
	.drain = timerfd_drain,
};

/* ---- POSIX timers ------------------------------------------------------ */

struct posix_peer {
	struct peer p;	/* slots: timer_t */
	int sfd;	/* signalfd of SIGRTMIN */
	size_t ntimers; /* created */
	sigset_t old_mask;
	bool masked;
};

static struct posix_peer *to_posix(struct peer *p)
{
	return (struct posix_peer *)p;
}

static timer_t *posix_timers(struct peer *p)
{
	return p->slots;
}

static void posix_close(struct peer *p)
{
	struct posix_peer *pp = to_posix(p);

	for (size_t i = 0; i < pp->ntimers; i++)
		timer_delete(posix_timers(p)[i]);
	if (pp->sfd >= 0)
		close(pp->sfd);
	if (pp->masked) {
		struct timespec zero = {0, 0};
		sigset_t rt;

		sigemptyset(&rt);
		sigaddset(&rt, SIGRTMIN);
		while (sigtimedwait(&rt, NULL, &zero) > 0) /* queued before the deletes */
			;
		pthread_sigmask(SIG_SETMASK, &pp->old_mask, NULL);
	}
	peer_free(p);
}

static int posix_open(struct peer **out_p, const struct peer_ops *ops, const struct peer_setup *ps,
		      struct bench_sample *out)
{
	struct posix_peer *pp = peer_new(sizeof(*pp), sizeof(timer_t), ops, ps, out);
	sigset_t rt;
	int err;

	if (!pp)
		return -ENOMEM;
	sigemptyset(&rt);
	sigaddset(&rt, SIGRTMIN);
	pp->masked = pthread_sigmask(SIG_BLOCK, &rt, &pp->old_mask) == 0;
	pp->sfd = signalfd(-1, &rt, SFD_NONBLOCK | SFD_CLOEXEC);
	if (!pp->masked || pp->sfd < 0) {
		err = pp->sfd < 0 ? -errno : -EINVAL;
		posix_close(&pp->p);
		return bench_fail(out, err, "signal mask or signalfd: %s", strerror(-err));
	}
	for (; pp->ntimers < ps->ntimers; pp->ntimers++) {
		struct sigevent sev = {
			.sigev_notify = SIGEV_SIGNAL,
			.sigev_signo = SIGRTMIN,
			.sigev_value.sival_int = (int)pp->ntimers,
		};

		if (timer_create(CLOCK_MONOTONIC, &sev, &posix_timers(&pp->p)[pp->ntimers]) != 0) {
			err = errno;
			posix_close(&pp->p);
			if (err == EAGAIN)
				return bench_fail(
					out, PEER_CAP,
					"timer_create failed (EAGAIN) after %zu timers; "
					"each holds a queued signal, RLIMIT_SIGPENDING %lu "
					"per user",
					pp->ntimers, soft_limit(RLIMIT_SIGPENDING));
			return bench_fail(out, -err, "timer_create: %s", strerror(err));
		}
	}
	*out_p = &pp->p;
	return 0;
}

static int posix_arm(struct peer *p, size_t i, const struct itimerspec *its)
{
	return timer_settime(posix_timers(p)[i], 0, its, NULL) == 0 ? 0 : -errno;
}

static int posix_start(struct peer *p, size_t i, uint64_t delay_ticks)
{
	return arm_after(p, i, delay_ticks, posix_arm);
}

static int posix_stop(struct peer *p, size_t i)
{
	return posix_arm(p, i, &disarm);
}

static int posix_drain(struct peer *p, bool wait)
{
	struct posix_peer *pp = to_posix(p);
	struct signalfd_siginfo si[SIGINFO_BATCH];
	ssize_t r;

	if (wait) {
		struct pollfd pfd = {.fd = pp->sfd, .events = POLLIN};

		if (poll(&pfd, 1, (int)(PEER_WAIT_NS / NS_PER_MS)) < 0 && errno != EINTR)
			return -errno;
	}
	r = read(pp->sfd, si, sizeof(si));
	if (r < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	p->fired += (size_t)r / sizeof(si[0]);
	return 0;
}

const struct peer_ops peer_posix_timer = {
	.name = "posix-timer",
	.clock = PEER_REAL_TIME,
	.kernel = true,
	.how = "timer_create(SIGEV_SIGNAL, SIGRTMIN) per timer, timer_settime arm/disarm, "
	       "signal blocked and read from a signalfd; W2 in real time",
	.open = posix_open,
	.close = posix_close,
	.start = posix_start,
	.stop = posix_stop,
	.reset = posix_start, /* re-arming an armed timer moves it */
	.drain = posix_drain,
};
