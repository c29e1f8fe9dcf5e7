/* pl_nvrtc: CUDA source to cubin with NVRTC, and the on-disk cache that makes a second run
 * compile nothing. The key hashes everything that changes the output: the source, the headers in
 * the include folders, the options, the arch, the function and NVRTC's version. */
#include "pl_nvrtc.h"
#include "pl_cudalibs.h"

#include <dirent.h>
#include <errno.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pl_hash.h"

#define PL__CACHE_MAGIC "PLKC1\n"
#define PL__MAX_HEADER_BYTES ((size_t)16 << 20)

/* Set once (pthread_once): loading pipelines on several threads at once is allowed. */
static pthread_once_t pl__version_once = PTHREAD_ONCE_INIT;
static char pl__version[32] = "?";

static void pl__version_init(void)
{
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) == NVRTC_SUCCESS)
        snprintf(pl__version, sizeof pl__version, "%d.%d", major, minor);
}

const char *pl_nvrtc_version(void)
{
    pthread_once(&pl__version_once, pl__version_init);
    return pl__version;
}

void pl_nvrtc_cache_dir(char *dir, size_t cap)
{
    const char *x = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (x && *x)
        snprintf(dir, cap, "%s/pipectl", x);
    else if (home && *home)
        snprintf(dir, cap, "%s/.cache/pipectl", home);
    else
        snprintf(dir, cap, "/tmp/pipectl-cache");
}

static double pl__ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Two independent 64-bit hashes over a stream of parts: 128 bits of key. */
typedef struct pl__key {
    uint64_t a, b;
} pl__key;

static void pl__key_add(pl__key *k, const void *data, size_t len)
{
    uint64_t h = pl_hash(data, len);
    k->a = pl_mix64(k->a ^ h ^ (uint64_t)len);
    k->b = pl_mix64(k->b + h * PL_HASH_GOLDEN + 1);
}

static void pl__key_str(pl__key *k, const char *s)
{
    pl__key_add(k, s ? s : "", s ? strlen(s) + 1 : 1);
}

static int pl__cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool pl__is_header(const char *name)
{
    static const char *const ext[] = {".h", ".cuh", ".hpp", ".hh", ".inc", ".inl"};
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof ext / sizeof *ext; i++)
        if (strcmp(dot, ext[i]) == 0) return true;
    return false;
}

/* Hashes the headers of one folder (not recursive), in name order. */
static void pl__key_dir(pl__key *k, const char *dir)
{
    pl__key_str(k, dir);
    DIR *d = opendir(dir);
    if (!d) return;
    char *names[512];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 512)
        if (pl__is_header(e->d_name)) {
            names[n] = strdup(e->d_name);
            if (names[n]) n++;
        }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, pl__cmp_name);
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        pl__key_str(k, names[i]);
        FILE *f = fopen(path, "rb");
        if (f) {
            char *buf = malloc(PL__MAX_HEADER_BYTES);
            size_t got = buf ? fread(buf, 1, PL__MAX_HEADER_BYTES, f) : 0;
            if (buf) pl__key_add(k, buf, got);
            free(buf);
            fclose(f);
        }
        free(names[i]);
    }
}

static int pl__mkdirs(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static bool pl__read_u64(FILE *f, uint64_t *v)
{
    return fread(v, sizeof *v, 1, f) == 1;
}

/* Reads a cache entry; false when it is absent or damaged (then the source is compiled). */
static bool pl__cache_read(const char *path, pl_nvrtc_out *out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char magic[sizeof PL__CACHE_MAGIC - 1];
    uint64_t nl = 0, ng = 0, ni = 0;
    char *lowered = NULL, *log = NULL;
    void *image = NULL;
    bool ok = fread(magic, sizeof magic, 1, f) == 1 && memcmp(magic, PL__CACHE_MAGIC, 6) == 0 &&
              pl__read_u64(f, &nl) && pl__read_u64(f, &ng) && pl__read_u64(f, &ni) && nl < 65536 &&
              ng < (1u << 24) && ni > 0 && ni < ((uint64_t)1 << 32);
    if (ok) {
        lowered = calloc(nl + 1, 1);
        log = calloc(ng + 1, 1);
        image = malloc(ni);
        ok = lowered && log && image && fread(lowered, 1, nl, f) == nl &&
             fread(log, 1, ng, f) == ng && fread(image, 1, ni, f) == ni;
    }
    fclose(f);
    if (!ok) {
        free(lowered);
        free(log);
        free(image);
        return false;
    }
    out->lowered = lowered;
    out->log = log;
    out->image = image;
    out->size = ni;
    return true;
}

/* Writes atomically (temporary file, then rename), so concurrent runs never read half an entry. */
static void pl__cache_write(const char *dir, const char *path, const pl_nvrtc_out *out)
{
    if (pl__mkdirs(dir) != 0) return;
    char tmp[4300];
    /* pid and the caller's stack address: unique across processes and threads. */
    if (snprintf(tmp, sizeof tmp, "%.4200s.tmp.%ld.%lx", path, (long)getpid(),
                 (unsigned long)(uintptr_t)out) >= (int)sizeof tmp)
        return;
    FILE *f = fopen(tmp, "wb");
    if (!f) return;
    uint64_t nl = strlen(out->lowered), ng = out->log ? strlen(out->log) : 0, ni = out->size;
    bool ok = fwrite(PL__CACHE_MAGIC, 6, 1, f) == 1 && fwrite(&nl, 8, 1, f) == 1 &&
              fwrite(&ng, 8, 1, f) == 1 && fwrite(&ni, 8, 1, f) == 1 &&
              fwrite(out->lowered, 1, nl, f) == nl && (!ng || fwrite(out->log, 1, ng, f) == ng) &&
              fwrite(out->image, 1, ni, f) == ni;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

static char *pl__log(nvrtcProgram p)
{
    size_t n = 0;
    if (nvrtcGetProgramLogSize(p, &n) != NVRTC_SUCCESS || n == 0) return NULL;
    char *log = malloc(n + 1);
    if (!log) return NULL;
    if (nvrtcGetProgramLog(p, log) != NVRTC_SUCCESS) log[0] = '\0';
    log[n] = '\0';
    /* An empty log is reported as none. */
    size_t len = strlen(log);
    while (len && (log[len - 1] == '\n' || log[len - 1] == ' '))
        log[--len] = '\0';
    if (!len) {
        free(log);
        return NULL;
    }
    return log;
}

/* The source name of a mangled symbol, roughly as a user wrote it: "_Z5scalePfPKffi" -> "scale",
 * "_ZN2ns3addEv" -> "ns::add", templates get "<...>". extern "C" names are kept as they are. */
static void pl__demangle(const char *sym, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    if (strncmp(sym, "_Z", 2) != 0) {
        snprintf(out, cap, "%s", sym);
        return;
    }
    const char *p = sym + 2;
    bool nested = *p == 'N';
    if (nested) p++;
    do {
        char *end;
        long len = strtol(p, &end, 10);
        if (end == p || len <= 0 || (size_t)len > strlen(end)) break;
        n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%.*s", n ? "::" : "", (int)len,
                              end);
        p = end + len;
    } while (nested && *p && *p != 'E' && *p != 'I');
    if (*p == 'I' && n < cap) snprintf(out + n, cap - n, "<...>");
    if (!out[0]) snprintf(out, cap, "%s", sym);
}

/* The kernels (.entry) of a compiled program, for "no kernel 'x'; it has: a, b". Compiles to PTX
 * without the name expression. */
static char *pl__entries(const pl_nvrtc_in *in, const char *const *opts, int n_opts)
{
    nvrtcProgram p;
    if (nvrtcCreateProgram(&p, in->src, in->name, 0, NULL, NULL) != NVRTC_SUCCESS) return NULL;
    char *list = NULL;
    char arch[32];
    snprintf(arch, sizeof arch, "-arch=compute_%d", in->arch);
    const char **o = malloc((size_t)(n_opts + 1) * sizeof *o);
    if (!o) goto done;
    int k = 0;
    for (int i = 0; i < n_opts; i++)
        if (strncmp(opts[i], "-arch=", 6) != 0) o[k++] = opts[i];
    o[k++] = arch;
    size_t ps = 0;
    if (nvrtcCompileProgram(p, k, o) != NVRTC_SUCCESS || nvrtcGetPTXSize(p, &ps) != NVRTC_SUCCESS)
        goto done;
    char *ptx = malloc(ps + 1);
    list = calloc(1, 4096);
    if (!ptx || !list || nvrtcGetPTX(p, ptx) != NVRTC_SUCCESS) {
        free(ptx);
        goto done;
    }
    ptx[ps] = '\0';
    size_t n = 0;
    for (const char *q = strstr(ptx, ".entry "); q; q = strstr(q + 7, ".entry ")) {
        const char *s = q + 7;
        while (*s == ' ')
            s++;
        size_t len = strcspn(s, "( \n");
        char sym[512], nice[512];
        snprintf(sym, sizeof sym, "%.*s", (int)(len < 511 ? len : 511), s);
        pl__demangle(sym, nice, sizeof nice);
        if (n < 4000) n += (size_t)snprintf(list + n, 4096 - n, "%s%s", n ? ", " : "", nice);
    }
    free(ptx);
done:
    free(o);
    nvrtcDestroyProgram(&p);
    return list;
}

pl_status pl_nvrtc_compile(const pl_nvrtc_in *in, pl_nvrtc_out *out, pl_error *err)
{
    memset(out, 0, sizeof *out);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char arch[32];
    snprintf(arch, sizeof arch, "-arch=sm_%d", in->arch);
    int n_opts = 0;
    const char **opts = malloc((size_t)(in->n_options + in->n_includes + 2) * sizeof *opts);
    char **incs = calloc((size_t)in->n_includes + 1, sizeof *incs);
    if (!opts || !incs) {
        free(opts);
        free(incs);
        return pl_error_set(err, PL_ENOMEM, "error: out of memory compiling '%s'", in->name);
    }
    /* -lineinfo: compute-sanitizer and fault reports can name the source line; costs no speed. */
    opts[n_opts++] = arch;
    opts[n_opts++] = "-lineinfo";
    for (int i = 0; i < in->n_includes; i++) {
        size_t len = strlen(in->includes[i]) + 3;
        incs[i] = malloc(len);
        if (incs[i]) {
            snprintf(incs[i], len, "-I%s", in->includes[i]);
            opts[n_opts++] = incs[i];
        }
    }
    for (int i = 0; i < in->n_options; i++)
        opts[n_opts++] = in->options[i];

    pl__key key = {UINT64_C(0x706c6b6372746e76), UINT64_C(0x31)};
    pl__key_str(&key, PL__CACHE_MAGIC);
    pl__key_str(&key, pl_nvrtc_version());
    pl__key_add(&key, in->src, in->len);
    pl__key_str(&key, in->name);
    pl__key_str(&key, in->function);
    for (int i = 0; i < n_opts; i++)
        pl__key_str(&key, opts[i]);
    for (int i = 0; i < in->n_includes; i++)
        pl__key_dir(&key, in->includes[i]);
    snprintf(out->key, sizeof out->key, "%016llx%016llx", (unsigned long long)key.a,
             (unsigned long long)key.b);
    char dir[4096];
    pl_nvrtc_cache_dir(dir, sizeof dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.cubin", dir, out->key);

    pl_status st = PL_OK;
    nvrtcProgram p = NULL;
    if (pl__cache_read(path, out)) {
        out->cached = true;
        goto done;
    }
    PL_CHECK_GOTO(pl_cudalib_load(PL_CUDALIB_NVRTC, err), st, done);
    nvrtcResult r = nvrtcCreateProgram(&p, in->src, in->name, 0, NULL, NULL);
    if (r == NVRTC_SUCCESS) r = nvrtcAddNameExpression(p, in->function);
    if (r != NVRTC_SUCCESS) {
        st = pl_error_set(err, PL_ERUNTIME, "error: NVRTC could not start compiling '%s': %s",
                          in->name, nvrtcGetErrorString(r));
        goto done;
    }
    r = nvrtcCompileProgram(p, n_opts, opts);
    out->log = pl__log(p);
    if (r == NVRTC_ERROR_COMPILATION) {
        /* A name expression that names nothing fails inside NVRTC's generated __nv_name_map;
         * the user's source is fine, the function is missing. */
        if (out->log && strstr(out->log, "__nv_name_map")) {
            out->no_function = true;
            out->entries = pl__entries(in, opts, n_opts);
        } else {
            out->compile_failed = true;
        }
        st = pl_error_set(err, PL_EINPUT, "error: '%s' did not compile", in->name);
        goto done;
    }
    if (r != NVRTC_SUCCESS) {
        st = pl_error_set(err, PL_EINPUT, "error: NVRTC failed on '%s': %s%s%s", in->name,
                          nvrtcGetErrorString(r), out->log ? "\n" : "", out->log ? out->log : "");
        goto done;
    }
    const char *lowered = NULL;
    size_t size = 0;
    if (nvrtcGetLoweredName(p, in->function, &lowered) != NVRTC_SUCCESS || !lowered) {
        out->no_function = true;
        out->entries = pl__entries(in, opts, n_opts);
        st = pl_error_set(err, PL_EINPUT, "error: no kernel '%s'", in->function);
        goto done;
    }
    out->lowered = strdup(lowered);
    r = nvrtcGetCUBINSize(p, &size);
    out->image = r == NVRTC_SUCCESS && size ? malloc(size) : NULL;
    if (!out->lowered || !out->image || nvrtcGetCUBIN(p, out->image) != NVRTC_SUCCESS) {
        st = pl_error_set(err, PL_ERUNTIME, "error: NVRTC gave no cubin for '%s' (%s)", in->name,
                          nvrtcGetErrorString(r));
        goto done;
    }
    out->size = size;
    pl__cache_write(dir, path, out);
done:
    out->ms = pl__ms_since(&t0);
    if (p) nvrtcDestroyProgram(&p);
    for (int i = 0; i < in->n_includes; i++)
        free(incs[i]);
    free(incs);
    free(opts);
    return st;
}

void pl_nvrtc_out_fini(pl_nvrtc_out *out)
{
    if (!out) return;
    free(out->image);
    free(out->lowered);
    free(out->log);
    free(out->entries);
    memset(out, 0, sizeof *out);
}
