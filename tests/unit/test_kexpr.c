/* test_kexpr: the grid/block/argument expression evaluator (stages/kernel/pl_kexpr.c): values,
 * exact division under ceil/floor, precedence, and errors with the column where the text goes
 * wrong. */
#include "pl_kexpr.h"
#include "pl_test.h"

static pl_spec *spec_with_x(void)
{
    pl_spec *s = NULL;
    pl_error e;
    pl_spec_new("t.yaml", &s, &e);
    pl_buffer *b = pl_spec_add_buffer(s, "x_dev", (pl_pos){"t.yaml", 1, 1});
    b->where = PL_DEVICE;
    b->dtype = PL_F32;
    b->rank = 1;
    b->shape[0] = 1000;
    b->count = 1000;
    b->bytes = 4000;
    return s;
}

static int64_t eval_ok(const pl_spec *s, const char *text)
{
    int64_t v = -999;
    pl_error e;
    pl_error_clear(&e);
    pl_status st = pl_kexpr_eval(s, "k", "grid", text, (pl_pos){"t.yaml", 3, 10}, &v, &e);
    if (st != PL_OK) fprintf(stderr, "'%s': %s\n", text, e.msg);
    CHECK_EQ_INT(st, PL_OK);
    return v;
}

static void eval_bad(const pl_spec *s, const char *text, const char *want)
{
    int64_t v;
    pl_error e;
    pl_error_clear(&e);
    CHECK_EQ_INT(pl_kexpr_eval(s, "k", "grid", text, (pl_pos){"t.yaml", 3, 10}, &v, &e), PL_EINPUT);
    CHECK_STR(e.msg, want);
}

int main(void)
{
    pl_spec *s = spec_with_x();
    CHECK_EQ_INT(eval_ok(s, "256"), 256);
    CHECK_EQ_INT(eval_ok(s, "ceil(elements(x_dev) / 256)"), 4);
    CHECK_EQ_INT(eval_ok(s, "floor(elements(x_dev) / 256)"), 3);
    CHECK_EQ_INT(eval_ok(s, "bytes(x_dev) / 4"), 1000);
    CHECK_EQ_INT(eval_ok(s, "1 + 2 * 3"), 7);
    CHECK_EQ_INT(eval_ok(s, "(1 + 2) * 3"), 9);
    CHECK_EQ_INT(eval_ok(s, "10 - 4 - 3"), 3);
    CHECK_EQ_INT(eval_ok(s, "17 % 5 + -2"), 0);
    CHECK_EQ_INT(eval_ok(s, "min(elements(x_dev), 65535) + max(1, 2)"), 1002);
    CHECK_EQ_INT(eval_ok(s, "  ceil( elements( x_dev ) / 3 )  "), 334);
    eval_bad(s, "ceil(elements(x_dev) / 256",
             "t.yaml:3:36: error: stage 'k': grid: expected ')' to close ceil( (in 'ceil(elements("
             "x_dev) / 256')");
    eval_bad(s, "elements(y)",
             "t.yaml:3:19: error: stage 'k': grid: unknown buffer 'y' (in 'elements(y)')");
    eval_bad(s, "x_dev * 2",
             "t.yaml:3:10: error: stage 'k': grid: 'x_dev' is a buffer; write elements(x_dev) or "
             "bytes(x_dev) for its size (in 'x_dev * 2')");
    eval_bad(s, "4 / (2 - 2)",
             "t.yaml:3:12: error: stage 'k': grid: division by zero (in '4 / (2 - 2)')");
    eval_bad(s, "1.5",
             "t.yaml:3:10: error: stage 'k': grid: only integer literals are allowed "
             "here (in '1.5')");
    eval_bad(s, "2 3",
             "t.yaml:3:12: error: stage 'k': grid: unexpected '3' after the expression "
             "(in '2 3')");
    eval_bad(s, "min(1)",
             "t.yaml:3:15: error: stage 'k': grid: min() takes two arguments: min(a, b) (in "
             "'min(1)')");
    eval_bad(s, "", "t.yaml:3:10: error: stage 'k': grid: expression ends too early (in '')");
    eval_bad(s, "7 / 2",
             "t.yaml:3:10: error: stage 'k': grid: evaluates to 3.5, not a whole number; round it "
             "with ceil() or floor() (in '7 / 2')");
    pl_spec_free(s);
    PL_TEST_DONE();
}
