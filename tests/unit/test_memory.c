/* test_memory: the warning check gives when the persistent buffers alone exceed the machine's
 * memory (pl_spec_check_memory, exact text for a given memory size), and what the host
 * allocator's out-of-memory error says would help (persistent buffer: that buffer; per-batch: the
 * depth and the batch), made to fail under an address-space limit. */
#include <stdint.h>
#include <sys/resource.h>
#include <unistd.h>

#include "pl_buffers.h"
#include "pl_diag.h"
#include "pl_test.h"
#include "pl_test_spec.h"

#define GIB (UINT64_C(1) << 30)

static void test_warning_host(void)
{
    pl_spec *s = t_chain();
    t_buf(s, "w", PL_HOST, PL_F32, INT64_C(16106127360), true, PL_INIT_ZEROS); /* 60 GiB */
    t_buf(s, "v", PL_HOST, PL_F32, 1 << 20, true, PL_INIT_ZEROS);
    CHECK_EQ_INT(t_check(s, NULL), PL_OK);
    pl_diags d;
    pl_diags_init(&d, 8);
    CHECK_EQ_INT(pl_spec_check_memory(s, 100 * GIB, &d), 0);
    CHECK_EQ_INT(d.n, 0);
    CHECK_EQ_INT(pl_spec_check_memory(s, 23 * GIB, &d), 1);
    CHECK_EQ_INT(d.n, 1);
    CHECK_EQ_INT(pl_diags_errors(&d), 0);
    CHECK(d.items[0].severity == PL_SEV_WARNING);
    CHECK_EQ_INT(d.items[0].err.status, PL_ENOMEM);
    CHECK_EQ_INT(d.items[0].err.line, 20);
    CHECK_STR(d.items[0].err.msg,
              "t.yaml:20:3: warning: the persistent buffers alone take 60.0 GiB, more than this "
              "machine's physical memory, 23.0 GiB (sysconf: _SC_PHYS_PAGES x _SC_PAGESIZE): 'w' "
              "60.0 GiB (host), 'v' 4.0 MiB (host); a run cannot allocate them, on either "
              "executor: make them smaller, or per-batch (without persistent: true) where their "
              "data can come a batch at a time");
    pl_diags_fini(&d);
    CHECK_EQ_INT(pl_spec_check_memory(s, 0, &d), 0); /* memory unknown: nothing to say */
    pl_spec_free(s);
}

static void test_warning_device_and_many(void)
{
    pl_spec *s = t_chain();
    t_buf(s, "a", PL_HOST, PL_F32, 1 << 28, true, PL_INIT_ZEROS);               /* 1 GiB */
    t_buf(s, "b", PL_DEVICE, PL_F32, INT64_C(5368709120), true, PL_INIT_ZEROS); /* 20 GiB */
    t_buf(s, "c", PL_DEVICE, PL_F32, 1 << 29, true, PL_INIT_ZEROS);             /* 2 GiB */
    t_buf(s, "d", PL_DEVICE, PL_F32, 1 << 29, true, PL_INIT_ZEROS);             /* 2 GiB, later */
    t_buf(s, "e", PL_HOST, PL_F32, 1 << 20, true, PL_INIT_ZEROS);
    t_buf(s, "f", PL_HOST, PL_F32, 1 << 20, true, PL_INIT_ZEROS);
    CHECK_EQ_INT(t_check(s, NULL), PL_OK);
    pl_diags d;
    pl_diags_init(&d, 8);
    CHECK_EQ_INT(pl_spec_check_memory(s, 23 * GIB, &d), 1);
    CHECK_STR(d.items[0].err.msg,
              "t.yaml:21:3: warning: the persistent buffers alone take 25.0 GiB, more than this "
              "machine's physical memory, 23.0 GiB (sysconf: _SC_PHYS_PAGES x _SC_PAGESIZE): 'b' "
              "20.0 GiB (device), 'c' 2.0 GiB (device), 'd' 2.0 GiB (device), 'a' 1.0 GiB (host) "
              "and 2 more (8.0 MiB); the host executor keeps device buffers in host memory too, so "
              "a run there cannot allocate them (on the GPU executor their limit is the GPU's "
              "memory, checked where a GPU is present): make them smaller, or per-batch (without "
              "persistent: true) where their data can come a batch at a time");
    pl_diags_fini(&d);
    /* Against the GPU's memory: only the device buffers count (24 GiB), named largest first. */
    CHECK(pl_spec_persistent_device_bytes(s) == 24 * GIB);
    pl_diags_init(&d, 8);
    CHECK_EQ_INT(pl_spec_check_device_memory(s, 141 * GIB, &d), 0);
    CHECK_EQ_INT(pl_spec_check_device_memory(s, 0, &d), 0); /* memory unknown: nothing to say */
    CHECK_EQ_INT(pl_spec_check_device_memory(s, 16 * GIB, &d), 1);
    CHECK(d.items[0].severity == PL_SEV_WARNING);
    CHECK_STR(d.items[0].err.msg,
              "t.yaml:21:3: warning: the persistent device buffers alone take 24.0 GiB, more than "
              "GPU 0's memory, 16.0 GiB: 'b' 20.0 GiB (device), 'c' 2.0 GiB (device), 'd' 2.0 GiB "
              "(device); the GPU executor cannot allocate them (each is one allocation, not one "
              "per slot: a lower depth does not help): make them smaller, or per-batch (without "
              "persistent: true) where their data can come a batch at a time");
    pl_diags_fini(&d);
    pl_spec_free(s);
}

/* Allocations past `extra` bytes more than the process maps now fail (RLIMIT_AS). */
static bool limit_address_space(uint64_t extra, struct rlimit *old)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0;
    if (!f) return false;
    int ok = fscanf(f, "%llu", &pages) == 1;
    fclose(f);
    if (!ok || getrlimit(RLIMIT_AS, old) != 0) return false;
    struct rlimit lim = *old;
    lim.rlim_cur = (rlim_t)(pages * (unsigned long long)sysconf(_SC_PAGESIZE) + extra);
    return setrlimit(RLIMIT_AS, &lim) == 0;
}

static void test_oom_hints(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    printf("oom hints: skipped under a sanitizer (it reserves address space itself)\n");
    return;
#endif
    struct rlimit old;
    /* Per-batch: four 256 MiB buffers a slot, eight slots, 3 GiB of room. */
    pl_spec *s = t_chain_n(1 << 26);
    CHECK_EQ_INT(t_check(s, NULL), PL_OK);
    if (!limit_address_space(3 * GIB, &old)) {
        printf("oom hints: skipped (cannot set RLIMIT_AS)\n");
        pl_spec_free(s);
        return;
    }
    pl_buffers *bufs = NULL;
    pl_error err;
    pl_error_clear(&err);
    CHECK_EQ_INT(pl_buffers_new(s, 8, NULL, false, 0, &bufs, &err), PL_ENOMEM);
    CHECK(bufs == NULL);
    CHECK(strstr(err.msg, "error: out of memory allocating per-batch buffer '") == err.msg);
    CHECK(strstr(err.msg, "(256.0 MiB, shape [67108864] f32) at depth 8: every slot holds a copy "
                          "of each per-batch buffer, 1.0 GiB a slot, so depth 8 takes 8.0 GiB "
                          "with the persistent buffers") != NULL);
    CHECK(strstr(err.msg, "lower the depth (depth 1 takes 1.0 GiB; at most ") != NULL);
    CHECK(strstr(err.msg, "of physical memory") != NULL);
    setrlimit(RLIMIT_AS, &old);
    pl_spec_free(s);

    /* Persistent: one copy whatever the depth, so the depth is not what the message offers. */
    s = t_chain();
    t_buf(s, "w", PL_HOST, PL_F32, INT64_C(2147483648), true, PL_INIT_ZEROS); /* 8 GiB */
    CHECK_EQ_INT(t_check(s, NULL), PL_OK);
    if (limit_address_space(2 * GIB, &old)) {
        pl_error_clear(&err);
        CHECK_EQ_INT(pl_buffers_new(s, 2, NULL, false, 0, &bufs, &err), PL_ENOMEM);
        CHECK(strstr(err.msg, "error: out of memory allocating persistent buffer 'w' (8.0 GiB, "
                              "shape [2147483648] f32): a persistent buffer has one copy "
                              "whatever the depth, so a lower depth does not help; make 'w' "
                              "smaller, or per-batch (without persistent: true) if its data can "
                              "come a batch at a time (the persistent buffers take 8.0 GiB in "
                              "all") == err.msg);
        setrlimit(RLIMIT_AS, &old);
    }
    pl_spec_free(s);
}

int main(void)
{
    (void)t_after; /* pl_test_spec.h's, unused here */
    test_warning_host();
    test_warning_device_and_many();
    test_oom_hints();
    PL_TEST_DONE();
}
