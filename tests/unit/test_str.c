/* test_str: file names for human output (pl_name_str: bare, quoted, escaped, shortened, never cut
 * at the end), the middle cut, byte counts with separators, and error records that keep the end of
 * a message too long for them. */
#include <stdint.h>

#include "pl_status.h"
#include "pl_str.h"
#include "pl_test.h"

static int ends(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static void test_name_str(void)
{
    char b[256];
    CHECK_STR(pl_name_str("out/x.npy", 0, b, sizeof b), "out/x.npy");
    CHECK_STR(pl_name_str("out/x.npy", PL_NAME_QUOTE, b, sizeof b), "\"out/x.npy\"");
    CHECK_STR(pl_name_str("", 0, b, sizeof b), "\"\"");
    CHECK_STR(pl_name_str(NULL, 0, b, sizeof b), "\"\"");
    CHECK_STR(pl_name_str("out\nx.npy", 0, b, sizeof b), "\"out\\nx.npy\"");
    CHECK_STR(pl_name_str("a b", 0, b, sizeof b), "\"a b\"");
    CHECK_STR(pl_name_str("it's", 0, b, sizeof b), "\"it's\"");
    CHECK_STR(pl_name_str("a\"b\\c\td\re", 0, b, sizeof b), "\"a\\\"b\\\\c\\td\\re\"");
    CHECK_STR(pl_name_str("bell\x07\x7f", 0, b, sizeof b), "\"bell\\x07\\x7f\"");
    /* Valid UTF-8 stays as it is; invalid bytes, overlong forms and C1 controls are escaped. */
    CHECK_STR(pl_name_str("caf\xc3\xa9.npy", 0, b, sizeof b), "caf\xc3\xa9.npy");
    CHECK_STR(pl_name_str("caf\xe9.npy", 0, b, sizeof b), "\"caf\\xe9.npy\"");
    CHECK_STR(pl_name_str("\xc0\xaf", 0, b, sizeof b), "\"\\xc0\\xaf\"");
    CHECK_STR(pl_name_str("\xed\xa0\x80", 0, b, sizeof b), "\"\\xed\\xa0\\x80\"");
    CHECK_STR(pl_name_str("x\xc2\x85y", 0, b, sizeof b), "\"x\\xc2\\x85y\"");
    CHECK_STR(pl_name_str("\xf0\x9f\x98\x80", 0, b, sizeof b), "\xf0\x9f\x98\x80");
    CHECK_STR(pl_name_str("cut\xe2\x80", 0, b, sizeof b), "\"cut\\xe2\\x80\"");
    CHECK(pl_name_safe("a.npy") && !pl_name_safe("a\n") && !pl_name_safe(""));
    /* Inside a message's own quotes: the same escapes, no quotes. */
    CHECK_STR(pl_name_str("out\nx.npy", PL_NAME_INSIDE, b, sizeof b), "out\\nx.npy");
    CHECK_STR(pl_name_str("a b", PL_NAME_INSIDE | PL_NAME_QUOTE, b, sizeof b), "a b");
}

static void test_name_short(void)
{
    char b[PL_NAME_SHORT_CAP], big[8192], want[256];
    memset(big, 'a', 4200);
    memcpy(big + 4200, "/out.npy", 9);
    pl_name_str(big, PL_NAME_SHORT | PL_NAME_QUOTE, b, sizeof b);
    snprintf(want, sizeof want, "\"%.40s\xe2\x80\xa6%.32s/out.npy\"", big, big);
    CHECK_STR(b, want);
    /* Short enough: unchanged. */
    memset(big, 'b', 96);
    big[96] = '\0';
    CHECK_STR(pl_name_str(big, PL_NAME_SHORT, b, sizeof b), big);
    /* The cut keeps whole characters: 50 two-byte characters, then 50 more. */
    char u[256] = "";
    for (int i = 0; i < 100; i++)
        strcat(u, "\xc3\xa9");
    pl_name_str(u, PL_NAME_SHORT, b, sizeof b);
    snprintf(want, sizeof want, "%.40s\xe2\x80\xa6%.40s", u, u);
    CHECK_STR(b, want);
    /* Escapes in the kept ends are whole, and the result always fits the worst case. */
    memset(big, '\n', 4000);
    big[4000] = '\0';
    pl_name_str(big, PL_NAME_SHORT, b, sizeof b);
    CHECK(strlen(b) == 2 + 40 * 2 + 3 + 40 * 2);
    memset(big, 0xff, 4000);
    pl_name_str(big, PL_NAME_SHORT, b, sizeof b);
    CHECK(strlen(b) == 2 + 40 * 4 + 3 + 40 * 4);
    /* A buffer too small for the whole name: cut in the middle, never at the end. */
    char small[40];
    memset(big, 'c', 500);
    memcpy(big + 500, "/end.npy", 9);
    pl_name_str(big, 0, small, sizeof small);
    CHECK(strlen(small) < sizeof small);
    CHECK(strstr(small, "\xe2\x80\xa6") != NULL);
    CHECK(strcmp(small + strlen(small) - 4, ".npy") == 0);
}

static void test_cut_middle_and_count(void)
{
    char b[64];
    CHECK_EQ_INT(pl_str_cut_middle("abcdefghij", 10, 3, 3, b, sizeof b), 9);
    CHECK_STR(b, "abc\xe2\x80\xa6hij");
    CHECK_EQ_INT(pl_str_cut_middle("abcdefghi", 9, 3, 3, b, sizeof b), 9);
    CHECK_STR(b, "abcdefghi");
    CHECK_STR(pl_str_count(0, b, sizeof b), "0");
    CHECK_STR(pl_str_count(999, b, sizeof b), "999");
    CHECK_STR(pl_str_count(4226, b, sizeof b), "4,226");
    CHECK_STR(pl_str_count(64424509440ull, b, sizeof b), "64,424,509,440");
}

/* A message past PL_ERROR_MSG_MAX keeps its start (the position) and its end (the reason). */
static void test_error_keeps_reason(void)
{
    static char path[5000];
    memset(path, 'p', sizeof path - 1);
    pl_error e;
    pl_pos pos = {"f.yaml", 3, 7};
    pl_error_at(&e, PL_EINPUT, pos, "cannot create '%s': %s", path, "File name too long");
    CHECK(strncmp(e.msg, "f.yaml:3:7: error: cannot create 'ppp", 37) == 0);
    size_t n = strlen(e.msg);
    CHECK(n < PL_ERROR_MSG_MAX);
    CHECK(n > PL_ERROR_MSG_MAX - 16);
    CHECK(ends(e.msg, "ppp': File name too long"));
    CHECK(strstr(e.msg, "pp\xe2\x80\xa6pp") != NULL);
    CHECK_EQ_INT(e.line, 3);
    pl_error_set(&e, PL_EIO, "error: writing '%s' failed: %s", path, "No space left on device");
    CHECK(ends(e.msg, "ppp' failed: No space left on device"));
    pl_error_stage(&e, "save", 4);
    CHECK(strncmp(e.msg, "error: stage 'save', batch 4: writing 'ppp", 42) == 0);
    CHECK(ends(e.msg, "No space left on device"));
    pl_error_prefix(&e, "sink 'save'");
    CHECK(strncmp(e.msg, "sink 'save': error: stage", 25) == 0);
    CHECK(ends(e.msg, "No space left on device"));
}

int main(void)
{
    test_name_str();
    test_name_short();
    test_cut_middle_and_count();
    test_error_keeps_reason();
    PL_TEST_DONE();
}
