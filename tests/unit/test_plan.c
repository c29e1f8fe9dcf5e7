/* test_plan: the plan compiler on chains, diamonds and fork-joins (streams, fewest events),
 * cross-batch deps, determinism, the listing, and a generated 1000-stage pipeline. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "pl_exec.h"
#include "pl_parse.h"
#include "pl_plan.h"
#include "pl_plan_dump.h"
#include "pl_test.h"
#include "pl_test_spec.h"

static pl_plan *t_plan(pl_spec *s)
{
    const char *msg;
    pl_status st = t_check(s, &msg);
    if (st != PL_OK) {
        fprintf(stderr, "check failed: %s\n", msg);
        exit(1);
    }
    pl_plan *p = NULL;
    pl_error err;
    if (pl_plan_compile(s, &p, &err) != PL_OK) {
        fprintf(stderr, "compile failed: %s\n", err.msg);
        exit(1);
    }
    return p;
}

static int t_idx(const pl_spec *s, const char *name)
{
    int i = pl_spec_find_stage(s, name);
    if (i < 0) {
        fprintf(stderr, "no stage %s\n", name);
        exit(1);
    }
    return i;
}

static const char *t_stream_of(const pl_plan *p, const char *name)
{
    return p->streams[p->stages[t_idx(p->spec, name)].stream].name;
}

/* The listing as a string (caller frees). */
static char *t_dump(const pl_plan *p, bool dot)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (dot)
        pl_plan_dump_dot(p, f);
    else
        pl_plan_dump(p, f);
    fclose(f);
    return buf;
}

/* "to<-from:d" for each xdep, space separated, into buf. */
static const char *t_xdeps(const pl_plan *p, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < p->n_xdeps && k < n; i++) {
        const pl_xdep *x = &p->xdeps[i];
        k += (size_t)snprintf(buf + k, n - k, "%s%s<-%s:%d", i ? " " : "",
                              p->spec->stages[x->to].name, p->spec->stages[x->from].name,
                              x->distance);
    }
    return buf;
}

static void test_chain(void)
{
    pl_spec *s = t_chain();
    pl_plan *p = t_plan(s);
    char xb[1024];
    CHECK_EQ_INT(p->n_streams, 5);
    CHECK_STR(t_stream_of(p, "gen"), "host0");
    CHECK_STR(t_stream_of(p, "up"), "h2d");
    CHECK_STR(t_stream_of(p, "k"), "compute0");
    CHECK_STR(t_stream_of(p, "down"), "d2h");
    /* the sink opens its own host stream: the next batch's source must not queue behind it */
    CHECK_STR(t_stream_of(p, "save"), "host1");
    CHECK_EQ_INT(p->n_events, 4);
    CHECK_EQ_INT(p->n_waits, 4);
    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(p->order[i], i);
    CHECK_EQ_INT(p->stages[t_idx(s, "k")].n_preds, 1);
    CHECK_EQ_INT(p->stages[t_idx(s, "k")].preds[0], t_idx(s, "up"));
    /* each writer waits for the last reader of its slot depth batches back; the sink is ordered */
    CHECK_STR(t_xdeps(p, xb, sizeof xb), "gen<-up:4 up<-k:4 k<-down:4 down<-save:4 save<-save:1");
    CHECK_EQ_INT(p->host_per_slot, 8192);
    CHECK_EQ_INT(p->device_per_slot, 8192);
    CHECK_EQ_INT(p->host_persistent, 0);
    char *dump = t_dump(p, false);
    CHECK_STR(dump,
              "plan for pipeline 't': 5 stages, 5 streams, 4 events, 5 cross-batch deps\n"
              "depth 4 (slots in flight), 16 batches\n"
              "\n"
              "streams (stages run in this order on each stream, batch after batch):\n"
              "  host0 (host engine): 1 stage\n"
              "    gen   source  host\n"
              "  h2d (h2d engine): 1 stage\n"
              "    up    h2d     h2d      waits on e0(gen)\n"
              "  compute0 (compute engine): 1 stage\n"
              "    k     kernel  compute  waits on e1(up)\n"
              "  d2h (d2h engine): 1 stage\n"
              "    down  d2h     d2h      waits on e2(k)\n"
              "  host1 (host engine): 1 stage\n"
              "    save  sink    host     waits on e3(down)\n"
              "\n"
              "events (recorded after a stage, waited on by stages of other streams):\n"
              "  e0 after gen (host0): waited on by up (h2d)\n"
              "  e1 after up (h2d): waited on by k (compute0)\n"
              "  e2 after k (compute0): waited on by down (d2h)\n"
              "  e3 after down (d2h): waited on by save (host1)\n"
              "\n"
              "cross-batch deps (stage of batch i+d waits for stage of batch i):\n"
              "  gen waits for up, d=4: slot reuse of 'x_host'\n"
              "  up waits for k, d=4: slot reuse of 'x_dev'\n"
              "  k waits for down, d=4: slot reuse of 'y_dev'\n"
              "  down waits for save, d=4: slot reuse of 'y_host'\n"
              "  save waits for save, d=1: runs in batch order\n"
              "\n"
              "segments (device stages between host stages; one graph per segment and slot):\n"
              "  host, before any device work: gen\n"
              "  s0: up, k, down; launched after gen; host sees up, down\n"
              "  host, then: save\n"
              "\n"
              "memory:\n"
              "  per slot:    host 8.0 KiB (8192 bytes), device 8.0 KiB (8192 bytes)\n"
              "  persistent:  host 0 B (0 bytes), device 0 B (0 bytes)\n"
              "  total:       pinned host 32.0 KiB (32768 bytes), device 32.0 KiB (32768 bytes) "
              "for 4 slots\n");
    free(dump);
    dump = t_dump(p, true);
    CHECK(strstr(dump, "subgraph \"cluster_compute0\"") != NULL);
    CHECK(strstr(dump, "\"up\" -> \"k\" [style=dashed, label=\"e1\"];") != NULL);
    free(dump);
    pl_plan_free(p);
    pl_spec_free(s);
}

/* up -> {a, b} -> c -> down: two compute branches, one join. */
static void test_diamond(void)
{
    pl_spec *s = t_new();
    t_buf(s, "x_host", PL_HOST, PL_F32, 64, false, PL_INIT_RANDOM);
    t_dev(s, "x", 64);
    t_dev(s, "y1", 64);
    t_dev(s, "y2", 64);
    t_dev(s, "z", 64);
    t_host(s, "z_host", 64);
    t_copy(s, "up", pl_kind_find("h2d"), "x_host", "x");
    t_busy(s, "a", "x", "y1");
    t_busy(s, "b", "x", "y2");
    t_busy(s, "c", "y1 y2", "z");
    t_copy(s, "down", pl_kind_find("d2h"), "z", "z_host");
    pl_plan *p = t_plan(s);
    CHECK_EQ_INT(p->n_streams, 4);
    CHECK_STR(t_stream_of(p, "a"), "compute0");
    CHECK_STR(t_stream_of(p, "b"), "compute1");
    CHECK_STR(t_stream_of(p, "c"), "compute0");
    /* up -> a, up -> b, b -> c, c -> down; a -> c is stream order */
    CHECK_EQ_INT(p->n_events, 3);
    CHECK_EQ_INT(p->n_waits, 4);
    const pl_plan_stage *c = &p->stages[t_idx(s, "c")];
    CHECK_EQ_INT(c->n_preds, 2);
    CHECK_EQ_INT(c->n_waits, 1);
    CHECK_EQ_INT(p->events[c->waits[0]].src, t_idx(s, "b"));
    CHECK_EQ_INT(p->events[p->stages[t_idx(s, "up")].event].n_dsts, 2);
    pl_plan_free(p);
    pl_spec_free(s);
}

/* up -> k0..k7 -> join -> down: the widest fan needs one event per branch and no more. */
static void test_fork_join(void)
{
    pl_spec *s = t_new();
    char name[16], reads[256] = "";
    t_buf(s, "x_host", PL_HOST, PL_F32, 64, false, PL_INIT_RANDOM);
    t_dev(s, "x", 64);
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "y%d", i);
        t_dev(s, name, 64);
        strcat(reads, name);
        strcat(reads, " ");
    }
    t_dev(s, "z", 64);
    t_host(s, "z_host", 64);
    t_copy(s, "up", pl_kind_find("h2d"), "x_host", "x");
    for (int i = 0; i < 8; i++) {
        char y[16];
        snprintf(name, sizeof name, "k%d", i);
        snprintf(y, sizeof y, "y%d", i);
        t_busy(s, name, "x", y);
    }
    t_busy(s, "join", reads, "z");
    t_copy(s, "down", pl_kind_find("d2h"), "z", "z_host");
    pl_plan *p = t_plan(s);
    CHECK_EQ_INT(p->n_streams, 10); /* h2d, compute0..7, d2h */
    CHECK_STR(t_stream_of(p, "k0"), "compute0");
    CHECK_STR(t_stream_of(p, "k7"), "compute7");
    CHECK_STR(t_stream_of(p, "join"), "compute0");
    /* events: up (8 waits), k1..k7 (one wait each), join (down waits) */
    CHECK_EQ_INT(p->n_events, 9);
    CHECK_EQ_INT(p->n_waits, 16);
    CHECK_EQ_INT(p->stages[t_idx(s, "join")].n_waits, 7);
    pl_plan_free(p);
    pl_spec_free(s);
}

/* An edge implied by stream order needs no event: u1 and u2 share the h2d stream. */
static void test_stream_order_implies(void)
{
    pl_spec *s = t_new();
    t_buf(s, "a_host", PL_HOST, PL_F32, 64, false, PL_INIT_RANDOM);
    t_buf(s, "b_host", PL_HOST, PL_F32, 64, false, PL_INIT_RANDOM);
    t_dev(s, "a", 64);
    t_dev(s, "b", 64);
    t_dev(s, "c", 64);
    t_copy(s, "u1", pl_kind_find("h2d"), "a_host", "a");
    t_copy(s, "u2", pl_kind_find("h2d"), "b_host", "b");
    t_busy(s, "k", "a b", "c");
    pl_plan *p = t_plan(s);
    const pl_plan_stage *k = &p->stages[t_idx(s, "k")];
    CHECK_EQ_INT(k->n_preds, 2);
    CHECK_EQ_INT(p->n_events, 1);
    CHECK_EQ_INT(k->n_waits, 1);
    CHECK_EQ_INT(p->events[k->waits[0]].src, t_idx(s, "u2"));
    pl_plan_free(p);
    pl_spec_free(s);
}

/* Transitive reduction of intra-batch edges: k2 reads x directly and through k1. */
static void test_reduced_preds(void)
{
    pl_spec *s = t_new();
    t_buf(s, "x_host", PL_HOST, PL_F32, 64, false, PL_INIT_RANDOM);
    t_dev(s, "x", 64);
    t_dev(s, "y", 64);
    t_dev(s, "z", 64);
    t_copy(s, "up", pl_kind_find("h2d"), "x_host", "x");
    t_busy(s, "k1", "x", "y");
    t_busy(s, "k2", "x y", "z");
    pl_plan *p = t_plan(s);
    const pl_plan_stage *k2 = &p->stages[t_idx(s, "k2")];
    CHECK_EQ_INT(k2->n_preds, 1);
    CHECK_EQ_INT(k2->preds[0], t_idx(s, "k1"));
    CHECK_EQ_INT(k2->n_waits, 0);
    CHECK_EQ_INT(p->n_events, 1);
    pl_plan_free(p);
    pl_spec_free(s);
}

/* Write-after-read through after:, plus a persistent buffer updated every batch. */
static void test_war_and_persistent(void)
{
    char xb[1024];
    pl_spec *s = t_new();
    t_buf(s, "x_host", PL_HOST, PL_F32, 64, false, PL_INIT_RANDOM);
    t_dev(s, "x", 64);
    t_dev(s, "y", 64);
    t_buf(s, "w", PL_DEVICE, PL_F32, 64, true, PL_INIT_ZEROS);
    t_copy(s, "up", pl_kind_find("h2d"), "x_host", "x");
    t_busy(s, "use", "x w", "y");              /* reads the weights */
    int upd = t_busy(s, "update", "y w", "w"); /* then updates them in place */
    t_after(s, upd, "use");
    pl_plan *p = t_plan(s);
    const pl_plan_stage *u = &p->stages[t_idx(s, "update")];
    CHECK_EQ_INT(u->n_preds, 1);
    CHECK_EQ_INT(u->preds[0], t_idx(s, "use"));
    CHECK_STR(t_stream_of(p, "update"), "compute0");
    /* use(i+1) must read what update(i) wrote; the slot of x is refilled once use is done */
    CHECK_STR(t_xdeps(p, xb, sizeof xb), "up<-use:4 use<-update:1");
    CHECK_EQ_INT(p->xdeps[1].why, PL_XDEP_PERSISTENT);
    CHECK_EQ_INT(p->xdeps[1].buffer, 3);
    CHECK_EQ_INT(p->xdeps[0].why, PL_XDEP_SLOT_REUSE);
    CHECK_EQ_INT(p->device_persistent, 256);
    CHECK_EQ_INT(p->device_per_slot, 512);
    pl_plan_free(p);
    pl_spec_free(s);
}

/* A device stage alone on a persistent buffer it updates keeps its wait on itself: on the GPU batch
 * b and b + 1 run in different slots' graphs, on different launch streams. */
static void test_device_self_accumulate(void)
{
    char xb[1024];
    pl_spec *s = t_new();
    t_buf(s, "x_host", PL_HOST, PL_F32, 64, false, PL_INIT_RANDOM);
    t_dev(s, "x", 64);
    t_buf(s, "w", PL_DEVICE, PL_F32, 64, true, PL_INIT_ZEROS);
    t_copy(s, "up", pl_kind_find("h2d"), "x_host", "x");
    t_busy(s, "acc", "w x", "w");
    pl_plan *p = t_plan(s);
    CHECK_STR(t_xdeps(p, xb, sizeof xb), "up<-acc:4 acc<-acc:1");
    pl_plan_free(p);
    pl_spec_free(s);
}

/* Slot reuse with two readers of one buffer: the writer waits for both (neither follows the
 * other), and only depth batches back. */
static void test_slot_reuse_two_readers(void)
{
    char xb[1024];
    pl_spec *s = t_new();
    t_buf(s, "x_host", PL_HOST, PL_F32, 64, false, PL_INIT_RANDOM);
    t_dev(s, "x", 64);
    t_dev(s, "y1", 64);
    t_dev(s, "y2", 64);
    t_copy(s, "up", pl_kind_find("h2d"), "x_host", "x");
    t_busy(s, "a", "x", "y1");
    t_busy(s, "b", "x", "y2");
    s->run.depth = 2;
    pl_plan *p = t_plan(s);
    CHECK_STR(t_xdeps(p, xb, sizeof xb), "up<-a:2 up<-b:2");
    pl_plan_free(p);
    pl_spec_free(s);
}

static void test_determinism(void)
{
    pl_spec *s1 = t_chain(), *s2 = t_chain();
    pl_plan *p1 = t_plan(s1), *p1b = t_plan(s1), *p2 = t_plan(s2);
    char *d1 = t_dump(p1, false), *d1b = t_dump(p1b, false), *d2 = t_dump(p2, false);
    CHECK_STR(d1, d1b);
    CHECK_STR(d1, d2);
    free(d1);
    free(d1b);
    free(d2);
    d1 = t_dump(p1, true);
    d2 = t_dump(p2, true);
    CHECK_STR(d1, d2);
    free(d1);
    free(d2);
    pl_plan_free(p1);
    pl_plan_free(p1b);
    pl_plan_free(p2);
    pl_spec_free(s1);
    pl_spec_free(s2);
}

static double t_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1000 stages: an upload, then kernels each reading up to three earlier outputs (a random DAG
 * from a fixed LCG), host sources and sinks around it. Checks and plans; prints the time. */
static void test_generated_1000(void)
{
    pl_spec *s = t_new();
    uint64_t lcg = 12345;
    char name[32], b[32], reads[128];
    int n_kernels = 990;
    t_host(s, "in_host", 256);
    t_dev(s, "in", 256);
    for (int i = 0; i < n_kernels; i++) {
        snprintf(b, sizeof b, "d%d", i);
        t_dev(s, b, 256);
    }
    t_source(s, "gen", "in_host");
    t_copy(s, "up", pl_kind_find("h2d"), "in_host", "in");
    for (int i = 0; i < n_kernels; i++) {
        size_t k = (size_t)snprintf(reads, sizeof reads, "in");
        for (int j = 0; j < 3 && i > 0; j++) {
            lcg = lcg * 6364136223846793005u + 1442695040888963407u;
            int src = (int)((lcg >> 33) % (uint64_t)i);
            /* mostly recent outputs: long chains and wide fans both appear */
            if (j == 0) src = i - 1 - (int)((lcg >> 40) % (uint64_t)(i < 4 ? i : 4));
            k += (size_t)snprintf(reads + k, sizeof reads - k, " d%d", src);
        }
        snprintf(name, sizeof name, "k%d", i);
        snprintf(b, sizeof b, "d%d", i);
        t_busy(s, name, reads, b);
    }
    for (int i = 0; i < 4; i++) {
        char h[32], d[32];
        snprintf(h, sizeof h, "out%d", i);
        t_host(s, h, 256);
        snprintf(d, sizeof d, "d%d", n_kernels - 1 - i);
        snprintf(name, sizeof name, "down%d", i);
        t_copy(s, name, pl_kind_find("d2h"), d, h);
        snprintf(name, sizeof name, "save%d", i);
        t_sink(s, name, h);
    }
    CHECK_EQ_INT(s->n_stages, 1000);
    double t0 = t_now();
    const char *msg;
    pl_status st = t_check(s, &msg);
    CHECK_EQ_INT(st, PL_OK);
    if (st != PL_OK) fprintf(stderr, "%s\n", msg);
    double t1 = t_now();
    pl_plan *p = NULL;
    pl_error err;
    CHECK_EQ_INT(pl_plan_compile(s, &p, &err), PL_OK);
    double t2 = t_now();
    printf("generated pipeline: %d stages, %d buffers: check %.1f ms, plan %.1f ms; %d streams, "
           "%d events, %d waits, %d cross-batch deps\n",
           s->n_stages, s->n_buffers, (t1 - t0) * 1e3, (t2 - t1) * 1e3, p ? p->n_streams : 0,
           p ? p->n_events : 0, p ? p->n_waits : 0, p ? p->n_xdeps : 0);
    if (p) {
        /* every intra-batch edge is honoured: a pred runs earlier in plan order */
        for (int v = 0; v < p->n_stages; v++)
            for (int i = 0; i < p->stages[v].n_preds; i++)
                CHECK(p->stages[p->stages[v].preds[i]].order < p->stages[v].order);
    }
    pl_plan_free(p);
    pl_spec_free(s);
}

/* --graphs auto: stage graphs once a copy moves 1 MiB a batch, segment graphs below. */
static void test_graph_mode_auto(void)
{
    pl_spec *s = t_chain(); /* 4 KiB copies */
    pl_plan *p = t_plan(s);
    CHECK_EQ_INT(pl_graph_mode_auto(p), PL_GRAPHS_SEGMENT);
    pl_plan_free(p);
    pl_spec_free(s);
    s = t_chain_n(1 << 18); /* 1 MiB copies */
    p = t_plan(s);
    CHECK_EQ_INT(pl_graph_mode_auto(p), PL_GRAPHS_STAGE);
    pl_plan_free(p);
    pl_spec_free(s);
}

/* Every linked pair (c, q) has q among c's preds: the GPU executor finds the producers that need
 * block events through each stage's preds (pl_gpu_capture.c), not by asking every pair. Checks
 * all pairs and returns how many are linked. */
static int t_links_are_preds(const pl_plan *p)
{
    int linked = 0;
    for (int c = 0; c < p->n_stages; c++)
        for (int q = 0; q < p->n_stages; q++) {
            if (!pl_plan_chunk_linked(p, c, q)) continue;
            bool pred = false;
            for (int i = 0; i < p->stages[c].n_preds; i++)
                pred |= p->stages[c].preds[i] == q;
            CHECK(pred);
            linked++;
        }
    return linked;
}

/* Chunked stages: a consumer is linked to its producer block by block only when both are chunked
 * alike and it reads what the producer writes; an after: alone, another count or an unchunked
 * producer leave whole-stage waits. */
static void test_chunk_links(void)
{
    pl_spec *s = t_new();
    t_host(s, "a_host", 1024);
    t_dev(s, "a_dev", 1024);
    t_host(s, "b_host", 1024);
    t_host(s, "c_host", 1024);
    t_dev(s, "c_dev", 1024);
    t_host(s, "d_host", 1024);
    t_source(s, "gen", "a_host");
    t_source(s, "gen2", "c_host");
    int up = t_copy(s, "up", pl_kind_find("h2d"), "a_host", "a_dev");
    t_opt(s, up, "chunks", "4");
    int down = t_copy(s, "down", pl_kind_find("d2h"), "a_dev", "b_host");
    t_opt(s, down, "chunks", "4");
    int up2 = t_copy(s, "up2", pl_kind_find("h2d"), "c_host", "c_dev");
    t_opt(s, up2, "chunks", "2");
    int down2 = t_copy(s, "down2", pl_kind_find("d2h"), "c_dev", "d_host");
    t_opt(s, down2, "chunks", "4");
    t_after(s, down2, "up");
    t_sink(s, "save", "b_host");
    t_sink(s, "save2", "d_host");
    pl_plan *p = t_plan(s);
    CHECK(pl_plan_chunk_linked(p, down, up));    /* 4 and 4, down reads a_dev */
    CHECK(!pl_plan_chunk_linked(p, down2, up2)); /* 4 against 2 */
    CHECK(!pl_plan_chunk_linked(p, down2, up));  /* after: only */
    CHECK(!pl_plan_chunk_linked(p, up, down));   /* not its producer */
    CHECK_EQ_INT(t_links_are_preds(p), 1);
    char *dump = t_dump(p, false);
    CHECK(strstr(dump, "(up, chunk by chunk: 4)") != NULL);
    CHECK(strstr(dump, "(up2, chunk by chunk") == NULL);
    free(dump);
    pl_plan_free(p);
    pl_spec_free(s);
}

/* A list option (chunks: [a, b, ...]) from space-separated items. */
static void t_opt_list(pl_spec *s, int si, const char *key, const char *items)
{
    pl_opt *o = pl_stage_add_opt(s, &s->stages[si], key, pl_t_pos());
    o->is_list = true;
    o->val_pos = (pl_pos){"t.yaml", pl_t_line, 10};
    char buf[256];
    snprintf(buf, sizeof buf, "%s", items);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " "))
        pl_opt_add_item(s, o, tok, o->val_pos);
}

/* Uneven blocks (chunks: [128, 128, 256, 512]): chunked alike is the same rows in each block, so
 * a list links to the same list and to an equal count that cuts the same rows (both forms are
 * normalised at check), not to another list of as many blocks; descriptions say 128+128+256+512. */
static void test_chunk_links_uneven(void)
{
    pl_spec *s = t_new();
    const char *pairs[5][2] = {
        {"128 128 256 512", "128 128 256 512"}, /* linked */
        {"4", "256 256 256 256"},               /* linked: the same rows */
        {"512 512", "256 768"},                 /* two blocks each, other rows */
        {"256 768", "768 256"},                 /* the same sizes in another order */
        {"1024", "1024"},                       /* one block: not chunked */
    };
    int up[5], down[5];
    for (int i = 0; i < 5; i++) {
        char n[5][16];
        snprintf(n[0], 16, "h%d", i);
        snprintf(n[1], 16, "d%d", i);
        snprintf(n[2], 16, "o%d", i);
        snprintf(n[3], 16, "up%d", i);
        snprintf(n[4], 16, "down%d", i);
        t_host(s, n[0], 1024);
        t_dev(s, n[1], 1024);
        t_host(s, n[2], 1024);
        char gen[16], save[16];
        snprintf(gen, sizeof gen, "gen%d", i);
        snprintf(save, sizeof save, "save%d", i);
        t_source(s, gen, n[0]);
        up[i] = t_copy(s, n[3], pl_kind_find("h2d"), n[0], n[1]);
        if (strchr(pairs[i][0], ' ') || i == 4)
            t_opt_list(s, up[i], "chunks", pairs[i][0]);
        else
            t_opt(s, up[i], "chunks", pairs[i][0]);
        down[i] = t_copy(s, n[4], pl_kind_find("d2h"), n[1], n[2]);
        t_opt_list(s, down[i], "chunks", pairs[i][1]);
        t_sink(s, save, n[2]);
    }
    pl_plan *p = t_plan(s);
    CHECK(pl_plan_chunk_linked(p, down[0], up[0]));
    CHECK(pl_plan_chunk_linked(p, down[1], up[1]));
    CHECK(!pl_plan_chunk_linked(p, down[2], up[2]));
    CHECK(!pl_plan_chunk_linked(p, down[3], up[3]));
    CHECK(!pl_plan_chunk_linked(p, down[4], up[4]));
    CHECK_EQ_INT(t_links_are_preds(p), 2);
    /* Both forms as rows once checked. */
    const pl_stage *u1 = &s->stages[up[1]], *d0 = &s->stages[down[0]];
    CHECK_EQ_INT(u1->chunks, 4);
    CHECK(u1->chunk_rows && u1->chunk_rows[0] == 256 && u1->chunk_rows[3] == 256);
    CHECK(!u1->chunks_listed && d0->chunks_listed);
    CHECK(d0->chunk_rows && d0->chunk_rows[2] == 256 && d0->chunk_rows[3] == 512);
    char *dump = t_dump(p, false);
    CHECK(strstr(dump, "(up0, chunk by chunk: 128+128+256+512)") != NULL);
    CHECK(strstr(dump, "(up1, chunk by chunk: 256+256+256+256)") != NULL);
    CHECK(strstr(dump, "(up2, chunk by chunk") == NULL);
    CHECK(strstr(dump, "(up3, chunk by chunk") == NULL);
    CHECK(strstr(dump, "(up4, chunk by chunk") == NULL);
    free(dump);
    char buf[128];
    d0->kind->describe(s, d0, buf, sizeof buf);
    CHECK_STR(buf, "d0 -> o0, chunks 128+128+256+512");
    u1->kind->describe(s, u1, buf, sizeof buf);
    CHECK_STR(buf, "h1 -> d1, 4 chunks");
    pl_plan_free(p);
    pl_spec_free(s);
}

/* chunk_dims: 2 counts rows of the first two dimensions ([4, 256]: 1024 positions). Chunked alike
 * compares where the blocks end as shares of the whole, so a list in positions links to one in
 * first-dimension rows that cuts the same places ([256, 256, 512] and [1, 1, 2]), not to one that
 * cuts inside a row ([128, 384, 512]); a block's bytes are its rows' (the kinds' copies). */
static void test_chunk_links_dims(void)
{
    pl_spec *s = t_new();
    const char *pairs[3][2] = {
        {"256 256 512", "1 1 2"}, {"128 384 512", "1 1 2"}, {"128 384 512", "128 384 512"}};
    int up[3], down[3];
    for (int i = 0; i < 3; i++) {
        char n[5][16], gen[16], save[16];
        const char *pre[5] = {"h", "d", "o", "up", "down"};
        for (int k = 0; k < 5; k++)
            snprintf(n[k], 16, "%s%d", pre[k], i);
        for (int k = 0; k < 3; k++) {
            (k == 1 ? t_dev : t_host)(s, n[k], 1024);
            pl_buffer *b = &s->buffers[s->n_buffers - 1];
            b->rank = 2, b->shape[0] = 4, b->shape[1] = 256;
        }
        snprintf(gen, sizeof gen, "gen%d", i);
        snprintf(save, sizeof save, "save%d", i);
        t_source(s, gen, n[0]);
        up[i] = t_copy(s, n[3], pl_kind_find("h2d"), n[0], n[1]);
        t_opt_list(s, up[i], "chunks", pairs[i][0]);
        t_opt(s, up[i], "chunk_dims", "2");
        down[i] = t_copy(s, n[4], pl_kind_find("d2h"), n[1], n[2]);
        t_opt_list(s, down[i], "chunks", pairs[i][1]);
        if (i == 2) t_opt(s, down[i], "chunk_dims", "2");
        t_sink(s, save, n[2]);
    }
    pl_plan *p = t_plan(s);
    CHECK(pl_plan_chunk_linked(p, down[0], up[0]));
    CHECK(!pl_plan_chunk_linked(p, down[1], up[1]));
    CHECK(pl_plan_chunk_linked(p, down[2], up[2]));
    CHECK_EQ_INT(t_links_are_preds(p), 2);
    const pl_stage *u0 = &s->stages[up[0]], *d0 = &s->stages[down[0]];
    CHECK_EQ_INT(u0->chunk_dims, 2);
    CHECK_EQ_INT(d0->chunk_dims, 1);
    char buf[128];
    u0->kind->describe(s, u0, buf, sizeof buf);
    CHECK_STR(buf, "h0 -> d0, chunks 256+256+512 of the first 2 dimensions");
    char *dump = t_dump(p, false);
    CHECK(strstr(dump, "(up0, chunk by chunk: 1+1+2)") != NULL);
    CHECK(strstr(dump, "(up1, chunk by chunk") == NULL);
    free(dump);
    pl_plan_free(p);
    pl_spec_free(s);
}

/* A loop: one stage at the top level (its body's reads and writes), its body right after it in
 * plan order, on its stream but on no stream's list, in no segment; run.loop: host makes it a host
 * stage between two segments. */
static pl_spec *t_loop_spec(const char *run)
{
    char text[2048];
    snprintf(text, sizeof text,
             "run: %s\n"
             "buffers:\n"
             "  n: {where: host, dtype: i32, shape: [1]}\n"
             "  n_dev: {where: device, dtype: i32, shape: [1]}\n"
             "  m1: {where: device, dtype: i32, shape: [1]}\n"
             "  step: {where: device, dtype: i32, shape: [1]}\n"
             "  tot: {where: device, dtype: i32, shape: [1]}\n"
             "  out: {where: host, dtype: i32, shape: [1]}\n"
             "stages:\n"
             "  - {name: gen, kind: source, to: n}\n"
             "  - {name: up, kind: h2d, from: n, to: n_dev}\n"
             "  - {name: minus, kind: kernel, op: fill, value: -1, writes: [m1]}\n"
             "  - {name: zero, kind: kernel, op: fill, value: 0, writes: [tot]}\n"
             "  - name: L\n"
             "    loop: {max: 8, while: n_dev, index: step}\n"
             "    stages:\n"
             "      - {name: acc, kind: kernel, op: add, reads: [tot, step], writes: [tot]}\n"
             "      - {name: dec, kind: kernel, op: add, reads: [n_dev, m1], writes: [n_dev]}\n"
             "  - {name: down, kind: d2h, from: tot, to: out}\n"
             "  - {name: save, kind: sink, from: out}\n",
             run);
    pl_spec *s = NULL;
    pl_error err;
    if (pl_yaml_load_string("loop.yaml", text, strlen(text), &s, &err) != PL_OK) {
        fprintf(stderr, "load failed: %s\n", err.msg);
        exit(1);
    }
    return s;
}

static void test_loop(void)
{
    pl_spec *s = t_loop_spec("{depth: 2}");
    pl_plan *p = t_plan(s);
    int L = t_idx(s, "L"), acc = t_idx(s, "acc"), dec = t_idx(s, "dec");
    CHECK_EQ_INT(p->n_loops, 1);
    CHECK_EQ_INT(p->loops[0].stage, L);
    CHECK_EQ_INT(p->loops[0].n_body, 2);
    CHECK_EQ_INT(p->loops[0].body[0], acc);
    CHECK_EQ_INT(p->loops[0].body[1], dec);
    CHECK(p->loops[0].device && p->loops[0].graph);
    CHECK(pl_plan_loop_of(p, L) == &p->loops[0]);
    CHECK(pl_plan_loop_of(p, acc) == NULL);
    /* the body right after its loop in plan order */
    CHECK_EQ_INT(p->order[p->stages[L].order + 1], acc);
    CHECK_EQ_INT(p->order[p->stages[L].order + 2], dec);
    CHECK(p->stages[acc].body && p->stages[acc].loop == 0 && !p->stages[L].body);
    CHECK_EQ_INT(p->stages[acc].stream, p->stages[L].stream);
    CHECK_EQ_INT(p->stages[acc].n_preds, 0);
    CHECK_EQ_INT(p->stages[acc].segment, -1);
    CHECK_EQ_INT(p->stages[L].segment, 0);
    CHECK_EQ_INT(p->stages[L].engine, PL_ENGINE_COMPUTE);
    const pl_stream *ls = &p->streams[p->stages[L].stream];
    for (int i = 0; i < ls->n_stages; i++)
        CHECK(ls->stages[i] != acc && ls->stages[i] != dec);
    /* the loop reads what its body reads from before it, and writes its body's writes and index */
    const pl_stage *sl = &s->stages[L];
    char list[256] = "";
    for (int i = 0; i < sl->n_reads; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s ", sl->reads[i].name);
    CHECK_STR(list, "n_dev tot m1 ");
    list[0] = '\0';
    for (int i = 0; i < sl->n_writes; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s ", sl->writes[i].name);
    CHECK_STR(list, "tot n_dev step ");
    CHECK_EQ_INT(p->n_segments, 1);
    pl_plan_free(p);
    pl_spec_free(s);

    s = t_loop_spec("{depth: 2, loop: host}");
    p = t_plan(s);
    L = t_idx(s, "L");
    CHECK(p->loops[0].device && !p->loops[0].graph);
    CHECK_EQ_INT(p->stages[L].engine, PL_ENGINE_HOST);
    CHECK_EQ_INT(p->stages[L].segment, -1);
    CHECK_EQ_INT(p->stages[L].after, 0);
    CHECK_EQ_INT(p->n_segments, 2);
    CHECK_EQ_INT(p->segments[1].n_host_deps, 1);
    CHECK_EQ_INT(p->segments[1].host_deps[0], L);
    pl_plan_free(p);
    pl_spec_free(s);
}

int main(void)
{
    test_loop();
    test_chunk_links();
    test_chunk_links_uneven();
    test_chunk_links_dims();
    test_graph_mode_auto();
    test_chain();
    test_diamond();
    test_fork_join();
    test_stream_order_implies();
    test_reduced_preds();
    test_war_and_persistent();
    test_device_self_accumulate();
    test_slot_reuse_two_readers();
    test_determinism();
    test_generated_1000();
    PL_TEST_DONE();
}
