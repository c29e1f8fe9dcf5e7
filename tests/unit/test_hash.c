/* test_hash: pl_hash known vectors (computed by an independent Python version of the formula in
 * pl_hash.h), chunked and streaming forms equal to the one-shot hash, and pl_rng determinism. */
#include <stdint.h>

#include "pl_hash.h"
#include "pl_rng.h"
#include "pl_test.h"

static void test_known_vectors(void)
{
    unsigned char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    CHECK(pl_hash("", 0) == 0);
    CHECK(pl_hash("a", 1) == UINT64_C(0xf16e9d5261d3c456));
    CHECK(pl_hash("abc", 3) == UINT64_C(0xf98343857c1824dd));
    CHECK(pl_hash("abcdefgh", 8) == UINT64_C(0xd68f1fdda6f523c3));
    CHECK(pl_hash("pipectl checksum!", 17) == UINT64_C(0xcc36064514b80f66));
    CHECK(pl_hash(all, 256) == UINT64_C(0x40e2dbc3999b5384));
}

static void test_chunks_and_stream(void)
{
    unsigned char buf[1000];
    for (int i = 0; i < 1000; i++)
        buf[i] = (unsigned char)(i * 37 + 11);
    uint64_t whole = pl_hash(buf, sizeof buf);
    /* Chunks at 8-byte boundaries, summed in any order (what a GPU does with atomicAdd). */
    uint64_t s = pl_hash_sum(buf + 512, 488, 64) + pl_hash_sum(buf, 512, 0);
    CHECK(pl_hash_final(s, 1000) == whole);
    /* Streaming in uneven pieces. */
    for (int step = 1; step < 20; step += 3) {
        pl_hash_stream hs = {0};
        for (int off = 0; off < 1000; off += step)
            pl_hash_stream_update(&hs, buf + off, (size_t)(off + step <= 1000 ? step : 1000 - off));
        CHECK(pl_hash_stream_final(&hs) == whole);
    }
    /* Order matters through the word index: swapping two words changes the hash. */
    unsigned char sw[16];
    memcpy(sw, buf + 8, 8);
    memcpy(sw + 8, buf, 8);
    CHECK(pl_hash(sw, 16) != pl_hash(buf, 16));
    /* Length matters: trailing zero bytes change it. */
    unsigned char z[9] = {1, 2, 3, 0, 0, 0, 0, 0, 0};
    CHECK(pl_hash(z, 3) != pl_hash(z, 9));
}

static void test_rng(void)
{
    float a[64], b[64];
    uint64_t k = pl_rng_key(42, PL_RNG_SOURCE, 3, 7);
    pl_rng_fill(a, PL_F32, 64, k, 0, -1, 1);
    pl_rng_fill(b, PL_F32, 32, k, 32, -1, 1); /* element 32.. computed directly */
    CHECK(memcmp(a + 32, b, 32 * sizeof(float)) == 0);
    int distinct = 0;
    for (int i = 0; i < 64; i++) {
        CHECK(a[i] >= -1 && a[i] < 1);
        distinct += i > 0 && a[i] != a[i - 1];
    }
    CHECK(distinct > 60);
    CHECK(pl_rng_key(42, PL_RNG_SOURCE, 3, 7) != pl_rng_key(42, PL_RNG_SOURCE, 3, 8));
    CHECK(pl_rng_key(42, PL_RNG_SOURCE, 3, 7) != pl_rng_key(43, PL_RNG_SOURCE, 3, 7));
    int32_t iv[1000];
    pl_rng_fill(iv, PL_I32, 1000, k, 0, 5, 10);
    int seen[5] = {0};
    for (int i = 0; i < 1000; i++) {
        CHECK(iv[i] >= 5 && iv[i] < 10);
        if (iv[i] >= 5 && iv[i] < 10) seen[iv[i] - 5]++;
    }
    for (int i = 0; i < 5; i++)
        CHECK(seen[i] > 100);
}

int main(void)
{
    test_known_vectors();
    test_chunks_and_stream();
    test_rng();
    PL_TEST_DONE();
}
