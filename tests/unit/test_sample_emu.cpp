/* test_sample_emu: the sample kind's CUDA kernels (stages/sample/sample_kernels.cuh) run on the CPU
 * through tests/unit/cuda_emu.h against the C reference (stages/sample/sample_ref.c): the same
 * tokens, next ids, finished mask and count, step after step, for greedy and for temperature,
 * top-k and top-p draws (from the same uniforms), with f32 and f16 logits, ties, NaN, eos, limits
 * and a column past the last. It checks the kernels' reductions, bisections, scan and
 * synchronisation without a GPU; the GPU test (tests/gpu/test_generate_gpu.sh) runs them on the
 * device. */
#include "cuda_emu.h"

#include <cstdio>
#include <random>

extern "C" {
#include "pl_sample.h"
}

#include "sample_kernels.cuh"

using namespace pl_sample;

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

/* Runs STEPS steps of the kernels and of the reference on the same logits (row b of step c:
 * logits[c]), and compares everything they write. Returns the tokens that differ. */
template <typename L>
static int run(const pl_sample_params &p, const std::vector<std::vector<float>> &lg, int B, int V,
               int N, int threads, const std::vector<int32_t> *limits, const char *what)
{
    int steps = (int)lg.size();
    std::vector<int32_t> tk((size_t)B * N, -5), tr((size_t)B * N, -5), nk(B, -5), nr(B, -5),
        fk(B, -5), fr(B, -5);
    int32_t ck = -5, cr = -5;
    int64_t batch = 3;
    int differ = 0;
    for (int c = 0; c < steps; c++) {
        std::vector<L> lk(lg[c].size());
        std::vector<float> lr(lg[c].size());
        for (size_t i = 0; i < lk.size(); i++) {
            if constexpr (std::is_same<L, float>::value)
                lk[i] = lg[c][i];
            else
                lk[i] = __float2half_rn(lg[c][i]);
            lr[i] = lf(lk[i]); /* the reference sees the logits the kernel reads */
        }
        int32_t step = c - 1; /* column c: c = 0 without a step, else step c - 1 */
        const int32_t *lim = limits ? limits->data() : nullptr;
        emu::launch(dim3(B), dim3(threads), 0, [&] {
            sample_kernel<L>(lk.data(), B, V, N, c ? &step : nullptr, &batch, 1, lim, tk.data(),
                             nk.data(), fk.data(), p);
        });
        emu::launch(dim3(1), dim3(64), 0, [&] { count_kernel(&ck, fk.data(), B); });
        pl_error err;
        EXPECT(pl_sample_step(&p, lr.data(), B, V, N, c, batch, lim, tr.data(), nr.data(),
                              fr.data(), &cr, &err) == PL_OK,
               "%s: the reference failed", what);
        for (int i = 0; i < B * N; i++)
            differ += tk[i] != tr[i];
        if (tk != tr || nk != nr || fk != fr || ck != cr) {
            /* a sampled draw may differ within rounding of a boundary; then the rows part */
            for (size_t i = 0; i < tk.size(); i++)
                tr[i] = tk[i];
            nr = nk, fr = fk, cr = ck;
            if (p.method == PL_SAMPLE_GREEDY) EXPECT(false, "%s: step %d differs", what, c);
        }
    }
    return differ;
}

static std::vector<std::vector<float>> logits(int steps, int B, int V, unsigned seed, float scale)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, scale);
    std::vector<std::vector<float>> lg(steps, std::vector<float>((size_t)B * V));
    for (auto &row : lg)
        for (auto &v : row)
            v = nd(rng);
    return lg;
}

int main()
{
    const int B = 6, V = 300, N = 5;
    pl_sample_params g = {PL_SAMPLE_GREEDY, 1.0f, 0, 1.0f, 11, -1, 0, N};
    /* greedy, with ties (the first index wins), NaN and a row of -inf */
    auto lg = logits(N, B, V, 1, 2.0f);
    lg[0][5] = lg[0][9] = 50; /* row 0: tie between 5 and 9 */
    lg[1][V + 7] = NAN;
    for (int v = 0; v < V; v++)
        lg[2][2 * V + v] = -INFINITY;
    EXPECT(run<float>(g, lg, B, V, N, 64, nullptr, "greedy f32") == 0, "greedy f32 differs");
    EXPECT(run<__half>(g, lg, B, V, N, 96, nullptr, "greedy f16") == 0, "greedy f16 differs");
    /* f32 rows of 301: rows start off 16 bytes, so the argmax's unaligned head and its tail hold
     * values; a tie between the head and the float4 middle, the largest value in the tail */
    auto lu = logits(N, B, 301, 4, 2.0f);
    lu[0][301 + 1] = lu[0][301 + 200] = 60;
    lu[0][2 * 301 + 300] = 70;
    EXPECT(run<float>(g, lu, B, 301, N, 64, nullptr, "greedy f32, unaligned rows") == 0,
           "greedy f32, unaligned rows differs");
    /* eos, per-sequence limits, pad after the end, a column past the last */
    pl_sample_params ge = g;
    ge.eos = 3;
    ge.pad = 3;
    ge.max_new = 4;
    auto le = logits(N + 1, B, V, 2, 1.0f);
    le[1][0 * V + 3] = 100; /* sequence 0 ends at column 1 */
    std::vector<int32_t> lim = {9, 2, 1, 0, 4, 3};
    EXPECT(run<float>(ge, le, B, V, N, 32, &lim, "greedy with eos and limits") == 0,
           "greedy with eos and limits differs");
    /* sampling: the same uniforms on both */
    struct {
        float temp;
        int k;
        float p;
    } cfgs[] = {{1.0f, 0, 1.0f}, {0.7f, 0, 1.0f},  {1.0f, 10, 1.0f},
                {1.0f, 0, 0.9f}, {1.5f, 40, 0.8f}, {1.0f, 1, 1.0f}};
    int total = 0, differ = 0;
    for (auto &c : cfgs) {
        pl_sample_params s = {PL_SAMPLE_RANDOM, c.temp, c.k, c.p, 11, 7, 7, N};
        auto ls = logits(N, B, V, 3 + c.k, 1.5f);
        char what[96];
        std::snprintf(what, sizeof what, "sample temperature %g top_k %d top_p %g", (double)c.temp,
                      c.k, (double)c.p);
        /* Fewer rows and steps than above: each draw is some 70 barriers, slow in emulation. */
        int d = run<float>(s, ls, 4, V, 3, 64, nullptr, what) +
                run<__half>(s, ls, 4, V, 3, 32, nullptr, what);
        std::printf("%s: %d of %d tokens differ from the reference\n", what, d, 2 * 4 * 3);
        differ += d;
        total += 2 * 4 * 3;
    }
    /* Rounding may move a rare draw; more than one in a hundred is a bug. */
    EXPECT(differ * 100 <= total, "sampling: %d of %d tokens differ", differ, total);
    /* top_k 1 is greedy */
    pl_sample_params k1 = {PL_SAMPLE_RANDOM, 1.0f, 1, 1.0f, 5, -1, 0, N};
    auto l1 = logits(N, B, V, 9, 1.0f);
    std::vector<int32_t> tk((size_t)B * N), nk(B), fk(B);
    emu::launch(dim3(B), dim3(64), 0, [&] {
        sample_kernel<float>(l1[0].data(), B, V, N, nullptr, nullptr, 0, nullptr, tk.data(),
                             nk.data(), fk.data(), k1);
    });
    for (int b = 0; b < B; b++) {
        int best = 0;
        for (int v = 1; v < V; v++)
            if (l1[0][(size_t)b * V + v] > l1[0][(size_t)b * V + best]) best = v;
        EXPECT(tk[(size_t)b * N] == best, "top_k 1, row %d: %d, not the argmax %d", b,
               tk[(size_t)b * N], best);
    }
    if (failures) std::fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
