/* pl_tok_kind: what the tokenize and detokenize kinds share: the `vocab:` folder, checked at
 * check time and loaded in open(), with errors at the option's position; the per-run state. */
#ifndef PL_TOK_KIND_H
#define PL_TOK_KIND_H

#include <string.h>
#include <unistd.h>

#include "pl_bpe.h"
#include "pl_buffers.h"
#include "pl_kind_util.h"
#include "pl_pool.h"

/* Per run: the tokenizer and how many pool threads a batch may use. */
typedef struct pl_tok_state {
    pl_bpe *bpe;
    int parallel;
} pl_tok_state;

/* An error of the tokenizer files, moved to the `vocab:` value's position. */
static inline pl_status pl_tok_vocab_error(const pl_stage *st, const pl_error *e, pl_error *err)
{
    const char *m = strncmp(e->msg, "error: ", 7) == 0 ? e->msg + 7 : e->msg;
    return pl_error_at(err, e->status, pl_stage_opt(st, "vocab")->val_pos, "%s stage '%s': %s",
                       st->kind->name, st->name, m);
}

static inline pl_status pl_tok_check_files(const pl_spec *spec, const pl_stage *st, int64_t batches,
                                           pl_error *err)
{
    char path[4096];
    pl_spec_path(spec, pl_opt_get_str(st, "vocab", ""), path, sizeof path);
    pl_error e;
    pl_error_clear(&e);
    if (pl_bpe_check_path(path, &e) != PL_OK) return pl_tok_vocab_error(st, &e, err);
    return PL_OK;
}

/* Loads the vocabulary; `threads` 0: the run's workers, at most the cores. */
static inline pl_status pl_tok_open(const pl_run_env *env, const pl_stage *st, int64_t threads,
                                    pl_tok_state **out, pl_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    char path[4096];
    pl_spec_path(env->spec, pl_opt_get_str(st, "vocab", ""), path, sizeof path);
    pl_error e;
    pl_error_clear(&e);
    if (pl_bpe_load(path, &(*out)->bpe, &e) != PL_OK) return pl_tok_vocab_error(st, &e, err);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int p = threads > 0 ? (int)threads : env->workers;
    if (threads == 0 && cpus > 0 && p > cpus) p = (int)cpus;
    (*out)->parallel = p < 1 ? 1 : p;
    if (env->pool && (*out)->parallel - 1 > pl_pool_threads(env->pool))
        return pl_pool_reserve(env->pool, (*out)->parallel - 1, err);
    return PL_OK;
}

static inline pl_status pl_tok_close(const pl_run_env *env, const pl_stage *st, void *state,
                                     int64_t completed, bool failed, pl_error *err)
{
    pl_tok_state *s = state;
    if (!s) return PL_OK;
    pl_bpe_free(s->bpe);
    free(s);
    return PL_OK;
}

/* Checks that buffer b (ref `pos`) is a host buffer of dtype t and rank `rank`; `what` says what
 * the stage wants ("u8 [B, L]: text rows"). */
static inline pl_status pl_tok_want(const pl_stage *st, const pl_buffer *b, pl_pos pos, pl_dtype t,
                                    int rank, const char *key, const char *what, pl_error *err)
{
    if (b->where == PL_HOST && b->dtype == t && b->rank == rank) return PL_OK;
    char s[96];
    return pl_error_at(err, PL_EINPUT, pos,
                       "%s stage '%s': %s '%s' must be a host %s buffer, not %s %s %s",
                       st->kind->name, st->name, key, b->name, what, pl_where_name(b->where),
                       pl_dtype_name(b->dtype), pl_kind_shape(b, s, sizeof s));
}

#endif
