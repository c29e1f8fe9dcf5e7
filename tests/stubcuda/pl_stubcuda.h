/* pl_stubcuda: the object registry of the no-device CUDA stand-in (tests/stubcuda, built as
 * libcudart.so.N, libcublas.so.N and libcublasLt.so.N). Every object the stand-in hands out is
 * entered here, so that a call on an object already destroyed, a destroy of one never made or
 * made as another kind, and an object still alive at exit are each reported.
 *
 * Handles (streams, events, graphs, ...) are the addresses of registry records, never freed: a
 * handle destroyed stays known as destroyed, so a second destroy or a late use is named rather
 * than read from freed memory. Allocations are keyed by the address handed out. All of it is
 * behind one mutex: the executor calls CUDA from its issue thread and its workers.
 *
 * At exit, with PL_STUBCUDA_CHECK=1 in the environment, the registry prints one line to stderr
 * ("pl_stubcuda: ok: ..." or "pl_stubcuda: FAIL: ...", then the objects left and the misuses) and
 * ends the process with _exit(3) when anything was left or misused. PL_STUBCUDA_COUNTS=1 prints
 * how many objects of each kind were made and destroyed. The libraries that link this one
 * (libcublas, libcublasLt) use the same registry through the exported pl_stubcuda_* functions. */
#ifndef PL_STUBCUDA_H
#define PL_STUBCUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* X(id, name, owned): `owned` objects are the caller's to destroy and are checked at exit; the
 * others belong to the graph that holds them (nodes, conditional bodies) and are only validated. */
#define PL_STUB_KINDS(X)                                                                           \
    X(STREAM, "stream", 1)                                                                         \
    X(EVENT, "event", 1)                                                                           \
    X(GRAPH, "graph", 1)                                                                           \
    X(GRAPH_EXEC, "graph exec", 1)                                                                 \
    X(DEVICE_MEM, "device allocation (cudaMalloc)", 1)                                             \
    X(HOST_MEM, "pinned host allocation (cudaHostAlloc)", 1)                                       \
    X(HOST_REG, "host registration (cudaHostRegister)", 1)                                         \
    X(CUBLAS, "cuBLAS handle", 1)                                                                  \
    X(CUBLASLT, "cuBLASLt handle", 1)                                                              \
    X(LT_DESC, "cuBLASLt matmul descriptor", 1)                                                    \
    X(LT_LAYOUT, "cuBLASLt matrix layout", 1)                                                      \
    X(LT_PREF, "cuBLASLt matmul preference", 1)                                                    \
    X(BODY_GRAPH, "conditional node body graph", 0)                                                \
    X(NODE, "graph node", 0)

typedef enum pl_stub_kind {
#define PL__STUB_ENUM(id, name, owned) PL_STUB_##id,
    PL_STUB_KINDS(PL__STUB_ENUM)
#undef PL__STUB_ENUM
        PL_STUB_KIND_COUNT
} pl_stub_kind;

typedef struct pl_stub_capture pl_stub_capture;

/* One object. The fields after `live` are the stand-in's per-kind state, read and written by
 * cudart.c under pl_stubcuda_lock. */
typedef struct pl_stub_obj {
    pl_stub_kind kind;
    bool live;
    uint64_t seq;         /* creation order, from 1: names the object in the exit report */
    const char *made_by;  /* the entry point that made it (static storage) */
    uintptr_t key;        /* its handle, or the address handed out for memory */
    void *base;           /* memory: what calloc returned (the address is aligned up from it) */
    size_t size;          /* memory: the size asked for */
    pl_stub_capture *cap; /* stream: the capture it is part of; event: the one it was recorded in */
    void *extra;          /* node: its conditional body graphs (an array of pl_stub_obj *) */
    struct pl_stub_obj *next; /* every object ever made, newest first */
} pl_stub_obj;

/* The registry's mutex: held by each entry point that reads or changes an object's state. Not
 * recursive; the functions below take it themselves and must be called without it. */
void pl_stubcuda_lock(void);
void pl_stubcuda_unlock(void);

/* A new handle object of `kind`, made by `fn`: its address is the handle. NULL when out of
 * memory. */
pl_stub_obj *pl_stubcuda_new(pl_stub_kind kind, const char *fn);

/* `size` bytes of zeroed host memory aligned to 256 (as cudaMalloc's), entered as `kind`; NULL
 * when out of memory. */
void *pl_stubcuda_alloc(pl_stub_kind kind, size_t size, const char *fn);

/* Records a registration of caller memory at `p` (cudaHostRegister). false: `p` is registered. */
bool pl_stubcuda_register(const void *p, size_t size, const char *fn);

/* The live object of `kind` with handle `h` (for memory, the address handed out), or NULL after
 * reporting a misuse naming `fn`: unknown, destroyed, or another kind. */
pl_stub_obj *pl_stubcuda_find(const void *h, pl_stub_kind kind, const char *fn);

/* Destroys the live object of `kind` at `h` (memory is freed). false after reporting a misuse, as
 * pl_stubcuda_find. A registration is released with kind PL_STUB_HOST_REG and its address. */
bool pl_stubcuda_destroy(const void *h, pl_stub_kind kind, const char *fn);

/* Reports a misuse: printed to stderr at once, counted, and failing the exit check. */
void pl_stubcuda_misuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* As pl_stubcuda_find and pl_stubcuda_new, for callers that hold pl_stubcuda_lock. */
pl_stub_obj *pl_stubcuda_find_locked(const void *h, pl_stub_kind kind, const char *fn);
pl_stub_obj *pl_stubcuda_new_locked(pl_stub_kind kind, const char *fn);

/* The record of handle `h` of whatever kind, live or not, or NULL; reports nothing. Caller holds
 * pl_stubcuda_lock. */
pl_stub_obj *pl_stubcuda_peek_locked(const void *h);

#endif
