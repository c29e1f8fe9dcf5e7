/* test_json_sha: SHA-256 against the FIPS 180-4 / NIST example vectors (memory and file forms),
 * pl_json strings from any bytes (invalid UTF-8 replaced by U+FFFD, the same way every time),
 * checksum hex round trips, and the typed getters' messages. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pl_json.h"
#include "pl_sha256.h"
#include "pl_test.h"

static void test_sha256(void)
{
    char hex[PL_SHA256_HEX];
    pl_error err;
    CHECK(pl_sha256("abc", 3, hex, &err) == PL_OK);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(pl_sha256("", 0, hex, &err) == PL_OK);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    CHECK(pl_sha256(m448, strlen(m448), hex, &err) == PL_OK);
    CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 =
        "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnop"
        "qklmnopqrlmnopqrsmnopqrstnopqrstu";
    CHECK(pl_sha256(m896, strlen(m896), hex, &err) == PL_OK);
    CHECK_STR(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    /* One million 'a': through a file, read in chunks. */
    char path[] = "/tmp/pl_test_sha_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    static char a[1000000];
    memset(a, 'a', sizeof a);
    CHECK(write(fd, a, sizeof a) == (ssize_t)sizeof a);
    close(fd);
    unsigned long long bytes = 0;
    CHECK(pl_sha256_file(path, hex, &bytes, &err) == PL_OK);
    CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    CHECK_EQ_INT(bytes, 1000000);
    unlink(path);
    CHECK(pl_sha256_file(path, hex, NULL, &err) == PL_EIO);
    CHECK(strstr(err.msg, "cannot read") != NULL);
}

static void test_strings(void)
{
    /* Valid UTF-8 is kept; each byte of an invalid sequence becomes U+FFFD. */
    json_t *v = pl_json_strn("caf\xc3\xa9", 5);
    CHECK_STR(json_string_value(v), "caf\xc3\xa9");
    json_decref(v);
    const char bad[] = "a\xff"
                       "b\xc3"
                       "c\xed\xa0\x80"; /* a stray byte, a cut sequence, a surrogate */
    v = pl_json_strn(bad, sizeof bad - 1);
    CHECK(v != NULL);
    CHECK_STR(json_string_value(v), "a\xef\xbf\xbd"
                                    "b\xef\xbf\xbd"
                                    "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    char *dump = json_dumps(v, JSON_ENCODE_ANY);
    CHECK(dump != NULL);
    json_t *back = dump ? json_loads(dump, JSON_DECODE_ANY, NULL) : NULL;
    CHECK(back && json_equal(back, v));
    free(dump);
    json_decref(back);
    json_decref(v);
    /* NUL bytes survive as \u0000. */
    v = pl_json_strn("x\0y", 3);
    CHECK_EQ_INT(json_string_length(v), 3);
    dump = json_dumps(v, JSON_ENCODE_ANY);
    CHECK(dump && strcmp(dump, "\"x\\u0000y\"") == 0);
    free(dump);
    json_decref(v);
    v = pl_json_str(NULL);
    CHECK(json_is_null(v));
    json_decref(v);
}

static void test_hex_and_getters(void)
{
    json_t *h = pl_json_hex64(UINT64_C(0x00ab00cd00ef0012));
    CHECK_STR(json_string_value(h), "0x00ab00cd00ef0012");
    uint64_t x = 0;
    CHECK(pl_json_parse_hex64(json_string_value(h), &x) && x == UINT64_C(0x00ab00cd00ef0012));
    json_decref(h);
    CHECK(!pl_json_parse_hex64("0x", &x));
    CHECK(!pl_json_parse_hex64("12", &x));
    CHECK(!pl_json_parse_hex64("0x00000000000000000", &x)); /* 17 digits */
    CHECK(!pl_json_parse_hex64("0xzz", &x));
    json_t *o = json_pack("{s:s, s:i}", "a", "text", "n", 7);
    pl_error err;
    const char *s;
    int64_t n;
    CHECK(pl_json_get_str(o, "a", "m.json", &s, &err) == PL_OK && strcmp(s, "text") == 0);
    CHECK(pl_json_get_int(o, "n", "m.json", &n, &err) == PL_OK && n == 7);
    CHECK(pl_json_get_int(o, "a", "m.json", &n, &err) == PL_EINPUT);
    CHECK_STR(err.msg, "error: m.json: 'a' must be an integer");
    CHECK(pl_json_get_str(o, "zz", "m.json", &s, &err) == PL_EINPUT);
    CHECK_STR(err.msg, "error: m.json: 'zz' is missing (expected a string)");
    json_decref(o);
}

static void test_files(void)
{
    char dir[] = "/tmp/pl_test_json_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char p[256];
    snprintf(p, sizeof p, "%s/x.json", dir);
    json_t *o = json_pack("{s:[i,i]}", "k", 1, 2), *back = NULL;
    pl_error err;
    CHECK(pl_json_write_file(p, o, &err) == PL_OK);
    CHECK(pl_json_read_file(p, NULL, &back, &err) == PL_OK && json_equal(o, back));
    json_decref(back);
    json_decref(o);
    FILE *f = fopen(p, "w");
    fputs("{\"k\": [1,\n  2", f);
    fclose(f);
    CHECK(pl_json_read_file(p, "settings", &back, &err) == PL_EINPUT);
    CHECK(strstr(err.msg, "x.json:2:") != NULL &&
          strstr(err.msg, ": error: settings: not valid JSON: ") != NULL);
    unlink(p);
    rmdir(dir);
}

int main(void)
{
    test_sha256();
    test_strings();
    test_hex_and_getters();
    test_files();
    PL_TEST_DONE();
}
