/* pl_env: the environment a bundle records (host, build, libraries; the GPU from
 * runtime/device/pl_gpu_env.c). */
#include "pl_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <lua.h>
#include <openssl/crypto.h>
#include <yaml.h>

#include "pl_exec.h"
#include "pl_gpu_env.h"

#ifndef PL_COMMIT
#define PL_COMMIT "unknown"
#endif
#ifndef PL_BUILD_OPTS
#define PL_BUILD_OPTS "unknown"
#endif

extern char **environ;

static json_t *pl__cpu_model(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    json_t *v = NULL;
    while (f && !v && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            const char *c = strchr(line, ':');
            if (!c) continue;
            c++;
            while (*c == ' ' || *c == '\t')
                c++;
            size_t n = strcspn(c, "\n");
            v = pl_json_strn(c, n);
        }
    if (f) fclose(f);
    return v ? v : json_string("unknown");
}

pl_status pl_env_json(bool gpu, int device, json_t **out, pl_error *err)
{
    json_t *e = json_object();
    pl_status st = PL_OK;
    if (!e) return pl_error_set(err, PL_ENOMEM, "error: out of memory");
    json_t *p = json_object(), *h = json_object(), *l = json_object(), *vars = json_object();
    PL_CHECK_GOTO(pl_json_set(e, "pipectl", p, err), st, fail);
    PL_CHECK_GOTO(pl_json_set(e, "host", h, err), st, fail);
    PL_CHECK_GOTO(pl_json_set(e, "libraries", l, err), st, fail);
    PL_CHECK_GOTO(pl_json_set(e, "settings", vars, err), st, fail);
    PL_CHECK_GOTO(pl_json_set(p, "version", json_string(PL_VERSION), err), st, fail);
    PL_CHECK_GOTO(pl_json_set(p, "commit", json_string(PL_COMMIT), err), st, fail);
    PL_CHECK_GOTO(pl_json_set(p, "build", json_string(PL_BUILD_OPTS), err), st, fail);
#ifdef PL_WITH_CUDA
    PL_CHECK_GOTO(pl_json_set(p, "cuda", json_true(), err), st, fail);
#else
    PL_CHECK_GOTO(pl_json_set(p, "cuda", json_false(), err), st, fail);
#endif
    PL_CHECK_GOTO(pl_json_set(h, "cpu", pl__cpu_model(), err), st, fail);
    PL_CHECK_GOTO(pl_json_set(h, "threads", json_integer(sysconf(_SC_NPROCESSORS_ONLN)), err), st,
                  fail);
    struct utsname u;
    if (uname(&u) == 0) {
        char os[400];
        snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
        PL_CHECK_GOTO(pl_json_set(h, "os", pl_json_str(os), err), st, fail);
        PL_CHECK_GOTO(pl_json_set(h, "hostname", pl_json_str(u.nodename), err), st, fail);
    }
    PL_CHECK_GOTO(pl_json_set(l, "libyaml", json_string(yaml_get_version_string()), err), st, fail);
    PL_CHECK_GOTO(pl_json_set(l, "lua", json_string(LUA_RELEASE), err), st, fail);
    PL_CHECK_GOTO(pl_json_set(l, "jansson", json_string(jansson_version_str()), err), st, fail);
    PL_CHECK_GOTO(pl_json_set(l, "libcrypto", json_string(OpenSSL_version(OPENSSL_VERSION)), err),
                  st, fail);
    /* PIPECTL_* variables (NVTX, the arch user kernels are checked for, Lua limits): recorded
     * as set. */
    for (char **v = environ; v && *v; v++)
        if (strncmp(*v, "PIPECTL_", 8) == 0) {
            const char *eq = strchr(*v, '=');
            if (!eq) continue;
            char key[128];
            size_t n = (size_t)(eq - *v) < sizeof key - 1 ? (size_t)(eq - *v) : sizeof key - 1;
            memcpy(key, *v, n);
            key[n] = '\0';
            PL_CHECK_GOTO(pl_json_set(vars, key, pl_json_str(eq + 1), err), st, fail);
        }
    if (gpu) {
        json_t *g = json_object();
        PL_CHECK_GOTO(pl_json_set(e, "gpu", g, err), st, fail);
        pl_error ge;
        pl_error_clear(&ge);
        pl_status gs = pl_gpu_available() ? pl_gpu_env_json(device, g, &ge)
                                          : pl_error_set(&ge, PL_ENODEV, "no GPU found");
        if (gs == PL_ENOMEM) {
            st = pl_error_set(err, PL_ENOMEM, "error: out of memory");
            goto fail;
        }
        if (gs != PL_OK) {
            json_object_set_new(e, "gpu", json_null());
            PL_CHECK_GOTO(pl_json_set(e, "gpu_note", pl_json_str(ge.msg), err), st, fail);
        }
    } else {
        PL_CHECK_GOTO(pl_json_set(e, "gpu", json_null(), err), st, fail);
    }
    *out = e;
    return PL_OK;
fail:
    json_decref(e);
    return st;
}

#ifndef PL_WITH_CUDA
pl_status pl_gpu_env_json(int device, json_t *obj, pl_error *err)
{
    (void)device;
    (void)obj;
    return pl_error_set(err, PL_ENODEV, "pipectl was built without CUDA");
}
#endif
