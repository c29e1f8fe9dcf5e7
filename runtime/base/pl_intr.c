/* pl_intr: the process's interrupt level and the relay thread that wakes its watchers (see
 * pl_intr.h). */
#include "pl_intr.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <string.h>
#include <unistd.h>

_Atomic int pl_intr__level;

static pthread_mutex_t pl__mu = PTHREAD_MUTEX_INITIALIZER; /* guards the list and `started` */
static pl_intr_watch *pl__list;
static bool pl__started;
static pid_t pl__pid; /* the process the relay runs in: a fork's child has none, and starts one */
static sem_t pl__sem; /* posted by raise and wake; initialised before the thread starts */

pl_status pl_intr_error(pl_error *err, const char *what)
{
    return pl_error_set(err, PL_EINTR, "error: interrupted while %s", what);
}

void pl_intr_raise(int level)
{
    int cur = atomic_load_explicit(&pl_intr__level, memory_order_relaxed);
    while (cur < level && !atomic_compare_exchange_weak(&pl_intr__level, &cur, level))
        ;
    pl_intr_wake();
}

void pl_intr_wake(void)
{
    /* Read without the lock (a handler may not take it): `started` is set once, after sem_init,
     * and never cleared. Before the relay exists there is nobody to wake. */
    if (__atomic_load_n(&pl__started, __ATOMIC_ACQUIRE)) sem_post(&pl__sem);
}

void pl_intr_clear(void)
{
    atomic_store_explicit(&pl_intr__level, PL_INTR_NONE, memory_order_relaxed);
}

/* The relay: one wake-up per post, every watcher called under the lock (so removal waits for a
 * call in progress). Posts that pile up while the watchers run are taken one after another: a
 * watcher only wakes a waiter, which rereads the state, so extra calls are harmless. */
static void *pl__relay(void *arg)
{
    (void)arg;
    for (;;) {
        while (sem_wait(&pl__sem) != 0 && errno == EINTR)
            ;
        pthread_mutex_lock(&pl__mu);
        for (pl_intr_watch *w = pl__list; w; w = w->next)
            w->fn(w->arg);
        pthread_mutex_unlock(&pl__mu);
    }
    return NULL;
}

pl_status pl_intr_watch_add(pl_intr_watch *w, pl_error *err)
{
    pthread_mutex_lock(&pl__mu);
    if (!pl__started || pl__pid != getpid()) {
        __atomic_store_n(&pl__started, false, __ATOMIC_RELEASE);
        pthread_t t;
        pthread_attr_t at;
        int rc = sem_init(&pl__sem, 0, 0) != 0 ? errno : pthread_attr_init(&at);
        if (rc == 0) {
            pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
            /* It calls a few short watchers: 64 KiB, not 8 MiB of address space (`ulimit -v`). */
            pthread_attr_setstacksize(&at, 64 * 1024);
            rc = pthread_create(&t, &at, pl__relay, NULL);
            pthread_attr_destroy(&at);
        }
        if (rc != 0) {
            pthread_mutex_unlock(&pl__mu);
            return pl_error_set(err, PL_ERUNTIME,
                                "error: cannot start the thread that relays interrupts: %s",
                                strerror(rc));
        }
        pl__pid = getpid();
        __atomic_store_n(&pl__started, true, __ATOMIC_RELEASE);
    }
    w->next = pl__list;
    pl__list = w;
    pthread_mutex_unlock(&pl__mu);
    /* Raised before it was added: the watcher hears of it too. */
    if (pl_intr_pending()) pl_intr_wake();
    return PL_OK;
}

void pl_intr_watch_remove(pl_intr_watch *w)
{
    pthread_mutex_lock(&pl__mu);
    for (pl_intr_watch **p = &pl__list; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    pthread_mutex_unlock(&pl__mu);
}
