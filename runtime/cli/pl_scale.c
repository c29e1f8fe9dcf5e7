/* pl_scale: --shard and --mpi around `pipectl run` (pl_scale.h). */
#include "pl_scale.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl_parts.h"
#ifdef PL_WITH_CUDA
#include "pl_gpu.h"
#endif
#include "pl_report.h"

void pl_scale_init(pl_scale *sc)
{
    memset(sc, 0, sizeof *sc);
}

int pl_scale_parse_shard(const pl_cmd *cmd, int id, const char *v, pl_scale *sc)
{
    (void)id;
    char *end;
    long k = strtol(v, &end, 10), n = 0;
    bool ok = end != v && *end == '/' && k >= 0;
    if (ok) {
        const char *ns = end + 1;
        n = strtol(ns, &end, 10);
        ok = end != ns && *end == '\0' && n >= 1 && n <= 65536 && k < n;
    }
    if (!ok)
        return pl_cli_usage_error(cmd,
                                  "--shard needs K/N, shard K of N (0 <= K < N, N at most "
                                  "65536), got '%s'",
                                  v);
    sc->shard.index = (int)k;
    sc->shard.count = (int)n;
    sc->on = n > 1;
    return 0;
}

pl_status pl_scale_begin(pl_scale *sc, pl_error *err)
{
    if (!sc->mpi) return PL_OK;
    if (sc->shard.count > 0)
        return pl_error_set(err, PL_EINPUT,
                            "error: --shard and --mpi do not go together: with --mpi each rank "
                            "runs its shard, rank K of N");
    PL_CHECK(pl_mpi_init(&sc->world, err));
    sc->mpi_up = true;
    sc->shard.index = sc->world.rank;
    sc->shard.count = sc->world.size;
    sc->on = sc->world.size > 1;
    return PL_OK;
}

/* The GPU of this rank: its local rank among the devices the CUDA runtime sees (those
 * CUDA_VISIBLE_DEVICES leaves: a launcher that gives each task its own GPU, as Slurm's
 * --gpus-per-task=1 does, leaves one, device 0), round robin when ranks outnumber them (ranks
 * then share a GPU). Without CUDA or a device: the local rank (the host executor ignores it). */
static int pl__device_of(const pl_mpi_world *w)
{
#ifdef PL_WITH_CUDA
    int n = pl_gpu_device_count();
    if (n > 0) return w->local_rank % n;
#endif
    return w->local_rank;
}

pl_status pl_scale_apply(pl_scale *sc, pl_spec *spec, pl_error *err)
{
    /* Before the device: each rank's is its own, the digest the same on every rank. */
    if (sc->on) PL_CHECK(pl_parts_digest(spec, sc->digest, err));
    if (sc->mpi_up) spec->run.device = pl__device_of(&sc->world);
    if (!sc->on) return PL_OK;
    spec->run.shard.index = sc->shard.index;
    spec->run.shard.count = sc->shard.count;
    sc->shard.mode = spec->run.shard.mode;
    if (spec->run.batches < sc->shard.count)
        return pl_error_set(err, PL_EINPUT,
                            "error: %d shards of %lld batches: each shard needs a batch at least; "
                            "run fewer shards (ranks) or more batches (--batches)",
                            sc->shard.count, (long long)spec->run.batches);
    for (int i = 0; i < spec->n_stages; i++) {
        const pl_stage *st = &spec->stages[i];
        const pl_opt *to = st->kind->output ? pl_stage_opt(st, "to") : NULL;
        if (to && to->str && strcmp(to->str, "-") == 0)
            return pl_error_at(err, PL_EINPUT, to->val_pos,
                               "sink '%s' writes to stdout, which the shards cannot share; give "
                               "it a file to run in shards",
                               st->name);
        const pl_loop_stream *ls = st->loop ? st->loop->stream : NULL;
        if (ls && ls->to && strcmp(ls->to, "-") == 0)
            return pl_error_at(err, PL_EINPUT, ls->to_pos,
                               "loop '%s' streams to stdout, which the shards cannot share; give "
                               "its stream a file to run in shards",
                               st->name);
        /* Each shard writes its stream's part (the batches numbered as in the whole run), which
         * rank 0's merge has no manifest for: refused before the run, not after it. */
        if (ls && sc->mpi_up)
            return pl_error_at(err, PL_EINPUT, ls->pos,
                               "loop '%s' has a stream, and --mpi cannot merge streams yet (each "
                               "rank would write its own part); run it without --mpi, or run "
                               "--shard K/N by hand, which keeps each shard's stream as "
                               "'<to>.part-K-of-N' (its records carry the run's batch numbers)",
                               st->name);
        /* mpirun gives stdin to rank 0 only; separate --shard runs may each be fed it whole. */
        const pl_opt *file =
            sc->mpi_up && (st->kind->role & PL_ROLE_INPUT) ? pl_stage_opt(st, "file") : NULL;
        if (file && file->str && strcmp(file->str, "-") == 0)
            return pl_error_at(err, PL_EINPUT, file->val_pos,
                               "source '%s' reads stdin, which mpirun gives to rank 0 only; give "
                               "it a file to run under --mpi",
                               st->name);
    }
    return pl_scale_gathers(sc) ? pl_gather_check(spec, err) : PL_OK;
}

bool pl_scale_gathers(const pl_scale *sc)
{
    return sc->write == PL_SCALE_GATHER && sc->mpi_up && sc->world.size > 1;
}

int64_t pl_scale_batches(const pl_scale *sc, const pl_spec *spec)
{
    return sc->on ? pl_shard_batches(&spec->run.shard, spec->run.batches) : 0;
}

static void pl__on_batch(void *user, int64_t done, int64_t total)
{
    pl_scale *sc = user;
    if (sc->stop && *sc->stop == 0 && pl_mpi_stop_told()) *sc->stop = PL_SCALE_STOP_PEER;
    if (sc->on_batch) sc->on_batch(sc->user, done, total);
}

void pl_scale_config(pl_scale *sc, const pl_spec *spec, pl_run_cfg *cfg)
{
    if (sc->on && cfg->fail_batch >= 0)
        cfg->fail_batch = pl_shard_local(&spec->run.shard, spec->run.batches, cfg->fail_batch);
    if (!sc->mpi_up || sc->world.size < 2) return;
    sc->stop = cfg->stop;
    sc->on_batch = cfg->on_batch;
    sc->user = cfg->user;
    cfg->on_batch = pl__on_batch;
    cfg->user = sc;
}

pl_status pl_scale_start(pl_scale *sc, const pl_plan *plan, pl_run_cfg *cfg, pl_error *err)
{
    if (!pl_scale_gathers(sc)) return PL_OK;
    return pl_gather_start(plan, &sc->world, cfg->stop, PL_SCALE_STOP_PEER, cfg, &sc->gather, err);
}

const char *pl_scale_trace(const pl_scale *sc, const char *trace, char *buf, size_t cap)
{
    if (!trace || !sc->on || !pl_shard_part_path(trace, sc->shard.index, sc->shard.count, buf, cap))
        return trace;
    return buf;
}

/* ---- the world's outcome (MPI) ------------------------------------------------------------ */

/* What each rank tells the others after its run (MPI_Allgather). */
typedef struct pl__rank_rec {
    int32_t rank, local_rank, device, rc;
    int32_t told, gpu, n_outputs, ran; /* ran: its run started */
    int32_t peer, pad;                 /* peer: stopped by another rank's notice */
    int64_t done, planned, wall_ns;
    uint64_t batch_bytes; /* bytes a batch brings in (or takes out) */
    char host[64];
    char msg[256]; /* its error, "" when it succeeded */
} pl__rank_rec;

static void pl__print_world(const pl_scale *sc, const pl__rank_rec *recs, FILE *out)
{
    int n = sc->world.size, hosts = 0, slow = 0, fast = 0;
    int64_t done = 0, planned = 0, wall = 0;
    for (int r = 0; r < n; r++) {
        bool seen = false;
        for (int q = 0; q < r && !seen; q++)
            seen = strcmp(recs[q].host, recs[r].host) == 0;
        hosts += !seen;
        done += recs[r].done;
        planned += recs[r].planned;
        if (recs[r].wall_ns > recs[slow].wall_ns) slow = r;
        if (recs[r].wall_ns < recs[fast].wall_ns) fast = r;
    }
    wall = recs[slow].wall_ns;
    fprintf(out, "ranks: %d on %d host%s\n", n, hosts, hosts == 1 ? "" : "s");
    fprintf(out, "  %4s  %-16s %-7s %17s %10s %11s %9s\n", "rank", "host", "device", "batches",
            "wall s", "batches/s", "MB/s");
    for (int r = 0; r < n; r++) {
        const pl__rank_rec *x = &recs[r];
        char dev[16], b[32];
        if (x->gpu)
            snprintf(dev, sizeof dev, "cuda:%d", x->device);
        else
            snprintf(dev, sizeof dev, "cpu");
        snprintf(b, sizeof b, "%lld of %lld", (long long)x->done, (long long)x->planned);
        double s = (double)x->wall_ns * 1e-9;
        fprintf(out, "  %4d  %-16.16s %-7s %17s %10.3f %11.1f %9.1f%s\n", r, x->host, dev, b, s,
                s > 0 ? (double)x->done / s : 0.0,
                s > 0 ? (double)x->done * (double)x->batch_bytes / s * 1e-6 : 0.0,
                x->peer || x->rc > 128 ? "  stopped"
                : x->rc                ? "  failed"
                                       : "");
    }
    char b[32];
    snprintf(b, sizeof b, "%lld of %lld", (long long)done, (long long)planned);
    double s = (double)wall * 1e-9;
    uint64_t bytes = 0;
    for (int r = 0; r < n; r++)
        bytes += (uint64_t)recs[r].done * recs[r].batch_bytes;
    fprintf(out, "  %4s  %-16s %-7s %17s %10.3f %11.1f %9.1f\n", "all", "", "", b, s,
            s > 0 ? (double)done / s : 0.0, s > 0 ? (double)bytes / s * 1e-6 : 0.0);
    fprintf(out,
            "  slowest: rank %d, %.3f s (the fastest, rank %d: %.3f s); the run takes as long "
            "as its slowest rank\n",
            slow, s, fast, (double)recs[fast].wall_ns * 1e-9);
}

/* Rank 0: every sink's parts into the file one process writes, each part checked against what
 * its rank reported; then the parts go. sums: every rank's [n, sums...] per output. */
static pl_status pl__merge_all(const pl_scale *sc, const pl_run_result *res, const uint64_t *sums,
                               const int *counts, FILE *out, pl_error *err)
{
    int n = sc->world.size;
    char **parts = calloc((size_t)n, sizeof *parts);
    int64_t *at = calloc((size_t)n, sizeof *at); /* where each rank's next output starts */
    int64_t *end = calloc((size_t)n, sizeof *end);
    pl_status st = PL_OK;
    if (!parts || !at || !end) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    for (int r = 0; r < n; r++) {
        at[r] = r ? end[r - 1] : 0;
        end[r] = at[r] + counts[r];
    }
    for (int i = 0; i < res->n_outputs && st == PL_OK; i++) {
        const pl_output *o = &res->outputs[i];
        bool file = o->path && strcmp(o->path, "-") != 0;
        char target[PATH_MAX + 64];
        if (file && !pl_parts_target(o->path, 0, n, target, sizeof target)) file = false;
        for (int r = 0; r < n && st == PL_OK; r++) {
            int64_t k = at[r] < end[r] ? (int64_t)sums[at[r]] : 0;
            if (at[r] + 1 + k > end[r]) k = 0; /* a rank that sent less than it says */
            if (file) {
                free(parts[r]);
                parts[r] = malloc(PATH_MAX + 64);
                if (!parts[r] || !pl_shard_part_path(target, r, n, parts[r], PATH_MAX + 64)) {
                    st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
                    break;
                }
                st = pl_parts_check(parts[r], sums + at[r] + 1, k, err);
            }
            at[r] += 1 + k;
        }
        if (!file || st != PL_OK) continue;
        int64_t b = 0;
        st = pl_parts_merge(parts, n, target, &b, err);
        if (st != PL_OK) break;
        for (int r = 0; r < n; r++) {
            char m[PATH_MAX + 96];
            snprintf(m, sizeof m, "%s%s", parts[r], PL_PARTS_MANIFEST_EXT);
            unlink(parts[r]);
            unlink(m);
        }
        if (out) fprintf(out, "merged: %s (%lld batches from %d parts)\n", target, (long long)b, n);
    }
done:
    for (int r = 0; parts && r < n; r++)
        free(parts[r]);
    free(parts);
    free(at);
    free(end);
    return st;
}

/* Where each rank's checksums of each output are in the gathered `sums` (rank after rank, per
 * output [n, sums...], in the order of rank 0's outputs): for pl_gather_finish. */
typedef struct pl__sums_ctx {
    const pl_run_result *res; /* rank 0's */
    const uint64_t *sums;
    const int *counts;
    int n;
} pl__sums_ctx;

static bool pl__sums_of(void *user, int rank, const char *stage, const uint64_t **out, int64_t *n)
{
    const pl__sums_ctx *x = user;
    if (!x->res || !x->sums) return false;
    int i = 0;
    while (i < x->res->n_outputs && strcmp(x->res->outputs[i].stage, stage) != 0)
        i++;
    if (i == x->res->n_outputs) return false;
    int64_t at = 0, end;
    for (int r = 0; r < rank; r++)
        at += x->counts[r];
    end = at + x->counts[rank];
    for (int k = 0; k < i && at < end; k++)
        at += 1 + (int64_t)x->sums[at];
    if (at >= end || at + 1 + (int64_t)x->sums[at] > end) return false;
    *out = x->sums + at + 1;
    *n = (int64_t)x->sums[at];
    return true;
}

/* The collectives every rank makes, in the same order whatever happened to it. */
static pl_status pl__world(pl_scale *sc, const pl_spec *spec, const pl_run_result *res, int rc_self,
                           pl_status st, pl_error *err)
{
    sc->ended = true;
    int n = sc->world.size, me = sc->world.rank;
    /* Stopped by another rank's notice: not this rank's failure, and not a signal. */
    bool peer = st == PL_EINTR && sc->stop && *sc->stop == PL_SCALE_STOP_PEER;
    if (peer) {
        rc_self = 1;
        st = PL_ERUNTIME;
        if (err)
            pl_error_set(err, PL_ERUNTIME,
                         "error: rank %d: stopped after %lld of %lld batches: another rank failed "
                         "or was stopped (rank 0 lists the ranks)",
                         me, res ? (long long)res->batches_done : 0LL,
                         res ? (long long)res->batches_planned : 0LL);
    }
    if (rc_self) pl_mpi_tell_stop(); /* the others stop early rather than finish for nothing */
    /* Gather: the ranks' ends to rank 0, which writes what arrives until the last of them; its
     * writer's failure is rank 0's (it stopped the run as a peer's notice does). */
    bool gather = pl_scale_gathers(sc);
    if (gather) {
        pl_error ge;
        pl_error_clear(&ge);
        pl_status gs = pl_gather_end(sc->gather, &sc->world, rc_self != 0, &ge);
        if (gs != PL_OK && (rc_self == 0 || peer)) {
            peer = false;
            st = gs;
            rc_self = pl_status_exit_code(gs) ? pl_status_exit_code(gs) : 1;
            if (err) *err = ge;
            pl_mpi_tell_stop();
        }
    }
    pl__rank_rec mine, *recs = calloc((size_t)n, sizeof *recs);
    memset(&mine, 0, sizeof mine);
    mine.rank = me;
    mine.local_rank = sc->world.local_rank;
    mine.device = spec ? spec->run.device : 0;
    mine.rc = rc_self;
    mine.told = pl_mpi_told();
    mine.gpu = res && res->executor && strcmp(res->executor, "gpu") == 0;
    mine.n_outputs = res ? res->n_outputs : 0;
    mine.ran = res && res->executor;
    mine.peer = peer;
    mine.done = res ? res->batches_done : 0;
    mine.planned = res && res->executor ? res->batches_planned
                   : spec               ? pl_scale_batches(sc, spec)
                                        : 0;
    mine.wall_ns = res ? res->wall_ns : 0;
    if (spec) {
        uint64_t in, outb;
        pl_report_flow(spec, &in, &outb);
        mine.batch_bytes = in ? in : outb;
    }
    snprintf(mine.host, sizeof mine.host, "%s", sc->world.host);
    if (rc_self && err) { /* cut at a line's end: the first line says what and where */
        size_t m = strcspn(err->msg, "\n");
        snprintf(mine.msg, sizeof mine.msg, "%.*s",
                 (int)(m < sizeof mine.msg ? m : sizeof mine.msg - 1), err->msg);
    }
    /* Without memory for the others' records this rank still takes part, with its own record
     * in a buffer of one (it then reads only its own). */
    pl__rank_rec *all = recs ? recs : &mine;
    pl_error e;
    pl_error_clear(&e);
    if (recs) {
        if (pl_mpi_allgather(&mine, sizeof mine, recs, &e) != PL_OK)
            rc_self = rc_self ? rc_self : 1;
    } else {
        rc_self = rc_self ? rc_self : 1;
    }
    int told_me = 0;
    bool world_ok = recs != NULL;
    for (int r = 0; recs && r < n; r++) {
        told_me += r != me && all[r].told;
        world_ok = world_ok && all[r].rc == 0;
    }
    pl_mpi_drain(told_me);

    /* Each output's per-batch checksums, to rank 0: [n, sums...] per output. */
    int64_t nf = 0;
    for (int i = 0; res && i < res->n_outputs; i++)
        nf += 1 + res->outputs[i].n_batch_checksums;
    uint64_t *flat = malloc((size_t)(nf > 0 ? nf : 1) * sizeof *flat), *sums = NULL;
    int64_t p = 0;
    for (int i = 0; flat && res && i < res->n_outputs; i++) {
        const pl_output *o = &res->outputs[i];
        flat[p++] = (uint64_t)o->n_batch_checksums;
        for (int64_t j = 0; j < o->n_batch_checksums; j++)
            flat[p++] = o->batch_checksums[j];
    }
    int *counts = calloc((size_t)n, sizeof *counts);
    if (!flat || !counts) world_ok = false;
    pl_status gs = pl_mpi_gather_u64(flat, flat ? (int)p : 0, me == 0 ? &sums : NULL,
                                     counts ? counts : &told_me, &e);
    if (gs != PL_OK) world_ok = false;
    /* Every part and manifest is written (each rank wrote its own before the Allgather). */
    pl_mpi_barrier();
    FILE *out = sc->quiet ? NULL : stdout;
    int merge_rc = 0;
    pl_error merr;
    pl_error_clear(&merr);
    bool ran = false;
    for (int r = 0; recs && r < n; r++)
        ran = ran || all[r].ran;
    if (me == 0) {
        if (out && recs && ran) pl__print_world(sc, all, out);
        if (!world_ok) {
            for (int r = 0; recs && r < n; r++)
                if (all[r].rc && !all[r].peer && all[r].msg[0])
                    fprintf(stderr, "rank %d (%s) %s: %s\n", r, all[r].host,
                            all[r].rc > 128 ? "stopped" : "failed", all[r].msg);
        }
        if (gather && sc->gather) {
            /* Every file is finalized, with the batches before the first one a rank did not
             * complete; on a checksum's disagreement rank 0 fails (1). */
            int64_t *done = calloc((size_t)n, sizeof *done);
            pl__sums_ctx sx = {res, sums, counts, n};
            for (int r = 0; done && recs && r < n; r++)
                done[r] = all[r].done;
            if (!done || pl_gather_finish(sc->gather, done, pl__sums_of, &sx, out, &merr) != PL_OK)
                merge_rc = done ? pl_status_exit_code(merr.status) : 1;
            if (!done) pl_error_set(&merr, PL_ENOMEM, "error: out of memory");
            free(done);
        } else if (world_ok && res && !gather) {
            merge_rc = pl__merge_all(sc, res, sums, counts, out, &merr) == PL_OK ? 0 : 2;
        }
        if (!world_ok && ran && !gather) {
            fprintf(stderr,
                    "not merged: every rank's completed batches are in its parts (NAME.part-K-of-"
                    "%d.EXT, each with a .manifest.json); run each incomplete shard again with "
                    "'pipectl run --shard K/%d FILE', then 'pipectl merge PARTS... -o OUT'\n",
                    n, n);
        }
        fflush(stdout);
    }
    merge_rc = pl_mpi_bcast_int(merge_rc);
    sc->world_rc = rc_self ? rc_self : !world_ok || merge_rc ? 1 : 0;
    if (me == 0 && merge_rc && st == PL_OK) {
        st = merr.status;
        if (err) *err = merr;
        sc->world_rc = 0; /* the caller prints it and exits with its code */
    }
    free(flat);
    free(sums);
    free(counts);
    free(recs);
    pl_gather_free(sc->gather);
    sc->gather = NULL;
    return st;
}

pl_status pl_scale_end(pl_scale *sc, const pl_spec *spec, const pl_run_result *res, pl_status st,
                       pl_error *err)
{
    if (sc->on && spec && res && res->executor) {
        pl_error merr;
        pl_error_clear(&merr);
        if (pl_parts_write_manifests(spec, sc->digest, res, &merr) != PL_OK && st == PL_OK) {
            st = merr.status;
            if (err) *err = merr;
        }
    }
    if (!sc->mpi_up) return st;
    int rc = 0;
    if (st != PL_OK) {
        int sig = sc->stop ? *sc->stop : 0;
        rc = st == PL_EINTR && sig > 0 ? 128 + sig : pl_status_exit_code(st);
        if (rc == 0) rc = 1;
    }
    return pl__world(sc, spec, res, rc, st, err);
}

int pl_scale_finish(pl_scale *sc, int rc, const pl_error *err)
{
    if (!sc->mpi_up) return rc;
    if (!sc->ended) {
        pl_error e;
        if (err && err->msg[0])
            e = *err;
        else
            pl_error_set(&e, PL_ERUNTIME, "error: the run did not start (exit %d)", rc);
        pl__world(sc, NULL, NULL, rc ? rc : 1, PL_ERUNTIME, &e);
    }
    pl_mpi_finalize();
    sc->mpi_up = false;
    if (rc == 0) rc = sc->world_rc;
    return rc;
}
