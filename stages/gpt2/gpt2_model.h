/* gpt2_model: the loaded model the gpt2 stages of a process share: one copy of the weights per
 * (weights, config, dtype, seed, executor), refcounted, so a pipeline's prefill, decode and
 * forward stages on one checkpoint load it once. On the host executor the copy is the f32 weights
 * (pl_gpt2_weights); on the GPU their device layout (matrices transposed to [out, in] in the
 * model's dtype for cuBLASLt, vectors f32), uploaded once. Private to stages/gpt2. */
#ifndef PL_GPT2_MODEL_H
#define PL_GPT2_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "gpt2.h"

/* What identifies a copy: two stages whose keys are equal share one. */
typedef struct pl_gpt2_model_key {
    pl_gpt2_cfg cfg;
    pl_dtype dtype;   /* GPU: the weights' dtype (f16 or bf16) */
    bool random;      /* seeded weights; else `path` */
    uint64_t seed;    /* random: the resolved seed */
    const char *path; /* the checkpoint (model.safetensors or its index); borrowed */
    bool gpu;         /* the device copy (else host f32) */
    int device;       /* gpu: the CUDA device */
} pl_gpt2_model_key;

/* One layer's device tensors (E = the model dtype; matrices [out, in]). */
typedef struct pl_gpt2_dlayer {
    float *ln1_w, *ln1_b, *ln2_w, *ln2_b, *proj_b, *out_b;
    void *qkv_w, *qkv_b, *proj_w, *fc_w, *fc_b, *out_w;
} pl_gpt2_dlayer;

typedef struct pl_gpt2_model {
    pl_gpt2_weights w; /* host copy: the f32 weights (empty in a device copy) */
    /* Device copy: one allocation. wte has wte_rows rows: the vocabulary's, then zero rows up to
     * a multiple of 64 (an LM head GEMM may compute the padded columns, docs/perf.md). */
    void *wmem;
    void *wte;
    int wte_rows;
    float *wpe, *lnf_w, *lnf_b;
    pl_gpt2_dlayer *layers; /* [n_layer] */
    /* The registry's. */
    char key[4400];
    int refs;
    struct pl_gpt2_model *next;
} pl_gpt2_model;

/* The copy for `k`: the one already loaded (a reference more), or a new one, loaded (the
 * checkpoint read, or the seeded weights made) and, for a GPU key, uploaded. `stage` names the
 * stage in errors. Thread-safe: a stage opening while another loads the same key waits for it. */
pl_status pl_gpt2_model_open(const pl_gpt2_model_key *k, const char *stage, pl_gpt2_model **out,
                             pl_error *err);
/* Drops a reference; the last one frees the copy. Accepts NULL. */
void pl_gpt2_model_close(pl_gpt2_model *m);

/* Rows of the device copy's wte: the vocabulary rounded up to 64. */
int pl_gpt2_model_wte_rows(const pl_gpt2_cfg *c);
/* Bytes of a device copy (every tensor on a 256-byte boundary), build-independent: the kind's
 * device_memory hook reports it. */
size_t pl_gpt2_model_device_bytes(const pl_gpt2_cfg *c, pl_dtype E);

#endif
