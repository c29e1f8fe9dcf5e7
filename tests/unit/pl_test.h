/* pl_test: the few macros the C unit tests use. A failed check prints file:line and the
 * expression, and the test exits 1 at the end; PL_TEST_SKIP exits 77 (CTest SKIP_RETURN_CODE). */
#ifndef PL_TEST_H
#define PL_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int pl_test_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            pl_test_failures++;                                                                    \
        }                                                                                          \
    } while (0)
#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long pl_a = (long long)(a), pl_b = (long long)(b);                                    \
        if (pl_a != pl_b) {                                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", __FILE__, __LINE__,  \
                    #a, #b, pl_a, pl_b);                                                           \
            pl_test_failures++;                                                                    \
        }                                                                                          \
    } while (0)
#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *pl_a = (a), *pl_b = (b);                                                       \
        if (!pl_a || !pl_b || strcmp(pl_a, pl_b) != 0) {                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s\n  got:  %s\n  want: %s\n", __FILE__,   \
                    __LINE__, #a, #b, pl_a ? pl_a : "(null)", pl_b ? pl_b : "(null)");             \
            pl_test_failures++;                                                                    \
        }                                                                                          \
    } while (0)
#define PL_TEST_SKIP(why)                                                                          \
    do {                                                                                           \
        printf("SKIP: %s\n", why);                                                                 \
        exit(77);                                                                                  \
    } while (0)
#define PL_TEST_DONE()                                                                             \
    do {                                                                                           \
        if (pl_test_failures) fprintf(stderr, "%d check(s) failed\n", pl_test_failures);           \
        return pl_test_failures ? 1 : 0;                                                           \
    } while (0)

#endif
