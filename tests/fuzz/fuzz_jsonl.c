/* fuzz_jsonl: libFuzzer target for the source kind's text records (stages/source_text.c): JSONL
 * (one object per line, its "text" field a row) and plain text lines, read through the buffered
 * input (pl_src_in) as a run reads them, each record copied into a u8 row. Byte 0 of the input
 * picks the format (bit 0: JSONL), whether long records are cut (bit 1: truncate) and the row's
 * length L (bits 2-7: 1 to 64 bytes, so records cross rows' ends); the rest is the file, read
 * twice (record by record, then counted as check time counts it; the counts must agree). A cut
 * JSONL record stays valid UTF-8 (jansson's strings are); a bad file fails with PL_EINPUT and
 * "error: ..." (pl_fuzz_file.h). */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "pl_bpe.h"
#include "pl_fuzz_file.h"
#include "pl_source.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static int pl__memfd(const unsigned char *data, size_t n)
{
    int fd = memfd_create("fuzz.jsonl", 0);
    if (fd < 0 || (n && write(fd, data, n) != (ssize_t)n) || lseek(fd, 0, SEEK_SET) != 0) {
        perror("memfd");
        abort();
    }
    return fd;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 1) return 0;
    pl_source_opts o;
    memset(&o, 0, sizeof o);
    o.format = data[0] & 1 ? PL_SRC_JSONL : PL_SRC_TEXT;
    o.truncate = (data[0] & 2) != 0;
    o.field = "text";
    int64_t shape[2] = {1, 1 + (data[0] >> 2)};
    pl_buffer to;
    memset(&to, 0, sizeof to);
    to.name = "rows";
    to.dtype = PL_U8;
    to.rank = 2;
    to.shape[0] = shape[0];
    to.shape[1] = shape[1];
    char row[64];
    int32_t len = 0;
    int fd = pl__memfd(data + 1, size - 1);
    pl_error err;
    pl_error_clear(&err);
    pl_src_in in;
    if (pl_src_in_init(&in, fd, "fuzz.jsonl", &err) != PL_OK) abort();
    int64_t records = 0;
    pl_status st = PL_OK;
    for (;;) {
        const char *s;
        size_t n;
        bool more;
        st = pl_source_text_next(&o, &in, &s, &n, &more, &err);
        if (st != PL_OK || !more) break;
        st = pl_source_text_row(&o, &in, &to, s, n, row, &len, 0, &err);
        if (st != PL_OK) break;
        if (len < 0 || len > shape[1]) abort();
        if (o.format == PL_SRC_JSONL && pl_bpe_utf8_valid(row, (size_t)len) != (size_t)len) {
            fprintf(stderr, "a cut JSONL record is not valid UTF-8 (%d bytes)\n", (int)len);
            abort();
        }
        for (int64_t i = len; i < shape[1]; i++)
            if (row[i] != 0) abort(); /* NUL-padded */
        records++;
    }
    pl_src_in_fini(&in);
    pl_fuzz_want_input_error(&err, st, "the record reader");
    /* Check time reads the same stream the same way. */
    if (lseek(fd, 0, SEEK_SET) != 0) abort();
    pl_error err2;
    pl_error_clear(&err2);
    if (pl_src_in_init(&in, fd, "fuzz.jsonl", &err2) != PL_OK) abort();
    int64_t counted = 0;
    pl_status st2 = pl_source_text_count(&o, &in, &to, &counted, &err2);
    pl_src_in_fini(&in);
    close(fd);
    pl_fuzz_want_input_error(&err2, st2, "pl_source_text_count");
    if (st2 != st || counted != records || (st != PL_OK && strcmp(err.msg, err2.msg) != 0)) {
        fprintf(stderr, "a run read %lld records (%s), check time %lld (%s)\n", (long long)records,
                err.msg, (long long)counted, err2.msg);
        abort();
    }
    return 0;
}
