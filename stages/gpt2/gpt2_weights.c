/* gpt2_weights: GPT-2 weights in host memory: the table of tensors (HF names, shapes), seeded
 * random initialisation, and loading from a safetensors checkpoint with its config.json. */
#include <math.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2.h"
#include "pl_rng.h"
#include "pl_safetensors.h"

/* What initialises a tensor. */
enum { PL__W_MAT, PL__W_PROJ, PL__W_BIAS, PL__W_ONE };

typedef struct pl__wt {
    char name[64]; /* HF name without a "transformer." prefix */
    float **ptr;
    int rank;
    int64_t shape[2];
    int init;
} pl__wt;

/* Every tensor of the model in allocation order. Returns how many (at most cap). */
static int pl__tensors(const pl_gpt2_cfg *c, pl_gpt2_weights *w, pl__wt *t, int cap)
{
    int n = 0;
    int64_t C = c->n_embd;
#define PL__T(nm_fmt, l, p, r, d0, d1, ini)                                                        \
    do {                                                                                           \
        if (n < cap) {                                                                             \
            snprintf(t[n].name, sizeof t[n].name, nm_fmt, l);                                      \
            t[n].ptr = (p);                                                                        \
            t[n].rank = (r);                                                                       \
            t[n].shape[0] = (d0);                                                                  \
            t[n].shape[1] = (d1);                                                                  \
            t[n].init = (ini);                                                                     \
        }                                                                                          \
        n++;                                                                                       \
    } while (0)
    PL__T("wte.weight%.0d", 0, &w->wte, 2, c->vocab, C, PL__W_MAT);
    PL__T("wpe.weight%.0d", 0, &w->wpe, 2, c->n_ctx, C, PL__W_MAT);
    for (int l = 0; l < c->n_layer; l++) {
        pl_gpt2_layer *L = w->layers ? &w->layers[l] : NULL;
#define PL__LP(f) (L ? &L->f : NULL)
        PL__T("h.%d.ln_1.weight", l, PL__LP(ln1_w), 1, C, 0, PL__W_ONE);
        PL__T("h.%d.ln_1.bias", l, PL__LP(ln1_b), 1, C, 0, PL__W_BIAS);
        PL__T("h.%d.attn.c_attn.weight", l, PL__LP(qkv_w), 2, C, 3 * C, PL__W_MAT);
        PL__T("h.%d.attn.c_attn.bias", l, PL__LP(qkv_b), 1, 3 * C, 0, PL__W_BIAS);
        PL__T("h.%d.attn.c_proj.weight", l, PL__LP(proj_w), 2, C, C, PL__W_PROJ);
        PL__T("h.%d.attn.c_proj.bias", l, PL__LP(proj_b), 1, C, 0, PL__W_BIAS);
        PL__T("h.%d.ln_2.weight", l, PL__LP(ln2_w), 1, C, 0, PL__W_ONE);
        PL__T("h.%d.ln_2.bias", l, PL__LP(ln2_b), 1, C, 0, PL__W_BIAS);
        PL__T("h.%d.mlp.c_fc.weight", l, PL__LP(fc_w), 2, C, 4 * C, PL__W_MAT);
        PL__T("h.%d.mlp.c_fc.bias", l, PL__LP(fc_b), 1, 4 * C, 0, PL__W_BIAS);
        PL__T("h.%d.mlp.c_proj.weight", l, PL__LP(out_w), 2, 4 * C, C, PL__W_PROJ);
        PL__T("h.%d.mlp.c_proj.bias", l, PL__LP(out_b), 1, C, 0, PL__W_BIAS);
#undef PL__LP
    }
    PL__T("ln_f.weight%.0d", 0, &w->lnf_w, 1, C, 0, PL__W_ONE);
    PL__T("ln_f.bias%.0d", 0, &w->lnf_b, 1, C, 0, PL__W_BIAS);
#undef PL__T
    return n;
}

static int64_t pl__numel(const pl__wt *t)
{
    return t->rank == 1 ? t->shape[0] : t->shape[0] * t->shape[1];
}

int64_t pl_gpt2_param_count(const pl_gpt2_cfg *c)
{
    int64_t C = c->n_embd;
    return (int64_t)c->vocab * C + (int64_t)c->n_ctx * C +
           (int64_t)c->n_layer *
               (2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C) +
           2 * C;
}

pl_status pl_gpt2_config_check(const pl_gpt2_cfg *c, const char *what, pl_error *err)
{
    if (c->n_layer < 1 || c->n_head < 1 || c->n_embd < 1 || c->vocab < 1 || c->n_ctx < 1 ||
        c->n_layer > 4096 || c->n_embd > 65536 || c->n_ctx > 1 << 20 || c->vocab > 1 << 24)
        return pl_error_set(err, PL_EINPUT,
                            "error: %s: config n_layer %d, n_head %d, n_embd %d, vocab %d, n_ctx "
                            "%d: every size must be positive (and n_layer <= 4096, n_embd <= "
                            "65536, n_ctx <= 2^20, vocab <= 2^24)",
                            what, c->n_layer, c->n_head, c->n_embd, c->vocab, c->n_ctx);
    if (c->n_embd % c->n_head != 0)
        return pl_error_set(err, PL_EINPUT, "error: %s: n_embd %d is not a multiple of n_head %d",
                            what, c->n_embd, c->n_head);
    if (!(c->eps > 0) || c->eps > 1)
        return pl_error_set(err, PL_EINPUT, "error: %s: layer_norm_epsilon %g must be in (0, 1]",
                            what, (double)c->eps);
    return PL_OK;
}

pl_status pl_gpt2_weights_alloc(const pl_gpt2_cfg *cfg, pl_gpt2_weights *w, pl_error *err)
{
    memset(w, 0, sizeof *w);
    w->cfg = *cfg;
    w->n_params = pl_gpt2_param_count(cfg);
    w->mem = malloc((size_t)w->n_params * sizeof(float));
    w->layers = calloc((size_t)cfg->n_layer, sizeof *w->layers);
    int cap = 4 + 12 * cfg->n_layer;
    pl__wt *t = malloc((size_t)cap * sizeof *t);
    if (!w->mem || !w->layers || !t) {
        free(t);
        pl_gpt2_weights_free(w);
        return pl_error_set(
            err, PL_ENOMEM, "error: out of host memory for %lld GPT-2 parameters (%.1f GB f32)",
            (long long)pl_gpt2_param_count(cfg), (double)pl_gpt2_param_count(cfg) * 4e-9);
    }
    int n = pl__tensors(cfg, w, t, cap);
    float *p = w->mem;
    for (int i = 0; i < n; i++) {
        *t[i].ptr = p;
        p += pl__numel(&t[i]);
    }
    free(t);
    return PL_OK;
}

void pl_gpt2_weights_free(pl_gpt2_weights *w)
{
    free(w->mem);
    free(w->layers);
    w->mem = NULL;
    w->layers = NULL;
}

void pl_gpt2_weights_random(pl_gpt2_weights *w, uint64_t seed)
{
    const pl_gpt2_cfg *c = &w->cfg;
    int cap = 4 + 12 * c->n_layer;
    pl__wt *t = malloc((size_t)cap * sizeof *t);
    if (!t) return;
    int n = pl__tensors(c, w, t, cap);
    double proj_std = 0.02 / sqrt(2.0 * c->n_layer);
    for (int i = 0; i < n; i++) {
        float *x = *t[i].ptr;
        int64_t m = pl__numel(&t[i]);
        if (t[i].init == PL__W_BIAS || t[i].init == PL__W_ONE) {
            for (int64_t j = 0; j < m; j++)
                x[j] = t[i].init == PL__W_ONE ? 1.0f : 0.0f;
            continue;
        }
        double sd = t[i].init == PL__W_PROJ ? proj_std : 0.02;
        uint64_t key = pl_rng_key(seed, 0x67707432, (uint64_t)i, 0);
        /* A near-normal value per element from one 64-bit draw: the sum of its four 16-bit
         * quarters as uniforms (Irwin-Hall, mean 2, variance 1/3), centred and scaled to unit
         * variance. Cheap enough for 1.5B parameters, and each element depends on its index
         * alone. */
        const double scale = sd * 1.7320508075688772 / 65536.0;
        for (int64_t j = 0; j < m; j++) {
            uint64_t r = pl_rng_u64(key, (uint64_t)j);
            double u = (double)(r & 0xffff) + (double)(r >> 16 & 0xffff) +
                       (double)(r >> 32 & 0xffff) + (double)(r >> 48) + 2.0;
            x[j] = (float)((u - 2.0 * 65536.0) * scale);
        }
    }
    free(t);
}

static pl_status pl__cfg_int(json_t *root, const char *key, const char *alt, int *out,
                             const char *path, const char *what, pl_error *err)
{
    json_t *v = json_object_get(root, key);
    if (!v && alt) v = json_object_get(root, alt);
    if (!v)
        return pl_error_set(err, PL_EINPUT, "error: %s: config '%s' has no \"%s\"%s%s%s", what,
                            path, key, alt ? " (or \"" : "", alt ? alt : "", alt ? "\")" : "");
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 24))
        return pl_error_set(err, PL_EINPUT,
                            "error: %s: config '%s': \"%s\" must be an integer from 1 to 2^24",
                            what, path, key);
    *out = (int)json_integer_value(v);
    return PL_OK;
}

pl_status pl_gpt2_config_read(const char *path, pl_gpt2_cfg *cfg, const char *what, pl_error *err)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        return pl_error_set(err, PL_EINPUT, "error: %s: cannot read config '%s': %s", what, path,
                            je.text);
    pl_status st = PL_OK;
    if (!json_is_object(root)) {
        st =
            pl_error_set(err, PL_EINPUT, "error: %s: config '%s' is not a JSON object", what, path);
        goto done;
    }
    PL_CHECK_GOTO(pl__cfg_int(root, "n_layer", NULL, &cfg->n_layer, path, what, err), st, done);
    PL_CHECK_GOTO(pl__cfg_int(root, "n_head", NULL, &cfg->n_head, path, what, err), st, done);
    PL_CHECK_GOTO(pl__cfg_int(root, "n_embd", NULL, &cfg->n_embd, path, what, err), st, done);
    PL_CHECK_GOTO(pl__cfg_int(root, "vocab_size", NULL, &cfg->vocab, path, what, err), st, done);
    PL_CHECK_GOTO(pl__cfg_int(root, "n_positions", "n_ctx", &cfg->n_ctx, path, what, err), st,
                  done);
    json_t *eps = json_object_get(root, "layer_norm_epsilon");
    cfg->eps = eps && json_is_number(eps) ? (float)json_number_value(eps) : 1e-5f;
    json_t *act = json_object_get(root, "activation_function");
    if (act) {
        const char *a = json_is_string(act) ? json_string_value(act) : "";
        if (strcmp(a, "gelu_new") != 0 && strcmp(a, "gelu_pytorch_tanh") != 0 &&
            strcmp(a, "gelu_fast") != 0) {
            st = pl_error_set(err, PL_EINPUT,
                              "error: %s: config '%s': activation_function '%s' is not supported; "
                              "the gpt2 kind computes GELU with the tanh approximation "
                              "(gelu_new)",
                              what, path, a);
            goto done;
        }
    }
    st = pl_gpt2_config_check(cfg, what, err);
done:
    json_decref(root);
    return st;
}

/* A checkpoint: one safetensors file, or the shards a model.safetensors.index.json names (its
 * "weight_map": tensor -> file, as save_pretrained writes large models). */
#define PL__MAX_SHARDS 64
typedef struct pl__ckpt {
    const char *path; /* as given: the file or the index; borrowed */
    pl_st_file *f[PL__MAX_SHARDS];
    int n;
    json_t *map; /* weight_map of an index, or NULL */
    const char *prefix;
} pl__ckpt;

static void pl__ckpt_close(pl__ckpt *ck)
{
    for (int i = 0; i < ck->n; i++)
        pl_st_close(ck->f[i]);
    json_decref(ck->map);
}

/* "error: safetensors file ..." becomes "error: <what>: safetensors file ...". */
static pl_status pl__what(pl_status st, const char *what, pl_error *err)
{
    if (!err) return st;
    char msg[PL_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", strncmp(err->msg, "error: ", 7) == 0 ? err->msg + 7 : err->msg);
    return pl_error_set(err, st, "error: %s: %s", what, msg);
}

/* The tensor called `name` and the file it is in, or NULL. */
static const pl_st_tensor *pl__ckpt_find(const pl__ckpt *ck, const char *name, pl_st_file **in)
{
    int k = 0;
    if (ck->map) {
        json_t *fn = json_object_get(ck->map, name);
        if (!json_is_string(fn)) return NULL;
        const char *base = json_string_value(fn);
        for (k = 0; k < ck->n; k++) {
            const char *p = pl_st_path(ck->f[k]), *slash = strrchr(p, '/');
            if (strcmp(slash ? slash + 1 : p, base) == 0) break;
        }
        if (k == ck->n) return NULL;
    }
    *in = ck->f[k];
    return pl_st_find(ck->f[k], name);
}

static pl_status pl__ckpt_open(const char *path, const char *what, pl__ckpt *ck, pl_error *err)
{
    memset(ck, 0, sizeof *ck);
    ck->path = path;
    size_t len = strlen(path);
    pl_status st = PL_OK;
    if (len < 11 || strcmp(path + len - 11, ".index.json") != 0) {
        st = pl_st_open(path, &ck->f[0], err);
        if (st != PL_OK) return pl__what(st, what, err);
        ck->n = 1;
    } else {
        json_error_t je;
        json_t *root = json_load_file(path, 0, &je);
        json_t *map = root ? json_object_get(root, "weight_map") : NULL;
        if (!json_is_object(map)) {
            json_decref(root);
            return pl_error_set(err, PL_EINPUT,
                                "error: %s: checkpoint index '%s' has no \"weight_map\" object%s%s",
                                what, path, root ? "" : ": ", root ? "" : je.text);
        }
        ck->map = json_incref(map);
        json_decref(root);
        const char *slash = strrchr(path, '/');
        int dir_len = slash ? (int)(slash - path) : 1;
        const char *dir = slash ? path : ".";
        const char *key;
        json_t *fn;
        json_object_foreach(ck->map, key, fn)
        {
            if (!json_is_string(fn)) continue;
            char shard[4096];
            snprintf(shard, sizeof shard, "%.*s/%s", dir_len, dir, json_string_value(fn));
            bool seen = false;
            for (int i = 0; i < ck->n && !seen; i++)
                seen = strcmp(pl_st_path(ck->f[i]), shard) == 0;
            if (seen) continue;
            if (ck->n == PL__MAX_SHARDS) {
                pl__ckpt_close(ck);
                return pl_error_set(err, PL_EINPUT,
                                    "error: %s: checkpoint index '%s' names more than %d shards",
                                    what, path, PL__MAX_SHARDS);
            }
            st = pl_st_open(shard, &ck->f[ck->n], err);
            if (st != PL_OK) {
                pl__ckpt_close(ck);
                return pl__what(st, what, err);
            }
            ck->n++;
        }
    }
    pl_st_file *in;
    ck->prefix =
        pl__ckpt_find(ck, "wte.weight", &in) || !pl__ckpt_find(ck, "transformer.wte.weight", &in)
            ? ""
            : "transformer.";
    return PL_OK;
}

static pl_status pl__check_open(const pl__ckpt *ck, const pl_gpt2_cfg *cfg, const char *what,
                                pl__wt *t, int n, pl_error *err)
{
    for (int i = 0; i < n; i++) {
        char full[96];
        snprintf(full, sizeof full, "%s%s", ck->prefix, t[i].name);
        pl_st_file *f = NULL;
        const pl_st_tensor *s = pl__ckpt_find(ck, full, &f);
        if (!s)
            return pl_error_set(err, PL_EINPUT,
                                "error: %s: weights '%s' have no tensor '%s' (a GPT-2 checkpoint "
                                "with n_layer %d needs it)",
                                what, ck->path, full, cfg->n_layer);
        if (s->dtype == PL_ST_OTHER)
            return pl_error_set(err, PL_EINPUT,
                                "error: %s: weights '%s': tensor '%s' is %s; expected F32, F16 or "
                                "BF16",
                                what, pl_st_path(f), full, s->dtype_name);
        bool ok = s->rank == t[i].rank && s->shape[0] == t[i].shape[0] &&
                  (t[i].rank == 1 || s->shape[1] == t[i].shape[1]);
        if (!ok) {
            char got[96], want[64];
            pl_dims_str(s->shape, s->rank, got, sizeof got);
            if (t[i].rank == 1)
                snprintf(want, sizeof want, "[%lld]", (long long)t[i].shape[0]);
            else
                snprintf(want, sizeof want, "[%lld, %lld]", (long long)t[i].shape[0],
                         (long long)t[i].shape[1]);
            return pl_error_set(err, PL_EINPUT,
                                "error: %s: weights '%s': tensor '%s' has shape %s, but the config "
                                "(n_layer %d, n_embd %d, vocab %d, n_ctx %d) needs %s",
                                what, pl_st_path(f), full, got, cfg->n_layer, cfg->n_embd,
                                cfg->vocab, cfg->n_ctx, want);
        }
    }
    return PL_OK;
}

static pl_status pl__with_file(const char *path, const pl_gpt2_cfg *cfg, pl_gpt2_weights *w,
                               const char *what, pl_error *err)
{
    pl__ckpt ck;
    PL_CHECK(pl__ckpt_open(path, what, &ck, err));
    pl_status st = PL_OK;
    int cap = 4 + 12 * cfg->n_layer;
    pl_gpt2_weights none = {0};
    pl__wt *t = malloc((size_t)cap * sizeof *t);
    if (!t) {
        pl__ckpt_close(&ck);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    int n = pl__tensors(cfg, w ? w : &none, t, cap);
    PL_CHECK_GOTO(pl__check_open(&ck, cfg, what, t, n, err), st, done);
    for (int i = 0; w && i < n; i++) {
        char full[96];
        snprintf(full, sizeof full, "%s%s", ck.prefix, t[i].name);
        pl_st_file *f = NULL;
        const pl_st_tensor *s = pl__ckpt_find(&ck, full, &f);
        PL_CHECK_GOTO(pl_st_read_f32(f, s, *t[i].ptr, pl__numel(&t[i]), err), st, done);
    }
done:
    free(t);
    pl__ckpt_close(&ck);
    return st;
}

pl_status pl_gpt2_weights_check(const char *path, const pl_gpt2_cfg *cfg, const char *what,
                                pl_error *err)
{
    return pl__with_file(path, cfg, NULL, what, err);
}

pl_status pl_gpt2_weights_load(const char *path, pl_gpt2_weights *w, const char *what,
                               pl_error *err)
{
    return pl__with_file(path, &w->cfg, w, what, err);
}
