/* test_check: pl_spec_check on specs built through the builder API: every rule, its exact
 * message, the first-error-wins order, and the list of every error (pl_spec_check_all). */
#include "pl_diag.h"
#include "pl_test.h"
#include "pl_test_spec.h"

static void test_chain_ok(void)
{
    pl_spec *s = t_chain();
    const char *msg;
    CHECK_EQ_INT(t_check(s, &msg), PL_OK);
    CHECK(s->checked);
    CHECK_EQ_INT(s->buffers[0].count, 1024);
    CHECK_EQ_INT(s->buffers[0].bytes, 4096);
    /* binds and resolution filled the refs */
    CHECK_EQ_INT(s->stages[1].n_reads, 1);
    CHECK_EQ_INT(s->stages[1].reads[0].index, 0);
    CHECK_EQ_INT(s->stages[1].writes[0].index, 1);
    pl_spec_free(s);
}

static void test_run_options(void)
{
    const char *msg;
    pl_spec *s = t_chain();
    s->run.batches = 0;
    s->run.batches_pos = (pl_pos){"t.yaml", 2, 20};
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:2:20: error: run: 'batches' is 0; it must be between 1 and "
                   "1099511627776 (PL_MAX_BATCHES)");
    pl_spec_free(s);

    s = t_chain();
    s->run.depth = 0;
    s->run.depth_pos = (pl_pos){"t.yaml", 2, 32};
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:2:32: error: run: 'depth' is 0; it must be between 1 and 64 "
                   "(PL_MAX_DEPTH)");
    pl_spec_free(s);

    s = t_chain();
    s->run.depth = 65;
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "error: run: 'depth' is 65; it must be between 1 and 64 (PL_MAX_DEPTH)");
    pl_spec_free(s);

    s = t_chain();
    s->run.device = -1;
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "error: run: 'device' is -1; it must be between 0 and 2147483647");
    pl_spec_free(s);

    /* run options come first, even when other things are wrong too */
    s = t_chain();
    s->run.depth = 0;
    t_host(s, "x_host", 4);
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK(strstr(msg, "run: 'depth' is 0") != NULL);
    pl_spec_free(s);
}

static void test_buffers(void)
{
    const char *msg;
    pl_spec *s = t_chain();
    t_host(s, "x_host", 4);
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:20:3: error: duplicate buffer name 'x_host' (first declared at "
                   "t.yaml:1:3); rename one of them");
    pl_spec_free(s);

    s = t_chain();
    t_host(s, "9lives", 4);
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:20:3: error: buffer name '9lives' is not valid: use letters, digits and "
                   "'_', starting with a letter or '_', at most 64 bytes");
    pl_spec_free(s);

    s = t_chain();
    t_host(s, "z", 4);
    s->buffers[4].shape[0] = 0;
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:20:20: error: buffer 'z': shape dimension 1 must be a positive integer, "
                   "got '0'");
    pl_spec_free(s);

    s = t_chain();
    t_host(s, "z", 4);
    s->buffers[4].rank = 0;
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:20:3: error: buffer 'z': 'shape' has no dimensions; give a list of 1 to "
                   "8 sizes, e.g. shape: [1024]");
    pl_spec_free(s);

    /* element count overflows int64 */
    s = t_chain();
    t_host(s, "big", 4);
    s->buffers[4].rank = 3;
    s->buffers[4].shape[0] = INT64_C(1) << 40;
    s->buffers[4].shape[1] = INT64_C(1) << 30;
    s->buffers[4].shape[2] = 2;
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:20:20: error: buffer 'big': the shape has more than 2^63-1 elements; a "
                   "buffer holds at most 68719476736 bytes (64 GiB, PL_MAX_BUFFER_BYTES): make it "
                   "smaller");
    pl_spec_free(s);

    /* no overflow, but over the cap */
    s = t_chain();
    t_buf(s, "big", PL_DEVICE, PL_F64, INT64_C(1) << 34, true, PL_INIT_ZEROS);
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:20:20: error: buffer 'big': 17179869184 elements of f64 is more than "
                   "68719476736 bytes (64 GiB, PL_MAX_BUFFER_BYTES) per buffer: make the shape "
                   "smaller");
    pl_spec_free(s);

    /* exactly the cap is fine */
    s = t_chain();
    t_buf(s, "cap", PL_DEVICE, PL_U8, INT64_C(1) << 36, true, PL_INIT_ZEROS);
    CHECK_EQ_INT(t_check(s, &msg), PL_OK);
    CHECK_EQ_INT(s->buffers[4].bytes, UINT64_C(1) << 36);
    pl_spec_free(s);

    s = t_chain();
    t_buf(s, "tab", PL_HOST, PL_I32, 16, true, PL_INIT_FILE);
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg,
              "t.yaml:20:40: error: buffer 'tab': init: file needs 'file: PATH' (raw or .npy)");
    pl_spec_free(s);
}

static void test_stage_names(void)
{
    const char *msg;
    pl_spec *s = t_chain();
    t_busy(s, "k", "y_dev", "x_dev");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:20:3: error: duplicate stage name 'k' (first declared at t.yaml:10:3); "
                   "rename one of them");
    pl_spec_free(s);

    s = t_chain();
    t_busy(s, "bad-name", "y_dev", "");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:20:3: error: stage name 'bad-name' is not valid: use letters, digits "
                   "and '_', starting with a letter or '_', at most 64 bytes");
    pl_spec_free(s);

    s = t_chain();
    t_stage(s, "nokind", NULL);
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:20:3: error: stage 'nokind' has no kind; add kind: one of source, "
                   "search, h2d, kernel, d2h, lua, sink, gpt2, sample, tokenize, detokenize");
    pl_spec_free(s);

    s = t_chain();
    int a = t_busy(s, "self", "y_dev", "");
    t_after(s, a, "self");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:24:3: error: stage 'self' names itself in after:; remove it (after: "
                   "lists the stages that must finish before this one)");
    pl_spec_free(s);
}

static void test_unresolved(void)
{
    const char *msg;
    pl_spec *s = t_chain();
    t_busy(s, "k2", "y_dve", "");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:23:3: error: stage 'k2' reads unknown buffer 'y_dve' (did you mean "
                   "'y_dev'?)");
    pl_spec_free(s);

    s = t_chain();
    t_busy(s, "k2", "", "zzz_top");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:23:3: error: stage 'k2' writes unknown buffer 'zzz_top'; declare it "
                   "under buffers: or fix the name");
    pl_spec_free(s);

    s = t_chain();
    int k2 = t_busy(s, "k2", "y_dev", "");
    t_after(s, k2, "dwn");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:24:3: error: stage 'k2': after: names unknown stage 'dwn' (did you mean "
                   "'down'?)");
    pl_spec_free(s);

    /* a forward reference in after: is fine */
    s = t_chain();
    t_after(s, 0, "save");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT); /* ... but here it makes a cycle */
    CHECK(strstr(msg, "dependency cycle: gen -> up -> k -> down -> save -> gen") != NULL);
    pl_spec_free(s);
}

static void test_engines(void)
{
    const char *msg;
    /* a kernel reading a host buffer */
    pl_spec *s = t_chain();
    t_busy(s, "k2", "y_host", "");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:23:3: error: stage 'k2' (kernel, runs on the GPU) reads host buffer "
                   "'y_host'; compute stages touch only device buffers: copy it to a device buffer "
                   "with an h2d stage and read that, or declare 'y_host' with where: device");
    pl_spec_free(s);

    /* a host stage writing a device buffer */
    s = t_chain();
    t_dev(s, "d", 16);
    t_source(s, "gen2", "d");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK(strstr(msg, "error: stage 'gen2' (source, runs on the host) writes device buffer 'd'; "
                      "host stages touch only host buffers: write a host buffer and copy it to the "
                      "device with an h2d stage, or declare 'd' with where: host") != NULL);
    pl_spec_free(s);

    /* h2d the wrong way round */
    s = t_chain();
    t_copy(s, "back", pl_kind_find("h2d"), "y_dev", "y_host");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK(strstr(msg, "error: h2d stage 'back' copies host -> device, but its source 'y_dev' is a "
                      "device buffer; for device -> host use kind: d2h") != NULL);
    pl_spec_free(s);

    /* d2h into a device buffer */
    s = t_chain();
    t_dev(s, "z_dev", 1024);
    t_copy(s, "d2", pl_kind_find("d2h"), "y_dev", "z_dev");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK(strstr(msg, "error: d2h stage 'd2' copies device -> host, but its destination 'z_dev' is "
                      "a device buffer; for host -> device use kind: h2d") != NULL);
    pl_spec_free(s);

    /* dtype and size mismatch */
    s = t_chain();
    t_buf(s, "h16", PL_HOST, PL_F16, 1024, false, PL_INIT_ZEROS);
    t_copy(s, "up16", pl_kind_find("h2d"), "h16", "y_dev");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:21:3: error: h2d stage 'up16' copies 'h16' (f16, 2048 bytes) to 'y_dev' "
                   "(f32, 4096 bytes); both ends need the same dtype and byte size");
    pl_spec_free(s);

    /* same dtype and bytes, different shape: fine */
    s = t_chain();
    t_buf(s, "h2", PL_HOST, PL_F32, 1024, false, PL_INIT_NONE);
    s->buffers[4].rank = 2;
    s->buffers[4].shape[0] = 32;
    s->buffers[4].shape[1] = 32;
    t_copy(s, "down2", pl_kind_find("d2h"), "y_dev", "h2");
    CHECK_EQ_INT(t_check(s, &msg), PL_OK);
    pl_spec_free(s);
}

static void test_hazards(void)
{
    const char *msg;
    /* write/write: two kernels write y_dev, nothing orders them */
    pl_spec *s = t_chain();
    t_dev(s, "w_dev", 1024);
    t_busy(s, "k2", "x_dev", "y_dev");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:25:3: error: hazard on buffer 'y_dev': stage 'k2' writes it and stage "
                   "'k' (at t.yaml:14:3) writes it, and nothing orders them; add after: [k] to "
                   "stage 'k2' (or the reverse) so one runs first");
    pl_spec_free(s);

    /* the fix the message suggests works */
    s = t_chain();
    t_dev(s, "w_dev", 1024);
    int k2 = t_busy(s, "k2", "x_dev", "y_dev");
    t_after(s, k2, "k");
    /* now k2 overwrites y_dev after k: down (reads y_dev) follows both writers */
    CHECK_EQ_INT(t_check(s, &msg), PL_OK);
    pl_spec_free(s);

    /* write/write on a host buffer: two sources fill one buffer */
    s = t_chain();
    t_source(s, "gen2", "x_host");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK(strstr(msg, "hazard on buffer 'x_host': stage 'gen2' writes it and stage 'gen' (at ") !=
          NULL);
    CHECK(strstr(msg, "add after: [gen] to stage 'gen2'") != NULL);
    pl_spec_free(s);

    /* read-modify-write after a writer is ordered by the data (writer -> reader): no hazard */
    s = t_chain();
    t_busy(s, "inplace", "y_dev", "y_dev");
    CHECK_EQ_INT(t_check(s, &msg), PL_OK);
    pl_spec_free(s);
}

static void test_cycles(void)
{
    const char *msg;
    /* two read-modify-write stages of one buffer: each must see the other's write */
    pl_spec *s = t_chain();
    t_busy(s, "a", "y_dev", "y_dev");
    t_busy(s, "b", "y_dev", "y_dev");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:20:3: error: dependency cycle: a -> b -> a ('b' reads 'y_dev' written "
                   "by 'a'; 'a' reads 'y_dev' written by 'b'); break it: use separate buffers, "
                   "drop an after: entry, or add after: to order a reader before the writer it "
                   "must not wait for");
    pl_spec_free(s);
    /* after: orders them, the cycle is gone */
    s = t_chain();
    t_busy(s, "a", "y_dev", "y_dev");
    int b = t_busy(s, "b", "y_dev", "y_dev");
    t_after(s, b, "a");
    CHECK_EQ_INT(t_check(s, &msg), PL_OK);
    pl_spec_free(s);

    /* three stages through data and after */
    s = t_new();
    t_dev(s, "x", 8);
    t_dev(s, "y", 8);
    t_buf(s, "z", PL_DEVICE, PL_F32, 8, true, PL_INIT_ZEROS);
    t_busy(s, "p", "z", "x");
    t_busy(s, "q", "x", "y");
    int r = t_busy(s, "r", "y", "");
    t_after(s, 0, "r");
    (void)r;
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK(strstr(msg, "error: dependency cycle: p -> q -> r -> p ('q' reads 'x' written by 'p'; "
                      "'r' reads 'y' written by 'q'; 'p' is after 'r')") != NULL);
    pl_spec_free(s);
}

static void test_write_after_read(void)
{
    const char *msg;
    /* w1 writes x; r reads it; w2 overwrites it after r (WAR through after:); r2 reads the new x */
    pl_spec *s = t_new();
    t_dev(s, "x", 8);
    t_dev(s, "o1", 8);
    t_dev(s, "o2", 8);
    t_busy(s, "w1", "", "x");
    t_busy(s, "r", "x", "o1");
    int w2 = t_busy(s, "w2", "", "x");
    t_after(s, w2, "r");
    int r2 = t_busy(s, "r2", "x", "o2");
    t_after(s, r2, "w2");
    CHECK_EQ_INT(t_check(s, &msg), PL_OK);
    pl_spec_free(s);

    /* without the after:, w1 and w2 are two unordered writers */
    s = t_new();
    t_dev(s, "x", 8);
    t_dev(s, "o1", 8);
    t_busy(s, "w1", "", "x");
    t_busy(s, "r", "x", "o1");
    t_busy(s, "w2", "", "x");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK(strstr(msg, "hazard on buffer 'x': stage 'w2' writes it and stage 'w1'") != NULL);
    pl_spec_free(s);
}

static void test_unwritten_and_init(void)
{
    const char *msg;
    /* a per-batch buffer read but never written */
    pl_spec *s = t_chain();
    t_dev(s, "nothing", 1024);
    t_busy(s, "k2", "nothing", "y_dev");
    int k2 = s->n_stages - 1;
    t_after(s, k2, "k");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:24:3: error: stage 'k2' reads per-batch buffer 'nothing', but no stage "
                   "writes it before that in the batch; write it first (a stage ordered before "
                   "'k2' that writes 'nothing'), or give 'nothing' an init: (zeros, random or "
                   "file)");
    pl_spec_free(s);

    /* written, but only after the read (WAR through after:) */
    s = t_new();
    t_dev(s, "x", 8);
    t_dev(s, "o", 8);
    t_busy(s, "r", "x", "o");
    int w = t_busy(s, "w", "", "x");
    t_after(s, w, "r");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK(strstr(msg, "stage 'r' reads per-batch buffer 'x', but no stage writes it before") !=
          NULL);
    pl_spec_free(s);
    /* ... which is right for a persistent buffer: r sees the previous batch's write */
    s = t_new();
    t_buf(s, "x", PL_DEVICE, PL_F32, 8, true, PL_INIT_ZEROS);
    t_dev(s, "o", 8);
    t_busy(s, "r", "x", "o");
    w = t_busy(s, "w", "", "x");
    t_after(s, w, "r");
    CHECK_EQ_INT(t_check(s, &msg), PL_OK);
    pl_spec_free(s);

    /* init: makes a read-only per-batch buffer fine ... */
    s = t_chain();
    t_buf(s, "c", PL_DEVICE, PL_F32, 1024, false, PL_INIT_RANDOM);
    t_busy(s, "k2", "c", "y_dev");
    t_after(s, s->n_stages - 1, "k");
    CHECK_EQ_INT(t_check(s, &msg), PL_OK);
    pl_spec_free(s);
    /* ... but writing it would leak one batch into a later one through the slot */
    s = t_chain();
    t_buf(s, "c", PL_DEVICE, PL_F32, 1024, false, PL_INIT_ZEROS);
    t_busy(s, "k2", "y_dev", "c");
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK_STR(msg, "t.yaml:25:3: error: stage 'k2' writes per-batch buffer 'c', which has init: "
                   "zeros (at t.yaml:20:40); its slots would carry one batch's writes into a later "
                   "batch, so results would depend on depth: make it persistent, or drop init and "
                   "write it in every batch");
    pl_spec_free(s);
}

/* Errors come in file order within one rule and rules in the documented order. */
static void test_first_error_wins(void)
{
    const char *msg;
    pl_spec *s = t_chain();
    t_host(s, "x_host", 4);     /* duplicate buffer */
    t_busy(s, "k", "nope", ""); /* duplicate stage and unknown buffer */
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK(strstr(msg, "duplicate buffer name 'x_host'") != NULL);
    pl_spec_free(s);

    s = t_chain();
    t_busy(s, "k9", "nope", ""); /* unknown buffer */
    t_busy(s, "k", "y_dev", ""); /* duplicate stage, later */
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK(strstr(msg, "duplicate stage name 'k'") != NULL); /* names before resolution */
    pl_spec_free(s);
}

/* pl_spec_check_all lists every error of a phase; its first entry is pl_spec_check's error. */
static void test_all_errors(void)
{
    pl_spec *s = t_chain();
    t_busy(s, "k1", "nope1", "");
    t_busy(s, "k2", "nope2", "");
    t_busy(s, "k3", "nope3", "");
    pl_diags d;
    pl_diags_init(&d, 2);
    pl_error err;
    CHECK_EQ_INT(pl_spec_check_all(s, &d, &err), PL_EINPUT);
    CHECK_EQ_INT(d.n, 2);
    CHECK_EQ_INT(d.dropped, 1);
    CHECK_EQ_INT(pl_diags_errors(&d), 3);
    CHECK(strstr(d.items[0].err.msg, "unknown buffer 'nope1'") != NULL);
    CHECK(strstr(d.items[1].err.msg, "unknown buffer 'nope2'") != NULL);
    CHECK_STR(err.msg, d.items[0].err.msg);
    pl_diags_fini(&d);
    pl_spec_free(s);
    /* Without a list: the first error only, the same text. */
    s = t_chain();
    t_busy(s, "k1", "nope1", "");
    t_busy(s, "k2", "nope2", "");
    const char *msg;
    CHECK_EQ_INT(t_check(s, &msg), PL_EINPUT);
    CHECK(strstr(msg, "unknown buffer 'nope1'") != NULL);
    pl_spec_free(s);
}

int main(void)
{
    test_chain_ok();
    test_run_options();
    test_buffers();
    test_stage_names();
    test_unresolved();
    test_engines();
    test_hazards();
    test_cycles();
    test_write_after_read();
    test_unwritten_and_init();
    test_first_error_wins();
    test_all_errors();
    PL_TEST_DONE();
}
