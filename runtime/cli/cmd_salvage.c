/* cmd_salvage: `pipectl salvage FILE.partial`: turns what a killed run left (SIGKILL, a crash,
 * power loss) into the file the run would have finished: cuts a trailing batch that was being
 * written (and, for text and JSONL, a trailing partial line), sets the .npy header to the batches
 * kept, renames it to its final name unless that exists, and prints what it kept with the checksums
 * `pipectl run` reports for those batches. It reads the sidecar "FILE.partial.meta" a sink writes
 * beside its .partial (stages/sink.c): a file without one is not a pipectl partial. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_cli.h"
#include "pl_hash.h"
#include "pl_json.h"
#include "pl_npy.h"
#include "pl_stage.h"

enum { PL__O_JSON = 256, PL__O_DRY };

const pl_cli_opt pl_cli_salvage_opts[] = {
    {"dry-run", 'n', NULL, NULL, "say what would be kept; change nothing", PL__O_DRY},
    {"json", 'j', NULL, NULL,
     "print one JSON object on stdout: file, partial, pipeline, stage, format, batches, rows, "
     "bytes (data kept), cut_bytes, checksummed, checksum and batch_checksums (the first 65,536 "
     "batches), as the run's outputs have them",
     PL__O_JSON},
    {0},
};

/* A leftover .partial and what its sidecar says. */
typedef struct pl__leftover {
    const char *path; /* FILE.partial, as given */
    char final[PATH_MAX];
    char meta[PATH_MAX + 8];
    json_t *m;
    const char *pipeline, *stage, *format;
    bool rows_layout, text, npy, checksum;
    int64_t header_bytes, batch_bytes, row_bytes, rows_per_batch, short_batch, short_rows;
    int fd;
    uint64_t size;
    pl_npy_info npy_info;
    /* what is kept */
    int64_t batches, rows;
    uint64_t keep; /* data bytes kept (after the header) */
    uint64_t checksum_all;
    uint64_t *sums; /* the first PL_BATCH_CHECKSUMS_MAX batches' checksums */
} pl__leftover;

/* 1422400 -> "1,422,400". */
static const char *pl__commas(int64_t v, char *buf, size_t cap)
{
    char d[32];
    int n = snprintf(d, sizeof d, "%lld", (long long)(v < 0 ? -v : v));
    size_t k = 0;
    if (v < 0 && k + 1 < cap) buf[k++] = '-';
    for (int i = 0; i < n && k + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0) buf[k++] = ',';
        buf[k++] = d[i];
    }
    buf[k] = '\0';
    return buf;
}

static pl_status pl__get_int(pl__leftover *lo, const char *key, int64_t *out, pl_error *err)
{
    char what[PATH_MAX + 64];
    snprintf(what, sizeof what, "sidecar '%s'", lo->meta);
    return pl_json_get_int(lo->m, key, what, out, err);
}

/* Reads the sidecar; a file without a valid one is refused (PL_EINPUT). */
static pl_status pl__load_meta(pl__leftover *lo, pl_error *err)
{
    size_t n = strlen(lo->path);
    static const char suf[] = ".partial";
    if (n <= sizeof suf - 1 || strcmp(lo->path + n - (sizeof suf - 1), suf) != 0)
        return pl_error_set(err, PL_EINPUT,
                            "error: '%s' is not a pipectl partial output: a sink's leftover is "
                            "named after its final file with '.partial' added",
                            lo->path);
    if (n - (sizeof suf - 1) >= sizeof lo->final || n + 6 > sizeof lo->meta)
        return pl_error_set(err, PL_EINPUT, "error: '%s': the name is too long", lo->path);
    memcpy(lo->final, lo->path, n - (sizeof suf - 1));
    lo->final[n - (sizeof suf - 1)] = '\0';
    snprintf(lo->meta, sizeof lo->meta, "%s.meta", lo->path);
    struct stat sb;
    if (stat(lo->path, &sb) != 0)
        return pl_error_set(err, errno == ENOENT ? PL_EINPUT : PL_EIO,
                            "error: cannot read '%s': %s", lo->path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return pl_error_set(err, PL_EINPUT, "error: '%s' is not a regular file", lo->path);
    if (stat(lo->meta, &sb) != 0)
        return pl_error_set(err, PL_EINPUT,
                            "error: '%s' is not a pipectl partial output: '%s', which a sink "
                            "writes beside its .partial, is missing",
                            lo->path, lo->meta);
    pl_error lerr;
    if (pl_json_read_file(lo->meta, NULL, &lo->m, &lerr) != PL_OK || !json_is_object(lo->m) ||
        json_integer_value(json_object_get(lo->m, "pipectl_partial")) != 1)
        return pl_error_set(err, PL_EINPUT,
                            "error: '%s' is not a pipectl partial output: '%s' is not a sink's "
                            "sidecar (no \"pipectl_partial\": 1)",
                            lo->path, lo->meta);
    char what[PATH_MAX + 64];
    snprintf(what, sizeof what, "sidecar '%s'", lo->meta);
    json_t *sh;
    PL_CHECK(pl_json_get_str(lo->m, "format", what, &lo->format, err));
    lo->pipeline = pl_json_str_or(lo->m, "pipeline", "?");
    lo->stage = pl_json_str_or(lo->m, "stage", "?");
    lo->rows_layout = strcmp(pl_json_str_or(lo->m, "layout", "batches"), "rows") == 0;
    lo->checksum = json_is_true(json_object_get(lo->m, "checksum"));
    PL_CHECK(pl__get_int(lo, "header_bytes", &lo->header_bytes, err));
    PL_CHECK(pl__get_int(lo, "batch_bytes", &lo->batch_bytes, err));
    PL_CHECK(pl__get_int(lo, "row_bytes", &lo->row_bytes, err));
    PL_CHECK(pl__get_int(lo, "rows_per_batch", &lo->rows_per_batch, err));
    PL_CHECK(pl_json_get_arr(lo->m, "short_batch", what, &sh, err));
    lo->short_batch = json_integer_value(json_array_get(sh, 0));
    lo->short_rows = json_integer_value(json_array_get(sh, 1));
    lo->npy = strcmp(lo->format, "npy") == 0;
    lo->text = strcmp(lo->format, "text") == 0 || strcmp(lo->format, "jsonl") == 0;
    bool ok = lo->text || lo->npy || strcmp(lo->format, "raw") == 0;
    ok = ok && lo->header_bytes >= 0 && lo->rows_per_batch > 0 && lo->short_rows >= 0 &&
         lo->short_rows < lo->rows_per_batch;
    ok = ok && (lo->text || (lo->batch_bytes > 0 && lo->row_bytes > 0 &&
                             lo->batch_bytes == lo->row_bytes * lo->rows_per_batch));
    if (!ok)
        return pl_error_set(err, PL_EINPUT, "error: sidecar '%s' is corrupt: %s", lo->meta,
                            "its format or sizes do not add up");
    return PL_OK;
}

/* The .npy header must be the one the sink wrote: same length, fields the sidecar's sizes. */
static pl_status pl__check_npy(pl__leftover *lo, pl_error *err)
{
    int fd = dup(lo->fd);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return pl_error_set(err, PL_EIO, "error: cannot read '%s': %s", lo->path, strerror(errno));
    }
    pl_status ps = pl_npy_read_header(f, lo->path, &lo->npy_info, err);
    fclose(f);
    PL_CHECK(ps);
    const pl_npy_info *ni = &lo->npy_info;
    pl_dtype t;
    uint64_t item = 0;
    if (pl_npy_descr_dtype(ni->descr, &t)) item = pl_dtype_size(t);
    for (int i = 1; i < ni->rank; i++)
        item *= (uint64_t)ni->shape[i];
    uint64_t want = (uint64_t)(lo->rows_layout ? lo->row_bytes : lo->batch_bytes);
    if (ni->data_offset != (uint64_t)lo->header_bytes || ni->fortran_order || ni->rank < 1 ||
        item != want)
        return pl_error_set(err, PL_EINPUT,
                            "error: '%s': its .npy header does not match its sidecar '%s' (a "
                            "header of %lld bytes, %llu bytes a %s); was it written by another "
                            "program?",
                            lo->path, lo->meta, (long long)lo->header_bytes,
                            (unsigned long long)want, lo->rows_layout ? "row" : "batch");
    return PL_OK;
}

/* Reads [at, at+n) of the leftover. */
static pl_status pl__pread(const pl__leftover *lo, void *buf, size_t n, uint64_t at, pl_error *err)
{
    char *c = buf;
    while (n) {
        ssize_t r = pread(lo->fd, c, n, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return pl_error_set(err, PL_EIO, "error: reading '%s' failed: %s", lo->path,
                                r == 0 ? "short read" : strerror(errno));
        c += r;
        n -= (size_t)r;
        at += (uint64_t)r;
    }
    return PL_OK;
}

/* Rows in batch b when whole: the short batch's own count, else a full batch. */
static int64_t pl__rows_in(const pl__leftover *lo, int64_t b)
{
    return b == lo->short_batch && lo->short_rows > 0 ? lo->short_rows : lo->rows_per_batch;
}

/* One pass over the data: the whole batches (a torn one at the end is not), and their checksums,
 * each batch hashed as the sink hashed it. Fixed-size batches end every batch_bytes (fewer for a
 * short batch's rows); text batches after their rows' line breaks. */
static pl_status pl__scan(pl__leftover *lo, pl_error *err)
{
    enum { CHUNK = 1 << 20 };
    char *buf = malloc(CHUNK);
    if (!buf) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    uint64_t data = lo->size - (uint64_t)lo->header_bytes;
    /* `all` runs over every byte; `kept` is its value at the last whole batch's end. */
    pl_hash_stream all = {0}, kept = {0}, one = {0};
    uint64_t at = 0, in_batch = 0; /* bytes of the current batch so far */
    int64_t lines = 0;             /* text: lines of the current batch */
    int64_t cap_sums = 0;
    pl_status ps = PL_OK;
    while (at < data && ps == PL_OK) {
        size_t n = data - at < CHUNK ? (size_t)(data - at) : CHUNK;
        ps = pl__pread(lo, buf, n, (uint64_t)lo->header_bytes + at, err);
        for (size_t i = 0; ps == PL_OK && i < n;) {
            /* How far the current batch goes within the chunk, and whether it ends there. */
            int64_t rows = pl__rows_in(lo, lo->batches);
            size_t take;
            bool ends;
            if (lo->text) {
                char *nl = memchr(buf + i, '\n', n - i);
                take = nl ? (size_t)(nl - (buf + i)) + 1 : n - i;
                ends = nl && ++lines == rows;
            } else {
                uint64_t want = (uint64_t)rows * (uint64_t)lo->row_bytes - in_batch;
                take = want < n - i ? (size_t)want : n - i;
                ends = take == want;
            }
            pl_hash_stream_update(&one, buf + i, take);
            pl_hash_stream_update(&all, buf + i, take);
            in_batch += take;
            i += take;
            if (!ends) continue;
            if (lo->batches < PL_BATCH_CHECKSUMS_MAX && lo->batches == cap_sums) {
                int64_t nc = cap_sums ? cap_sums * 2 : 64;
                uint64_t *ns = realloc(lo->sums, (size_t)nc * sizeof *ns);
                if (!ns) {
                    ps = pl_error_set(err, PL_ENOMEM, "error: out of memory");
                    break;
                }
                lo->sums = ns;
                cap_sums = nc;
            }
            if (lo->batches < PL_BATCH_CHECKSUMS_MAX)
                lo->sums[lo->batches] = pl_hash_stream_final(&one);
            memset(&one, 0, sizeof one);
            kept = all;
            lo->keep += in_batch;
            lo->rows += rows;
            lo->batches++;
            in_batch = 0;
            lines = 0;
        }
        at += n;
    }
    free(buf);
    lo->checksum_all = pl_hash_stream_final(&kept);
    return ps;
}

/* Opens the leftover under the sink's lock: a run still writing it holds the lock. */
static pl_status pl__open(pl__leftover *lo, bool dry, pl_error *err)
{
    lo->fd = open(lo->path, (dry ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    if (lo->fd < 0)
        return pl_error_set(err, PL_EIO, "error: cannot open '%s': %s", lo->path, strerror(errno));
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = dry ? F_RDLCK : F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (fcntl(lo->fd, F_SETLK, &fl) != 0 && (errno == EACCES || errno == EAGAIN)) {
        struct flock q = fl;
        long pid = fcntl(lo->fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK ? (long)q.l_pid : 0;
        char who[64] = "";
        if (pid > 0) snprintf(who, sizeof who, " (process %ld)", pid);
        return pl_error_set(err, PL_EINPUT,
                            "error: '%s' is being written by a run%s, which holds its lock: it is "
                            "not a leftover; wait for the run to end",
                            lo->path, who);
    }
    struct stat sb;
    if (fstat(lo->fd, &sb) != 0)
        return pl_error_set(err, PL_EIO, "error: cannot read '%s': %s", lo->path, strerror(errno));
    lo->size = (uint64_t)sb.st_size;
    if (lo->size < (uint64_t)lo->header_bytes)
        return pl_error_set(err, PL_EINPUT,
                            "error: '%s' holds %llu bytes, fewer than its %lld-byte header: "
                            "nothing to keep",
                            lo->path, (unsigned long long)lo->size, (long long)lo->header_bytes);
    return PL_OK;
}

/* The final name must be free: salvage never replaces a file. */
static pl_status pl__final_free(const pl__leftover *lo, pl_error *err)
{
    struct stat sb;
    if (lstat(lo->final, &sb) == 0 || errno != ENOENT)
        return pl_error_set(err, PL_EINPUT,
                            "error: '%s' exists; salvage does not replace it: move it away (or "
                            "remove it) and run 'pipectl salvage %s' again",
                            lo->final, lo->path);
    return PL_OK;
}

/* Cuts the file to the whole batches, sets the .npy header, then moves it to the final name:
 * link + unlink, so a final name that appeared meanwhile is not replaced either. */
static pl_status pl__finish(pl__leftover *lo, pl_error *err)
{
    uint64_t end = (uint64_t)lo->header_bytes + lo->keep;
    if (end != lo->size && ftruncate(lo->fd, (off_t)end) != 0)
        return pl_error_set(err, PL_EIO, "error: cannot truncate '%s': %s", lo->path,
                            strerror(errno));
    if (lo->npy) {
        const pl_npy_info *ni = &lo->npy_info;
        pl_dtype t;
        char h[256];
        size_t hl = 0;
        if (pl_npy_descr_dtype(ni->descr, &t))
            hl = pl_npy_format_header(h, sizeof h, t, lo->rows_layout ? lo->rows : lo->batches,
                                      ni->rank - 1, ni->shape + 1);
        if (hl != (size_t)lo->header_bytes)
            return pl_error_set(err, PL_EINPUT,
                                "error: '%s': its .npy header cannot be rewritten in place",
                                lo->path);
        ssize_t w;
        do
            w = pwrite(lo->fd, h, hl, 0);
        while (w < 0 && errno == EINTR);
        if (w != (ssize_t)hl)
            return pl_error_set(err, PL_EIO, "error: rewriting the header of '%s' failed: %s",
                                lo->path, w < 0 ? strerror(errno) : "short write");
    }
    if (fsync(lo->fd) != 0)
        return pl_error_set(err, PL_EIO, "error: fsync of '%s' failed: %s", lo->path,
                            strerror(errno));
    if (link(lo->path, lo->final) == 0) {
        if (unlink(lo->path) != 0)
            return pl_error_set(err, PL_EIO, "error: '%s' is saved, but removing '%s' failed: %s",
                                lo->final, lo->path, strerror(errno));
    } else if (errno == EEXIST) {
        return pl__final_free(lo, err);
    } else if (rename(lo->path, lo->final) != 0) { /* filesystems without hard links */
        return pl_error_set(err, PL_EIO, "error: cannot rename '%s' to '%s': %s", lo->path,
                            lo->final, strerror(errno));
    }
    unlink(lo->meta);
    return PL_OK;
}

static void pl__print_json(const pl__leftover *lo, bool dry)
{
    json_t *sums = json_array();
    for (int64_t b = 0;
         sums && lo->checksum && lo->sums && b < lo->batches && b < PL_BATCH_CHECKSUMS_MAX; b++)
        json_array_append_new(sums, pl_json_hex64(lo->sums[b]));
    json_t *o = json_pack(
        "{s:i, s:s, s:s, s:b, s:o, s:o, s:o, s:o, s:s, s:I, s:I, s:I, s:I, s:b, s:o, s:o}",
        "schema_version", PL_JSON_SCHEMA_VERSION, "command", "salvage", "status", "ok", "dry_run",
        dry, "file", pl_json_str(lo->final), "partial", pl_json_str(lo->path), "pipeline",
        pl_json_str(lo->pipeline), "stage", pl_json_str(lo->stage), "format", lo->format, "batches",
        (json_int_t)lo->batches, "rows", (json_int_t)lo->rows, "bytes", (json_int_t)lo->keep,
        "cut_bytes", (json_int_t)(lo->size - (uint64_t)lo->header_bytes - lo->keep), "checksummed",
        lo->checksum, "checksum", lo->checksum ? pl_json_hex64(lo->checksum_all) : json_null(),
        "batch_checksums", lo->checksum && sums ? sums : json_null());
    if (!lo->checksum || !o) json_decref(sums);
    if (!o) {
        fputs("{\"schema_version\": 1, \"command\": \"salvage\", \"status\": \"ENOMEM\", "
              "\"exit_code\": 1}\n",
              stdout);
        return;
    }
    json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    json_decref(o);
}

static void pl__print(const pl__leftover *lo, bool dry)
{
    char nb[32], nr[32], nc[32];
    uint64_t cut = lo->size - (uint64_t)lo->header_bytes - lo->keep;
    printf("%s %s batch%s (%s row%s) of %s", dry ? "would keep" : "kept",
           pl__commas(lo->batches, nb, sizeof nb), lo->batches == 1 ? "" : "es",
           pl__commas(lo->rows, nr, sizeof nr), lo->rows == 1 ? "" : "s", lo->final);
    if (cut)
        printf("; %s %s byte%s of a batch that was being written", dry ? "would cut" : "cut",
               pl__commas((int64_t)cut, nc, sizeof nc), cut == 1 ? "" : "s");
    printf("\n");
    if (lo->checksum)
        printf("  %s: checksum 0x%016" PRIx64 " (what 'pipectl run' reports for these batches of "
               "pipeline '%s')\n",
               lo->stage, lo->checksum_all, lo->pipeline);
    else
        printf("  %s: no checksum taken (checksum: false)\n", lo->stage);
}

int pl_cmd_salvage(int argc, char **argv)
{
    const pl_cmd *cmd = pl_cmd_find("salvage", NULL);
    pl_cli_args args;
    pl_cli_args_init(&args, cmd, argc, argv);
    const char *v;
    int id;
    bool json = false, dry = false;
    while ((id = pl_cli_next(&args, &v)) > 0) {
        if (id == PL__O_JSON) json = true;
        if (id == PL__O_DRY) dry = true;
    }
    if (id < 0) return args.rc;
    if (args.n_operands != 1)
        return pl_cli_usage_error(cmd, "'pipectl salvage' takes one FILE.partial%s",
                                  args.n_operands ? ", one at a time" : "");
    pl__leftover lo;
    memset(&lo, 0, sizeof lo);
    lo.path = args.operands[0];
    lo.fd = -1;
    pl_error err;
    pl_error_clear(&err);
    pl_status ps = pl__load_meta(&lo, &err);
    if (ps == PL_OK) ps = pl__open(&lo, dry, &err);
    if (ps == PL_OK) ps = pl__final_free(&lo, &err);
    if (ps == PL_OK && lo.npy) ps = pl__check_npy(&lo, &err);
    if (ps == PL_OK) ps = pl__scan(&lo, &err);
    if (ps == PL_OK && !dry) ps = pl__finish(&lo, &err);
    int rc = 0;
    if (ps != PL_OK) {
        if (json) pl_json_print_error(stdout, "salvage", &err);
        rc = pl_cli_fail(&err);
    } else if (json) {
        pl__print_json(&lo, dry);
    } else {
        pl__print(&lo, dry);
    }
    if (lo.fd >= 0) close(lo.fd);
    json_decref(lo.m);
    free(lo.sums);
    return rc;
}
