/* test_fault_inject: SQLite-style fault injection. A small pipeline (a padded file source, five
 * sinks: .npy batches and rows, raw rows, JSONL, text) runs again and again under fault_shim.so
 * (LD_PRELOAD), which fails the Nth call of one kind: every allocation (malloc, calloc, realloc,
 * from the reading of the pipeline on), and every open, write, fsync and rename of a sink's files,
 * N = 1, 2, ... until a run has no call left to fail. Each run must end within its timeout, by
 * exiting (no signal) with 0, or 1 or 2 and an error naming the failure (out of memory, or the
 * errno's text); and nothing that completed may be lost: every final file is a whole-batch prefix
 * of a clean run's (all of it when the run succeeded), one per output the run reports finalized
 * with the batches it reports, and every .partial left is loadable and salvages to such a prefix
 * holding at least the batches the run reports. fsync runs over a second (sinks sync at most once
 * a second and at the end of runs longer than that), so it has its own slower pipeline.
 * Sanitizer runtimes intercept malloc and must be first in the library list: there it skips. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pl_npy.h"

#ifndef PL_FAULT_SHIM
#define PL_FAULT_SHIM ""
#endif

enum { N_SINKS = 5, PARALLEL = 12, TIMEOUT_S = 30, MAX_RUNS = 5000 };

static const char *pipectl;
static char root[2048];
static int failures;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "FAIL: " __VA_ARGS__);                                                     \
        fputc('\n', stderr);                                                                       \
        failures++;                                                                                \
    } while (0)

/* The sinks, in the pipeline's order: the file, whether it is .npy and its rows (or batches:
 * `a`) as the header's first dimension, and what a row or line is. */
typedef struct sink {
    const char *file, *stage;
    bool npy, npy_rows, lines;
    uint64_t unit; /* bytes of a row (b, e) or a batch (a); lines: 0 */
    /* the clean run's bytes (the data after a .npy header) and batch ends within them */
    char *ref;
    size_t ref_len;
    size_t ends[16];
    int n_ends;
} sink;

static sink sinks[N_SINKS] = {
    {"a.npy", "a", true, false, false, 48, NULL, 0, {0}, 0},
    {"b.bin", "b", false, false, false, 12, NULL, 0, {0}, 0},
    {"c.jsonl", "c", false, false, true, 0, NULL, 0, {0}, 0},
    {"d.txt", "d", false, false, true, 0, NULL, 0, {0}, 0},
    {"e.npy", "e", true, true, false, 12, NULL, 0, {0}, 0},
};
enum { N_BATCHES = 3, N_ROWS = 10 };
static const int64_t batch_rows[N_BATCHES] = {4, 4, 2}; /* the last padded */

static const char yaml[] =
    "pipeline: fault\n"
    "run: {batches: all, depth: 2}\n"
    "buffers:\n"
    "  x: {dtype: f32, shape: [4, 3]}\n"
    "  t: {dtype: u8, shape: [4, 6]}\n"
    "stages:\n"
    "  - {name: src, kind: source, to: x, file: in.bin, last_batch: pad}\n"
    "  - {name: words, kind: source, to: t, generator: random, min: 97, max: 123}\n"
    "  - {name: wait, kind: kernel, op: busy, duration_us: %d, after: [src, words]}\n"
    "  - {name: a, kind: sink, from: x, to: out/a.npy, after: [wait]}\n"
    "  - {name: b, kind: sink, from: x, to: out/b.bin, layout: rows, after: [wait]}\n"
    "  - {name: c, kind: sink, fields: [x], to: out/c.jsonl, after: [wait]}\n"
    "  - {name: d, kind: sink, from: t, to: out/d.txt, after: [wait]}\n"
    "  - {name: e, kind: sink, from: x, to: out/e.npy, layout: rows, after: [wait]}\n";

static char *read_all(const char *path, size_t *len)
{
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap + 1);
    size_t r;
    while (b && (r = fread(b + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *nb = realloc(b, cap * 2 + 1);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (b) b[n] = '\0';
    *len = n;
    return b;
}

static bool write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static bool exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* A job's folder with the pipeline (busy_us per batch) and its input. */
static bool make_dir(const char *dir, int busy_us)
{
    char p[4096], y[sizeof yaml + 32];
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return false;
    snprintf(p, sizeof p, "%s/fault.yaml", dir);
    int n = snprintf(y, sizeof y, yaml, busy_us);
    if (!write_file(p, y, (size_t)n)) return false;
    float in[N_ROWS * 3];
    for (int i = 0; i < N_ROWS * 3; i++)
        in[i] = (float)i * 0.25f - 3.0f;
    snprintf(p, sizeof p, "%s/in.bin", dir);
    return write_file(p, in, sizeof in);
}

typedef struct job {
    char dir[2048];
    const char *kind;
    long n;
    int err;
    pid_t pid;
    double start;
    int status;
    bool timed_out;
} job;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Starts `pipectl ARGS` in j->dir, stdout and stderr to files there; under the shim when j->kind.
 */
static bool spawn(job *j, char *const *args)
{
    char out[4096], errf[4096];
    snprintf(out, sizeof out, "%s/stdout", j->dir);
    snprintf(errf, sizeof errf, "%s/stderr", j->dir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) _exit(126);
        if (j->kind) {
            char n[32], en[32], path[4096], log[4096];
            snprintf(n, sizeof n, "%ld", j->n);
            snprintf(en, sizeof en, "%d", j->err);
            snprintf(path, sizeof path, "%s/out/", j->dir);
            snprintf(log, sizeof log, "%s/log", j->dir);
            setenv("LD_PRELOAD", PL_FAULT_SHIM, 1);
            setenv("PL_FAULT_KIND", j->kind, 1);
            setenv("PL_FAULT_N", n, 1);
            setenv("PL_FAULT_ERRNO", en, 1);
            setenv("PL_FAULT_PATH", path, 1);
            setenv("PL_FAULT_ARM", "fault.yaml", 1);
            setenv("PL_FAULT_LOG", log, 1);
        }
        execv(pipectl, args);
        _exit(127);
    }
    j->pid = pid;
    j->start = now_s();
    j->timed_out = false;
    return true;
}

/* Waits for every job of jobs[0..n), killing those past the timeout. */
static void wait_all(job *jobs, int n)
{
    int left = n;
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            if (jobs[i].pid <= 0) continue;
            int st;
            pid_t r = waitpid(jobs[i].pid, &st, WNOHANG);
            if (r == jobs[i].pid) {
                jobs[i].status = st;
                jobs[i].pid = 0;
                left--;
            } else if (now_s() - jobs[i].start > TIMEOUT_S && !jobs[i].timed_out) {
                jobs[i].timed_out = true;
                kill(jobs[i].pid, SIGKILL);
            }
        }
        if (left) nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
}

static int run_sync(job *j, char *const *args)
{
    if (!spawn(j, args)) return -1;
    wait_all(j, 1);
    return WIFEXITED(j->status) ? WEXITSTATUS(j->status) : -1;
}

/* Batch ends of the clean run's output of sink s (its data bytes). */
static void find_ends(sink *s)
{
    size_t at = 0;
    s->n_ends = 0;
    for (int b = 0; b < N_BATCHES; b++) {
        if (s->lines) {
            for (int64_t l = 0; l < batch_rows[b] && at < s->ref_len; at++)
                if (s->ref[at] == '\n') l++;
        } else {
            at += s->npy && !s->npy_rows ? s->unit : (uint64_t)batch_rows[b] * s->unit;
        }
        s->ends[s->n_ends++] = at;
    }
}

/* The data of a sink's file (after a .npy header, which must say how much follows; a .partial's
 * may say less) as a count of whole batches of the clean run's output; -1 when it is not. */
static int check_output(const sink *s, const char *path, bool partial, const char *ctx)
{
    size_t len;
    char *f = read_all(path, &len);
    if (!f) {
        FAIL("%s: cannot read %s", ctx, path);
        return -1;
    }
    size_t off = 0;
    int batches = -1;
    if (s->npy) {
        FILE *fp = fopen(path, "rb");
        pl_npy_info ni;
        pl_error err;
        pl_error_clear(&err);
        if (!fp || pl_npy_read_header(fp, path, &ni, &err) != PL_OK) {
            FAIL("%s: %s: not a loadable .npy: %s", ctx, path, err.msg);
            if (fp) fclose(fp);
            free(f);
            return -1;
        }
        fclose(fp);
        off = (size_t)ni.data_offset;
        uint64_t claimed = (uint64_t)ni.shape[0] * s->unit;
        if (off + claimed > len || (!partial && off + claimed != len)) {
            FAIL("%s: %s: its header claims %lld, %zu data bytes follow", ctx, path,
                 (long long)ni.shape[0], len - off);
            free(f);
            return -1;
        }
        if (partial) len = off + (size_t)claimed; /* what numpy.load reads */
        char h[256];
        int64_t rest[2] = {4, 3};
        size_t hl = s->npy_rows
                        ? pl_npy_format_header(h, sizeof h, PL_F32, ni.shape[0], 1, rest + 1)
                        : pl_npy_format_header(h, sizeof h, PL_F32, ni.shape[0], 2, rest);
        if (hl != off || memcmp(h, f, hl) != 0) {
            FAIL("%s: %s: not the header a run of that many writes", ctx, path);
            free(f);
            return -1;
        }
    }
    size_t n = len - off;
    if (n > s->ref_len || memcmp(f + off, s->ref, n) != 0) {
        FAIL("%s: %s: its %zu bytes are not a prefix of the clean run's", ctx, path, n);
    } else if (n == 0) {
        batches = 0;
    } else if (partial && s->npy) {
        batches = 0;
        for (int b = 0; b < s->n_ends; b++)
            if (s->ends[b] <= n) batches = b + 1;
    } else {
        for (int b = 0; b < s->n_ends; b++)
            if (s->ends[b] == n) batches = b + 1;
        if (batches < 0) FAIL("%s: %s: %zu bytes is not a whole number of batches", ctx, path, n);
    }
    free(f);
    return batches;
}

/* What a failed run's "stopped after ..." line says of `fin`: the batches written (-1: not named),
 * and whether they were finalized. */
static int64_t reported_of(const char *err, const char *fin, bool *finalized)
{
    *finalized = false;
    const char *line = err ? strstr(err, "stopped after ") : NULL;
    if (!line) return -1;
    const char *eol = strchr(line, '\n');
    char pat[4200];
    snprintf(pat, sizeof pat, "nothing written to %s (left as it was)", fin);
    const char *at = strstr(line, pat);
    if (at && (!eol || at < eol)) {
        *finalized = true;
        return 0;
    }
    snprintf(pat, sizeof pat, " written to %s", fin);
    size_t pl = strlen(pat);
    for (at = strstr(line, pat); at && (!eol || at < eol); at = strstr(at + 1, pat)) {
        char next = at[pl];
        if (next != ',' && next != ' ' && next != '\n' && next != '\0') continue;
        const char *d = at;
        while (d > line && d[-1] != ' ')
            d--; /* "batches" */
        while (d > line && d[-1] == ' ')
            d--;
        while (d > line && d[-1] >= '0' && d[-1] <= '9')
            d--;
        *finalized = strncmp(at + pl, " (not finalized)", 16) != 0;
        return atoll(d);
    }
    return -1;
}

/* Finds the batches each sink's output holds, salvaging what a failed run left, and compares
 * with what the run reported. */
static void check_outputs(const job *j, int rc, const char *err, const char *ctx)
{
    for (int i = 0; i < N_SINKS; i++) {
        const sink *s = &sinks[i];
        char fin[4096], part[4200], meta[4300];
        snprintf(fin, sizeof fin, "%s/out/%s", j->dir, s->file);
        snprintf(part, sizeof part, "%s.partial", fin);
        snprintf(meta, sizeof meta, "%s.meta", part);
        bool finalized;
        int64_t reported = reported_of(err, fin, &finalized);
        bool has_fin = exists(fin), has_part = exists(part);
        int got = -1;
        if (has_fin && has_part) {
            FAIL("%s: both %s and its .partial exist", ctx, s->file);
            continue;
        }
        if (has_part) {
            if (!exists(meta)) {
                FAIL("%s: %s.partial is left without its .meta: salvage cannot finish it", ctx,
                     s->file);
                continue;
            }
            check_output(s, part, true, ctx); /* loadable as it is */
            job sj;
            memset(&sj, 0, sizeof sj);
            snprintf(sj.dir, sizeof sj.dir, "%s/salvage", j->dir);
            mkdir(sj.dir, 0777);
            char *args[] = {(char *)pipectl, "salvage", part, NULL};
            int src = run_sync(&sj, args);
            if (src != 0) {
                char ef[4200];
                size_t el;
                snprintf(ef, sizeof ef, "%s/stderr", sj.dir);
                char *e = read_all(ef, &el);
                FAIL("%s: salvage %s: exit %d: %s", ctx, part, src, e ? e : "");
                free(e);
                continue;
            }
            if (exists(part) || exists(meta)) FAIL("%s: salvage left %s or its .meta", ctx, part);
            has_fin = true;
        } else if (exists(meta)) {
            FAIL("%s: %s.partial.meta is left without its .partial", ctx, s->file);
        }
        if (has_fin) got = check_output(s, fin, false, ctx);
        if (rc == 0 && got != N_BATCHES)
            FAIL("%s: exit 0, but %s holds %d of %d batches", ctx, s->file, got, N_BATCHES);
        if (reported > 0 && finalized && (has_part || got != reported))
            FAIL("%s: %s: reported finalized with %lld batches, holds %d%s", ctx, s->file,
                 (long long)reported, got, has_part ? " (in a .partial)" : "");
        if (reported > 0 && !finalized && got < reported)
            FAIL("%s: %s: %lld batches reported written, %d kept", ctx, s->file,
                 (long long)reported, got);
        if (reported == 0 && has_fin)
            FAIL("%s: %s: reported nothing written, but exists", ctx, s->file);
    }
}

/* Checks one finished job; returns whether the shim failed a call (else: nothing was left to
 * fail, and the run must have succeeded). */
static bool check_job(const job *j)
{
    char ctx[256], p[4096];
    snprintf(ctx, sizeof ctx, "%s #%ld (errno %d)", j->kind, j->n, j->err);
    snprintf(p, sizeof p, "%s/log", j->dir);
    size_t ln, en;
    char *log = read_all(p, &ln);
    snprintf(p, sizeof p, "%s/stderr", j->dir);
    char *err = read_all(p, &en);
    char want[64];
    snprintf(want, sizeof want, "%s %ld\n", j->kind, j->n);
    bool injected = log && strstr(log, want);
    int rc = -1;
    if (j->timed_out) {
        FAIL("%s: no exit within %d s (a hang)", ctx, TIMEOUT_S);
    } else if (!WIFEXITED(j->status)) {
        FAIL("%s: killed by signal %d (a crash): %s", ctx, WTERMSIG(j->status), err ? err : "");
    } else {
        rc = WEXITSTATUS(j->status);
        if (rc != 0 && rc != 1 && rc != 2) FAIL("%s: exit %d: %s", ctx, rc, err ? err : "");
        if (!injected && rc != 0)
            FAIL("%s: nothing failed, yet exit %d: %s", ctx, rc, err ? err : "");
        if (rc == 1 || rc == 2) {
            /* malloc: out of memory, or the call it broke: pthread_create */
            bool named = err && strstr(err, "error") &&
                         (strstr(err, strerror(j->err)) ||
                          (j->err == ENOMEM &&
                           (strstr(err, "out of memory") || strstr(err, "cannot start"))));
            if (!named)
                FAIL("%s: exit %d without an error naming the failure ('%s' or out of memory): %s",
                     ctx, rc, strerror(j->err), err ? err : "");
        }
        check_outputs(j, rc, err, ctx);
    }
    free(log);
    free(err);
    return injected || j->timed_out || !WIFEXITED(j->status);
}

/* Fails call N = 1, 2, ... of `kind` (errnos alternating between e1 and e2) until a run has
 * nothing left to fail. Returns the runs. */
static long sweep(const char *kind, int e1, int e2, int busy_us)
{
    job jobs[PARALLEL];
    long n = 1;
    bool more = true;
    while (more && n < MAX_RUNS) {
        for (int i = 0; i < PARALLEL; i++) {
            job *j = &jobs[i];
            memset(j, 0, sizeof *j);
            snprintf(j->dir, sizeof j->dir, "%s/%s-%d", root, kind, i);
            char cmd[4300];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", j->dir);
            if (system(cmd) != 0 || !make_dir(j->dir, busy_us)) {
                FAIL("cannot prepare %s", j->dir);
                return n;
            }
            j->kind = kind;
            j->n = n + i;
            j->err = (n + i) % 2 ? e1 : e2;
            char y[4200];
            snprintf(y, sizeof y, "%s/fault.yaml", j->dir);
            char *args[] = {(char *)pipectl, "run", "--executor", "host", "--workers", "2",
                            "--quiet",       y,     NULL};
            if (!spawn(j, args)) {
                FAIL("cannot start pipectl");
                return n;
            }
        }
        wait_all(jobs, PARALLEL);
        for (int i = 0; i < PARALLEL; i++)
            if (!check_job(&jobs[i])) more = false;
        n += PARALLEL;
    }
    if (more) FAIL("%s: still failing calls after %d runs", kind, MAX_RUNS);
    return n - 1;
}

int main(int argc, char **argv)
{
#if defined(PL_FAULT_SANITIZED)
    printf("SKIP: a sanitizer build: its runtime intercepts malloc and must come first in the "
           "library list, so the LD_PRELOAD shim cannot run\n");
    return 77;
#endif
    if (argc < 4) {
        fprintf(stderr, "usage: test_fault_inject PIPECTL SOURCE_DIR BUILD_DIR\n");
        return 2;
    }
    pipectl = argv[1];
    snprintf(root, sizeof root, "%s/fault_inject", argv[3]);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", root, root);
    if (system(cmd) != 0) return 1;
    if (access(PL_FAULT_SHIM, R_OK) != 0) {
        printf("SKIP: the shim %s is not built\n", PL_FAULT_SHIM);
        return 77;
    }
    signal(SIGPIPE, SIG_IGN);

    /* The clean run: what every output must be a prefix of. */
    job ref;
    memset(&ref, 0, sizeof ref);
    snprintf(ref.dir, sizeof ref.dir, "%s/ref", root);
    if (!make_dir(ref.dir, 1)) return 1;
    char y[4200];
    snprintf(y, sizeof y, "%s/fault.yaml", ref.dir);
    char *args[] = {(char *)pipectl, "run", "--executor", "host", "--quiet", y, NULL};
    if (run_sync(&ref, args) != 0) {
        fprintf(stderr, "FAIL: the clean run failed (see %s/stderr)\n", ref.dir);
        return 1;
    }
    for (int i = 0; i < N_SINKS; i++) {
        char p[4300];
        snprintf(p, sizeof p, "%s/out/%s", ref.dir, sinks[i].file);
        sinks[i].ref = read_all(p, &sinks[i].ref_len);
        if (!sinks[i].ref) {
            fprintf(stderr, "FAIL: the clean run wrote no %s\n", p);
            return 1;
        }
        if (sinks[i].npy) { /* the data only */
            size_t h =
                10 + (size_t)((unsigned char)sinks[i].ref[8] | (unsigned char)sinks[i].ref[9] << 8);
            memmove(sinks[i].ref, sinks[i].ref + h, sinks[i].ref_len - h);
            sinks[i].ref_len -= h;
        }
        find_ends(&sinks[i]);
        if (sinks[i].ends[N_BATCHES - 1] != sinks[i].ref_len) {
            fprintf(stderr, "FAIL: the clean run's %s is not %d batches\n", p, N_BATCHES);
            return 1;
        }
    }

    /* The shim works here: a run under it with nothing to fail counts calls. */
    job probe;
    memset(&probe, 0, sizeof probe);
    snprintf(probe.dir, sizeof probe.dir, "%s/probe", root);
    if (!make_dir(probe.dir, 1)) return 1;
    probe.kind = "malloc";
    probe.n = 1L << 40;
    probe.err = ENOMEM;
    snprintf(y, sizeof y, "%s/fault.yaml", probe.dir);
    args[5] = y;
    char lp[4300];
    snprintf(lp, sizeof lp, "%s/log", probe.dir);
    size_t ll;
    char *log = run_sync(&probe, args) == 0 ? read_all(lp, &ll) : NULL;
    long calls = log && strncmp(log, "calls ", 6) == 0 ? atol(log + 6) : 0;
    free(log);
    if (calls <= 0) {
        printf("SKIP: the LD_PRELOAD shim counted no allocation here (see %s)\n", probe.dir);
        return 77;
    }

    double t0 = now_s();
    struct {
        const char *kind;
        int e1, e2, busy_us;
    } kinds[] = {
        {"malloc", ENOMEM, ENOMEM, 1}, {"open", EIO, ENOSPC, 1},       {"write", ENOSPC, EIO, 1},
        {"rename", EIO, ENOSPC, 1},    {"fsync", EIO, ENOSPC, 450000},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        double t = now_s();
        long runs = sweep(kinds[k].kind, kinds[k].e1, kinds[k].e2, kinds[k].busy_us);
        printf("%-6s: failed each of its calls in turn, %ld runs, %.1f s\n", kinds[k].kind, runs,
               now_s() - t);
    }
    printf("%s in %.1f s\n",
           failures ? "FAILED" : "every run ended cleanly, nothing completed lost", now_s() - t0);
    return failures ? 1 : 0;
}
