/*
 * Tests of the messages and of the checking mode of the tape.
 *
 * Messages: each names the function once (a message composed from a rule's message does
 * not repeat the rule's name) and counts agree with their nouns ("sin takes 1 argument").
 * The exact text of a few is checked, as the user reads it.
 *
 * Checking mode (cr_tape_set_check_finite, CR_TAPE_CHECK_FINITE, CR_CTX_CHECK_FINITE): the
 * first operation that makes a non-finite value from finite inputs stops the recording with
 * CR_ENONFINITE and a message naming the operation, its inputs and the labels pushed with
 * cr_tape_push_label(); a non-finite value from a non-finite input is not reported; with
 * the mode off nothing is checked; and gradients recorded in the mode are those of the
 * function (central differences).
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>

#define CR_TEST_OWN_FIXTURE
#include <chainrules/tape_inline.h>

#include "test_util.h"

typedef struct fixture {
    cr_ctx *ctx;
    cr_tape *t;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL || cr_ctx_new(NULL, &f->ctx) != CR_OK ||
        cr_tape_new(f->ctx, NULL, &f->t) != CR_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    cr_tape_free(f->t);
    cr_ctx_free(f->ctx);
    free(f);
    return 0;
}

/* The tape's status is want and its message is exactly msg. */
static void assert_failed_with_(cr_tape *t, cr_status want, const char *msg, const char *file,
                                int line)
{
    if (cr_tape_status(t) != want || strcmp(cr_tape_errmsg(t), msg) != 0) {
        print_error("tape: %s \"%s\"\n  expected %s \"%s\"\n", cr_status_name(cr_tape_status(t)),
                    cr_tape_errmsg(t), cr_status_name(want), msg);
        _fail(file, line);
    }
}
#define assert_failed_with(t, want, msg) assert_failed_with_((t), (want), (msg), __FILE__, __LINE__)

/* How many times name occurs in msg as a word. */
static int occurrences(const char *msg, const char *name)
{
    int k = 0;
    size_t n = strlen(name);
    for (const char *p = strstr(msg, name); p != NULL; p = strstr(p + n, name)) {
        bool before = p == msg || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        bool after = !(isalnum((unsigned char)p[n]) || p[n] == '_');
        k += before && after;
    }
    return k;
}

/* ---- Messages ----------------------------------------------------------------------------- */

static void test_message_plurals(void **state)
{
    fixture *f = *state;
    cr_var x = cr_tape_input(f->t, 1.0), two[2] = {x, x};
    cr_var y = cr_tape_call1(f->t, &cr_fn_sin, two, 2);
    assert_true(isnan(y.v));
    assert_failed_with(f->t, CR_EINVAL, "sin takes 1 argument, 2 given");
    /* The context has the same message. */
    assert_string_equal(cr_ctx_errmsg(f->ctx), "sin takes 1 argument, 2 given");

    cr_tape_reset(f->t);
    x = cr_tape_input(f->t, 1.0);
    cr_tape_call1(f->t, &cr_fn_atan2, &x, 1);
    assert_failed_with(f->t, CR_EINVAL, "atan2 takes 2 arguments, 1 given");

    cr_tape_reset(f->t);
    double d[3] = {1, 2, 3};
    cr_array A = cr_array_vector(d, 3);
    cr_avar a = cr_tape_array_input(f->t, &A);
    cr_targ args[2] = {cr_targ_arr(a), cr_targ_value(cr_value_i64(2))}, out;
    assert_int_equal(cr_tape_acall(f->t, &cr_fn_sum, args, 2, &out), CR_EINVAL);
    assert_failed_with(f->t, CR_EINVAL,
                       "sum: dimension 2 out of range for an array of 1 dimension (dimensions "
                       "count from 0)");
}

static void test_message_names_function_once(void **state)
{
    fixture *f = *state;
    double d[3] = {1, 2, 3};
    cr_array A = cr_array_vector(d, 3);
    /* broadcast(logsumexp, x): logsumexp refuses the scalar element; the message is the
     * broadcast's, and logsumexp's own message follows without its name again. */
    cr_avar a = cr_tape_array_input(f->t, &A);
    cr_targ args[2] = {cr_targ_value(cr_fn_logsumexp), cr_targ_arr(a)}, out;
    assert_int_equal(cr_tape_acall(f->t, &cr_fn_broadcast, args, 2, &out), CR_EINVAL);
    assert_failed_with(f->t, CR_EINVAL,
                       "broadcast: logsumexp failed at element 0: argument 1 must be an array");
    assert_int_equal(occurrences(cr_tape_errmsg(f->t), "broadcast"), 1);
    assert_int_equal(occurrences(cr_tape_errmsg(f->t), "logsumexp"), 1);

    /* A reduction over a dimension the array does not have. */
    cr_tape_reset(f->t);
    a = cr_tape_array_input(f->t, &A);
    cr_targ args2[2] = {cr_targ_arr(a), cr_targ_value(cr_value_i64(5))};
    assert_int_equal(cr_tape_acall(f->t, &cr_fn_logsumexp, args2, 2, &out), CR_EINVAL);
    assert_failed_with(f->t, CR_EINVAL,
                       "logsumexp: dimension 5 out of range for an array of 1 dimension "
                       "(dimensions count from 0)");
    assert_int_equal(occurrences(cr_tape_errmsg(f->t), "logsumexp"), 1);
}

/* ---- Checking mode ------------------------------------------------------------------------ */

static void test_check_off_by_default(void **state)
{
    fixture *f = *state;
    assert_false(cr_tape_check_finite(f->t));
    cr_var x = cr_tape_input(f->t, -1.0);
    cr_var y = cr_log(f->t, x);
    assert_true(isnan(y.v));
    assert_int_equal(cr_tape_status(f->t), CR_OK);
}

static void test_check_names_operation_inputs_and_labels(void **state)
{
    fixture *f = *state;
    cr_tape_set_check_finite(f->t, true);
    assert_true(cr_tape_check_finite(f->t));
    cr_tape_push_label(f->t, "loss");
    cr_tape_push_label(f->t, "softclip");
    cr_var x = cr_tape_input(f->t, -1.0);
    cr_var u = cr_mul(f->t, x, x); /* 1: finite, recorded */
    assert_int_equal(cr_tape_status(f->t), CR_OK);
    cr_var y = cr_log(f->t, cr_neg(f->t, u));
    assert_true(isnan(y.v));
    assert_failed_with(f->t, CR_ENONFINITE, "non-finite value: log(-1) = nan (in loss > softclip)");
    assert_string_equal(cr_ctx_errmsg(f->ctx), cr_tape_errmsg(f->t));
    /* Sticky: the next operations do nothing. */
    cr_var z = cr_add(f->t, x, x);
    assert_true(isnan(z.v));
    assert_int_equal(cr_tape_status(f->t), CR_ENONFINITE);

    /* Without labels, after a reset (which pops them), on the inline arithmetic. */
    cr_tape_reset(f->t);
    cr_var a = cr_tape_input(f->t, 1.0), b = cr_tape_input(f->t, 0.0);
    cr_div(f->t, a, b);
    assert_failed_with(f->t, CR_ENONFINITE, "non-finite value: 1 / 0 = inf");
}

static void test_check_pop_and_depth(void **state)
{
    fixture *f = *state;
    cr_tape_set_check_finite(f->t, true);
    cr_tape_push_label(f->t, "outer");
    cr_tape_push_label(f->t, "inner");
    cr_tape_pop_label(f->t);
    cr_var x = cr_tape_input(f->t, 0.0);
    cr_log(f->t, x);
    assert_failed_with(f->t, CR_ENONFINITE, "non-finite value: log(0) = -inf (in outer)");

    /* More labels than kept: the first ones, then how many more. */
    cr_tape_reset(f->t);
    static const char *names[] = {"f0",  "f1",  "f2",  "f3",  "f4",  "f5",  "f6",
                                  "f7",  "f8",  "f9",  "f10", "f11", "f12", "f13",
                                  "f14", "f15", "f16", "f17", "f18"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        cr_tape_push_label(f->t, names[i]);
    cr_tape_push_label(f->t, NULL);
    x = cr_tape_input(f->t, 710.0);
    cr_exp(f->t, x);
    assert_failed_with(f->t, CR_ENONFINITE,
                       "non-finite value: exp(710) = inf (in f0 > f1 > f2 > f3 > f4 > f5 > f6 > "
                       "f7 > f8 > f9 > f10 > f11 > f12 > f13 > f14 > f15 > 4 more)");
    /* Popping more than was pushed does nothing. */
    cr_tape_reset(f->t);
    cr_tape_pop_label(f->t);
    cr_tape_push_label(f->t, NULL);
    x = cr_tape_input(f->t, 0.0);
    cr_tape_call1(f->t, &cr_fn_pow, (cr_var[]){x, cr_const(-1.0)}, 2);
    assert_failed_with(f->t, CR_ENONFINITE, "non-finite value: pow(0, -1) = inf (in ?)");
}

static void test_check_not_born_here(void **state)
{
    fixture *f = *state;
    cr_tape_set_check_finite(f->t, true);
    /* Non-finite inputs: the value was not born in these operations. */
    cr_var x = cr_tape_input(f->t, INFINITY), n = cr_tape_input(f->t, NAN);
    cr_var y = cr_exp(f->t, x);
    cr_var z = cr_add(f->t, n, cr_const(1.0));
    cr_var w = cr_tape_call1(f->t, &cr_fn_hypot, (cr_var[]){x, z}, 2);
    assert_true(isinf(y.v) && isnan(z.v) && !isfinite(w.v));
    assert_int_equal(cr_tape_status(f->t), CR_OK);
    /* Constants only are checked too. */
    cr_var c = cr_sqrt(f->t, cr_const(-4.0));
    assert_true(isnan(c.v));
    assert_failed_with(f->t, CR_ENONFINITE, "non-finite value: sqrt(-4) = nan");
    /* Turned off: nothing is checked any more. */
    cr_tape_reset(f->t);
    cr_tape_set_check_finite(f->t, false);
    x = cr_tape_input(f->t, 0.0);
    cr_log(f->t, x);
    assert_int_equal(cr_tape_status(f->t), CR_OK);
}

static void test_check_arrays(void **state)
{
    fixture *f = *state;
    cr_tape_set_check_finite(f->t, true);
    cr_tape_push_label(f->t, "model");
    double d[2] = {-1.0, 2.0};
    cr_array A = cr_array_vector(d, 2);
    cr_avar a = cr_tape_array_input(f->t, &A);
    cr_av_broadcast1(f->t, &cr_fn_log, cr_targ_arr(a));
    assert_failed_with(f->t, CR_ENONFINITE,
                       "non-finite value: broadcast(log, [-1, 2] (2 elements)) = "
                       "[nan, 0.6931471805599453] (2 elements), element 0 is nan (in model)");
#ifdef CR_HAVE_LAPACKE
    /* A tuple: the singular values of a matrix of finite elements overflow. */
    cr_tape_reset(f->t);
    double m[4] = {1e308, 1e308, 1e308, 1e308};
    cr_array M;
    assert_int_equal(cr_array_view_init(&M, m, CR_DT_F64, 2, (size_t[]){2, 2}, NULL), CR_OK);
    cr_targ arg = cr_targ_arr(cr_tape_array_input(f->t, &M)), usv[3];
    assert_int_equal(cr_tape_acall_n(f->t, &cr_fn_svd, &arg, 1, usv, 3), CR_ENONFINITE);
    assert_failed_with(f->t, CR_ENONFINITE,
                       "non-finite value: svd([1e+308, 1e+308, 1e+308, 1e+308] (4 elements)) = "
                       "[inf, 0] (2 elements) (result 2), element 0 is inf");
#endif
    /* Finite results, and a non-finite one from a non-finite input: no failure. */
    cr_tape_reset(f->t);
    double e[3] = {1.0, INFINITY, 3.0};
    cr_array B = cr_array_vector(e, 3);
    cr_avar b = cr_tape_array_input(f->t, &B);
    cr_var s = cr_av_sum(f->t, cr_av_broadcast1(f->t, &cr_fn_exp, cr_targ_arr(b)));
    assert_true(isinf(s.v));
    assert_int_equal(cr_tape_status(f->t), CR_OK);
}

/* A recording cursor records through the checked operations too. */
static void test_check_cursor(void **state)
{
    fixture *f = *state;
    cr_tape_set_check_finite(f->t, true);
    cr_var a = cr_tape_input(f->t, 2.0), b = cr_tape_input(f->t, 0.0);
    cr_rec r;
    cr_rec_open(&r, f->t);
    cr_var c = cr_rec_mul(&r, a, a);
    cr_var d = cr_rec_div(&r, c, b);
    cr_rec_close(&r);
    ASSERT_DBL(c.v, 4.0);
    assert_true(isnan(d.v));
    assert_failed_with(f->t, CR_ENONFINITE, "non-finite value: 4 / 0 = inf");
}

/* The tape flag, the context flag and a second-order tape. */
static void test_check_flags(void **state)
{
    (void)state;
    cr_ctx *ctx;
    assert_int_equal(cr_ctx_new(NULL, &ctx), CR_OK);
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = CR_TAPE_CHECK_FINITE};
    cr_tape *t;
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    assert_true(cr_tape_check_finite(t));
    cr_var x = cr_tape_input(t, -2.0);
    cr_tape_call1(t, &cr_fn_log1p, &x, 1);
    assert_failed_with(t, CR_ENONFINITE, "non-finite value: log1p(-2) = nan");
    cr_tape_free(t);

    tp.flags = CR_TAPE_CHECK_FINITE | CR_TAPE_SECOND_ORDER;
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    x = cr_tape_input(t, 0.0);
    cr_var y = cr_tape_input(t, 1.0);
    cr_div(t, y, x);
    assert_failed_with(t, CR_ENONFINITE, "non-finite value: 1 / 0 = inf");
    cr_tape_free(t);
    cr_ctx_free(ctx);

    /* Every tape of a checking context. */
    cr_ctx_params cp = {.struct_size = sizeof cp, .checks = CR_CTX_CHECK_FINITE};
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    assert_true(cr_tape_check_finite(t));
    x = cr_tape_input(t, 1e308);
    cr_mul(t, x, x);
    assert_failed_with(t, CR_ENONFINITE, "non-finite value: 1e+308 * 1e+308 = inf");
    cr_tape_free(t);
    cr_ctx_free(ctx);

    /* Unknown bits are still refused. */
    cp.checks = 8;
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_EINVAL);
    /* NULL tapes. */
    cr_tape_set_check_finite(NULL, true);
    assert_false(cr_tape_check_finite(NULL));
    cr_tape_push_label(NULL, "x");
    cr_tape_pop_label(NULL);
}

/* A function recorded in the checking mode has the gradient of central differences. */
static double g_c(const double *x)
{
    return log(x[0] * x[0] + 1.0) * sin(x[1]) / (1.0 + exp(-x[0] * x[1])) + atan2(x[1], x[0]);
}

static void test_check_gradient_unchanged(void **state)
{
    fixture *f = *state;
    cr_tape_set_check_finite(f->t, true);
    const double p[2] = {0.7, -1.3};
    cr_var x[2];
    assert_int_equal(cr_tape_inputs(f->t, p, 2, x), CR_OK);
    cr_tape_push_label(f->t, "g");
    cr_var num = cr_mul(f->t, cr_log(f->t, cr_add(f->t, cr_mul(f->t, x[0], x[0]), cr_const(1.0))),
                        cr_sin(f->t, x[1]));
    cr_var den = cr_add(f->t, cr_const(1.0), cr_exp(f->t, cr_neg(f->t, cr_mul(f->t, x[0], x[1]))));
    cr_var at = cr_tape_call1(f->t, &cr_fn_atan2, (cr_var[]){x[1], x[0]}, 2);
    cr_var y = cr_add(f->t, cr_div(f->t, num, den), at);
    cr_tape_pop_label(f->t);
    assert_int_equal(cr_tape_status(f->t), CR_OK);
    assert_close(y.v, g_c(p), 1e-15);
    double g[2];
    assert_int_equal(cr_tape_gradient(f->t, y, x, 2, g), CR_OK);
    for (int i = 0; i < 2; i++) {
        double h = 1e-6, q[2] = {p[0], p[1]};
        q[i] = p[i] + h;
        double up = g_c(q);
        q[i] = p[i] - h;
        double down = g_c(q);
        assert_close(g[i], (up - down) / (2 * h), 1e-8);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_message_plurals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_message_names_function_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_off_by_default, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_names_operation_inputs_and_labels, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_check_pop_and_depth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_not_born_here, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_arrays, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_cursor, setup, teardown),
        cmocka_unit_test(test_check_flags),
        cmocka_unit_test_setup_teardown(test_check_gradient_unchanged, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
