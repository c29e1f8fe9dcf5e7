/* pl_parts: part manifests and `pipectl merge`'s joining of parts (pl_parts.h). */
#include "pl_parts.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_canon.h"
#include "pl_hash.h"
#include "pl_json.h"
#include "pl_npy.h"
#include "pl_sha256.h"
#include "pl_sink.h"

pl_status pl_parts_digest(const pl_spec *spec, char hex[65], pl_error *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    pl_status st = pl_canon_write(spec, f, NULL, NULL, NULL, err);
    if (fclose(f) != 0 && st == PL_OK) st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
    if (st == PL_OK) st = pl_sha256(text, len, hex, err);
    free(text);
    return st;
}

bool pl_parts_target(const char *part, int index, int count, char *out, size_t cap)
{
    char tag[48];
    snprintf(tag, sizeof tag, ".part-%d-of-%d", index, count);
    const char *slash = strrchr(part, '/');
    const char *base = slash ? slash + 1 : part, *at = NULL;
    for (const char *p = strstr(base, tag); p; p = strstr(p + 1, tag))
        at = p;
    if (!at) return false;
    size_t tl = strlen(tag);
    int n = snprintf(out, cap, "%.*s%s", (int)(at - part), part, at + tl);
    return n >= 0 && (size_t)n < cap;
}

/* ---- writing manifests -------------------------------------------------------------------- */

static json_t *pl__shape_json(const pl_buffer *b)
{
    json_t *a = json_array();
    for (int i = 0; a && i < b->rank; i++)
        json_array_append_new(a, json_integer(b->shape[i]));
    return a;
}

static pl_status pl__write_one(const pl_spec *spec, const char *digest, const pl_output *o,
                               pl_error *err)
{
    const pl_shard *sh = &spec->run.shard;
    int s = pl_spec_find_stage(spec, o->stage);
    pl_sink_part info;
    if (s < 0 || !pl_sink_part_info(spec, &spec->stages[s], &info)) return PL_OK;
    int64_t total = spec->run.batches, planned = pl_shard_batches(sh, total);
    /* Absolute, so `pipectl merge` finds it from any directory. */
    char target[PATH_MAX + 64], cwd[PATH_MAX];
    if (o->path[0] == '/' || !getcwd(cwd, sizeof cwd)) cwd[0] = '\0';
    size_t cl = strlen(cwd);
    if (cl) snprintf(target, sizeof target, "%s/", cwd);
    if (!pl_parts_target(o->path, sh->index, sh->count, target + (cl ? cl + 1 : 0),
                         sizeof target - (cl ? cl + 1 : 0)))
        snprintf(target, sizeof target, "%s", o->path);
    const char *slash = strrchr(o->path, '/');
    pl_status st = PL_OK;
    json_t *m = json_object(), *sums = json_array(), *shard = json_object();
    if (!m || !sums || !shard) {
        json_decref(sums);
        json_decref(shard);
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    for (int64_t i = 0; o->checksummed && i < o->n_batch_checksums; i++)
        PL_CHECK_GOTO(pl_json_append(sums, pl_json_hex64(o->batch_checksums[i]), err), st, done);
    PL_CHECK_GOTO(pl_json_set(shard, "index", json_integer(sh->index), err), st, done);
    PL_CHECK_GOTO(pl_json_set(shard, "count", json_integer(sh->count), err), st, done);
    PL_CHECK_GOTO(pl_json_set(shard, "mode", json_string(pl_shard_mode_name(sh->mode)), err), st,
                  done);
    const struct {
        const char *key;
        json_t *v;
    } f[] = {
        {"schema", json_string(PL_PARTS_SCHEMA)},
        {"schema_version", json_integer(PL_PARTS_SCHEMA_VERSION)},
        {"pipeline", pl_json_str(spec->name)},
        {"digest", json_string(digest)},
        {"sink", pl_json_str(o->stage)},
        {"part", pl_json_str(slash ? slash + 1 : o->path)},
        {"target", pl_json_str(target)},
        {"shard", shard},
        {"batches_total", json_integer(total)},
        {"batches_planned", json_integer(planned)},
        {"batches", json_integer(o->batches)},
        /* The pipeline's batches the part holds, in order: first, first + step, ... */
        {"batch_first", json_integer(pl_shard_global(sh, total, 0))},
        {"batch_step", json_integer(sh->mode == PL_SHARD_RANGE ? 1 : sh->count)},
        {"complete", json_boolean(o->finalized && o->batches == planned)},
        {"format", json_string(info.format)},
        {"dtype", json_string(pl_dtype_name(info.buf->dtype))},
        {"shape", pl__shape_json(info.buf)},
        {"batch_rows", json_integer(info.batch_rows)},
        {"row_bytes", json_integer((json_int_t)info.row_bytes)},
        {"rows", json_boolean(info.rows)},
        {"checksum", o->checksummed ? pl_json_hex64(o->checksum) : json_null()},
        {"batch_checksums", sums},
    };
    shard = sums = NULL; /* m owns them from here */
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (st == PL_OK)
            st = pl_json_set(m, f[i].key, f[i].v, err);
        else
            json_decref(f[i].v);
    if (st != PL_OK) goto done;
    char mpath[PATH_MAX + 32];
    snprintf(mpath, sizeof mpath, "%s%s", o->path, PL_PARTS_MANIFEST_EXT);
    st = pl_json_write_file(mpath, m, err);
done:
    json_decref(m);
    return st;
}

pl_status pl_parts_write_manifests(const pl_spec *spec, const char *digest,
                                   const pl_run_result *res, pl_error *err)
{
    if (!pl_shard_on(&spec->run.shard)) return PL_OK;
    for (int i = 0; i < res->n_outputs; i++) {
        const pl_output *o = &res->outputs[i];
        if (!o->path || strcmp(o->path, "-") == 0) continue;
        PL_CHECK(pl__write_one(spec, digest, o, err));
    }
    return PL_OK;
}

/* ---- merging ------------------------------------------------------------------------------ */

typedef struct pl__part {
    const char *path;
    json_t *m;
    const char *digest, *sink, *format, *target, *mode;
    int64_t index, count, total, planned, batches, first, step, batch_rows, row_bytes;
    bool complete;
    json_t *sums; /* borrowed from m */
    FILE *f;
    uint64_t pos, end; /* data bytes: where the next batch starts, where they end */
    pl_npy_info npy;
    int64_t done; /* batches copied */
} pl__part;

static pl_status pl__load(pl__part *p, pl_error *err)
{
    char mpath[PATH_MAX + 32], what[PATH_MAX + 48];
    snprintf(mpath, sizeof mpath, "%s%s", p->path, PL_PARTS_MANIFEST_EXT);
    snprintf(what, sizeof what, "part '%s': manifest", p->path);
    if (access(p->path, F_OK) != 0)
        return pl_error_set(err, PL_EINPUT, "error: part '%s': %s", p->path, strerror(errno));
    if (access(mpath, F_OK) != 0)
        return pl_error_set(err, PL_EINPUT,
                            "error: part '%s' has no manifest '%s': parts come from 'pipectl run "
                            "--shard K/N' or '--mpi', which write one next to each",
                            p->path, mpath);
    pl_status st = pl_json_read_file(mpath, what, &p->m, err);
    if (st == PL_EIO) err->status = st = PL_EINPUT;
    PL_CHECK(st);
    const char *schema = pl_json_str_or(p->m, "schema", "");
    if (strcmp(schema, PL_PARTS_SCHEMA) != 0)
        return pl_error_set(err, PL_EINPUT, "error: %s: 'schema' is '%s', not '%s'", what, schema,
                            PL_PARTS_SCHEMA);
    json_t *shard;
    int64_t v;
    PL_CHECK(pl_json_get_int(p->m, "schema_version", what, &v, err));
    if (v != PL_PARTS_SCHEMA_VERSION)
        return pl_error_set(err, PL_EINPUT,
                            "error: %s: schema_version %lld; this pipectl reads version %d", what,
                            (long long)v, PL_PARTS_SCHEMA_VERSION);
    PL_CHECK(pl_json_get_str(p->m, "digest", what, &p->digest, err));
    PL_CHECK(pl_json_get_str(p->m, "sink", what, &p->sink, err));
    PL_CHECK(pl_json_get_str(p->m, "format", what, &p->format, err));
    PL_CHECK(pl_json_get_str(p->m, "target", what, &p->target, err));
    PL_CHECK(pl_json_get_obj(p->m, "shard", what, &shard, err));
    PL_CHECK(pl_json_get_int(shard, "index", what, &p->index, err));
    PL_CHECK(pl_json_get_int(shard, "count", what, &p->count, err));
    PL_CHECK(pl_json_get_str(shard, "mode", what, &p->mode, err));
    PL_CHECK(pl_json_get_int(p->m, "batches_total", what, &p->total, err));
    PL_CHECK(pl_json_get_int(p->m, "batches_planned", what, &p->planned, err));
    PL_CHECK(pl_json_get_int(p->m, "batches", what, &p->batches, err));
    PL_CHECK(pl_json_get_int(p->m, "batch_first", what, &p->first, err));
    PL_CHECK(pl_json_get_int(p->m, "batch_step", what, &p->step, err));
    PL_CHECK(pl_json_get_int(p->m, "batch_rows", what, &p->batch_rows, err));
    PL_CHECK(pl_json_get_int(p->m, "row_bytes", what, &p->row_bytes, err));
    PL_CHECK(pl_json_get_arr(p->m, "batch_checksums", what, &p->sums, err));
    p->complete = json_is_true(json_object_get(p->m, "complete"));
    if (p->count < 2 || p->index < 0 || p->index >= p->count || p->total < 1 || p->batches < 0 ||
        p->batches > p->planned || p->batch_rows < 1 || p->row_bytes < 0 || p->step < 1)
        return pl_error_set(err, PL_EINPUT, "error: %s: its shard or batch counts do not add up",
                            what);
    return PL_OK;
}

/* The shard of `p`'s run that holds the pipeline's batch b, as pl_shard computes it. */
static pl_shard pl__shard_of(const pl__part *p, int64_t index)
{
    pl_shard sh = {(int)index, (int)p->count,
                   strcmp(p->mode, "range") == 0 ? PL_SHARD_RANGE : PL_SHARD_STRIDE};
    return sh;
}

/* Every part of one run, once each, complete, in the same mode: by[k] is shard k's. */
static pl_status pl__agree(pl__part *ps, int n, pl__part **by, pl_error *err)
{
    const pl__part *a = &ps[0];
    for (int i = 0; i < n; i++) {
        pl__part *p = &ps[i];
        if (strcmp(p->digest, a->digest) != 0)
            return pl_error_set(err, PL_EINPUT,
                                "error: part '%s' is of another pipeline or run (digest %.12s, "
                                "'%s' has %.12s): parts of one run have the same pipeline, "
                                "batches and seed",
                                p->path, p->digest, a->path, a->digest);
        if (p->count != a->count || strcmp(p->mode, a->mode) != 0)
            return pl_error_set(err, PL_EINPUT,
                                "error: part '%s' is shard %lld of %lld (%s); '%s' is of %lld "
                                "(%s): every part of a merge comes from one split",
                                p->path, (long long)p->index, (long long)p->count, p->mode, a->path,
                                (long long)a->count, a->mode);
        if (strcmp(p->sink, a->sink) != 0)
            return pl_error_set(err, PL_EINPUT,
                                "error: part '%s' is of sink '%s', '%s' of sink '%s': merge one "
                                "sink's parts at a time",
                                p->path, p->sink, a->path, a->sink);
        pl_shard sh = pl__shard_of(p, p->index);
        if (p->total != a->total || p->planned != pl_shard_batches(&sh, p->total) ||
            strcmp(p->format, a->format) != 0 || p->batch_rows != a->batch_rows ||
            p->row_bytes != a->row_bytes)
            return pl_error_set(err, PL_EINPUT,
                                "error: part '%s' does not describe the batches '%s' does: its "
                                "manifest disagrees",
                                p->path, a->path);
        if (by[p->index])
            return pl_error_set(err, PL_EINPUT,
                                "error: part '%s' is shard %lld of %lld, and so is '%s': give "
                                "each shard once",
                                p->path, (long long)p->index, (long long)p->count,
                                by[p->index]->path);
        by[p->index] = p;
        if (!p->complete)
            return pl_error_set(err, PL_EINPUT,
                                "error: part '%s' holds %lld of its %lld batches (its run stopped "
                                "or failed): run that shard again, 'pipectl run --shard %lld/%lld "
                                "FILE', then merge",
                                p->path, (long long)p->batches, (long long)p->planned,
                                (long long)p->index, (long long)p->count);
    }
    for (int64_t k = 0; k < a->count; k++) {
        if (by[k]) continue;
        char want[PATH_MAX + 64];
        if (!pl_shard_part_path(a->target, (int)k, (int)a->count, want, sizeof want))
            snprintf(want, sizeof want, "?");
        return pl_error_set(err, PL_EINPUT,
                            "error: shard %lld of %lld is missing (its part would be '%s'): give "
                            "all %lld parts",
                            (long long)k, (long long)a->count, want, (long long)a->count);
    }
    return PL_OK;
}

/* Opens p's file; an .npy part's header must be the same array (dtype, trailing shape) as
 * `first`'s (NULL: p is the first). */
static pl_status pl__open(pl__part *p, const pl__part *first, pl_error *err)
{
    p->f = fopen(p->path, "rb");
    if (!p->f)
        return pl_error_set(err, PL_EINPUT, "error: part '%s': %s", p->path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(p->f), &sb) != 0)
        return pl_error_set(err, PL_EIO, "error: part '%s': %s", p->path, strerror(errno));
    p->end = (uint64_t)sb.st_size;
    if (strcmp(p->format, "npy") != 0) return PL_OK;
    PL_CHECK(pl_npy_read_header(p->f, p->path, &p->npy, err));
    p->pos = p->npy.data_offset;
    if (first && (strcmp(p->npy.descr, first->npy.descr) != 0 || p->npy.rank != first->npy.rank ||
                  memcmp(p->npy.shape + 1, first->npy.shape + 1,
                         (size_t)(p->npy.rank - 1) * sizeof p->npy.shape[0]) != 0))
        return pl_error_set(err, PL_EINPUT,
                            "error: part '%s' holds another array than '%s' (dtype or shape)",
                            p->path, first->path);
    return fseeko(p->f, (off_t)p->pos, SEEK_SET) == 0
               ? PL_OK
               : pl_error_set(err, PL_EIO, "error: part '%s': %s", p->path, strerror(errno));
}

/* Copies p's next batch to out: the rest of the part for its last batch (a padded last batch
 * holds fewer rows), else batch_rows lines (text) or batch_rows x row_bytes bytes. Checks it
 * against the manifest's checksum, when it has one. */
static pl_status pl__copy_batch(pl__part *p, int64_t b, FILE *out, char *buf, size_t cap,
                                pl_error *err)
{
    bool last = p->done == p->batches - 1;
    bool text = p->row_bytes == 0;
    uint64_t want = last ? p->end - p->pos : (uint64_t)(p->batch_rows * p->row_bytes);
    int64_t lines = 0;
    uint64_t got = 0;
    pl_hash_stream hs;
    memset(&hs, 0, sizeof hs);
    while (text && !last ? lines < p->batch_rows : got < want) {
        size_t n = 0;
        if (text && !last) {
            int c = 0;
            while (n < cap && lines < p->batch_rows && (c = getc(p->f)) != EOF) {
                buf[n++] = (char)c;
                lines += c == '\n';
            }
            if (n == 0) break;
        } else {
            uint64_t left = want - got;
            n = fread(buf, 1, left < cap ? (size_t)left : cap, p->f);
            if (n == 0) break;
        }
        pl_hash_stream_update(&hs, buf, n);
        if (fwrite(buf, 1, n, out) != n)
            return pl_error_set(err, PL_EIO, "error: cannot write the merged file: %s",
                                strerror(errno));
        got += n;
    }
    if (ferror(p->f))
        return pl_error_set(err, PL_EIO, "error: part '%s': %s", p->path, strerror(errno));
    if ((text && !last) ? lines < p->batch_rows : got < want)
        return pl_error_set(err, PL_EINPUT,
                            "error: part '%s' ends inside batch %lld: it is shorter than its "
                            "manifest says",
                            p->path, (long long)b);
    p->pos += got;
    uint64_t h = pl_hash_stream_final(&hs), m;
    json_t *ms = json_array_get(p->sums, (size_t)p->done);
    if (ms && (!pl_json_parse_hex64(json_string_value(ms), &m) || m != h))
        return pl_error_set(err, PL_EINPUT,
                            "error: part '%s': batch %lld's bytes do not match its manifest's "
                            "checksum (the part was changed after its run)",
                            p->path, (long long)b);
    p->done++;
    return PL_OK;
}

/* The merged .npy header: the parts' array with their first dimensions added up. */
static pl_status pl__npy_header(pl__part **by, int64_t count, FILE *out, pl_error *err)
{
    const pl__part *a = by[0];
    pl_dtype t;
    if (!pl_npy_descr_dtype(a->npy.descr, &t))
        return pl_error_set(err, PL_EINPUT,
                            "error: part '%s': dtype '%s' is not one pipectl writes", a->path,
                            a->npy.descr);
    int64_t first = 0;
    for (int64_t k = 0; k < count; k++)
        first += by[k]->npy.shape[0];
    char h[512];
    size_t hl = pl_npy_format_header(h, sizeof h, t, first, a->npy.rank - 1, a->npy.shape + 1);
    if (!hl || fwrite(h, 1, hl, out) != hl)
        return pl_error_set(err, PL_EIO, "error: cannot write the merged file: %s",
                            strerror(errno));
    return PL_OK;
}

pl_status pl_parts_merge(char *const *parts, int n, const char *out, int64_t *batches,
                         pl_error *err)
{
    if (batches) *batches = 0;
    if (n < 1) return pl_error_set(err, PL_EINPUT, "error: no parts to merge");
    pl_status st = PL_OK;
    pl__part *ps = calloc((size_t)n, sizeof *ps);
    pl__part **by = NULL;
    FILE *f = NULL;
    char *buf = NULL;
    char partial[PATH_MAX + 16] = "";
    const size_t cap = (size_t)1 << 20;
    if (!ps) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    for (int i = 0; i < n && st == PL_OK; i++) {
        ps[i].path = parts[i];
        st = pl__load(&ps[i], err);
    }
    if (st != PL_OK) goto done;
    by = calloc((size_t)ps[0].count, sizeof *by);
    buf = malloc(cap);
    if (!by || !buf) {
        st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
        goto done;
    }
    PL_CHECK_GOTO(pl__agree(ps, n, by, err), st, done);
    int64_t count = ps[0].count, total = ps[0].total;
    for (int64_t k = 0; k < count; k++)
        PL_CHECK_GOTO(pl__open(by[k], k ? by[0] : NULL, err), st, done);
    if (!out) out = ps[0].target;
    for (int i = 0; i < n; i++)
        if (strcmp(out, parts[i]) == 0) {
            st = pl_error_set(err, PL_EINPUT, "error: the merged file '%s' is one of the parts",
                              out);
            goto done;
        }
    snprintf(partial, sizeof partial, "%s.partial", out);
    f = fopen(partial, "wb");
    if (!f) {
        st = pl_error_set(err, PL_EIO, "error: cannot write '%s': %s", partial, strerror(errno));
        partial[0] = '\0';
        goto done;
    }
    if (strcmp(ps[0].format, "npy") == 0)
        PL_CHECK_GOTO(pl__npy_header(by, count, f, err), st, done);
    /* In the pipeline's batch order: stride takes a batch from each part in turn, range each
     * part whole, one after another. */
    int64_t k = 0;
    for (int64_t b = 0; b < total; b++) {
        pl_shard sh = pl__shard_of(by[0], k);
        if (strcmp(by[0]->mode, "range") == 0)
            while (pl_shard_local(&sh, total, b) < 0 && k + 1 < count)
                sh = pl__shard_of(by[0], ++k);
        else
            k = b % count;
        PL_CHECK_GOTO(pl__copy_batch(by[k], b, f, buf, cap, err), st, done);
    }
    for (k = 0; k < count; k++)
        if (by[k]->pos != by[k]->end) {
            st = pl_error_set(err, PL_EINPUT,
                              "error: part '%s' holds bytes past its last batch: it is not what "
                              "its manifest says",
                              by[k]->path);
            goto done;
        }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        st = pl_error_set(err, PL_EIO, "error: cannot write '%s': %s", partial, strerror(errno));
        goto done;
    }
    if (fclose(f) != 0) {
        f = NULL;
        st = pl_error_set(err, PL_EIO, "error: cannot write '%s': %s", partial, strerror(errno));
        goto done;
    }
    f = NULL;
    if (rename(partial, out) != 0) {
        st = pl_error_set(err, PL_EIO, "error: cannot rename '%s' to '%s': %s", partial, out,
                          strerror(errno));
        goto done;
    }
    partial[0] = '\0';
    if (batches) *batches = total;
done:
    if (f) fclose(f);
    if (partial[0]) unlink(partial);
    for (int i = 0; i < n; i++) {
        if (ps[i].f) fclose(ps[i].f);
        json_decref(ps[i].m);
    }
    free(ps);
    free(by);
    free(buf);
    return st;
}

pl_status pl_parts_check(const char *part, const uint64_t *sums, int64_t n, pl_error *err)
{
    pl__part p;
    memset(&p, 0, sizeof p);
    p.path = part;
    pl_status st = pl__load(&p, err);
    bool same = st == PL_OK && p.batches >= n && (int64_t)json_array_size(p.sums) == n;
    for (int64_t i = 0; same && i < n; i++) {
        uint64_t m;
        same = pl_json_parse_hex64(json_string_value(json_array_get(p.sums, (size_t)i)), &m) &&
               m == sums[i];
    }
    json_decref(p.m);
    PL_CHECK(st);
    if (!same)
        return pl_error_set(err, PL_EINPUT,
                            "error: part '%s' is not the one its rank wrote (its checksums differ "
                            "from what the rank reported): do all ranks share this filesystem?",
                            part);
    return PL_OK;
}
