/* pl_cli: the command table, prefix lookup with suggestions, and option parsing (getopt_long
 * over each command's option table) with the shared usage/help/failure helpers. */
#include "pl_cli.h"
#include "pl_buffers.h"
#include "pl_diag.h"
#include "pl_exec.h"
#ifdef PL_WITH_CUDA
#include "pl_gpu.h"
#endif
#include "pl_plan.h"
#include "pl_stage.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const pl_cmd pl_cmds[] = {
    {.name = "run",
     .usage = "pipectl run [options] FILE",
     .summary = "run a pipeline batch after batch",
     .opts = pl_cli_run_opts,
     .notes = "signals: SIGINT (Ctrl-C), SIGTERM and SIGHUP stop the run cleanly: no new batch "
              "starts,\n"
              "  the batches in flight finish, long host stages (Lua calls, the GPT-2 reference, "
              "search,\n"
              "  gemm, tokenizing) stop within about 100 ms, every sink keeps the batches "
              "completed in\n"
              "  order (final name, .npy header fixed, no .partial left), and pipectl exits 128 + "
              "the\n"
              "  signal number (130, 143, 129; --json says the same). A second signal aborts: the "
              "batches\n"
              "  in flight are dropped, the outputs keep the finished ones. A third kills at once. "
              "SIGPIPE\n"
              "  is ignored during the run: a sink writing to a closed pipe fails with an error "
              "instead.\n"
              "executor: auto runs on the GPU where one is, else on the host; without a GPU it "
              "refuses\n"
              "  (exit 2) work sized for one, whose host-executor estimate is above 10 minutes, "
              "saying\n"
              "  the estimate; --executor host runs it anyway, with a progress line and ETA.\n",
     .operands = "FILE",
     .fn = pl_cmd_run},
    {.name = "check",
     .usage = "pipectl check [options] FILE...",
     .summary = "check pipelines for errors without running them",
     .opts = pl_cli_check_opts,
     .notes = "Reports every error it finds (up to 20 per file), each as file:line:col: error: "
              "...;\n"
              "then checks the files a run of run.batches batches would touch: inputs exist, are\n"
              "readable and hold the buffers' dtype, shape and enough whole batches; sink targets "
              "can\n"
              "be written. Nothing is run or created. Exit 2 when anything is wrong.\n",
     .operands = "FILE...",
     .fn = pl_cmd_check},
    {.name = "capture",
     .usage = "pipectl capture [options] FILE -o DIR",
     .summary = "run a pipeline and write a bundle that replay checks bit for bit",
     .opts = pl_cli_capture_opts,
     .notes = "the bundle: docs/bundles.md; 'pipectl run --capture DIR FILE' is 'capture --reps "
              "1'\n",
     .operands = "FILE",
     .fn = pl_cmd_capture},
    {.name = "replay",
     .usage = "pipectl replay [options] DIR",
     .summary = "run a bundle again: inputs, every batch's checksum, stage times, environment",
     .opts = pl_cli_replay_opts,
     .notes = "exit: 0 every output matches, 1 one differs (the first batch and sink are named),\n"
              "      2 a bad bundle or a changed input\n",
     .operands = "DIR",
     .fn = pl_cmd_replay},
    {.name = "diff",
     .usage = "pipectl diff [--json] A B",
     .summary = "compare two bundles: pipeline, plan, environment, checksums, stage times",
     .opts = pl_cli_diff_opts,
     .notes = "exit: 0 every sink agrees batch for batch, 1 one differs, 2 a bad bundle\n",
     .operands = "DIR DIR",
     .fn = pl_cmd_diff},
    {.name = "merge",
     .usage = "pipectl merge [-o OUT] PARTS...",
     .summary = "join the parts of a sharded run into the file one process writes",
     .opts = pl_cli_merge_opts,
     .notes = "PARTS are the files 'pipectl run --shard K/N' wrote for one sink, all N of them "
              "(each\n"
              "with its .manifest.json). Refused with exit 2, naming the part: a part missing or "
              "given\n"
              "twice, one of another pipeline or run (its digest), another N or shard_mode, one "
              "whose\n"
              "run stopped early, bytes that differ from its manifest. docs/scale.md\n",
     .operands = "FILE...",
     .fn = pl_cmd_merge},
    {.name = "plan",
     .usage = "pipectl plan [--dot | --json] [--depth N] FILE",
     .summary = "print the compiled stream/event plan",
     .opts = pl_cli_plan_opts,
     .operands = "FILE",
     .fn = pl_cmd_plan},
    {.name = "doctor",
     .usage = "pipectl doctor",
     .summary = "describe the GPU and measure copy bandwidth and launch cost",
     .operands = "",
     .fn = pl_cmd_doctor},
    {.name = "bench",
     .usage = "pipectl bench [options]",
     .summary = "measure pipelines against the physical bound",
     .opts = pl_cli_bench_opts,
     .operands = "",
     .fn = pl_cmd_bench},
    {.name = "index",
     .usage = "pipectl index build --corpus FILE.npy --factory STRING -o FILE | info FILE",
     .summary = "build a FAISS index for the search stage's 'index:', or describe one",
     .opts = pl_cli_index_opts,
     .notes = "needs a pipectl built with FAISS (libfaiss-dev); exit 2 without it\n",
     .operands = "build|info",
     .fn = pl_cmd_index},
    {.name = "tokenize",
     .usage = "pipectl tokenize --vocab DIR [--decode] [--json] [-z] [TEXT... | -]",
     .summary = "GPT-2 BPE ids of each TEXT or stdin line, or text of ids (--decode)",
     .opts = pl_cli_tokenize_opts,
     .notes = "one output line per row: ids separated by spaces (encode) or the text (decode);\n"
              "no TEXT or '-' reads the rows from stdin, one a line (with -z: NUL-ended). Input\n"
              "is UTF-8: each invalid sequence counts as U+FFFD, as Python's\n"
              "bytes.decode('utf-8', 'replace') gives it. <|endoftext|> in the text is id 50256.\n"
              "The tokenizer: docs/pipeline-yaml.md (the tokenize kind). Exit 2 for a bad\n"
              "vocabulary file (named, with its line) or a bad id.\n",
     .operands = "TEXT...",
     .fn = pl_cmd_tokenize},
    {.name = "salvage",
     .usage = "pipectl salvage [-n] [--json] FILE.partial",
     .summary = "turn the .partial a killed run left into its final file",
     .opts = pl_cli_salvage_opts,
     .notes =
         "Cuts a batch that was being written (text, JSONL: and a partial line), sets the\n"
         ".npy header to the batches kept, renames FILE.partial to FILE unless FILE exists,\n"
         "and prints what it kept with the checksum 'pipectl run' reports for those batches.\n"
         "It reads the sidecar FILE.partial.meta a sink writes beside it\n"
         "(docs/pipeline-yaml.md, \"What each ending leaves\"). Exit 2 for a file that is not\n"
         "a pipectl leftover, one still being written, or a FILE that exists; 1 when reading\n"
         "or writing fails.\n",
     .operands = "FILE",
     .fn = pl_cmd_salvage},
    {.name = "version",
     .usage = "pipectl version",
     .summary = "print the version",
     .operands = "",
     .fn = pl_cmd_version},
    {.name = "schema",
     .usage = "pipectl schema",
     .summary = "print the JSON Schema of pipeline.yaml (for editors)",
     .notes = "e.g. pipectl schema > pipeline.schema.json, then start a pipeline file with\n"
              "'# yaml-language-server: $schema=pipeline.schema.json'\n",
     .operands = "",
     .fn = pl_cmd_schema},
    {.name = "help",
     .usage = "pipectl help [COMMAND | kinds | KIND | loop]",
     .summary = "list commands, or describe one; list stage kinds, or one kind's keys, or a loop's",
     .opts = pl_cli_help_opts,
     .operands = "COMMAND",
     .fn = pl_cmd_help},
    /* Build-time generators (CMakeLists.txt runs them): not listed, not prefix-matched. */
    {.name = "__complete",
     .usage = "pipectl __complete bash|zsh",
     .summary = "print the shell completion script",
     .operands = "",
     .fn = pl_cmd_gen,
     .hidden = true},
    {.name = "__man",
     .usage = "pipectl __man",
     .summary = "print the man page (roff)",
     .operands = "",
     .fn = pl_cmd_gen,
     .hidden = true},
    {0},
};

/* What pipectl reads from the environment: settings that hold before any pipeline exists (a
 * pipeline.lua script's limits, the arch user kernels are checked for), process-wide switches
 * (NVTX, OpenBLAS's kernels), and one test hook. Everything that changes what a run does is a run:
 * key, a stage key or a flag instead. runtime/api/pipectl.h lists the same names; test_cli_doc.sh
 * checks that every PIPECTL_ variable the sources read is here and there. */
const pl_cli_env pl_cli_envs[] = {
    {"PIPECTL_NVTX", "0", "run capture replay bench",
     "no NVTX ranges (one domain, \"pipectl\"; in a build with NVTX they are on otherwise), as "
     "NCCL_NVTX_DISABLE=1 for NCCL"},
    {"PIPECTL_LUA_INSTRUCTIONS", "N", "run check plan capture",
     "the instruction budget of a pipeline.lua script while it builds the pipeline (default "
     "10^9; docs/lua.md)"},
    {"PIPECTL_LUA_MEMORY", "BYTES", "run check plan capture",
     "the memory cap of a pipeline.lua script while it builds the pipeline (default 256 MiB, at "
     "least 256 KiB)"},
    {"PIPECTL_ARCH", "sm_NN", "run check plan capture",
     "the SM user kernels are checked for where no GPU is used (default sm_90; on a GPU they are "
     "built for the device's own); --arch sets it"},
    {"XDG_CACHE_HOME", "DIR", "run check plan capture",
     "compiled user kernels are cached in $XDG_CACHE_HOME/pipectl (default ~/.cache/pipectl)"},
    {"OPENBLAS_CORETYPE", "NAME", "run capture replay bench",
     "OpenBLAS's kernels, read when it loads: SkylakeX runs d <= 448 in one pass where Cooperlake "
     "splits d > 320 (docs/perf.md); unset, pipectl sets SkylakeX (AVX-512) or Haswell (AVX2) "
     "where OpenBLAS fell back to older kernels, and loads it again"},
    {"PIPECTL_BLAS_PICKED", "NAME", "version",
     "testing: stands for OpenBLAS's own pick of kernels, to check the fallback above without "
     "such a CPU (tests/e2e/test_cli.sh)"},
    {0},
};

/* Optimal string alignment distance (Levenshtein with transpositions), for "did you mean". */
static int pl__distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 32 || m > 32) return 99;
    int d[33][33];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1];
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

const pl_cmd *pl_cmd_find(const char *name, pl_error *err)
{
    const pl_cmd *found = NULL;
    size_t n = strlen(name);
    int matches = 0;
    for (const pl_cmd *c = pl_cmds; c->name; c++) {
        if (strcmp(c->name, name) == 0) return c;
        if (!c->hidden && n > 0 && strncmp(c->name, name, n) == 0) {
            found = c;
            matches++;
        }
    }
    if (matches == 1) return found;
    if (!err) return NULL;
    if (matches > 1) {
        pl_error_set(err, PL_EINPUT, "error: ambiguous command '%s'; see 'pipectl help'", name);
        return NULL;
    }
    /* The nearest visible command, if close enough to be a typo: one edit for short names, two
     * from five letters on (git suggests the same way). */
    const pl_cmd *best = NULL;
    int best_d = 99;
    for (const pl_cmd *c = pl_cmds; c->name; c++) {
        if (c->hidden) continue;
        int d = pl__distance(name, c->name);
        if (d < best_d) best_d = d, best = c;
    }
    if (best && best_d <= (strlen(name) >= 5 ? 2 : 1))
        pl_error_set(err, PL_EINPUT,
                     "error: unknown command '%s' (did you mean '%s'?); see 'pipectl help'", name,
                     best->name);
    else
        pl_error_set(err, PL_EINPUT, "error: unknown command '%s'; see 'pipectl help'", name);
    return NULL;
}

/* One line of --help: `left`, then `help` from column 25 (a longer left part gets its own line),
 * wrapped at words to end by column 79. */
static void pl__print_entry(FILE *out, const char *left, const char *help)
{
    if (strlen(left) > 23)
        fprintf(out, "%s\n%25s", left, "");
    else
        fprintf(out, "%-25s", left);
    const char *h = help;
    int col = 25;
    while (*h) {
        size_t w = strcspn(h, " \n");
        if (col > 25 && col + 1 + (int)w > 79) {
            fprintf(out, "\n%25s", "");
            col = 25;
        } else if (col > 25) {
            fputc(' ', out);
            col++;
        }
        fprintf(out, "%.*s", (int)w, h);
        col += (int)w;
        h += w;
        while (*h == ' ' || *h == '\n')
            h++;
    }
    fputc('\n', out);
}

void pl_cli_print_opts(const pl_cmd *cmd, FILE *out)
{
    for (const pl_cli_opt *o = cmd->opts; o && o->name; o++) {
        char left[64];
        int n = o->short_name ? snprintf(left, sizeof left, "  -%c, --%s", o->short_name, o->name)
                              : snprintf(left, sizeof left, "      --%s", o->name);
        if (o->arg) snprintf(left + n, sizeof left - (size_t)n, " %s", o->arg);
        pl__print_entry(out, left, o->help);
    }
}

bool pl_cli_env_for(const pl_cli_env *e, const pl_cmd *cmd)
{
    size_t n = strlen(cmd->name);
    for (const char *p = e->commands; *p;) {
        size_t w = strcspn(p, " ");
        if (w == n && strncmp(p, cmd->name, n) == 0) return true;
        p += w;
        while (*p == ' ')
            p++;
    }
    return false;
}

void pl_cli_print_environ(const pl_cmd *cmd, FILE *out)
{
    bool any = false;
    for (const pl_cli_env *e = pl_cli_envs; e->name; e++) {
        if (!pl_cli_env_for(e, cmd)) continue;
        if (!any) fprintf(out, "\nenvironment (docs/cli.md lists every variable):\n");
        any = true;
        char left[64];
        snprintf(left, sizeof left, "  %s=%s", e->name, e->value);
        pl__print_entry(out, left, e->help);
    }
}

void pl_cmd_usage(const pl_cmd *cmd, FILE *out)
{
    fprintf(out, "usage: %s\n\n%s.\n", cmd->usage, cmd->summary);
    if (cmd->opts && cmd->opts[0].name) {
        fprintf(out, "\noptions:\n");
        pl_cli_print_opts(cmd, out);
    }
    pl_cli_print_environ(cmd, out);
    if (cmd->notes && *cmd->notes) fprintf(out, "\n%s", cmd->notes);
}

int pl_cli_fail(const pl_error *err)
{
    fprintf(stderr, "%s\n", err->msg);
    return pl_status_exit_code(err->status);
}

int pl_cli_usage_error(const pl_cmd *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "error: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "; see 'pipectl %s --help'\n", cmd->name);
    return 2;
}

void pl_cli_args_init(pl_cli_args *a, const pl_cmd *cmd, int argc, char **argv)
{
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->argc = argc;
    a->argv = argv;
    /* ':' first: a missing value is reported as ':' (our message), not printed by getopt. */
    size_t k = 0;
    a->shortopts[k++] = ':';
    int n = 0;
    for (const pl_cli_opt *o = cmd->opts; o && o->name && n < PL_CLI_MAX_OPTS; o++, n++) {
        a->longopts[n] =
            (struct option){o->name, o->arg ? required_argument : no_argument, NULL, o->id};
        if (o->short_name) {
            a->shortopts[k++] = (char)o->short_name;
            if (o->arg) a->shortopts[k++] = ':';
        }
    }
    a->longopts[n++] = (struct option){"help", no_argument, NULL, 'h'};
    a->longopts[n] = (struct option){0};
    a->shortopts[k++] = 'h';
    a->shortopts[k] = '\0';
    opterr = 0;
    optind = 0; /* glibc: 0 reinitialises, so a second parse in one process starts afresh */
}

static const pl_cli_opt *pl__opt_by_id(const pl_cmd *cmd, int id)
{
    for (const pl_cli_opt *o = cmd->opts; o && o->name; o++)
        if (o->id == id || (o->short_name && o->short_name == id)) return o;
    return NULL;
}

int pl_cli_next(pl_cli_args *a, const char **val)
{
    *val = NULL;
    for (;;) {
        int c = getopt_long(a->argc, a->argv, a->shortopts, a->longopts, NULL);
        if (c == -1) {
            a->operands = a->argv + optind;
            a->n_operands = a->argc - optind;
            return 0;
        }
        if (c == 'h') {
            pl_cmd_usage(a->cmd, stdout);
            a->rc = 0;
            return -1;
        }
        /* The argument getopt was looking at: the last one it consumed. */
        const char *arg = optind > 0 && optind <= a->argc ? a->argv[optind - 1] : "";
        if (c == '?') {
            char shortopt[3] = {'-', (char)optopt, '\0'};
            /* A misspelt long option: the nearest one of this command, as for commands. */
            const char *near = NULL;
            if (!optopt && strncmp(arg, "--", 2) == 0) {
                size_t n = strcspn(arg + 2, "=");
                char name[64];
                snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1),
                         arg + 2);
                int best = 99;
                for (const pl_cli_opt *o = a->cmd->opts; o && o->name; o++) {
                    int d = pl__distance(name, o->name);
                    if (d < best) best = d, near = o->name;
                }
                if (best > (strlen(name) >= 5 ? 2 : 1)) near = NULL;
            }
            /* A prefix of several long options: getopt_long's '?' too; name them. */
            char several[256] = "";
            if (!optopt && strncmp(arg, "--", 2) == 0) {
                size_t n = strcspn(arg + 2, "="), k = 0;
                int hits = 0;
                for (const pl_cli_opt *o = a->cmd->opts; o && o->name; o++)
                    if (n > 0 && strncmp(o->name, arg + 2, n) == 0 && k + 40 < sizeof several) {
                        k += (size_t)snprintf(several + k, sizeof several - k, "%s--%s",
                                              hits ? ", " : "", o->name);
                        hits++;
                    }
                if (hits < 2) several[0] = '\0';
            }
            if (several[0])
                a->rc = pl_cli_usage_error(a->cmd, "ambiguous option '%s' for 'pipectl %s' (%s)",
                                           arg, a->cmd->name, several);
            else if (near)
                a->rc = pl_cli_usage_error(a->cmd,
                                           "unknown option '%s' for 'pipectl %s' (did you mean "
                                           "'--%s'?)",
                                           arg, a->cmd->name, near);
            else
                a->rc = pl_cli_usage_error(a->cmd, "unknown option '%s' for 'pipectl %s'",
                                           optopt ? shortopt : arg, a->cmd->name);
            return -1;
        }
        if (c == ':') {
            const pl_cli_opt *o = pl__opt_by_id(a->cmd, optopt);
            a->rc = pl_cli_usage_error(a->cmd, "%s%s needs a value (%s)", o ? "--" : "",
                                       o ? o->name : arg, o ? o->arg : "?");
            return -1;
        }
        const pl_cli_opt *o = pl__opt_by_id(a->cmd, c);
        if (!o) continue;
        *val = optarg;
        return o->id;
    }
}

int pl_cli_int(const pl_cmd *cmd, int id, const char *val, int64_t lo, int64_t hi, int64_t *out)
{
    const pl_cli_opt *o = pl__opt_by_id(cmd, id);
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", o ? o->name : "?");
    char *end;
    errno = 0;
    long long v = val && *val ? strtoll(val, &end, 10) : 0;
    if (!val || !*val || errno || *end || v < lo || v > hi) {
        char range[64];
        if (hi == INT64_MAX)
            snprintf(range, sizeof range, ">= %lld", (long long)lo);
        else if (hi == ((int64_t)1 << 40))
            snprintf(range, sizeof range, "from %lld to 2^40", (long long)lo);
        else
            snprintf(range, sizeof range, "from %lld to %lld", (long long)lo, (long long)hi);
        return pl_cli_usage_error(cmd, "%s needs a whole number %s, got '%s'", opt, range,
                                  val ? val : "");
    }
    *out = v;
    return 0;
}

int pl_cli_depth(const pl_cmd *cmd, int id, const char *val, int64_t *out)
{
    if (val && strcmp(val, "auto") == 0) {
        *out = PL_DEPTH_AUTO;
        return 0;
    }
    if (val && *val && strspn(val, "0123456789+-") == strlen(val))
        return pl_cli_int(cmd, id, val, 1, PL_MAX_DEPTH, out);
    return pl_cli_usage_error(cmd, "--depth needs a whole number from 1 to %d or 'auto', got '%s'",
                              PL_MAX_DEPTH, val ? val : "");
}

int pl_cli_graphs(const pl_cmd *cmd, int id, const char *val, struct pl_run_cfg *run)
{
    int k = pl_cli_choice(cmd, id, val);
    if (k < 0) return 2;
    static const int modes[] = {PL_GRAPHS_AUTO, PL_GRAPHS_STAGE, PL_GRAPHS_SEGMENT};
    run->use_graphs = k != 3;
    if (k != 3) run->graph_mode = modes[k];
    return 0;
}

int pl_cli_choice(const pl_cmd *cmd, int id, const char *val)
{
    const pl_cli_opt *o = pl__opt_by_id(cmd, id);
    const char *values = o && o->values ? o->values : "";
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", o ? o->name : "?");
    size_t n = strlen(val);
    int i = 0;
    for (const char *p = values;; i++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, val, n) == 0) return i;
        if (!bar) break;
        p = bar + 1;
    }
    char list[128];
    size_t k = 0;
    for (const char *p = values; *p && k + 6 < sizeof list; p++) {
        if (*p == '|') {
            bool last = !strchr(p + 1, '|');
            const char *sep = last ? " or " : ", ";
            memcpy(list + k, sep, strlen(sep));
            k += strlen(sep);
        } else {
            list[k++] = *p;
        }
    }
    list[k] = '\0';
    pl_cli_usage_error(cmd, "%s must be %s, got '%s'", opt, list, val);
    return -1;
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

int pl_cli_load_arg(const pl_cmd *cmd, int id, const char *val, pl_cli_load *l)
{
    l->opts.sets = l->sets;
    switch (id) {
    case PL_CLI_O_SET: {
        const char *eq = strchr(val, '=');
        if (!eq || eq == val)
            return pl_cli_usage_error(
                cmd, "--set needs KEY=VALUE, like --set run.batches=4, got '%s'", val);
        if (l->opts.n_sets == PL_CLI_MAX_SETS)
            return pl_cli_usage_error(cmd, "more than %d --set options", PL_CLI_MAX_SETS);
        l->sets[l->opts.n_sets++] = val;
        return 0;
    }
    case PL_CLI_O_OUT_DIR:
        if (!*val) return pl_cli_usage_error(cmd, "--out-dir needs a folder");
        l->opts.out_dir = val;
        return 0;
    case PL_CLI_O_CONFINE:
        l->opts.confine = true;
        return 0;
    }
    return -1;
}

pl_status pl_cli_make_dir(const char *dir, pl_error *err)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return pl_error_set(err, PL_EIO, "error: --out-dir '%s' is too long", dir);
    /* Each parent in turn, then the folder itself: mkdir -p. */
    for (char *c = p + 1;; c++) {
        bool end = *c == '\0';
        if (*c != '/' && !end) continue;
        *c = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            return pl_error_set(err, PL_EIO, "error: cannot create --out-dir '%s': %s: %s", dir, p,
                                strerror(errno));
        if (end) break;
        *c = '/';
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return pl_error_set(err, PL_EIO, "error: --out-dir '%s' is not a folder", dir);
    return PL_OK;
}

void pl_cli_check_memory(const pl_spec *spec, pl_diags *diags)
{
    pl_spec_check_memory(spec, pl_host_memory(), diags);
#ifdef PL_WITH_CUDA
    uint64_t dev = 0;
    pl_error err = {0};
    if (pl_spec_persistent_device_bytes(spec) >= (UINT64_C(1) << 30) && pl_gpu_available() &&
        pl_gpu_memory_total(spec->run.device, &dev, &err) == PL_OK)
        pl_spec_check_device_memory(spec, dev, diags);
#endif
}
