/* pl_gather: rank 0 writes the final files of `run --mpi --mpi-write gather` (pl_gather.h). */
#include "pl_gather.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pl_intr.h"
#include "pl_kind_util.h"
#include "pl_sink.h"

/* One batch rank 0 holds until the batches before it are written. */
typedef struct pl__held {
    struct pl__held *next;
    int64_t batch;
    int rank;
    size_t n;
    char *data; /* the sink's batch_bytes */
} pl__held;

/* One gathered sink. */
typedef struct pl__gsink {
    struct pl_gather *g;
    int stage;  /* in spec->stages */
    int buffer; /* the buffer it writes, in spec->buffers */
    uint64_t batch_bytes, row_bytes;
    bool rows; /* writes only the real rows of a padded batch: a batch may be shorter */
    /* Rank 0. */
    void *state;  /* the sink instance writing the final file (open: not NULL) */
    int64_t next; /* the next batch to write; those before it are written */
    pl__held *held;
    int *held_by;    /* [size]: how many of `held` (and of rank 0's, being copied) */
    pl__held *spare; /* buffers to use again */
    int n_spare;
    pl_mpi_batch *ann; /* [size]: announced and not asked for yet (stage -1: none) */
} pl__gsink;

struct pl_gather {
    const pl_spec *spec; /* the run's (borrowed) */
    pl_spec full;        /* a copy of it without the shard: the names one process writes */
    pl_run_env env;      /* the sink instances' run: the pipeline's batches */
    pl_run_rows rows;
    void **bufs; /* [n_buffers]: the batch a sink instance writes */
    int rank, size, window;
    int64_t total;
    pl__gsink *sinks;
    int n;
    pl_run_io *io; /* [n]: cfg->io */
    volatile sig_atomic_t *stop;
    int stop_value;
    /* Rank 0: its sinks' copies and the writer meet here. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool sync_on;
    pthread_t thread;
    bool thread_on;
    bool local_done; /* rank 0's run ended: no more batches of its own */
    bool drain;      /* ask for everything announced: a rank stopped or failed */
    bool failed;     /* the writer stopped writing (err says why) */
    int ends;        /* ranks whose end arrived */
    bool *ended;     /* [size] */
    pl_error err;
};

pl_status pl_gather_check(const pl_spec *spec, pl_error *err)
{
    if (spec->run.shard.mode == PL_SHARD_RANGE)
        return pl_error_set(err, PL_EINPUT,
                            "error: --mpi-write gather needs run.shard_mode: stride (the default): "
                            "with range each rank runs one block, and rank 0 would hold every "
                            "other rank's block until its own is written; drop shard_mode, or "
                            "use --mpi-write parts");
    pl_spec full = *spec;
    full.run.shard = (pl_shard){0, 0, PL_SHARD_STRIDE};
    for (int i = 0; i < spec->n_stages; i++) {
        const pl_stage *st = &spec->stages[i];
        pl_sink_part info;
        if (!pl_sink_part_info(spec, st, &info)) continue;
        const pl_opt *to = pl_stage_opt(st, "to");
        if (strcmp(info.format, "text") == 0 || strcmp(info.format, "jsonl") == 0)
            return pl_error_at(err, PL_EINPUT, to ? to->val_pos : st->pos,
                               "sink '%s' writes %s lines, whose batches vary in size: "
                               "--mpi-write gather writes raw and .npy sinks; use --mpi-write "
                               "parts (the default) for this pipeline",
                               st->name, strcmp(info.format, "text") == 0 ? "text" : "JSONL");
        if (st->kind->check_files)
            PL_CHECK(st->kind->check_files(&full, st, spec->run.batches, err));
    }
    return PL_OK;
}

/* ---- buffers ------------------------------------------------------------------------------ */

/* A buffer of s's batch size (g->mu held); NULL without memory. */
static pl__held *pl__buf_get(pl__gsink *s)
{
    pl__held *h = s->spare;
    if (h) {
        s->spare = h->next;
        s->n_spare--;
        h->next = NULL;
        return h;
    }
    h = calloc(1, sizeof *h);
    if (h) h->data = malloc(s->batch_bytes ? (size_t)s->batch_bytes : 1);
    if (h && !h->data) {
        free(h);
        h = NULL;
    }
    return h;
}

static void pl__buf_free(pl__held *h)
{
    if (!h) return;
    free(h->data);
    free(h);
}

/* Keeps h for the next batch of s, or frees it past what a window needs (g->mu held). */
static void pl__buf_put(pl__gsink *s, pl__held *h)
{
    if (s->n_spare > s->g->window) {
        pl__buf_free(h);
        return;
    }
    h->next = s->spare;
    s->spare = h;
    s->n_spare++;
}

/* ---- the writer (rank 0) ------------------------------------------------------------------ */

/* The writer stops writing: says why once, asks for everything still announced, stops this
 * rank's run as a peer's notice does, and tells the other ranks to stop (g->mu held). */
static void pl__fail(pl_gather *g, const pl_error *why)
{
    if (g->failed) return;
    g->failed = g->drain = true;
    g->err = *why;
    pthread_cond_broadcast(&g->cv);
    if (g->stop && *g->stop == 0) {
        *g->stop = (sig_atomic_t)g->stop_value;
        pl_intr_wake();
    }
    pl_mpi_tell_stop();
}

static pl__gsink *pl__sink_of(pl_gather *g, int64_t stage)
{
    for (int i = 0; g && i < g->n; i++)
        if (g->sinks[i].stage == stage) return &g->sinks[i];
    return NULL;
}

/* Receives rank r's announced batch b and drops it. */
static void pl__drop(int r, const pl_mpi_batch *b)
{
    pl_error e;
    void *tmp = malloc(b->bytes > 0 ? (size_t)b->bytes : 1);
    /* Without memory MPI truncates the message, which aborts the job (mpirun ends every rank):
     * never a rank left waiting. */
    pl_mpi_pull_batch(r, b, tmp, &e);
    free(tmp);
}

/* An announcement or an end from rank r (writer thread). */
static void pl__announced(pl_gather *g, int r, const pl_mpi_batch *b)
{
    if (b->stage < 0) {
        if (g && !g->ended[r]) {
            g->ended[r] = true;
            g->ends++;
        }
        return;
    }
    pl__gsink *s = pl__sink_of(g, b->stage);
    const char *bad = !s                        ? "a stage rank 0 does not gather"
                      : s->ann[r].stage >= 0    ? "a second batch at once"
                      : b->batch % g->size != r ? "a batch of another rank"
                      : b->batch < s->next      ? "a batch already written"
                      : b->bytes < 0 || (uint64_t)b->bytes > s->batch_bytes ||
                              (!s->rows && (uint64_t)b->bytes != s->batch_bytes)
                          ? "another size than its sink's batches"
                          : NULL;
    if (!bad) {
        s->ann[r] = *b;
        return;
    }
    pl_error e;
    pl_error_set(&e, PL_ERUNTIME,
                 "error: --mpi-write gather: rank %d announced %s (stage %lld, batch %lld, %lld "
                 "bytes): ranks of one run disagree (another pipectl, another pipeline?)",
                 r, bad, (long long)b->stage, (long long)b->batch, (long long)b->bytes);
    pthread_mutex_lock(&g->mu);
    pl__fail(g, &e);
    pthread_mutex_unlock(&g->mu);
    pl__drop(r, b);
}

/* Asks for the announced batches there is room for (all of them when draining). */
static bool pl__pull(pl_gather *g)
{
    bool moved = false;
    for (int i = 0; i < g->n; i++) {
        pl__gsink *s = &g->sinks[i];
        for (int r = 1; r < g->size; r++) {
            pl_mpi_batch b = s->ann[r];
            if (b.stage < 0) continue;
            pthread_mutex_lock(&g->mu);
            bool room = g->drain || s->held_by[r] < g->window || b.batch == s->next;
            bool keep = room && !g->failed;
            pl__held *h = keep ? pl__buf_get(s) : NULL;
            if (keep && !h) {
                pl_error e;
                pl_error_set(&e, PL_ENOMEM,
                             "error: out of memory: rank 0 holding batches of sink '%s' for "
                             "--mpi-write gather (%d of %llu bytes a rank at most)",
                             g->spec->stages[s->stage].name, g->window,
                             (unsigned long long)s->batch_bytes);
                pl__fail(g, &e);
            }
            pthread_mutex_unlock(&g->mu);
            if (!room) continue;
            s->ann[r].stage = -1;
            moved = true;
            if (!h) {
                pl__drop(r, &b);
                continue;
            }
            pl_error e;
            pl_status st = pl_mpi_pull_batch(r, &b, h->data, &e);
            h->batch = b.batch;
            h->rank = r;
            h->n = (size_t)b.bytes;
            pthread_mutex_lock(&g->mu);
            if (st != PL_OK) {
                pl__fail(g, &e);
                pl__buf_put(s, h);
            } else {
                h->next = s->held;
                s->held = h;
                s->held_by[r]++;
            }
            pthread_mutex_unlock(&g->mu);
        }
    }
    return moved;
}

/* Writes batch h through s's sink instance (the writer thread; g->mu not held). */
static pl_status pl__write_one(pl_gather *g, pl__gsink *s, const pl__held *h, pl_error *err)
{
    /* Only the last batch of a sink that writes rows is short: its real rows, as one process's
     * padding source records them for its sinks. */
    if (h->n < s->batch_bytes && s->row_bytes)
        pl_run_rows_pad(&g->env, h->batch, (int64_t)(h->n / s->row_bytes));
    g->bufs[s->buffer] = h->data;
    const pl_stage *st = &g->spec->stages[s->stage];
    pl_stage_ctx ctx = {.spec = &g->full,
                        .stage = st,
                        .env = &g->env,
                        .batch = h->batch,
                        .bufs = g->bufs,
                        .state = s->state};
    return st->kind->run_host(&ctx, err);
}

/* Writes every held batch that is next in its file (g->mu held; released while writing). */
static bool pl__write_ready(pl_gather *g)
{
    bool moved = false;
    for (int i = 0; i < g->n; i++) {
        pl__gsink *s = &g->sinks[i];
        for (;;) {
            pl__held **p = &s->held;
            while (*p && (*p)->batch != s->next)
                p = &(*p)->next;
            pl__held *h = *p;
            if (!h) break;
            *p = h->next;
            moved = true;
            pl_status st = PL_OK;
            pl_error e;
            if (!g->failed) {
                pthread_mutex_unlock(&g->mu);
                st = pl__write_one(g, s, h, &e);
                pthread_mutex_lock(&g->mu);
            }
            if (st != PL_OK) {
                /* Named as the stage runtime names a stage's error in one process's run. */
                pl_error named;
                const char *m = strncmp(e.msg, "error: ", 7) == 0 ? e.msg + 7 : e.msg;
                pl_error_set(&named, e.status, "error: stage '%s', batch %lld: %s",
                             g->spec->stages[s->stage].name, (long long)h->batch, m);
                pl__fail(g, &named);
            } else if (!g->failed)
                s->next++;
            int rank = h->rank;
            s->held_by[rank]--;
            pl__buf_put(s, h);                             /* may free h */
            if (rank == 0) pthread_cond_broadcast(&g->cv); /* a sink of rank 0 may go on */
            if (g->failed) break;
        }
        if (g->failed) /* nothing more is written: what is held goes */
            while (s->held) {
                pl__held *h = s->held;
                s->held = h->next;
                s->held_by[h->rank]--;
                pl__buf_put(s, h);
                pthread_cond_broadcast(&g->cv);
            }
    }
    return moved;
}

static bool pl__announcing(const pl_gather *g)
{
    for (int i = 0; i < g->n; i++)
        for (int r = 1; r < g->size; r++)
            if (g->sinks[i].ann[r].stage >= 0) return true;
    return false;
}

/* Waits on g->cv for at most *us microseconds (doubling to 1 ms): a batch of rank 0 wakes it. */
static void pl__idle(pl_gather *g, int *us)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)*us * 1000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    *us = *us * 2 < 1000 ? *us * 2 : 1000;
}

/* The writer: until rank 0's run ended and every other rank's end arrived. */
static void *pl__writer(void *arg)
{
    pl_gather *g = arg;
    int us = 20;
    pthread_mutex_lock(&g->mu);
    for (;;) {
        if (!g->drain && ((g->stop && *g->stop) || pl_mpi_stop_told())) {
            g->drain = true;
            pthread_cond_broadcast(&g->cv);
        }
        pthread_mutex_unlock(&g->mu);
        bool moved = false;
        int r;
        pl_mpi_batch b;
        while (pl_mpi_next_batch(&r, &b)) {
            pl__announced(g, r, &b);
            moved = true;
        }
        moved = pl__pull(g) || moved;
        pthread_mutex_lock(&g->mu);
        moved = pl__write_ready(g) || moved;
        if (g->local_done && g->ends == g->size - 1 && !pl__announcing(g)) break;
        if (moved)
            us = 20;
        else
            pl__idle(g, &us);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* ---- the sinks' callbacks ----------------------------------------------------------------- */

/* Rank 0: a copy of its own batch for the writer, once it holds fewer than a window of them. */
static int pl__keep(void *user, const char *buffer, int64_t batch, const void *data, size_t n)
{
    (void)buffer;
    pl__gsink *s = user;
    pl_gather *g = s->g;
    pthread_mutex_lock(&g->mu);
    while (!g->drain && s->held_by[0] >= g->window)
        pthread_cond_wait(&g->cv, &g->mu);
    pl__held *h = g->failed || n > s->batch_bytes ? NULL : pl__buf_get(s);
    if (!h && !g->failed) {
        pl_error e;
        pl_error_set(&e, PL_ENOMEM,
                     "error: out of memory: rank 0 holding its batches of sink '%s' for "
                     "--mpi-write gather",
                     g->spec->stages[s->stage].name);
        pl__fail(g, &e);
    }
    if (h) s->held_by[0]++;
    pthread_mutex_unlock(&g->mu);
    if (!h) return 0; /* the writer failed: its error is the run's (pl_gather_end) */
    memcpy(h->data, data, n);
    h->batch = batch;
    h->rank = 0;
    h->n = n;
    pthread_mutex_lock(&g->mu);
    h->next = s->held;
    s->held = h;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return 0;
}

/* Another rank: the batch to rank 0, once rank 0 asks for it. */
static int pl__send(void *user, const char *buffer, int64_t batch, const void *data, size_t n)
{
    (void)buffer;
    pl__gsink *s = user;
    pl_mpi_batch b = {s->stage, batch, (int64_t)n};
    pl_error e;
    /* MPI's errors end the job (MPI_ERRORS_ARE_FATAL): a failure here is not expected back. */
    return pl_mpi_send_batch(&b, data, &e) == PL_OK ? 0 : 1;
}

/* ---- start, end, finish ------------------------------------------------------------------- */

void pl_gather_free(pl_gather *g)
{
    if (!g) return;
    for (int i = 0; i < g->n; i++) {
        pl__gsink *s = &g->sinks[i];
        if (s->state) {
            pl_error e;
            const pl_stage *st = &g->spec->stages[s->stage];
            st->kind->close(&g->env, st, s->state, s->next, true, &e);
        }
        for (pl__held *h = s->held, *nx; h; h = nx) {
            nx = h->next;
            pl__buf_free(h);
        }
        for (pl__held *h = s->spare, *nx; h; h = nx) {
            nx = h->next;
            pl__buf_free(h);
        }
        free(s->held_by);
        free(s->ann);
    }
    if (g->sync_on) {
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->cv);
    }
    free(g->sinks);
    free(g->io);
    free(g->bufs);
    free(g->ended);
    free(g);
}

pl_status pl_gather_start(const pl_plan *plan, const pl_mpi_world *w, volatile sig_atomic_t *stop,
                          int stop_value, pl_run_cfg *cfg, pl_gather **out, pl_error *err)
{
    *out = NULL;
    const pl_spec *spec = plan->spec;
    pl_gather *g = calloc(1, sizeof *g);
    if (!g) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    g->spec = spec;
    g->rank = w->rank;
    g->size = w->size;
    g->total = spec->run.batches;
    g->stop = stop;
    g->stop_value = stop_value;
    /* The run's slots (depth: auto grows to its cap) */
    int depth = plan->depth_auto && plan->depth_cap > plan->depth ? plan->depth_cap : plan->depth;
    g->window = depth > 2 ? depth : 2;
    pl_status st = PL_OK;
    g->sinks = calloc((size_t)(spec->n_stages > 0 ? spec->n_stages : 1), sizeof *g->sinks);
    g->io = calloc((size_t)(spec->n_stages > 0 ? spec->n_stages : 1), sizeof *g->io);
    g->ended = calloc((size_t)g->size, sizeof *g->ended);
    g->bufs = calloc((size_t)(spec->n_buffers > 0 ? spec->n_buffers : 1), sizeof *g->bufs);
    if (!g->sinks || !g->io || !g->ended || !g->bufs) goto oom;
    for (int i = 0; i < spec->n_stages; i++) {
        pl_sink_part info;
        if (!pl_sink_part_info(spec, &spec->stages[i], &info)) continue;
        pl__gsink *s = &g->sinks[g->n];
        s->g = g;
        s->stage = i;
        s->buffer = (int)(info.buf - spec->buffers);
        s->batch_bytes = info.buf->bytes;
        s->row_bytes = info.row_bytes;
        s->rows = info.rows;
        s->held_by = calloc((size_t)g->size, sizeof *s->held_by);
        s->ann = calloc((size_t)g->size, sizeof *s->ann);
        if (!s->held_by || !s->ann) goto oom;
        for (int r = 0; r < g->size; r++)
            s->ann[r].stage = -1;
        g->io[g->n] = (pl_run_io){.buffer = s->buffer,
                                  .stage = i,
                                  .output = true,
                                  .fn = g->rank == 0 ? pl__keep : pl__send,
                                  .user = s};
        g->n++;
    }
    if (g->rank == 0) {
        if (pthread_mutex_init(&g->mu, NULL) != 0) goto oom;
        if (pthread_cond_init(&g->cv, NULL) != 0) {
            pthread_mutex_destroy(&g->mu);
            goto oom;
        }
        g->sync_on = true;
        g->full = *spec;
        g->full.run.shard = (pl_shard){0, 0, PL_SHARD_STRIDE};
        g->rows = (pl_run_rows){-1, INT64_MAX};
        /* A failed run takes back the batches written past the last one every rank completed:
         * the files hold at most the batches in flight of each rank past it. */
        g->env = (pl_run_env){.spec = &g->full,
                              .batches = g->total,
                              .depth = g->size * (g->window + 2) + 2,
                              .workers = 1,
                              .seed = spec->run.seed,
                              .rows = &g->rows};
        for (int i = 0; i < g->n && st == PL_OK; i++) {
            const pl_stage *stg = &spec->stages[g->sinks[i].stage];
            st = stg->kind->open(&g->env, stg, &g->sinks[i].state, err);
        }
        if (st != PL_OK) goto fail;
        int rc = pthread_create(&g->thread, NULL, pl__writer, g);
        if (rc) {
            st = pl_error_set(err, rc == EAGAIN ? PL_ENOMEM : PL_ERUNTIME,
                              "error: --mpi-write gather: cannot start rank 0's writer thread: %s",
                              strerror(rc));
            goto fail;
        }
        g->thread_on = true;
    }
    cfg->io = g->io;
    cfg->n_io = g->n;
    *out = g;
    return PL_OK;
oom:
    st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
fail:
    pl_gather_free(g);
    return st;
}

/* Rank 0 without a writer: receives what the others send and drops it, until their ends. */
static void pl__drop_all(int size)
{
    int ends = 0, us = 20;
    while (ends < size - 1) {
        int r;
        pl_mpi_batch b;
        if (!pl_mpi_next_batch(&r, &b)) {
            struct timespec ts = {0, (long)us * 1000L};
            nanosleep(&ts, NULL);
            us = us * 2 < 1000 ? us * 2 : 1000;
            continue;
        }
        us = 20;
        if (b.stage < 0)
            ends++;
        else
            pl__drop(r, &b);
    }
}

pl_status pl_gather_end(pl_gather *g, const pl_mpi_world *w, bool failed, pl_error *err)
{
    if (w->size < 2) return PL_OK;
    if (w->rank != 0) return pl_mpi_send_end(err);
    if (!g) {
        pl__drop_all(w->size);
        return PL_OK;
    }
    pthread_mutex_lock(&g->mu);
    g->local_done = true;
    if (failed) g->drain = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if (g->thread_on) pthread_join(g->thread, NULL);
    g->thread_on = false;
    if (!g->failed) return PL_OK;
    *err = g->err;
    return g->err.status;
}

pl_status pl_gather_finish(pl_gather *g, const int64_t *done, pl_gather_sums_fn sums, void *user,
                           FILE *out, pl_error *err)
{
    /* The first batch a rank did not complete (its rank's done-th): the files end before it. */
    int64_t miss = g->total;
    for (int64_t b = 0; b < g->total; b++)
        if (b / g->size >= done[b % g->size]) {
            miss = b;
            break;
        }
    pl_status st = PL_OK;
    for (int i = 0; i < g->n; i++) {
        pl__gsink *s = &g->sinks[i];
        const pl_stage *stg = &g->spec->stages[s->stage];
        if (!s->state) continue;
        int64_t keep = miss < s->next ? miss : s->next;
        pl_output o;
        bool has = false;
        char path[PATH_MAX] = "";
        int64_t bad = -1;
        int bad_rank = 0;
        if (stg->kind->output && stg->kind->output(stg, s->state, keep, &o, &has) == PL_OK && has) {
            if (o.path) snprintf(path, sizeof path, "%s", o.path);
            /* Each batch's bytes as rank 0 wrote them against its rank's checksum of them. */
            for (int64_t b = 0; o.checksummed && b < o.n_batch_checksums && b < keep; b++) {
                const uint64_t *rs = NULL;
                int64_t rn = 0, k = b / g->size;
                int r = (int)(b % g->size);
                if (sums && sums(user, r, stg->name, &rs, &rn) && k < rn &&
                    rs[k] != o.batch_checksums[b]) {
                    bad = b;
                    bad_rank = r;
                    break;
                }
            }
        }
        if (has) {
            free(o.path);
            free(o.batch_checksums);
        }
        /* The sink takes back what it wrote past keep when it is among its last batches. */
        bool reach = s->next - (bad >= 0 ? bad : keep) < g->env.depth + 2;
        if (bad >= 0) keep = bad;
        pl_error ce;
        pl_status cs = stg->kind->close(&g->env, stg, s->state, keep, keep < g->total, &ce);
        s->state = NULL;
        if (cs != PL_OK && st == PL_OK) {
            st = cs;
            *err = ce;
        }
        char name[PATH_MAX + 16];
        snprintf(name, sizeof name, "%s", path);
        if (bad >= 0) {
            /* Out of the take-back's reach the file holds the bad batch: it goes aside. */
            char aside[PATH_MAX + 16];
            snprintf(aside, sizeof aside, "%s.unverified", path);
            bool moved = !reach && path[0] && rename(path, aside) == 0;
            if (st == PL_OK)
                st = pl_error_set(err, PL_ERUNTIME,
                                  "error: sink '%s': batch %lld as rank 0 wrote it is not what "
                                  "rank %d computed (their checksums differ): %s; run it again",
                                  stg->name, (long long)bad, bad_rank,
                                  moved ? "the file is moved to its name + '.unverified'"
                                        : "the file keeps the batches before it");
            continue;
        }
        if (cs != PL_OK) continue;
        if (keep == g->total) {
            if (out)
                fprintf(out, "written: %s (%lld batches from %d ranks, through rank 0)\n", name,
                        (long long)keep, g->size);
        } else if (keep > 0) {
            fprintf(stderr, "kept: %s: batches 0 to %lld of %lld, in order\n", name,
                    (long long)keep - 1, (long long)g->total);
        } else {
            fprintf(stderr,
                    "not written: %s: no batch before the first missing one (a file of that "
                    "name from before is left as it was)\n",
                    name);
        }
    }
    if (miss < g->total) {
        int r = (int)(miss % g->size);
        fprintf(stderr,
                "missing from batch %lld on: rank %d completed %lld of its batches, and batch "
                "%lld is its next; the files keep every batch before it. Run it again to write "
                "them all (mpirun -n %d pipectl run --mpi --mpi-write gather FILE); with "
                "--mpi-write parts each rank keeps all it completed, and only the incomplete "
                "shards run again\n",
                (long long)miss, r, (long long)done[r], (long long)miss, g->size);
    }
    return st;
}
