/* pl_ukern: a user kernel of a `kernel` stage (CUDA source compiled with NVRTC, or a PTX, cubin or
 * fatbin module), as stages/kernel/kernel_user.c parses it and runtime/device/pl_nvrtc.c compiles,
 * loads and launches it. Everything here lives in the spec's arena (owned by the spec) unless said.
 */
#ifndef PL_UKERN_H
#define PL_UKERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pl_stage.h"

#define PL_UKERN_MAX_ARGS 64

/* The type of one kernel argument, as the kernel's parameter sees it. */
typedef enum pl_uarg_type {
    PL_UARG_BUF, /* a buffer: the device pointer of this batch's slot (8 bytes) */
    PL_UARG_I32,
    PL_UARG_U32,
    PL_UARG_I64,
    PL_UARG_U64,
    PL_UARG_F32,
    PL_UARG_F64,
} pl_uarg_type;

typedef struct pl_uarg {
    pl_uarg_type type;
    const char *text; /* as written ("x_dev", "f32:1.5", "elements(x)") */
    pl_pos pos;
    int buffer; /* PL_UARG_BUF: spec->buffers index */
    union {
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        float f32;
        double f64;
    } v; /* scalars: the value, resolved at check time */
} pl_uarg;

/* Size in bytes of an argument of this type as a kernel parameter. */
size_t pl_uarg_size(pl_uarg_type t);
const char *pl_uarg_type_name(pl_uarg_type t); /* "buffer", "i32", ... */

typedef enum pl_umod_format {
    PL_UMOD_SOURCE,
    PL_UMOD_PTX,
    PL_UMOD_CUBIN,
    PL_UMOD_FATBIN
} pl_umod_format;

typedef struct pl_ukern {
    pl_umod_format format;
    const char *text; /* the CUDA source or the module's bytes (arena); NUL-terminated */
    size_t len;
    const char *name;   /* as written: "kernels/my.cu", "x.ptx"; "code" for inline code */
    const char *path;   /* resolved against the pipeline's directory (NULL for code:) */
    const char *srcdir; /* the source's directory (includes relative to it), or spec->dir */
    /* Where NVRTC's line 1, column 1 of inline code is in the pipeline file (line 0: not known,
     * positions are then given relative to the code). */
    pl_pos code_origin;
    pl_pos src_pos; /* of the source:/code:/module: value */
    const char *function;
    pl_pos function_pos;
    unsigned grid[3], block[3]; /* evaluated; unused dimensions are 1 */
    unsigned shared;            /* dynamic shared memory, bytes */
    pl_pos block_pos, shared_pos;
    pl_uarg *args;
    int n_args;
    pl_pos args_pos;
    const char **options; /* NVRTC flags as written */
    int n_options;
    const char **includes; /* header folders, resolved against the pipeline's directory */
    int n_includes;
    /* The host reference: a Lua function over the stage's buffers (host_fn NULL: none). */
    const char *host_fn;
    const char *lua_text; /* the script defining it (arena) */
    size_t lua_len;
    const char *lua_chunk; /* "@file.lua" or "=host" */
    pl_pos host_pos;
    /* Set by compiling (sources) or reading (modules) at check time. */
    const void *image; /* cubin (sources, cubin), PTX text, or fatbin */
    size_t image_size;
    const char *lowered;  /* the symbol to look up: NVRTC's lowered name, or `function` */
    int arch;             /* sources: the SM the image was compiled for (90 = sm_90) */
    const char *warnings; /* the compiler's warnings, positioned, or NULL (arena) */
    const char *info;     /* "stage 'k': kernels/my.cu for sm_90 compiled with NVRTC (...)" */
} pl_ukern;

/* The kernel kind's user-kernel side (stages/kernel/kernel_user.c), called by
 * stages/kernel/kernel.c. */
bool pl_ukern_wanted(const pl_stage *st); /* source:, code: or module: is given */
pl_status pl_ukern_bind(pl_spec *spec, pl_stage *st, pl_ukern **out, pl_error *err);
pl_status pl_ukern_validate(const pl_spec *spec, const pl_stage *st, const pl_ukern *uk,
                            pl_error *err);
pl_status pl_ukern_open(const pl_run_env *env, const pl_stage *st, const pl_ukern *uk, void **state,
                        pl_error *err);
pl_status pl_ukern_close(const pl_run_env *env, const pl_stage *st, const pl_ukern *uk,
                         void *state);
pl_status pl_ukern_run_host(pl_stage_ctx *ctx, const pl_ukern *uk, pl_error *err);
pl_status pl_ukern_record(const pl_dev_ctx *ctx, const pl_ukern *uk, pl_error *err);
void pl_ukern_describe(const pl_ukern *uk, char *buf, size_t cap);

void pl_ukern_notes(const pl_ukern *uk, bool verbose, char *buf, size_t cap);

/* The SM user kernels are checked for: PIPECTL_ARCH from the environment ("sm_90" or "90"; the
 * CLI's --arch sets it), else 90. On a device, the device's own arch is used at load. */
int pl_ukern_default_arch(void);

#endif
