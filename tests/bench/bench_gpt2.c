/* bench_gpt2: where a GPT-2 forward's time goes on the GPU. Runs the gpt2 kind's launch sequence
 * (the same launchers and cuBLASLt matmuls stages/gpt2/gpt2.c records) on random device data, with
 * an event between every op, and prints per op type: ms per forward, share, TFLOP/s; then the
 * cuBLASLt GEMM rate of an 8192^3 product in the same dtype, the yardstick for "share of the GEMM
 * rate". No graph, plain launches on one stream.
 *   bench_gpt2 [--B 8] [--T 512] [--layers 12] [--heads 12] [--embd 768] [--vocab 50257]
 *              [--dtype f16|bf16] [--output logits|argmax] [--reps 20] [--tune 0|1] [--pad 0|1]
 *              [--graph 0|1]
 * (--pad: with --output logits, the head runs on wte's rows padded to 64 and a copy packs its
 * output, as the kind does; 0: the vocabulary's columns, written packed, to compare; --graph 1:
 * also the forward captured as one graph and replayed, its mean and best time) */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_gpu.h"
#include "ops_gpu.h"
#include "pl_gpu.h"

enum { OP_EMBED, OP_LN, OP_QKV, OP_ATTN, OP_PROJ, OP_FC, OP_OUT, OP_HEAD, OP_ARGMAX, OP_N };
static const char *const op_names[OP_N] = {"embedding",
                                           "layernorm",
                                           "gemm qkv (+bias)",
                                           "attention",
                                           "gemm attn proj (+bias+res)",
                                           "gemm fc (+bias+gelu)",
                                           "gemm mlp proj (+bias+res)",
                                           "gemm lm head",
                                           "argmax"};

static long arg(int argc, char **argv, const char *name, long def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) return atol(argv[i + 1]);
    return def;
}
static const char *sarg(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) return argv[i + 1];
    return def;
}

#define DIE(what)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "bench_gpt2: %s\n", what);                                                 \
        exit(1);                                                                                   \
    } while (0)
#define CK(st)                                                                                     \
    do {                                                                                           \
        if ((st) != PL_OK) DIE(err.msg);                                                           \
    } while (0)
#define CU(rc)                                                                                     \
    do {                                                                                           \
        int rc_ = (int)(rc);                                                                       \
        if (rc_) {                                                                                 \
            fprintf(stderr, "bench_gpt2: %s: CUDA error %d (%s)\n", #rc, rc_,                      \
                    cudaGetErrorString((cudaError_t)rc_));                                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void *dev_random(size_t n, pl_dtype dt)
{
    size_t es = pl_dtype_size(dt);
    unsigned char *h = malloc(n * es);
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        float v = ((float)(s >> 40) / (float)(1 << 24) - 0.5f) * 0.04f;
        if (dt == PL_F32)
            memcpy(h + i * 4, &v, 4);
        else {
            /* f16/bf16 bits by truncation: fine for timing */
            uint32_t u;
            memcpy(&u, &v, 4);
            uint16_t b = dt == PL_BF16 ? (uint16_t)(u >> 16) : 0;
            if (dt == PL_F16) {
                int e = (int)((u >> 23) & 0xff) - 127 + 15;
                b = (uint16_t)((u >> 16) & 0x8000);
                if (e > 0 && e < 31) b |= (uint16_t)(e << 10 | ((u >> 13) & 0x3ff));
            }
            memcpy(h + i * 2, &b, 2);
        }
    }
    void *d = NULL;
    CU(cudaMalloc(&d, n * es));
    CU(cudaMemcpy(d, h, n * es, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

int main(int argc, char **argv)
{
    int B = (int)arg(argc, argv, "--B", 8), T = (int)arg(argc, argv, "--T", 512);
    int L = (int)arg(argc, argv, "--layers", 12), H = (int)arg(argc, argv, "--heads", 12);
    int C = (int)arg(argc, argv, "--embd", 768), V = (int)arg(argc, argv, "--vocab", 50257);
    int reps = (int)arg(argc, argv, "--reps", 20);
    pl_dtype E = strcmp(sarg(argc, argv, "--dtype", "f16"), "bf16") == 0 ? PL_BF16 : PL_F16;
    bool argmax = strcmp(sarg(argc, argv, "--output", "argmax"), "argmax") == 0;
    int N = B * T, rows = argmax ? B : N;
    pl_error err = {0};
    int dn = 0;
    if (cudaGetDeviceCount(&dn) != cudaSuccess || dn < 1) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    CU(pl_gpt2_gpu_setup());
    /* Weights (one layer's worth shared by all layers: the timing does not care). */
    /* As the kind does for logits at every position: the head runs on wte's rows padded to 64
     * (zeros) and writes rows of that many, and a copy packs them; --pad 0: V columns, packed. */
    int ldv = !argmax && arg(argc, argv, "--pad", 1) ? (V + 63) / 64 * 64 : V;
    void *wte = dev_random((size_t)ldv * C, E);
    float *wpe = dev_random((size_t)T * C, PL_F32), *lnw = dev_random(C, PL_F32),
          *lnb = dev_random(C, PL_F32), *bC = dev_random(C, PL_F32);
    void *wqkv = dev_random((size_t)3 * C * C, E), *bqkv = dev_random(3 * C, E);
    void *wproj = dev_random((size_t)C * C, E), *wfc = dev_random((size_t)4 * C * C, E);
    void *bfc = dev_random(4 * C, E), *wout = dev_random((size_t)4 * C * C, E);
    float *x = dev_random((size_t)N * C, PL_F32);
    void *h = dev_random((size_t)N * C, E), *qkv = dev_random((size_t)N * 3 * C, E);
    void *att = dev_random((size_t)N * C, E), *u = dev_random((size_t)N * 4 * C, E);
    pl_dtype lgt = argmax ? PL_F32 : E;
    void *lg = dev_random((size_t)rows * ldv, lgt);
    void *lgc = ldv != V ? dev_random((size_t)rows * V, lgt) : NULL;
    int32_t *ids = NULL, *nx = NULL;
    CU(cudaMalloc((void **)&ids, (size_t)N * 4));
    CU(cudaMemset(ids, 0, (size_t)N * 4));
    CU(cudaMalloc((void **)&nx, (size_t)B * 4));
    size_t wsb = 32u << 20;
    void *ws = NULL;
    CU(cudaMalloc(&ws, wsb));
    pl_gpu_lt *lt = NULL;
    CK(pl_gpu_lt_new(&lt, &err));
    pl_gpu_mm *mqkv, *mproj, *mfc, *mout, *mhead;
    pl_gpu_mm_shape s1 = {3 * C, N, C, E, E, PL_GPU_EPI_BIAS, bqkv, false, 0};
    pl_gpu_mm_shape s2 = {C, N, C, E, PL_F32, PL_GPU_EPI_BIAS, bC, true, 0};
    pl_gpu_mm_shape s3 = {4 * C, N, C, E, E, PL_GPU_EPI_GELU_BIAS, bfc, false, 0};
    pl_gpu_mm_shape s4 = {C, N, 4 * C, E, PL_F32, PL_GPU_EPI_BIAS, bC, true, 0};
    pl_gpu_mm_shape s5 = {ldv, rows, C, E, lgt, PL_GPU_EPI_NONE, NULL, false, ldv};
    CK(pl_gpu_mm_new(lt, &s1, wsb, &mqkv, NULL, &err));
    CK(pl_gpu_mm_new(lt, &s2, wsb, &mproj, NULL, &err));
    CK(pl_gpu_mm_new(lt, &s3, wsb, &mfc, NULL, &err));
    CK(pl_gpu_mm_new(lt, &s4, wsb, &mout, NULL, &err));
    CK(pl_gpu_mm_new(lt, &s5, wsb, &mhead, NULL, &err));
    /* As the kind does: the last positions into f32 go through the f32 head kernel; bf16 into
     * f32 logits at every position also multiplies ln_f's rounding residual. */
    bool small = argmax && pl_gpt2_head_small_ok(rows, C);
    /* argmax (the last positions): the last layer after its QKV GEMM runs on B rows. */
    float *xl = dev_random((size_t)B * C, PL_F32);
    pl_gpu_mm *mproj_l = NULL, *mfc_l = NULL, *mout_l = NULL;
    pl_gpu_mm_shape l2 = {C, B, C, E, PL_F32, PL_GPU_EPI_BIAS, bC, true, 0};
    pl_gpu_mm_shape l3 = {4 * C, B, C, E, E, PL_GPU_EPI_GELU_BIAS, bfc, false, 0};
    pl_gpu_mm_shape l4 = {C, B, 4 * C, E, PL_F32, PL_GPU_EPI_BIAS, bC, true, 0};
    if (argmax) {
        CK(pl_gpu_mm_new(lt, &l2, wsb, &mproj_l, NULL, &err));
        CK(pl_gpu_mm_new(lt, &l3, wsb, &mfc_l, NULL, &err));
        CK(pl_gpu_mm_new(lt, &l4, wsb, &mout_l, NULL, &err));
    }
    bool split = !small && E == PL_BF16 && lgt == PL_F32;
    float *hf = dev_random((size_t)rows * C, PL_F32);
    pl_gpu_mm_shape s6 = {V, rows, C, E, PL_F32, PL_GPU_EPI_NONE, NULL, true, 0};
    pl_gpu_mm *mhead_lo = NULL;
    if (split) CK(pl_gpu_mm_new(lt, &s6, wsb, &mhead_lo, NULL, &err));
    /* As the gpt2 kind does in open(): time the heuristic's candidates, keep the fastest. */
    bool tune = arg(argc, argv, "--tune", 1) != 0;
    if (tune) {
        CK(pl_gpu_mm_tune(mqkv, wqkv, h, qkv, ws, NULL, NULL, &err));
        CK(pl_gpu_mm_tune(mproj, wproj, att, x, ws, NULL, NULL, &err));
        CK(pl_gpu_mm_tune(mfc, wfc, h, u, ws, NULL, NULL, &err));
        CK(pl_gpu_mm_tune(mout, wout, u, x, ws, NULL, NULL, &err));
        if (!small) CK(pl_gpu_mm_tune(mhead, wte, h, lg, ws, NULL, NULL, &err));
        if (argmax) {
            CK(pl_gpu_mm_tune(mproj_l, wproj, att, xl, ws, NULL, NULL, &err));
            CK(pl_gpu_mm_tune(mfc_l, wfc, h, u, ws, NULL, NULL, &err));
            CK(pl_gpu_mm_tune(mout_l, wout, u, xl, ws, NULL, NULL, &err));
        }
    }
    cudaStream_t sm;
    CU(cudaStreamCreate(&sm));
    int nops = 1 + L * 7 + 2 + (argmax ? 2 : 0) + (split ? 1 : 0) + (lgc ? 1 : 0);
    int sms = pl_gpu_sm_count();
    cudaEvent_t *ev = malloc((size_t)(nops + 1) * sizeof *ev);
    int *kind = malloc((size_t)nops * sizeof *kind);
    for (int i = 0; i <= nops; i++)
        CU(cudaEventCreate(&ev[i]));
    double ms[OP_N] = {0}, total = 0, graph_ms = 0, graph_best = 0;
    /* --graph: after the per-op pass, the same launches captured once (no events between
     * them) and replayed: the forward's latency as a graph node sequence, which is what a
     * pipeline's first block costs before its download can start. */
    bool graph = arg(argc, argv, "--graph", 0) != 0;
    for (int r = 0; r < reps + 3; r++) {
        int k = 0;
        bool cap = r == reps + 2, evs = !cap;
        if (cap && !graph) break;
        if (cap) CU(cudaStreamBeginCapture(sm, cudaStreamCaptureModeThreadLocal));
#define OP(kd, call)                                                                               \
    do {                                                                                           \
        kind[k] = kd;                                                                              \
        if (evs) CU(cudaEventRecord(ev[k], sm));                                                   \
        k++;                                                                                       \
        call;                                                                                      \
    } while (0)
        OP(OP_EMBED, CU(pl_gpt2_launch_embed(E, x, ids, wte, wpe, N, T, C, V, sm)));
        for (int l = 0; l < L; l++) {
            OP(OP_LN, CU(pl_gpt2_launch_layernorm(E, h, NULL, x, lnw, lnb, N, 0, 1, C, 1e-5f, sm)));
            OP(OP_QKV, CK(pl_gpu_mm_run(mqkv, wqkv, h, qkv, ws, sm, NULL, -1, &err)));
            if (l == L - 1 && argmax) { /* as the kind does: the last layer at the last positions */
                OP(OP_ATTN, CU(pl_gpt2_launch_attention_last(E, att, qkv, B, T, H, C / H, sm)));
                OP(OP_ATTN, CU(pl_gpt2_launch_gather_rows(xl, x, B, T - 1, T, C, sm)));
                OP(OP_PROJ, CK(pl_gpu_mm_run(mproj_l, wproj, att, xl, ws, sm, NULL, -1, &err)));
                OP(OP_LN,
                   CU(pl_gpt2_launch_layernorm(E, h, NULL, xl, lnw, lnb, B, 0, 1, C, 1e-5f, sm)));
                OP(OP_FC, CK(pl_gpu_mm_run(mfc_l, wfc, h, u, ws, sm, NULL, -1, &err)));
                OP(OP_OUT, CK(pl_gpu_mm_run(mout_l, wout, u, xl, ws, sm, NULL, -1, &err)));
                break;
            }
            OP(OP_ATTN, CU(pl_gpt2_launch_attention(E, att, qkv, B, T, H, C / H, sm)));
            OP(OP_PROJ, CK(pl_gpu_mm_run(mproj, wproj, att, x, ws, sm, NULL, -1, &err)));
            OP(OP_LN, CU(pl_gpt2_launch_layernorm(E, h, NULL, x, lnw, lnb, N, 0, 1, C, 1e-5f, sm)));
            OP(OP_FC, CK(pl_gpu_mm_run(mfc, wfc, h, u, ws, sm, NULL, -1, &err)));
            OP(OP_OUT, CK(pl_gpu_mm_run(mout, wout, u, x, ws, sm, NULL, -1, &err)));
        }
        if (small) { /* as the kind does at the last positions: ln_f in f32, the f32 head */
            OP(OP_LN, CU(pl_gpt2_launch_layernorm(PL_F32, hf, NULL, xl, lnw, lnb, rows, 0, 1, C,
                                                  1e-5f, sm)));
            OP(OP_HEAD, CU(pl_gpt2_launch_head_f32(E, lg, hf, wte, rows, C, V, sms, sm)));
        } else {
            OP(OP_LN, CU(pl_gpt2_launch_layernorm(E, h, split ? u : NULL, argmax ? xl : x, lnw, lnb,
                                                  rows, 0, 1, C, 1e-5f, sm)));
            OP(OP_HEAD, CK(pl_gpu_mm_run(mhead, wte, h, lg, ws, sm, NULL, -1, &err)));
            if (split) OP(OP_HEAD, CK(pl_gpu_mm_run(mhead_lo, wte, u, lg, ws, sm, NULL, -1, &err)));
            if (lgc)
                OP(OP_HEAD,
                   CU(pl_gpt2_launch_unpad((int)pl_dtype_size(lgt), lgc, lg, rows, V, ldv, sm)));
        }
        if (argmax) OP(OP_ARGMAX, CU(pl_gpu_launch_argmax((int)lgt, lg, rows, V, nx, sms, sm)));
#undef OP
        if (cap) {
            cudaGraph_t g;
            cudaGraphExec_t ge;
            CU(cudaStreamEndCapture(sm, &g));
            CU(cudaGraphInstantiate(&ge, g, 0));
            float best = 1e30f, sum = 0;
            for (int i = 0; i < reps + 2; i++) {
                CU(cudaEventRecord(ev[0], sm));
                CU(cudaGraphLaunch(ge, sm));
                CU(cudaEventRecord(ev[1], sm));
                CU(cudaEventSynchronize(ev[1]));
                float t = 0;
                CU(cudaEventElapsedTime(&t, ev[0], ev[1]));
                if (i < 2) continue;
                sum += t;
                best = t < best ? t : best;
            }
            graph_ms = sum / reps;
            graph_best = best;
            CU(cudaGraphExecDestroy(ge));
            CU(cudaGraphDestroy(g));
            break;
        }
        CU(cudaEventRecord(ev[k], sm));
        CU(cudaEventSynchronize(ev[k]));
        if (r < 2) continue; /* warm-up */
        for (int i = 0; i < k; i++) {
            float t = 0;
            CU(cudaEventElapsedTime(&t, ev[i], ev[i + 1]));
            ms[kind[i]] += t / reps;
        }
        float t = 0;
        CU(cudaEventElapsedTime(&t, ev[0], ev[k]));
        total += t / reps;
    }
    double fl[OP_N] = {0};
    /* argmax: the last layer's projection and MLP run on B rows, its attention on B queries. */
    double Lf = argmax ? L - 1 + (double)B / N : L;
    fl[OP_QKV] = 2.0 * N * C * 3.0 * C * L;
    fl[OP_PROJ] = 2.0 * N * C * (double)C * Lf;
    fl[OP_FC] = 2.0 * N * C * 4.0 * C * Lf;
    fl[OP_OUT] = fl[OP_FC];
    fl[OP_HEAD] = 2.0 * rows * (double)C * V * (split ? 2 : 1);
    fl[OP_ATTN] = 2.0 * 2.0 * B * (double)T * (T + 1) / 2 * C * (argmax ? L - 1 : L) +
                  (argmax ? 2.0 * 2.0 * B * (double)T * C : 0); /* causal QK^T and PV */
    printf("bench_gpt2: B=%d T=%d layers=%d heads=%d embd=%d vocab=%d %s output %s, %d reps, "
           "gemm algorithms %s\n",
           B, T, L, H, C, V, pl_dtype_name(E), argmax ? "argmax" : "logits", reps,
           tune ? "tuned" : "the heuristic's first");
    printf("  %-28s %10s %7s %10s\n", "op", "ms/fwd", "share", "TFLOP/s");
    double gemm_ms = 0, gemm_fl = 0;
    for (int i = 0; i < OP_N; i++) {
        if (ms[i] == 0) continue;
        char rate[32] = "";
        if (fl[i] > 0) snprintf(rate, sizeof rate, "%.1f", fl[i] / (ms[i] * 1e-3) / 1e12);
        printf("  %-28s %10.3f %6.1f%% %10s\n", op_names[i], ms[i], 100 * ms[i] / total, rate);
        if (i == OP_QKV || i == OP_PROJ || i == OP_FC || i == OP_OUT || i == OP_HEAD) {
            gemm_ms += ms[i];
            gemm_fl += fl[i];
        }
    }
    double all_fl = gemm_fl + fl[OP_ATTN];
    printf("  %-28s %10.3f %6.1f%% %10.1f\n", "all gemms", gemm_ms, 100 * gemm_ms / total,
           gemm_fl / (gemm_ms * 1e-3) / 1e12);
    printf("  %-28s %10.3f %6.1f%% %10.1f  (%.3f M tok/s)\n", "forward", total, 100.0,
           all_fl / (total * 1e-3) / 1e12, N / (total * 1e-3) / 1e6);
    if (graph)
        printf("  %-28s %10.3f          (best %.3f ms; one graph, no events between ops)\n",
               "forward as a graph", graph_ms, graph_best);
    /* The GEMM rate of this dtype through the same path. */
    int G = 8192;
    void *ga = dev_random((size_t)G * G, E), *gb = dev_random((size_t)G * G, E),
         *gc = dev_random((size_t)G * G, E);
    pl_gpu_mm *mg;
    pl_gpu_mm_shape sg = {G, G, G, E, E, PL_GPU_EPI_NONE, NULL, false, 0};
    CK(pl_gpu_mm_new(lt, &sg, wsb, &mg, NULL, &err));
    for (int i = 0; i < 3; i++)
        CK(pl_gpu_mm_run(mg, ga, gb, gc, ws, sm, NULL, -1, &err));
    CU(cudaEventRecord(ev[0], sm));
    for (int i = 0; i < 20; i++)
        CK(pl_gpu_mm_run(mg, ga, gb, gc, ws, sm, NULL, -1, &err));
    CU(cudaEventRecord(ev[1], sm));
    CU(cudaEventSynchronize(ev[1]));
    float gt = 0;
    CU(cudaEventElapsedTime(&gt, ev[0], ev[1]));
    double rate = 2.0 * G * G * (double)G * 20 / (gt * 1e-3) / 1e12;
    printf("  cuBLASLt %s %d^3 gemm: %.1f TFLOP/s; the forward runs at %.1f%% of it, its gemms "
           "at %.1f%%\n",
           pl_dtype_name(E), G, rate, 100 * all_fl / (total * 1e-3) / 1e12 / rate,
           100 * gemm_fl / (gemm_ms * 1e-3) / 1e12 / rate);
    printf("RESULT {\"mode\": \"bench_gpt2\", \"output\": \"%s\", \"dtype\": \"%s\", \"B\": %d, "
           "\"T\": %d, \"fwd_ms\": "
           "%.4f, \"gemm_ms\": %.4f, \"attn_ms\": %.4f, \"ln_ms\": %.4f, \"gemm_rate\": %.1f, "
           "\"fwd_tflops\": %.1f, \"attn_tflops\": %.1f, \"tok_s\": %.0f}\n",
           argmax ? "argmax" : "logits", pl_dtype_name(E), B, T, total, gemm_ms, ms[OP_ATTN],
           ms[OP_LN], rate, all_fl / (total * 1e-3) / 1e12,
           fl[OP_ATTN] / (ms[OP_ATTN] * 1e-3) / 1e12, N / (total * 1e-3));
    return 0;
}
