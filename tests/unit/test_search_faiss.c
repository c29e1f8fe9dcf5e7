/* test_search_faiss: the search stage's FAISS path. With FAISS in the build: indexes built by
 * pl_faiss_build (what `pipectl index build` runs) answer like the exact search where they are
 * exact (Flat, IVF with every list probed, through pipectl's BLAS scan and FAISS's own), for ip,
 * l2 and cosine, and HNSW finds most of it; a corrupt file, a dimension or
 * metric other than the stage's, and nprobe on an index without lists fail at open with bad-input
 * errors that name the file; an interrupt stops each kind of index's search with PL_EINTR. Without
 * FAISS: `index:` is a check error saying how to get it. */
#include <stdlib.h>
#include <unistd.h>

#include "pl_exec.h"
#include "pl_exec_host.h"
#include "pl_intr.h"
#include "pl_parse.h"
#include "pl_plan.h"
#include "pl_search.h"
#include "pl_test.h"

static char dir[] = "/tmp/pl_faiss_XXXXXX";

static pl_status run_text(const char *text, pl_error *err)
{
    pl_spec *s = NULL;
    pl_status st = pl_yaml_load_string("t.yaml", text, strlen(text), &s, err);
    if (st == PL_OK) st = pl_spec_check(s, err);
    pl_plan *plan = NULL;
    if (st == PL_OK) st = pl_plan_compile(s, &plan, err);
    if (st == PL_OK) {
        pl_run_cfg cfg;
        pl_run_cfg_init(&cfg);
        cfg.workers = 3;
        pl_run_result res;
        st = pl_exec_host_run(plan, &cfg, &res, err);
        pl_run_result_fini(&res);
    }
    pl_plan_free(plan);
    pl_spec_free(s);
    return st;
}

/* A search pipeline over the corpus file c.bin [500, 16]; `extra` adds stage keys. */
static pl_status run_search(const char *metric, int d, const char *extra, const char *ids_file,
                            pl_error *err)
{
    char text[2048];
    snprintf(text, sizeof text,
             "run: {batches: 2, seed: 3}\n"
             "buffers:\n"
             "  q: {dtype: f32, shape: [20, %d]}\n"
             "  c: {dtype: f32, shape: [500, 16], persistent: true, init: file, file: %s/c.bin}\n"
             "  ids: {dtype: i32, shape: [20, 5]}\n"
             "stages:\n"
             "  - {name: src, kind: source, to: q, generator: random}\n"
             "  - {name: s, kind: search, queries: q, k: 5, metric: %s, ids: ids%s}\n"
             "  - {name: o, kind: sink, from: ids, to: %s/%s}\n",
             d, dir, metric, extra, dir, ids_file);
    return run_text(text, err);
}

static int32_t *slurp_ids(const char *name)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    int32_t *ids = malloc(2 * 20 * 5 * sizeof *ids);
    size_t n = fread(ids, sizeof *ids, 200, f);
    fclose(f);
    CHECK_EQ_INT(n, 200);
    return ids;
}

int main(void)
{
    pl_error err;
    if (!pl_faiss_available()) {
        const char *text =
            "buffers:\n"
            "  q: {dtype: f32, shape: [2, 4]}\n"
            "  ids: {dtype: i32, shape: [2, 1]}\n"
            "stages:\n"
            "  - {name: src, kind: source, to: q, generator: random}\n"
            "  - {name: s, kind: search, queries: q, k: 1, ids: ids, index: c.faiss}\n"
            "  - {name: o, kind: sink, from: ids, to: /dev/null}\n";
        pl_spec *s = NULL;
        CHECK(pl_yaml_load_string("t.yaml", text, strlen(text), &s, &err) == PL_OK);
        CHECK_EQ_INT(pl_spec_check(s, &err), PL_EINPUT);
        CHECK_STR(err.msg, "t.yaml:6:64: error: search stage 's': 'index:' needs FAISS, and this "
                           "pipectl was built without it; install libfaiss-dev and rebuild (cmake "
                           "finds it; -DPL_WITH_FAISS=ON insists), or drop 'index:' for the exact "
                           "search");
        pl_spec_free(s);
        float x[4] = {0};
        CHECK_EQ_INT(pl_faiss_build(x, 1, 4, "Flat", PL_METRIC_IP, 0, 1, "/dev/null", &err),
                     PL_EINPUT);
        printf("FAISS not in this build: checked the check-time error only\n");
        PL_TEST_DONE();
    }
    CHECK(mkdtemp(dir) != NULL);
    float *c = malloc(500 * 16 * sizeof *c);
    uint64_t r = 7;
    for (int i = 0; i < 500 * 16; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        c[i] = (float)((double)(r >> 11) * 0x1p-53 * 2 - 1);
    }
    char path[300], path2[300];
    snprintf(path, sizeof path, "%s/c.bin", dir);
    FILE *f = fopen(path, "wb");
    fwrite(c, sizeof *c, 500 * 16, f);
    fclose(f);

    /* Exact indexes agree with the exact search. */
    const char *metrics[] = {"ip", "l2", "cosine"};
    for (int m = 0; m < 3; m++) {
        CHECK_EQ_INT(run_search(metrics[m], 16, ", corpus: c", "exact.bin", &err), PL_OK);
        int32_t *want = slurp_ids("exact.bin");
        /* Flat: FAISS's search; IVF8 with every list probed: pipectl's BLAS scan; HNSW:
         * approximate, so recall only. */
        const char *factories[] = {"Flat", "IVF8,Flat", "HNSW16"};
        for (int fi = 0; fi < 3; fi++) {
            snprintf(path, sizeof path, "%s/c%d%d.faiss", dir, m, fi);
            CHECK_EQ_INT(pl_faiss_build(c, 500, 16, factories[fi], (pl_metric)m, 0, 1, path, &err),
                         PL_OK);
            char extra[400];
            snprintf(extra, sizeof extra, ", index: %s%s", path,
                     fi == 1   ? ", nprobe: 8"
                     : fi == 2 ? ", ef_search: 128"
                               : "");
            CHECK_EQ_INT(run_search(metrics[m], 16, extra, "index.bin", &err), PL_OK);
            int32_t *got = slurp_ids("index.bin");
            CHECK(want && got);
            if (want && got && fi < 2) {
                CHECK(memcmp(want, got, 200 * sizeof *got) == 0);
            } else if (want && got) {
                int hits = 0;
                for (int i = 0; i < 40; i++)
                    for (int a = 0; a < 5; a++)
                        for (int b = 0; b < 5; b++)
                            hits += got[i * 5 + b] == want[i * 5 + a];
                CHECK(hits >= 190); /* recall@5 >= 0.95 */
            }
            free(got);
        }
        free(want);
    }

    /* An interrupt stops every path (FAISS's own search, pipectl's list scan, HNSW): PL_EINTR,
     * which the scheduler turns into the run stopping at that batch. */
    const char *paths_of[] = {"Flat", "IVF8,Flat", "HNSW16"};
    for (int fi = 0; fi < 3; fi++) {
        snprintf(path, sizeof path, "%s/c0%d.faiss", dir, fi);
        pl_faiss *ix = NULL;
        CHECK_EQ_INT(pl_faiss_load(path, fi == 1 ? 8 : 0, fi == 2 ? 128 : 0, &ix, &err), PL_OK);
        int64_t labels[40 * 5];
        float dist[40 * 5];
        pl_intr_raise(PL_INTR_STOP);
        CHECK_EQ_INT(pl_faiss_search(ix, NULL, 2, 40, c, 5, labels, dist, &err), PL_EINTR);
        CHECK_STR(err.msg, "interrupted while in the FAISS search");
        if (err.status != PL_EINTR) fprintf(stderr, "%s: %s\n", paths_of[fi], err.msg);
        pl_intr_clear();
        CHECK_EQ_INT(pl_faiss_search(ix, NULL, 2, 40, c, 5, labels, dist, &err), PL_OK);
        pl_faiss_free(ix);
    }

    /* Bad inputs, at open: exit 2, the file named. */
    snprintf(path, sizeof path, "%s/c00.faiss", dir); /* Flat, ip, d 16 */
    char extra[400], want[1024];
    snprintf(extra, sizeof extra, ", index: %s", path);
    CHECK_EQ_INT(run_search("ip", 8, extra, "x.bin", &err), PL_EINPUT);
    snprintf(want, sizeof want,
             "t.yaml:8:76: error: search stage 's': index '%s' holds 16-dimensional vectors but "
             "queries 'q' are 8-dimensional",
             path);
    CHECK_STR(err.msg, want);
    CHECK_EQ_INT(run_search("l2", 16, extra, "x.bin", &err), PL_EINPUT);
    snprintf(want, sizeof want,
             "t.yaml:8:76: error: search stage 's': index '%s' ranks by inner product but the "
             "stage's metric is l2; build it with 'pipectl index build --metric l2'",
             path);
    CHECK_STR(err.msg, want);
    snprintf(extra, sizeof extra, ", index: %s, nprobe: 4", path);
    CHECK_EQ_INT(run_search("ip", 16, extra, "x.bin", &err), PL_EINPUT);
    snprintf(want, sizeof want,
             "t.yaml:8:76: error: search stage 's': FAISS index '%s' has no 'nprobe' to set "
             "(IndexFlatIP is not an IVF index)",
             path);
    CHECK_STR(err.msg, want);
    snprintf(path2, sizeof path2, "%s/corrupt.faiss", dir);
    f = fopen(path2, "wb");
    fputs("not an index at all", f);
    fclose(f);
    snprintf(extra, sizeof extra, ", index: %s", path2);
    CHECK_EQ_INT(run_search("ip", 16, extra, "x.bin", &err), PL_EINPUT);
    snprintf(want, sizeof want,
             "t.yaml:8:76: error: search stage 's': cannot load FAISS index '%s' (missing, "
             "unreadable or not an index written by FAISS): ",
             path2);
    CHECK(strncmp(err.msg, want, strlen(want)) == 0);
    if (strncmp(err.msg, want, strlen(want)) != 0) fprintf(stderr, "got: %s\n", err.msg);
    /* A truncated index: the start of a real one. */
    f = fopen(path, "rb");
    char head[600];
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    f = fopen(path2, "wb");
    fwrite(head, 1, got, f);
    fclose(f);
    CHECK_EQ_INT(run_search("ip", 16, extra, "x.bin", &err), PL_EINPUT);
    CHECK(strncmp(err.msg, want, strlen(want)) == 0);

    free(c);
    snprintf(path, sizeof path, "rm -rf %s", dir);
    CHECK(system(path) == 0);
    PL_TEST_DONE();
}
