/* test_gpt2_emu: the gpt2 kind's CUDA kernels (stages/gpt2/gpt2_kernels.cuh) run on the CPU through
 * tests/unit/cuda_emu.h and compared with plain double-precision references: flash attention at
 * head sizes 16, 32, 64 and lengths that are and are not multiples of its 64-row tile, in f16 and
 * bf16 (through the emulated ldmatrix and mma.sync, with their PTX fragment layouts); the plain
 * attention; layernorm (all rows and last positions); embedding; log-softmax; the row gather and
 * the padded logits' packing; the KV cache's writes, append and cached attention (one split and
 * several, then the merge), decode's embeddings (alone and fused with the first layernorm) and
 * the gather of each prompt's last position; the matrix-vector linears of decode at a few rows
 * with their layernorm prologue and epilogues. It checks the kernels' indexing, causal masking,
 * online softmax and synchronisation without a GPU; the GPU tests (tests/gpu/test_gpt2_gpu.sh,
 * test_generate_gpu.sh) check them on the device. */
#include "cuda_emu.h"

#include <cstdio>
#include <random>

#include "gpt2_kernels.cuh"

using namespace pl_gpt2;

static int failures;
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                   \
            std::fprintf(stderr, __VA_ARGS__);                                                     \
            std::fprintf(stderr, "\n");                                                            \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

template <typename E> static E to_e(float f);
template <> __half to_e<__half>(float f)
{
    return __float2half_rn(f);
}
template <> __nv_bfloat16 to_e<__nv_bfloat16>(float f)
{
    return __float2bfloat16_rn(f);
}
static float fe(__half h)
{
    return __half2float(h);
}
static float fe(__nv_bfloat16 h)
{
    return __bfloat162float(h);
}

/* Causal attention of qkv [B, T, 3C] in double. */
template <typename E>
static std::vector<double> attention_ref(const std::vector<E> &qkv, int B, int T, int H, int HD)
{
    int C = H * HD;
    std::vector<double> out((size_t)B * T * C), p(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const E *q = &qkv[((size_t)b * T + t) * 3 * C + h * HD];
                double mx = -1e300, sum = 0;
                for (int s = 0; s <= t; s++) {
                    const E *k = &qkv[((size_t)b * T + s) * 3 * C + C + h * HD];
                    double d = 0;
                    for (int i = 0; i < HD; i++)
                        d += (double)fe(q[i]) * fe(k[i]);
                    p[s] = d / std::sqrt((double)HD);
                    mx = std::max(mx, p[s]);
                }
                for (int s = 0; s <= t; s++)
                    sum += p[s] = std::exp(p[s] - mx);
                for (int i = 0; i < HD; i++) {
                    double o = 0;
                    for (int s = 0; s <= t; s++)
                        o += p[s] / sum * fe(qkv[((size_t)b * T + s) * 3 * C + 2 * C + h * HD + i]);
                    out[((size_t)b * T + t) * C + h * HD + i] = o;
                }
            }
    return out;
}

template <typename E, int HD, int NW = 4, int MT = 1>
static void check_attention(int B, int T, int H, const char *name, bool plain)
{
    int C = H * HD;
    std::mt19937 rng(T * 131 + HD);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<E> qkv((size_t)B * T * 3 * C), out((size_t)B * T * C, to_e<E>(-7.0f)), out2 = out;
    for (auto &v : qkv)
        v = to_e<E>(nd(rng));
    auto ref = attention_ref(qkv, B, T, H, HD);
    float scale_log2 = 1.4426950408889634f / std::sqrt((float)HD);
    using L = attn_smem<HD, NW, MT>;
    emu::launch(dim3((T + L::BR - 1) / L::BR, H, B), dim3(NW * 32), L::bytes,
                [&] { attention_kernel<E, HD, NW, MT>(out.data(), qkv.data(), T, H, scale_log2); });
    if (plain) /* a CPU thread per CUDA thread: only where it adds something */
        emu::launch(dim3((unsigned)(((int64_t)B * T * H * 32 + 255) / 256)), dim3(256), 0, [&] {
            attention_naive_kernel<E>(out2.data(), qkv.data(), B, T, H, HD,
                                      1.0f / std::sqrt((float)HD));
        });
    double e1 = 0, e2 = 0, n = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        e1 += (fe(out[i]) - ref[i]) * (fe(out[i]) - ref[i]);
        if (plain) e2 += (fe(out2[i]) - ref[i]) * (fe(out2[i]) - ref[i]);
        n += ref[i] * ref[i];
    }
    double r1 = std::sqrt(e1 / n), r2 = std::sqrt(e2 / n);
    double tol = std::is_same<E, __half>::value ? 4e-3 : 2e-2;
    std::printf("attention %s hd=%d B=%d T=%d H=%d, %d warps x %d m-tiles: flash rel L2 %.2e", name,
                HD, B, T, H, NW, MT, r1);
    if (plain) std::printf(", plain %.2e", r2);
    std::printf("\n");
    EXPECT(r1 < tol, "flash attention %s hd %d T %d: relative L2 error %g >= %g", name, HD, T, r1,
           tol);
    EXPECT(r2 < tol, "plain attention %s hd %d T %d: relative L2 error %g >= %g", name, HD, T, r2,
           tol);
}

/* A row's mean and (biased) variance in double: the layernorm references'. */
static void row_stats(const float *x, int C, double &m, double &v)
{
    m = 0, v = 0;
    for (int i = 0; i < C; i++)
        m += x[i];
    m /= C;
    for (int i = 0; i < C; i++)
        v += (x[i] - m) * (x[i] - m);
    v /= C;
}

static void check_layernorm_embed_logprob(int C)
{
    int B = 3, T = 5, V = 40, N = B * T;
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x((size_t)N * C), w(C), b(C), wpe((size_t)T * C);
    for (auto &v : x)
        v = nd(rng) * 3 + 1;
    for (int i = 0; i < C; i++)
        w[i] = 1 + nd(rng) * 0.1f, b[i] = nd(rng) * 0.1f;
    for (auto &v : wpe)
        v = nd(rng);
    /* layernorm, last positions: rows b*T + T-1 */
    std::vector<__half> out((size_t)B * C), lo((size_t)B * C);
    emu::launch(dim3((B + 7) / 8), dim3(256), 0, [&] {
        ln_with_width(C, [&](auto nv) { /* the width the launcher gives C */
                                        layernorm_kernel<__half, decltype(nv)::value>(
                                            out.data(), lo.data(), x.data(), w.data(), b.data(), B,
                                            T - 1, T, C, 1e-5f);
        });
    });
    double worst = 0, worst_split = 0;
    for (int r = 0; r < B; r++) {
        const float *xr = &x[((size_t)r * T + T - 1) * C];
        double m, v;
        row_stats(xr, C, m, v);
        for (int i = 0; i < C; i++) {
            double want = (xr[i] - m) / std::sqrt(v + 1e-5) * w[i] + b[i];
            worst = std::max(worst, std::fabs(fe(out[(size_t)r * C + i]) - want));
            /* out + lo: the rounding residual restores about 11 more bits */
            worst_split = std::max(worst_split, std::fabs(fe(out[(size_t)r * C + i]) +
                                                          fe(lo[(size_t)r * C + i]) - want));
        }
    }
    std::printf("layernorm (last positions, C=%d): max error %.2e\n", C, worst);
    EXPECT(worst < 4e-3, "layernorm: max error %g", worst);
    std::printf("layernorm out + residual: max error %.2e\n", worst_split);
    EXPECT(worst_split < 2e-5, "layernorm out + residual: max error %g", worst_split);
    /* embedding */
    std::vector<__half> wte((size_t)V * C);
    for (auto &v : wte)
        v = to_e<__half>(nd(rng));
    std::vector<int32_t> ids(N);
    for (int i = 0; i < N; i++)
        ids[i] = (i * 7) % V;
    ids[3] = V + 5; /* out of range: row 0 */
    std::vector<float> e((size_t)N * C);
    emu::launch(dim3(4), dim3(256), 0, [&] {
        embed_kernel<__half>(e.data(), ids.data(), wte.data(), wpe.data(), N, T, C, V);
    });
    int bad = 0;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < C; i++) {
            int id = ids[n] < V ? ids[n] : 0;
            float want = fe(wte[(size_t)id * C + i]) + wpe[(size_t)(n % T) * C + i];
            bad += e[(size_t)n * C + i] != want;
        }
    EXPECT(bad == 0, "embedding: %d wrong values", bad);
    /* log-softmax of every position */
    std::vector<float> lg((size_t)N * V), lp(N);
    for (auto &v : lg)
        v = nd(rng) * 4;
    std::vector<int32_t> tg(N);
    for (int i = 0; i < N; i++)
        tg[i] = (i * 11) % V;
    emu::launch(dim3(N), dim3(256), 0,
                [&] { logprob_kernel<float>(lp.data(), lg.data(), tg.data(), N, T, T, V); });
    worst = 0;
    for (int r = 0; r < N; r++) {
        double mx = -1e300, s = 0;
        for (int v = 0; v < V; v++)
            mx = std::max(mx, (double)lg[(size_t)r * V + v]);
        for (int v = 0; v < V; v++)
            s += std::exp(lg[(size_t)r * V + v] - mx);
        double want = lg[(size_t)r * V + tg[r]] - mx - std::log(s);
        worst = std::max(worst, std::fabs(lp[r] - want));
    }
    std::printf("logprob: max error %.2e\n", worst);
    EXPECT(worst < 1e-4, "logprob: max error %g", worst);
}

/* Attention of the last position only, against the reference's last rows; and the gather. */
template <typename E, int HD> static void check_attention_last(int B, int T, int H)
{
    int C = H * HD;
    std::mt19937 rng(T * 17 + HD);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<E> qkv((size_t)B * T * 3 * C), out((size_t)B * C, to_e<E>(-7.0f));
    for (auto &v : qkv)
        v = to_e<E>(nd(rng));
    auto ref = attention_ref(qkv, B, T, H, HD);
    emu::launch(dim3(H, B), dim3(32), 0, [&] {
        attention_last_kernel<E, HD>(out.data(), qkv.data(), T, H, 1.0f / std::sqrt((float)HD));
    });
    double e = 0, n = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < C; i++) {
            double want = ref[((size_t)b * T + T - 1) * C + i], got = fe(out[(size_t)b * C + i]);
            e += (got - want) * (got - want);
            n += want * want;
        }
    double r = std::sqrt(e / n), tol = std::is_same<E, __half>::value ? 2e-3 : 1e-2;
    std::printf("attention (last position) hd=%d B=%d T=%d H=%d: rel L2 %.2e\n", HD, B, T, H, r);
    EXPECT(r < tol, "attention (last position) hd %d T %d: relative L2 error %g", HD, T, r);
    std::vector<float> src(7 * 5), dst(3 * 5, -1);
    for (size_t i = 0; i < src.size(); i++)
        src[i] = (float)i;
    emu::launch(dim3(1), dim3(64), 0,
                [&] { gather_rows_kernel(dst.data(), src.data(), 3, 1, 2, 5); });
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 5; c++)
            EXPECT(dst[r * 5 + c] == src[(1 + 2 * r) * 5 + c], "gather: row %d col %d", r, c);
    /* The padded head's rows (ld 8) packed to rows of 5, 16-bit and 32-bit elements. */
    std::vector<uint16_t> p16(4 * 8), d16(4 * 5 + 1, 0xffff);
    std::vector<float> p32(4 * 8), d32(4 * 5 + 1, -1);
    for (int i = 0; i < 4 * 8; i++)
        p16[i] = (uint16_t)i, p32[i] = (float)i;
    emu::launch(dim3(2), dim3(4), 0, [&] { unpad_rows_kernel(d16.data(), p16.data(), 4, 5, 8); });
    emu::launch(dim3(1), dim3(3), 0, [&] { unpad_rows_kernel(d32.data(), p32.data(), 4, 5, 8); });
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 5; c++) {
            EXPECT(d16[r * 5 + c] == r * 8 + c, "unpad 16-bit: row %d col %d", r, c);
            EXPECT(d32[r * 5 + c] == r * 8 + c, "unpad 32-bit: row %d col %d", r, c);
        }
    EXPECT(d16[20] == 0xffff && d32[20] == -1, "unpad wrote past the packed rows");
    /* Rows long enough for the 16-byte stores, the output starting at every element offset in
     * 16 bytes (a packed row starts anywhere), odd and even widths. */
    for (int V : {37, 61, 64, 7})
        for (int off = 0; off < 8; off++) {
            const int R = 5, LD = 64;
            std::vector<uint16_t> ps(R * LD), ds(R * V + 16, 0xffff);
            std::vector<float> pf(R * LD), df(R * V + 16, -1);
            for (int i = 0; i < R * LD; i++)
                ps[i] = (uint16_t)(i + 1), pf[i] = (float)(i + 1);
            emu::launch(dim3(2), dim3(3), 0,
                        [&] { unpad_rows_kernel(ds.data() + off, ps.data(), R, V, LD); });
            emu::launch(dim3(3), dim3(2), 0,
                        [&] { unpad_rows_kernel(df.data() + off % 4, pf.data(), R, V, LD); });
            for (int i = 0; i < R * V + 16; i++) {
                int k = i - off, kf = i - off % 4;
                uint16_t w16 = k >= 0 && k < R * V ? (uint16_t)((k / V) * LD + k % V + 1) : 0xffff;
                float w32 = kf >= 0 && kf < R * V ? (float)((kf / V) * LD + kf % V + 1) : -1;
                EXPECT(ds[i] == w16, "unpad 16-bit V %d offset %d: element %d is %d, want %d", V,
                       off, i, ds[i], w16);
                EXPECT(df[i] == w32, "unpad 32-bit V %d offset %d: element %d is %g, want %g", V,
                       off % 4, i, df[i], w32);
            }
        }
}

/* The KV cache kernels against double references: prefill's cache writes (positions below each
 * length only) and the cached attention of each sequence's last real position; decode's append
 * and its attention over the cache, in one or several splits (then the merge); decode's
 * embeddings and the gather of the last positions. CT is the cache's type (E or f32). */
template <typename E, typename CT, int HD>
static void check_cached(int B, int T, int H, int P, int S, const char *name)
{
    const int C = H * HD;
    std::mt19937 rng(T * 7 + HD + S);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto ct = [](float f) {
        if constexpr (std::is_same<CT, float>::value)
            return f;
        else
            return to_e<CT>(f);
    };
    auto cf = [](CT v) {
        if constexpr (std::is_same<CT, float>::value)
            return v;
        else
            return fe(v);
    };
    const size_t half = (size_t)B * H * P * HD; /* the keys' half of a layer's cache */
    std::vector<CT> cache(2 * half, ct(-9.0f));
    std::vector<int32_t> len(B);
    for (int b = 0; b < B; b++)
        len[b] = 1 + (int)(rng() % (unsigned)T);
    len[0] = T;
    std::vector<float> parts((size_t)B * H * S * (HD + 2), -1.0f);
    auto at = [&](int which, int b, int h, int t) {
        return (size_t)which * half + (((size_t)b * H + h) * P + t) * HD;
    };
    /* One query's attention in double over n keys/values given by kv(which, s, i). */
    auto attend = [&](const E *q, int n, auto kv, double *o) {
        std::vector<double> p(n);
        double mx = -1e300, sum = 0;
        for (int s = 0; s < n; s++) {
            double d = 0;
            for (int i = 0; i < HD; i++)
                d += (double)fe(q[i]) * kv(0, s, i);
            p[s] = d / std::sqrt((double)HD);
            mx = std::max(mx, p[s]);
        }
        for (int s = 0; s < n; s++)
            sum += p[s] = std::exp(p[s] - mx);
        for (int i = 0; i < HD; i++) {
            o[i] = 0;
            for (int s = 0; s < n; s++)
                o[i] += p[s] / sum * kv(1, s, i);
        }
    };
    const double tol = std::is_same<E, __half>::value ? 4e-3 : 2e-2;
    /* prefill */
    {
        std::vector<E> qkv((size_t)B * T * 3 * C), out((size_t)B * C, to_e<E>(-7.0f));
        for (auto &v : qkv)
            v = to_e<E>(nd(rng));
        emu::launch(dim3(3), dim3(64), 0, [&] {
            cache_write_kernel<E, CT>(cache.data(), qkv.data(), len.data(), B, T, H, HD, P);
        });
        int bad = 0;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < P; t++)
                    for (int i = 0; i < HD; i++)
                        for (int w = 0; w < 2; w++) {
                            float want = t < len[b]
                                             ? cf(ct(fe(qkv[((size_t)b * T + t) * 3 * C +
                                                            (size_t)(1 + w) * C + h * HD + i])))
                                             : -9.0f;
                            bad += cf(cache[at(w, b, h, t) + i]) != want;
                        }
        EXPECT(bad == 0, "cache write %s: %d wrong values", name, bad);
        emu::launch(dim3(S, H, B), dim3(kCachedThreads), 0, [&] {
            attention_cached_kernel<E, CT, HD>(out.data(), parts.data(), nullptr, qkv.data(),
                                               cache.data(), len.data(), nullptr, B, T, H, P, S,
                                               1.0f / std::sqrt((float)HD));
        });
        if (S > 1)
            emu::launch(dim3(H, B), dim3(HD), 0,
                        [&] { attention_combine_kernel<E>(out.data(), parts.data(), H, HD, S); });
        double e = 0, n = 0, o[HD];
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                const E *q = &qkv[((size_t)b * T + len[b] - 1) * 3 * C + h * HD];
                attend(
                    q, len[b],
                    [&](int w, int s, int i) {
                        return (double)fe(
                            qkv[((size_t)b * T + s) * 3 * C + (size_t)(1 + w) * C + h * HD + i]);
                    },
                    o);
                for (int i = 0; i < HD; i++) {
                    double got = fe(out[(size_t)b * C + h * HD + i]);
                    e += (got - o[i]) * (got - o[i]);
                    n += o[i] * o[i];
                }
            }
        double r = std::sqrt(e / n);
        std::printf("cached attention (prefill) %s hd=%d B=%d T=%d H=%d P=%d splits=%d: rel L2 "
                    "%.2e\n",
                    name, HD, B, T, H, P, S, r);
        EXPECT(r < tol, "cached attention (prefill) %s: relative L2 error %g", name, r);
    }
    /* decode at step P - T: sequence b's position len + step, clamped to P - 1 (sequence 0's
     * would be P), the cache before it filled */
    {
        const int step = P - T;
        for (size_t i = 0; i < cache.size(); i++)
            cache[i] = ct(nd(rng));
        std::vector<E> qkv((size_t)B * 3 * C), out((size_t)B * C, to_e<E>(-7.0f));
        for (auto &v : qkv)
            v = to_e<E>(nd(rng));
        std::vector<CT> before = cache;
        /* decode merges its splits in the kernel: the last block of each (sequence, head) */
        std::vector<int> count((size_t)B * H, 0);
        emu::launch(dim3(S, H, B), dim3(kCachedThreads), 0, [&] {
            attention_cached_kernel<E, CT, HD>(out.data(), parts.data(), count.data(), qkv.data(),
                                               cache.data(), len.data(), &step, B, T, H, P, S,
                                               1.0f / std::sqrt((float)HD));
        });
        int left = 0;
        for (int c : count)
            left += c != 0;
        EXPECT(left == 0, "cached attention (decode) %s: %d counts not back at zero", name, left);
        double e = 0, n = 0, o[HD];
        int bad = 0;
        for (int b = 0; b < B; b++) {
            int pos = std::min(len[b] + step, P - 1);
            for (int h = 0; h < H; h++) {
                for (int t = 0; t < P; t++)
                    for (int i = 0; i < HD; i++)
                        for (int w = 0; w < 2; w++) {
                            float want = t == pos
                                             ? cf(ct(fe(qkv[(size_t)b * 3 * C +
                                                            (size_t)(1 + w) * C + h * HD + i])))
                                             : cf(before[at(w, b, h, t) + i]);
                            bad += cf(cache[at(w, b, h, t) + i]) != want;
                        }
                attend(
                    &qkv[(size_t)b * 3 * C + h * HD], pos + 1,
                    [&](int w, int s, int i) { return (double)cf(cache[at(w, b, h, s) + i]); }, o);
                for (int i = 0; i < HD; i++) {
                    double got = fe(out[(size_t)b * C + h * HD + i]);
                    e += (got - o[i]) * (got - o[i]);
                    n += o[i] * o[i];
                }
            }
        }
        EXPECT(bad == 0, "decode append %s: %d wrong cache values", name, bad);
        double r = std::sqrt(e / n);
        std::printf("cached attention (decode) %s hd=%d B=%d H=%d P=%d splits=%d: rel L2 %.2e\n",
                    name, HD, B, H, P, S, r);
        EXPECT(r < tol, "cached attention (decode) %s: relative L2 error %g", name, r);
        /* decode's embeddings at len + step (clamped to P - 1); an id out of range reads row 0 */
        const int V = 11;
        std::vector<E> wte((size_t)V * C);
        std::vector<float> wpe((size_t)P * C), x((size_t)B * C, -1);
        for (auto &v : wte)
            v = to_e<E>(nd(rng));
        for (auto &v : wpe)
            v = nd(rng);
        std::vector<int32_t> ids(B);
        for (int b = 0; b < B; b++)
            ids[b] = b == 1 ? V : (b * 3) % V;
        emu::launch(dim3(2), dim3(64), 0, [&] {
            embed_at_kernel<E>(x.data(), ids.data(), wte.data(), wpe.data(), len.data(), &step, B,
                               C, V, P);
        });
        bad = 0;
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++) {
                int id = ids[b] < V ? ids[b] : 0, pos = std::min(len[b] + step, P - 1);
                bad +=
                    x[(size_t)b * C + c] != fe(wte[(size_t)id * C + c]) + wpe[(size_t)pos * C + c];
            }
        EXPECT(bad == 0, "decode embedding %s: %d wrong values", name, bad);
        std::vector<float> xs((size_t)B * T * C), g((size_t)B * C, -1);
        for (size_t i = 0; i < xs.size(); i++)
            xs[i] = (float)i;
        emu::launch(dim3(2), dim3(64), 0,
                    [&] { gather_last_kernel(g.data(), xs.data(), len.data(), B, T, C); });
        bad = 0;
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++)
                bad += g[(size_t)b * C + c] != xs[((size_t)b * T + len[b] - 1) * C + c];
        EXPECT(bad == 0, "gather of the last positions: %d wrong values", bad);
    }
}

/* Decode's fused embeddings and first layernorm against the two kernels it replaces: the same
 * bits in x and in the layernorm's output. */
template <typename E> static void check_embed_ln(int B, int C, int V, int P)
{
    std::mt19937 rng(C + B);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<E> wte((size_t)V * C), h1((size_t)B * C), h2((size_t)B * C);
    std::vector<float> wpe((size_t)P * C), w(C), b(C), x1((size_t)B * C, -1), x2((size_t)B * C, -2);
    for (auto &v : wte)
        v = to_e<E>(nd(rng));
    for (auto &v : wpe)
        v = nd(rng);
    for (int i = 0; i < C; i++)
        w[i] = 1 + nd(rng) * 0.1f, b[i] = nd(rng) * 0.1f;
    std::vector<int32_t> ids(B), len(B);
    for (int r = 0; r < B; r++)
        ids[r] = r == 2 ? -3 : (r * 5) % V, len[r] = 1 + r % 4;
    const int step = 3;
    emu::launch(dim3(1), dim3(64), 0, [&] {
        embed_at_kernel<E>(x1.data(), ids.data(), wte.data(), wpe.data(), len.data(), &step, B, C,
                           V, P);
    });
    ln_with_width(C, [&](auto nv) {
        constexpr int NV = decltype(nv)::value;
        if constexpr (NV > 0) {
            emu::launch(dim3((B + 7) / 8), dim3(256), 0, [&] {
                layernorm_kernel<E, NV>(h1.data(), nullptr, x1.data(), w.data(), b.data(), B, 0, 1,
                                        C, 1e-5f);
            });
            emu::launch(dim3((B + 7) / 8), dim3(256), 0, [&] {
                embed_ln_kernel<E, NV>(x2.data(), h2.data(), ids.data(), wte.data(), wpe.data(),
                                       len.data(), &step, w.data(), b.data(), B, C, V, P, 1e-5f);
            });
        } else {
            EXPECT(false, "embed_ln: C %d has no float4 width", C);
        }
    });
    int bad = 0;
    for (size_t i = 0; i < x1.size(); i++)
        bad += x1[i] != x2[i] || bits_of(h1[i]) != bits_of(h2[i]);
    std::printf("embedding + layernorm (decode) B=%d C=%d: %d values differ from the two kernels\n",
                B, C, bad);
    EXPECT(bad == 0, "embed_ln B %d C %d: %d values differ", B, C, bad);
}

/* The f32 LM head at a few rows against a double-precision product. */
template <typename E> static void check_head(int rows, int C, int V)
{
    std::mt19937 rng(rows * 7 + C);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> h((size_t)rows * C), out((size_t)rows * V, -7.0f);
    std::vector<E> w((size_t)V * C);
    for (auto &v : h)
        v = nd(rng);
    for (auto &v : w)
        v = to_e<E>(nd(rng) * 0.05f);
    emu::launch(dim3(2), dim3(64), 0,
                [&] { head_f32_kernel<E>(out.data(), h.data(), w.data(), rows, C, V); });
    double worst = 0;
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < V; v++) {
            double want = 0;
            for (int c = 0; c < C; c++)
                want += (double)h[(size_t)r * C + c] * fe(w[(size_t)v * C + c]);
            worst = std::max(worst, std::fabs(out[(size_t)r * V + v] - want));
        }
    std::printf("head f32 rows=%d C=%d V=%d: max error %.2e\n", rows, C, V, worst);
    EXPECT(worst < 1e-4, "head f32 rows %d C %d: max error %g", rows, C, worst);
}

/* The matrix-vector linear (decode at a few rows) against double: each prologue (plain,
 * layernorm) into each epilogue it is built for, with K cut into 1, 2 and 4 slices, N not a
 * multiple of the block's features, and 1 to kLinMaxRows rows. */
template <typename E, lin_in IN, lin_out OUT>
static void check_linear_small(int rows, int K, int N, const char *name)
{
    std::mt19937 rng(11 + rows + K + N);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<E> W((size_t)N * K), Xe((size_t)rows * K), be(N);
    std::vector<float> Xf((size_t)rows * K), bf(N), lnw(K), lnb(K), Y0((size_t)rows * N);
    for (auto &v : W)
        v = to_e<E>(nd(rng) * 0.05f);
    for (auto &v : Xe)
        v = to_e<E>(nd(rng));
    for (auto &v : Xf)
        v = nd(rng) * 2 + 0.5f;
    for (int j = 0; j < N; j++)
        be[j] = to_e<E>(nd(rng) * 0.1f), bf[j] = nd(rng) * 0.1f;
    for (int i = 0; i < K; i++)
        lnw[i] = 1 + nd(rng) * 0.1f, lnb[i] = nd(rng) * 0.1f;
    for (auto &v : Y0)
        v = nd(rng);
    /* the reference's X in double (layernorm: rounded to E, as the kernel's shared copy is) */
    std::vector<double> xr((size_t)rows * K);
    for (int r = 0; r < rows; r++) {
        if (IN == lin_in::plain) {
            for (int i = 0; i < K; i++)
                xr[(size_t)r * K + i] = fe(Xe[(size_t)r * K + i]);
        } else {
            const float *x = &Xf[(size_t)r * K];
            double m, v;
            row_stats(x, K, m, v);
            for (int i = 0; i < K; i++)
                xr[(size_t)r * K + i] =
                    fe(to_e<E>((float)((x[i] - m) / std::sqrt(v + 1e-5) * lnw[i] + lnb[i])));
        }
    }
    std::vector<E> Ye((size_t)rows * N);
    std::vector<float> Yf = Y0;
    void *Y = OUT == lin_out::residual ? (void *)Yf.data() : (void *)Ye.data();
    const void *X = IN == lin_in::plain ? (const void *)Xe.data() : (const void *)Xf.data();
    const void *bias = OUT == lin_out::residual ? (const void *)bf.data() : (const void *)be.data();
    const int KS = IN == lin_in::plain ? lin_slices(K) : 1; /* the launchers' choice */
    const int JB = kLinWarps / KS;
    const size_t smem = IN == lin_in::plain ? 0 : (size_t)rows * K * sizeof(E);
    emu::launch(dim3((N + JB - 1) / JB), dim3(kLinWarps * 32), smem, [&] {
        auto run = [&](auto ks, auto nv) {
            linear_small_kernel<E, IN, OUT, decltype(ks)::value, decltype(nv)::value>(
                Y, X, W.data(), bias, lnw.data(), lnb.data(), 1e-5f, rows, K, N);
        };
        if constexpr (IN == lin_in::layernorm)
            ln_with_width(K, [&](auto nv) {
                if constexpr (decltype(nv)::value > 0) run(std::integral_constant<int, 1>(), nv);
            });
        else if (KS == 4)
            run(std::integral_constant<int, 4>(), std::integral_constant<int, 1>());
        else if (KS == 2)
            run(std::integral_constant<int, 2>(), std::integral_constant<int, 1>());
        else
            run(std::integral_constant<int, 1>(), std::integral_constant<int, 1>());
    });
    double worst = 0, scale = 0;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int i = 0; i < K; i++)
                acc += fe(W[(size_t)j * K + i]) * xr[(size_t)r * K + i];
            double want, got;
            if (OUT == lin_out::residual) {
                want = Y0[(size_t)r * N + j] + acc + bf[j];
                got = Yf[(size_t)r * N + j];
            } else {
                want = acc + fe(be[j]);
                if (OUT == lin_out::gelu)
                    want = 0.5 * want *
                           (1 +
                            std::tanh(0.7978845608028654 * (want + 0.044715 * want * want * want)));
                got = fe(Ye[(size_t)r * N + j]);
            }
            worst = std::max(worst, std::fabs(got - want));
            scale = std::max(scale, std::fabs(want));
        }
    /* E's rounding of the output (f16 ~5e-4, bf16 ~4e-3 of the value), f32 sums otherwise */
    const double rel = OUT == lin_out::residual           ? 1e-5
                       : std::is_same_v<E, __nv_bfloat16> ? 8e-3
                                                          : 1e-3;
    const double tol = rel * std::max(1.0, scale) + 1e-5;
    std::printf("linear (%s, rows %d, K %d in %d slice(s), N %d): max error %.2e\n", name, rows, K,
                KS, N, worst);
    EXPECT(worst < tol, "linear %s rows %d K %d N %d: max error %g (tolerance %g)", name, rows, K,
           N, worst, tol);
}

int main()
{
    check_attention<__half, 16>(2, 100, 1, "f16", false);
    check_attention<__half, 64>(1, 130, 1, "f16", false);
    check_attention<__half, 32>(1, 64, 2, "f16", false);
    check_attention<__nv_bfloat16, 64>(1, 70, 1, "bf16", false);
    check_attention<__nv_bfloat16, 16>(1, 1, 2, "bf16", false);
    check_attention<__half, 32>(1, 40, 1, "f16", true);
    check_attention<__half, 64>(1, 300, 1, "f16", false); /* 5 blocks, the last partial */
    check_attention<__nv_bfloat16, 32>(2, 129, 1, "bf16", false);
    check_attention<__half, 64, 4, 2>(1, 300, 1, "f16", false); /* 128-row blocks, two m-tiles */
    check_attention<__nv_bfloat16, 16, 4, 2>(2, 70, 2, "bf16", false);
    check_attention_last<__half, 64>(2, 130, 2); /* more keys than lanes, not a multiple of 32 */
    check_attention_last<__nv_bfloat16, 16>(1, 5, 3); /* fewer keys than lanes */
    check_head<__half>(3, 264, 37); /* C / 8 = 33 chunks: lanes with two and with one */
    check_head<__nv_bfloat16>(kHeadMaxRows, 64, 9); /* V % kHeadV != 0 */
    check_cached<__half, __half, 64>(3, 20, 2, 40, 1, "f16");
    check_cached<__half, float, 16>(2, 9, 3, 300, 5, "f16 with an f32 cache");
    check_cached<__half, float, 16>(1, 4, 1, 300, 1, "f16 with an f32 cache"); /* 300 keys */
    check_cached<__nv_bfloat16, __nv_bfloat16, 32>(2, 33, 1, 64, 3, "bf16");
    check_cached<__nv_bfloat16, float, 64>(1, 5, 2, 8, 4,
                                           "bf16 with an f32 cache"); /* empty splits */
    /* batch 1's shape (pl__gpt2_splits: 22 splits at 384 positions): splits of one and two
     * rounds of keys, both prefetched */
    check_cached<__half, __half, 64>(1, 200, 2, 384, 22, "f16, batch 1's splits");
    check_linear_small<__half, lin_in::layernorm, lin_out::bias>(1, 64, 13, "f16 ln+bias");
    check_linear_small<__nv_bfloat16, lin_in::layernorm, lin_out::gelu>(3, 768, 9, "bf16 ln+gelu");
    check_linear_small<__half, lin_in::layernorm, lin_out::gelu>(kLinMaxRows, 96, 6, "f16 ln+gelu");
    check_linear_small<__half, lin_in::plain, lin_out::residual>(2, 2048, 5, "f16 plain+residual");
    check_linear_small<__nv_bfloat16, lin_in::plain, lin_out::residual>(kLinMaxRows, 1024, 3,
                                                                        "bf16 plain+residual");
    check_linear_small<__half, lin_in::plain, lin_out::residual>(1, 64, 4, "f16 plain+residual");
    check_embed_ln<__half>(3, 64, 7, 10);
    check_embed_ln<__nv_bfloat16>(9, 768, 5, 6); /* two blocks; six float4 a lane */
    check_layernorm_embed_logprob(48);           /* float4 path, one float4 a lane */
    check_layernorm_embed_logprob(768);          /* GPT-2 124M: six a lane */
    check_layernorm_embed_logprob(50);           /* C % 4 != 0: the scalar path */
    check_layernorm_embed_logprob(1600); /* GPT-2 XL's width: the float4 path at its limit */
    if (failures) std::fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
