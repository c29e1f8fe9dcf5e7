/* gpt2: what the gpt2 stage kind (gpt2.c), its f32 host reference (gpt2_ref.c) and its weight
 * loader (gpt2_weights.c) share: the model configuration and the weights in host memory. */
#ifndef PL_GPT2_H
#define PL_GPT2_H

#include <stdint.h>

#include "pl_spec.h"
#include "pl_status.h"

typedef struct pl_gpt2_cfg {
    int n_layer, n_head, n_embd, vocab, n_ctx;
    float eps; /* layer_norm_epsilon */
} pl_gpt2_cfg;

/* One layer's weights in Hugging Face's layout: Conv1D matrices are [in, out] row-major. */
typedef struct pl_gpt2_layer {
    float *ln1_w, *ln1_b;   /* [C] */
    float *qkv_w, *qkv_b;   /* [C, 3C], [3C] (attn.c_attn) */
    float *proj_w, *proj_b; /* [C, C], [C] (attn.c_proj) */
    float *ln2_w, *ln2_b;   /* [C] */
    float *fc_w, *fc_b;     /* [C, 4C], [4C] (mlp.c_fc) */
    float *out_w, *out_b;   /* [4C, C], [C] (mlp.c_proj) */
} pl_gpt2_layer;

/* All weights in one f32 allocation (`mem`, owned); the pointers point into it. */
typedef struct pl_gpt2_weights {
    pl_gpt2_cfg cfg;
    float *mem;
    int64_t n_params;
    float *wte;            /* [V, C]; also the tied LM head */
    float *wpe;            /* [n_ctx, C] */
    pl_gpt2_layer *layers; /* [n_layer], owned */
    float *lnf_w, *lnf_b;  /* [C] */
} pl_gpt2_weights;

/* The f32 LM head kernel (the last positions into f32 logits) takes at most this many rows. */
#define PL_GPT2_HEAD_MAX_ROWS 16

/* Parameter count of a configuration (wte, wpe, layers, ln_f). */
int64_t pl_gpt2_param_count(const pl_gpt2_cfg *c);

/* Allocates w->mem for cfg and sets the pointers. PL_ENOMEM on failure. */
pl_status pl_gpt2_weights_alloc(const pl_gpt2_cfg *cfg, pl_gpt2_weights *w, pl_error *err);
void pl_gpt2_weights_free(pl_gpt2_weights *w); /* frees mem and layers; accepts zeroed */

/* GPT-2's initialisation, seeded: matrices and embeddings ~ N(0, 0.02) (c_proj matrices
 * N(0, 0.02 / sqrt(2 n_layer)) as in the paper; near-normal: a sum of four uniforms), biases 0,
 * layernorm weight 1 and bias 0. The numbers depend only on (seed, tensor, element). */
void pl_gpt2_weights_random(pl_gpt2_weights *w, uint64_t seed);

/* Reads a Hugging Face config.json (n_layer, n_head, n_embd, vocab_size, n_positions or n_ctx,
 * layer_norm_epsilon, activation_function) into cfg. PL_EINPUT naming the file and key. */
pl_status pl_gpt2_config_read(const char *path, pl_gpt2_cfg *cfg, const char *what, pl_error *err);
/* Checks a configuration's sizes (positive, n_embd divisible by n_head). */
pl_status pl_gpt2_config_check(const pl_gpt2_cfg *cfg, const char *what, pl_error *err);

/* Reads HF GPT-2 tensors from a safetensors file (or, when `path` ends in ".index.json", from the
 * shards its "weight_map" names) into w (allocated for the config). Names are
 * "wte.weight", "h.N.attn.c_attn.weight", ... optionally prefixed "transformer." (as
 * GPT2LMHeadModel.save_pretrained writes them). Every tensor is checked (present, F32/F16/BF16,
 * shape) before anything is read; `what` prefixes messages ("gpt2 stage 'lm'"). Errors: PL_EINPUT
 * naming the file and tensor. */
pl_status pl_gpt2_weights_check(const char *path, const pl_gpt2_cfg *cfg, const char *what,
                                pl_error *err);
pl_status pl_gpt2_weights_load(const char *path, pl_gpt2_weights *w, const char *what,
                               pl_error *err);

/* What the forward produces. */
typedef enum pl_gpt2_output { PL_GPT2_LOGITS, PL_GPT2_ARGMAX, PL_GPT2_LOGPROB } pl_gpt2_output;

/* The f32 host reference: B sequences of T token ids (ids [B, T]). `all` = every position, else
 * the last one only. Writes, by output:
 *   logits: out_f32 [B, T or 1, V]
 *   argmax: out_i32 [B, T or 1] (first index on ties)
 *   logprob: out_f32 [B, T or 1] = log softmax(logits)[target] with targets [B, T]
 * Ids and targets outside [0, V) fail with PL_EINPUT naming the sequence and position. T must
 * be <= n_ctx. Scratch is allocated inside (the host executor calls it per batch). An interrupt
 * (pl_intr_pending) ends it within a row of a matmul with PL_EINTR, the outputs unfinished. */
pl_status pl_gpt2_ref_forward(const pl_gpt2_weights *w, const int32_t *ids, const int32_t *targets,
                              int B, int T, pl_gpt2_output output, int all, float *out_f32,
                              int32_t *out_i32, pl_error *err);

/* A KV cache in host memory, as the `cache:` buffer of a prefill or decode stage holds it:
 * [n_layer, 2, B, n_head, P, head_dim] of dtype f32, f16 or bf16 (index 0 of the second
 * dimension the keys, 1 the values; P positions per sequence). Borrowed memory. */
typedef struct pl_gpt2_kv {
    void *mem;
    pl_dtype dtype;
    int B, P;
} pl_gpt2_kv;

/* Prefill: B right-padded prompts ids [B, T], sequence b's first lengths[b] positions (lengths
 * NULL: all T) run through the model alone, as if unpadded; each layer's keys and values at those
 * positions go into kv (rounded to its dtype; the positions after them are not touched), and the
 * logits at position lengths[b] - 1 give out row b: logits out_f32 [B, V] or argmax out_i32 [B].
 * The logits are those pl_gpt2_ref_forward gives for the unpadded prompt's last position. Errors
 * (PL_EINPUT): a length outside [1, T], an id outside [0, V), T > kv->P. */
pl_status pl_gpt2_ref_prefill(const pl_gpt2_weights *w, const int32_t *ids, const int32_t *lengths,
                              int B, int T, const pl_gpt2_kv *kv, pl_gpt2_output output,
                              float *out_f32, int32_t *out_i32, pl_error *err);

/* Decode: one new token per sequence, ids [B], at position lengths[b] + step (the prompt's length
 * plus the tokens appended since); its keys and values go into kv at that position and it attends
 * over positions [0, lengths[b] + step] of kv (the earlier ones written by prefill and the decode
 * steps before). out as for prefill. With an f32 cache the logits are pl_gpt2_ref_forward's at the
 * last position of the whole sequence so far. Errors (PL_EINPUT, naming the sequence): a length
 * below 1, a position past kv->P - 1, an id outside [0, V). */
pl_status pl_gpt2_ref_decode(const pl_gpt2_weights *w, const int32_t *ids, const int32_t *lengths,
                             int32_t step, int B, const pl_gpt2_kv *kv, pl_gpt2_output output,
                             float *out_f32, int32_t *out_i32, pl_error *err);

#endif
