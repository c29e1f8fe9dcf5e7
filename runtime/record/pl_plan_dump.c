/* pl_plan_dump: `pipectl plan`'s listing and its Graphviz form. */
#include "pl_plan_dump.h"

#include <inttypes.h>
#include <string.h>

#include "pl_depth.h"

/* "12.0 MiB" */
static const char *pl__human(uint64_t bytes, char *buf, size_t n)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) {
        snprintf(buf, n, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, n, "%.1f %s", v, units[u]);
    return buf;
}

static const char *pl__kind_name(const pl_spec *spec, int s)
{
    const pl_kind *k = spec->stages[s].kind;
    return k ? k->name : "?";
}

/* How the GPU executor runs loop lp (the host executor runs every loop on a host worker). */
static const char *pl__loop_how(const pl_plan_loop *lp)
{
    if (lp->graph)
        return "a conditional WHILE node in the slot's graph, no host round trip per iteration";
    if (lp->device)
        return "a host worker launches the body's graph once per iteration (run.loop: host)";
    return "a host worker runs the body";
}

static void pl__dump_loops(const pl_plan *plan, FILE *out)
{
    const pl_spec *spec = plan->spec;
    if (!plan->n_loops) return;
    fprintf(out, "\nloops (the body's stages run one after another, iteration after iteration, "
                 "inside the loop stage):\n");
    for (int i = 0; i < plan->n_loops; i++) {
        const pl_plan_loop *lp = &plan->loops[i];
        const pl_stage *L = &spec->stages[lp->stage];
        char desc[1024];
        L->kind->describe(spec, L, desc, sizeof desc);
        fprintf(out, "  %s (%s): %s\n", L->name, plan->streams[plan->stages[lp->stage].stream].name,
                desc);
        fprintf(out, "    body:");
        for (int j = 0; j < lp->n_body; j++) {
            const pl_stage *b = &spec->stages[lp->body[j]];
            fprintf(out, "%s %s (%s, %s)", j ? "," : "", b->name, b->kind->name,
                    pl_engine_name(plan->stages[lp->body[j]].engine));
        }
        fprintf(out, "\n    gpu: %s\n", pl__loop_how(lp));
    }
}

void pl_plan_dump(const pl_plan *plan, FILE *out)
{
    const pl_spec *spec = plan->spec;
    char h1[32], h2[32];
    int w = 4;
    for (int s = 0; s < plan->n_stages; s++) {
        int len = (int)strlen(spec->stages[s].name);
        if (len > w) w = len;
    }
    fprintf(out, "plan for pipeline '%s': %d stages, %d streams, %d events, %d cross-batch deps\n",
            spec->name, plan->n_stages, plan->n_streams, plan->n_events, plan->n_xdeps);
    if (plan->depth_auto)
        fprintf(out,
                "depth auto: the first %" PRId64 " batches at depth %d, then the smallest depth "
                "that reaches the bound, at most %d (%s); %" PRId64 " batches",
                pl_depth_calib_batches(plan), plan->depth, plan->depth_cap, plan->cap_why,
                plan->batches);
    else
        fprintf(out, "depth %d (slots in flight), %" PRId64 " batches", plan->depth, plan->batches);
    if (spec->run.batches_all && spec->run.batches_from >= 0 && plan->batches == spec->run.batches)
        fprintf(out, " (batches: all: what source '%s' holds, counted now; a run counts again)",
                spec->stages[spec->run.batches_from].name);
    fputc('\n', out);

    fprintf(out, "\nstreams (stages run in this order on each stream, batch after batch):\n");
    for (int i = 0; i < plan->n_streams; i++) {
        const pl_stream *s = &plan->streams[i];
        fprintf(out, "  %s (%s engine): %d stage%s", s->name, pl_engine_name(s->engine),
                s->n_stages, s->n_stages == 1 ? "" : "s");
        if (s->parallel > 1) fprintf(out, ", up to %d batches at once", s->parallel);
        fputc('\n', out);
        for (int j = 0; j < s->n_stages; j++) {
            const pl_plan_stage *ps = &plan->stages[s->stages[j]];
            if (ps->n_waits == 0) {
                fprintf(out, "    %-*s  %-6s  %s\n", w, spec->stages[ps->stage].name,
                        pl__kind_name(spec, ps->stage), pl_engine_name(ps->engine));
                continue;
            }
            fprintf(out, "    %-*s  %-6s  %-7s", w, spec->stages[ps->stage].name,
                    pl__kind_name(spec, ps->stage), pl_engine_name(ps->engine));
            for (int k = 0; k < ps->n_waits; k++) {
                const pl_event *ev = &plan->events[ps->waits[k]];
                fprintf(out, "%s e%d(%s", k ? "," : "  waits on", ps->waits[k],
                        spec->stages[ev->src].name);
                char cs[PL_MAX_CHUNKS * 21];
                if (pl_plan_chunk_linked(plan, ps->stage, ev->src))
                    fprintf(out, ", chunk by chunk: %s",
                            pl_stage_chunks_str(&spec->stages[ps->stage], cs, sizeof cs));
                fputc(')', out);
            }
            fputc('\n', out);
        }
    }

    fprintf(out, "\nevents (recorded after a stage, waited on by stages of other streams):\n");
    if (!plan->n_events) fprintf(out, "  none\n");
    for (int i = 0; i < plan->n_events; i++) {
        const pl_event *ev = &plan->events[i];
        fprintf(out, "  e%d after %s (%s):", i, spec->stages[ev->src].name,
                plan->streams[plan->stages[ev->src].stream].name);
        for (int k = 0; k < ev->n_dsts; k++)
            fprintf(out, "%s %s (%s)", k ? "," : " waited on by", spec->stages[ev->dsts[k]].name,
                    plan->streams[plan->stages[ev->dsts[k]].stream].name);
        fputc('\n', out);
    }

    fprintf(out, "\ncross-batch deps (stage of batch i+d waits for stage of batch i):\n");
    if (!plan->n_xdeps) fprintf(out, "  none\n");
    for (int i = 0; i < plan->n_xdeps; i++) {
        const pl_xdep *x = &plan->xdeps[i];
        fprintf(out, "  %s waits for %s, d=%d: ", spec->stages[x->to].name,
                spec->stages[x->from].name, x->distance);
        switch (x->why) {
        case PL_XDEP_SLOT_REUSE:
            fprintf(out, "slot reuse of '%s'\n", spec->buffers[x->buffer].name);
            break;
        case PL_XDEP_PERSISTENT:
            fprintf(out, "persistent '%s' is written every batch\n", spec->buffers[x->buffer].name);
            break;
        case PL_XDEP_ORDERED:
            fprintf(out, "runs in batch order\n");
            break;
        }
    }

    fprintf(out,
            "\nsegments (device stages between host stages; one graph per segment and slot):\n");
    if (!plan->n_segments) fprintf(out, "  none (host stages only)\n");
    for (int k = -1; k < plan->n_segments; k++) {
        if (k >= 0) {
            const pl_segment *sg = &plan->segments[k];
            fprintf(out, "  s%d:", k);
            for (int i = 0; i < sg->n_stages; i++)
                fprintf(out, "%s %s", i ? "," : "", spec->stages[sg->stages[i]].name);
            for (int i = 0; i < sg->n_host_deps; i++)
                fprintf(out, "%s %s", i ? "," : "; launched after",
                        spec->stages[sg->host_deps[i]].name);
            int nobs = 0;
            for (int i = 0; i < sg->n_stages; i++)
                if (plan->stages[sg->stages[i]].observe)
                    fprintf(out, "%s %s", nobs++ ? "," : "; host sees",
                            spec->stages[sg->stages[i]].name);
            fputc('\n', out);
        }
        int nh = 0;
        for (int i = 0; i < plan->n_stages; i++) {
            int v = plan->order[i];
            if (plan->stages[v].segment >= 0 || plan->stages[v].after != k) continue;
            if (plan->stages[v].body) continue; /* in its loop (listed under loops) */
            if (!nh++) fprintf(out, "  host, %s:", k < 0 ? "before any device work" : "then");
            fprintf(out, "%s %s", nh > 1 ? "," : "", spec->stages[v].name);
        }
        if (nh) fputc('\n', out);
    }

    pl__dump_loops(plan, out);

    uint64_t d = (uint64_t)plan->depth;
    fprintf(out, "\nmemory:\n");
    fprintf(out, "  per slot:    host %s (%" PRIu64 " bytes), device %s (%" PRIu64 " bytes)\n",
            pl__human(plan->host_per_slot, h1, sizeof h1), plan->host_per_slot,
            pl__human(plan->device_per_slot, h2, sizeof h2), plan->device_per_slot);
    fprintf(out, "  persistent:  host %s (%" PRIu64 " bytes), device %s (%" PRIu64 " bytes)\n",
            pl__human(plan->host_persistent, h1, sizeof h1), plan->host_persistent,
            pl__human(plan->device_persistent, h2, sizeof h2), plan->device_persistent);
    if (plan->stage_per_slot || plan->stage_persistent)
        fprintf(out,
                "  of which stages allocate (model weights, activations): device %s (%" PRIu64
                " bytes) per slot, %s (%" PRIu64 " bytes) persistent\n",
                pl__human(plan->stage_per_slot, h1, sizeof h1), plan->stage_per_slot,
                pl__human(plan->stage_persistent, h2, sizeof h2), plan->stage_persistent);
    uint64_t th = plan->host_per_slot * d + plan->host_persistent;
    uint64_t td = plan->device_per_slot * d + plan->device_persistent;
    fprintf(out,
            "  total:       pinned host %s (%" PRIu64 " bytes), device %s (%" PRIu64
            " bytes) for %d slot%s\n",
            pl__human(th, h1, sizeof h1), th, pl__human(td, h2, sizeof h2), td, plan->depth,
            plan->depth == 1 ? "" : "s");
    if (plan->depth_auto) {
        d = (uint64_t)plan->depth_cap;
        th = plan->host_per_slot * d + plan->host_persistent;
        td = plan->device_per_slot * d + plan->device_persistent;
        fprintf(out,
                "  at most:     pinned host %s (%" PRIu64 " bytes), device %s (%" PRIu64
                " bytes) for %d slot%s\n",
                pl__human(th, h1, sizeof h1), th, pl__human(td, h2, sizeof h2), td, plan->depth_cap,
                plan->depth_cap == 1 ? "" : "s");
    }
    const pl_budget *bg = &spec->run.budget;
    if (bg->set)
        fprintf(out, "  budget:      pinned host %s, device %s (run.memory_budget)\n",
                bg->host_pinned ? pl__human(bg->host_pinned, h1, sizeof h1) : "no limit",
                bg->device ? pl__human(bg->device, h2, sizeof h2) : "no limit");
}

void pl_plan_dump_dot(const pl_plan *plan, FILE *out)
{
    const pl_spec *spec = plan->spec;
    /* Stage names are identifiers (checked); the pipeline's name is free text: escape it. */
    fputs("digraph \"", out);
    for (const char *c = spec->name; c && *c; c++) {
        if (*c == '"' || *c == '\\') fputc('\\', out);
        fputc(*c == '\n' ? ' ' : *c, out);
    }
    fputs("\" {\n", out);
    fprintf(out, "  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\"];\n");
    for (int i = 0; i < plan->n_streams; i++) {
        const pl_stream *s = &plan->streams[i];
        fprintf(out, "  subgraph \"cluster_%s\" {\n    label=\"%s (%s)\";\n", s->name, s->name,
                pl_engine_name(s->engine));
        for (int j = 0; j < s->n_stages; j++) {
            int v = s->stages[j];
            fprintf(out, "    \"%s\" [label=\"%s\\n%s\"];\n", spec->stages[v].name,
                    spec->stages[v].name, pl__kind_name(spec, v));
        }
        for (int j = 1; j < s->n_stages; j++)
            fprintf(out, "    \"%s\" -> \"%s\";\n", spec->stages[s->stages[j - 1]].name,
                    spec->stages[s->stages[j]].name);
        fprintf(out, "  }\n");
    }
    for (int i = 0; i < plan->n_events; i++) {
        const pl_event *ev = &plan->events[i];
        for (int k = 0; k < ev->n_dsts; k++)
            fprintf(out, "  \"%s\" -> \"%s\" [style=dashed, label=\"e%d\"];\n",
                    spec->stages[ev->src].name, spec->stages[ev->dsts[k]].name, i);
    }
    /* A loop's body: a cluster of its own, entered from the loop stage, with the edge back to
     * its first stage that the next iteration takes. */
    for (int i = 0; i < plan->n_loops; i++) {
        const pl_plan_loop *lp = &plan->loops[i];
        const pl_stage *L = &spec->stages[lp->stage];
        char desc[1024];
        L->kind->describe(spec, L, desc, sizeof desc);
        for (char *c = desc; *c; c++)
            if (*c == '"' || *c == '\\') *c = '\'';
        fprintf(out,
                "  subgraph \"cluster_loop_%s\" {\n    label=\"loop %s: %s\";\n    style=dashed;\n",
                L->name, L->name, desc);
        for (int j = 0; j < lp->n_body; j++) {
            int v = lp->body[j];
            fprintf(out, "    \"%s\" [label=\"%s\\n%s\"];\n", spec->stages[v].name,
                    spec->stages[v].name, pl__kind_name(spec, v));
        }
        for (int j = 1; j < lp->n_body; j++)
            fprintf(out, "    \"%s\" -> \"%s\";\n", spec->stages[lp->body[j - 1]].name,
                    spec->stages[lp->body[j]].name);
        fprintf(
            out,
            "    \"%s\" -> \"%s\" [style=dotted, label=\"next iteration\", constraint=false];\n",
            spec->stages[lp->body[lp->n_body - 1]].name, spec->stages[lp->body[0]].name);
        fprintf(out, "  }\n  \"%s\" -> \"%s\" [style=dotted, label=\"body\"];\n", L->name,
                spec->stages[lp->body[0]].name);
    }
    fprintf(out, "}\n");
}
