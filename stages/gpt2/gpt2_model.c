/* gpt2_model: one loaded copy of a GPT-2 model per key, shared by the gpt2 stages that ask for it
 * (gpt2_model.h): the registry, the host load, and the device layout and upload. */
#include "gpt2_model.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_half.h"
#ifdef PL_WITH_CUDA
#include "pl_gpu.h"
#endif

/* Held while a copy is looked up, loaded or freed: a second stage asking for a key that is being
 * loaded waits and then shares it. Loads of different keys are serialized too (they are rare and
 * happen at open). */
static pthread_mutex_t pl__models_mu = PTHREAD_MUTEX_INITIALIZER;
static pl_gpt2_model *pl__models;

static size_t pl__al(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

int pl_gpt2_model_wte_rows(const pl_gpt2_cfg *c)
{
    return (c->vocab + 63) / 64 * 64;
}

size_t pl_gpt2_model_device_bytes(const pl_gpt2_cfg *c, pl_dtype E)
{
    size_t C = (size_t)c->n_embd, es = pl_dtype_size(E), f4 = pl__al(C * 4);
    size_t w =
        pl__al((size_t)pl_gpt2_model_wte_rows(c) * C * es) + pl__al((size_t)c->n_ctx * C * 4);
    size_t layer = 5 * f4 + pl__al(3 * C * C * es) + pl__al(3 * C * es) + pl__al(C * C * es) + f4 +
                   pl__al(4 * C * C * es) + pl__al(4 * C * es) + pl__al(4 * C * C * es);
    return w + (size_t)c->n_layer * layer + 2 * f4;
}

static void pl__key_str(const pl_gpt2_model_key *k, char *buf, size_t cap)
{
    const pl_gpt2_cfg *c = &k->cfg;
    snprintf(buf, cap, "%s:%d|%d,%d,%d,%d,%d,%a|%s|%s%llu", k->gpu ? "gpu" : "host",
             k->gpu ? k->device : 0, c->n_layer, c->n_head, c->n_embd, c->vocab, c->n_ctx,
             (double)c->eps, k->gpu ? pl_dtype_name(k->dtype) : "f32",
             k->random ? "random:" : k->path, k->random ? (unsigned long long)k->seed : 0ull);
}

static void pl__model_free(pl_gpt2_model *m)
{
#ifdef PL_WITH_CUDA
    pl_gpu_free(m->wmem);
#endif
    free(m->layers);
    pl_gpt2_weights_free(&m->w);
    free(m);
}

static pl_status pl__host_load(const pl_gpt2_model_key *k, const char *stage, pl_gpt2_weights *w,
                               pl_error *err)
{
    PL_CHECK(pl_gpt2_weights_alloc(&k->cfg, w, err));
    if (k->random) {
        pl_gpt2_weights_random(w, k->seed);
        return PL_OK;
    }
    char what[128];
    snprintf(what, sizeof what, "gpt2 stage '%s'", stage);
    pl_status s = pl_gpt2_weights_load(k->path, w, what, err);
    if (s != PL_OK) pl_gpt2_weights_free(w);
    return s;
}

#ifdef PL_WITH_CUDA
/* Host staging of the device copy: sizes rounded to 256 bytes so every tensor is aligned as
 * cuBLASLt's heuristic assumes. */
typedef struct pl__stage_buf {
    unsigned char *p;
    size_t off;
} pl__stage_buf;

/* Appends n values of src as dtype dt and returns their offset. With out_n > 0, src is a Conv1D
 * matrix [in_n, out_n] and goes in transposed, [out_n, in_n] (cuBLASLt's "TN" operand). */
static size_t pl__put(pl__stage_buf *b, const float *src, int64_t n, pl_dtype dt, int64_t out_n,
                      int64_t in_n)
{
    size_t off = b->off, es = pl_dtype_size(dt);
    if (b->p) {
        unsigned char *d = b->p + off;
        for (int64_t i = 0; i < n; i++) {
            float v = out_n > 0 ? src[(i % in_n) * out_n + i / in_n] : src[i];
            if (dt == PL_F32)
                memcpy(d + i * 4, &v, 4);
            else {
                uint16_t h = dt == PL_F16 ? pl_f32_to_f16(v) : pl_f32_to_bf16(v);
                memcpy(d + i * 2, &h, 2);
            }
        }
    }
    b->off += pl__al((size_t)n * es);
    return off;
}

/* Lays the weights out (b->p NULL: sizes only) and points m's tensors into base (NULL: not yet). */
static void pl__layout(pl_gpt2_model *m, const pl_gpt2_weights *w, pl_dtype E, pl__stage_buf *b,
                       unsigned char *base)
{
    const pl_gpt2_cfg *c = &w->cfg;
    int64_t C = c->n_embd;
#define PL__PUT(dst, src, n, dt, r, k)                                                             \
    do {                                                                                           \
        size_t off_ = pl__put(b, src, n, dt, r, k);                                                \
        dst = base ? (void *)(base + off_) : NULL;                                                 \
    } while (0)
    PL__PUT(m->wte, w->wte, (int64_t)c->vocab * C, E, 0, 0);
    if (m->wte_rows > c->vocab) { /* the padding rows: zeros, right after the vocabulary's */
        size_t es = pl_dtype_size(E), pad = (size_t)(m->wte_rows - c->vocab) * (size_t)C * es;
        b->off -= pl__al((size_t)c->vocab * (size_t)C * es);
        b->off += (size_t)c->vocab * (size_t)C * es;
        if (b->p) memset(b->p + b->off, 0, pad);
        b->off = pl__al(b->off + pad);
    }
    PL__PUT(m->wpe, w->wpe, (int64_t)c->n_ctx * C, PL_F32, 0, 0);
    for (int l = 0; l < c->n_layer; l++) {
        const pl_gpt2_layer *L = &w->layers[l];
        pl_gpt2_dlayer *D = &m->layers[l];
        PL__PUT(D->ln1_w, L->ln1_w, C, PL_F32, 0, 0);
        PL__PUT(D->ln1_b, L->ln1_b, C, PL_F32, 0, 0);
        PL__PUT(D->qkv_w, L->qkv_w, 3 * C * C, E, 3 * C, C);
        PL__PUT(D->qkv_b, L->qkv_b, 3 * C, E, 0, 0);
        PL__PUT(D->proj_w, L->proj_w, C * C, E, C, C);
        PL__PUT(D->proj_b, L->proj_b, C, PL_F32, 0, 0);
        PL__PUT(D->ln2_w, L->ln2_w, C, PL_F32, 0, 0);
        PL__PUT(D->ln2_b, L->ln2_b, C, PL_F32, 0, 0);
        PL__PUT(D->fc_w, L->fc_w, 4 * C * C, E, 4 * C, C);
        PL__PUT(D->fc_b, L->fc_b, 4 * C, E, 0, 0);
        PL__PUT(D->out_w, L->out_w, 4 * C * C, E, C, 4 * C);
        PL__PUT(D->out_b, L->out_b, C, PL_F32, 0, 0);
    }
    PL__PUT(m->lnf_w, w->lnf_w, C, PL_F32, 0, 0);
    PL__PUT(m->lnf_b, w->lnf_b, C, PL_F32, 0, 0);
#undef PL__PUT
}

/* The device copy of the host weights in m->w (freed once uploaded). */
static pl_status pl__upload(pl_gpt2_model *m, pl_dtype E, const char *stage, pl_error *err)
{
    const pl_gpt2_cfg *c = &m->w.cfg;
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->layers) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    m->wte_rows = pl_gpt2_model_wte_rows(c);
    pl__stage_buf b = {0};
    pl__layout(m, &m->w, E, &b, NULL);
    size_t bytes = b.off;
    if (bytes != pl_gpt2_model_device_bytes(c, E))
        return pl_error_set(err, PL_ERUNTIME,
                            "error: gpt2 stage '%s': internal error: the weights take %zu bytes, "
                            "but the stage reported %zu to run.memory_budget",
                            stage, bytes, pl_gpt2_model_device_bytes(c, E));
    b.p = malloc(bytes);
    if (!b.p)
        return pl_error_set(err, PL_ENOMEM,
                            "error: gpt2 stage '%s': out of host memory staging %zu bytes of "
                            "weights",
                            stage, bytes);
    pl_status ps = pl_gpu_alloc(bytes, &m->wmem, stage, err);
    if (ps == PL_OK) {
        b.off = 0;
        pl__layout(m, &m->w, E, &b, m->wmem);
        ps = pl_gpu_upload(m->wmem, b.p, bytes, stage, err);
    }
    free(b.p);
    PL_CHECK(ps);
    pl_gpt2_weights_free(&m->w); /* the device copy is what runs (w.cfg stays) */
    return PL_OK;
}
#endif

pl_status pl_gpt2_model_open(const pl_gpt2_model_key *k, const char *stage, pl_gpt2_model **out,
                             pl_error *err)
{
    char key[sizeof pl__models->key];
    pl__key_str(k, key, sizeof key);
    *out = NULL;
    pthread_mutex_lock(&pl__models_mu);
    pl_gpt2_model *m = pl__models;
    while (m && strcmp(m->key, key) != 0)
        m = m->next;
    if (m) {
        m->refs++;
        pthread_mutex_unlock(&pl__models_mu);
        *out = m;
        return PL_OK;
    }
    pl_status ps = PL_OK;
    m = calloc(1, sizeof *m);
    if (!m) {
        ps = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    snprintf(m->key, sizeof m->key, "%s", key);
    ps = pl__host_load(k, stage, &m->w, err);
#ifdef PL_WITH_CUDA
    if (ps == PL_OK && k->gpu) ps = pl__upload(m, k->dtype, stage, err);
#else
    if (ps == PL_OK && k->gpu)
        ps = pl_error_set(err, PL_ERUNTIME,
                          "error: gpt2 stage '%s': this build has no CUDA for the weights' device "
                          "copy",
                          stage);
#endif
    if (ps != PL_OK) {
        pl__model_free(m);
        goto done;
    }
    m->refs = 1;
    m->next = pl__models;
    pl__models = m;
    *out = m;
done:
    pthread_mutex_unlock(&pl__models_mu);
    return ps;
}

void pl_gpt2_model_close(pl_gpt2_model *m)
{
    if (!m) return;
    pthread_mutex_lock(&pl__models_mu);
    if (--m->refs == 0) {
        pl_gpt2_model **p = &pl__models;
        while (*p && *p != m)
            p = &(*p)->next;
        if (*p) *p = m->next;
        pl__model_free(m);
    }
    pthread_mutex_unlock(&pl__models_mu);
}
