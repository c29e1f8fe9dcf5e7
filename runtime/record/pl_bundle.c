/* pl_bundle: what capture, replay and diff share: paths and files, the plan as JSON, a run's
 * outputs and stage times as JSON (one shape for a bundle and a replay), the graphs' files, and
 * reading a bundle (pl_bundle_open). docs/bundles.md describes the format. */
#include "pl_bundle.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pl_bundle_int.h"
#include "pl_report.h"

/* ---- paths and files ---- */

/* snprintf that may cut (paths longer than PL__PATH are cut, and then fail to open, named). */
void pl__bundle_fmt(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

const char *pl_bundle_path(const char *dir, const char *rel, char *buf, size_t cap)
{
    if (rel[0] == '/')
        pl__bundle_fmt(buf, cap, "%s", rel);
    else
        pl__bundle_fmt(buf, cap, "%s/%s", dir, rel);
    return buf;
}

const char *pl__bundle_base(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

pl_status pl__bundle_mkdir(const char *path, pl_error *err)
{
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return pl_error_set(err, PL_EIO, "error: cannot create the folder %s: %s", path,
                            strerror(errno));
    return PL_OK;
}

pl_status pl__bundle_mkdir_p(const char *path, pl_error *err)
{
    char buf[PL__PATH];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            PL_CHECK(pl__bundle_mkdir(buf, err));
            *p = '/';
        }
    return pl__bundle_mkdir(buf, err);
}

pl_status pl__bundle_copy_file(const char *from, const char *to, pl_error *err)
{
    FILE *in = fopen(from, "rb");
    if (!in) return pl_error_set(err, PL_EIO, "error: cannot read %s: %s", from, strerror(errno));
    FILE *out = fopen(to, "wb");
    if (!out) {
        fclose(in);
        return pl_error_set(err, PL_EIO, "error: cannot write %s: %s", to, strerror(errno));
    }
    char buf[1 << 16];
    size_t n;
    pl_status st = PL_OK;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) {
            st = pl_error_set(err, PL_EIO, "error: cannot write %s: %s", to, strerror(errno));
            break;
        }
    if (st == PL_OK && ferror(in))
        st = pl_error_set(err, PL_EIO, "error: cannot read %s: %s", from, strerror(errno));
    fclose(in);
    if (fclose(out) != 0 && st == PL_OK)
        st = pl_error_set(err, PL_EIO, "error: cannot write %s: %s", to, strerror(errno));
    return st;
}

pl_status pl__bundle_write_text(const char *path, void (*fn)(const pl_plan *, FILE *),
                                const pl_plan *plan, pl_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f) return pl_error_set(err, PL_EIO, "error: cannot write %s: %s", path, strerror(errno));
    fn(plan, f);
    if (fclose(f) != 0) return pl_error_set(err, PL_EIO, "error: cannot write %s", path);
    return PL_OK;
}

/* ---- opening a bundle's files: the one way in ---- */

const char *pl__bundle_rel_refusal(const char *rel)
{
    if (!rel[0]) return "is an empty path";
    if (rel[0] == '/') return "is an absolute path";
    const char *why = NULL;
    for (const char *p = rel; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') return "climbs out of the bundle";
        if (n == 0 || (n == 1 && p[0] == '.')) why = "is not a plain relative path";
        p += n;
        if (*p == '/') {
            p++;
            if (!*p) why = "is not a plain relative path";
        }
    }
    return why;
}

const char *pl__bundle_file_type(mode_t m)
{
    return S_ISDIR(m)    ? "a folder"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISLNK(m)  ? "a symlink"
           : S_ISREG(m)  ? "a regular file"
                         : "not a regular file";
}

/* Refuses what at (a component of rel, relative to the folder fd `at`), a symlink: names its
 * target (readlink reads the link, never what it points to). */
static pl_status pl__refuse_link(int at, const char *name, const char *dir, const char *shown,
                                 bool folder, pl_error *err)
{
    char target[PL__PATH];
    ssize_t n = readlinkat(at, name, target, sizeof target - 1);
    if (n < 0) n = 0;
    target[n] = '\0';
    return pl_error_set(err, PL_EINPUT,
                        "error: bundle %s: %s%s is a symlink%s%s: a bundle holds regular files "
                        "only",
                        dir, shown, folder ? "/" : "", n > 0 ? " to " : "", target);
}

pl_status pl__bundle_openat(int root, const char *dir, const char *rel, pl__bundle_mode mode,
                            int *out, bool *missing, pl_error *err)
{
    *out = -1;
    if (missing) *missing = false;
    const char *why = pl__bundle_rel_refusal(rel);
    if (why)
        return pl_error_set(err, PL_EINPUT,
                            "error: bundle %s: %s %s: a bundle holds regular files only, under "
                            "its own folder",
                            dir, rel, why);
    char buf[PL__PATH];
    if (strlen(rel) >= sizeof buf)
        return pl_error_set(err, PL_EINPUT, "error: bundle %s: a path longer than %d bytes", dir,
                            PL__PATH - 1);
    memcpy(buf, rel, strlen(rel) + 1);
    int at = root;
    pl_status st = PL_OK;
    for (char *name = buf;;) {
        char *slash = strchr(name, '/');
        bool last = !slash;
        if (slash) *slash = '\0';
        /* What the component is, before opening anything: a FIFO would block the open, a device
         * may act on it, a link would lead out. */
        struct stat sb;
        if (fstatat(at, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            if (missing) *missing = errno == ENOENT || errno == ENOTDIR;
            st = pl_error_set(err, PL_EIO, "error: cannot read %s/%s: %s", dir, rel,
                              strerror(errno));
            break;
        }
        if (S_ISLNK(sb.st_mode)) {
            st = pl__refuse_link(at, name, dir, buf, !last, err);
            break;
        }
        if (!last && !S_ISDIR(sb.st_mode)) {
            if (missing) *missing = true;
            st = pl_error_set(err, PL_EIO, "error: cannot read %s/%s: %s/ is %s, not a folder", dir,
                              rel, buf, pl__bundle_file_type(sb.st_mode));
            break;
        }
        bool want_dir = !last || mode == PL__BUNDLE_FOLDER;
        if (last && (want_dir ? !S_ISDIR(sb.st_mode) : !S_ISREG(sb.st_mode))) {
            st = pl_error_set(err, PL_EINPUT,
                              "error: bundle %s: %s is %s: a bundle holds regular files only", dir,
                              buf, pl__bundle_file_type(sb.st_mode));
            break;
        }
        if (last && mode == PL__BUNDLE_CHECK) break;
        /* O_NOFOLLOW and O_NONBLOCK: what is opened is what was looked at, or the open fails
         * (a link put there since) or returns at once (a FIFO put there since: refused below). */
        int fd = openat(at, name,
                        (want_dir ? O_DIRECTORY : O_NONBLOCK) | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat now;
        if (fd < 0 || fstat(fd, &now) != 0 || now.st_dev != sb.st_dev || now.st_ino != sb.st_ino ||
            (now.st_mode & S_IFMT) != (sb.st_mode & S_IFMT)) {
            int e = fd < 0 ? errno : 0;
            if (fd >= 0) close(fd);
            if (e == ELOOP || e == 0)
                st = pl_error_set(err, PL_EINPUT,
                                  "error: bundle %s: %s changed while it was opened: a bundle "
                                  "holds regular files only",
                                  dir, buf);
            else
                st = pl_error_set(err, PL_EIO, "error: cannot read %s/%s: %s", dir, rel,
                                  strerror(e));
            break;
        }
        if (at != root) close(at);
        at = -1;
        if (last) {
            if (!want_dir) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            *out = fd;
            break;
        }
        at = fd;
        *slash = '/';
        name = slash + 1;
    }
    if (at >= 0 && at != root) close(at);
    return st;
}

pl_status pl__bundle_root(const char *dir, int *fd, pl_error *err)
{
    *fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*fd < 0)
        return pl_error_set(err, PL_EINPUT, "error: %s is not a bundle folder (%s)", dir,
                            errno == ENOTDIR ? "not a folder" : strerror(errno));
    return PL_OK;
}

pl_status pl_bundle_file_open(const pl_bundle *b, const char *rel, int *fd, bool *missing,
                              pl_error *err)
{
    return pl__bundle_openat(b->fd, b->dir, rel, PL__BUNDLE_FILE, fd, missing, err);
}

pl_status pl_bundle_file_read(const pl_bundle *b, const char *rel, size_t max, char **text,
                              size_t *len, bool *missing, pl_error *err)
{
    *text = NULL;
    *len = 0;
    int fd;
    PL_CHECK(pl_bundle_file_open(b, rel, &fd, missing, err));
    struct stat sb;
    pl_status st = PL_OK;
    char *buf = NULL;
    if (fstat(fd, &sb) != 0) {
        st =
            pl_error_set(err, PL_EIO, "error: cannot read %s/%s: %s", b->dir, rel, strerror(errno));
        goto done;
    }
    if ((unsigned long long)sb.st_size > max) {
        st = pl_error_set(err, PL_EINPUT,
                          "error: bundle %s: %s is larger than %zu MiB, more than a bundle's "
                          "text files hold",
                          b->dir, rel, max >> 20);
        goto done;
    }
    size_t cap = (size_t)sb.st_size + 1, n = 0;
    buf = malloc(cap);
    if (!buf) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    /* Up to the size fstat gave: a file that grows meanwhile is read as it was. */
    while (n + 1 < cap) {
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            st = pl_error_set(err, PL_EIO, "error: cannot read %s/%s: %s", b->dir, rel,
                              strerror(errno));
            goto done;
        }
        if (k == 0) break;
        n += (size_t)k;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    buf = NULL;
done:
    free(buf);
    close(fd);
    return st;
}

/* ---- the plan as JSON ---- */

static json_t *pl__names(const pl_spec *spec, const int *idx, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_string(spec->stages[idx[i]].name));
    return a;
}

json_t *pl_plan_json(const pl_plan *plan)
{
    const pl_spec *spec = plan->spec;
    static const char *const why[] = {"slot_reuse", "persistent", "ordered"};
    json_t *j = json_object(), *bufs = json_array(), *stages = json_array(),
           *streams = json_array(), *events = json_array(), *xdeps = json_array(),
           *segs = json_array();
    if (!j || !bufs || !stages || !streams || !events || !xdeps || !segs) goto oom;
    json_object_set_new(j, "depth", json_integer(plan->depth));
    json_object_set_new(j, "batches", json_integer(plan->batches));
    json_object_set_new(j, "buffers", bufs);
    json_object_set_new(j, "stages", stages);
    json_object_set_new(j, "streams", streams);
    json_object_set_new(j, "events", events);
    json_object_set_new(j, "xdeps", xdeps);
    json_object_set_new(j, "segments", segs);
    for (int i = 0; i < spec->n_buffers; i++) {
        const pl_buffer *b = &spec->buffers[i];
        json_t *shape = json_array();
        for (int d = 0; shape && d < b->rank; d++)
            json_array_append_new(shape, json_integer(b->shape[d]));
        json_array_append_new(bufs,
                              json_pack("{s:s, s:s, s:s, s:o, s:b, s:I}", "name", b->name, "where",
                                        pl_where_name(b->where), "dtype", pl_dtype_name(b->dtype),
                                        "shape", shape ? shape : json_null(), "persistent",
                                        b->persistent, "bytes", (json_int_t)b->bytes));
    }
    for (int i = 0; i < plan->n_stages; i++) {
        int s = plan->order[i];
        const pl_plan_stage *ps = &plan->stages[s];
        json_array_append_new(
            stages,
            json_pack("{s:s, s:s, s:s, s:s, s:o, s:i, s:i, s:b, s:b}", "name", spec->stages[s].name,
                      "kind", spec->stages[s].kind->name, "engine", pl_engine_name(ps->engine),
                      "stream", plan->streams[ps->stream].name, "preds",
                      pl__names(spec, ps->preds, ps->n_preds), "segment", ps->segment, "after",
                      ps->after, "record_end", ps->record_end, "observe", ps->observe));
    }
    /* Loops: each loop and body stage names its loop; `loops` lists them (both only where the
     * pipeline has loops, so the plans of pipelines without keep their digests). */
    for (int i = 0; i < plan->n_stages; i++) {
        const pl_plan_stage *ps = &plan->stages[plan->order[i]];
        if (ps->loop >= 0)
            json_object_set_new(json_array_get(stages, (size_t)i), "loop",
                                json_string(spec->stages[plan->loops[ps->loop].stage].name));
    }
    if (plan->n_loops) {
        json_t *loops = json_array();
        json_object_set_new(j, "loops", loops);
        for (int i = 0; loops && i < plan->n_loops; i++) {
            const pl_plan_loop *lp = &plan->loops[i];
            const pl_loop *l = spec->stages[lp->stage].loop;
            json_array_append_new(
                loops, json_pack("{s:s, s:o, s:I, s:o, s:o, s:o, s:s}", "stage",
                                 spec->stages[lp->stage].name, "body",
                                 pl__names(spec, lp->body, lp->n_body), "max", (json_int_t)l->max,
                                 "count", l->count ? json_integer(l->count) : json_null(), "while",
                                 l->cond.name ? json_string(l->cond.name) : json_null(), "index",
                                 l->index.name ? json_string(l->index.name) : json_null(), "gpu",
                                 lp->graph    ? "while_node"
                                 : lp->device ? "host_launched"
                                              : "host"));
            const pl_loop_stream *ls = l->stream;
            /* Only where a loop streams, so other plans keep their digests; without its file's
             * name, which a bundle's canonical pipeline moves to outputs/ as a sink's. */
            if (ls)
                json_object_set_new(
                    json_array_get(loops, (size_t)i), "stream",
                    json_pack("{s:I, s:s, s:s, s:I, s:o}", "every", (json_int_t)ls->every, "from",
                              ls->from.name, "format",
                              ls->format == PL_STREAM_RAW ? "raw" : "jsonl", "start",
                              (json_int_t)ls->start, "finished",
                              ls->finished.name ? json_string(ls->finished.name) : json_null()));
        }
    }
    for (int k = 0; k < plan->n_streams; k++)
        json_array_append_new(
            streams,
            json_pack("{s:s, s:s, s:o}", "name", plan->streams[k].name, "engine",
                      pl_engine_name(plan->streams[k].engine), "stages",
                      pl__names(spec, plan->streams[k].stages, plan->streams[k].n_stages)));
    for (int e = 0; e < plan->n_events; e++)
        json_array_append_new(
            events,
            json_pack("{s:s, s:o}", "after", spec->stages[plan->events[e].src].name, "waited_by",
                      pl__names(spec, plan->events[e].dsts, plan->events[e].n_dsts)));
    for (int x = 0; x < plan->n_xdeps; x++) {
        const pl_xdep *d = &plan->xdeps[x];
        json_array_append_new(
            xdeps,
            json_pack("{s:s, s:s, s:i, s:o, s:s}", "from", spec->stages[d->from].name, "to",
                      spec->stages[d->to].name, "distance", d->distance, "buffer",
                      d->buffer >= 0 ? json_string(spec->buffers[d->buffer].name) : json_null(),
                      "why", why[d->why]));
    }
    for (int k = 0; k < plan->n_segments; k++)
        json_array_append_new(
            segs,
            json_pack("{s:o, s:o}", "stages",
                      pl__names(spec, plan->segments[k].stages, plan->segments[k].n_stages),
                      "host_deps",
                      pl__names(spec, plan->segments[k].host_deps, plan->segments[k].n_host_deps)));
    json_object_set_new(j, "memory",
                        json_pack("{s:I, s:I, s:I, s:I}", "host_per_slot",
                                  (json_int_t)plan->host_per_slot, "device_per_slot",
                                  (json_int_t)plan->device_per_slot, "host_persistent",
                                  (json_int_t)plan->host_persistent, "device_persistent",
                                  (json_int_t)plan->device_persistent));
    return j;
oom:
    json_decref(j);
    json_decref(bufs);
    json_decref(stages);
    json_decref(streams);
    json_decref(events);
    json_decref(xdeps);
    json_decref(segs);
    return NULL;
}

pl_status pl_plan_digest(const pl_plan *plan, char hex[PL_SHA256_HEX], pl_error *err)
{
    json_t *j = pl_plan_json(plan);
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!text) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    pl_status st = pl_sha256(text, strlen(text), hex, err);
    free(text);
    return st;
}

/* ---- what a run produced, as JSON (the same shape for a bundle and a replay) ---- */

/* How reproducible sink `s`'s data is: the worst of the stages its data comes from (the writers of
 * the buffers it reads, transitively), as their kinds say. */
static pl_repro pl__sink_repro(const pl_spec *spec, int s, double *tol)
{
    pl_repro worst = PL_REPRO_EXACT;
    *tol = 0;
    int n = spec->n_stages;
    char *seen = calloc((size_t)n, 1);
    int *todo = malloc((size_t)n * sizeof *todo);
    if (!seen || !todo) {
        free(seen);
        free(todo);
        *tol = 1e-5;
        return PL_REPRO_SAME_GPU; /* out of memory: the cautious answer */
    }
    int nt = 0;
    todo[nt++] = s;
    seen[s] = 1;
    while (nt > 0) {
        const pl_stage *st = &spec->stages[todo[--nt]];
        if (st->kind->repro) {
            double t = 0;
            if (st->kind->repro(spec, st, &t) == PL_REPRO_SAME_GPU) {
                worst = PL_REPRO_SAME_GPU;
                if (t > *tol) *tol = t;
            }
        }
        for (int r = 0; r < st->n_reads; r++)
            for (int w = 0; w < n; w++) {
                if (seen[w]) continue;
                const pl_stage *ws = &spec->stages[w];
                for (int k = 0; k < ws->n_writes; k++)
                    if (ws->writes[k].index == st->reads[r].index) {
                        seen[w] = 1;
                        todo[nt++] = w;
                        break;
                    }
            }
    }
    free(seen);
    free(todo);
    return worst;
}

json_t *pl__bundle_outputs_json(const pl_plan *plan, const pl_run_result *res)
{
    const pl_spec *spec = plan->spec;
    json_t *a = json_array();
    for (int i = 0; a && i < res->n_outputs; i++) {
        const pl_output *o = &res->outputs[i];
        json_t *bc = json_array();
        for (int64_t b = 0; bc && o->batch_checksums && b < o->n_batch_checksums; b++)
            json_array_append_new(bc, pl_json_hex64(o->batch_checksums[b]));
        int s = pl_spec_find_stage(spec, o->stage);
        double tol = 0;
        pl_repro rp = s >= 0 ? pl__sink_repro(spec, s, &tol) : PL_REPRO_EXACT;
        json_t *e = json_pack("{s:s, s:I, s:I, s:o, s:s, s:f, s:o}", "stage", o->stage, "batches",
                              (json_int_t)o->batches, "bytes_per_batch", (json_int_t)o->batch_bytes,
                              "checksum", pl_json_hex64(o->checksum), "repro",
                              rp == PL_REPRO_EXACT ? "exact" : "same_gpu", "tolerance", tol,
                              "batch_checksums", bc ? bc : json_array());
        if (e)
            json_object_set_new(e, "checksummed", json_boolean(o->batch_checksums || !o->batches));
        if (e && o->path) json_object_set_new(e, "written_to", pl_json_str(o->path));
        if (e && s >= 0 && spec->stages[s].n_reads > 0) {
            const pl_buffer *buf = &spec->buffers[spec->stages[s].reads[0].index];
            json_object_set_new(e, "dtype", json_string(pl_dtype_name(buf->dtype)));
        }
        if (!e || json_array_append_new(a, e) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *pl__bundle_stats_json(const pl_plan *plan, const pl_run_result *res)
{
    const pl_spec *spec = plan->spec;
    pl_stage_stats *st = calloc((size_t)(plan->n_stages > 0 ? plan->n_stages : 1), sizeof *st);
    json_t *a = json_array();
    if (!st || !a) {
        free(st);
        json_decref(a);
        return NULL;
    }
    int bs;
    pl_report_stats(plan, res, st, &bs);
    for (int i = 0; i < plan->n_stages; i++) {
        int s = plan->order[i];
        json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:I, s:f, s:f, s:f}", "name",
                                           spec->stages[s].name, "kind", spec->stages[s].kind->name,
                                           "engine", pl_engine_name(plan->stages[s].engine),
                                           "count", (json_int_t)st[s].count, "mean_s", st[s].mean_s,
                                           "p50_s", st[s].p50_s, "p99_s", st[s].p99_s));
    }
    free(st);
    return a;
}

static int pl__cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pl__median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, pl__cmp_dbl);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Per stage over reps runs: the median of each statistic, the reps' p50s, and the noise:
 * (max - min) / median of the reps' p50s (null with one rep). The p50 rather than the mean: one
 * stalled batch (a page fault, a busy neighbour) moves a mean of 16 batches a lot and a median
 * hardly at all. */
json_t *pl__bundle_stages_over_reps(json_t *const *reps, int n)
{
    json_t *out = json_array();
    size_t ns = json_array_size(reps[0]);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!out || !v) {
        free(v);
        json_decref(out);
        return NULL;
    }
    static const char *const keys[] = {"mean_s", "p50_s", "p99_s"};
    for (size_t i = 0; i < ns; i++) {
        json_t *first = json_array_get(reps[0], i);
        json_t *e =
            json_pack("{s:O, s:O, s:O, s:O}", "name", json_object_get(first, "name"), "kind",
                      json_object_get(first, "kind"), "engine", json_object_get(first, "engine"),
                      "count", json_object_get(first, "count"));
        if (!e) continue;
        double p50_med = 0, lo = INFINITY, hi = -INFINITY;
        for (int k = 0; k < 3; k++) {
            for (int r = 0; r < n; r++)
                v[r] = json_number_value(json_object_get(json_array_get(reps[r], i), keys[k]));
            if (k == 1)
                for (int r = 0; r < n; r++) {
                    if (v[r] < lo) lo = v[r];
                    if (v[r] > hi) hi = v[r];
                }
            double m = pl__median(v, n);
            if (k == 1) p50_med = m;
            json_object_set_new(e, keys[k], json_real(m));
        }
        json_object_set_new(e, "noise",
                            n > 1 && p50_med > 0 ? json_real((hi - lo) / p50_med) : json_null());
        json_t *per = json_array();
        for (int r = 0; per && r < n; r++)
            json_array_append_new(per, json_real(json_number_value(
                                           json_object_get(json_array_get(reps[r], i), "p50_s"))));
        json_object_set_new(e, "rep_p50s_s", per ? per : json_null());
        json_array_append_new(out, e);
    }
    free(v);
    return out;
}

/* {path: rel, sha256, bytes} of rel in the folder open as root (named dir), appended to files. */
static pl_status pl__file_entry_at(int root, const char *dir, const char *rel, json_t *files,
                                   pl_error *err)
{
    char p[PL__PATH], hex[PL_SHA256_HEX];
    unsigned long long bytes = 0;
    int fd;
    PL_CHECK(pl__bundle_openat(root, dir, rel, PL__BUNDLE_FILE, &fd, NULL, err));
    pl_status st = pl_sha256_fd(fd, pl_bundle_path(dir, rel, p, sizeof p), hex, &bytes, err);
    close(fd);
    PL_CHECK(st);
    return pl_json_append(
        files, json_pack("{s:s, s:s, s:I}", "path", rel, "sha256", hex, "bytes", (json_int_t)bytes),
        err);
}

pl_status pl__bundle_file_entry(const char *dir, const char *rel, json_t *files, pl_error *err)
{
    int root;
    PL_CHECK(pl__bundle_root(dir, &root, err));
    pl_status st = pl__file_entry_at(root, dir, rel, files, err);
    close(root);
    return st;
}

static int pl__cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names in dir's graphs/ (at most cap; owned by the caller); 0 when there is none. */
static pl_status pl__graph_names(int root, const char *dir, char **names, int cap, int *n,
                                 pl_error *err)
{
    *n = 0;
    int gfd;
    bool missing;
    pl_error ge;
    pl_error_clear(&ge);
    if (pl__bundle_openat(root, dir, "graphs", PL__BUNDLE_FOLDER, &gfd, &missing, &ge) != PL_OK) {
        if (missing) return PL_OK;
        *err = ge;
        return ge.status;
    }
    DIR *d = fdopendir(gfd);
    if (!d) {
        close(gfd);
        return pl_error_set(err, PL_EIO, "error: cannot read %s/graphs: %s", dir, strerror(errno));
    }
    struct dirent *e;
    while ((e = readdir(d)) && *n < cap)
        if (e->d_name[0] != '.') names[(*n)++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)*n, sizeof *names, pl__cmp_str);
    return PL_OK;
}

/* The graphs' files (sorted) into files, and the digest of their topologies. */
pl_status pl__bundle_graphs(const char *dir, json_t *files, json_t **out, int *n_graphs,
                            pl_error *err)
{
    *out = json_null();
    *n_graphs = 0;
    int root;
    PL_CHECK(pl__bundle_root(dir, &root, err));
    char *names[1024];
    int n = 0;
    pl_status st = pl__graph_names(root, dir, names, 1024, &n, err);
    char *topo = NULL;
    size_t tlen = 0;
    FILE *mem = st == PL_OK && n > 0 ? open_memstream(&topo, &tlen) : NULL;
    json_t *dots = json_array();
    for (int i = 0; i < n; i++) {
        char rel[PL__PATH];
        pl__bundle_fmt(rel, sizeof rel, "graphs/%s", names[i]);
        if (st == PL_OK) st = pl__file_entry_at(root, dir, rel, files, err);
        size_t l = strlen(names[i]);
        if (st == PL_OK && l > 4 && strcmp(names[i] + l - 4, ".dot") == 0) {
            json_array_append_new(dots, json_string(rel));
            (*n_graphs)++;
        }
        if (st == PL_OK && l > 5 && strcmp(names[i] + l - 5, ".topo") == 0 && mem) {
            int fd;
            st = pl__bundle_openat(root, dir, rel, PL__BUNDLE_FILE, &fd, NULL, err);
            FILE *f = st == PL_OK ? fdopen(fd, "r") : NULL;
            if (st == PL_OK && !f) close(fd);
            char buf[4096];
            size_t k;
            fprintf(mem, "%s\n", names[i]);
            while (f && (k = fread(buf, 1, sizeof buf, f)) > 0)
                fwrite(buf, 1, k, mem);
            if (f) fclose(f);
        }
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    if (mem) fclose(mem);
    close(root);
    if (st == PL_OK && *n_graphs > 0 && topo) {
        char hex[PL_SHA256_HEX];
        st = pl_sha256(topo, tlen, hex, err);
        if (st == PL_OK) *out = json_pack("{s:o, s:s}", "dot", dots, "topology_digest", hex);
        dots = NULL;
    }
    json_decref(dots);
    free(topo);
    return st;
}

/* ---- reading ---- */

/* The manifest, read through pl__bundle_openat like every file of the bundle. */
static pl_status pl__read_manifest(pl_bundle *b, json_t **m, pl_error *err)
{
    char p[PL__PATH];
    pl_bundle_path(b->dir, "manifest.json", p, sizeof p);
    int fd;
    bool missing;
    pl_error oe;
    pl_error_clear(&oe);
    pl_status st =
        pl__bundle_openat(b->fd, b->dir, "manifest.json", PL__BUNDLE_FILE, &fd, &missing, &oe);
    if (st != PL_OK && missing)
        return pl_error_set(err, PL_EINPUT,
                            "error: %s is not a bundle: it has no manifest.json (an interrupted "
                            "capture leaves none; capture it again)",
                            b->dir);
    if (st != PL_OK) {
        *err = oe;
        return st;
    }
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return pl_error_set(err, PL_EIO, "error: cannot read %s: %s", p, strerror(errno));
    }
    json_error_t je;
    *m = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!*m)
        return pl_error_set(err, PL_EINPUT,
                            "%s:%d:%d: error: corrupt bundle manifest: not valid JSON: %s", p,
                            je.line, je.column, je.text);
    return PL_OK;
}

pl_status pl__bundle_check_closed(int root, const char *dir, const char *rel, pl_error *err)
{
    int fd;
    pl_error e;
    pl_error_clear(&e);
    if (pl__bundle_openat(root, dir, rel, PL__BUNDLE_CHECK, &fd, NULL, &e) != PL_EINPUT)
        return PL_OK;
    *err = e;
    return PL_EINPUT;
}

/* A path the manifest names (field: where): relative, in the folder, a regular file reached
 * through folders, or missing (replay names what is missing; diff reads what is there). */
static pl_status pl__closed(const pl_bundle *b, const char *rel, const char *field, pl_error *err)
{
    const char *why = pl__bundle_rel_refusal(rel);
    if (why)
        return pl_error_set(err, PL_EINPUT,
                            "error: bundle %s: %s (the manifest's %s) %s: a bundle holds regular "
                            "files only, under its own folder",
                            b->dir, rel, field, why);
    return pl__bundle_check_closed(b->fd, b->dir, rel, err);
}

/* Every path the manifest names, checked before anything but the manifest is read. */
static pl_status pl__bundle_closed(const pl_bundle *b, pl_error *err)
{
    const json_t *m = b->manifest;
    char field[96];
    static const char *const one[][2] = {
        {"pipeline", "file"}, {"pipeline", "original"}, {"plan", "text"}, {"plan", "json"},
        {"plan", "dot"},      {"", "timeline"},         {"", "summary"},
    };
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        const json_t *o = one[i][0][0] ? json_object_get(m, one[i][0]) : m;
        const char *rel = pl_json_str_or(o, one[i][1], NULL);
        pl__bundle_fmt(field, sizeof field, "%s%s%s", one[i][0], one[i][0][0] ? "." : "",
                       one[i][1]);
        if (rel) PL_CHECK(pl__closed(b, rel, field, err));
    }
    static const char *const arrays[][2] = {
        {"files", "path"}, {"inputs", "bundled"}, {"outputs", "bundled"}};
    for (size_t a = 0; a < sizeof arrays / sizeof arrays[0]; a++) {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(m, arrays[a][0]), i, e)
        {
            const char *rel = pl_json_str_or(e, arrays[a][1], NULL);
            pl__bundle_fmt(field, sizeof field, "%s[%zu].%s", arrays[a][0], i, arrays[a][1]);
            if (rel) PL_CHECK(pl__closed(b, rel, field, err));
            /* An input not copied is named by its absolute path, outside the bundle by design;
             * a relative one is read from the bundle's folder. */
            const char *path = pl_json_str_or(e, "path", NULL);
            if (a == 1 && !rel && path && path[0] != '/') {
                pl__bundle_fmt(field, sizeof field, "inputs[%zu].path", i);
                PL_CHECK(pl__closed(b, path, field, err));
            }
        }
    }
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(json_object_get(m, "graphs"), "dot"), i, e)
    {
        pl__bundle_fmt(field, sizeof field, "graphs.dot[%zu]", i);
        if (json_is_string(e)) PL_CHECK(pl__closed(b, json_string_value(e), field, err));
    }
    return PL_OK;
}

/* What replay and diff need, checked once so later code may rely on it. */
static pl_status pl__manifest_fields(const json_t *m, const char *p, pl_error *err)
{
    char what[PL__PATH + 32];
    pl__bundle_fmt(what, sizeof what, "corrupt bundle manifest %s", p);
    const char *schema = pl_json_str_or(m, "schema", NULL);
    json_t *ver = json_object_get(m, "schema_version");
    if (!json_is_object(m) || !schema || strcmp(schema, PL_BUNDLE_SCHEMA) != 0)
        return pl_error_set(err, PL_EINPUT,
                            "%s: error: not a pipectl bundle manifest (no \"schema\": \"%s\")", p,
                            PL_BUNDLE_SCHEMA);
    if (!json_is_integer(ver) || json_integer_value(ver) != PL_BUNDLE_SCHEMA_VERSION) {
        char v[32] = "missing";
        if (json_is_integer(ver))
            snprintf(v, sizeof v, "%" JSON_INTEGER_FORMAT, json_integer_value(ver));
        return pl_error_set(err, PL_EINPUT,
                            "%s: error: manifest version %s; this pipectl (%s) reads version %d "
                            "only: replay it with the pipectl that wrote it, or capture it again",
                            p, v, PL_VERSION, PL_BUNDLE_SCHEMA_VERSION);
    }
    json_t *x;
    const char *s;
    int64_t i;
    pl_status st;
    if ((st = pl_json_get_obj(m, "pipeline", what, &x, err)) != PL_OK ||
        (st = pl_json_get_str(x, "file", what, &s, err)) != PL_OK ||
        (st = pl_json_get_obj(m, "plan", what, &x, err)) != PL_OK ||
        (st = pl_json_get_str(x, "digest", what, &s, err)) != PL_OK ||
        (st = pl_json_get_obj(m, "run", what, &x, err)) != PL_OK ||
        (st = pl_json_get_str(x, "executor", what, &s, err)) != PL_OK ||
        (st = pl_json_get_int(x, "workers", what, &i, err)) != PL_OK ||
        (st = pl_json_get_int(x, "timing_period", what, &i, err)) != PL_OK ||
        (st = pl_json_get_arr(m, "inputs", what, &x, err)) != PL_OK ||
        (st = pl_json_get_arr(m, "outputs", what, &x, err)) != PL_OK ||
        (st = pl_json_get_arr(m, "stages", what, &x, err)) != PL_OK ||
        (st = pl_json_get_arr(m, "files", what, &x, err)) != PL_OK ||
        (st = pl_json_get_obj(m, "environment", what, &x, err)) != PL_OK)
        return PL_EINPUT;
    size_t k;
    json_t *o;
    json_array_foreach(json_object_get(m, "outputs"), k, o)
    {
        json_t *bc;
        if (pl_json_get_str(o, "stage", what, &s, err) != PL_OK ||
            pl_json_get_arr(o, "batch_checksums", what, &bc, err) != PL_OK)
            return PL_EINPUT;
        size_t b;
        json_t *c;
        json_array_foreach(bc, b, c)
        {
            uint64_t v;
            if (!json_is_string(c) || !pl_json_parse_hex64(json_string_value(c), &v))
                return pl_error_set(err, PL_EINPUT,
                                    "error: %s: sink '%s', batch %zu: checksum must be \"0x\" "
                                    "and 16 hex digits",
                                    what, s, b);
        }
    }
    return PL_OK;
}

pl_status pl_bundle_open(const char *dir, pl_bundle **out, pl_error *err)
{
    *out = NULL;
    pl_bundle *b = calloc(1, sizeof *b);
    if (!b || !(b->dir = strdup(dir))) {
        free(b);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    }
    b->fd = -1;
    pl_status st;
    char p[PL__PATH];
    pl_bundle_path(dir, "manifest.json", p, sizeof p);
    PL_CHECK_GOTO(pl__bundle_root(dir, &b->fd, err), st, fail);
    PL_CHECK_GOTO(pl__read_manifest(b, &b->manifest, err), st, fail);
    PL_CHECK_GOTO(pl__manifest_fields(b->manifest, p, err), st, fail);
    PL_CHECK_GOTO(pl__bundle_closed(b, err), st, fail);
    *out = b;
    return PL_OK;
fail:
    pl_bundle_free(b);
    return st;
}

void pl_bundle_free(pl_bundle *b)
{
    if (!b) return;
    json_decref(b->manifest);
    if (b->fd >= 0) close(b->fd);
    free(b->dir);
    free(b);
}
