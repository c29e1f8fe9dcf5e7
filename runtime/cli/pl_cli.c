/* pl_cli: the command table, prefix lookup and the shared usage/help/failure helpers. */
#include "pl_cli.h"
#include "pl_stage.h"

#include <stdlib.h>
#include <string.h>

const pl_cmd pl_cmds[] = {
    {"run", "pipectl run [options] FILE", "run a pipeline batch after batch",
     "  --batches N          batches to run (overrides run.batches)\n"
     "  --depth N            slots in flight (overrides run.depth)\n"
     "  --executor E         auto (default) | host | gpu\n"
     "  --no-graph           gpu: plain stream launches instead of CUDA Graphs\n"
     "  --timing T           gpu: device stage times: sample (default: one batch in 16, mid-\n"
     "                       period), all (every batch; slower with CUDA Graphs) or off;\n"
     "                       PIPECTL_GPU_SPANS=0 in the environment also means off\n"
     "  --trace FILE         write the timeline as Chrome trace JSON (Perfetto, chrome://tracing)\n"
     "  --json               print the summary as one JSON object on stdout\n"
     "  --quiet              no progress bar, no summary table\n"
     "  --workers N          host worker threads (default: max(CPUs, streams))\n"
     "  --fail-at STAGE:B    testing: make STAGE fail on batch B (exit 1, outputs kept)\n"
     "  -v, --verbose        say what user kernels compiled, and what came from the cache\n"
     "  --arch SM            check user kernels for SM (sm_90); on a GPU they are built for\n"
     "                       the device's own arch\n"
     "  --capture DIR        write a bundle of the run ('pipectl capture --reps 1 -o DIR')\n"
     "environment:\n"
     "  PIPECTL_GPU_SPANS=0      no device timing (as --timing off)\n"
     "  PIPECTL_GPU_RUNAHEAD=0   gpu: one graph per slot, relaunched only after the host read\n"
     "                           back its previous batch (slower; see docs/perf.md)\n"
     "  PIPECTL_FAULT_MARKS=1    gpu: per-stage completion marks in the graphs, to name a\n"
     "                           faulting stage for certain (slower)\n"
     "  PIPECTL_NVTX=0           no NVTX ranges\n"
     "  PIPECTL_LUA_INSTRUCTIONS, PIPECTL_LUA_MEMORY   limits of a pipeline.lua script\n"
     "  PIPECTL_SEARCH_TILE=N    search: corpus rows per pool task (benchmarks; default from d)\n"
     "  PIPECTL_FAISS_NATIVE=1   search: IVF-Flat indexes scanned by FAISS, not with BLAS\n"
     "  PIPECTL_ARCH=sm_NN, XDG_CACHE_HOME   as for 'pipectl check'\n"
     "signals: SIGINT (Ctrl-C), SIGTERM and SIGHUP stop the run cleanly: no new batch starts,\n"
     "  a running Lua call is interrupted, every sink keeps the batches completed in order\n"
     "  (final name, .npy header fixed, no .partial left), and pipectl exits 128 + the signal\n"
     "  number (130, 143, 129). A second signal of the same kind kills at once. SIGPIPE is\n"
     "  ignored during the run: a sink writing to a closed pipe fails with an error instead.\n",
     pl_cmd_run},
    {"check", "pipectl check [-v] [--arch SM] FILE...",
     "check pipelines for errors without running them",
     "Reports every error it finds (up to 20 per file), each as file:line:col: error: ...;\n"
     "then checks the files a run of run.batches batches would touch: inputs exist, are\n"
     "readable and hold the buffers' dtype, shape and enough whole batches; sink targets can\n"
     "be written. Nothing is run or created. Exit 2 when anything is wrong.\n"
     "  -v, --verbose        say what user kernels compiled, and what came from the cache\n"
     "  --arch SM            compile user kernels for SM (sm_90 or 90; default: PIPECTL_ARCH,\n"
     "                       else sm_90); NVRTC needs no GPU, so CI checks kernels\n"
     "environment:\n"
     "  PIPECTL_ARCH=sm_NN       the SM user kernels are checked for (on a GPU: the device's)\n"
     "  XDG_CACHE_HOME           compiled kernels are cached in $XDG_CACHE_HOME/pipectl\n"
     "                           (default ~/.cache/pipectl)\n",
     pl_cmd_check},
    {"capture", "pipectl capture [options] FILE -o DIR",
     "run a pipeline and write a bundle that replay checks bit for bit",
     "  -o DIR               the bundle folder (created; must be empty)\n"
     "  --reps N             runs (default 3): their spread of stage times is the recorded\n"
     "                       noise, and their checksums must agree\n"
     "  --copy-inputs        copy every input file into the bundle (self-contained)\n"
     "  --copy-outputs       copy the sinks' output files (replay compares them within a\n"
     "                       tolerance where bits may differ across executors)\n"
     "  --batches N, --depth N, --executor E, --no-graph, --timing T, --workers N\n"
     "                       as for 'pipectl run'\n"
     "  --quiet              no summary\n"
     "the bundle: docs/bundles.md; 'pipectl run --capture DIR FILE' is 'capture --reps 1'\n",
     pl_cmd_capture},
    {"replay", "pipectl replay [options] DIR",
     "run a bundle again: inputs, every batch's checksum, stage times, environment",
     "  --executor E         recorded (default) | host | gpu\n"
     "  --allow-changed-inputs   run even when an input's SHA-256 changed (named)\n"
     "  --reps N             runs; the median of their stage p50s is compared (default 1)\n"
     "  --workers N          host workers (default: as recorded)\n"
     "  --no-graph           gpu: plain stream launches\n"
     "  --out DIR            keep the replay's outputs in DIR (default: a temporary folder)\n"
     "  --quiet              only the verdict and the sinks that differ\n"
     "  --json               print the verdict, sinks, stage times and changes as one JSON\n"
     "                       object on stdout (docs/bundles.md)\n"
     "exit: 0 every output matches, 1 one differs (the first batch and sink are named),\n"
     "      2 a bad bundle or a changed input\n",
     pl_cmd_replay},
    {"diff", "pipectl diff A B",
     "compare two bundles: pipeline, plan, environment, checksums, stage times",
     "exit: 0 every sink agrees batch for batch, 1 one differs, 2 a bad bundle\n", pl_cmd_diff},
    {"plan", "pipectl plan [--dot] [--depth N] FILE", "print the compiled stream/event plan",
     "  --dot                print Graphviz DOT instead of the listing\n"
     "  --depth N            slots in flight (overrides run.depth)\n",
     pl_cmd_plan},
    {"doctor", "pipectl doctor", "describe the GPU and measure copy bandwidth and launch cost", "",
     pl_cmd_doctor},
    {"bench", "pipectl bench [options]", "measure pipelines against the physical bound",
     "  --batches N          batches per balanced-pipeline run (default 64)\n"
     "  --small-batches N    batches per small-batch run (default 2000)\n"
     "  --small-depth N      depth of the small-batch runs (default 3)\n"
     "  --small-only         only the stage and small-batch parts\n"
     "  --quick              one size, fewer configurations, one run each, 500 small batches\n"
     "  --reps N             runs per configuration, the best kept (default 3)\n"
     "  --device N           CUDA device (default 0)\n"
     "  --baseline PATH      the bench_baseline program (default: next to pipectl)\n"
     "environment: as for 'pipectl run'\n",
     pl_cmd_bench},
    {"index", "pipectl index build --corpus FILE.npy --factory STRING -o FILE | info FILE",
     "build a FAISS index for the search stage's 'index:', or describe one",
     "  --corpus FILE.npy    the corpus, f32 [n, d] (row i is document i; leading\n"
     "                       dimensions count as rows: a sink's [batches, n, d] works)\n"
     "  --factory STRING     FAISS index_factory string: \"IVF4096,Flat\", \"HNSW32\",\n"
     "                       \"IVF1024,PQ32\", \"Flat\" (exact)...\n"
     "  -o FILE              the index file to write\n"
     "  --metric M           ip (default), l2 or cosine (rows normalised, inner product);\n"
     "                       the search stage's metric must match\n"
     "  --train N            train on the first N rows only (default: all)\n"
     "  --threads N          FAISS (OpenMP) threads while building (default: all cores)\n"
     "needs a pipectl built with FAISS (libfaiss-dev); exit 2 without it\n",
     pl_cmd_index},
    {"version", "pipectl version", "print the version", "", pl_cmd_version},
    {"schema", "pipectl schema", "print the JSON Schema of pipeline.yaml (for editors)",
     "  (no options) e.g. pipectl schema > pipeline.schema.json, then start a pipeline file\n"
     "  with '# yaml-language-server: $schema=pipeline.schema.json'\n",
     pl_cmd_schema},
    {"help", "pipectl help [COMMAND | kinds | KIND]",
     "list commands, or describe one; list stage kinds, or one kind's keys", "", pl_cmd_help},
    {NULL, NULL, NULL, NULL, NULL},
};

const pl_cmd *pl_cmd_find(const char *name, pl_error *err)
{
    const pl_cmd *found = NULL;
    size_t n = strlen(name);
    int matches = 0;
    for (const pl_cmd *c = pl_cmds; c->name; c++) {
        if (strcmp(c->name, name) == 0) return c;
        if (n > 0 && strncmp(c->name, name, n) == 0) {
            found = c;
            matches++;
        }
    }
    if (matches == 1) return found;
    if (matches > 1)
        pl_error_set(err, PL_EINPUT, "error: ambiguous command '%s'; see 'pipectl help'", name);
    else
        pl_error_set(err, PL_EINPUT, "error: unknown command '%s'; see 'pipectl help'", name);
    return NULL;
}

void pl_cmd_usage(const pl_cmd *cmd, FILE *out)
{
    fprintf(out, "usage: %s\n\n%s.\n", cmd->usage, cmd->summary);
    if (cmd->help && *cmd->help) fprintf(out, "\noptions:\n%s", cmd->help);
}

int pl_cmd_wants_help(const pl_cmd *cmd, int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            pl_cmd_usage(cmd, stdout);
            return 1;
        }
    return 0;
}

int pl_cli_fail(const pl_error *err)
{
    fprintf(stderr, "%s\n", err->msg);
    return pl_status_exit_code(err->status);
}
int pl_cli_set_arch(const char *v)
{
    if (!v) return 0;
    const char *d = strncmp(v, "sm_", 3) == 0 ? v + 3 : v;
    char *end;
    long a = strtol(d, &end, 10);
    if (!*d || *end || a < 50 || a >= 1000) return 0;
    char buf[16];
    snprintf(buf, sizeof buf, "sm_%ld", a);
    setenv("PIPECTL_ARCH", buf, 1);
    return (int)a;
}

void pl_cli_print_notes(const pl_spec *spec, bool verbose)
{
    char buf[PL_ERROR_MSG_MAX * 2];
    for (int i = 0; i < spec->n_stages; i++) {
        const pl_stage *st = &spec->stages[i];
        if (!st->kind || !st->kind->notes) continue;
        buf[0] = '\0';
        st->kind->notes(st, verbose, buf, sizeof buf);
        if (buf[0]) fprintf(stderr, "%s\n", buf);
    }
}
