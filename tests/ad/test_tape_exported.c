/*
 * The tape's arithmetic without the opt-in header chainrules/tape_inline.h: cr_add ...
 * cr_neg and the cursor operations are the exported functions (no macro, no inline record
 * writer, no dependence on the record format), and they record what the inline path
 * records: the gradient of Rosenbrock's function, recorded on the tape and through a
 * cursor, against its analytic gradient and against central differences, and the same
 * records (counted by cr_tape_stats_get) on both paths.
 */
#include <math.h>

#include "test_rosen.h"
#include "test_util.h"

#if defined(cr_add) || defined(cr_sub) || defined(cr_mul) || defined(cr_div) || defined(cr_neg) || \
    defined(cr_rec_add) || defined(cr_rec_open)
#error "the umbrella header made the tape's arithmetic inline: chainrules/tape_inline.h is opt-in"
#endif
#if defined(CR_TAPE_INLINE_H) || defined(CR__TAPE_K_UNARY)
#error "the umbrella header pulled in the record format of chainrules/tape_inline.h"
#endif

#define N 6

/* Rosenbrock through a recording cursor, every arithmetic operation and one call. */
static cr_status rosen_cursor(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    cr_rec r;
    cr_rec_open(&r, t);
    cr_var s = cr_const(0.0);
    for (size_t i = 0; i + 1 < n; i++) {
        cr_var a = cr_rec_sub(&r, x[i + 1], cr_rec_mul(&r, x[i], x[i]));
        cr_var b = cr_rec_neg(&r, cr_rec_sub(&r, x[i], cr_const(1.0)));
        cr_var aa = cr_rec_div(&r, cr_rec_mul(&r, a, a), cr_const(0.01));
        s = cr_rec_add(&r, s, cr_rec_add(&r, aa, cr_rec_call2(&r, cr_mul, b, b)));
    }
    cr_rec_close(&r);
    y[0] = s;
    return cr_tape_status(t);
}

static const double k_x[N] = {-1.2, 1.0, 0.7, -0.4, 1.9, 0.3};

/* The gradient by central differences of rosen_value. */
static void fd_grad(double *g)
{
    double x[N];
    for (size_t j = 0; j < N; j++)
        x[j] = k_x[j];
    for (size_t j = 0; j < N; j++) {
        double h = 1e-6 * fmax(1.0, fabs(x[j])), x0 = x[j];
        x[j] = x0 + h;
        double fp = rosen_value(x, N);
        x[j] = x0 - h;
        double fm = rosen_value(x, N);
        x[j] = x0;
        g[j] = (fp - fm) / (2.0 * h);
    }
}

static void check_grad(cr_ctx *ctx, cr_ad_fn f, cr_tape_stats *stats)
{
    cr_tape *t = NULL;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    double y = 0.0, g[N], want[N], fd[N];
    assert_int_equal(cr_tape_value_and_gradient(t, f, NULL, k_x, N, &y, g), CR_OK);
    assert_true(fabs(y - rosen_value(k_x, N)) <= 1e-12 * fabs(y));
    rosen_grad(k_x, N, want);
    fd_grad(fd);
    for (size_t j = 0; j < N; j++) {
        assert_true(fabs(g[j] - want[j]) <= 1e-12 * fmax(1.0, fabs(want[j])));
        assert_true(fabs(g[j] - fd[j]) <= 1e-6 * fmax(1.0, fabs(fd[j])));
    }
    assert_int_equal(cr_tape_stats_get(t, stats), CR_OK);
    cr_tape_free(t);
}

static void test_exported_operations(void **state)
{
    fixture *fx = *state;
    cr_tape_stats on_tape, by_cursor;
    check_grad(fx->ctx, rosen_t, &on_tape);
    check_grad(fx->ctx, rosen_cursor, &by_cursor);
    /* The exported functions pick the compact kinds as the inline path does: Rosenbrock's
     * loop takes 12 bytes an operation on a first-order tape (docs/internals.md). */
    assert_int_equal(on_tape.ninputs, N);
    assert_true(on_tape.nrecords > N);
    assert_true(on_tape.record_bytes <= 12 * (on_tape.nrecords - N) + 8);
    assert_int_equal(by_cursor.ninputs, N);
}

/* A failed tape gives NaN constants through the exported functions too. */
static void test_exported_failed_tape(void **state)
{
    fixture *fx = *state;
    cr_ctx *ctx = fx->ctx;
    cr_tape *t = NULL;
    assert_int_equal(cr_tape_new(ctx, NULL, &t), CR_OK);
    cr_var x = cr_tape_input(t, 2.0);
    cr_tape *other = NULL;
    assert_int_equal(cr_tape_new(ctx, NULL, &other), CR_OK);
    cr_var z = cr_add(other, x, x); /* x is t's: refused */
    assert_true(isnan(z.v));
    assert_int_equal(cr_tape_status(other), CR_ETAPE);
    cr_var w = cr_mul(other, cr_const(2.0), cr_const(3.0));
    assert_true(isnan(w.v)); /* sticky */
    cr_tape_free(other);
    cr_tape_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exported_operations, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_exported_failed_tape, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
