/* test_kimage: reading kernels and parameters out of PTX without a GPU (stages/kernel/pl_kimage.c),
 * on the committed example module pipelines/kernels/scale.ptx and on hand-written PTX. (Cubins are
 * tested through pipectl check in tests/ukern, which builds one with nvcc.) */
#include <stdint.h>

#include "pl_kimage.h"
#include "pl_test.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 20);
    if (buf) fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    return buf;
}

int main(void)
{
    char *ptx = slurp("pipelines/kernels/scale.ptx");
    CHECK(ptx != NULL);
    if (!ptx) PL_TEST_DONE();
    char list[256];
    CHECK(pl_kimage_ptx_entries(ptx, "scale", list, sizeof list));
    CHECK_STR(list, "scale");
    CHECK(!pl_kimage_ptx_entries(ptx, "scal", list, sizeof list));
    size_t sizes[8] = {0};
    int n = 0;
    CHECK(pl_kimage_ptx_params(ptx, "scale", sizes, 8, &n));
    CHECK_EQ_INT(n, 4);
    CHECK_EQ_INT(sizes[0], 8);
    CHECK_EQ_INT(sizes[1], 8);
    CHECK_EQ_INT(sizes[2], 4);
    CHECK_EQ_INT(sizes[3], 8);
    free(ptx);

    const char *hand = ".visible .entry a(\n\t.param .u32 a_0,\n\t.param .align 8 .b8 a_1[24],\n"
                       "\t.param .u64 .ptr .global .align 4 a_2\n)\n{ ret; }\n"
                       ".visible .entry b()\n{ ret; }\n";
    CHECK(pl_kimage_ptx_entries(hand, "b", list, sizeof list));
    CHECK_STR(list, "a, b");
    CHECK(pl_kimage_ptx_params(hand, "a", sizes, 8, &n));
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(sizes[0], 4);
    CHECK_EQ_INT(sizes[1], 24);
    CHECK_EQ_INT(sizes[2], 8);
    CHECK(pl_kimage_ptx_params(hand, "b", sizes, 8, &n));
    CHECK_EQ_INT(n, 0);
    CHECK(!pl_kimage_ptx_params(hand, "c", sizes, 8, &n));
    /* Not an ELF, or a cubin without the kernel: not understood, so left to the device. */
    CHECK(!pl_kimage_cubin_params(hand, strlen(hand), "a", sizes, 8, &n));
    PL_TEST_DONE();
}
