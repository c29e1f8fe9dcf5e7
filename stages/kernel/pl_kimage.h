/* pl_kimage: what a compiled kernel image says about its kernels, read without a GPU, so
 * `pipectl check` can name a PTX module's kernels and check args: against PTX and cubin
 * parameter lists (NVRTC's output is a cubin too). Fatbins are left to the device. */
#ifndef PL_KIMAGE_H
#define PL_KIMAGE_H

#include <stdbool.h>
#include <stddef.h>

/* The `.entry` names of PTX text, ", "-separated, into out. Returns whether `fn` is one. */
bool pl_kimage_ptx_entries(const char *ptx, const char *fn, char *out, size_t cap);
/* The parameter sizes of PTX kernel `fn` (".param .u64 a", ".param .align 8 .b8 s[16]"): *n of
 * them into sizes; false when the entry is not found or a parameter is not understood. */
bool pl_kimage_ptx_params(const char *ptx, const char *fn, size_t *sizes, int cap, int *n);
/* The parameter sizes of kernel `symbol` (its lowered name) in a cubin: *n of them into sizes
 * (zeroed by the caller); false when anything is not as expected (then only the device knows). */
bool pl_kimage_cubin_params(const void *image, size_t size, const char *symbol, size_t *sizes,
                            int cap, int *n);

#endif
