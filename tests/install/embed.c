/* embed: a program that embeds pipectl through its public API alone (pipectl.h, -lpipectl), as a
 * user's would. Loads a pipeline file (which checks it), compiles the plan, runs it on the host
 * executor (or the one named), and prints each output's checksum as `pipectl run` does. On an
 * error prints the message, and where it happened, to stderr and exits as `pipectl` would (2 bad
 * input, 1 runtime failure).
 *
 *   cc -std=c11 embed.c $(pkg-config --cflags --libs pipectl) -o embed
 *   ./embed pipelines/quickstart.yaml [host|auto|gpu] */
#include <pipectl.h>
#include <stdio.h>
#include <string.h>

/* Prints the handle's error record and returns the exit code for it. */
static int fail(const pipectl *h)
{
    fprintf(stderr, "%s\n", pipectl_errmsg(h));
    if (pipectl_errfile(h))
        fprintf(stderr, "  (%s at %s:%d:%d)\n", pipectl_errname(pipectl_errcode(h)),
                pipectl_errfile(h), pipectl_errline(h), pipectl_errcol(h));
    else if (pipectl_errstage(h))
        fprintf(stderr, "  (%s in stage '%s', batch %lld)\n", pipectl_errname(pipectl_errcode(h)),
                pipectl_errstage(h), pipectl_errbatch(h));
    return pipectl_exit_code(pipectl_errcode(h));
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s PIPELINE [host|auto|gpu]   (pipectl %s)\n", argv[0],
                pipectl_version());
        return 2;
    }
    int executor = PIPECTL_EXECUTOR_HOST;
    if (argc == 3 && strcmp(argv[2], "auto") == 0) executor = PIPECTL_EXECUTOR_AUTO;
    if (argc == 3 && strcmp(argv[2], "gpu") == 0) executor = PIPECTL_EXECUTOR_GPU;

    pipectl *h = NULL;
    if (pipectl_open(&h) != PIPECTL_OK) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    pipectl_pipeline *p = NULL;
    pipectl_plan *plan = NULL;
    pipectl_result *r = NULL;
    int rc = 0;
    if (pipectl_load(h, argv[1], &p) != PIPECTL_OK ||
        pipectl_compile(h, p, 0, 0, &plan) != PIPECTL_OK) {
        rc = fail(h);
        goto out;
    }
    /* After a failed run r still says what completed (NULL when nothing ran). */
    int st = pipectl_run(h, plan, executor, 0, &r);
    if (r) {
        if (pipectl_result_note(r)[0]) fprintf(stderr, "%s\n", pipectl_result_note(r));
        printf("pipeline '%s': %lld of %lld batches, executor %s\n", pipectl_pipeline_name(p),
               pipectl_result_batches(r), pipectl_plan_batches(plan), pipectl_result_executor(r));
    }
    for (int i = 0; i < pipectl_result_outputs(r); i++) {
        const char *path = pipectl_output_path(r, i);
        printf("  %s: %lld batches %s %s, checksum 0x%016llx\n", pipectl_output_stage(r, i),
               pipectl_output_batches(r, i), path ? "written to" : "checksummed",
               path ? path : "(no file)", pipectl_output_checksum(r, i));
    }
    if (st != PIPECTL_OK) rc = fail(h);
out:
    pipectl_result_free(r);
    pipectl_plan_free(plan);
    pipectl_pipeline_free(p);
    pipectl_close(h);
    return rc;
}
