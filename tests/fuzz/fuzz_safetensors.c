/* fuzz_safetensors: libFuzzer target for safetensors files (stages/gpt2/pl_safetensors.c, the
 * gpt2 kind's weights). The input is a header and data: byte 0 == 0xFE, the rest is the whole
 * file (its own 8-byte length first); otherwise the header is the input up to its first 0xFF
 * byte (JSON never holds one), the data what follows, and the file is their length, header and
 * data. What opens must describe only bytes inside the file: every F32/F16/BF16 tensor is read
 * whole (and the rest is checked against the file's size); a bad file fails with PL_EINPUT and
 * "error: ..." (pl_fuzz_file.h). */
#include "pl_fuzz_file.h"
#include "pl_safetensors.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *path;
    uint64_t file_size;
    if (size >= 1 && data[0] == 0xFE) {
        path = pl_fuzz_write(0, "model.safetensors", data + 1, size - 1);
        file_size = size - 1;
    } else {
        const unsigned char *sep = memchr(data, 0xFF, size);
        size_t nh = sep ? (size_t)(sep - data) : size, nd = sep ? size - nh - 1 : 0;
        unsigned char *buf = malloc(8 + size);
        if (!buf) return 0;
        for (int i = 0; i < 8; i++)
            buf[i] = (unsigned char)((uint64_t)nh >> (8 * i));
        memcpy(buf + 8, data, nh);
        if (nd) memcpy(buf + 8 + nh, sep + 1, nd);
        path = pl_fuzz_write(0, "model.safetensors", buf, 8 + nh + nd);
        file_size = 8 + nh + nd;
        free(buf);
    }
    pl_error err;
    pl_error_clear(&err);
    pl_st_file *f = NULL;
    pl_status st = pl_st_open(path, &f, &err);
    if (st != PL_OK) {
        if (f) abort();
        pl_fuzz_want_input_error(&err, st, "pl_st_open");
        return 0;
    }
    for (int i = 0; i < pl_st_count(f); i++) {
        const pl_st_tensor *t = pl_st_at(f, i);
        if (pl_st_find(f, t->name) == NULL || t->end < t->begin || t->end > file_size) abort();
        if (t->dtype == PL_ST_OTHER) continue;
        int64_t n = (int64_t)((t->end - t->begin) / (t->dtype == PL_ST_F32 ? 4 : 2));
        float *dst = malloc((size_t)(n > 0 ? n : 1) * sizeof *dst);
        if (!dst) continue;
        st = pl_st_read_f32(f, t, dst, n, &err);
        free(dst);
        if (st != PL_OK) {
            fprintf(stderr, "tensor '%s' opened but does not read: %s\n", t->name, err.msg);
            abort();
        }
    }
    pl_st_close(f);
    return 0;
}
