/* gpt2_gpu: the launchers of the gpt2 kind's own kernels (stages/gpt2/gpt2_gpu.cu), callable from
 * C. Each enqueues on `stream` (a cudaStream_t, always last), never synchronizes, works inside
 * stream capture and returns a cudaError_t as int (0 = success). `dtype` is the model's pl_dtype
 * (PL_F16 or PL_BF16); activations `x` are f32. Built only with PL_WITH_CUDA. */
#ifndef PL_GPT2_GPU_H
#define PL_GPT2_GPU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Once per process before the first attention launch, outside any capture: raises the
 * attention kernels' dynamic shared-memory limit. */
int pl_gpt2_gpu_setup(void);
/* Head sizes the attention kernel is built for. */
int pl_gpt2_gpu_head_ok(int head_dim);

/* x[n, :] = wte[ids[n], :] + wpe[n % T, :] for n < N (x f32, wte dtype, wpe f32); ids outside
 * [0, V) read row 0. */
int pl_gpt2_launch_embed(int dtype, float *x, const int32_t *ids, const void *wte, const float *wpe,
                         int64_t N, int T, int C, int V, void *stream);
/* out[r, :] = layernorm(x[first + r * step, :]) * w + b for r < rows (x f32, w/b f32, out
 * dtype); f32 statistics. step = T, first = T - 1 takes each sequence's last position. lo, when
 * not NULL, receives the rounding residual (value - out, in dtype). */
int pl_gpt2_launch_layernorm(int dtype, void *out, void *lo, const float *x, const float *w,
                             const float *b, int64_t rows, int64_t first, int64_t step, int C,
                             float eps, void *stream);
/* The LM head at a few rows (the last positions), in f32: out[r, v] = h[r, :] . wte[v, :] (h, out
 * f32; wte dtype [V, C]); a warp per vocabulary row, about the time to read wte once. Valid when
 * pl_gpt2_head_small_ok(rows, C). */
int pl_gpt2_head_small_ok(int rows, int C);
int pl_gpt2_launch_head_f32(int dtype, float *out, const float *h, const void *wte, int rows, int C,
                            int V, int sms, void *stream);
/* Causal self-attention, flash style (online softmax over 64-key tiles in shared memory, no
 * T x T matrix): qkv [B, T, 3C] (q | k | v, heads of head_dim adjacent) -> out [B, T, C], both
 * dtype, f32 accumulation. */
int pl_gpt2_launch_attention(int dtype, void *out, const void *qkv, int B, int T, int H,
                             int head_dim, void *stream);
/* Causal self-attention of each sequence's last position only: qkv [B, T, 3C] -> out [B, C]
 * (row b: sequence b's position T - 1), f32 arithmetic; a warp per (sequence, head). */
int pl_gpt2_launch_attention_last(int dtype, void *out, const void *qkv, int B, int T, int H,
                                  int head_dim, void *stream);
/* dst[r, :] = src[first + r * step, :] for r < rows (f32 rows of C). */
int pl_gpt2_launch_gather_rows(float *dst, const float *src, int rows, int64_t first, int64_t step,
                               int C, void *stream);
/* dst[r, :V] = src[r, :V] for r < rows, src rows ld elements apart (elem_bytes 2 or 4). */
int pl_gpt2_launch_unpad(int elem_bytes, void *dst, const void *src, int64_t rows, int V, int ld,
                         void *stream);
/* The same attention, plainly: a warp per (position, head), keys one by one (head_dim <= 64).
 * Slow; the stage's `attention: naive` selects it, to tell an attention bug from the rest. */
int pl_gpt2_launch_attention_naive(int dtype, void *out, const void *qkv, int B, int T, int H,
                                   int head_dim, void *stream);
/* out[r] = log_softmax(logits[r, :])[target_r] for r < rows, logits of dtype ldtype (f16, bf16,
 * f32) [rows, V]; row r is sequence r / P, position (P == T ? r % T : T - 1) and target_r =
 * targets[b * T + t]. */
int pl_gpt2_launch_logprob(int ldtype, float *out, const void *logits, const int32_t *targets,
                           int64_t rows, int P, int T, int V, void *stream);

/* The CUDA device the calling thread uses (0 when it cannot be asked). */
int pl_gpt2_gpu_device(void);

/* ---- prefill and decode (the KV cache) ----
 * A layer's cache, cache_l, is [2, B, H, P, head_dim] (keys, then values) of kv_dtype: f32 or
 * dtype. Lengths are clamped to [1, T] (prefill) or to at least 1 (decode), decode's positions
 * to [0, P - 1]: a bad value gives wrong results for its sequence, never an access out of bounds
 * (the host reference refuses them). */

/* Decode's embeddings: x[b, :] = wte[ids[b], :] + wpe[lengths[b] + step[0], :] for b < B. */
int pl_gpt2_launch_embed_at(int dtype, float *x, const int32_t *ids, const void *wte,
                            const float *wpe, const int32_t *lengths, const int32_t *step, int B,
                            int C, int V, int P, void *stream);
/* The same embeddings and, in the same kernel, out[b, :] = layernorm(x[b, :]) * w + b (out of
 * dtype; the first layer's ln_1): pl_gpt2_launch_embed_at then pl_gpt2_launch_layernorm's bits in
 * one launch (two where C is not a multiple of 4 or above 1664). */
int pl_gpt2_launch_embed_ln(int dtype, float *x, void *out, const int32_t *ids, const void *wte,
                            const float *wpe, const int32_t *lengths, const int32_t *step,
                            const float *w, const float *b, int B, int C, int V, int P, float eps,
                            void *stream);
/* Prefill: qkv [B, T, 3C]'s keys and values at positions t < lengths[b] (NULL: T) into cache_l. */
int pl_gpt2_launch_cache_write(int dtype, int kv_dtype, void *cache_l, const void *qkv,
                               const int32_t *lengths, int B, int T, int H, int head_dim, int P,
                               void *stream);
/* One query per sequence against its cache -> out [B, C] (dtype): prefill (step NULL): the query
 * is qkv [B, T, 3C]'s row at position lengths[b] - 1 and attends over the cache's positions up to
 * it (cache_write put them there); decode: the query is qkv [B, 3C]'s row b at position p =
 * lengths[b] + step[0], whose key and value are appended to the cache at p, and attends over
 * [0, p]. A block per (split, head, sequence); splits > 1 cut each sequence's keys in that many
 * ranges, parts (B x H x splits x (head_dim + 2) floats) holds their partial results, and
 * they are merged into out: by the last block of each (sequence, head) to finish when count (B x
 * H ints, zero before the first launch; each launch leaves them zero) is given, else by a second
 * kernel (count given: splits <= 32). f32 arithmetic; head_dim 16, 32 or 64. early (decode only):
 * programmatic dependent launch where the device has it, for a stream whose kernels launch with
 * it: the blocks read the cache before the kernel before this one has finished, so every cache
 * row before the appended one, lengths and step must have been written before the last kernel in
 * the stream launched without it (the decode's embedding kernel). */
int pl_gpt2_launch_attention_cached(int dtype, int kv_dtype, void *out, float *parts, int *count,
                                    const void *qkv, void *cache_l, const int32_t *lengths,
                                    const int32_t *step, int B, int T, int H, int head_dim, int P,
                                    int splits, int early, void *stream);
/* ---- linear layers at a few rows: decode at a small batch ----
 * Y = X W^T + bias for rows <= PL_GPT2_LIN_MAX_ROWS, W [N, K] of dtype (cuBLASLt's layout in
 * pl_gpu_lt.c), f32 arithmetic, with what decode would otherwise launch around it folded in:
 *   in  PL_GPT2_LIN_PLAIN:     X [rows, K] of dtype;
 *       PL_GPT2_LIN_LAYERNORM: X the f32 residual stream [rows, K], normalised first with (lnw,
 *                              lnb, eps) (pl_gpt2_launch_layernorm's bits);
 *   out PL_GPT2_LIN_BIAS:      Y [rows, N] of dtype = . + bias (bias dtype);
 *       PL_GPT2_LIN_GELU:      Y of dtype = gelu_tanh(. + bias) (bias dtype);
 *       PL_GPT2_LIN_RESIDUAL:  Y f32 += . + bias (bias f32).
 * Built for LAYERNORM into BIAS or GELU and PLAIN into RESIDUAL (GPT-2's four per layer);
 * pl_gpt2_linear_small_ok says whether a shape is. early: launched with programmatic dependent
 * launch where the device has it (sm_90 on), so it loads its weights while the kernel before it
 * in the stream runs; 0 for plain launches. */
#define PL_GPT2_LIN_MAX_ROWS 8
enum { PL_GPT2_LIN_PLAIN, PL_GPT2_LIN_LAYERNORM };
enum { PL_GPT2_LIN_BIAS, PL_GPT2_LIN_GELU, PL_GPT2_LIN_RESIDUAL };
int pl_gpt2_linear_small_ok(int in, int out, int rows, int K, int N);
int pl_gpt2_launch_linear_small(int dtype, int in, int out, void *Y, const void *X, const void *W,
                                const void *bias, const float *lnw, const float *lnb, float eps,
                                int rows, int K, int N, int early, void *stream);
/* dst[b, :] = x[b T + lengths[b] - 1, :] (lengths NULL: T): each sequence's last real position,
 * f32 rows of C. */
int pl_gpt2_launch_gather_last(float *dst, const float *x, const int32_t *lengths, int B, int T,
                               int C, void *stream);

#ifdef __cplusplus
}
#endif

#endif
