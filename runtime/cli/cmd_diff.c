/* cmd_diff: `pipectl diff [--json] A B`: two bundles side by side: the pipeline and plan texts,
 * the environment, checksum agreement per sink, and the time per stage (--json: one object, with
 * schema_version, docs/bundles.md). Exit 0 when every sink agrees batch for batch, 1 when one
 * differs, 2 for a bad bundle. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pl_bundle.h"
#include "pl_cli.h"
#include "pl_json.h"

/* The lines of the bundle's file rel (owned by *buf), at most 4000; read through
 * pl_bundle_file_read, so a link or a FIFO there is refused (PL_EINPUT in *st). -1 when it cannot
 * be read (missing). */
static int pl__lines(const pl_bundle *b, const char *rel, char **buf, char ***lines, pl_status *st,
                     pl_error *err)
{
    *buf = NULL;
    *lines = NULL;
    size_t len = 0;
    pl_error re;
    pl_error_clear(&re);
    if (pl_bundle_file_read(b, rel, (size_t)64 << 20, buf, &len, NULL, &re) != PL_OK) {
        if (re.status == PL_EINPUT) {
            *err = re;
            *st = PL_EINPUT;
        }
        return -1;
    }
    int nl = 0, capl = 64;
    *lines = malloc((size_t)capl * sizeof **lines);
    for (char *p = *buf; *lines && *p && nl < 4000;) {
        if (nl == capl) {
            capl *= 2;
            char **nn = realloc(*lines, (size_t)capl * sizeof **lines);
            if (!nn) break;
            *lines = nn;
        }
        (*lines)[nl++] = p;
        char *e = strchr(p, '\n');
        if (!e) break;
        *e = '\0';
        p = e + 1;
    }
    return nl;
}

/* A line diff (longest common subsequence) of two small text files, rel_a of bundle a and rel_b of
 * b, "-" lines of A and "+" of B, comment lines (#) ignored. Prints nothing when they agree;
 * returns whether they differ. A file refused (a link, a FIFO) sets *st to PL_EINPUT and err. */
static bool pl__text_diff(const char *what, const pl_bundle *a, const char *rel_a,
                          const pl_bundle *b, const char *rel_b, bool quiet, pl_status *st,
                          pl_error *err)
{
    char *ba, *bb, **la, **lb;
    char pa[4096], pb[4096];
    pl_bundle_path(a->dir, rel_a, pa, sizeof pa);
    pl_bundle_path(b->dir, rel_b, pb, sizeof pb);
    int na = pl__lines(a, rel_a, &ba, &la, st, err), nb = pl__lines(b, rel_b, &bb, &lb, st, err);
    bool differ = false;
    if (*st != PL_OK) goto done;
    if (na < 0 || nb < 0) {
        if (!quiet) printf("\n%s: %s is missing\n", what, na < 0 ? pa : pb);
        differ = true;
        goto done;
    }
    int *t = calloc((size_t)(na + 1) * (size_t)(nb + 1), sizeof *t);
    if (!t) goto done;
#define T(i, j) t[(size_t)(i) * (size_t)(nb + 1) + (size_t)(j)]
    for (int i = na - 1; i >= 0; i--)
        for (int j = nb - 1; j >= 0; j--)
            T(i, j) = strcmp(la[i], lb[j]) == 0   ? T(i + 1, j + 1) + 1
                      : T(i + 1, j) > T(i, j + 1) ? T(i + 1, j)
                                                  : T(i, j + 1);
    int i = 0, j = 0;
    while (i < na || j < nb) {
        if (i < na && j < nb && strcmp(la[i], lb[j]) == 0) {
            i++, j++;
        } else if (j >= nb || (i < na && T(i + 1, j) >= T(i, j + 1))) {
            if (la[i][0] != '#') {
                if (!differ && !quiet) printf("\n%s differs (- %s, + %s):\n", what, pa, pb);
                differ = true;
                if (!quiet) printf("  - %s\n", la[i]);
            }
            i++;
        } else {
            if (lb[j][0] != '#') {
                if (!differ && !quiet) printf("\n%s differs (- %s, + %s):\n", what, pa, pb);
                differ = true;
                if (!quiet) printf("  + %s\n", lb[j]);
            }
            j++;
        }
    }
#undef T
    free(t);
done:
    free(ba);
    free(bb);
    free(la);
    free(lb);
    return differ;
}

enum { PL__O_JSON = 256 };

const pl_cli_opt pl_cli_diff_opts[] = {
    {"json", 'j', NULL, NULL,
     "print the comparison as one JSON object on stdout (docs/bundles.md); a bad bundle prints an "
     "error object (docs/json.md)",
     PL__O_JSON},
    {0},
};

static const char *const pl__verdicts[] = {"match",      "differs", "within_tolerance",
                                           "unverified", "absent",  "unchecked"};

/* --json: what the tables say, for programs. */
static void pl__json(const char *const d[2], const pl_compare *c, bool spec_diff, bool plan_diff)
{
    json_t *o = json_object(), *sinks = json_array(), *stages = json_array(), *env = json_array();
    if (!o || !sinks || !stages || !env) {
        json_decref(o);
        json_decref(sinks);
        json_decref(stages);
        json_decref(env);
        fputs("{\"schema_version\": 1, \"status\": \"ENOMEM\", \"exit_code\": 1}\n", stdout);
        return;
    }
    json_object_set_new(o, "schema_version", json_integer(PL_JSON_SCHEMA_VERSION));
    json_object_set_new(o, "a", pl_json_str(d[0]));
    json_object_set_new(o, "b", pl_json_str(d[1]));
    json_object_set_new(o, "verdict", json_string(c->first_sink >= 0 ? "differs" : "match"));
    json_object_set_new(o, "exit_code", json_integer(c->first_sink >= 0 ? 1 : 0));
    json_object_set_new(o, "pipeline_same", json_boolean(!spec_diff));
    json_object_set_new(o, "plan_same", json_boolean(!plan_diff));
    json_object_set_new(o, "batches_differ", json_integer(c->n_differ));
    for (int i = 0; i < c->n_sinks; i++) {
        const pl_sink_cmp *s = &c->sinks[i];
        bool dif = s->verdict == PL_SINK_DIFFER;
        json_array_append_new(
            sinks, json_pack("{s:o, s:s, s:I, s:I, s:I, s:o, s:o, s:o}", "stage",
                             pl_json_str(s->stage), "verdict", pl__verdicts[s->verdict],
                             "batches_a", (json_int_t)s->batches_a, "batches_b",
                             (json_int_t)s->batches_b, "batches_differ", (json_int_t)s->n_differ,
                             "first_batch", dif ? json_integer(s->first_batch) : json_null(),
                             "checksum_a", dif ? pl_json_hex64(s->first_a) : json_null(),
                             "checksum_b", dif ? pl_json_hex64(s->first_b) : json_null()));
    }
    for (int i = 0; i < c->n_stages; i++) {
        const pl_stage_cmp *s = &c->stages[i];
        json_array_append_new(
            stages,
            json_pack("{s:o, s:o, s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:o, s:b}", "name",
                      pl_json_str(s->name), "engine", pl_json_str(s->engine), "mean_s_a", s->mean_a,
                      "mean_s_b", s->mean_b, "p50_s_a", s->p50_a, "p50_s_b", s->p50_b, "p99_s_a",
                      s->p99_a, "p99_s_b", s->p99_b, "noise",
                      s->noise >= 0 ? json_real(s->noise) : json_null(), "band",
                      s->band >= 0 ? json_real(s->band) : json_null(), "beyond_noise", s->beyond));
    }
    for (int i = 0; i < c->n_env; i++)
        json_array_append_new(env,
                              json_pack("{s:o, s:o, s:o}", "key", pl_json_str(c->env[i].key), "a",
                                        pl_json_str(c->env[i].a), "b", pl_json_str(c->env[i].b)));
    json_object_set_new(o, "sinks", sinks);
    json_object_set_new(o, "stages", stages);
    json_object_set_new(o, "environment_changes", env);
    json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    fputc('\n', stdout);
    json_decref(o);
}

int pl_cmd_diff(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("diff", NULL);
    pl_cli_args args;
    pl_cli_args_init(&args, cmd, argc, argv);
    const char *v;
    int id;
    bool json = false;
    while ((id = pl_cli_next(&args, &v)) > 0)
        if (id == PL__O_JSON) json = true;
    if (id < 0) return args.rc;
    if (args.n_operands > 2)
        return pl_cli_usage_error(cmd, "'pipectl diff' compares two bundles; '%s' is a third",
                                  args.operands[2]);
    if (args.n_operands != 2)
        return pl_cli_usage_error(cmd, "'pipectl diff' needs two bundle folders");
    const char *d[2] = {args.operands[0], args.operands[1]};
    pl_error err;
    pl_error_clear(&err);
    pl_bundle *a = NULL, *b = NULL;
    pl_compare c;
    memset(&c, 0, sizeof c);
    int rc = 0;
    if (pl_bundle_open(d[0], &a, &err) != PL_OK || pl_bundle_open(d[1], &b, &err) != PL_OK ||
        pl_bundle_diff(a, b, &c, &err) != PL_OK) {
        if (json) pl_json_print_error(stdout, "diff", &err);
        rc = pl_cli_fail(&err);
        goto out;
    }
    if (!json) printf("diff of bundles A = %s and B = %s\n", d[0], d[1]);
    const char *fa = pl_json_str_or(json_object_get(a->manifest, "pipeline"), "file", "");
    const char *fb = pl_json_str_or(json_object_get(b->manifest, "pipeline"), "file", "");
    pl_status st = PL_OK;
    bool spec_diff = pl__text_diff("the pipeline", a, fa, b, fb, json, &st, &err);
    bool plan_diff = pl__text_diff("the plan", a, "plan.txt", b, "plan.txt", json, &st, &err);
    if (st != PL_OK) {
        if (json) pl_json_print_error(stdout, "diff", &err);
        rc = pl_cli_fail(&err);
        goto out;
    }
    if (json) {
        pl__json(d, &c, spec_diff, plan_diff);
        rc = c.first_sink >= 0 ? 1 : 0;
        goto out;
    }
    if (!spec_diff && !plan_diff) printf("\npipeline and plan: the same\n");
    printf("\noutputs:\n");
    for (int i = 0; i < c.n_sinks; i++) {
        const pl_sink_cmp *s = &c.sinks[i];
        printf("  %-20s ", s->stage);
        if (s->verdict == PL_SINK_ABSENT)
            printf("only in %s\n", s->batches_a ? "A" : "B");
        else if (s->verdict == PL_SINK_UNCHECKED)
            printf("not checksummed (checksum: false): not compared\n");
        else if (s->verdict == PL_SINK_MATCH)
            printf("%lld batches, every checksum agrees\n", (long long)s->batches_a);
        else
            printf("DIFFERS in %lld of %lld batches (first: batch %lld, A 0x%016" PRIx64
                   ", B 0x%016" PRIx64 ")\n",
                   (long long)s->n_differ,
                   (long long)(s->batches_a > s->batches_b ? s->batches_a : s->batches_b),
                   (long long)s->first_batch, s->first_a, s->first_b);
    }
    if (c.first_sink >= 0) rc = 1;
    pl_cli_print_stages(stdout, &c, "A", "B");
    pl_cli_print_env(stdout, &c, "A", "B");
out:
    pl_compare_fini(&c);
    pl_bundle_free(a);
    pl_bundle_free(b);
    return rc;
}
