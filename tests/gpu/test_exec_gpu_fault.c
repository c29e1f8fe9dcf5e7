/* test_exec_gpu_fault: a kernel that faults (illegal address) on a chosen batch ends the GPU run
 * cleanly: the error names the stage and the batch, exit status 1 (PL_ECUDA), and the batches
 * that completed before it are in the sink's file, finalized and equal to the host executor's.
 * The fault is injected with pl_run_cfg.fail_stage/fail_batch: for a device stage the GPU executor
 * adds a test-only kernel after that stage (in the failing slot's graph, or after that batch's
 * launch with --no-graph) which, armed through a host-mapped word for that batch only, stores to
 * an address nothing is allocated at. A fault kills the process's CUDA context, so each GPU run
 * is in a child process (fork before any CUDA call). Skipped (77) without a CUDA device. */
#include <sys/wait.h>

#include "pl_gpu_test.h"

enum { GT_BATCHES = 8, GT_FAIL_BATCH = 5 };

static pl_spec *gt_chain(const char *dir)
{
    pl_spec *s = NULL;
    pl_error e;
    pl_spec_new(NULL, &s, &e);
    s->run.batches = GT_BATCHES;
    s->run.depth = 3;
    const int64_t n = 262144;
    gt_buf(s, "x_host", PL_HOST, PL_F32, n, false, PL_INIT_NONE);
    gt_buf(s, "x_dev", PL_DEVICE, PL_F32, n, false, PL_INIT_NONE);
    gt_buf(s, "y_dev", PL_DEVICE, PL_F32, n, false, PL_INIT_NONE);
    gt_buf(s, "y_host", PL_HOST, PL_F32, n, false, PL_INIT_NONE);
    pl_stage *src = gt_stage(s, "gen", pl_kind_find("source"));
    gt_opt(s, src, "to", "x_host");
    gt_copy(s, "up", pl_kind_find("h2d"), "x_host", "x_dev");
    const char *in[] = {"x_dev", NULL};
    gt_kernel(s, "scale", "scale", in, "y_dev", "alpha", "3");
    gt_copy(s, "down", pl_kind_find("d2h"), "y_dev", "y_host");
    pl_stage *sink = gt_stage(s, "save", pl_kind_find("sink"));
    gt_opt(s, sink, "from", "y_host");
    gt_opt(s, sink, "to", "y.npy");
    gt_redirect_sinks(s, dir);
    return s;
}

/* Child: the faulting GPU run; exit 0 when every check holds, 1 otherwise, 77 without a GPU. */
static int gt_child(bool graphs, bool marks, const char *ref_path)
{
    /* Fault marks (run.fault_marks) name the stage for certain; without them (the default) the
     * executor names the first kernel not seen to finish: the same stage here. */
    gt_skip_without_device();
    pl_spec *s = gt_chain(gt_scratch("fault"));
    s->run.fault_marks = marks;
    pl_run_cfg cfg;
    pl_run_cfg_init(&cfg);
    cfg.fail_stage = pl_spec_find_stage(s, "scale");
    cfg.fail_batch = GT_FAIL_BATCH;
    gt_run r;
    gt_run_spec(s, PL_EXEC_GPU, graphs, &cfg, &r);
    printf("[%s%s] status %s, batches done %lld: %s\n", graphs ? "graphs" : "no-graph",
           marks ? ", fault marks" : "", pl_status_name(r.st), (long long)r.res.batches_done,
           r.err.msg);
    CHECK_EQ_INT(r.st, PL_ECUDA);
    CHECK_EQ_INT(pl_status_exit_code(r.st), 1);
    CHECK(strstr(r.err.msg, "stage 'scale', batch 5") != NULL);
    CHECK(strstr(r.err.msg, "illegal") != NULL);
    CHECK(r.res.batches_done <= GT_FAIL_BATCH);
    /* Batches are lost only if the fault cut their download short: at most depth - 1. */
    CHECK(r.res.batches_done >= GT_FAIL_BATCH - 2);
    CHECK_EQ_INT(r.res.n_outputs, 1);
    if (r.res.n_outputs == 1) {
        const pl_output *o = &r.res.outputs[0];
        CHECK(o->finalized);
        CHECK_EQ_INT(o->batches, r.res.batches_done);
        /* The file holds exactly the completed batches, each equal to the host's. */
        size_t nw = 0, ng = 0;
        unsigned char *want = gt_read_file(ref_path, &nw);
        unsigned char *got = o->path ? gt_read_file(o->path, &ng) : NULL;
        CHECK(want && got);
        if (want && got) {
            FILE *f = fopen(o->path, "rb");
            pl_npy_info info;
            pl_error e;
            CHECK(f && pl_npy_read_header(f, o->path, &info, &e) == PL_OK);
            if (f) fclose(f);
            CHECK_EQ_INT(info.shape[0], o->batches);
            size_t data = (size_t)o->batches * o->batch_bytes;
            CHECK_EQ_INT(ng, info.data_offset + data);
            CHECK(nw >= info.data_offset + data);
            CHECK(memcmp(want + info.data_offset, got + info.data_offset, data) == 0);
        }
        free(want);
        free(got);
        char partial[1200];
        snprintf(partial, sizeof partial, "%s.partial", o->path ? o->path : "");
        CHECK(access(partial, F_OK) != 0);
    }
    pl_run_result_fini(&r.res);
    pl_spec_free(s);
    return pl_test_failures ? 1 : 0;
}

int main(void)
{
    /* The reference, on the host executor: no CUDA call in this process before the forks. */
    char ref_dir[600];
    snprintf(ref_dir, sizeof ref_dir, "%s", gt_scratch("faultref"));
    pl_spec *ref = gt_chain(ref_dir);
    gt_run hr;
    gt_run_spec(ref, PL_EXEC_HOST, false, NULL, &hr);
    CHECK(hr.st == PL_OK);
    CHECK_EQ_INT(hr.res.n_outputs, 1);
    if (hr.st != PL_OK || hr.res.n_outputs != 1 || !hr.res.outputs[0].path) PL_TEST_DONE();
    char ref_path[1024];
    snprintf(ref_path, sizeof ref_path, "%s", hr.res.outputs[0].path);
    pl_run_result_fini(&hr.res);
    pl_spec_free(ref);

    int skipped = 0;
    const struct {
        bool graphs, marks;
    } runs[3] = {{true, false}, {false, false}, {true, true}};
    for (int g = 0; g < 3; g++) {
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            int rc = gt_child(runs[g].graphs, runs[g].marks, ref_path);
            fflush(stdout);
            _exit(rc);
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status));
        int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (rc == 77)
            skipped++;
        else
            CHECK_EQ_INT(rc, 0);
    }
    if (skipped == 3 && !pl_test_failures) exit(77);
    PL_TEST_DONE();
}
