/* pl_stubcuda: the stand-in's object registry and its exit check (pl_stubcuda.h says what is
 * checked). A hash table from handle or address to record, open addressing, never shrunk: records
 * stay after destruction so that the table can say "destroyed" rather than "unknown". */
#include "pl_stubcuda.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const pl__kind_name[PL_STUB_KIND_COUNT] = {
#define PL__STUB_NAME(id, name, owned) name,
    PL_STUB_KINDS(PL__STUB_NAME)
#undef PL__STUB_NAME
};
static const bool pl__kind_owned[PL_STUB_KIND_COUNT] = {
#define PL__STUB_OWNED(id, name, owned) owned,
    PL_STUB_KINDS(PL__STUB_OWNED)
#undef PL__STUB_OWNED
};

/* The first misuses, kept for the exit report (each is also printed when it happens). */
#define PL__MISUSE_KEEP 16

static struct {
    pthread_mutex_t mu;
    pl_stub_obj **slot; /* the table: cap entries, NULL when empty */
    size_t cap, used;
    pl_stub_obj *all;
    uint64_t seq;
    long made[PL_STUB_KIND_COUNT], destroyed[PL_STUB_KIND_COUNT];
    long misuses;
    char misuse[PL__MISUSE_KEEP][256];
} pl__reg = {.mu = PTHREAD_MUTEX_INITIALIZER};

void pl_stubcuda_lock(void)
{
    pthread_mutex_lock(&pl__reg.mu);
}

void pl_stubcuda_unlock(void)
{
    pthread_mutex_unlock(&pl__reg.mu);
}

static size_t pl__hash(uintptr_t key, size_t cap)
{
    /* Handles and allocations are 16-aligned or more: the low bits say nothing. */
    return (size_t)(((uint64_t)key >> 4) * 0x9E3779B97F4A7C15ull) & (cap - 1);
}

/* The slot of `key`: its record's, or the empty one where it would go. */
static pl_stub_obj **pl__slot(uintptr_t key)
{
    size_t i = pl__hash(key, pl__reg.cap);
    while (pl__reg.slot[i] && pl__reg.slot[i]->key != key)
        i = (i + 1) & (pl__reg.cap - 1);
    return &pl__reg.slot[i];
}

static bool pl__grow(void)
{
    if (pl__reg.cap && 2 * (pl__reg.used + 1) <= pl__reg.cap) return true;
    size_t cap = pl__reg.cap ? 2 * pl__reg.cap : 1024;
    pl_stub_obj **old = pl__reg.slot;
    size_t old_cap = pl__reg.cap;
    pl_stub_obj **slot = calloc(cap, sizeof *slot);
    if (!slot) return false;
    pl__reg.slot = slot;
    pl__reg.cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i]) *pl__slot(old[i]->key) = old[i];
    free(old);
    return true;
}

/* Enters `o` under `key`. A key seen before (memory freed and handed out again by malloc) takes
 * the new record; the old one stays on the list of all objects. */
static bool pl__enter(pl_stub_obj *o, uintptr_t key, pl_stub_kind kind, const char *fn)
{
    if (!pl__grow()) return false;
    o->kind = kind;
    o->live = true;
    o->seq = ++pl__reg.seq;
    o->made_by = fn;
    o->key = key;
    pl_stub_obj **s = pl__slot(key);
    if (!*s) pl__reg.used++;
    *s = o;
    o->next = pl__reg.all;
    pl__reg.all = o;
    pl__reg.made[kind]++;
    return true;
}

static void pl__misuse_locked(const char *fmt, va_list ap)
{
    char msg[256];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "pl_stubcuda: misuse: %s\n", msg);
    if (pl__reg.misuses < PL__MISUSE_KEEP)
        snprintf(pl__reg.misuse[pl__reg.misuses], sizeof pl__reg.misuse[0], "%s", msg);
    pl__reg.misuses++;
}

static void pl__misuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void pl__misuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pl__misuse_locked(fmt, ap);
    va_end(ap);
}

void pl_stubcuda_misuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&pl__reg.mu);
    pl__misuse_locked(fmt, ap);
    pthread_mutex_unlock(&pl__reg.mu);
    va_end(ap);
}

pl_stub_obj *pl_stubcuda_new_locked(pl_stub_kind kind, const char *fn)
{
    pl_stub_obj *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    if (!pl__enter(o, (uintptr_t)o, kind, fn)) {
        free(o);
        return NULL;
    }
    return o;
}

pl_stub_obj *pl_stubcuda_new(pl_stub_kind kind, const char *fn)
{
    pthread_mutex_lock(&pl__reg.mu);
    pl_stub_obj *o = pl_stubcuda_new_locked(kind, fn);
    pthread_mutex_unlock(&pl__reg.mu);
    return o;
}

void *pl_stubcuda_alloc(pl_stub_kind kind, size_t size, const char *fn)
{
    /* calloc, not memset: a large block comes zeroed from mmap without touching its pages, so a
     * run's buffers cost address space, not memory. */
    pl_stub_obj *o = calloc(1, sizeof *o);
    char *base = calloc(1, size + 256);
    if (!o || !base) {
        free(o);
        free(base);
        return NULL;
    }
    char *p = (char *)(((uintptr_t)base + 255) & ~(uintptr_t)255);
    o->base = base;
    o->size = size;
    pthread_mutex_lock(&pl__reg.mu);
    bool ok = pl__enter(o, (uintptr_t)p, kind, fn);
    pthread_mutex_unlock(&pl__reg.mu);
    if (!ok) {
        free(o);
        free(base);
        return NULL;
    }
    return p;
}

/* Registrations are keyed by their address with the low bit set: caller memory may start where
 * a freed stub allocation did. */
static uintptr_t pl__key(const void *h, pl_stub_kind kind)
{
    return kind == PL_STUB_HOST_REG ? (uintptr_t)h | 1 : (uintptr_t)h;
}

bool pl_stubcuda_register(const void *p, size_t size, const char *fn)
{
    pthread_mutex_lock(&pl__reg.mu);
    bool ok = false;
    pl_stub_obj *o = NULL;
    if (pl__reg.cap) {
        pl_stub_obj *s = *pl__slot(pl__key(p, PL_STUB_HOST_REG));
        if (s && s->live) {
            pl__misuse("%s: %p is registered already (by %s, object #%llu)", fn, p, s->made_by,
                       (unsigned long long)s->seq);
            goto done;
        }
    }
    if (!(o = calloc(1, sizeof *o))) goto done;
    o->size = size;
    if (!(ok = pl__enter(o, pl__key(p, PL_STUB_HOST_REG), PL_STUB_HOST_REG, fn))) free(o);
done:
    pthread_mutex_unlock(&pl__reg.mu);
    return ok;
}

pl_stub_obj *pl_stubcuda_peek_locked(const void *h)
{
    return pl__reg.cap ? *pl__slot((uintptr_t)h) : NULL;
}

pl_stub_obj *pl_stubcuda_find_locked(const void *h, pl_stub_kind kind, const char *fn)
{
    pl_stub_obj *o = pl__reg.cap ? *pl__slot(pl__key(h, kind)) : NULL;
    if (!o) {
        pl__misuse("%s: %p is no %s the stand-in made", fn, h, pl__kind_name[kind]);
        return NULL;
    }
    if (o->kind != kind) {
        pl__misuse("%s: %p is a %s (object #%llu, by %s), not a %s", fn, h, pl__kind_name[o->kind],
                   (unsigned long long)o->seq, o->made_by, pl__kind_name[kind]);
        return NULL;
    }
    if (!o->live) {
        pl__misuse("%s: %s %p (object #%llu, by %s) was destroyed already", fn, pl__kind_name[kind],
                   h, (unsigned long long)o->seq, o->made_by);
        return NULL;
    }
    return o;
}

pl_stub_obj *pl_stubcuda_find(const void *h, pl_stub_kind kind, const char *fn)
{
    pthread_mutex_lock(&pl__reg.mu);
    pl_stub_obj *o = pl_stubcuda_find_locked(h, kind, fn);
    pthread_mutex_unlock(&pl__reg.mu);
    return o;
}

bool pl_stubcuda_destroy(const void *h, pl_stub_kind kind, const char *fn)
{
    pthread_mutex_lock(&pl__reg.mu);
    pl_stub_obj *o = pl_stubcuda_find_locked(h, kind, fn);
    if (o) {
        o->live = false;
        pl__reg.destroyed[kind]++;
        free(o->base);
        o->base = NULL;
    }
    pthread_mutex_unlock(&pl__reg.mu);
    return o != NULL;
}

/* The objects still alive that are listed by name; the rest are counted. */
#define PL__LEAK_LIST 20

__attribute__((destructor)) static void pl__exit_check(void)
{
    const char *counts = getenv("PL_STUBCUDA_COUNTS");
    const char *check = getenv("PL_STUBCUDA_CHECK");
    bool want_counts = counts && strcmp(counts, "1") == 0;
    bool want_check = check && strcmp(check, "1") == 0;
    if (!want_counts && !want_check) return;
    /* Threads of the process may still run: the report reads the registry under its lock. */
    pthread_mutex_lock(&pl__reg.mu);
    long left = 0, made = 0;
    for (int k = 0; k < PL_STUB_KIND_COUNT; k++) {
        if (want_counts && pl__reg.made[k])
            fprintf(stderr, "pl_stubcuda: %-40s made %ld, destroyed %ld\n", pl__kind_name[k],
                    pl__reg.made[k], pl__reg.destroyed[k]);
        if (!pl__kind_owned[k]) continue;
        made += pl__reg.made[k];
        left += pl__reg.made[k] - pl__reg.destroyed[k];
    }
    if (!want_check) {
        pthread_mutex_unlock(&pl__reg.mu);
        return;
    }
    if (left == 0 && pl__reg.misuses == 0) {
        fprintf(stderr, "pl_stubcuda: ok: %ld objects made, all destroyed\n", made);
        pthread_mutex_unlock(&pl__reg.mu);
        return;
    }
    fprintf(stderr, "pl_stubcuda: FAIL: %ld of %ld objects left alive, %ld misuses\n", left, made,
            pl__reg.misuses);
    for (int k = 0; k < PL_STUB_KIND_COUNT; k++)
        if (pl__kind_owned[k] && pl__reg.made[k] > pl__reg.destroyed[k])
            fprintf(stderr, "pl_stubcuda:   %ld %s left (of %ld)\n",
                    pl__reg.made[k] - pl__reg.destroyed[k], pl__kind_name[k], pl__reg.made[k]);
    long listed = 0;
    for (const pl_stub_obj *o = pl__reg.all; o && listed < PL__LEAK_LIST; o = o->next)
        if (o->live && pl__kind_owned[o->kind]) {
            fprintf(stderr, "pl_stubcuda:   left: %s #%llu (%s)\n", pl__kind_name[o->kind],
                    (unsigned long long)o->seq, o->made_by);
            listed++;
        }
    for (long i = 0; i < pl__reg.misuses && i < PL__MISUSE_KEEP; i++)
        fprintf(stderr, "pl_stubcuda:   misuse: %s\n", pl__reg.misuse[i]);
    fflush(stderr);
    _exit(3);
}
