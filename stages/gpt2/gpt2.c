/* gpt2: the GPT-2 forward as one stage kind. Reads token ids [B, T] (i32, device) and writes
 * logits, the argmax next token or the log-probability of given targets. Weights come from a
 * Hugging Face snapshot (config.json + model.safetensors) or are seeded random; open() loads them
 * once: into persistent device memory on the GPU executor (f16 or bf16, matrices transposed to
 * [out, in] for cuBLASLt), into host memory (f32) for the host executor, whose run_host is the C
 * reference (gpt2_ref.c). On the GPU, record() enqueues embedding -> n_layer x (layernorm,
 * QKV gemm + bias, flash attention, projection gemm + bias + residual, layernorm, fc gemm + bias
 * + GELU, projection gemm + bias + residual) -> layernorm -> LM head gemm (-> argmax or
 * log-softmax), with each slot's activations in its own device scratch, allocated in open(). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpt2.h"
#include "gpt2_model.h"
#include "pl_buffers.h"
#include "pl_half.h"
#include "pl_kind_util.h"
#ifdef PL_WITH_CUDA
#include "gpt2_gpu.h"
#include "ops_gpu.h"
#include "pl_gpu.h"
#endif

/* matvec: auto decodes this many sequences or fewer through the matrix-vector linears: at 2 and
 * more cuBLASLt's GEMMs are faster (docs/perf.md: 0.578 against 0.472 ms a step at batch 2). */
#define PL__GPT2_MATVEC_ROWS 1

static const pl_key pl__gpt2_keys[] = {
    {"ids", PL_KEY_NAME, NULL, NULL,
     "device i32 buffer [B, T] (decode: [B], each sequence's latest token): the token ids "
     "(required)"},
    {"targets", PL_KEY_NAME, NULL, NULL,
     "output logprob: device i32 buffer [B, T]: the ids whose log-probability is wanted (the "
     "next tokens)"},
    {"out", PL_KEY_NAME, NULL, NULL,
     "device buffer (required): logits f16|bf16|f32 [B, T, V] ([B, V] with positions: last, "
     "prefill and decode), argmax i32 [B, T] ([B]), logprob f32 [B, T] ([B])"},
    {"mode", PL_KEY_ENUM, "forward|prefill|decode", "forward",
     "forward: the whole sequences; prefill: the prompts into the KV cache, the output at each "
     "one's last position; decode: one new token per sequence against the cache"},
    {"cache", PL_KEY_NAME, NULL, NULL,
     "prefill and decode need it: device f32 or dtype buffer [n_layer, 2, B, n_head, max_pos, "
     "head_dim]: the keys and values of every position so far (prefill writes, decode appends)"},
    {"lengths", PL_KEY_NAME, NULL, NULL,
     "prefill (default: T each), decode (needs it): device i32 buffer [B]: each prompt's length "
     "(prompts right-padded to T)"},
    {"step", PL_KEY_NAME, NULL, NULL,
     "decode needs it: device i32 buffer [1]: tokens appended since the prompt (a loop's "
     "index): the new token's position is lengths[b] + step"},
    {"weights", PL_KEY_STR, NULL, "random",
     "a Hugging Face snapshot directory (config.json + model.safetensors), a .safetensors file "
     "(config.json beside it), or random"},
    {"config", PL_KEY_ENUM, "gpt2|gpt2-medium|gpt2-large|gpt2-xl|tiny", "gpt2",
     "weights: random: the model size (tiny: 2 layers, 4 heads, 64 wide, vocab 512, n_ctx 128)"},
    {"n_layer", PL_KEY_INT, NULL, NULL, "layers (overrides config; must match a checkpoint's)"},
    {"n_head", PL_KEY_INT, NULL, NULL, "attention heads (overrides config)"},
    {"n_embd", PL_KEY_INT, NULL, NULL, "width (overrides config)"},
    {"vocab", PL_KEY_INT, NULL, NULL, "vocabulary size (overrides config)"},
    {"n_ctx", PL_KEY_INT, NULL, NULL, "positions (overrides config)"},
    {"seed", PL_KEY_INT, NULL, "run seed", "weights: random: the weights' seed"},
    {"dtype", PL_KEY_ENUM, "f16|bf16", "f16",
     "GPU: weights and activations (f32 accumulation and residual stream); the host reference "
     "computes in f32"},
    {"output", PL_KEY_ENUM, "logits|argmax|logprob", "logits",
     "what `out` gets: the logits, the most likely next token, or log p(targets)"},
    {"positions", PL_KEY_ENUM, "last|all", "logits, logprob: all; argmax: last",
     "every position, or only each sequence's last"},
    PL_KIND_CHUNKS_KEY,
    {"ordered", PL_KEY_BOOL, NULL, "true",
     "GPU: the forward of batch i + 1 waits for batch i's (the earliest result for each batch); "
     "false: forwards of batches in different slots may run at once, sharing the SMs (more "
     "batches a second when the forward is the bound, each one later)"},
    {"tune", PL_KEY_BOOL, NULL, "true",
     "GPU: time cuBLASLt's candidate algorithms for each GEMM shape once, at open, and keep the "
     "fastest; false: its heuristic's first choice (a quicker open)"},
    {"matvec", PL_KEY_ENUM, "auto|off", "auto",
     "GPU, mode decode: auto: at batch 1 the four linear layers of each block run as "
     "matrix-vector kernels with ln_1, ln_2, the bias, GELU and residual folded in (5 launches a "
     "block instead of 7); off: cuBLASLt GEMMs and the kernels between them, as at larger "
     "batches"},
    {"attention", PL_KEY_ENUM, "flash|naive", "flash",
     "GPU: the attention kernel: flash (fused, on tensor cores) or naive (a plain kernel, slow: to "
     "tell an attention bug from the rest)"},
    {NULL, 0, NULL, NULL, NULL},
};

enum { PL__GPT2_FORWARD, PL__GPT2_PREFILL, PL__GPT2_DECODE };
static const char *const pl__mode_names[] = {"forward", "prefill", "decode"};

static const char *const pl__cfg_keys[5] = {"n_layer", "n_head", "n_embd", "vocab", "n_ctx"};

typedef struct pl__gpt2_opts {
    bool random;
    const char *weights; /* as written */
    pl_pos weights_pos;
    int preset;
    pl_gpt2_cfg cfg;  /* resolved in validate (config.json or preset + overrides) */
    int64_t given[5]; /* n_* overrides, 0 = not given */
    pl_pos given_pos[5];
    int64_t seed;
    bool has_seed;
    pl_dtype dtype;
    pl_gpt2_output output;
    bool all;
    bool tune;            /* tune: (GPU) time the GEMM candidates at open */
    bool naive_attention; /* attention: naive (GPU) */
    bool matvec;          /* matvec: auto (GPU, decode) */
    int mode;             /* PL__GPT2_FORWARD, PREFILL, DECODE */
    int r_ids, r_targets, w_out;
    int r_lengths, r_step, r_cache, w_cache; /* prefill, decode: -1 when absent */
    char st_path[4096 + 64];                 /* resolved model.safetensors (validate) */
} pl__gpt2_opts;

static const pl_gpt2_cfg pl__presets[] = {
    {12, 12, 768, 50257, 1024, 1e-5f},  {24, 16, 1024, 50257, 1024, 1e-5f},
    {36, 20, 1280, 50257, 1024, 1e-5f}, {48, 25, 1600, 50257, 1024, 1e-5f},
    {2, 4, 64, 512, 128, 1e-5f},
};

/* "error: <what>" (a message without position) becomes "file:line:col: error: <what>". */
static pl_status pl__at(pl_error *err, pl_pos pos)
{
    if (!err) return PL_EINPUT;
    char msg[PL_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", strncmp(err->msg, "error: ", 7) == 0 ? err->msg + 7 : err->msg);
    return pl_error_at(err, err->status, pos, "%s", msg);
}

/* bind for mode prefill and decode: the cache (prefill writes it; decode reads and appends),
 * the lengths and the step; the keys that only the forward reads are refused. */
static pl_status pl__gpt2_bind_gen(pl_spec *spec, pl_stage *st, pl__gpt2_opts *o, pl_error *err)
{
    const char *mn = pl__mode_names[o->mode];
    static const char *const fwd_only[] = {"targets", "positions", "chunks", "chunk_dims"};
    for (int i = 0; i < 4; i++) {
        const pl_opt *k = pl_stage_opt(st, fwd_only[i]);
        if (k)
            return pl_error_at(err, PL_EINPUT, k->pos,
                               "gpt2 stage '%s': '%s:' is for mode forward; mode %s writes each "
                               "sequence's last position, unchunked",
                               st->name, fwd_only[i], mn);
    }
    if (o->output == PL_GPT2_LOGPROB)
        return pl_error_at(err, PL_EINPUT, pl_stage_opt(st, "output")->val_pos,
                           "gpt2 stage '%s': mode %s writes logits or argmax, not logprob (score "
                           "a text with mode forward)",
                           st->name, mn);
    o->all = false;
    bool dec = o->mode == PL__GPT2_DECODE;
    PL_CHECK(pl_kind_bind_ref(spec, st, "cache", true, true,
                              "the KV cache, [n_layer, 2, B, n_head, max_pos, head_dim]",
                              &o->w_cache, err));
    o->r_cache = -1;
    if (dec) /* decode appends: it reads what prefill and the steps before it wrote */
        PL_CHECK(pl_kind_bind_ref(spec, st, "cache", false, true, "", &o->r_cache, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "lengths", false, dec, "each prompt's length, i32 [B]",
                              &o->r_lengths, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "step", false, dec,
                              "the tokens appended since the prompt, i32 [1]: a loop's index",
                              &o->r_step, err));
    const pl_opt *sp = pl_stage_opt(st, "step");
    if (!dec && sp)
        return pl_error_at(err, PL_EINPUT, sp->pos,
                           "gpt2 stage '%s': 'step:' is read by mode decode only (prefill starts "
                           "at position 0)",
                           st->name);
    return PL_OK;
}

static pl_status pl__gpt2_bind(pl_spec *spec, pl_stage *st, pl_error *err)
{
    pl__gpt2_opts *o = pl_spec_alloc(spec, sizeof *o);
    if (!o) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    memset(o, 0, sizeof *o);
    const pl_opt *w = pl_stage_opt(st, "weights");
    o->weights = w ? w->str : "random";
    o->weights_pos = w ? w->val_pos : st->pos;
    o->random = strcmp(o->weights, "random") == 0;
    PL_CHECK(pl_opt_get_enum(st, "config", 0, &o->preset, err));
    bool ordered = true;
    PL_CHECK(pl_opt_get_bool(st, "ordered", true, &ordered, err));
    st->unordered = !ordered;
    for (int i = 0; i < 5; i++) {
        const pl_opt *k = pl_stage_opt(st, pl__cfg_keys[i]);
        PL_CHECK(pl_opt_get_int(st, pl__cfg_keys[i], 0, 1, 1 << 24, &o->given[i], err));
        if (k) o->given_pos[i] = k->val_pos;
    }
    o->has_seed = pl_stage_opt(st, "seed") != NULL;
    PL_CHECK(pl_opt_get_int(st, "seed", 0, INT64_MIN, INT64_MAX, &o->seed, err));
    int dt, out;
    PL_CHECK(pl_opt_get_enum(st, "dtype", 0, &dt, err));
    o->dtype = dt == 0 ? PL_F16 : PL_BF16;
    PL_CHECK(pl_opt_get_enum(st, "output", 0, &out, err));
    o->output = (pl_gpt2_output)out;
    int pos;
    PL_CHECK(pl_opt_get_enum(st, "positions", o->output == PL_GPT2_ARGMAX ? 0 : 1, &pos, err));
    o->all = pos == 1;
    PL_CHECK(pl_opt_get_bool(st, "tune", true, &o->tune, err));
    int attn;
    PL_CHECK(pl_opt_get_enum(st, "attention", 0, &attn, err));
    o->naive_attention = attn == 1;
    int mv;
    PL_CHECK(pl_opt_get_enum(st, "matvec", 0, &mv, err));
    o->matvec = mv == 0;
    PL_CHECK(pl_opt_get_enum(st, "mode", PL__GPT2_FORWARD, &o->mode, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "ids", false, true,
                              o->mode == PL__GPT2_DECODE ? "each sequence's latest token, i32 [B]"
                                                         : "the token ids, i32 [B, T]",
                              &o->r_ids, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "targets", false, false, "", &o->r_targets, err));
    PL_CHECK(pl_kind_bind_ref(spec, st, "out", true, true, "the buffer the output goes to",
                              &o->w_out, err));
    st->priv = o;
    if (o->mode != PL__GPT2_FORWARD) return pl__gpt2_bind_gen(spec, st, o, err);
    if (o->output == PL_GPT2_LOGPROB && o->r_targets < 0)
        return pl_error_at(err, PL_EINPUT, st->pos,
                           "gpt2 stage '%s': output logprob needs 'targets:' (i32 [B, T], the ids "
                           "whose log-probability is wanted)",
                           st->name);
    if (o->output != PL_GPT2_LOGPROB && o->r_targets >= 0)
        return pl_error_at(err, PL_EINPUT, pl_stage_opt(st, "targets")->val_pos,
                           "gpt2 stage '%s': 'targets:' is only read by output logprob", st->name);
    static const char *const gen_only[] = {"cache", "lengths", "step"};
    for (int i = 0; i < 3; i++) {
        const pl_opt *k = pl_stage_opt(st, gen_only[i]);
        if (k)
            return pl_error_at(err, PL_EINPUT, k->pos,
                               "gpt2 stage '%s': '%s:' is read by mode prefill and decode only; "
                               "add 'mode: prefill' or 'mode: decode', or drop the key",
                               st->name, gen_only[i]);
    }
    o->r_lengths = o->r_step = o->r_cache = o->w_cache = -1;
    /* blocks of whole sequences, or with chunk_dims: 2 of positions */
    return pl_kind_bind_chunks(spec, st, o->r_ids, err);
}

/* ---- blocks (`chunks:`) ---- */

/* One block of a checked stage's forward. Whole: `seqs` sequences from `seq`, every position (t0
 * 0, t1 T). Part (chunk_dims: 2, a block inside one sequence): positions [t0, t1) of sequence
 * `seq`. The first part of a sequence runs the layers (the trunk) on all of its T positions and
 * the head (ln_f, the LM head and what follows) on its own rows; the parts after it run only the
 * head, on their rows of the trunk's output, which stays in the scratch until the sequence's last
 * part (the blocks run in order on one scratch). Only the head is split: the first rows' logits of
 * a batch can start down while the rest of the head is computed, and the layers run once
 * (measured against running each part as a forward of its first t1 positions on a stream of its
 * own, which lost: docs/perf.md). */
typedef struct pl__gpt2_blk {
    int seq, seqs, t0, t1;
    bool trunk; /* runs the layers (a whole block, or a sequence's first part) */
} pl__gpt2_blk;

/* The blocks of a stage whose chunk_rows are checked, into bk (at most PL_MAX_CHUNKS), and how
 * many there are. Returns -1, or the index of the first block that crosses into another sequence
 * without covering whole ones (no block table then). */
static int pl__gpt2_blocks(const pl_stage *st, int B, int T, pl__gpt2_blk *bk, int *n)
{
    *n = st->chunks > 1 ? st->chunks : 1;
    if (st->chunks <= 1) {
        bk[0] = (pl__gpt2_blk){0, B, 0, T, true};
        return -1;
    }
    bool pos = st->chunk_dims >= 2; /* rows are positions, else sequences */
    int64_t at = 0;                 /* the block's first row, in positions */
    for (int j = 0; j < *n; j++) {
        int64_t r = pos ? st->chunk_rows[j] : st->chunk_rows[j] * T;
        int seq = (int)(at / T), t0 = (int)(at % T);
        if (t0 == 0 && r % T == 0)
            bk[j] = (pl__gpt2_blk){seq, (int)(r / T), 0, T, true};
        else if (t0 + r <= T)
            bk[j] = (pl__gpt2_blk){seq, 1, t0, (int)(t0 + r), t0 == 0};
        else
            return j;
        at += r;
    }
    return -1;
}

/* validate's rules for the blocks: each is whole sequences or part of one; parts only where every
 * position is computed. */
static pl_status pl__gpt2_check_blocks(const pl_stage *st, const pl__gpt2_opts *o, int B, int T,
                                       pl_error *err)
{
    pl__gpt2_blk bk[PL_MAX_CHUNKS];
    int n, bad = pl__gpt2_blocks(st, B, T, bk, &n);
    if (bad >= 0) {
        int64_t a = 0;
        for (int j = 0; j < bad; j++)
            a += st->chunk_rows[j];
        int64_t b = a + st->chunk_rows[bad];
        return pl_error_at(err, PL_EINPUT, st->chunks_pos,
                           "gpt2 stage '%s': chunks entry %d covers positions %lld-%lld of the "
                           "batch's %d x %d, from sequence %lld into sequence %lld; a block is "
                           "whole sequences or part of one (split it at position %lld)",
                           st->name, bad + 1, (long long)a, (long long)(b - 1), B, T,
                           (long long)(a / T), (long long)((b - 1) / T),
                           (long long)(a / T + 1) * T);
    }
    for (int j = 0; j < n && !o->all; j++)
        if (bk[j].seqs == 1 && (bk[j].t0 > 0 || bk[j].t1 < T))
            return pl_error_at(err, PL_EINPUT, st->chunks_pos,
                               "gpt2 stage '%s': chunks entry %d is part of sequence %d "
                               "(positions %d-%d), but with positions: last only each "
                               "sequence's last position is computed; use positions: all, or "
                               "blocks of whole sequences",
                               st->name, j + 1, bk[j].seq, bk[j].t0, bk[j].t1 - 1);
    return PL_OK;
}

/* The checkpoint's config.json and model.safetensors for `weights` as written. */
static pl_status pl__gpt2_resolve(const pl_spec *spec, const pl_stage *st, pl__gpt2_opts *o,
                                  pl_error *err)
{
    char what[128], path[4000], cfg_path[4096 + 16];
    snprintf(what, sizeof what, "gpt2 stage '%s'", st->name);
    pl_spec_path(spec, o->weights, path, sizeof path);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return pl_error_at(err, PL_EINPUT, o->weights_pos,
                           "gpt2 stage '%s': weights '%s': %s (give a Hugging Face snapshot "
                           "directory, a .safetensors file, or random)",
                           st->name, path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        snprintf(cfg_path, sizeof cfg_path, "%s/config.json", path);
        /* One file, or the shards save_pretrained writes for large models, with their index. */
        snprintf(o->st_path, sizeof o->st_path, "%s/model.safetensors", path);
        struct stat one;
        char idx[4000 + 40];
        snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", path);
        if (stat(o->st_path, &one) != 0 && stat(idx, &one) == 0)
            snprintf(o->st_path, sizeof o->st_path, "%s", idx);
    } else {
        snprintf(o->st_path, sizeof o->st_path, "%s", path);
        char *slash = strrchr(path, '/');
        if (slash)
            snprintf(cfg_path, sizeof cfg_path, "%.*s/config.json", (int)(slash - path), path);
        else
            snprintf(cfg_path, sizeof cfg_path, "config.json");
    }
    if (pl_gpt2_config_read(cfg_path, &o->cfg, what, err) != PL_OK)
        return pl__at(err, o->weights_pos);
    const int *have[5] = {&o->cfg.n_layer, &o->cfg.n_head, &o->cfg.n_embd, &o->cfg.vocab,
                          &o->cfg.n_ctx};
    for (int i = 0; i < 5; i++)
        if (o->given[i] && o->given[i] != *have[i])
            return pl_error_at(err, PL_EINPUT, o->given_pos[i],
                               "gpt2 stage '%s': %s %lld, but the checkpoint's config '%s' says "
                               "%d; drop the key or fix it",
                               st->name, pl__cfg_keys[i], (long long)o->given[i], cfg_path,
                               *have[i]);
    if (pl_gpt2_weights_check(o->st_path, &o->cfg, what, err) != PL_OK)
        return pl__at(err, o->weights_pos);
    return PL_OK;
}

/* A device i32 buffer of shape [n] (n < 0: any length), or an error naming key and shape. */
static pl_status pl__gpt2_vec(const pl_spec *spec, const pl_stage *st, int r, const char *key,
                              int64_t n, const char *what, pl_error *err)
{
    if (r < 0) return PL_OK;
    const pl_buffer *b = pl_kind_rbuf(spec, st, r);
    if (b->where == PL_DEVICE && b->dtype == PL_I32 && b->rank == 1 && b->shape[0] == n)
        return PL_OK;
    char s1[96];
    return pl_error_at(err, PL_EINPUT, st->reads[r].pos,
                       "gpt2 stage '%s': %s '%s' must be a device i32 buffer [%lld] (%s), not %s "
                       "%s %s",
                       st->name, key, b->name, (long long)n, what, pl_where_name(b->where),
                       pl_dtype_name(b->dtype), pl_kind_shape(b, s1, sizeof s1));
}

/* validate for mode prefill and decode (the configuration resolved): ids, lengths, step, the
 * cache's exact shape and dtype, and the output. */
static pl_status pl__gpt2_validate_gen(const pl_spec *spec, const pl_stage *st,
                                       const pl__gpt2_opts *o, pl_error *err)
{
    const pl_gpt2_cfg *c = &o->cfg;
    bool dec = o->mode == PL__GPT2_DECODE;
    char s1[128], s2[128];
    const pl_buffer *ids = pl_kind_rbuf(spec, st, o->r_ids),
                    *out = pl_kind_wbuf(spec, st, o->w_out),
                    *kv = pl_kind_wbuf(spec, st, o->w_cache);
    int want_rank = dec ? 1 : 2;
    if (ids->where != PL_DEVICE || ids->dtype != PL_I32 || ids->rank != want_rank)
        return pl_error_at(err, PL_EINPUT, st->reads[o->r_ids].pos,
                           "gpt2 stage '%s': ids '%s' must be a device i32 buffer %s, not %s %s %s",
                           st->name, ids->name,
                           dec ? "[B] (each sequence's latest token)" : "[B, T]",
                           pl_where_name(ids->where), pl_dtype_name(ids->dtype),
                           pl_kind_shape(ids, s1, sizeof s1));
    int64_t B = ids->shape[0], T = dec ? 1 : ids->shape[1];
    if (T > c->n_ctx)
        return pl_error_at(err, PL_EINPUT, st->reads[o->r_ids].pos,
                           "gpt2 stage '%s': ids '%s' has %lld positions, but the model's n_ctx "
                           "is %d",
                           st->name, ids->name, (long long)T, c->n_ctx);
    if (B * T > INT32_MAX / 4 || B * T * (int64_t)c->n_embd * 4 > (INT64_C(1) << 36))
        return pl_error_at(err, PL_EINPUT, st->reads[o->r_ids].pos,
                           "gpt2 stage '%s': %lld x %lld tokens per batch is too many; split the "
                           "batch",
                           st->name, (long long)B, (long long)T);
    PL_CHECK(pl__gpt2_vec(spec, st, o->r_lengths, "lengths", B, "each prompt's length", err));
    PL_CHECK(
        pl__gpt2_vec(spec, st, o->r_step, "step", 1, "the tokens appended since the prompt", err));
    /* The cache: [n_layer, 2, B, n_head, max_pos, head_dim], max_pos from T (prefill) to n_ctx. */
    int64_t lo = dec ? 1 : T, P = kv->rank == 6 ? kv->shape[4] : c->n_ctx;
    if (P < lo || P > c->n_ctx) P = c->n_ctx;
    pl_buffer want = *kv;
    int64_t dims[6] = {c->n_layer, 2, B, c->n_head, P, c->n_embd / c->n_head};
    want.rank = 6;
    memcpy(want.shape, dims, sizeof dims);
    if (kv->where != PL_DEVICE || (kv->dtype != PL_F32 && kv->dtype != o->dtype) ||
        !pl_kind_same_shape(kv, &want)) {
        char range[64];
        if (lo == c->n_ctx)
            snprintf(range, sizeof range, "max_pos %d: n_ctx", c->n_ctx);
        else
            snprintf(range, sizeof range, "max_pos from %lld to n_ctx %d", (long long)lo, c->n_ctx);
        return pl_error_at(err, PL_EINPUT, st->writes[o->w_cache].pos,
                           "gpt2 stage '%s': cache '%s' must be a device %s or f32 buffer %s "
                           "([n_layer, 2, B, n_head, max_pos, head_dim], %s), not %s %s %s",
                           st->name, kv->name, pl_dtype_name(o->dtype),
                           pl_kind_shape(&want, s1, sizeof s1), range, pl_where_name(kv->where),
                           pl_dtype_name(kv->dtype), pl_kind_shape(kv, s2, sizeof s2));
    }
    /* The output: each sequence's last position. */
    pl_buffer wo = *ids;
    wo.rank = 1;
    wo.shape[0] = B;
    if (o->output == PL_GPT2_LOGITS) wo.shape[wo.rank++] = c->vocab;
    bool dt_ok = o->output == PL_GPT2_LOGITS
                     ? (out->dtype == PL_F16 || out->dtype == PL_BF16 || out->dtype == PL_F32)
                     : out->dtype == PL_I32;
    if (out->where != PL_DEVICE || !dt_ok || !pl_kind_same_shape(out, &wo))
        return pl_error_at(err, PL_EINPUT, st->writes[o->w_out].pos,
                           "gpt2 stage '%s': mode %s with output %s writes a device %s buffer %s; "
                           "'%s' is %s %s %s",
                           st->name, pl__mode_names[o->mode],
                           o->output == PL_GPT2_LOGITS ? "logits" : "argmax",
                           o->output == PL_GPT2_LOGITS ? "f16, bf16 or f32" : "i32",
                           pl_kind_shape(&wo, s1, sizeof s1), out->name, pl_where_name(out->where),
                           pl_dtype_name(out->dtype), pl_kind_shape(out, s2, sizeof s2));
    return PL_OK;
}

static pl_status pl__gpt2_validate(const pl_spec *spec, const pl_stage *st, pl_error *err)
{
    pl__gpt2_opts *o = st->priv;
    char s1[96], s2[96];
    if (o->random) {
        o->cfg = pl__presets[o->preset];
        int *set[5] = {&o->cfg.n_layer, &o->cfg.n_head, &o->cfg.n_embd, &o->cfg.vocab,
                       &o->cfg.n_ctx};
        for (int i = 0; i < 5; i++)
            if (o->given[i]) *set[i] = (int)o->given[i];
        char what[128];
        snprintf(what, sizeof what, "gpt2 stage '%s'", st->name);
        if (pl_gpt2_config_check(&o->cfg, what, err) != PL_OK) return pl__at(err, st->pos);
    } else {
        PL_CHECK(pl__gpt2_resolve(spec, st, o, err));
    }
    if (o->mode != PL__GPT2_FORWARD) return pl__gpt2_validate_gen(spec, st, o, err);
    const pl_buffer *ids = pl_kind_rbuf(spec, st, o->r_ids),
                    *out = pl_kind_wbuf(spec, st, o->w_out);
    if (ids->where != PL_DEVICE || ids->dtype != PL_I32 || ids->rank != 2)
        return pl_error_at(err, PL_EINPUT, st->reads[o->r_ids].pos,
                           "gpt2 stage '%s': ids '%s' must be a device i32 buffer [B, T], not %s "
                           "%s %s",
                           st->name, ids->name, pl_where_name(ids->where),
                           pl_dtype_name(ids->dtype), pl_kind_shape(ids, s1, sizeof s1));
    int64_t B = ids->shape[0], T = ids->shape[1];
    if (T > o->cfg.n_ctx)
        return pl_error_at(err, PL_EINPUT, st->reads[o->r_ids].pos,
                           "gpt2 stage '%s': ids '%s' has %lld positions, but the model's n_ctx "
                           "is %d",
                           st->name, ids->name, (long long)T, o->cfg.n_ctx);
    if (B * T > INT32_MAX / 4 || B * T * (int64_t)o->cfg.n_embd * 4 > (INT64_C(1) << 36))
        return pl_error_at(err, PL_EINPUT, st->reads[o->r_ids].pos,
                           "gpt2 stage '%s': %lld x %lld tokens per batch is too many; split the "
                           "batch",
                           st->name, (long long)B, (long long)T);
    if (o->r_targets >= 0) {
        const pl_buffer *tg = pl_kind_rbuf(spec, st, o->r_targets);
        if (tg->where != PL_DEVICE || tg->dtype != PL_I32 || !pl_kind_same_shape(tg, ids))
            return pl_error_at(err, PL_EINPUT, st->reads[o->r_targets].pos,
                               "gpt2 stage '%s': targets '%s' must be a device i32 buffer %s like "
                               "ids '%s', not %s %s %s",
                               st->name, tg->name, pl_kind_shape(ids, s1, sizeof s1), ids->name,
                               pl_where_name(tg->where), pl_dtype_name(tg->dtype),
                               pl_kind_shape(tg, s2, sizeof s2));
    }
    /* The output's expected shape and dtypes. */
    pl_buffer want = *ids;
    want.rank = o->all ? 2 : 1;
    if (o->output == PL_GPT2_LOGITS) want.shape[want.rank++] = o->cfg.vocab;
    bool dt_ok = o->output == PL_GPT2_LOGITS
                     ? (out->dtype == PL_F16 || out->dtype == PL_BF16 || out->dtype == PL_F32)
                 : o->output == PL_GPT2_ARGMAX ? out->dtype == PL_I32
                                               : out->dtype == PL_F32;
    if (out->where != PL_DEVICE || !dt_ok || !pl_kind_same_shape(out, &want)) {
        static const char *const dts[] = {"f16, bf16 or f32", "i32", "f32"};
        static const char *const outs[] = {"logits", "argmax", "logprob"};
        return pl_error_at(err, PL_EINPUT, st->writes[o->w_out].pos,
                           "gpt2 stage '%s': output %s with positions %s writes a device %s "
                           "buffer %s; '%s' is %s %s %s",
                           st->name, outs[o->output], o->all ? "all" : "last", dts[o->output],
                           pl_kind_shape(&want, s1, sizeof s1), out->name,
                           pl_where_name(out->where), pl_dtype_name(out->dtype),
                           pl_kind_shape(out, s2, sizeof s2));
    }
    return pl__gpt2_check_blocks(st, o, (int)B, (int)T, err);
}

/* ---- device memory: what the GPU forward allocates in open() ---- */

#define PL__WS_BYTES (32u << 20) /* cuBLASLt workspace, per slot */

static size_t pl__al(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

/* One scratch's sizes (bytes, each rounded up to 256): the activations of a forward of N positions
 * of Bc sequences, whose head writes `rows` rows. */
typedef struct pl__scr_sz {
    size_t x, h, qkv, u, hl, xl, lg, parts, count, all;
} pl__scr_sz;

/* The GPU forward's shapes and memory for a checked stage: its head (the padded columns, the f32
 * kernel at the last positions), one slot's activations and the weights' device copy, for its
 * largest block (Bc sequences; a part counts one; every block runs on the same scratch). open()
 * allocates exactly this (and checks that its layout agrees); the kind's
 * device_memory hook reports it, so run.memory_budget and depth: auto count what runs.
 * Build-independent: the same figures with or without CUDA. */
typedef struct pl__gpt2_mem {
    int Bc, T, rows, ldv;
    int splits; /* prefill, decode: the cached attention's blocks per (sequence, head) */
    pl_dtype lg_dtype;
    bool small_head, unpad;
    pl__scr_sz main;
    size_t per_slot, weights;
} pl__gpt2_mem;

static void pl__scr_of(const pl__gpt2_opts *o, const pl__gpt2_mem *m, size_t N, size_t rows,
                       size_t Bc, pl__scr_sz *z)
{
    size_t C = (size_t)o->cfg.n_embd, es = pl_dtype_size(o->dtype);
    z->x = pl__al(N * C * 4);
    z->h = pl__al(N * C * es);
    z->qkv = pl__al(N * 3 * C * es);
    z->u = pl__al(N * 4 * C * es);
    z->hl = pl__al(Bc * C * 4); /* f32 (small head), or E and its residual */
    z->xl = o->all ? 0 : pl__al(Bc * C * 4);
    z->lg = o->output == PL_GPT2_LOGITS && !m->unpad
                ? 0
                : pl__al(rows * (size_t)m->ldv * pl_dtype_size(m->lg_dtype));
    /* The cached attention's partial results (m, l and hd sums per split) where it splits. */
    size_t H = (size_t)o->cfg.n_head, hd = C / H;
    z->parts = m->splits > 1 ? pl__al(Bc * H * (size_t)m->splits * (hd + 2) * 4) : 0;
    /* and a count a (sequence, head): the last split to finish merges them */
    z->count = m->splits > 1 ? pl__al(Bc * H * 4) : 0;
    z->all = z->x + 2 * z->h + z->qkv + z->u + z->hl + z->xl + z->lg + z->parts + z->count +
             PL__WS_BYTES;
}

/* The cached attention (prefill's last layer, decode) runs a block per (sequence, head) and
 * split of the keys: splits so that B x n_head x splits blocks fill 264 = 2 x 132 (the H200's
 * SMs), at most 32 (the kernel's merge, kCachedMaxSplits) and at least 16 keys a split at
 * max_pos (a block's round of keys: at batch 1 a block waits on one or two rows a lane, not a
 * chain of them). A function of the shapes only, not of the device, so the results' bits do not
 * depend on the GPU's size. */
static int pl__gpt2_splits(int B, int H, int P)
{
    int want = (264 + B * H - 1) / (B * H), most = (P + 15) / 16;
    if (want > most) want = most;
    if (want > 32) want = 32;
    return want < 1 ? 1 : want;
}

/* The gpt2 stage of spec with the lowest index that shares st's weights (pl_gpt2_model_key's
 * equality at check time: the same checkpoint or seed, config and dtype), possibly st itself. */
static const pl_stage *pl__gpt2_first_sharer(const pl_spec *spec, const pl_stage *st)
{
    const pl__gpt2_opts *o = st->priv;
    for (int i = 0; i < spec->n_stages; i++) {
        const pl_stage *a = &spec->stages[i];
        if (a == st) return st;
        if (a->kind != st->kind || !a->priv) continue;
        const pl__gpt2_opts *p = a->priv;
        uint64_t sa = p->has_seed ? (uint64_t)p->seed : spec->run.seed,
                 so = o->has_seed ? (uint64_t)o->seed : spec->run.seed;
        if (p->random == o->random && p->dtype == o->dtype &&
            memcmp(&p->cfg, &o->cfg, sizeof o->cfg) == 0 &&
            (o->random ? sa == so : strcmp(p->st_path, o->st_path) == 0))
            return a;
    }
    return st;
}

static void pl__gpt2_mem_of(const pl_spec *spec, const pl_stage *st, pl__gpt2_mem *m)
{
    const pl__gpt2_opts *o = st->priv;
    const pl_gpt2_cfg *c = &o->cfg;
    const pl_buffer *ids = pl_kind_rbuf(spec, st, o->r_ids),
                    *out = pl_kind_wbuf(spec, st, o->w_out);
    memset(m, 0, sizeof *m);
    size_t C = (size_t)c->n_embd;
    pl__gpt2_blk bk[PL_MAX_CHUNKS];
    int nb, T = o->mode == PL__GPT2_DECODE ? 1 : (int)ids->shape[1]; /* decode: one position */
    pl__gpt2_blocks(st, (int)ids->shape[0], T, bk, &nb);             /* checked: no bad block */
    m->T = T;
    for (int j = 0; j < nb; j++)
        m->Bc = bk[j].seqs > m->Bc ? bk[j].seqs : m->Bc;
    size_t N = (size_t)m->Bc * (size_t)T;
    m->rows = o->all ? (int)N : m->Bc;
    /* argmax and logprob read f32 logits: 16-bit ones tie near the top (bf16 keeps 8 bits). */
    m->lg_dtype = o->output == PL_GPT2_LOGITS ? out->dtype : PL_F32;
    /* The last positions into f32 logits (argmax, logprob, f32 logits): B rows, a matrix-vector
     * product in f32 from ln_f's f32 output (pl_gpt2_head_small_ok's rule; smaller blocks have
     * fewer rows, so the largest decides for all). */
    m->small_head = !o->all && m->lg_dtype == PL_F32 && m->rows >= 1 &&
                    m->rows <= PL_GPT2_HEAD_MAX_ROWS && C % 8 == 0;
    /* The LM head's columns padded to 64 for logits through cuBLASLt (measured on the H200,
     * docs/perf.md: GPT-2's 50257 leaves cuBLASLt only slow kernels, 3.05 ms against 0.88 with
     * the padding and the packing at B 8, T 512): wte gets zero rows up to ldv, the head computes
     * ldv columns into scratch rows of ldv, and a copy packs the first vocab of each into `out`.
     * argmax and logprob (f32 scratch logits, read by their own kernels) are not padded yet. */
    m->ldv = o->output == PL_GPT2_LOGITS && !m->small_head ? (c->vocab + 63) / 64 * 64 : c->vocab;
    m->unpad = m->ldv != c->vocab;
    if (o->mode != PL__GPT2_FORWARD) {
        const pl_buffer *kv = pl_kind_wbuf(spec, st, o->w_cache);
        m->splits = pl__gpt2_splits(m->Bc, c->n_head, (int)kv->shape[4]);
    }
    pl__scr_of(o, m, N, (size_t)m->rows, (size_t)m->Bc, &m->main);
    m->per_slot = m->main.all;
    m->weights = pl_gpt2_model_device_bytes(c, o->dtype);
}

static void pl__gpt2_device_memory(const pl_spec *spec, const pl_stage *st, uint64_t *per_slot,
                                   uint64_t *persistent)
{
    pl__gpt2_mem m;
    pl__gpt2_mem_of(spec, st, &m);
    *per_slot = m.per_slot;
    /* One copy of the weights for the stages that share them (gpt2_model.h): the first counts it.
     */
    *persistent = pl__gpt2_first_sharer(spec, st) == st ? m.weights : 0;
}

/* ---- per-run state ---- */

#ifdef PL_WITH_CUDA
/* The matmuls of one block shape: a cuBLASLt plan (and its tuned algorithm) is for one shape, so
 * each distinct block shape (`chunks: [1, 1, 2, 4]` has three) has its own set. */
typedef struct pl__lmm {
    pl_gpu_mm *qkv, *proj, *fc, *out;
} pl__lmm;
typedef struct pl__mmset {
    int Bc;     /* sequences of the blocks that use it */
    bool trunk; /* has the layers' matmuls (not: the head of a sequence's later parts only) */
    int hrows;  /* the rows the head computes: Bc x T, Bc (last positions), a part's t1 - t0 */
    pl__lmm *l; /* [n_layer] */
    /* Last positions only: the last layer after its QKV GEMM runs on the Bc last rows. */
    pl_gpu_mm *proj_last, *fc_last, *out_last;
    pl_gpu_mm *head, *head_lo; /* head_lo: split head (bf16 into f32 logits) */
} pl__mmset;

/* One forward's activations (pointers into a slot's allocation). */
typedef struct pl__dscr {
    float *x;                /* [N, C] residual stream */
    void *h, *qkv, *att, *u; /* E: [N, C], [N, 3C], [N, C], [N, 4C] */
    void *hl, *hl_lo;        /* E [B, C]: ln_f of the last positions, its rounding residual */
    float *xl;               /* [B, C]: the last layer's residual stream at the last positions */
    void *logits;            /* scratch logits (argmax/logprob, padded head) [rows, ldv] */
    float *parts;            /* prefill, decode: the cached attention's splits' partial results */
    int *count;              /* and their counts (zero between launches) */
    void *ws;                /* cuBLASLt workspace */
} pl__dscr;

/* A slot's device state: one allocation (mem) holding its scratch. */
typedef struct pl__dslot {
    void *mem;
    pl__dscr main;
} pl__dslot;
#endif

typedef struct pl__gpt2_state {
    /* The weights, shared with the run's other gpt2 stages on the same model (gpt2_model.h): the
     * f32 host copy on the host executor, the device copy on the GPU. */
    pl_gpt2_model *m;
    int B, T; /* decode: T = 1 */
    int P;    /* prefill, decode: the cache's positions per sequence */
#ifdef PL_WITH_CUDA
    bool gpu;
    const pl_gpt2_dlayer *layers; /* m's */
    int splits;                   /* prefill, decode: the cached attention's splits */
    pl_gpu_lt *lt;
    int Bc; /* sequences of the largest block: the scratch's size */
    /* The blocks (`chunks:`, or the one unchunked block) and the matmuls of each distinct block
     * shape: block j runs mms[blk_mm[j]]. */
    pl__gpt2_blk blk[PL_MAX_CHUNKS];
    int n_blk;
    pl__mmset *mms;
    int n_mms;
    int blk_mm[PL_MAX_CHUNKS];
    pl_dtype lg_dtype; /* the LM head's output dtype */
    /* The LM head's columns (wte's rows, zero-padded) and output row stride: the vocabulary,
     * rounded up to 64 for logits through cuBLASLt (see open); unpad: they differ, so the head
     * writes the scratch logits and a copy packs them into `out`. */
    int ldv;
    bool unpad;
    bool small_head;      /* last positions into f32: pl_gpt2_launch_head_f32 */
    bool naive_attention; /* attention: naive (from the options, in open) */
    /* decode at batch 1 (matvec: auto): the layers' linears are pl_gpt2_launch_linear_small (no
     * cuBLASLt plans for them) */
    bool matvec;
    int depth;
    pl__dslot *slots;
#endif
} pl__gpt2_state;

#ifdef PL_WITH_CUDA
/* The projection, fc and out GEMMs of one layer on `rows` rows: every position's, or, in the
 * last layer when only the last positions are read, one row per sequence. */
static pl_status pl__proj_mlp_new(const pl__gpt2_state *s, const pl_gpt2_dlayer *D, pl_dtype E,
                                  int C, int rows, pl_gpu_mm **proj, pl_gpu_mm **fc,
                                  pl_gpu_mm **out, const char *nm, pl_error *err)
{
    pl_gpu_mm_shape p = {C, rows, C, E, PL_F32, PL_GPU_EPI_BIAS, D->proj_b, true, 0};
    pl_gpu_mm_shape f = {4 * C, rows, C, E, E, PL_GPU_EPI_GELU_BIAS, D->fc_b, false, 0};
    pl_gpu_mm_shape o = {C, rows, 4 * C, E, PL_F32, PL_GPU_EPI_BIAS, D->out_b, true, 0};
    PL_CHECK(pl_gpu_mm_new(s->lt, &p, PL__WS_BYTES, proj, nm, err));
    PL_CHECK(pl_gpu_mm_new(s->lt, &f, PL__WS_BYTES, fc, nm, err));
    return pl_gpu_mm_new(s->lt, &o, PL__WS_BYTES, out, nm, err);
}

/* The matmuls of blocks of M->Bc sequences (the weights laid out, s's head plan set): the layers'
 * (M->trunk) and the head's, for M->hrows rows. */
static pl_status pl__mmset_new(const pl__gpt2_state *s, const pl__gpt2_opts *o, pl__mmset *M,
                               const char *nm, pl_error *err)
{
    const pl_gpt2_cfg *c = &o->cfg;
    pl_dtype E = o->dtype;
    int N = M->Bc * s->T, C = c->n_embd;
    M->l = M->trunk ? calloc((size_t)c->n_layer, sizeof *M->l) : NULL;
    if (M->trunk && !M->l) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    for (int l = 0; M->l && !s->matvec && l < c->n_layer; l++) {
        const pl_gpt2_dlayer *D = &s->layers[l];
        pl__lmm *X = &M->l[l];
        pl_gpu_mm_shape qkv = {3 * C, N, C, E, E, PL_GPU_EPI_BIAS, D->qkv_b, false, 0};
        PL_CHECK(pl_gpu_mm_new(s->lt, &qkv, PL__WS_BYTES, &X->qkv, nm, err));
        PL_CHECK(pl__proj_mlp_new(s, D, E, C, N, &X->proj, &X->fc, &X->out, nm, err));
    }
    /* Last positions only: the last layer's outputs at the other positions are never read, so
     * after its QKV GEMM (every position's keys and values are needed) it runs on the B last
     * rows: one query's attention per (sequence, head), then the projection, layernorm and MLP
     * on B rows. A twelfth of the forward at GPT-2 124M is not computed. */
    if (!o->all && o->mode != PL__GPT2_DECODE) { /* decode: one position, the last already */
        PL_CHECK(pl__proj_mlp_new(s, &s->layers[c->n_layer - 1], E, C, M->Bc, &M->proj_last,
                                  &M->fc_last, &M->out_last, nm, err));
    }
    if (s->small_head) return PL_OK;
    int rows = M->hrows;
    pl_gpu_mm_shape head = {s->ldv, rows, C, E, s->lg_dtype, PL_GPU_EPI_NONE, NULL, false, s->ldv};
    PL_CHECK(pl_gpu_mm_new(s->lt, &head, PL__WS_BYTES, &M->head, nm, err));
    /* bf16 into f32 logits at every position: ln_f's output rounded to bf16 costs as much accuracy
     * as the rest of the forward together (measured at 124M: it flips a fifth of the argmaxes
     * that differ from f32), so the head also multiplies the rounding residual and accumulates:
     * one more GEMM of the head's size. */
    if (E == PL_BF16 && s->lg_dtype == PL_F32) {
        pl_gpu_mm_shape lo = {s->ldv, rows, C, E, PL_F32, PL_GPU_EPI_NONE, NULL, true, s->ldv};
        PL_CHECK(pl_gpu_mm_new(s->lt, &lo, PL__WS_BYTES, &M->head_lo, nm, err));
    }
    return PL_OK;
}

static void pl__mmset_free(pl__mmset *M, int n_layer)
{
    for (int l = 0; M->l && l < n_layer; l++) {
        pl_gpu_mm_free(M->l[l].qkv);
        pl_gpu_mm_free(M->l[l].proj);
        pl_gpu_mm_free(M->l[l].fc);
        pl_gpu_mm_free(M->l[l].out);
    }
    free(M->l);
    pl_gpu_mm_free(M->proj_last);
    pl_gpu_mm_free(M->fc_last);
    pl_gpu_mm_free(M->out_last);
    pl_gpu_mm_free(M->head);
    pl_gpu_mm_free(M->head_lo);
}

/* Times the heuristic's candidates of M's shapes on slot 0's scratch (sized for the largest
 * block, so any block's operands fit) and lg (the head's output, as large); every layer then
 * runs the winner of its shape. */
static pl_status pl__mmset_tune(const pl__gpt2_state *s, const pl__gpt2_opts *o, pl__mmset *M,
                                void *lg, const char *nm, pl_error *err)
{
    const pl_gpt2_cfg *c = &o->cfg;
    const pl__dscr *d0 = &s->slots[0].main;
    const pl_gpt2_dlayer *L0 = &s->layers[0];
    pl__lmm *X0 = s->matvec ? NULL : M->l;
    if (X0) {
        PL_CHECK(pl_gpu_mm_tune(X0->qkv, L0->qkv_w, d0->h, d0->qkv, d0->ws, nm, NULL, err));
        PL_CHECK(pl_gpu_mm_tune(X0->proj, L0->proj_w, d0->att, d0->x, d0->ws, nm, NULL, err));
        PL_CHECK(pl_gpu_mm_tune(X0->fc, L0->fc_w, d0->h, d0->u, d0->ws, nm, NULL, err));
        PL_CHECK(pl_gpu_mm_tune(X0->out, L0->out_w, d0->u, d0->x, d0->ws, nm, NULL, err));
    }
    for (int l = 1; X0 && l < c->n_layer; l++) {
        pl_gpu_mm_copy_algo(M->l[l].qkv, X0->qkv);
        pl_gpu_mm_copy_algo(M->l[l].proj, X0->proj);
        pl_gpu_mm_copy_algo(M->l[l].fc, X0->fc);
        pl_gpu_mm_copy_algo(M->l[l].out, X0->out);
    }
    if (M->proj_last) {
        const pl_gpt2_dlayer *Ll = &s->layers[c->n_layer - 1];
        PL_CHECK(pl_gpu_mm_tune(M->proj_last, Ll->proj_w, d0->att, d0->xl, d0->ws, nm, NULL, err));
        PL_CHECK(pl_gpu_mm_tune(M->fc_last, Ll->fc_w, d0->h, d0->u, d0->ws, nm, NULL, err));
        PL_CHECK(pl_gpu_mm_tune(M->out_last, Ll->out_w, d0->u, d0->xl, d0->ws, nm, NULL, err));
    }
    if (!M->head) return PL_OK;
    PL_CHECK(
        pl_gpu_mm_tune(M->head, s->m->wte, o->all ? d0->h : d0->hl, lg, d0->ws, nm, NULL, err));
    if (M->head_lo)
        PL_CHECK(pl_gpu_mm_tune(M->head_lo, s->m->wte, o->all ? d0->u : d0->hl_lo, lg, d0->ws, nm,
                                NULL, err));
    return PL_OK;
}

/* Points d into the allocation at *p (advanced past it), laid out as z says; hl_lo sits in hl's
 * bytes after hl_off (the model dtype's rows of the last positions). */
static void pl__carve(unsigned char **p, const pl__scr_sz *z, size_t hl_off, pl__dscr *d)
{
    unsigned char *q = *p;
    d->x = (float *)q;
    q += z->x;
    d->h = q;
    q += z->h;
    d->att = q;
    q += z->h;
    d->qkv = q;
    q += z->qkv;
    d->u = q;
    q += z->u;
    d->hl = q;
    d->hl_lo = q + hl_off;
    q += z->hl;
    d->xl = z->xl ? (float *)q : NULL;
    q += z->xl;
    d->logits = z->lg ? q : NULL;
    q += z->lg;
    d->parts = z->parts ? (float *)q : NULL;
    q += z->parts;
    d->count = z->count ? (int *)q : NULL;
    q += z->count;
    d->ws = q;
    *p = q + PL__WS_BYTES;
}

static pl_status pl__gpt2_gpu_open(const pl_run_env *env, const pl_stage *st,
                                   const pl__gpt2_opts *o, pl__gpt2_state *s, pl_error *err)
{
    const pl_gpt2_cfg *c = &o->cfg;
    const char *nm = st->name;
    pl_dtype E = o->dtype;
    int hd = c->n_embd / c->n_head;
    if (!pl_gpt2_gpu_head_ok(hd))
        return pl_error_set(err, PL_EINPUT,
                            "error: gpt2 stage '%s': the GPU attention kernel is built for head "
                            "sizes 16, 32 and 64; n_embd %d / n_head %d is %d",
                            nm, c->n_embd, c->n_head, hd);
    PL_CHECK(
        pl_cuda_check(pl_gpt2_gpu_setup(), "cudaFuncSetAttribute (gpt2 attention)", nm, -1, err));
    s->gpu = true;
    s->naive_attention = o->naive_attention;
    s->layers = s->m->layers;
    /* The head's plan and every size: pl__gpt2_mem_of. */
    pl__gpt2_mem m;
    pl__gpt2_mem_of(env->spec, st, &m);
    s->lg_dtype = m.lg_dtype;
    s->small_head = m.small_head;
    s->ldv = m.ldv;
    s->unpad = m.unpad;
    s->splits = m.splits;
    {
        int C = c->n_embd, B = s->B;
        s->matvec = o->matvec && o->mode == PL__GPT2_DECODE && B <= PL__GPT2_MATVEC_ROWS &&
                    pl_gpt2_linear_small_ok(PL_GPT2_LIN_LAYERNORM, PL_GPT2_LIN_BIAS, B, C, 3 * C) &&
                    pl_gpt2_linear_small_ok(PL_GPT2_LIN_PLAIN, PL_GPT2_LIN_RESIDUAL, B, C, C) &&
                    pl_gpt2_linear_small_ok(PL_GPT2_LIN_LAYERNORM, PL_GPT2_LIN_GELU, B, C, 4 * C) &&
                    pl_gpt2_linear_small_ok(PL_GPT2_LIN_PLAIN, PL_GPT2_LIN_RESIDUAL, B, 4 * C, C);
    }
    if ((s->small_head && !pl_gpt2_head_small_ok(m.rows, c->n_embd)) || s->ldv > s->m->wte_rows)
        return pl_error_set(err, PL_ERUNTIME,
                            "error: gpt2 stage '%s': internal error: the LM head's %d rows do not "
                            "fit the weights' %d",
                            nm, s->ldv, s->m->wte_rows);
    /* Matmuls, algorithms fixed now: one set per distinct block shape. */
    PL_CHECK(pl_gpu_lt_new(&s->lt, err));
    s->Bc = m.Bc;
    pl__gpt2_blocks(st, s->B, s->T, s->blk, &s->n_blk); /* checked in validate */
    s->mms = calloc((size_t)s->n_blk, sizeof *s->mms);
    if (!s->mms) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    for (int j = 0; j < s->n_blk; j++) {
        const pl__gpt2_blk *bk = &s->blk[j];
        int bc = bk->seqs, hr = !o->all ? bc : bk->seqs * (bk->t1 - bk->t0), k = 0;
        while (k < s->n_mms &&
               (s->mms[k].Bc != bc || s->mms[k].trunk != bk->trunk || s->mms[k].hrows != hr))
            k++;
        if (k == s->n_mms) {
            s->n_mms++; /* counted first: close frees a half-made set */
            s->mms[k].Bc = bc, s->mms[k].trunk = bk->trunk, s->mms[k].hrows = hr;
            PL_CHECK(pl__mmset_new(s, o, &s->mms[k], nm, err));
        }
        s->blk_mm[j] = k;
    }
    /* Per-slot activations: a slot's graph runs while others' do. */
    s->depth = env->depth;
    s->slots = calloc((size_t)s->depth, sizeof *s->slots);
    if (!s->slots) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    for (int i = 0; i < s->depth; i++) {
        pl__dslot *d = &s->slots[i];
        PL_CHECK(pl_gpu_alloc(m.per_slot, &d->mem, nm, err));
        unsigned char *p = d->mem;
        pl__carve(&p, &m.main, (size_t)s->Bc * (size_t)c->n_embd * pl_dtype_size(E), &d->main);
        if (d->main.count) { /* the cached attention's counts start at zero (each launch leaves
                              * them so) */
            size_t nb = (size_t)s->Bc * (size_t)c->n_head * sizeof(int);
            void *zero = calloc(1, nb);
            if (!zero) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
            pl_status zs = pl_gpu_upload(d->main.count, zero, nb, nm, err);
            free(zero);
            PL_CHECK(zs);
        }
    }
    /* Time the heuristic's candidates once on slot 0's scratch (tune: false keeps its first
     * choice), for each block size; every layer then runs the winner of its shape. */
    if (!o->tune) return PL_OK;
    void *lg = s->slots[0].main.logits; /* the head's output: scratch logits of the largest block */
    if (!lg && !s->small_head)
        PL_CHECK(pl_gpu_alloc((size_t)m.rows * s->ldv * pl_dtype_size(s->lg_dtype), &lg, nm, err));
    pl_status ts = PL_OK;
    for (int k = 0; k < s->n_mms && ts == PL_OK; k++)
        ts = pl__mmset_tune(s, o, &s->mms[k], lg, nm, err);
    if (lg != s->slots[0].main.logits) pl_gpu_free(lg);
    return ts;
}
#endif

static pl_status pl__gpt2_close(const pl_run_env *env, const pl_stage *st, void *state,
                                int64_t completed, bool failed, pl_error *err);

static pl_status pl__gpt2_open(const pl_run_env *env, const pl_stage *st, void **state,
                               pl_error *err)
{
    const pl__gpt2_opts *o = st->priv;
    const pl_buffer *ids = pl_kind_rbuf(env->spec, st, o->r_ids);
    pl__gpt2_state *s = calloc(1, sizeof *s);
    if (!s) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    s->B = (int)ids->shape[0];
    s->T = o->mode == PL__GPT2_DECODE ? 1 : (int)ids->shape[1];
    if (o->mode != PL__GPT2_FORWARD) s->P = (int)pl_kind_wbuf(env->spec, st, o->w_cache)->shape[4];
    pl_gpt2_model_key k = {
        o->cfg,     o->dtype,    o->random, o->has_seed ? (uint64_t)o->seed : env->seed,
        o->st_path, env->on_gpu, 0};
#ifdef PL_WITH_CUDA
    if (env->on_gpu) k.device = pl_gpt2_gpu_device();
#endif
    pl_status ps = pl_gpt2_model_open(&k, st->name, &s->m, err);
#ifdef PL_WITH_CUDA
    if (ps == PL_OK && env->on_gpu) ps = pl__gpt2_gpu_open(env, st, o, s, err);
#endif
    if (ps != PL_OK) {
        pl__gpt2_close(env, st, s, 0, true, NULL);
        return ps;
    }
    *state = s;
    return PL_OK;
}

static pl_status pl__gpt2_close(const pl_run_env *env, const pl_stage *st, void *state,
                                int64_t completed, bool failed, pl_error *err)
{
    (void)env, (void)completed, (void)failed, (void)err;
    pl__gpt2_state *s = state;
    if (!s) return PL_OK;
#ifdef PL_WITH_CUDA
    if (s->slots)
        for (int i = 0; i < s->depth; i++)
            pl_gpu_free(s->slots[i].mem);
    free(s->slots);
    for (int k = 0; k < s->n_mms; k++)
        pl__mmset_free(&s->mms[k], ((const pl__gpt2_opts *)st->priv)->cfg.n_layer);
    free(s->mms);
    pl_gpu_lt_free(s->lt);
#else
    (void)st;
#endif
    pl_gpt2_model_close(s->m);
    free(s);
    return PL_OK;
}

/* The host executor: the C reference (gpt2_ref.c). 16-bit logits are computed in f32 and
 * rounded once. */
static pl_status pl__gpt2_run(pl_stage_ctx *ctx, pl_error *err)
{
    const pl_stage *st = ctx->stage;
    const pl__gpt2_opts *o = st->priv;
    pl__gpt2_state *s = ctx->state;
    const int32_t *ids = ctx->bufs[st->reads[o->r_ids].index];
    const int32_t *tg = o->r_targets >= 0 ? ctx->bufs[st->reads[o->r_targets].index] : NULL;
    const pl_buffer *ob = pl_kind_wbuf(ctx->spec, st, o->w_out);
    void *out = ctx->bufs[st->writes[o->w_out].index];
    float *tmp = NULL;
    float *of = out;
    if (o->output == PL_GPT2_LOGITS && ob->dtype != PL_F32) {
        tmp = malloc((size_t)ob->count * sizeof *tmp);
        if (!tmp) return pl_error_set(err, PL_ENOMEM, "error: out of memory for logits");
        of = tmp;
    }
    pl_status ps;
    if (o->mode == PL__GPT2_FORWARD) {
        ps = pl_gpt2_ref_forward(&s->m->w, ids, tg, s->B, s->T, o->output, o->all, of, out, err);
    } else {
        const pl_buffer *kb = pl_kind_wbuf(ctx->spec, st, o->w_cache);
        pl_gpt2_kv kv = {ctx->bufs[kb->index], kb->dtype, s->B, s->P};
        const int32_t *len = o->r_lengths >= 0 ? ctx->bufs[st->reads[o->r_lengths].index] : NULL;
        if (o->mode == PL__GPT2_PREFILL) {
            ps = pl_gpt2_ref_prefill(&s->m->w, ids, len, s->B, s->T, &kv, o->output, of, out, err);
        } else {
            int32_t step = *(const int32_t *)ctx->bufs[st->reads[o->r_step].index];
            ps = pl_gpt2_ref_decode(&s->m->w, ids, len, step, s->B, &kv, o->output, of, out, err);
        }
    }
    if (ps == PL_OK && tmp) {
        uint16_t *h = out;
        for (int64_t i = 0; i < ob->count; i++)
            h[i] = ob->dtype == PL_F16 ? pl_f32_to_f16(tmp[i]) : pl_f32_to_bf16(tmp[i]);
    }
    free(tmp);
    return ps;
}

#ifdef PL_WITH_CUDA
static pl_status pl__launch(int rc, const char *what, const pl_dev_ctx *ctx, pl_error *err)
{
    return rc ? pl_cuda_check(rc, what, ctx->stage->name, ctx->batch, err) : PL_OK;
}

static pl_status pl__gpt2_head(const pl_dev_ctx *ctx, const pl__mmset *M, const pl__dscr *d,
                               void *out, const int32_t *tg, int t0, pl_error *err);

/* The forward of one block of B = M->Bc sequences (M: that shape's matmuls) on scratch d: ids
 * [B, T] in, out (and targets) for those sequences. Without M->trunk (a sequence's later part)
 * only the head runs, on the layers' output its first part left in d. With every position's
 * output, the head reads the M->hrows rows from position t0 (a part's t0; 0 otherwise). */
static pl_status pl__gpt2_forward(const pl_dev_ctx *ctx, const pl__mmset *M, const pl__dscr *d,
                                  const int32_t *ids, const int32_t *tg, void *out, int t0,
                                  pl_error *err)
{
    const pl_stage *st = ctx->stage;
    const pl__gpt2_opts *o = st->priv;
    const pl__gpt2_state *s = ctx->state;
    const pl_gpt2_cfg *c = &o->cfg;
    const char *nm = st->name;
    int64_t bt = ctx->batch;
    void *sm = ctx->stream;
    int B = M->Bc, T = s->T, C = c->n_embd, N = B * T;
    int E = (int)o->dtype;
    if (M->trunk)
        PL_CHECK(pl__launch(
            pl_gpt2_launch_embed(E, d->x, ids, s->m->wte, s->m->wpe, N, T, C, c->vocab, sm),
            "gpt2 embedding kernel launch", ctx, err));
    const int hd = C / c->n_head;
    for (int l = 0; M->trunk && l < c->n_layer; l++) { /* !o->all: the last one branches */
        const pl_gpt2_dlayer *L = &s->layers[l];
        const pl__lmm *X = &M->l[l];
        PL_CHECK(pl__launch(pl_gpt2_launch_layernorm(E, d->h, NULL, d->x, L->ln1_w, L->ln1_b, N, 0,
                                                     1, C, c->eps, sm),
                            "gpt2 layernorm kernel launch", ctx, err));
        PL_CHECK(pl_gpu_mm_run(X->qkv, L->qkv_w, d->h, d->qkv, d->ws, sm, nm, bt, err));
        if (l == c->n_layer - 1 && !o->all) { /* the last layer at the last positions only */
            PL_CHECK(pl__launch(
                pl_gpt2_launch_attention_last(E, d->att, d->qkv, B, T, c->n_head, hd, sm),
                "gpt2 attention (last position) kernel launch", ctx, err));
            PL_CHECK(pl__launch(pl_gpt2_launch_gather_rows(d->xl, d->x, B, T - 1, T, C, sm),
                                "gpt2 gather kernel launch", ctx, err));
            PL_CHECK(pl_gpu_mm_run(M->proj_last, L->proj_w, d->att, d->xl, d->ws, sm, nm, bt, err));
            PL_CHECK(pl__launch(pl_gpt2_launch_layernorm(E, d->h, NULL, d->xl, L->ln2_w, L->ln2_b,
                                                         B, 0, 1, C, c->eps, sm),
                                "gpt2 layernorm kernel launch", ctx, err));
            PL_CHECK(pl_gpu_mm_run(M->fc_last, L->fc_w, d->h, d->u, d->ws, sm, nm, bt, err));
            PL_CHECK(pl_gpu_mm_run(M->out_last, L->out_w, d->u, d->xl, d->ws, sm, nm, bt, err));
            break;
        }
        PL_CHECK(pl__launch(
            s->naive_attention
                ? pl_gpt2_launch_attention_naive(E, d->att, d->qkv, B, T, c->n_head, hd, sm)
                : pl_gpt2_launch_attention(E, d->att, d->qkv, B, T, c->n_head, hd, sm),
            "gpt2 attention kernel launch", ctx, err));
        PL_CHECK(pl_gpu_mm_run(X->proj, L->proj_w, d->att, d->x, d->ws, sm, nm, bt, err));
        PL_CHECK(pl__launch(pl_gpt2_launch_layernorm(E, d->h, NULL, d->x, L->ln2_w, L->ln2_b, N, 0,
                                                     1, C, c->eps, sm),
                            "gpt2 layernorm kernel launch", ctx, err));
        PL_CHECK(pl_gpu_mm_run(X->fc, L->fc_w, d->h, d->u, d->ws, sm, nm, bt, err));
        PL_CHECK(pl_gpu_mm_run(X->out, L->out_w, d->u, d->x, d->ws, sm, nm, bt, err));
    }
    return pl__gpt2_head(ctx, M, d, out, tg, t0, err);
}

/* The head of a block's forward (or of prefill and decode): ln_f and the LM head on M->hrows rows
 * of the residual stream (every position's from t0 in d->x; the last positions' in d->xl; decode's
 * one position a sequence in d->x), then the packing, argmax or log-softmax into out. */
static pl_status pl__gpt2_head(const pl_dev_ctx *ctx, const pl__mmset *M, const pl__dscr *d,
                               void *out, const int32_t *tg, int t0, pl_error *err)
{
    const pl_stage *st = ctx->stage;
    const pl__gpt2_opts *o = st->priv;
    const pl__gpt2_state *s = ctx->state;
    const pl_gpt2_cfg *c = &o->cfg;
    const char *nm = st->name;
    int64_t bt = ctx->batch;
    void *sm = ctx->stream;
    int B = M->Bc, T = s->T, C = c->n_embd, N = B * T;
    int E = (int)o->dtype;
    int rows = M->hrows; /* o->all: N, or a part's T - t0; else B */
    const float *xin = o->all || o->mode == PL__GPT2_DECODE ? d->x : d->xl;
    void *hn = o->all ? d->h : d->hl;
    void *lo = !M->head_lo ? NULL : o->all ? d->u : d->hl_lo; /* u is free by now */
    void *lg = o->output == PL_GPT2_LOGITS && !s->unpad ? out : d->logits;
    if (s->small_head) {
        PL_CHECK(pl__launch(pl_gpt2_launch_layernorm(PL_F32, d->hl, NULL, xin, s->m->lnf_w,
                                                     s->m->lnf_b, rows, 0, 1, C, c->eps, sm),
                            "gpt2 layernorm kernel launch", ctx, err));
        PL_CHECK(pl__launch(pl_gpt2_launch_head_f32(E, lg, d->hl, s->m->wte, rows, C, c->vocab,
                                                    pl_gpu_sm_count(), sm),
                            "gpt2 LM head kernel launch", ctx, err));
    } else {
        PL_CHECK(pl__launch(pl_gpt2_launch_layernorm(E, hn, lo, xin, s->m->lnf_w, s->m->lnf_b, rows,
                                                     t0, 1, C, c->eps, sm),
                            "gpt2 layernorm kernel launch", ctx, err));
        PL_CHECK(pl_gpu_mm_run(M->head, s->m->wte, hn, lg, d->ws, sm, nm, bt, err));
    }
    if (lo) PL_CHECK(pl_gpu_mm_run(M->head_lo, s->m->wte, lo, lg, d->ws, sm, nm, bt, err));
    if (o->output == PL_GPT2_LOGITS && s->unpad)
        return pl__launch(pl_gpt2_launch_unpad((int)pl_dtype_size(s->lg_dtype), out, lg, rows,
                                               c->vocab, s->ldv, sm),
                          "gpt2 logits unpad kernel launch", ctx, err);
    if (o->output == PL_GPT2_ARGMAX)
        return pl__launch(
            pl_gpu_launch_argmax((int)s->lg_dtype, lg, rows, c->vocab, out, pl_gpu_sm_count(), sm),
            "gpt2 argmax kernel launch", ctx, err);
    if (o->output == PL_GPT2_LOGPROB) {
        /* Every position: row r is position r % P of sequence r / P; a part's rows are positions
         * t0.. of one sequence (P = rows, its targets from t0). The last positions: P = 1. */
        int P = !o->all ? 1 : rows == N ? T : rows;
        return pl__launch(pl_gpt2_launch_logprob((int)s->lg_dtype, out, lg, tg ? tg + t0 : NULL,
                                                 rows, P, o->all ? P : T, c->vocab, sm),
                          "gpt2 logprob kernel launch", ctx, err);
    }
    return PL_OK;
}

/* Decode at batch 1 (s->matvec): per layer five launches, the linears as matrix-vector kernels
 * that fold in what sits between them (gpt2_gpu.h): ln_1 + c_attn, the cached attention (which
 * merges its own splits), c_proj + residual, ln_2 + c_fc + GELU, c_proj + residual. Then the head
 * on the B rows. */
static pl_status pl__gpt2_decode_matvec(const pl_dev_ctx *ctx, const int32_t *ids,
                                        const int32_t *len, const int32_t *step, char *cache,
                                        size_t layer_bytes, int KT, void *out, pl_error *err)
{
    const pl_stage *st = ctx->stage;
    const pl__gpt2_opts *o = st->priv;
    const pl__gpt2_state *s = ctx->state;
    const pl__dscr *d = &s->slots[ctx->slot].main;
    const pl_gpt2_cfg *c = &o->cfg;
    void *sm = ctx->stream;
    int B = s->B, C = c->n_embd, H = c->n_head, hd = C / H, E = (int)o->dtype, S = s->splits;
    float eps = c->eps;
    /* Programmatic dependent launch for the linears and the attention, inside a loop's body too
     * (a WHILE node's body graph keeps the programmatic edges); the embedding kernel launches
     * plainly, so a step's kernels start after everything before it has finished. */
    const int early = 1;
    PL_CHECK(pl__launch(pl_gpt2_launch_embed_at(E, d->x, ids, s->m->wte, s->m->wpe, len, step, B, C,
                                                c->vocab, s->P, sm),
                        "gpt2 embedding (decode) kernel launch", ctx, err));
    for (int l = 0; l < c->n_layer; l++) {
        const pl_gpt2_dlayer *L = &s->layers[l];
        void *kv = cache + (size_t)l * layer_bytes;
        PL_CHECK(pl__launch(pl_gpt2_launch_linear_small(E, PL_GPT2_LIN_LAYERNORM, PL_GPT2_LIN_BIAS,
                                                        d->qkv, d->x, L->qkv_w, L->qkv_b, L->ln1_w,
                                                        L->ln1_b, eps, B, C, 3 * C, early, sm),
                            "gpt2 layernorm + QKV matrix-vector kernel launch", ctx, err));
        PL_CHECK(pl__launch(pl_gpt2_launch_attention_cached(E, KT, d->att, d->parts, d->count,
                                                            d->qkv, kv, len, step, B, 1, H, hd,
                                                            s->P, S, early, sm),
                            "gpt2 cached attention kernel launch", ctx, err));
        PL_CHECK(pl__launch(pl_gpt2_launch_linear_small(E, PL_GPT2_LIN_PLAIN, PL_GPT2_LIN_RESIDUAL,
                                                        d->x, d->att, L->proj_w, L->proj_b, NULL,
                                                        NULL, eps, B, C, C, early, sm),
                            "gpt2 attention projection matrix-vector kernel launch", ctx, err));
        PL_CHECK(pl__launch(pl_gpt2_launch_linear_small(E, PL_GPT2_LIN_LAYERNORM, PL_GPT2_LIN_GELU,
                                                        d->u, d->x, L->fc_w, L->fc_b, L->ln2_w,
                                                        L->ln2_b, eps, B, C, 4 * C, early, sm),
                            "gpt2 layernorm + MLP matrix-vector kernel launch", ctx, err));
        PL_CHECK(pl__launch(pl_gpt2_launch_linear_small(E, PL_GPT2_LIN_PLAIN, PL_GPT2_LIN_RESIDUAL,
                                                        d->x, d->u, L->out_w, L->out_b, NULL, NULL,
                                                        eps, B, 4 * C, C, early, sm),
                            "gpt2 MLP projection matrix-vector kernel launch", ctx, err));
    }
    return pl__gpt2_head(ctx, &s->mms[0], d, out, NULL, 0, err);
}

/* Prefill and decode: the forward of B sequences against the KV cache (cache [n_layer, 2, B,
 * n_head, P, hd]; layer l's part, cache_l, is [2, B, n_head, P, hd]).
 * Prefill: every layer runs on the B x T padded positions (flash attention: a position never sees
 * the padding after it) and writes its keys and values at positions < lengths[b] into the cache;
 * the last layer, after its QKV GEMM, runs on each sequence's last real position only (the cached
 * attention of that one query, then the projection, layernorm and MLP on B rows).
 * Decode: B positions, lengths[b] + step; each layer's cached attention appends the new keys and
 * values and attends over the cache. Then the head on the B rows. */
static pl_status pl__gpt2_record_gen(const pl_dev_ctx *ctx, pl_error *err)
{
    const pl_stage *st = ctx->stage;
    const pl__gpt2_opts *o = st->priv;
    const pl__gpt2_state *s = ctx->state;
    const pl__dscr *d = &s->slots[ctx->slot].main;
    const pl__mmset *M = &s->mms[0];
    const pl_gpt2_cfg *c = &o->cfg;
    const char *nm = st->name;
    int64_t bt = ctx->batch;
    void *sm = ctx->stream;
    bool dec = o->mode == PL__GPT2_DECODE;
    int B = s->B, T = s->T, C = c->n_embd, H = c->n_head, hd = C / H, N = B * T, E = (int)o->dtype;
    const int32_t *ids = ctx->dev_bufs[st->reads[o->r_ids].index];
    const int32_t *len = o->r_lengths >= 0 ? ctx->dev_bufs[st->reads[o->r_lengths].index] : NULL;
    const int32_t *step = dec ? ctx->dev_bufs[st->reads[o->r_step].index] : NULL;
    const pl_buffer *kb = pl_kind_wbuf(ctx->spec, st, o->w_cache);
    char *cache = ctx->dev_bufs[st->writes[o->w_cache].index];
    size_t layer_bytes = (size_t)(kb->bytes / (uint64_t)c->n_layer);
    int KT = (int)kb->dtype;
    void *out = ctx->dev_bufs[st->writes[o->w_out].index];
    if (s->matvec)
        return pl__gpt2_decode_matvec(ctx, ids, len, step, cache, layer_bytes, KT, out, err);
    if (dec) /* the embeddings and the first layer's ln_1 in one kernel */
        PL_CHECK(pl__launch(pl_gpt2_launch_embed_ln(E, d->x, d->h, ids, s->m->wte, s->m->wpe, len,
                                                    step, s->layers[0].ln1_w, s->layers[0].ln1_b, B,
                                                    C, c->vocab, s->P, c->eps, sm),
                            "gpt2 embedding and layernorm (decode) kernel launch", ctx, err));
    else
        PL_CHECK(pl__launch(
            pl_gpt2_launch_embed(E, d->x, ids, s->m->wte, s->m->wpe, N, T, C, c->vocab, sm),
            "gpt2 embedding kernel launch", ctx, err));
    for (int l = 0; l < c->n_layer; l++) {
        const pl_gpt2_dlayer *L = &s->layers[l];
        const pl__lmm *X = &M->l[l];
        void *kv = cache + (size_t)l * layer_bytes;
        bool last = !dec && l == c->n_layer - 1; /* prefill's last layer: the last positions */
        if (!dec || l > 0)
            PL_CHECK(pl__launch(pl_gpt2_launch_layernorm(E, d->h, NULL, d->x, L->ln1_w, L->ln1_b, N,
                                                         0, 1, C, c->eps, sm),
                                "gpt2 layernorm kernel launch", ctx, err));
        PL_CHECK(pl_gpu_mm_run(X->qkv, L->qkv_w, d->h, d->qkv, d->ws, sm, nm, bt, err));
        if (!dec)
            PL_CHECK(pl__launch(
                pl_gpt2_launch_cache_write(E, KT, kv, d->qkv, len, B, T, H, hd, s->P, sm),
                "gpt2 KV cache write kernel launch", ctx, err));
        if (dec || last)
            PL_CHECK(pl__launch(pl_gpt2_launch_attention_cached(E, KT, d->att, d->parts, d->count,
                                                                d->qkv, kv, len, step, B, T, H, hd,
                                                                s->P, s->splits, 0, sm),
                                "gpt2 cached attention kernel launch", ctx, err));
        if (last) {
            PL_CHECK(pl__launch(pl_gpt2_launch_gather_last(d->xl, d->x, len, B, T, C, sm),
                                "gpt2 gather kernel launch", ctx, err));
            PL_CHECK(pl_gpu_mm_run(M->proj_last, L->proj_w, d->att, d->xl, d->ws, sm, nm, bt, err));
            PL_CHECK(pl__launch(pl_gpt2_launch_layernorm(E, d->h, NULL, d->xl, L->ln2_w, L->ln2_b,
                                                         B, 0, 1, C, c->eps, sm),
                                "gpt2 layernorm kernel launch", ctx, err));
            PL_CHECK(pl_gpu_mm_run(M->fc_last, L->fc_w, d->h, d->u, d->ws, sm, nm, bt, err));
            PL_CHECK(pl_gpu_mm_run(M->out_last, L->out_w, d->u, d->xl, d->ws, sm, nm, bt, err));
            break;
        }
        if (!dec)
            PL_CHECK(
                pl__launch(s->naive_attention
                               ? pl_gpt2_launch_attention_naive(E, d->att, d->qkv, B, T, H, hd, sm)
                               : pl_gpt2_launch_attention(E, d->att, d->qkv, B, T, H, hd, sm),
                           "gpt2 attention kernel launch", ctx, err));
        PL_CHECK(pl_gpu_mm_run(X->proj, L->proj_w, d->att, d->x, d->ws, sm, nm, bt, err));
        PL_CHECK(pl__launch(pl_gpt2_launch_layernorm(E, d->h, NULL, d->x, L->ln2_w, L->ln2_b, N, 0,
                                                     1, C, c->eps, sm),
                            "gpt2 layernorm kernel launch", ctx, err));
        PL_CHECK(pl_gpu_mm_run(X->fc, L->fc_w, d->h, d->u, d->ws, sm, nm, bt, err));
        PL_CHECK(pl_gpu_mm_run(X->out, L->out_w, d->u, d->x, d->ws, sm, nm, bt, err));
    }
    return pl__gpt2_head(ctx, M, d, out, NULL, 0, err);
}

/* `chunks:`: the forward runs one block at a time (pl__gpt2_blk) on the same scratch (one stream,
 * in order), and each block's output is marked done for a consumer chunked alike: the first
 * block's logits can go down while the next block computes. */
static pl_status pl__gpt2_record(const pl_dev_ctx *ctx, pl_error *err)
{
    const pl_stage *st = ctx->stage;
    const pl__gpt2_opts *o = st->priv;
    const pl__gpt2_state *s = ctx->state;
    if (o->mode != PL__GPT2_FORWARD) return pl__gpt2_record_gen(ctx, err);
    const pl__dscr *d = &s->slots[ctx->slot].main;
    const pl_buffer *ob = pl_kind_wbuf(ctx->spec, st, o->w_out);
    const int32_t *ids = ctx->dev_bufs[st->reads[o->r_ids].index];
    const int32_t *tg = o->r_targets >= 0 ? ctx->dev_bufs[st->reads[o->r_targets].index] : NULL;
    char *out = ctx->dev_bufs[st->writes[o->w_out].index];
    /* Bytes of a sequence's output, and of a position's (every position's output only). */
    size_t out_seq = (size_t)(ob->bytes / (uint64_t)s->B), out_pos = out_seq / (size_t)s->T;
    for (int j = 0; j < s->n_blk; j++) {
        const pl__gpt2_blk *bk = &s->blk[j];
        size_t id_off = (size_t)bk->seq * (size_t)s->T;
        char *at = out + (o->all ? (id_off + (size_t)bk->t0) * out_pos : (size_t)bk->seq * out_seq);
        PL_CHECK(pl_dev_chunk_wait(ctx, j, err));
        PL_CHECK(pl__gpt2_forward(ctx, &s->mms[s->blk_mm[j]], d, ids + id_off,
                                  tg ? tg + id_off : NULL, at, bk->t0, err));
        PL_CHECK(pl_dev_chunk_mark(ctx, j, err));
    }
    return PL_OK;
}
#define PL__GPT2_RECORD pl__gpt2_record
#else
#define PL__GPT2_RECORD NULL
#endif

/* pl_kind.host_flops: the f32 reference's work for ids [B, T] (gpt2_ref.c's loops): per layer
 * and sequence the four matmuls (24 T C^2) and causal attention (2 T (T + 1) C), then the head
 * over the positions asked for (2 P C V). */
static double pl__gpt2_host_flops(const pl_spec *spec, const pl_stage *st, bool *blas)
{
    const pl__gpt2_opts *o = st->priv;
    const pl_buffer *ids = pl_kind_rbuf(spec, st, o->r_ids);
    double B = (double)ids->shape[0], C = o->cfg.n_embd;
    *blas = false;
    if (o->mode == PL__GPT2_DECODE) {
        /* One new position against at most the cache's positions: an upper bound per step. */
        double P = (double)pl_kind_wbuf(spec, st, o->w_cache)->shape[4];
        double layer = 24 * C * C + 4 * P * C;
        return B * (o->cfg.n_layer * layer + 2 * C * o->cfg.vocab);
    }
    double T = (double)ids->shape[1];
    double layer = 24 * T * C * C + 2 * T * (T + 1) * C;
    return B * (o->cfg.n_layer * layer + 2 * (o->all ? T : 1) * C * o->cfg.vocab);
}

static void pl__gpt2_describe(const pl_spec *spec, const pl_stage *st, char *buf, size_t cap)
{
    const pl__gpt2_opts *o = st->priv;
    static const char *const outs[] = {"logits", "argmax", "logprob"};
    if (o->mode != PL__GPT2_FORWARD) {
        const pl_buffer *kv = pl_kind_wbuf(spec, st, o->w_cache);
        snprintf(buf, cap, "gpt2 %s %dL %dH %dC V%d %s (%s) -> %s, cache '%s' %s x %lld positions",
                 pl__mode_names[o->mode], o->cfg.n_layer, o->cfg.n_head, o->cfg.n_embd,
                 o->cfg.vocab, o->random ? "random weights" : o->weights, pl_dtype_name(o->dtype),
                 outs[o->output], kv->name, pl_dtype_name(kv->dtype), (long long)kv->shape[4]);
        return;
    }
    snprintf(buf, cap, "gpt2 %dL %dH %dC V%d %s (%s) -> %s, %s positions", o->cfg.n_layer,
             o->cfg.n_head, o->cfg.n_embd, o->cfg.vocab, o->random ? "random weights" : o->weights,
             pl_dtype_name(o->dtype), outs[o->output], o->all ? "all" : "last");
    size_t n = strlen(buf);
    if (st->chunks > 1 && n < cap) pl_kind_chunks_describe(st, buf + n, cap - n);
}

const pl_kind pl_kind_gpt2 = {
    .name = "gpt2",
    .engine = PL_ENGINE_COMPUTE,
    .keys = pl__gpt2_keys,
    .doc = "GPT-2 forward (Hugging Face checkpoints or seeded random weights): logits, argmax "
           "next token or log-probabilities; prefill and decode steps with a KV cache",
    .bind = pl__gpt2_bind,
    .validate = pl__gpt2_validate,
    .open = pl__gpt2_open,
    .close = pl__gpt2_close,
    .run_host = pl__gpt2_run,
    .record = PL__GPT2_RECORD,
    .describe = pl__gpt2_describe,
    .device_memory = pl__gpt2_device_memory,
    .host_flops = pl__gpt2_host_flops,
    /* The forward of batch i+1 waits for the forward of batch i, as on the seed's one compute
     * stream: slots' graphs otherwise run their forwards at once, sharing the SMs, so every
     * batch's result (and the download that follows) comes later. The copies still overlap.
     * `ordered: false` (st->unordered) lifts it where throughput is what counts: two forwards at
     * once fill each other's kernel tails and launch gaps (each slot has its own activations and
     * cuBLASLt workspace; the weights are read only). Measured on the H200 (greedy B8):
     * T1024 2.22 -> 2.45 M tok/s (f16), T512 2.13 -> 2.53-2.61. */
    .ordered = true,
};
