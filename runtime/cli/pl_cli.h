/* pl_cli: the `pipectl` subcommands, one file each (cmd_*.c), one table (pl_cli.c) that gives
 * name, usage, summary, options and function. Each command's options are one table (pl_cli_opt)
 * that drives getopt_long parsing, `--help`, docs/cli.md, the man page and the bash and zsh
 * completions alike, so none of them can drift from what the parser accepts. */
/* Layer runtime/cli, the top: owns the `pipectl` command line (main.c, the commands, the progress
 * line, the generated docs/cli.md, man page and completions) and runtime/cli/gpu, its CUDA-only
 * part (`doctor`). May include every layer below it; nothing includes it. */
#ifndef PL_CLI_H
#define PL_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pl_parse.h"
#include "pl_status.h"

/* One option of a command. GNU forms are accepted for every entry: `--name=V`, `--name V`,
 * `-c V`, `-cV`, flags bundled (`-qj`), unique prefixes of long names, options anywhere among
 * the operands, and `--` to end them. */
typedef struct pl_cli_opt {
    const char *name; /* long name without "--" */
    int short_name;   /* 'b' for -b, 0: long only */
    const char *arg;  /* the value's placeholder ("N", "FILE"), NULL: a flag */
    /* The values for completion, '|' separated ("auto|host|gpu"), or NULL: a file name when arg
     * names a FILE, PATH or DIR, else free text. */
    const char *values;
    const char *help; /* one paragraph: --help wraps it, the man page fills it */
    int id; /* what pl_cli_next returns for it: 256 or more (clear of short option letters), unique
             * in the table */
} pl_cli_opt;

typedef struct pl_cmd {
    const char *name;
    const char *usage;      /* "pipectl plan [--dot] FILE" */
    const char *summary;    /* one line */
    const pl_cli_opt *opts; /* {NULL}-terminated; NULL: no options (--help only) */
    const char *notes;      /* after the options (environment, signals); "" or NULL: none */
    const char *operands;   /* what the operands are, for completion: "FILE", "FILE...",
                             * "COMMAND" (a command name), "" (none) */
    int (*fn)(int argc, char **argv); /* argv[0] is the command name; returns the exit code */
    bool hidden;                      /* not listed (pipectl __complete, __man) */
} pl_cmd;

extern const pl_cmd pl_cmds[];

/* One environment variable pipectl reads. The table (pl_cli.c) is the only list: --help prints
 * the entries of its command, docs/cli.md and the man page all of them. */
typedef struct pl_cli_env {
    const char *name;     /* "PIPECTL_NVTX" */
    const char *value;    /* what to set it to, as help shows it: "0", "N", "sm_NN" */
    const char *commands; /* the commands it matters to, space-separated: "run check" */
    const char *help;     /* one paragraph */
} pl_cli_env;

extern const pl_cli_env pl_cli_envs[]; /* {NULL}-terminated */
/* Whether `e` matters to `cmd` (its name is in e->commands). */
bool pl_cli_env_for(const pl_cli_env *e, const pl_cmd *cmd);
/* "environment:" and cmd's variables, as --help shows them; nothing when it has none. */
void pl_cli_print_environ(const pl_cmd *cmd, FILE *out);
/* Exact name or unique prefix. Unknown: the message suggests the nearest command ("did you mean
 * 'check'?") when one is close. err may be NULL. */
const pl_cmd *pl_cmd_find(const char *name, pl_error *err);
void pl_cmd_usage(const pl_cmd *cmd, FILE *out);
/* The option lines of --help ("  -b, --batches N        batches to run"). */
void pl_cli_print_opts(const pl_cmd *cmd, FILE *out);
/* Prints err->msg to stderr and returns the exit code of err->status. */
int pl_cli_fail(const pl_error *err);
/* `--arch`: "sm_90" or "90" -> sets PIPECTL_ARCH (which user kernels are checked for) and returns
 * 90; 0 when `v` is not an SM version. */
int pl_cli_set_arch(const char *v);
/* Prints every stage's notes (compiler warnings; with `verbose`, compile and cache lines) to
 * stderr: the library never prints. */
struct pl_spec;
void pl_cli_print_notes(const struct pl_spec *spec, bool verbose);
/* check's and plan's memory warnings into `diags`: the persistent buffers against the machine's
 * memory, and the persistent device buffers against the GPU's where a GPU is present and they
 * take at least 1 GiB (asking the GPU starts the CUDA runtime: not for every small pipeline). */
struct pl_diags;
void pl_cli_check_memory(const struct pl_spec *spec, struct pl_diags *diags);

enum { PL_CLI_MAX_OPTS = 40 }; /* options of one command */

/* Parsing one command's arguments with getopt_long, from its option table. */
typedef struct pl_cli_args {
    const pl_cmd *cmd;
    int argc;
    char **argv;     /* permuted in place: operands end up at argv[optind..argc) */
    char **operands; /* after pl_cli_next returned 0: the operands */
    int n_operands;
    int rc; /* after pl_cli_next returned -1: the exit code (0 after --help) */
    struct option longopts[PL_CLI_MAX_OPTS + 2]; /* built from the table, and --help */
    char shortopts[3 * PL_CLI_MAX_OPTS + 4];
} pl_cli_args;

/* Starts parsing argv (argv[0] is the command name). */
void pl_cli_args_init(pl_cli_args *a, const pl_cmd *cmd, int argc, char **argv);
/* The next option: its id (> 0) and value in *val (NULL for a flag); 0 when the options are done
 * (a->operands is set); -1 after --help (usage printed, rc 0) or a usage error (message printed,
 * rc 2). */
int pl_cli_next(pl_cli_args *a, const char **val);
/* A usage error of this command: "error: <fmt...>; see 'pipectl CMD --help'" on stderr; returns 2.
 */
int pl_cli_usage_error(const pl_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The value of option `id` (of cmd's table) as a whole number lo..hi; else a usage error naming
 * the option ("--batches needs a whole number from 1 to 64, got 'x'"). Returns 0 or 2. */
int pl_cli_int(const pl_cmd *cmd, int id, const char *val, int64_t lo, int64_t hi, int64_t *out);
/* --depth N|auto: 1..PL_MAX_DEPTH, or PL_DEPTH_AUTO for "auto"; usage error (2) otherwise. */
int pl_cli_depth(const pl_cmd *cmd, int id, const char *val, int64_t *out);
/* --graphs auto|stage|segment|none (the option's values in that order) into run's use_graphs
 * and graph_mode; 2 after a usage error, else 0. */
struct pl_run_cfg;
int pl_cli_graphs(const pl_cmd *cmd, int id, const char *val, struct pl_run_cfg *run);
/* The help text of --graphs, shared by run, capture and replay. */
#define PL_CLI_GRAPHS_HELP                                                                         \
    "gpu: auto (default: stage when a copy moves >= 1 MiB a batch, else segment), stage (one "     \
    "CUDA Graph per slot and compute stage; each copy a plain call on its engine's one stream, "   \
    "so an upload never queues behind a download), segment (one graph per slot and segment, "      \
    "copies included) or none (plain stream launches, as --no-graph)"
/* The value of option `id` as the index of one of the '|'-separated words of its table entry's
 * `values` (so the accepted words, the help and the completions are one list); else a usage
 * error ("--executor must be auto, host or gpu, got 'cpu'") and -1. */
int pl_cli_choice(const pl_cmd *cmd, int id, const char *val);

/* --set, --out-dir and --confine: what the command line changes in the pipeline as it loads
 * (pl_load_opts), shared by check, plan, run and capture. Each command's table has its own entries
 * (their help differs) with these ids. */
enum { PL_CLI_O_SET = 1000, PL_CLI_O_OUT_DIR, PL_CLI_O_CONFINE };
enum { PL_CLI_MAX_SETS = 64 }; /* --set options of one command line */
#define PL_CLI_SET_HELP                                                                            \
    "set KEY of the pipeline to VALUE before it is checked, as if the file said so (repeatable; "  \
    "the last one for a key wins): run.batches=4, STAGE.KEY (forward.weights=/models/gpt2), "      \
    "buffers.NAME.KEY (buffers.x.shape=[8,512]); VALUE is YAML (docs/pipeline-yaml.md, \"Setting " \
    "keys from the command line\")"
typedef struct pl_cli_load {
    pl_load_opts opts; /* opts.sets points at sets */
    const char *sets[PL_CLI_MAX_SETS];
} pl_cli_load;
/* Takes option `id` with value `val` into l: 0 when it is one of the three, 2 after a usage error
 * (printed: a --set that is not KEY=VALUE, too many of them), -1 when `id` is another option. */
int pl_cli_load_arg(const pl_cmd *cmd, int id, const char *val, pl_cli_load *l);
/* --out-dir before a run writes into it: made with its parents (mkdir -p); PL_EIO naming it when
 * that fails or it is not a folder. */
pl_status pl_cli_make_dir(const char *dir, pl_error *err);

/* The generated documents (pl_cli_gen.c), all from pl_cmds and the option tables. */
void pl_cli_help_markdown(FILE *out); /* docs/cli.md */
void pl_cli_man(FILE *out);           /* pipectl.1 (roff, man(7) macros) */
void pl_cli_complete_bash(FILE *out); /* share/bash-completion/completions/pipectl */
void pl_cli_complete_zsh(FILE *out);  /* share/zsh/site-functions/_pipectl */

extern const pl_cli_opt pl_cli_run_opts[], pl_cli_check_opts[], pl_cli_capture_opts[],
    pl_cli_diff_opts[], pl_cli_replay_opts[], pl_cli_plan_opts[], pl_cli_bench_opts[],
    pl_cli_index_opts[], pl_cli_help_opts[], pl_cli_merge_opts[];

int pl_cmd_check(int argc, char **argv);
int pl_cmd_plan(int argc, char **argv);
int pl_cmd_merge(int argc, char **argv);
int pl_cmd_run(int argc, char **argv);
int pl_cmd_doctor(int argc, char **argv);
int pl_cmd_bench(int argc, char **argv);
int pl_cmd_index(int argc, char **argv);
int pl_cmd_version(int argc, char **argv);
int pl_cmd_schema(int argc, char **argv);
int pl_cmd_help(int argc, char **argv);
int pl_cmd_gen(int argc, char **argv); /* __complete bash|zsh, __man */
int pl_cmd_capture(int argc, char **argv);
int pl_cmd_replay(int argc, char **argv);
int pl_cmd_diff(int argc, char **argv);
extern const pl_cli_opt pl_cli_tokenize_opts[];
int pl_cmd_tokenize(int argc, char **argv);

/* Tables shared by `replay` and `diff` (cmd_replay.c): stage times of two records (la, lb name
 * them), and what changed in the environment. */
struct pl_compare;
void pl_cli_print_stages(FILE *out, const struct pl_compare *c, const char *la, const char *lb);
void pl_cli_print_env(FILE *out, const struct pl_compare *c, const char *la, const char *lb);

/* `pipectl salvage` (cmd_salvage.c). */
extern const pl_cli_opt pl_cli_salvage_opts[];
int pl_cmd_salvage(int argc, char **argv);

#endif
