/* pl_trace: Chrome trace JSON ("traceEvents", complete "X" events in microseconds) of a run. */
#include "pl_trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Stage and stream names are identifiers (checked), the pipeline name may be anything. */
static void pl__json_text(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

pl_status pl_trace_write(const char *path, const pl_plan *plan, const pl_run_result *res,
                         pl_error *err)
{
    const pl_spec *spec = plan->spec;
    size_t n = strlen(path);
    char *tmp = malloc(n + sizeof ".partial");
    if (!tmp) return pl_error_set(err, PL_ENOMEM, "error: out of memory writing the trace");
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".partial", sizeof ".partial");
    FILE *f = fopen(tmp, "w");
    if (!f) {
        pl_error_set(err, PL_EIO, "error: cannot write the trace '%s': %s", tmp, strerror(errno));
        free(tmp);
        return PL_EIO;
    }
    fprintf(f, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n");
    fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": ");
    char title[256];
    snprintf(title, sizeof title, "pipectl %s (%s%s, depth %d)", spec->name,
             res->executor ? res->executor : "?", res->graphs ? ", CUDA Graphs" : "", plan->depth);
    pl__json_text(f, title);
    fprintf(f, "}}");
    for (int k = 0; k < plan->n_streams; k++) {
        fprintf(f,
                ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
                "\"args\": {\"name\": \"%s (%s)\"}}",
                k, plan->streams[k].name, pl_engine_name(plan->streams[k].engine));
        fprintf(f,
                ",\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
                "\"args\": {\"sort_index\": %d}}",
                k, k);
    }
    for (int64_t b = 0; res->spans && b < res->batches_done; b++)
        for (int s = 0; s < plan->n_stages; s++) {
            const pl_span *sp = &res->spans[b * res->n_stages + s];
            if (sp->start_ns == 0 && sp->end_ns == 0) continue; /* not timed */
            const pl_plan_stage *ps = &plan->stages[s];
            fprintf(f,
                    ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 1, "
                    "\"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"batch\": %lld, "
                    "\"slot\": %lld}}",
                    spec->stages[s].name, pl_engine_name(ps->engine), ps->stream,
                    (double)sp->start_ns / 1000.0, (double)(sp->end_ns - sp->start_ns) / 1000.0,
                    (long long)b, (long long)(b % plan->depth));
        }
    fprintf(f, "\n]}\n");
    bool ok = !ferror(f);
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        pl_error_set(err, PL_EIO, "error: cannot write the trace '%s': %s", path, strerror(errno));
        remove(tmp);
        free(tmp);
        return PL_EIO;
    }
    free(tmp);
    return PL_OK;
}
