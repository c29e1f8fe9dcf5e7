/* bench_tokenize: encode speed of the GPT-2 tokenizer (stages/tokenize/pl_bpe.h) on one file:
 * the whole file as one text on one thread, then its lines as rows through the batch API on 1..P
 * threads. Prints MB/s of the best of REPS runs (wall time, and the calling thread's CPU time,
 * which a busy machine disturbs less), the first (cold word cache) apart.
 *
 *   bench_tokenize VOCAB_DIR FILE [REPS [P]]     (built next to pipectl) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pl_bpe.h"
#include "pl_pool.h"

static double pl__clock(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_tokenize VOCAB_DIR FILE [REPS [THREADS]]\n");
        return 2;
    }
    int reps = argc > 3 ? atoi(argv[3]) : 5, threads = argc > 4 ? atoi(argv[4]) : 2;
    pl_error err;
    pl_bpe *b = NULL;
    if (pl_bpe_load(argv[1], &b, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 2;
    }
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc(len + 1);
    if (!text || fread(text, 1, len, f) != len) return 2;
    fclose(f);
    double mb = (double)len / 1e6;
    pl_bpe_ids ids = {0};
    double best = 1e30, best_cpu = 1e30, cold = 0;
    for (int r = 0; r < reps; r++) {
        ids.n = 0;
        double t0 = pl__clock(CLOCK_MONOTONIC), c0 = pl__clock(CLOCK_THREAD_CPUTIME_ID);
        if (pl_bpe_encode(b, text, len, &ids, &err) != PL_OK) return 1;
        double dt = pl__clock(CLOCK_MONOTONIC) - t0, dc = pl__clock(CLOCK_THREAD_CPUTIME_ID) - c0;
        if (r == 0) cold = dt;
        if (dt < best) best = dt;
        if (dc < best_cpu) best_cpu = dc;
    }
    printf("one text, 1 thread: %.1f MB, %lld ids: %.1f MB/s (CPU time: %.1f MB/s; first run "
           "%.1f MB/s)\n",
           mb, (long long)ids.n, mb / best, mb / best_cpu, mb / cold);
    int64_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += text[i] == '\n';
    const char **rows = malloc((size_t)(n + 1) * sizeof *rows);
    size_t *lens = malloc((size_t)(n + 1) * sizeof *lens);
    pl_bpe_ids *outs = calloc((size_t)(n + 1), sizeof *outs);
    int64_t k = 0;
    for (size_t i = 0, s = 0; i <= len; i++)
        if (i == len ? i > s : text[i] == '\n') {
            rows[k] = text + s;
            lens[k++] = i - s;
            s = i + 1;
        }
    pl_pool *pool = NULL;
    if (pl_pool_new(threads - 1, &pool, &err) != PL_OK) return 1;
    for (int p = 1; p <= threads; p++) {
        best = 1e30;
        for (int r = 0; r < reps; r++) {
            for (int64_t i = 0; i < k; i++)
                outs[i].n = 0;
            double t0 = pl__clock(CLOCK_MONOTONIC);
            if (pl_bpe_encode_batch(b, pool, p, k, rows, lens, outs, &err) != PL_OK) return 1;
            double dt = pl__clock(CLOCK_MONOTONIC) - t0;
            if (dt < best) best = dt;
        }
        printf("%lld rows, batch API, %d thread%s: %.1f MB/s\n", (long long)k, p, p > 1 ? "s" : "",
               mb / best);
    }
    for (int64_t i = 0; i < k; i++)
        pl_bpe_ids_free(&outs[i]);
    pl_pool_free(pool);
    free(outs);
    free(lens);
    free(rows);
    pl_bpe_ids_free(&ids);
    free(text);
    pl_bpe_free(b);
    return 0;
}
