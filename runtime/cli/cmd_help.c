/* cmd_help: `pipectl help [COMMAND | kinds | KIND | loop]`: the command list and usages from the
 * command table (runtime/cli/pl_cli.c), the stage kinds, their keys and documented values (the
 * kernel's ops) from the kind table, a loop's keys from the loop section's table, as
 * gst-inspect-1.0 lists elements and their properties; `--markdown` writes docs/cli.md. */
#include <stdio.h>
#include <string.h>

#include "pl_cli.h"
#include "pl_schema.h"

const pl_cli_opt pl_cli_help_opts[] = {
    {"markdown", 0, NULL, NULL, "print every command's help as Markdown (docs/cli.md)", 256},
    {0},
};

static void pl__help_kinds(FILE *out)
{
    int n;
    const pl_kind *const *kinds = pl_kinds(&n);
    fprintf(out, "Stage kinds ('pipectl help KIND' lists the keys of one):\n\n");
    for (int i = 0; i < n; i++)
        fprintf(out, "  %-10s %-8s %s\n", kinds[i]->name, pl_engine_name(kinds[i]->engine),
                kinds[i]->doc);
    fprintf(out, "\nEvery stage also has the keys:");
    for (const pl_key *k = pl_common_stage_keys; k->name; k++)
        fprintf(out, "%s %s", k == pl_common_stage_keys ? "" : ",", k->name);
    fprintf(out, " (docs/pipeline-yaml.md).\n");
    fprintf(out, "A loop repeats stages within a batch: 'pipectl help loop'.\n");
}

static void pl__help_key(FILE *out, const pl_key *k)
{
    char type[160];
    if (k->type == PL_KEY_ENUM) {
        char list[128];
        snprintf(type, sizeof type, "%s", pl_schema_join(k->values, list, sizeof list));
    } else {
        snprintf(type, sizeof type, "%s", pl_key_type_name(k->type));
    }
    fprintf(out, "  %-14s %-22s %-12s %s\n", k->name, type, k->def ? k->def : "-", k->doc);
}

static void pl__help_kind(FILE *out, const pl_kind *kind)
{
    static const char *const engines[PL_ENGINE_COUNT] = {
        "host (a CPU worker thread)", "h2d (the host-to-device copy engine)", "compute (the SMs)",
        "d2h (the device-to-host copy engine)"};
    fprintf(out, "%s: %s\n\n", kind->name, kind->doc);
    fprintf(out, "  engine:   %s\n",
            (unsigned)kind->engine < PL_ENGINE_COUNT ? engines[kind->engine]
                                                     : pl_engine_name(kind->engine));
    fprintf(out, "  ordered:  %s\n\n", kind->ordered ? "yes (batches run in batch order)" : "no");
    fprintf(out, "Keys:\n  %-14s %-22s %-12s %s\n", "key", "type", "default", "meaning");
    for (const pl_key *k = kind->keys; k->name; k++)
        pl__help_key(out, k);
    if (kind->values) {
        fprintf(out, "\nValues of '%s':\n", kind->values_key);
        for (const pl_key_value *v = kind->values; v->name; v++) {
            char usage[160];
            fprintf(out, "  %-14s %-32s %s\n", v->name, pl_key_value_usage(v, usage, sizeof usage),
                    v->doc);
        }
    }
    fprintf(out, "\nCommon keys (every stage):\n");
    for (const pl_key *k = pl_common_stage_keys; k->name; k++)
        pl__help_key(out, k);
}

/* `pipectl help loop`: a loop's keys, from the loop section's table (parser/pl_schema.c). */
static void pl__help_loop(FILE *out)
{
    fprintf(out, "loop: %s\n\n", pl_schema_loop.doc);
    fprintf(out, "  written:  - name: decode\n"
                 "              loop: {max: 255, while: active_dev, index: step_dev}\n"
                 "              stages: [{name: step, kind: kernel, ...}, ...]\n"
                 "  keys:     name, loop, stages (the body: host stages or device stages), after\n"
                 "  runs:     index = iterations done; stop at count or max, or when while == 0;\n"
                 "            else the body's stages one after another, and again\n"
                 "  gpu:      run.loop: device (a conditional WHILE node in the slot's graph) or\n"
                 "            host (the body's graph launched once per iteration)\n\n");
    fprintf(out, "Keys of 'loop':\n  %-14s %-22s %-12s %s\n", "key", "type", "default", "meaning");
    for (const pl_field *f = pl_schema_loop.fields; f->key.name; f++)
        pl__help_key(out, &f->key);
    fprintf(out, "\nKeys of 'loop.stream' (%s):\n  %-14s %-22s %-12s %s\n",
            pl_schema_loop_stream.doc, "key", "type", "default", "meaning");
    for (const pl_field *f = pl_schema_loop_stream.fields; f->key.name; f++)
        pl__help_key(out, &f->key);
    fprintf(out, "\nMore: docs/pipeline-yaml.md, \"Loops\" and \"loop.stream\".\n");
}

int pl_cmd_help(int argc, char **argv)
{
    const pl_cmd *self = pl_cmd_find("help", NULL);
    pl_cli_args a;
    pl_cli_args_init(&a, self, argc, argv);
    const char *v;
    int id;
    bool markdown = false;
    while ((id = pl_cli_next(&a, &v)) > 0)
        markdown = true; /* --markdown, the only option */
    if (id < 0) return a.rc;
    if (markdown) {
        /* docs/cli.md is this output (a test compares them), so the docs cannot drift. */
        pl_cli_help_markdown(stdout);
        return 0;
    }
    if (a.n_operands > 1)
        return pl_cli_usage_error(self, "'pipectl help' takes one name, got %d", a.n_operands);
    if (a.n_operands == 1) {
        const char *what = a.operands[0];
        if (strcmp(what, "kinds") == 0) {
            pl__help_kinds(stdout);
            return 0;
        }
        if (strcmp(what, "loop") == 0) {
            pl__help_loop(stdout);
            return 0;
        }
        const pl_cmd *c = NULL;
        for (const pl_cmd *e = pl_cmds; e->name && !c; e++)
            if (strcmp(e->name, what) == 0) c = e;
        const pl_kind *kind = c ? NULL : pl_kind_find(what);
        if (kind) {
            pl__help_kind(stdout, kind);
            return 0;
        }
        if (!c) c = pl_cmd_find(what, NULL);
        if (c) {
            pl_cmd_usage(c, stdout);
            return 0;
        }
        /* Neither: the closest command or kind name, if one is close. */
        const char *cands[128];
        int n = 0, n_kinds;
        for (const pl_cmd *e = pl_cmds; e->name && n < 64; e++)
            if (!e->hidden) cands[n++] = e->name;
        const char *const *kinds = pl_kind_names(&n_kinds);
        for (int i = 0; i < n_kinds && n < 127; i++)
            cands[n++] = kinds[i];
        cands[n++] = "kinds";
        cands[n++] = "loop";
        const char *best = pl_closest(what, cands, n);
        if (best)
            fprintf(stderr,
                    "error: unknown command or stage kind '%s' (did you mean '%s'?); see "
                    "'pipectl help' and 'pipectl help kinds'\n",
                    what, best);
        else
            fprintf(stderr,
                    "error: unknown command or stage kind '%s'; see 'pipectl help' and 'pipectl "
                    "help kinds'\n",
                    what);
        return 2;
    }
    printf("pipectl: declarative GPU pipelines that keep the copy engines and the SMs busy.\n\n"
           "usage: pipectl COMMAND [options] [FILE]\n       pipectl --version | --help\n\n"
           "commands:\n");
    for (const pl_cmd *c = pl_cmds; c->name; c++)
        if (!c->hidden) printf("  %-10s %s\n", c->name, c->summary);
    printf(
        "\n'pipectl help COMMAND' or 'pipectl COMMAND --help' describes one; 'pipectl help "
        "kinds'\nlists the stage kinds and 'pipectl help KIND' the keys of one; 'pipectl help "
        "loop'\nthe keys of a loop.\n"
        "Exit codes: 0 success, 1 runtime failure, 2 bad input, 128 + N stopped by signal N (130\n"
        "Ctrl-C, 143 SIGTERM, 129 SIGHUP).\n");
    return 0;
}
