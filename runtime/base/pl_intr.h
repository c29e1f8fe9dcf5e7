/* pl_intr: the process's interrupt: what a stop signal asks of the work in progress. Long host
 * work (the GPT-2 reference forward, search, gemm, tokenizing, Lua calls) reads it at its chunk
 * boundaries for the cost of one atomic load and returns PL_EINTR when it is raised, which the
 * scheduler treats as the run being interrupted at that batch. A signal handler raises it; threads
 * that sleep on a condition variable (which a handler may not signal) learn of it from watchers,
 * called on one relay thread that a semaphore (sem_post is async-signal-safe) wakes.
 *
 * Levels only go up until pl_intr_clear: PL_INTR_STOP (the first SIGINT/SIGTERM/SIGHUP of
 * `pipectl run`: no new batch starts, long stages stop at their next check, the batches in flight
 * finish), PL_INTR_ABORT (the second: the batches in flight are dropped as well; the outputs keep
 * the batches every stage finished). */
#ifndef PL_INTR_H
#define PL_INTR_H

#include <stdatomic.h>
#include <stdbool.h>

#include "pl_status.h"

enum { PL_INTR_NONE, PL_INTR_STOP, PL_INTR_ABORT };

extern _Atomic int pl_intr__level; /* pl_intr_level() reads it */

/* The level now. One relaxed atomic load: cheap enough for every row block of a loop. */
static inline int pl_intr_level(void)
{
    return atomic_load_explicit(&pl_intr__level, memory_order_relaxed);
}

/* Whether work in progress should stop (a stop or an abort is raised). */
static inline bool pl_intr_pending(void)
{
    return pl_intr_level() != PL_INTR_NONE;
}

/* What a long stage returns when pl_intr_pending() stops it: PL_EINTR with "error: interrupted
 * while <what>" ("in the GPT-2 reference forward"), as the Lua stage says "while in Lua". */
pl_status pl_intr_error(pl_error *err, const char *what);

/* Raises the level to `level` (never lowers it) and wakes the watchers. Async-signal-safe. */
void pl_intr_raise(int level);
/* Wakes the watchers without raising the level: a run's own stop flag (pl_run_cfg.stop) changed.
 * Async-signal-safe. */
void pl_intr_wake(void);
/* Back to PL_INTR_NONE (before a run, after one that was interrupted). */
void pl_intr_clear(void);

/* A watcher: fn(arg) is called on the relay thread after every raise or wake while it is added.
 * fn may take the caller's locks, so pl_intr_watch_add and _remove must not be called with a lock
 * fn takes. Owned by the caller, which keeps it alive until pl_intr_watch_remove returned. */
typedef struct pl_intr_watch {
    void (*fn)(void *arg);
    void *arg;
    struct pl_intr_watch *next; /* the list's */
} pl_intr_watch;

/* Adds w (starting the relay thread on first use; it then stays, asleep in sem_wait).
 * PL_ERUNTIME when the thread cannot start (w is not added): the caller then wakes on a timer to
 * look at the level, as it cannot be told. */
pl_status pl_intr_watch_add(pl_intr_watch *w, pl_error *err);
/* Removes w; after it returns, w->fn is not running and is not called again. Safe on a watcher
 * that was never added. */
void pl_intr_watch_remove(pl_intr_watch *w);

#endif
